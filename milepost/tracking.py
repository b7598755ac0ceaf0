"""Experiment tracking: every training metric, fanned out to TensorBoard, W&B and MLflow.

``metrics.jsonl`` stays the source of truth. :class:`Tracker` appends each row there first, then hands the
row's numbers to every backend of ``logging.backends`` under the same names, at the row's step (``iteration``
for ``milepost train``, ``step`` for ``milepost sft``). The names already carry one namespace each:

================  =====================================================================================
``rollout/``      what the rollouts did: success, reward, turns, errors, answer length, max-length share,
                  the policy version that played them
``loss/``         the policy's training objective: ``loss/policy`` (RL: the importance-weighted REINFORCE
                  loss, or MiRA's ``objective: mse`` regression, plus ``mira.kl_coef`` x KL when that is on;
                  mean over the iteration's minibatches) and ``loss/sft`` (SFT: NLL per response token)
``is/``           importance-weight statistics: ``is/mean_weight`` and ``is/masked_frac`` (the REINFORCE
                  objective's weights; not logged by MiRA's MSE objective, which uses none),
                  ``is/onpolicy_rho``, ``_min``, ``_max`` (the first minibatch's geometric-mean ratio
                  trainer / sampler before any step: 1 unless they disagree)
``train/``        the update's bookkeeping, which is neither a loss nor a weight: ``train/lr``,
                  ``train/grad_norm``, the turns, tokens and examples it trained on, ``train/staleness``
                  (updates between the rollouts' policy and the trainer's)
``critic/``       MiRA's critics: AUROC of V, potential MSE, completion tau, and their own training losses
                  (``critic/value_loss``, ``critic/potential_loss``: kept beside the critics' quality, since
                  ``loss/`` is the policy's objective)
``mira/``         MiRA's shaping coefficient and raw advantages
``curriculum/``   MiRA's failure curriculum
``eval/``         periodic evaluations (``eval/LEVEL/avg``, ``eval/LEVEL/pass_at_K``; their source is
                  ``eval.jsonl``)
``perf/``         wall-clock seconds and throughput
================  =====================================================================================

Run folders written before ``loss/`` and ``is/`` existed hold ``train/loss``, ``train/mean_weight``, ...:
:data:`RENAMED` maps each old name to its new one, and :func:`read_metrics` (what every reader of
``metrics.jsonl`` uses) applies it, so old and new runs are plotted and compared under the same names.

Resuming never duplicates a point. The first row a session logs marks where it starts: rows of
``metrics.jsonl`` at or past that step (written by the killed session after its last checkpoint) are dropped
before the new ones are appended; TensorBoard gets ``purge_step`` there, so its reader drops the old
session's events from that step on; W&B and MLflow, whose points cannot be taken back, continue the same run
(ids kept in ``tracking.json``) and skip the steps the killed session had already sent.

The tracker writes rows and never draws: the trainers draw ``training.png`` from ``metrics.jsonl`` when a session
ends (``milepost.evaluation.plots.plot_training_log``), so imports run plots -> tracking, never back.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from milepost.errors import InputError
from milepost.io import append_jsonl, atomic_write_json, atomic_write_jsonl, read_jsonl

BACKENDS = ("tensorboard", "wandb", "mlflow")
MODULES = {"tensorboard": "torch.utils.tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
"""What each backend imports; ``torch.utils.tensorboard`` fails to import without the ``tensorboard`` package."""
STEP_KEYS = ("iteration", "step")
STATE_FILE = "tracking.json"
_BAD_NAME = re.compile(r"[^\w./\- :]")  # MLflow's rule for metric names, the strictest of the three


@dataclass
class LoggingConfig:
    """Where training metrics go besides ``metrics.jsonl`` (always written; the source of truth)."""

    backends: list[str] = field(default_factory=list)
    """any of tensorboard (RUN/tensorboard), wandb (W&B; WANDB_MODE=offline writes RUN/wandb only) and mlflow
    (``logging.mlflow_uri``); they need the ``track`` extra: pip install 'milepost[track]'"""
    project: str = "milepost"
    """W&B project and MLflow experiment of the run (the run is named after ``name``)"""
    mlflow_uri: str = ""
    """MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else a SQLite store in RUN/mlflow.db)"""

    def __post_init__(self) -> None:
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown:
            raise ValueError(f"logging.backends: {unknown[0]!r} is not one of {', '.join(BACKENDS)}")
        if len(set(self.backends)) != len(self.backends):
            raise ValueError(f"logging.backends: {self.backends} names a backend twice")
        if not self.project.strip():
            raise ValueError("logging.project: must not be empty")


def check_installed(backends: Sequence[str]) -> None:
    """Import each backend's library once, so a missing one stops the run before it starts.

    Raises:
        InputError: naming the first backend whose library does not import, and the extra that brings it.
    """
    for name in backends:
        try:
            importlib.import_module(MODULES[name])
        except ImportError as exc:
            raise InputError(
                f"logging.backends: {name} is configured but not installed ({exc.msg}); "
                "pip install 'milepost[track]' or remove it from logging.backends"
            ) from None


RENAMED = {
    "train/loss": "loss/policy",
    "train/sft_loss": "loss/sft",
    "train/mean_weight": "is/mean_weight",
    "train/masked_frac": "is/masked_frac",
    "train/onpolicy_rho": "is/onpolicy_rho",
    "train/onpolicy_rho_min": "is/onpolicy_rho_min",
    "train/onpolicy_rho_max": "is/onpolicy_rho_max",
}
"""Metric names older run folders hold -> today's names (losses moved to ``loss/``, importance weights to ``is/``)."""


