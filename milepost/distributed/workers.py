"""Rollout / evaluation workers on Ray: N actors play chunks of episodes; the driver's ledger loses none.

Each actor holds its environments and its policy (a local ``hf`` / ``vllm`` model, a client of a shared server,
or a scripted policy), built once inside the actor by a picklable *kit builder*. The driver hands each idle
actor a chunk of jobs, collects the finished episodes (``ledger.EpisodeLedger``: first result per id wins) and,
when an actor dies (``ray.exceptions.ActorDiedError``: the process exited, the node went away), puts the
chunk's episodes back on the queue, replaces the actor and carries on. An episode's seed derives from its id,
so a replayed episode is the episode the dead worker would have returned; ``--workers 2`` equals
``--workers 0`` episode for episode.

Ray is an optional extra (``pip install 'milepost[ray]'``). Without ``RAY_ADDRESS`` the driver starts a local
cluster; with it (``ray start --head`` on a cluster) it joins that cluster.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import Agent, AgentSettings, Job, run_episodes
from milepost.distributed.ledger import Attempt, EpisodeId, EpisodeLedger, LedgerCounts, episode_id
from milepost.errors import InputError
from milepost.progress import progress_bar
from milepost.types import Episode

log = logging.getLogger(__name__)


@dataclass
class WorkerKit:
    """What one worker plays with: an environment factory, a policy, the agent settings and the agent."""

    make_env: Callable[[], Any]
    policy: Any
    settings: AgentSettings
    agent: Agent | None = None


KitBuilder = Callable[[], WorkerKit]
"""Builds a worker's kit inside the actor (pickled to it: a module-level class or function, not a lambda over
driver state that holds a model)."""


@dataclass
class EvalKit:
    """The kit ``milepost eval`` hands its workers: the policy and agent an :class:`EvalSpec` names."""

    spec: Any  # milepost.evaluation.runner.EvalSpec (not imported here: runner imports this module)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> WorkerKit:
        from milepost.envs import make_env
        from milepost.evaluation.runner import build_agent, build_policy

        policy = build_policy(self.spec)
        name, kwargs = self.spec.env, dict(self.env_kwargs)
        return WorkerKit(lambda: make_env(name, **kwargs), policy, self.spec.settings, build_agent(self.spec, policy))


class RolloutWorker:
    """The actor: builds its kit once, then plays chunks of jobs with ``agent.loop.run_episodes``.

    ``faults`` injects deaths for tests and benchmarks: ``{episode id: n}`` makes the first ``n`` attempts of
    that episode kill the worker process (``os._exit``) as the episode finishes, before the chunk is returned.
    """

    def __init__(self, build: KitBuilder, faults: dict[EpisodeId, int] | None = None) -> None:
        try:
            import torch

            torch.set_num_threads(1)  # one core per actor: Ray schedules actors by CPU
        except ImportError:  # scripted policies need no torch
            pass
        self.faults = dict(faults or {})
        self.error: str | None = None
        self.kit: WorkerKit | None = None
        try:
            self.kit = build()
        except InputError as exc:  # bad input (a model path that is not there): the driver's one-line error
            self.error = str(exc)

    def ready(self) -> str | None:
        """None when the kit is built, else the one-line reason it could not be."""
        return self.error

    def pid(self) -> int:
        return os.getpid()

    def load_weights(self, state_dict: Any) -> None:
        """Copy new weights into the worker's local model (the trainer's weight push)."""
        backend = getattr(self.kit.policy if self.kit else None, "backend", None)
        model = getattr(backend, "model", None)
        if model is None:
            raise InputError("this worker's policy holds no local model to load weights into")
        model.load_state_dict(state_dict)

    def play(self, chunk: list[Attempt], seed: int) -> list[dict[str, Any]]:
        """Play the chunk's jobs (run seed ``seed``); the episodes as dicts (``Episode.to_dict``)."""
        if self.kit is None:
            raise InputError(self.error or "worker kit not built")
        doomed = {episode_id(a.job) for a in chunk if self.faults.get(episode_id(a.job), 0) > a.attempt}

        def check(ep: Episode) -> None:
            if (ep.task_id, ep.sample) in doomed:
                os._exit(17)  # injected fault: the process dies, its chunk never returns

        kit = self.kit
        episodes = run_episodes(
            kit.make_env,
            [a.job for a in chunk],
            kit.policy,
            kit.settings,
            seed=seed,
            on_episode=check,
            progress=False,
            agent=kit.agent,
        )
        return [ep.to_dict() for ep in episodes]


