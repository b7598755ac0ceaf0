"""``milepost horizon`` end to end on a small suite (a labelled test fixture: the real generators, fewer tasks),
``milepost horizon compare``, the suites' pinned content hashes and bad input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.errors import InputError
from milepost.horizon import suites as horizon_suite
from milepost.horizon.suites import Suite, SuitePart, build_suite, get_suite, suite_hash

# Test fixture: a micro suite (4x4 Sudoku, 3 tasks per level, H_max 10, 2 samples) so the CLI runs in seconds.
MICRO = Suite("micro", 1, (SuitePart("sudoku4", "sudoku", 4, "S1-S5", 3, 0, 10, 2),), content_hash="")


@pytest.fixture
def micro(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(horizon_suite.SUITES, "micro", MICRO)


@pytest.fixture
def two_runs(tmp_path: Path, micro: None, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    for out, policy in ((a, "noisy-oracle:0.9:format"), (b, "noisy-oracle:0.5:format")):
        assert (
            main(
                ["horizon", "--policy", policy, "--suite", "micro", "--out", str(out), "--boot", "200", "--no-progress"]
            )
            == 0
        )
    capsys.readouterr()
    return a, b


def test_horizon_writes_markdown_png_and_json_with_the_suite(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    for out in (a, b):
        assert (out / "horizon.png").stat().st_size > 10_000
        result = json.loads((out / "horizon.json").read_text())
        report = (out / "horizon.md").read_text()
        assert result["suite"]["name"] == "micro" and result["suite"]["version"] == 1
        assert result["suite"]["hash"][:16] in report and "micro v1" in report
        assert sum(t["trials"] for t in result["tasks"]) == 2 * result["suite"]["played"]
        assert "50% horizon" in report and "failure taxonomy" in report
        assert set(result["fits"]) == {"sudoku"}  # per environment: no pooled "all" fit
        assert set(result["fits"]["sudoku"]["logistic"]["intervals"]) == {"h50", "h80"}
        # the episodes came from the evaluation runner's own folders
        assert (out / "runs" / "sudoku4" / "episodes.jsonl").exists()
    ha = json.loads((a / "horizon.json").read_text())["fits"]["sudoku"]["logistic"]["horizons"]["h50"]
    hb = json.loads((b / "horizon.json").read_text())["fits"]["sudoku"]["logistic"]["horizons"]["h50"]
    assert ha is None or ha > hb  # a more reliable oracle goes further (None: beyond the suite)


def test_rerun_resumes_without_playing_again(two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = two_runs
    before = (a / "runs" / "sudoku4" / "episodes.jsonl").read_text()
    argv = ["horizon", "--policy", "noisy-oracle:0.9:format", "--suite", "micro", "--out", str(a), "--boot", "200"]
    assert main([*argv, "--no-progress"]) == 0
    assert (a / "runs" / "sudoku4" / "episodes.jsonl").read_text() == before


def test_compare_draws_both_and_judges_the_difference(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_runs
    out = tmp_path / "cmp"
    assert (
        main(["horizon", "compare", str(a), str(b), "--labels", "P=0.9,P=0.5", "--out", str(out), "--boot", "200"]) == 0
    )
    text = capsys.readouterr().out
    assert "P=0.9 vs P=0.5" in text
    assert (out / "horizon_compare.png").stat().st_size > 10_000
    pairs = json.loads((out / "horizon_compare.json").read_text())["pairs"]
    # one environment, two levels: the 50% and the 80% horizons are both judged
    assert [(p["env"], p["level"]) for p in pairs] == [("sudoku", 0.5), ("sudoku", 0.8)] and pairs[0]["a"] == "P=0.9"


def test_compare_refuses_reports_of_different_suites(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_runs
    result = json.loads((b / "horizon.json").read_text())
    result["suite"]["hash"] = "0" * 64
    (b / "horizon.json").write_text(json.dumps(result))
    assert main(["horizon", "compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 2
    assert "not comparable" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["horizon", "--suite", "micro", "--out", "X"], "--policy and --out are required"),
        (["horizon", "--policy", "oracle", "--suite", "huge", "--out", "X"], "unknown suite 'huge'"),
        (["horizon", "--policy", "oracle", "--suite", "micro", "--out", "X", "--boot", "0"], "--boot must be >= 1"),
        (["horizon", "--policy", "bogus:x", "--suite", "micro", "--out", "OUT"], "error"),
        (["horizon", "compare", "NOPE1", "NOPE2", "--out", "X"], "no horizon.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, micro: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / a) if a in ("X", "OUT", "NOPE1", "NOPE2") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("milepost: error:") and message in err[0]


def test_the_tiny_suite_generates_to_its_pinned_hash(tmp_path: Path) -> None:
    suite = get_suite("tiny")
    manifest = build_suite(suite, tmp_path / "tiny")
    assert manifest["hash"] == suite.content_hash and manifest["pinned"]
    assert manifest["played"] + manifest["left_out"] == manifest["tasks"]


def test_a_changed_generator_is_refused(tmp_path: Path) -> None:
    suite = get_suite("tiny")
    tampered = Suite(suite.name, suite.version, suite.parts, content_hash="f" * 64)
    with pytest.raises(InputError, match="generators changed"):
        build_suite(tampered, tmp_path / "t")
    # the hash covers the budgets too, not only the tasks
    tasks: dict = {p.name: [] for p in suite.parts}
    longer = (dataclasses.replace(suite.parts[0], max_steps=99), *suite.parts[1:])
    assert suite_hash(suite, tasks) != suite_hash(dataclasses.replace(suite, parts=longer), tasks)


def test_a_backend_that_never_answers_is_an_infrastructure_failure_not_a_horizon(
    micro: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens on port 9: every episode ends as a backend error, which says nothing about the policy."""
    out = tmp_path / "down"
    policy = "openai:m@http://127.0.0.1:9/v1"
    argv = [
        "horizon",
        "--policy",
        policy,
        "--suite",
        "micro",
        "--out",
        str(out),
        "--max-retries",
        "0",
        "--timeout",
        "1",
    ]
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "every episode failed for infrastructure reasons" in err and "--retry-failed" in err
    rows = [json.loads(line) for line in (out / "runs" / "sudoku4" / "episodes.jsonl").read_text().splitlines()]
    assert rows and all(r["termination"] == "backend_error" for r in rows)
    assert not (out / "horizon.json").exists()