def current_names(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with every old metric name (:data:`RENAMED`) replaced by today's, in place and order."""
    return {RENAMED.get(key, key): value for key, value in row.items()}


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` under today's metric names, whichever version of milepost wrote it."""
    return [current_names(row) for row in read_jsonl(path)]


def step_of(row: Mapping[str, Any]) -> int:
    """The x value of a metrics row: its ``iteration`` (RL) or ``step`` (SFT)."""
    for key in STEP_KEYS:
        if isinstance(row.get(key), int):
            return int(row[key])
    raise ValueError(f"metrics row without an integer iteration or step: {sorted(row)}")


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's metrics: every ``namespace/name`` key with a finite number (a NaN is stored as null and
    skipped; ``iteration``, ``step``, ``phase`` and ``warmup`` are the row's coordinates, not metrics)."""
    out = {}
    for key, value in row.items():
        if "/" in key and isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[key] = float(value)
    return out


def eval_scalars(levels: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``eval/LEVEL/avg``, ``eval/LEVEL/pass_at_K`` and ``eval/LEVEL/subgoal_fraction`` of an evaluation's
    per-level results (``metrics.json``'s ``levels``)."""
    out = {}
    for lv in levels:
        prefix = "eval/" + _BAD_NAME.sub("_", str(lv["level"]))
        out[f"{prefix}/avg"] = float(lv["avg"]["value"])
        for k, est in lv.get("pass_at", {}).items():
            out[f"{prefix}/pass_at_{k}"] = float(est["value"])
        if lv.get("subgoal_fraction") is not None:
            out[f"{prefix}/subgoal_fraction"] = float(lv["subgoal_fraction"])
    return {k: v for k, v in out.items() if math.isfinite(v)}


class Sink(Protocol):
    """One tracking backend: takes a step's metrics, and is closed once."""

    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class TensorBoardSink:
    """Scalars in ``RUN/tensorboard`` (``tensorboard --logdir RUN/tensorboard``).

    ``purge_step``: the step this session starts at; TensorBoard's readers drop every event of earlier sessions
    at or past it, so a resumed run shows each step once.
    """

    def __init__(self, log_dir: Path, purge_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def log(self, metrics: dict[str, float], step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()  # a killed run keeps every point it logged

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run (``WANDB_MODE=offline`` keeps it in ``RUN/wandb`` for ``wandb sync``); a resumed training
    run continues the same W&B run (``run_id``)."""

    def __init__(self, run_dir: Path, run_id: str, name: str, project: str, config: dict[str, Any]) -> None:
        import wandb

        settings = wandb.Settings(console="off", x_disable_stats=True, disable_git=True, silent=True)
        self.run = wandb.init(
            project=project,
            name=name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
            settings=settings,
            reinit="create_new",
        )

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


class MLflowSink:
    """An MLflow run in experiment ``project`` of the store at ``uri``, the config's fields as its parameters
    (``rl.lr``, ...); a resumed run continues ``run_id``."""

    def __init__(
        self, uri: str, run_id: str | None, name: str, project: str, run_dir: Path, config: dict[str, Any]
    ) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        if run_id is None:
            experiment = self.client.get_experiment_by_name(project)
            experiment_id = (
                experiment.experiment_id if experiment is not None else self.client.create_experiment(project)
            )
            run = self.client.create_run(experiment_id, run_name=name, tags={"milepost.run_dir": str(run_dir)})
            run_id = run.info.run_id
            params = [Param(k, str(v)) for k, v in flatten(config).items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters per batch
                self.client.log_batch(run_id, params=params[i : i + 100])
        else:
            self.client.update_run(run_id, status="RUNNING")
        self.run_id: str = run_id

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"rl": {"lr": 1e-4}}`` -> ``{"rl.lr": 1e-4}`` (lists stay values)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def mlflow_uri(configured: str, run_dir: Path) -> str:
    """``logging.mlflow_uri``, else ``$MLFLOW_TRACKING_URI``, else a SQLite store in the run folder."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{run_dir.resolve() / 'mlflow.db'}"


class Tracker:
    """The metrics log of one training session: ``metrics.jsonl`` plus the configured backends.

    Build it while the run starts, before anything rewrites ``metrics.jsonl``: it reads there how far an
    earlier session of the run got, and a backend whose library is missing stops the start with one line.
    ``enabled=False`` (ranks other than 0 under torchrun) logs nothing.

    Raises:
        InputError: a configured backend that is not installed or does not start (one line).
    """

    def __init__(self, cfg: Any, run_dir: str | Path, *, enabled: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "metrics.jsonl"
        self.enabled = enabled
        self.logging: LoggingConfig = cfg.logging
        self.name: str = cfg.name
        self.sinks: dict[str, Sink] = {}
        self.started: int | None = None  # the first step this session logged
        self.sent_until = -1  # the last step an earlier session of this run sent to the backends
        check_installed(self.logging.backends)
        if not enabled:
            return
        rows = list(read_jsonl(self.path)) if self.path.is_file() else []
        self.sent_until = max((step_of(r) for r in rows), default=-1)
        state_path = self.run_dir / STATE_FILE
        state = dict(read_state(state_path))
        try:
            config = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type) else {}
            if "wandb" in self.logging.backends:
                state.setdefault("wandb_run_id", uuid.uuid4().hex[:12])
                self.sinks["wandb"] = WandbSink(
                    self.run_dir, state["wandb_run_id"], self.name, self.logging.project, config
                )
            if "mlflow" in self.logging.backends:
                uri = mlflow_uri(self.logging.mlflow_uri, self.run_dir)
                known = state.get("mlflow_run_id") if state.get("mlflow_uri") == uri else None
                sink = MLflowSink(uri, known, self.name, self.logging.project, self.run_dir, config)
                state |= {"mlflow_uri": uri, "mlflow_run_id": sink.run_id}
                self.sinks["mlflow"] = sink
        except InputError:
            raise
        except Exception as exc:  # a backend's own failure (bad URI, unwritable store): one line, before training
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.close()
            raise InputError(f"logging.backends: could not start tracking ({first})") from exc
        if state:
            atomic_write_json(state_path, state)

    def _begin(self, step: int) -> None:
        """This session's first row: drop the rows an earlier session wrote at or past ``step``, and open
        TensorBoard with ``purge_step`` there."""
        self.started = step
        if self.path.is_file():
            rows = list(read_jsonl(self.path))
            kept = [r for r in rows if step_of(r) < step]
            if len(kept) < len(rows):
                atomic_write_jsonl(self.path, kept)
        if "tensorboard" in self.logging.backends:
            self.sinks["tensorboard"] = TensorBoardSink(self.run_dir / "tensorboard", purge_step=step)

    def log(self, row: dict[str, Any]) -> None:
        """Append ``row`` to ``metrics.jsonl``, then send its metrics to every backend at the row's step."""
        if not self.enabled:
            return
        step = step_of(row)
        if self.started is None:
            self._begin(step)
        append_jsonl(self.path, row)
        self._send(scalars(row), step)

    def log_eval(self, step: int, levels: Sequence[Mapping[str, Any]]) -> None:
        """Send a periodic evaluation's per-level results (``eval/...``) to the backends at ``step``."""
        if self.enabled:
            self._send(eval_scalars(levels), step)

    def _send(self, metrics: dict[str, float], step: int) -> None:
        for name, sink in self.sinks.items():
            # TensorBoard purges what an earlier session logged from this session's start; W&B and MLflow
            # cannot, so the steps they already hold are not sent again.
            if name != "tensorboard" and step <= self.sent_until:
                continue
            sink.log(metrics, step)

    def close(self) -> None:
        """Close every backend. ``metrics.jsonl`` is complete; ``evaluation.plots.plot_training_log`` draws it."""
        for sink in self.sinks.values():
            sink.close()
        self.sinks = {}


def read_state(path: Path) -> dict[str, str]:
    """The backend run ids an earlier session of this run kept (``tracking.json``), or none."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{path}: not a tracking state file (JSON object of run ids)") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError(f"{path}: not a tracking state file (JSON object of run ids)")
    return data
