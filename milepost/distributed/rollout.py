"""``rollout.workers: N``: the trainer's rollouts played by N Ray actors, each with its own copy of the policy.

:class:`WorkerSource` wraps the configured rollout source (``milepost.rollout``; the ``hf`` kind): its backend
stays the trainer's (periodic evaluation runs in-process), its ``sync`` also pushes the trainer's weights to
every actor (once into Ray's object store, loaded by each), and its ``play`` hands the iteration's jobs to the
actors through the exactly-once ledger (``workers.WorkerPool``). The actors start at the first ``play``, from
the weights written to ``RUN/rollout-workers`` at the start, then loaded with each push.

The episodes come back in the order the in-process lock-step loop finishes them (the trainer advances every
episode of an iteration together: by the turn each one ended, then by job), so the advantages, the minibatch
shuffle and the update see the same sequence as with ``rollout.workers: 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from milepost.agent.loop import Job
from milepost.distributed.workers import WorkerKit, WorkerPool
from milepost.errors import InputError
from milepost.types import Episode, TerminationReason


@dataclass
class TrainKit:
    """A training worker's kit: the policy loaded from ``model_dir`` as the trainer loads it, the config's
    environments (board ``size``), agent settings and agent."""

    cfg: Any  # milepost.training.config.TrainConfig
    model_dir: str
    size: int

    def __call__(self) -> WorkerKit:
        from milepost.agent.loop import BackendPolicy
        from milepost.backends.hf import HFBackend, load_model, resolve_device_dtype
        from milepost.training.setup import agent_settings, env_factory, make_agent

        cfg = self.cfg
        model, tokenizer = load_model(self.model_dir, *resolve_device_dtype(cfg.device, "float32"))
        backend = HFBackend(
            model=model, tokenizer=tokenizer, name=f"hf:{cfg.name}", autocast=torch.bfloat16 if cfg.bf16 else None
        )
        settings = agent_settings(cfg, batch_size=cfg.rl.tasks_per_iter * cfg.rl.samples_per_task)
        return WorkerKit(env_factory(cfg, self.size), BackendPolicy(backend, settings), settings, make_agent(cfg))


def lockstep_order(episodes: list[Episode], jobs: list[Job]) -> list[Episode]:
    """``episodes`` (one per job) in the order ``run_episodes`` finishes them when every job is live at once:
    by the turn an episode ended (a backend failure ends one before its turn is recorded), then by job."""
    index = {(j.task.task_id, j.sample): i for i, j in enumerate(jobs)}
    failed = (TerminationReason.BACKEND_ERROR, TerminationReason.CONTEXT_OVERFLOW)

    def key(ep: Episode) -> tuple[int, int]:
        ended = len(ep.turns) if ep.termination in failed else len(ep.turns) - 1
        return ended, index[(ep.task_id, ep.sample)]

    return sorted(episodes, key=key)


class WorkerSource:
    """A :class:`milepost.rollout.RolloutSource` whose episodes are played by Ray actors (see the module doc)."""

    def __init__(self, cfg: Any, inner: Any, tokenizer: Any, run_dir: Path) -> None:
        from milepost.distributed.fsdp import world_size

        if cfg.rollout.backend != "hf":
            raise InputError("rollout.workers: each worker holds its own hf model; use rollout.backend hf")
        if world_size() > 1:
            raise InputError("rollout.workers with several torchrun processes is not supported; use one of them")
        self.cfg = cfg
        self.inner = inner
        self.tokenizer = tokenizer
        self.folder = run_dir / "rollout-workers"
        self.name = f"{inner.name} on {cfg.rollout.workers} workers"
        self.pool: WorkerPool | None = None
        self.state: dict[str, torch.Tensor] | None = None

    @property
    def backend(self) -> Any:
        return self.inner.backend

    @backend.setter
    def backend(self, value: Any) -> None:
        self.inner.backend = value

    @property
    def version(self) -> int:
        return int(self.inner.version)

    @version.setter
    def version(self, value: int) -> None:
        self.inner.version = value

    def sync(self, model: Any, tokenizer: Any, version: int) -> float:
        import time

        from milepost.rollout import write_weights

        start = time.perf_counter()
        self.inner.sync(model, tokenizer, version)
        if not (self.folder / "config.json").is_file():
            write_weights(model, tokenizer, self.folder)  # the actors' starting point
        self.state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        if self.pool is not None:
            self.pool.push(self.state)
        return time.perf_counter() - start

    def play(self, jobs: list[Job], seed: int) -> list[Episode]:
        if self.pool is None:
            self.pool = WorkerPool(TrainKit(self.cfg, str(self.folder), jobs[0].task.size), self.cfg.rollout.workers)
            if self.state is not None:
                self.pool.push(self.state)
        run = self.pool.play(jobs, seed=seed, policy_name=f"hf:{self.cfg.name}", progress=False)
        return lockstep_order(run.episodes, jobs)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.inner.close()
