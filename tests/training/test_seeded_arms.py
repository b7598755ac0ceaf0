"""experiments/seeded_arms.py: equal episode budgets across arms, and the report's numbers against the runs' own."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from milepost.datasets import write_dataset
from milepost.evaluation.runner import EvalSpec, evaluate
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import seeded_arms  # noqa: E402


def _args(**kw: object) -> argparse.Namespace:
    base = {
        "start": "checkpoints/rushhour-sft-steps",
        "data": "unused",
        "levels": "7-9",
        "iterations": 6,
        "tasks_per_iter": 5,
        "eval_limit": 25,
        "eval_levels": "7-9",
        "set": [],
        "workers": 2,
    }
    return argparse.Namespace(**(base | kw))


def test_every_arm_plays_the_same_number_of_training_episodes() -> None:
    args = _args()
    mira = seeded_arms.arm_config(["mira", "rushhour_mira.yaml"], 1, args, warmup=1)
    sparse = seeded_arms.arm_config(["atomic", "rushhour_atomic.yaml"], 1, args, warmup=1)
    curriculum = seeded_arms.arm_config(["curriculum", "rushhour_curriculum.yaml"], 1, args, warmup=1)
    # MiRA: 1 warm-up batch + 6 policy iterations; the others 7 policy iterations
    assert (mira.rl.iterations, mira.mira.warmup_iterations) == (6, 1)
    assert sparse.rl.iterations == curriculum.rl.iterations == 7
    assert [p.iterations for p in curriculum.rl.curriculum] == [3, 4]  # the 4 + 4 phases, scaled, plus the warm-up
    assert {c.rl.tasks_per_iter * c.rl.samples_per_task for c in (mira, sparse, curriculum)} == {20}
    assert {c.seed for c in (mira, sparse, curriculum)} == {1} and mira.levels == "7-9"
    with pytest.raises(SystemExit, match="budgets would differ"):
        seeded_arms.arm_config(["mira", "rushhour_mira.yaml", "mira.warmup_iterations=2"], 0, args, warmup=1)


def test_a_bad_arm_override_is_one_line_naming_the_arm() -> None:
    args = _args(arm=[["atomic", "rushhour_atomic.yaml"], ["frozen", "rushhour_atomic.yaml", "rl.lr=0"]])
    with pytest.raises(SystemExit) as raised:
        seeded_arms.check_arms(args)
    assert str(raised.value) == "seeded_arms: arm frozen: rl.lr: must be > 0, got 0.0"


def test_the_report_says_what_the_runs_measured(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": rush_tasks(4, 6, 3)}, {"seed": 3})
    work = tmp_path / "work"

    def run(policy: str, folder: Path, seed: int) -> None:
        spec = EvalSpec(env="rushhour", data=str(data), policy=policy, n=4, ks=[1, 4], seed=seed)
        evaluate(spec, folder, progress=False)

    run("random", work / "start-atomic", 0)  # the first seed's folder keeps the name of the older runs
    run("random", work / "start-atomic-s1", 1)
    # seed 2's start is not evaluated: the report says so and averages what there is
    for s in (0, 1, 2):
        run("random", work / f"weak-s{s}" / "eval", s)
        run("oracle", work / f"strong-s{s}" / "eval", s)
    args = _args(name="t", title=None, work=str(work), arm=[["weak", "a.yaml"], ["strong", "b.yaml", "x=1"]])
    timings = {"weak-s0": 120.0, "start-atomic-s1": 30.0, "other-arm-s0": 60.0}  # another report's job too
    seeded_arms.write_report(args, [0, 1, 2], ["atomic"], 0, timings, [60.0], [1.0], results=tmp_path / "out")
    md = (tmp_path / "out" / "t.md").read_text()
    out = json.loads((tmp_path / "out" / "t.json").read_text())
    assert "minutes per job: start-atomic-s1 0.5, weak-s0 2.0." in md and "other-arm" not in md
    assert out["timings_s"] == {"weak-s0": 120.0, "start-atomic-s1": 30.0}
    weak = [out["per_seed"]["weak"][str(s)]["4-6"]["avg"] for s in (0, 1, 2)]
    assert [out["per_seed"]["strong"][str(s)]["4-6"]["avg"] for s in (0, 1, 2)] == [1.0, 1.0, 1.0]
    for s in (0, 1, 2):  # each seed's value is its run's own metrics.json
        levels = json.loads((work / f"weak-s{s}" / "eval" / "metrics.json").read_text())["levels"]
        assert levels[0]["avg"]["value"] == weak[s]
    diff = out["paired_difference"]["strong"]["4-6"]
    assert diff["mean"] == pytest.approx(1.0 - sum(weak) / 3)
    assert diff["values"] == pytest.approx([1.0 - w for w in weak])
    assert "| strong | 3 | 100.0 [100, 100] |" in md and "| start (atomic actions) seed 0 |" in md
    assert "| start (atomic actions) seed 2 | not evaluated yet |" in md
    start = [
        json.loads((work / d / "metrics.json").read_text())["levels"][0]["avg"]["value"]
        for d in ("start-atomic", "start-atomic-s1")
    ]
    mean = out["start_mean_over_seeds"]["atomic"]["4-6"]
    assert mean["values"] == start and mean["mean"] == pytest.approx(sum(start) / 2)
    assert out["start_per_seed"]["atomic"]["1"]["4-6"]["avg"] == start[1]
    assert "evaluated the same way under 2 of the 3 sampling seeds: 4-6 " in md
    assert "`strong`: `b.yaml` with `x=1`" in md
    assert (tmp_path / "out" / "t.png").stat().st_size > 0
    row = next(line for line in md.splitlines() if line.startswith("| strong | +"))
    over_seeds = row.split(" | ")[1]
    assert over_seeds.endswith("*") == (diff["lo"] > 0)  # marked only when the interval excludes 0
    # By test task: the per-task differences averaged over seeds have the level's mean difference as their mean.
    task = out["paired_by_task"]["strong"]["4-6"]
    assert task["tasks"] == 3 and task["mean"] == pytest.approx(diff["mean"])
    assert task["lo"] <= task["mean"] <= task["hi"]
    # Rush Hour pays no partial credit: the outcome score is the success rate, seed by seed.
    for arm in ("weak", "strong"):
        for s in (0, 1, 2):
            v = out["per_seed"][arm][str(s)]["4-6"]
            assert v["score"] == pytest.approx(v["avg"])
    sub = out["paired_difference"]["strong subgoals"]["4-6"]
    strong_sub = [out["per_seed"]["strong"][str(s)]["4-6"]["subgoals"] for s in (0, 1, 2)]
    weak_sub = [out["per_seed"]["weak"][str(s)]["4-6"]["subgoals"] for s in (0, 1, 2)]
    assert sub["values"] == pytest.approx([a - b for a, b in zip(strong_sub, weak_sub)])
    assert "The same for the share of subgoals reached" in md and "The same for the outcome score" in md
    # Each arm against the start, paired by the seeds that have both (seed 2's start is not evaluated).
    for arm in ("weak", "strong"):
        got = out["minus_start"][arm]["4-6"]
        mine = [out["per_seed"][arm][str(s)]["4-6"]["avg"] for s in (0, 1)]
        assert got["values"] == pytest.approx([a - b for a, b in zip(mine, start)]) and got["mode"] == "atomic"
    line = next(x for x in md.splitlines() if x.startswith("| strong | atomic | +"))
    assert line.split(" | ")[2].split(" (")[0].endswith("*") == (out["minus_start"]["strong"]["4-6"]["lo"] > 0)
    # and the same for step accuracy: the oracle's every move is optimal, the random policy's rarely
    start_steps = [
        json.loads((work / d / "metrics.json").read_text())["levels"][0]["step_accuracy"]
        for d in ("start-atomic", "start-atomic-s1")
    ]
    steps = out["minus_start_step_accuracy"]["strong"]["4-6"]
    assert steps["values"] == pytest.approx([1.0 - x for x in start_steps]) and steps["lo"] > 0
    assert "The same for step accuracy" in md
    rows = [x for x in md.splitlines() if x.startswith("| strong | atomic | +")]
    assert len(rows) == 2 and rows[1].split(" | ")[2].split(" (")[0].endswith("*")


def test_an_interim_report_says_the_start_is_not_evaluated_yet(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": rush_tasks(4, 6, 2)}, {"seed": 3})
    work = tmp_path / "work"
    for arm, policy in (("weak", "random"), ("strong", "oracle")):
        spec = EvalSpec(env="rushhour", data=str(data), policy=policy, n=4, ks=[1, 4], seed=0)
        evaluate(spec, work / f"{arm}-s0" / "eval", progress=False)
    args = _args(name="t", title=None, work=str(work), arm=[["weak", "a.yaml"], ["strong", "b.yaml"]])
    seeded_arms.write_report(args, [0], ["atomic"], 0, {}, [60.0], [1.0], results=tmp_path / "out")
    md = (tmp_path / "out" / "t.md").read_text()
    out = json.loads((tmp_path / "out" / "t.json").read_text())
    assert out["start"] == {} and "| start (atomic actions) seed 0 | not evaluated yet |" in md
    assert out["start_mean_over_seeds"] == {} and "evaluated the same way" not in md
    assert "2 tasks at 4-6" in md  # the task count comes from the first arm's evaluation
    assert out["per_seed"]["strong"]["0"]["4-6"]["avg"] == 1.0
    # One seed: no interval over seeds, but the difference by test task.
    weak = out["per_seed"]["weak"]["0"]["4-6"]["avg"]
    assert out["paired_difference"] == {} and out["paired_by_task"]["strong"]["4-6"]["mean"] == pytest.approx(1 - weak)
    assert any(line.startswith("| strong | - | +") for line in md.splitlines())


def test_the_report_says_whether_invocations_overlapped() -> None:
    # one invocation: nothing to say; spans that overlap ran side by side, spans that do not ran in turn
    assert seeded_arms.invocations_phrase([[0.0, 10.0]]) == ""
    assert "one after another" in seeded_arms.invocations_phrase([[20.0, 30.0], [0.0, 10.0]])
    assert "some side by side" in seeded_arms.invocations_phrase([[0.0, 10.0], [30.0, 40.0], [5.0, 25.0]])
    # a span not recorded (an invocation JSON written before spans were kept): the order is not claimed
    unknown = seeded_arms.invocations_phrase([[0.0, 10.0], None])
    assert "side by side" not in unknown and "after another" not in unknown and "separate" in unknown


def test_a_range_that_rounds_to_one_number_is_written_once() -> None:
    assert seeded_arms.span(0.6, 1.4) == "1 point"
    assert seeded_arms.span(2.0, 2.4) == "2 points"
    assert seeded_arms.span(0.6, 3.2) == "1-3 points"


def test_the_report_warns_when_arms_draw_their_tasks_from_different_streams(tmp_path: Path) -> None:
    from milepost.config import to_yaml

    args = _args()
    configs = {
        "sparse": seeded_arms.arm_config(["sparse", "rushhour_atomic.yaml"], 0, args, warmup=1),
        "sparse-keys": seeded_arms.arm_config(["sparse-keys", "rushhour_atomic.yaml", "rl.task_draw=keys"], 0, args, 1),
        "mira": seeded_arms.arm_config(["mira", "rushhour_mira.yaml"], 0, args, warmup=1),
        "no-curriculum": seeded_arms.arm_config(["n", "rushhour_mira.yaml", "mira.curriculum=false"], 0, args, 1),
    }
    streams = {name: seeded_arms.draw_stream(cfg) for name, cfg in configs.items()}
    assert streams == {"sparse": "sample", "sparse-keys": "keys", "mira": "keys", "no-curriculum": "sample"}
    assert seeded_arms.draws_sentence({k: streams[k] for k in ("sparse-keys", "mira")}) == ""
    sentence = seeded_arms.draws_sentence(streams)
    assert sentence.startswith(
        "Task draws: `sparse`, `no-curriculum` by `random.sample`; `sparse-keys`, `mira` by the curriculum's "
        "weighted keys."
    )
    # the report reads each arm's stream from the config its first run saved; an arm without one is left out
    for name in ("sparse", "mira"):
        (tmp_path / f"{name}-s0").mkdir()
        (tmp_path / f"{name}-s0" / "config.yaml").write_text(to_yaml(configs[name]))
    runs = {name: [tmp_path / f"{name}-s{s}" for s in (0, 1)] for name in ("sparse", "mira", "unrun")}
    assert seeded_arms.arm_streams(seeded_arms.saved_configs(runs)) == {"sparse": "sample", "mira": "keys"}


def test_the_report_counts_updates_with_a_zero_gradient(tmp_path: Path) -> None:
    """Read from each run's training log: the iterations whose ``train/grad_norm`` is exactly 0, of all that
    updated (a MiRA warm-up row has no gradient and is not counted); the sentence only when there is one."""
    logs = {
        "sparse-s0": [0.0, 0.0, 0.0],
        "sparse-s1": [0.0, 2.5, 0.0],
        "mira-s0": [None, 4.1, 3.3],  # None: the critic warm-up row
        "mira-s1": [None, 1e-9, 5.0],
    }
    for run, norms in logs.items():
        (tmp_path / run).mkdir()
        rows = [{"iteration": i} | ({} if n is None else {"train/grad_norm": n}) for i, n in enumerate(norms)]
        (tmp_path / run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = {arm: [tmp_path / f"{arm}-s{s}" for s in (0, 1)] for arm in ("sparse", "mira", "unrun")}
    counts = seeded_arms.zero_gradient_updates(runs)
    assert counts == {"sparse": [5, 6], "mira": [0, 4]}
    sentence = seeded_arms.zero_gradient_sentence(counts)
    assert sentence.startswith("Policy updates with a zero gradient, over all seeds")
    assert sentence.endswith(": `sparse` 5 of 6, `mira` 0 of 4.\n")
    assert seeded_arms.zero_gradient_sentence({"mira": [0, 4]}) == ""


def test_an_invocation_keeps_its_job_times_for_a_later_report(tmp_path: Path) -> None:
    """Each invocation records its jobs' times in the work folder (also when it ends without a report, a job left
    to another invocation); ``--timings-from`` reads the records back, a job in two keeping its longer time."""
    first = seeded_arms.save_invocation(
        tmp_path, "t", {"sparse-s0": 300.0, "mira-s0": 1.0}, 900.0, [1000.0, 1900.0], [1.0, 2.0]
    )
    second = seeded_arms.save_invocation(tmp_path, "t", {"mira-s0": 600.0}, 650.0, [1500.0, 2150.0], [2.5])
    assert first.parent == tmp_path and first != second
    timings, walls, spans, load = seeded_arms.read_invocations([str(first), str(second)])
    assert timings == {"sparse-s0": 300.0, "mira-s0": 600.0}
    assert walls == [900.0, 650.0] and spans == [[1000.0, 1900.0], [1500.0, 2150.0]] and load == [1.0, 2.0, 2.5]
    assert seeded_arms.invocations_phrase(spans) == " (invocations on the same runs folder, some side by side)"


def test_a_report_over_a_run_not_evaluated_yet_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    (work / "atomic-s0").mkdir(parents=True)  # trained so far, not evaluated
    argv = ["seeded_arms.py", "--name", "t", "--work", str(work), "--start", str(ROOT / "checkpoints/sudoku4-sft")]
    argv += ["--data", "unused", "--levels", "7-9", "--eval-levels", "7-9", "--seeds", "0"]
    argv += ["--arm", "atomic", "rushhour_atomic.yaml", "--report-only"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as raised:
        seeded_arms.main()
    run = work / "atomic-s0"
    assert str(raised.value) == f"seeded_arms: {run}: no evaluation (eval/metrics.json) to average over seeds"


def test_the_report_lists_the_settings_in_which_the_arms_differ(tmp_path: Path) -> None:
    """From each arm's saved config: a step term one arm has and another lacks is listed (the confound the
    silent-regime comparison carried); the MiRA block of an arm without MiRA is not, nor what the report explains."""
    from milepost.config import to_yaml

    args = _args()
    configs = {
        "sparse": seeded_arms.arm_config(
            ["sparse", "rushhour_atomic.yaml", "rl.alpha=0", "rl.task_draw=keys"], 0, args, 1
        ),
        "mira": seeded_arms.arm_config(["mira", "rushhour_mira.yaml"], 0, args, warmup=1),
        "no-potential": seeded_arms.arm_config(["n", "rushhour_mira.yaml", "mira.potential=false"], 0, args, 1),
    }
    for name, cfg in configs.items():
        (tmp_path / f"{name}-s0").mkdir()
        (tmp_path / f"{name}-s0" / "config.yaml").write_text(to_yaml(cfg))
    runs = {name: [tmp_path / f"{name}-s{s}" for s in (0, 1)] for name in (*configs, "unrun")}
    settings = seeded_arms.arm_settings(seeded_arms.saved_configs(runs))
    assert list(settings) == ["sparse", "mira", "no-potential"]
    assert "mira.potential" not in settings["sparse"] and settings["sparse"]["mira.enabled"] is False
    assert settings["mira"]["rl.alpha"] == 0.2 and settings["sparse"]["rl.alpha"] == 0.0
    table = seeded_arms.settings_table(settings)
    rows = {line.split(" | ")[0].strip("| `"): line for line in table.splitlines() if line.startswith("| `")}
    assert rows["rl.alpha"] == "| `rl.alpha` | 0.0 | 0.2 | 0.2 |"
    assert rows["mira.enabled"] == "| `mira.enabled` | False | True | True |"
    assert rows["mira.potential"] == "| `mira.potential` | - | True | False |"
    # the name, seed, iteration count (the warm-up) and task stream differ too, and the report states them elsewhere
    assert not {"name", "seed", "rl.iterations", "rl.task_draw"} & set(rows)
    # arms that differ only in what the report explains: no table
    assert seeded_arms.settings_table({"a": settings["mira"], "b": settings["mira"] | {"name": "x"}}) == ""
    assert seeded_arms.settings_table({"a": settings["mira"]}) == ""


def test_an_invocation_reports_the_earlier_invocations_times_beside_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--timings-from`` without ``--report-only``: a run that finds its jobs done by an earlier invocation keeps
    that invocation's job times (not the ~0 s of skipping them) and lists both walls."""
    data = write_dataset(tmp_path / "ds", {"train": [], "test": rush_tasks(4, 6, 2)}, {"seed": 3})
    work = tmp_path / "work"
    evaluate(EvalSpec(env="rushhour", data=str(data), policy="random", n=4, ks=[1, 4], seed=0), work / "start-atomic")
    evaluate(EvalSpec(env="rushhour", data=str(data), policy="oracle", n=4, ks=[1, 4], seed=0), work / "a-s0" / "eval")
    earlier = seeded_arms.save_invocation(work, "t", {"a-s0": 300.0, "start-atomic": 60.0}, 400.0, [0.0, 400.0], [1.0])
    argv = [
        "seeded_arms.py",
        "--name",
        "t",
        "--work",
        str(work),
        "--start",
        str(ROOT / "checkpoints/rushhour-sft-d4slide3"),
        "--data",
        str(data),
    ]
    argv += ["--levels", "4-6", "--eval-levels", "4-6", "--seeds", "0", "--workers", "1"]
    argv += ["--arm", "a", "rushhour_atomic.yaml", "--timings-from", str(earlier)]
    monkeypatch.setattr(sys, "argv", argv)
    got: dict[str, object] = {}
    monkeypatch.setattr(seeded_arms, "write_report", lambda *a, **kw: got.update(timings=a[4], walls=a[5]))
    seeded_arms.main()
    assert got["timings"] == {"a-s0": 300.0, "start-atomic": 60.0}
    walls = got["walls"]
    assert isinstance(walls, list) and len(walls) == 2 and walls[0] == 400.0
    assert len(list(work.glob("invocation-t-*.json"))) == 2  # this invocation's record beside the earlier one
