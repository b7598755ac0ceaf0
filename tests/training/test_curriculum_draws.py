"""``experiments/curriculum_draws.py`` reads each run's logged tasks by phase and the start's success on them:
phase means, repeats of earlier phases, first draws, equal task sets, and the pairing against the uniform arm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.curriculum_draws import main, measure
from milepost.errors import InputError


def _run(work: Path, name: str, iterations: list[list[str]]) -> None:
    run = work / name
    run.mkdir(parents=True)
    rows = [{"iteration": 0, "phase": "warmup", "tasks": ["w"]}]  # the critics' warm-up: left out
    rows += [{"iteration": i + 1, "phase": "L", "tasks": tasks} for i, tasks in enumerate(iterations)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _start(work: Path, key: str, seed: int, success: dict[str, list[bool]]) -> None:
    folder = work / "trained-tasks" / f"start-s{seed}-{key}"
    folder.mkdir(parents=True)
    eps = [{"task_id": t, "success": ok} for t, outcomes in success.items() for ok in outcomes]
    (folder / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    # Start success: a 0%, b 50%, c 100%, d 25%. The curriculum arm redraws a (failed) in phase 2.
    _run(tmp_path, "cur-s0", [["a", "b"], ["c"], ["a", "d"], ["b"]])
    _run(tmp_path, "uni-s0", [["c", "d"], ["c"], ["d", "b"], ["a"]])
    start = {"a": [False] * 4, "b": [True, False] * 2, "c": [True] * 4, "d": [True, False, False, False]}
    _start(tmp_path, "one", 0, {t: start[t] for t in "abcd"})
    _start(tmp_path, "two", 0, {t: start[t] for t in "bcd"})  # another run's tasks: not these runs'
    return tmp_path


def test_phases_repeats_and_pairing(work: Path) -> None:
    r = measure(work, ["cur", "uni"], [0, 1], "uni", phase_iterations=2)
    cur, uni = r["runs"]["cur"][0], r["runs"]["uni"][0]
    assert [p["start_success"] for p in cur["phases"]] == pytest.approx([0.5, (0 + 0.25 + 0.5) / 3])
    assert [p["repeats"] for p in cur["phases"]] == [0, 2]  # a and b again
    assert cur["phases"][1]["start_success_first"] == pytest.approx(0.25)  # d, the only first draw
    assert [p["start_success"] for p in uni["phases"]] == pytest.approx([0.75, 0.25])
    assert [p["repeats"] for p in uni["phases"]] == [0, 1]  # c twice in phase 1 repeats no earlier phase
    assert cur["same_as_reference"] == 4 and uni["same_as_reference"] == 1  # iteration 2: {c} both
    assert cur["distinct"] == 4
    phase1 = r["paired_minus_uniform"]["cur"][0]["start_success"]
    assert phase1["per_seed"] == pytest.approx([0.5 - 0.75])
    assert r["missing"] == ["cur-s1", "uni-s1"]
    with pytest.raises(InputError, match="none of the runs cur-s5, uni-s5 exists"):
        measure(work, ["cur", "uni"], [5], "uni", phase_iterations=2)


def test_cli_writes_the_report_and_refuses_bad_input(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "report"
    args = ["--work", str(work), "--arms", "cur,uni", "--seeds", "0", "--uniform", "uni", "--phase-iterations", "2"]
    assert main([*args, "--out", str(out)]) == 0
    text = out.with_suffix(".md").read_text()
    assert "| cur | 1 | 4.0 | 50.0 (50.0) / 0 of 3 |" in text and out.with_suffix(".png").stat().st_size > 0
    assert json.loads(out.with_suffix(".json").read_text())["uniform"] == "uni"
    capsys.readouterr()
    assert main([*args[:-4], "--uniform", "other", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "curriculum_draws: --uniform other is not one of --arms"
    (work / "trained-tasks" / "start-s0-one").rename(work / "trained-tasks" / "moved")
    assert main([*args, "--out", str(out)]) == 2
    assert "no start evaluation of seed 0 on this run's 4 tasks" in capsys.readouterr().err
