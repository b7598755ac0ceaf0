"""Experiment tracking (``milepost.tracking``): every metrics row reaches TensorBoard, W&B (offline) and MLflow
(a SQLite store) under the metrics.jsonl names, a resumed run logs each step once, a missing backend stops the
start with one line, and every training run folder ends with ``training.png``.

Each backend's tests are skipped, with the reason, when its library is not installed (``pip install
'milepost[track]'``).
"""

from __future__ import annotations

import importlib.util
import json
import random
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.config import EnvConfig, load_config
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.evaluation.plots import plot_training, plot_training_log, training_rows
from milepost.io import read_jsonl
from milepost.tracking import RENAMED, LoggingConfig, Tracker, current_names, eval_scalars, read_metrics, scalars
from milepost.training.config import AgentConfig, RLConfig, SFTConfig, TrainConfig

# MLflow's SQLite store trips a SQLAlchemy 2.1 deprecation inside mlflow itself.
pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:
        return False


needs_tensorboard = pytest.mark.skipif(
    not _installed("tensorboard"), reason="tensorboard is not installed (pip install 'milepost[track]')"
)
needs_wandb = pytest.mark.skipif(
    not _installed("wandb"), reason="wandb is not installed (pip install 'milepost[track]')"
)
needs_mlflow = pytest.mark.skipif(
    not (_installed("mlflow") and _installed("sqlalchemy")),
    reason="mlflow (with sqlalchemy for its SQLite store) is not installed (pip install 'milepost[track]')",
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B never reaches a server, MLflow never a tracking server of the environment."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _row(step: int, seed: int = 0) -> dict[str, Any]:
    """An RL metrics row in the shape ``milepost train`` writes (values differ per step and per ``seed``)."""
    rng = random.Random(f"{seed}:{step}")
    return {
        "iteration": step,
        "phase": "S1",
        "rollout/success": rng.random(),
        "rollout/reward": rng.uniform(-2, 1),
        "loss/policy": rng.uniform(-1, 1),
        "is/mean_weight": rng.uniform(0.9, 1.1),
        "critic/value_auroc_s0": None,  # NaN is stored as null: not a point
        "perf/rollout_s": rng.uniform(1, 2),
    }


def _levels(avg: float) -> list[dict[str, Any]]:
    est = {"value": avg, "lo": 0.0, "hi": 1.0}
    return [{"level": "S1", "avg": est, "pass_at": {"1": est}, "subgoal_fraction": 0.5}]


def _cfg(*backends: str, name: str = "t") -> TrainConfig:
    return TrainConfig(name=name, logging=LoggingConfig(backends=list(backends)))


def _tensorboard(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``log_dir``, read back by TensorBoard's own reader (which drops the
    events a purge_step cut off)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _same(got: list[tuple[int, float]], expected: list[tuple[int, float]]) -> bool:
    """The same steps, in order, and the same values up to TensorBoard's float32."""
    return [s for s, _ in got] == [s for s, _ in expected] and [v for _, v in got] == pytest.approx(
        [v for _, v in expected], rel=1e-6
    )


def _wandb_history(run_dir: Path) -> list[tuple[int, dict[str, float]]]:
    """(step, metrics) of every history record in the run's offline W&B files, oldest run first.

    Test-side reader: a ``.wandb`` file is a LevelDB-style log (a 7-byte header, then 32 KiB blocks of
    records, each with a 7-byte header: CRC, length, type FULL/FIRST/MIDDLE/LAST) of ``wandb_internal_pb2.Record``
    messages; wandb 0.31 ships no Python reader of its own, so the framing is undone here and the records are
    decoded with wandb's protobuf classes.
    """
    from wandb.proto import wandb_internal_pb2

    out = []
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        data = path.read_bytes()
        assert data[:4] == b":W&B"
        pos, block, parts = 7, 32768, b""
        while pos + 7 <= len(data):
            if block - pos % block < 7:  # a block's tail too short for a header is padding
                pos += block - pos % block
                continue
            length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
            if length == 0 and kind == 0:
                pos += block - pos % block
                continue
            parts += data[pos + 7 : pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):  # FULL or LAST: one whole record
                record = wandb_internal_pb2.Record()
                record.ParseFromString(parts)
                parts = b""
                if record.WhichOneof("record_type") == "history":
                    items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                    out.append((record.history.step.num, {k: v for k, v in items.items() if not k.startswith("_")}))
    return out


def test_rows_keep_their_names_and_skip_non_metrics() -> None:
    row = _row(3)
    assert scalars(row) == {k: v for k, v in row.items() if "/" in k and v is not None}
    assert "iteration" not in scalars(row) and "phase" not in scalars(row)
    assert scalars({"step": 1, "train/lr": float("nan"), "train/examples": 24, "x/flag": True}) == {
        "train/examples": 24.0
    }
    assert eval_scalars(_levels(0.25)) == {
        "eval/S1/avg": 0.25,
        "eval/S1/pass_at_1": 0.25,
        "eval/S1/subgoal_fraction": 0.5,
    }


def test_an_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(InputError, match=r"logging\.backends: 'comet' is not one of tensorboard, wandb, mlflow"):
        load_config(TrainConfig, None, ["logging.backends=[tensorboard,comet]"])
    with pytest.raises(InputError, match="names a backend twice"):
        load_config(TrainConfig, None, ["logging.backends=[wandb,wandb]"])
    assert load_config(TrainConfig, None, ["logging.backends=[tensorboard]"]).logging.backends == ["tensorboard"]


@pytest.mark.parametrize(("backend", "module"), [("tensorboard", "torch.utils.tensorboard"), ("wandb", "wandb")])
def test_a_backend_that_is_not_installed_stops_the_start_with_one_line(
    backend: str, module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """``milepost sft`` with a configured backend whose library does not import: exit 2, one line, and no run
    folder left behind (the start guard removes it), before any model is built."""
    monkeypatch.setitem(sys.modules, module, None)  # test double: the import fails as if not installed
    monkeypatch.setitem(sys.modules, "mlflow", None)
    tasks = [make_task(*generate_easy(4, 4, 3, i), level="S1", split="train", index=i) for i in range(2)]
    data = write_dataset(tmp_path / "ds", {"train": tasks, "test": []}, {"seed": 3})
    out = tmp_path / "run"
    args = ["sft", "--set", f"data={data}", "--set", f"logging.backends=[{backend}]", "--out", str(out)]
    assert main([*args, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{backend} is configured but not installed" in err and "milepost[track]" in err
    assert not out.exists()
    with pytest.raises(InputError, match="mlflow is configured but not installed"):
        Tracker(_cfg("mlflow"), tmp_path / "other")


def _log_three(run_dir: Path, *backends: str) -> list[dict[str, Any]]:
    tracker = Tracker(_cfg(*backends), run_dir)
    rows = [{"iteration": 0, "phase": "warmup", "warmup": 1, "rollout/success": 0.125}] + [_row(i) for i in (1, 2, 3)]
    for row in rows:
        tracker.log(row)
    tracker.log_eval(3, _levels(0.5))
    tracker.close()
    assert list(read_jsonl(run_dir / "metrics.jsonl")) == rows  # the source of truth, unchanged
    assert not (run_dir / "training.png").exists()  # the tracker writes rows; plots read them
    assert plot_training_log(run_dir) == run_dir / "training.png"
    return rows


@needs_tensorboard
def test_tensorboard_gets_every_metric_under_its_jsonl_name(tmp_path: Path) -> None:
    rows = _log_three(tmp_path, "tensorboard")
    got = _tensorboard(tmp_path / "tensorboard")
    expected: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for name, value in scalars(row).items():
            expected.setdefault(name, []).append((row["iteration"], value))
    expected |= {name: [(3, value)] for name, value in eval_scalars(_levels(0.5)).items()}
    assert set(got) == set(expected)
    for name, points in expected.items():
        assert _same(got[name], points)


@needs_wandb
def test_wandb_offline_run_holds_every_metric_at_its_step(tmp_path: Path) -> None:
    rows = _log_three(tmp_path, "wandb")
    history = _wandb_history(tmp_path)
    assert [step for step, _ in history] == [0, 1, 2, 3]
    for (step, metrics), row in zip(history, rows):
        assert step == row["iteration"]
        # W&B merges what is logged at one step into one history row: step 3 also holds the evaluation.
        extra = eval_scalars(_levels(0.5)) if step == 3 else {}
        assert metrics == pytest.approx(scalars(row) | extra)
    state = json.loads((tmp_path / "tracking.json").read_text())
    assert state["wandb_run_id"] in next((tmp_path / "wandb").glob("offline-run-*")).name


@needs_mlflow
def test_mlflow_store_holds_every_metric_at_its_step(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    rows = _log_three(tmp_path, "mlflow")
    state = json.loads((tmp_path / "tracking.json").read_text())
    assert state["mlflow_uri"] == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=state["mlflow_uri"])
    run = client.get_run(state["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "t"
    assert run.data.params["name"] == "t" and run.data.params["logging.backends"] == "['mlflow']"
    assert float(run.data.params["rl.lr"]) == TrainConfig().rl.lr
    for name in ("rollout/success", "loss/policy", "perf/rollout_s"):
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, name))
        assert history == [(r["iteration"], r[name]) for r in rows if name in r]  # doubles, exactly
    assert [m.value for m in client.get_metric_history(run.info.run_id, "eval/S1/avg")] == [0.5]
    assert "critic/value_auroc_s0" not in run.data.metrics


def test_a_resumed_run_logs_every_step_once(tmp_path: Path) -> None:
    """Session 1 logs steps 1-3 and dies after its checkpoint at step 2; session 2 resumes there and logs 3-5.

    metrics.jsonl and TensorBoard hold session 2's step 3 (TensorBoard through purge_step); W&B and MLflow,
    which cannot drop a point, keep session 1's step 3 and continue the same run; no backend has a step twice.
    """
    backends = [
        name
        for name, ok in (
            ("tensorboard", _installed("tensorboard")),
            ("wandb", _installed("wandb")),
            ("mlflow", _installed("mlflow") and _installed("sqlalchemy")),
        )
        if ok
    ]
    first = Tracker(_cfg(*backends), tmp_path)
    for step in (1, 2, 3):
        first.log(_row(step, seed=1))
    first.close()  # the killed process: everything it logged is on disk, nothing more comes
    second = Tracker(_cfg(*backends), tmp_path)
    for step in (3, 4, 5):
        second.log(_row(step, seed=2))
    second.close()
    expected = [_row(1, 1), _row(2, 1), _row(3, 2), _row(4, 2), _row(5, 2)]
    assert list(read_jsonl(tmp_path / "metrics.jsonl")) == expected
    if "tensorboard" in backends:
        got = _tensorboard(tmp_path / "tensorboard")
        assert _same(got["perf/rollout_s"], [(r["iteration"], r["perf/rollout_s"]) for r in expected])
    if "wandb" in backends:
        history = _wandb_history(tmp_path)
        assert [step for step, _ in history] == [1, 2, 3, 4, 5]
        assert history[2][1]["perf/rollout_s"] == pytest.approx(_row(3, 1)["perf/rollout_s"])
        assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 2  # one W&B run id, two sessions
    if "mlflow" in backends:
        from mlflow.tracking import MlflowClient

        state = json.loads((tmp_path / "tracking.json").read_text())
        client = MlflowClient(tracking_uri=state["mlflow_uri"])
        steps = sorted(m.step for m in client.get_metric_history(state["mlflow_run_id"], "perf/rollout_s"))
        assert steps == [1, 2, 3, 4, 5]
        assert len(client.search_runs([client.get_experiment_by_name("milepost").experiment_id])) == 1
    if not backends:
        pytest.skip("no tracking backend installed (pip install 'milepost[track]'); metrics.jsonl checked only")


def test_training_png_draws_each_logged_concern(tmp_path: Path) -> None:
    mira = [{"iteration": 0, "phase": "warmup", "rollout/success": 0.9}] + [
        _row(i) | {"rollout/max_length": 0.1, "rollout/completion_tokens": 20.0, "critic/value_auroc": 0.6}
        for i in range(1, 8)
    ]
    sft = [{"step": i, "loss/sft": 3.0 / i, "train/lr": 1e-3, "train/grad_norm": 1.0} for i in range(1, 8)]
    panels = plot_training(tmp_path / "mira.png", {"mira": mira}, "mira")
    assert panels == [
        "rollout success (%)",
        "episode reward",
        "loss",
        "importance weights",
        "answer length (tokens)",
        "answers cut at max_new_tokens (%)",
        "critic quality (MiRA)",
    ]
    assert plot_training(tmp_path / "sft.png", {"sft": sft}, "sft") == ["loss", "learning rate", "gradient norm"]
    both = plot_training(tmp_path / "both.png", {"rl": mira, "sft": sft}, "both")
    assert {"rollout/success", "loss", "learning rate"} <= {*both, "rollout/success"} and "loss" in both
    assert plot_training(tmp_path / "none.png", {"x": [{"iteration": 0, "phase": "warmup"}]}, "x") == []
    assert not (tmp_path / "none.png").exists()
    assert all((tmp_path / f"{n}.png").stat().st_size > 10_000 for n in ("mira", "sft", "both"))


def test_compare_puts_training_runs_side_by_side(tmp_path: Path, capsys: Any) -> None:
    """Two training runs without evaluations (an RL run with periodic evaluations, an SFT run): the table of
    curves and one training.png whose panels hold both runs."""
    rl, sft = tmp_path / "rl", tmp_path / "sft"
    for run, rows in (
        (rl, [_row(i) | {"rollout/max_length": 0.05 * i} for i in range(1, 7)]),
        (sft, [{"step": i, "loss/sft": 3.0 / i, "train/lr": 1e-3} for i in range(1, 7)]),
    ):
        run.mkdir()
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (rl / "eval.jsonl").write_text(json.dumps({"iteration": 6, "levels": _levels(0.75)}) + "\n")
    out = tmp_path / "cmp"
    assert main(["compare", str(rl), str(sft), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "![training curves side by side](training.png)" in text
    assert "| rl | rollout/success | 6 |" in text and "| sft | loss/sft | 6 |" in text
    assert (out / "training.png").stat().st_size > 10_000
    assert {"success.png", "max_length.png", "sft_loss.png"} <= {p.name for p in out.iterdir()}


REPO = Path(__file__).resolve().parents[1]


def test_old_metric_names_are_read_plotted_and_compared_under_todays(tmp_path: Path, capsys: Any) -> None:
    """Run folders written before ``loss/`` and ``is/`` (``train/loss``, ``train/sft_loss``,
    ``train/mean_weight``, ...): their first rows, copied from two committed results, are read under today's
    names, drawn in the loss and importance-weight panels, and compared in the ``loss/sft`` row."""
    rl, sft = tmp_path / "rl", tmp_path / "sft"
    for run, source in (
        (rl, REPO / "docs/results/technique-rl-medium/train_metrics.jsonl"),
        (sft, REPO / "docs/results/webshop/sft_metrics.jsonl"),
    ):
        run.mkdir()
        lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:6]
        assert any('"train/loss"' in line or '"train/sft_loss"' in line for line in lines)  # old names
        (run / "metrics.jsonl").write_text("".join(lines))
    old = list(read_jsonl(rl / "metrics.jsonl"))
    new = read_metrics(rl / "metrics.jsonl")
    assert [list(r) for r in new] == [[RENAMED.get(k, k) for k in r] for r in old]  # same order, renamed
    assert new[0]["loss/policy"] == old[0]["train/loss"] and new[0]["is/mean_weight"] == old[0]["train/mean_weight"]
    assert new[0]["train/grad_norm"] == old[0]["train/grad_norm"]  # bookkeeping keeps its name
    assert not any(k in RENAMED for r in new for k in r)
    assert current_names({"iteration": 1, "is/onpolicy_rho": 1.0}) == {"iteration": 1, "is/onpolicy_rho": 1.0}

    assert "importance weights" in plot_training(tmp_path / "rl.png", {"rl": training_rows(rl)}, "rl")
    assert "loss" in plot_training(tmp_path / "sft.png", {"sft": training_rows(sft)}, "sft")
    assert main(["compare", str(rl), str(sft), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert "| sft | loss/sft | 6 |" in text and "train/sft_loss" not in text
    assert (tmp_path / "cmp" / "sft_loss.png").is_file()


# A real run: tiny model, TensorBoard on, killed after its checkpoint, resumed.


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    splits: dict[str, list[Any]] = {"train": [], "test": []}
    for split, count in (("train", 12), ("test", 2)):
        for i in range(count):
            task = generate_easy(4, 3 + i % 2, 7, i + 100 * (split == "test"))
            splits[split].append(make_task(*task, level="S1", split=split, index=i))
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 7})


def _train_cfg(model: Path, data: Path, backends: list[str]) -> TrainConfig:
    return TrainConfig(
        name="tracked",
        model=str(model),
        data=str(data),
        env=EnvConfig(size=4, max_steps=4, render="cells"),
        agent=AgentConfig(memory_k=1, max_new_tokens=12),
        sft=SFTConfig(tasks=4, epochs=1.0, batch_size=2, warmup_steps=1),
        rl=RLConfig(iterations=4, tasks_per_iter=2, samples_per_task=2, minibatches=1, normalisation="none"),
        logging=LoggingConfig(backends=backends),
        threads=1,
        checkpoint_every=2,
    )


@needs_tensorboard
def test_train_and_sft_runs_log_to_tensorboard_resume_once_and_draw_training_png(
    tiny_model_dir: Path, data4: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from milepost.training import trainer
    from milepost.training.sft import train_sft

    cfg = _train_cfg(tiny_model_dir, data4, ["tensorboard"])
    real_update, calls = trainer.update, []

    def crashing_update(*args: Any, **kwargs: Any) -> dict[str, float]:
        calls.append(1)
        if len(calls) == 4:  # iteration 4: rows 1-3 are written, the last checkpoint is at 2
            raise RuntimeError("simulated crash")
        return real_update(*args, **kwargs)

    with monkeypatch.context() as mp:
        mp.setattr(trainer, "update", crashing_update)
        with pytest.raises(RuntimeError, match="simulated crash"):
            trainer.train_rl(cfg, tmp_path / "rl", progress=False)
    assert [step for step, _ in _tensorboard(tmp_path / "rl" / "tensorboard")["rollout/success"]] == [1, 2, 3]
    trainer.train_rl(cfg, tmp_path / "rl", resume=True, progress=False)
    rows = list(read_jsonl(tmp_path / "rl" / "metrics.jsonl"))
    got = _tensorboard(tmp_path / "rl" / "tensorboard")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    # perf/ timings differ between the sessions: TensorBoard holds the resumed session's step 3, once.
    for name in ("rollout/success", "rollout/reward", "loss/policy", "perf/rollout_s"):
        assert _same(got[name], [(r["iteration"], r[name]) for r in rows])
    assert set(got) == {name for r in rows for name in scalars(r)}
    assert not any(name in RENAMED for r in rows for name in r)  # a new run writes today's names only
    assert {"loss/policy", "is/onpolicy_rho", "train/grad_norm", "train/staleness"} <= set(rows[-1])
    assert (tmp_path / "rl" / "training.png").is_file()

    train_sft(cfg, tmp_path / "sft", progress=False)
    rows = list(read_jsonl(tmp_path / "sft" / "metrics.jsonl"))
    got = _tensorboard(tmp_path / "sft" / "tensorboard")
    assert _same(got["loss/sft"], [(r["step"], r["loss/sft"]) for r in rows])
    assert (tmp_path / "sft" / "training.png").is_file()


def test_rollout_reward_is_the_environments_reward_per_episode() -> None:
    from milepost.training.trainer import rollout_stats
    from milepost.types import Episode, TerminationReason, Turn, zero_terms

    def episode(rewards: list[float]) -> Episode:
        turns = [Turn(i, "", "", [], r, zero_terms(), [], None) for i, r in enumerate(rewards)]
        return Episode("t", "p", 0, 0, TerminationReason.SOLVED, True, 1, len(turns), turns=turns)

    # The mean of the episodes' sums (1.0 and 1.0), not of the turns (2.0 over four turns).
    assert rollout_stats([episode([1.0]), episode([0.0, 0.0, 1.0])])["rollout/reward"] == pytest.approx(1.0)
    assert rollout_stats([episode([1.0]), episode([-1.0, 0.0, -1.0])])["rollout/reward"] == pytest.approx(-0.5)


@needs_tensorboard
def test_the_final_evaluation_reaches_the_backends(tiny_model_dir: Path, data4: Path, tmp_path: Path) -> None:
    """`milepost train --eval` evaluates before the trackers close: eval.jsonl, RUN/eval and TensorBoard all get it."""
    import dataclasses

    from milepost.training import trainer
    from milepost.training.config import EvalConfig

    cfg = _train_cfg(tiny_model_dir, data4, ["tensorboard"])
    cfg = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, iterations=1), eval=EvalConfig(n=1, ks=[1], limit=1))
    trainer.train_rl(cfg, tmp_path / "rl", progress=False, final_eval=True)
    (row,) = list(read_jsonl(tmp_path / "rl" / "eval.jsonl"))
    assert row["iteration"] == 1 and row["final"] is True
    assert (tmp_path / "rl" / "eval" / "report.md").is_file()
    got = _tensorboard(tmp_path / "rl" / "tensorboard")
    evals = {name: points for name, points in got.items() if name.startswith("eval/")}
    assert evals and all(step == 1 for points in evals.values() for step, _ in points)
    assert set(evals) == set(eval_scalars(row["levels"]))
