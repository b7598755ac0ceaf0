"""``milepost eval --workers N``: an evaluation's episodes played on N Ray actors.

The runner (``milepost.evaluation.runner.evaluate``) takes any :class:`~milepost.evaluation.runner.EpisodePool`
and never imports this module; the commands that offer ``--workers`` build the pool here and hand it over, so
imports run commands -> eval_pool -> (runner, workers), and the workers know nothing of evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import Job
from milepost.backends.base import parse_policy_spec
from milepost.distributed.workers import WorkerKit, default_chunk_size, play_on_workers
from milepost.envs import make_env
from milepost.errors import InputError
from milepost.evaluation.runner import EvalSpec, build_agent, build_policy
from milepost.types import Episode

log = logging.getLogger(__name__)


@dataclass
class EvalKit:
    """The kit ``milepost eval`` hands its workers: the policy and agent an :class:`EvalSpec` names."""

    spec: EvalSpec
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> WorkerKit:
        policy = build_policy(self.spec)
        name, kwargs = self.spec.env, dict(self.env_kwargs)
        return WorkerKit(lambda: make_env(name, **kwargs), policy, self.spec.settings, build_agent(self.spec, policy))


@dataclass(frozen=True)
class RayEvalPool:
    """Plays an evaluation's jobs on ``workers`` Ray actors started for each call (``play_on_workers``); each
    actor builds the policy the spec names. The episodes equal the in-process ones."""

    workers: int

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise InputError(f"--workers must be >= 0, got {self.workers}")

    def play(
        self,
        spec: EvalSpec,
        env_kwargs: dict[str, Any],
        jobs: list[Job],
        *,
        on_episode: Callable[[Episode], None],
        progress: bool,
    ) -> None:
        run = play_on_workers(
            EvalKit(spec, env_kwargs),
            jobs,
            workers=self.workers,
            seed=spec.seed,
            policy_name=str(parse_policy_spec(spec.policy)),
            on_episode=on_episode,
            chunk_size=eval_chunk_size(len(jobs), self.workers, spec.settings.batch_size),
            progress=progress,
        )
        c = run.counts
        log.info("%d episodes on %d workers, %d retried, %d lost", c.collected, self.workers, c.retried, c.exhausted)


def eval_chunk_size(jobs: int, workers: int, batch_size: int) -> int:
    """Episodes per actor call of an evaluation: half the jobs per worker (the pool's default), at most two of
    the worker's batches.

    A call's episodes reach ``episodes.jsonl`` (and the progress line) only when the whole call returns, and a
    lost call is played again whole. At half the jobs per worker, 160 SmolLM2 web-shop episodes on 2 workers
    came back in four 20-minute pieces. Two batches keep the worker's continuous batch full except for each
    call's tail, and bound what a lost or interrupted call costs to two batches' time.
    """
    return min(default_chunk_size(jobs, workers), 2 * max(1, batch_size))


def eval_pool(workers: int) -> RayEvalPool | None:
    """The pool ``--workers N`` asks for: None for 0 (play in this process).

    Raises:
        InputError: ``workers`` is negative.
    """
    if workers < 0:
        raise InputError(f"--workers must be >= 0, got {workers}")
    return RayEvalPool(workers) if workers else None