def worker_gpus() -> float:
    """GPUs each actor asks Ray for: ``MILEPOST_WORKER_GPUS`` (default 0; 1 for an ``hf`` model per GPU, 0.5 for
    two per GPU). Ray hides the GPUs from an actor that asks for none."""
    text = os.environ.get("MILEPOST_WORKER_GPUS", "0")
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InputError(f"MILEPOST_WORKER_GPUS must be a number >= 0, got {text!r}")
    return value


def init_ray(num_cpus: int | None = None) -> Any:
    """Import Ray and join the cluster ``RAY_ADDRESS`` names, or start a local one (``num_cpus`` cores)."""
    try:
        import ray
    except ImportError:
        raise InputError("--workers needs Ray: pip install 'milepost[ray]'") from None
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, logging_level=logging.WARNING)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    return ray


@dataclass
class WorkerRun:
    """The outcome of :func:`play_on_workers`."""

    episodes: list[Episode]
    """one per submitted job, in job order"""
    counts: LedgerCounts
    recoveries_s: list[float] = field(default_factory=list)
    """per actor death: seconds from the death being seen to the replacement actor being ready"""


class WorkerPool:
    """``workers`` Ray actors that stay up between calls (a trainer's rollouts: the model loads once).

    Args:
        build: builds each actor's kit (environments, policy, settings, agent) inside the actor.
        workers: actors (>= 1), one CPU each.
        faults: injected worker deaths (see :class:`RolloutWorker`); tests and benchmarks only.
    """

    def __init__(self, build: KitBuilder, workers: int, faults: dict[EpisodeId, int] | None = None) -> None:
        if workers < 1:
            raise InputError(f"workers must be >= 1, got {workers}")
        self.ray = init_ray()
        self.build = build
        self.faults = faults
        self.weights: Any = None  # the object ref of the last pushed weights: replacements load them too
        options = {"num_cpus": 1, "num_gpus": worker_gpus(), "max_restarts": 0, "max_task_retries": 0}
        self.actor_class = self.ray.remote(**options)(RolloutWorker)
        self.actors = [self.actor_class.remote(build, faults) for _ in range(workers)]
        try:
            for actor in self.actors:
                self._check_ready(actor)
        except BaseException:
            self.close()
            raise

    def _check_ready(self, actor: Any) -> None:
        error = self.ray.get(actor.ready.remote())
        if error is not None:
            raise InputError(error)
        if self.weights is not None:
            self.ray.get(actor.load_weights.remote(self.weights))

    def _replace(self, i: int) -> None:
        self.ray.kill(self.actors[i], no_restart=True)
        self.actors[i] = self.actor_class.remote(self.build, self.faults)
        self._check_ready(self.actors[i])

    def push(self, state_dict: dict[str, Any]) -> None:
        """Load new weights into every actor's model (put in the object store once, read by each)."""
        self.weights = self.ray.put(state_dict)
        self.ray.get([actor.load_weights.remote(self.weights) for actor in self.actors])

    def play(
        self,
        jobs: Iterable[Job],
        *,
        seed: int,
        policy_name: str = "",
        on_episode: Callable[[Episode], None] | None = None,
        max_attempts: int = 3,
        chunk_size: int | None = None,
        progress: bool = True,
    ) -> WorkerRun:
        """Play ``jobs`` on the actors; every job ends in exactly one episode (see :func:`play_on_workers`)."""
        from ray.exceptions import ActorUnavailableError, RayActorError

        ray = self.ray
        jobs = list(jobs)
        ledger = EpisodeLedger(jobs, seed=seed, max_attempts=max_attempts, policy=policy_name)
        workers = len(self.actors)
        if chunk_size is None:
            chunk_size = max(1, math.ceil(len(jobs) / (2 * workers)))
        recoveries: list[float] = []
        bar = progress_bar(
            total=len(jobs), desc=f"episodes [{workers} workers]", enabled=progress, unit="ep", leave=False
        )

        def emit(ep: Episode) -> None:
            if on_episode is not None:
                on_episode(ep)
            bar.update(1)

        inflight: dict[Any, tuple[int, list[Attempt]]] = {}
        idle = list(range(workers))
        try:
            while not ledger.done:
                while idle:
                    chunk = ledger.take(chunk_size)
                    if not chunk:
                        break
                    i = idle.pop(0)
                    inflight[self.actors[i].play.remote(chunk, seed)] = (i, chunk)
                if not inflight:  # nothing queued and nothing running, yet not done: a ledger bug, not a hang
                    raise RuntimeError("episode ledger stalled with episodes neither queued nor running")
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    i, chunk = inflight.pop(ref)
                    try:
                        rows = ray.get(ref)
                    except (RayActorError, ActorUnavailableError) as exc:
                        seen = time.perf_counter()
                        log.warning("worker %d died (%s); its %d episodes go back", i, type(exc).__name__, len(chunk))
                        for ep in ledger.lost(chunk, f"worker lost: {type(exc).__name__}"):
                            emit(ep)
                        self._replace(i)
                        recoveries.append(time.perf_counter() - seen)
                        idle.append(i)
                        continue
                    for row in rows:
                        ep = Episode.from_dict(row)
                        if ledger.collect(ep):
                            emit(ep)
                    idle.append(i)
        finally:
            bar.close()
            for ref in inflight:  # an interrupted call: nothing of it may land in a later one
                ray.cancel(ref, force=True)
        episodes = [ledger.results[episode_id(job)] for job in jobs]
        return WorkerRun(episodes, ledger.counts, recoveries)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []


