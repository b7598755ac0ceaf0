"""The horizon paper's collapse signal (section 4.1): the share of answers cut at max_new_tokens, per iteration.

The agent loop records each turn's finish reason; ``rollout_stats`` logs the share of "length" turns beside
response length, format and invalid rates; ``milepost compare`` (and so the demo report) shows it per run.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.cli.main import main
from milepost.envs.sudoku import SudokuEnv, make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.training.trainer import rollout_stats
from milepost.types import Episode

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


def _episodes(max_new_tokens: int) -> list[Episode]:
    from milepost.backends.hf import HFBackend

    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        backend = HFBackend(SHIPPED)
    settings = AgentSettings(memory_k=0, temperature=0.8, max_new_tokens=max_new_tokens, batch_size=8)
    tasks = [make_task(*generate_easy(4, 4, 3, i), level="S1", split="test", seed=3, index=i) for i in range(4)]
    return run_episodes(
        lambda: SudokuEnv(size=4, max_steps=3, render="hints"),
        [Job(t, 0) for t in tasks],
        BackendPolicy(backend, settings),
        settings,
        seed=0,
        progress=False,
    )


def test_turns_cut_at_max_new_tokens_are_counted() -> None:
    import torch

    torch.set_num_threads(1)
    # The shipped model's answers run to ~20 tokens: 4 tokens cut every one of them, 48 none.
    cut = _episodes(4)
    assert all(t.finish_reason == "length" for ep in cut for t in ep.turns)
    assert rollout_stats(cut)["rollout/max_length"] == 1.0
    assert rollout_stats(cut)["rollout/format_errors"] == 1.0  # a cut answer never reaches its ACTION tag
    whole = _episodes(48)
    stats = rollout_stats(whole)
    assert stats["rollout/max_length"] == 0.0
    assert {t.finish_reason for ep in whole for t in ep.turns} == {"stop"}
    # The reason travels through episodes.jsonl.
    again = Episode.from_dict(json.loads(json.dumps(cut[0].to_dict())))
    assert again.turns[0].finish_reason == "length"


def test_the_share_is_per_turn(tmp_path: Path) -> None:
    eps = _episodes(48)[:2]
    turns = [t for ep in eps for t in ep.turns]
    turns[0].finish_reason = "length"
    assert rollout_stats(eps)["rollout/max_length"] == pytest.approx(1 / len(turns))


def test_compare_shows_the_collapse_signal_per_run(tmp_path: Path, capsys: Any) -> None:
    runs = []
    for name, shares in (("steady", [0.0, 0.0, 0.05, 0.0]), ("collapsing", [0.0, 0.1, 0.6, 0.9])):
        run = tmp_path / name
        run.mkdir()
        rows = [
            {"iteration": i, "rollout/success": 0.5, "rollout/max_length": s} for i, s in enumerate(shares, start=1)
        ]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(str(run))
    out = tmp_path / "cmp"
    assert main(["compare", *runs, "--out", str(out), "--log-level", "error"]) == 0
    text = (out / "comparison.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if "rollout/max_length" in line}
    # run | curve | points | first | last | mean of the last five | best (the lowest share)
    assert rows["collapsing"].split("|")[3:8] == [" 4 ", " 0.0 ", " 90.0 ", " 40.0 ", " 0.0 "]
    assert rows["steady"].split("|")[5].strip() == "0.0" and rows["steady"].split("|")[6].strip() == "1.2"
    assert (out / "max_length.png").is_file() and "max_length.png" in text
