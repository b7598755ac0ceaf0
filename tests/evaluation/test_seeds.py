"""Arms over several training seeds: mean and 95% t-interval across seeds, the per-seed curves, and the demo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.evaluation.seeds import mean_interval, plot_seed_curves, seed_table
from tests.planning.fakes import sudoku_tasks


def test_mean_interval_by_hand() -> None:
    # mean 0.7, sample sd 0.2, t(2) = 4.303: half-width 4.303 * 0.2 / sqrt(3) = 0.860600 / 1.732051 = 0.496868
    mean, lo, hi = mean_interval([0.5, 0.7, 0.9])
    assert mean == pytest.approx(0.7)
    assert hi - mean == pytest.approx(0.496868, abs=1e-5) and mean - lo == pytest.approx(0.496868, abs=1e-5)
    assert mean_interval([0.4]) == (0.4, 0.4, 0.4)
    with pytest.raises(ValueError):
        mean_interval([])


def _run(root: Path, data: Path, policy: str, shares: list[float]) -> Path:
    evaluate(EvalSpec(env="sudoku", data=str(data), policy=policy, n=2, ks=[1]), root / "eval", progress=False)
    rows = [
        {"iteration": i, "phase": "S2", "rollout/success": 0.1 * i, "rollout/max_length": s}
        for i, s in enumerate(shares, start=1)
    ]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_seed_table_and_curves(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "ds", {"train": [], "test": sudoku_tasks(4, 6, seed=3)}, {"seed": 3})
    arms = {
        "solid": [_run(tmp_path / f"a{s}", data, "oracle", [0.0, 0.0, 0.0, 0.0]) for s in range(3)],
        "shaky": [
            _run(tmp_path / "b0", data, "noisy-oracle:0.3", [0.0, 0.2, 0.4, 0.6]),
            _run(tmp_path / "b1", data, "random", [0.0, 0.0, 0.3, 0.3]),
        ],
    }
    text, result = seed_table(arms)
    solid = result["solid"]["levels"]["S2"]
    assert result["solid"]["seeds"] == 3 and solid["mean"] == solid["lo"] == solid["hi"] == 1.0
    shaky = result["shaky"]["levels"]["S2"]
    values = shaky["values"]
    assert len(values) == 2 and shaky["mean"] == pytest.approx(sum(values) / 2)
    # collapse signal: mean over seeds of each seed's last three iterations (0.4 and 0.2)
    assert result["shaky"]["max_length_last3"] == pytest.approx([0.4, 0.2])
    assert "| solid | 3 | 100.0 [100, 100] | 0.0 |" in text and "| shaky | 2 |" in text and "| 30.0 |" in text
    assert plot_seed_curves(tmp_path / "seeds.png", arms) is not None and (tmp_path / "seeds.png").stat().st_size
    with pytest.raises(Exception, match="no evaluation"):
        seed_table({"x": [tmp_path]})


@pytest.mark.slow  # builds the demo's full 4x4 dataset and trains twice: minutes on a shared 2-core machine
def test_demo_over_two_seeds(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "demo"
    argv = ["demo", "--out", str(out), "--arms", "atomic", "--seeds", "0,1", "--iterations", "1", "--eval-limit", "1"]
    argv += ["--workers", "1", "--no-progress", "--set", "rl.tasks_per_iter=2", "--set", "rl.samples_per_task=2"]
    argv += ["--set", "rl.minibatches=1", "--set", "eval.n=1", "--set", "eval.ks=[1]"]
    assert main(argv) == 0
    report = (out / "report" / "report.md").read_text()
    assert "training seeds 0, 1" in report and "### Across training seeds (2: 0, 1)" in report
    assert "| RL atomic | 2 |" in report
    seeds = json.loads((out / "report" / "seeds.json").read_text())
    assert seeds["RL atomic"]["seeds"] == 2
    assert (out / "rl-atomic-seed0" / "final").is_dir() and (
        out / "rl-atomic-seed1" / "eval" / "metrics.json"
    ).is_file()
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("The demo finished in ") and lines[-1].endswith("report.md")  # a sentence, no dict
    assert main(argv) == 0  # a second session: every job is done, the wall time counts both sessions
    assert "over 2 sessions" in capsys.readouterr().out.strip().splitlines()[-1]
    assert "over 2 sessions (this one" in (out / "report" / "report.md").read_text()
    assert main(["demo", "--out", str(out), "--seeds", "1,1"]) == 2
    assert "distinct seeds" in capsys.readouterr().err


def test_curves_of_another_logged_metric(tmp_path: Path) -> None:
    """``metric`` picks the column drawn: a column no run logged draws nothing (None), one that some runs logged is
    drawn from those."""
    for name, subgoals in (("a", [0.5, 0.8]), ("b", None)):
        rows = [
            {"iteration": i, "phase": "S2", "rollout/success": 0.0}
            | ({} if subgoals is None else {"rollout/subgoals": subgoals[i - 1]})
            for i in (1, 2)
        ]
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    only_b = {"sparse": [tmp_path / "b"]}
    assert plot_seed_curves(tmp_path / "none.png", only_b, metric="rollout/subgoals") is None
    assert not (tmp_path / "none.png").exists()
    both = {"mira": [tmp_path / "a"], "sparse": [tmp_path / "b"]}
    out = plot_seed_curves(tmp_path / "sub.png", both, metric="rollout/subgoals", label="subgoals", scale=1.0)
    assert out == tmp_path / "sub.png" and out.stat().st_size > 0


def test_a_share_interval_never_rounds_away_from_its_mean() -> None:
    from milepost.evaluation.seeds import share_interval

    assert share_interval(0.046, -0.01, 0.1) == "4.6 [0, 10]"  # clipped at 0, whole points
    assert share_interval(1.0, 1.0, 1.0) == "100.0 [100, 100]"
    # three seeds at 0.6%: whole points would print "0.6 [1, 1]", an interval without its mean
    assert share_interval(0.00625, 0.00625, 0.00625) == "0.6 [0.6, 0.6]"
    assert share_interval(0.004, 0.003, 0.0049) == "0.4 [0.3, 0.5]"