def play_on_workers(
    build: KitBuilder,
    jobs: Iterable[Job],
    *,
    workers: int,
    seed: int,
    policy_name: str = "",
    on_episode: Callable[[Episode], None] | None = None,
    max_attempts: int = 3,
    chunk_size: int | None = None,
    faults: dict[EpisodeId, int] | None = None,
    progress: bool = True,
) -> WorkerRun:
    """Play ``jobs`` on ``workers`` Ray actors started for this call; every job ends in exactly one episode.

    Args:
        build: builds each actor's kit (environments, policy, settings, agent) inside the actor.
        jobs: the episodes to play; ids ``(task_id, sample)`` distinct.
        workers: actors (>= 1), one CPU each.
        seed: the run seed (episode seeds derive from it and the episode id, as in-process).
        policy_name: names the policy in the records of infrastructure failures.
        on_episode: called once per episode id, as it is collected (``episodes.jsonl`` is appended this way).
        max_attempts: lost attempts per episode before it is recorded as an infrastructure failure.
        chunk_size: jobs per actor call (default: half the jobs per worker, so a death costs little).
        faults: injected worker deaths (see :class:`RolloutWorker`); tests and benchmarks only.
        progress: show a progress bar of collected episodes.
    """
    if workers < 1:
        raise InputError(f"--workers must be >= 0, got {workers}")
    pool = WorkerPool(build, workers, faults)
    try:
        return pool.play(
            jobs,
            seed=seed,
            policy_name=policy_name,
            on_episode=on_episode,
            max_attempts=max_attempts,
            chunk_size=chunk_size,
            progress=progress,
        )
    finally:
        pool.close()
