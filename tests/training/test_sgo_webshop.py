"""experiments/sgo_webshop.py: each run's tag and command line, and the report's pairing of seeds from the per-run
result files (a seed run in one arm only is listed as missing, not paired)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import sgo_webshop


def _result(avg: float, failures: dict[str, int]) -> dict[str, object]:
    return {
        "eval": {
            "avg": {"value": avg, "lo": avg - 0.1, "hi": avg + 0.1},
            "step_accuracy": 0.5,
            "subgoal_fraction": 0.6,
            "tasks": 40,
            "n": 4,
            "failures": failures,
        },
        "times": {"sft": {"seconds": 1800.0}, "eval": {"seconds": 1200.0}},
    }


def test_tags_and_commands_name_arm_and_seed() -> None:
    assert sgo_webshop.tag("plain", 0) == "_t240"  # the plain seed-0 run is the committed SFT start
    assert sgo_webshop.tag("sgo", 2) == "_sgo_t240_s2"
    argv = sgo_webshop.run_argv("sgo", 1, "runs")
    assert argv[-1] == "--tag=_sgo_t240_s1"
    assert argv[argv.index("--agent") + 1] == "sgo" and argv[argv.index("--seed") + 1] == "1"


def test_report_pairs_seeds_present_in_both_arms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sgo_webshop, "RESULTS", tmp_path)
    runs = {
        ("plain", 0): _result(0.30, {"dead_end": 20, "stuck_midway": 8}),
        ("sgo", 0): _result(0.40, {"dead_end": 10, "stuck_midway": 2}),
        ("plain", 1): _result(0.20, {"dead_end": 30, "stuck_midway": 2}),
        ("sgo", 1): _result(0.35, {}),  # no failure: no stuck share, left out of that difference
        ("plain", 2): _result(0.25, {"dead_end": 5}),
    }
    for (arm, seed), r in runs.items():
        (tmp_path / f"webshop_smollm2{sgo_webshop.tag(arm, seed)}.json").write_text(json.dumps(r))
    g = sgo_webshop.gather([0, 1, 2])
    assert g["arms"]["plain"]["seeds"] == [0, 1, 2] and g["arms"]["sgo"]["seeds"] == [0, 1]
    assert g["paired"]["success"]["seeds"] == [0, 1]
    assert g["paired"]["success"]["per_seed"] == pytest.approx([0.10, 0.15])
    assert g["paired"]["stuck_share"]["per_seed"] == pytest.approx([2 / 12 - 8 / 28])
    assert g["arms"]["sgo"]["stuck_share"][0] == pytest.approx(2 / 12)
    text = sgo_webshop.render(g, [0, 1, 2])
    assert "Not run yet: sgo seed 2" in text
    assert "+12.5 points" in text  # the mean paired success difference
    sgo_webshop.plot(g, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 0


def test_the_start_reports_the_command_that_reproduces_it() -> None:
    import argparse

    from experiments.webshop_smollm2 import command_line

    base = dict(work="runs", n=4, limit=20, tasks=120, epochs=1.0, threads=1, bf16=False, agent="plain", seed=0, tag="")
    first = command_line(argparse.Namespace(**base))
    assert first == "OMP_NUM_THREADS=1 python -m experiments.webshop_smollm2 --work runs --n 4 --limit 20"
    run = argparse.Namespace(
        **{**base, "limit": 40, "tasks": 240, "threads": 2, "bf16": True, "agent": "sgo", "seed": 1}
    )
    text = command_line(argparse.Namespace(**{**vars(run), "tag": "_sgo_t240_s1"}))
    assert text == (
        "python -m experiments.webshop_smollm2 --work runs --n 4 --limit 40 --tasks 240 --threads 2 --bf16 "
        "--agent sgo --seed 1 --tag _sgo_t240_s1"
    )


def test_runs_on_different_order_sets_are_compared_on_the_orders_both_played(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sgo_webshop, "RESULTS", tmp_path)
    # plain played orders a, b (b never solved, stuck twice); sgo played a only (solved once of two).
    plain = _result(0.5, {"stuck_midway": 2})
    plain["episodes"] = [
        ["a", 0, True, None],
        ["a", 1, True, None],
        ["b", 0, False, "stuck_midway"],
        ["b", 1, False, "stuck_midway"],
    ]
    sgo = _result(0.5, {"dead_end": 1})
    sgo["episodes"] = [["a", 0, True, None], ["a", 1, False, "dead_end"]]
    for arm, r in (("plain", plain), ("sgo", sgo)):
        (tmp_path / f"webshop_smollm2{sgo_webshop.tag(arm, 0)}.json").write_text(json.dumps(r))
    g = sgo_webshop.gather([0])
    assert g["orders"] == ["a"]
    assert g["arms"]["plain"]["per_seed"][0]["success"] == 1.0  # order b left out
    assert g["arms"]["sgo"]["per_seed"][0]["success"] == 0.5
    assert g["paired"]["success"]["per_seed"] == pytest.approx([-0.5])
    assert "over the 1 orders all of them played" in sgo_webshop.render(g, [0])


def test_a_stage_runs_in_a_child_process_and_keeps_its_time_at_once(tmp_path: Path) -> None:
    """Each step runs as its own ``milepost`` process (the SFT's memory is returned before the evaluation's
    workers start) and its wall time is on disk as soon as it ends; a finished step is skipped; a failed one
    is a one-line refusal that names it."""
    import os

    from experiments.webshop_smollm2 import stage

    times: dict[str, object] = {}
    times_path, data = tmp_path / "times.json", tmp_path / "data"
    argv = ["data", "webshop", "--items", "1", "--train", "2", "--test", "1", "--out", str(data)]
    before = os.getpid()
    stage("data", data / "manifest.json", argv, times, times_path)
    assert (data / "manifest.json").is_file() and os.getpid() == before
    on_disk = json.loads(times_path.read_text())
    assert set(on_disk) == {"data"} and on_disk["data"]["seconds"] >= 0
    stage("data", data / "manifest.json", ["data", "no-such-env"], times, times_path)  # done: not run again
    assert json.loads(times_path.read_text()) == on_disk
    with pytest.raises(SystemExit, match="`milepost data` failed"):
        stage("data2", tmp_path / "absent", ["data", "webshop", "--items", "9", "--out", str(tmp_path / "d2")], times)
    assert "data2" not in times


def _finished_run(tmp_path: Path, sft_log: bool) -> tuple[Path, Path]:
    """An evaluation folder with its metrics and (empty) episodes, and an SFT folder with or without its log."""
    sft, ev = tmp_path / "sft", tmp_path / "eval"
    sft.mkdir()
    ev.mkdir()
    level = {
        "tasks": 40,
        "avg": {"value": 0.4, "lo": 0.3, "hi": 0.5},
        "pass_at": {"1": {"value": 0.4}, "4": {"value": 0.6}},
        "step_accuracy": 0.5,
        "subgoal_fraction": 0.6,
        "mean_goal_distance": 1.5,
        "failures": {"dead_end": 90, "stuck_midway": 6},
    }
    (ev / "metrics.json").write_text(json.dumps({"levels": [level], "meta": {"n": 4}}))
    (ev / "episodes.jsonl").write_text("")
    if sft_log:
        rows = [{"loss/sft": 2.4, "train/examples": 8, "perf/tokens_per_s": 200.0}]
        rows.append({"loss/sft": 0.02, "train/examples": 16, "perf/tokens_per_s": 300.0})
        (sft / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return sft, ev


@pytest.mark.parametrize("sft_log", [True, False])
def test_the_report_of_a_start_rebuilt_from_its_adapter_says_its_sft_log_was_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sft_log: bool
) -> None:
    """A run whose SFT ran in an earlier session (only its adapter committed, ``milepost models merge`` rebuilt
    ``final``) is reported from its evaluation, with the SFT's figures pointed to, not made up; a run with its
    SFT log reports steps and losses from it."""
    import argparse

    from experiments import webshop_smollm2

    monkeypatch.setattr(webshop_smollm2, "RESULTS", tmp_path)
    sft, ev = _finished_run(tmp_path, sft_log)
    times = {"eval": {"seconds": 2400.0, "load_after": 2.0}}
    if not sft_log:
        times["sft"] = {"seconds": 3018.0, "load_after": None, "source": "checkpoints/x/README.md"}
    args = argparse.Namespace(
        work="runs", n=4, limit=40, tasks=240, epochs=1.0, threads=2, bf16=True, agent="sgo", seed=1, tag="_x"
    )
    webshop_smollm2.report(sft, ev, times, args)
    out = json.loads((tmp_path / "webshop_smollm2_x.json").read_text())
    text = (tmp_path / "webshop_smollm2_x.md").read_text()
    assert out["eval"]["avg"]["value"] == 0.4 and "avg@4 40.0% [30.0, 50.0]" in text
    assert (tmp_path / "webshop_smollm2_x.png").stat().st_size > 0
    if sft_log:
        assert out["sft"] == {"steps": 2, "examples": 16, "first_loss": 2.4, "last_loss": 0.02}
        assert "2 steps, loss 2.40 ->\n0.020, at 200-300 tokens/s" in text
    else:
        assert out["sft"] == {"log": "not kept", "source": "checkpoints/x/README.md"}
        assert "SFT log was not kept" in text and "checkpoints/x/README.md" in text
        assert "sft 50.3 min (checkpoints/x/README.md)" in text


def test_the_difference_paired_by_test_order_averages_the_seeds_both_arms_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per order, SGO - plain success averaged over the seeds of both arms (a seed of one arm left out); the mean
    is the paired difference and the bootstrap interval over orders contains it."""
    monkeypatch.setattr(sgo_webshop, "RESULTS", tmp_path)

    def run(successes: dict[str, list[bool]]) -> dict[str, object]:
        r = _result(0.5, {})
        r["episodes"] = [
            [t, i, ok, None if ok else "dead_end"] for t, oks in successes.items() for i, ok in enumerate(oks)
        ]
        return r

    runs = {
        ("plain", 0): run({"a": [True, False], "b": [False, False]}),
        ("sgo", 0): run({"a": [True, True], "b": [True, False]}),  # a +0.5, b +0.5
        ("plain", 1): run({"a": [True, True], "b": [False, False]}),
        ("sgo", 1): run({"a": [True, False], "b": [False, False]}),  # a -0.5, b 0
        ("plain", 2): run({"a": [False, False], "b": [False, False]}),  # no SGO seed 2: not paired
    }
    for (arm, seed), r in runs.items():
        (tmp_path / f"webshop_smollm2{sgo_webshop.tag(arm, seed)}.json").write_text(json.dumps(r))
    o = sgo_webshop.gather([0, 1, 2])["by_orders"]
    assert o["seeds"] == [0, 1] and o["orders"] == 2
    mean, lo, hi = o["mean_ci"]
    assert mean == pytest.approx(0.125)  # orders a: 0.0, b: +0.25
    assert lo <= mean <= hi and lo >= 0.0 and hi <= 0.25
