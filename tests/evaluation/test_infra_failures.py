"""`milepost eval` against a real HTTP server that fails some requests: infrastructure failures are kept out of
the metrics, reported apart, end the command with exit 3, and ``--retry-failed`` replays exactly them. The
``openai`` backend's timeout, retries and backoff reach the client from the command line."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.io import read_jsonl
from milepost.serve.runner import BackgroundServer


class SudokuServer:
    """An OpenAI-compatible chat server that plays 4x4 Sudoku perfectly: it reads the grid from the prompt,
    finds the puzzle it belongs to and answers the first empty cell's digit. ``fail_next`` requests get a 500
    first; every request waits ``delay`` seconds."""

    def __init__(self, solutions: list[str]) -> None:
        self.solutions = solutions
        self.fail_next = 0
        self.delay = 0.0
        self.calls = 0
        self.lock = threading.Lock()

    def answer(self, prompt: str) -> str:
        current = prompt.rpartition("Current observation:")[2]
        rows = [line.split()[1:] for line in current.splitlines() if line[:1] == "r" and line[1:2].isdigit()]
        grid = "".join(c for row in rows for c in row if c != "|")
        solution = next(s for s in self.solutions if all(g in (".", d) for g, d in zip(grid, s, strict=True)))
        cell = grid.index(".")
        return f"REASON: only one digit fits. ACTION: value({solution[cell]}, r{cell // 4 + 1}c{cell % 4 + 1})"

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            with self.lock:
                self.calls += 1
                fail = self.fail_next > 0
                self.fail_next -= fail
            await asyncio.sleep(self.delay)
            if fail:
                return JSONResponse({"error": {"message": "upstream overloaded", "type": "x"}}, status_code=500)
            text = self.answer(body["messages"][-1]["content"])
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "finish_reason": "stop", "message": message, "logprobs": None}
            return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}

        return app


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, list[str]]:
    tasks = [make_task(*generate_easy(4, 6, 9, i + 6), level="S2", split="test", index=i) for i in range(2)]
    return write_dataset(tmp_path / "ds", {"train": [], "test": tasks}, {"seed": 9}), [
        t.payload["solution"] for t in tasks
    ]


@pytest.fixture
def server(dataset: tuple[Path, list[str]]) -> Iterator[tuple[SudokuServer, str]]:
    fake = SudokuServer(dataset[1])
    with BackgroundServer(fake.app()) as running:
        yield fake, running.base_url


def _eval(data: Path, url: str, out: Path, *extra: str) -> int:
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", f"openai:m@{url}", "--out", str(out)]
    argv += ["--n", "4", "--k", "1,4", "--batch-size", "8", "--no-progress", "--backoff-base", "0.01"]
    return main([*argv, "--backoff-max", "0.02", *extra])


def test_backend_failures_are_left_out_reported_and_retried(
    dataset: tuple[Path, list[str]], server: tuple[SudokuServer, str], tmp_path: Path, capsys: Any
) -> None:
    fake, url = server
    data = dataset[0]
    out = tmp_path / "run"
    fake.fail_next = 2  # with no retries, the first two requests end two episodes
    assert _eval(data, url, out, "--max-retries", "0") == 3
    err = capsys.readouterr().err
    assert "2 episode(s) failed for infrastructure reasons" in err and "--retry-failed" in err
    rows = list(read_jsonl(out / "episodes.jsonl"))
    failed = [r for r in rows if r["termination"] == "backend_error"]
    assert len(rows) == 8 and len(failed) == 2
    assert all("HTTP 500" in r["meta"]["error"] and "upstream overloaded" in r["meta"]["error"] for r in failed)
    metrics = json.loads((out / "metrics.json").read_text())
    (level,) = metrics["levels"]
    # The perfect player solves every episode it could play: 100%, not 6 / 8 = 75%.
    assert level["avg"]["value"] == 1.0 and level["pass_at"]["1"]["value"] == 1.0
    assert level["infra_failures"] == 2 and "backend_error" not in level["terminations"]
    assert metrics["meta"]["infra_failures"]["episodes"] == 2
    assert metrics["meta"]["infra_failures"]["by_level"] == {"S2": 2}
    report = (out / "report.md").read_text()
    assert "Infrastructure failures: 2 episode(s)" in report and "left out" in report

    # A plain rerun resumes: nothing is played again, the failures remain.
    calls = fake.calls
    assert _eval(data, url, out, "--max-retries", "0") == 3
    assert fake.calls == calls

    # --retry-failed plays exactly the two failed episodes again (6 turns each), with the same seeds.
    assert _eval(data, url, out, "--max-retries", "0", "--retry-failed") == 0
    assert fake.calls == calls + 2 * 6
    again = list(read_jsonl(out / "episodes.jsonl"))
    assert len(again) == 8 and all(r["termination"] == "solved" for r in again)
    key = sorted((r["task_id"], r["sample"], r["seed"]) for r in rows)
    assert sorted((r["task_id"], r["sample"], r["seed"]) for r in again) == key

    # ... and the run ends as if nothing had failed.
    clean = tmp_path / "clean"
    assert _eval(data, url, clean, "--max-retries", "0") == 0
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (out, clean))
    assert a["levels"] == b["levels"] and a["meta"]["infra_failures"]["episodes"] == 0
    assert "Infrastructure failures" not in (out / "report.md").read_text()


def test_a_task_without_valid_samples_is_left_out(
    dataset: tuple[Path, list[str]], server: tuple[SudokuServer, str], tmp_path: Path
) -> None:
    fake, url = server
    fake.fail_next = 1
    out = tmp_path / "run"
    assert _eval(dataset[0], url, out, "--max-retries", "0", "--n", "1", "--k", "1") == 3
    level = json.loads((out / "metrics.json").read_text())["levels"][0]
    assert level["tasks"] == 1 and level["tasks_left_out"] == 1 and level["avg"]["value"] == 1.0
    assert "1 task(s) have no valid sample" in (out / "report.md").read_text()


@pytest.mark.parametrize("retries", [0, 2])
def test_timeout_and_retries_reach_the_client(
    dataset: tuple[Path, list[str]], server: tuple[SudokuServer, str], tmp_path: Path, retries: int
) -> None:
    fake, url = server
    fake.delay = 1.0  # every answer stalls longer than --timeout
    out = tmp_path / "run"
    extra = ["--n", "1", "--k", "1", "--limit", "1", "--timeout", "0.2", "--max-retries", str(retries)]
    assert _eval(dataset[0], url, out, *extra) == 3
    assert fake.calls == retries + 1
    (row,) = read_jsonl(out / "episodes.jsonl")
    assert row["termination"] == "backend_error" and "timed out" in row["meta"]["error"]
    assert (f"{retries + 1} attempts" in row["meta"]["error"]) == (retries > 0)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "0"], "--timeout must be"),
        (["--max-retries", "-1"], "--max-retries must be"),
        (["--backoff-max", "0.001"], "--backoff-max must be"),
    ],
)
def test_bad_http_flags_are_one_line_errors(
    dataset: tuple[Path, list[str]], tmp_path: Path, capsys: Any, flags: list[str], message: str
) -> None:
    out = tmp_path / "run"
    assert _eval(dataset[0], "http://127.0.0.1:9/v1", out, *flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("milepost: error:") and message in err and err.count("\n") == 1
    assert not out.exists()
