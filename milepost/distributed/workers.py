"""Rollout / evaluation workers on Ray: N actors play chunks of episodes; the driver's ledger loses none.

Each actor holds its environments and its policy (a local ``hf`` / ``vllm`` model, a client of a shared server,
or a scripted policy), built once inside the actor by a picklable *kit builder*. The driver hands each idle
actor a chunk of jobs, collects the finished episodes (``ledger.EpisodeLedger``: first result per id wins) and,
when a chunk comes back as an error or not at all (the actor or its node died, Ray's memory monitor killed it,
the result object was lost, the actor's code raised, no answer within the timeout: ``recovery``), puts the
chunk's episodes back on the queue, replaces the actor when it is gone, and carries on. An episode's seed
derives from its id, so a replayed episode is the episode the lost call would have returned; ``--workers 2``
equals ``--workers 0`` episode for episode.

Ray is an optional extra (``pip install 'milepost[ray]'``). Without ``RAY_ADDRESS`` the driver starts a local
one-node cluster that listens on 127.0.0.1 only (:func:`init_ray`); with it (``ray start --head`` on a cluster)
it joins that cluster, whose network exposure is its operator's to secure (``docs/scaling.md``).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import Agent, AgentSettings, Job, run_episodes
from milepost.distributed.ledger import Attempt, EpisodeId, EpisodeLedger, LedgerCounts, episode_id
from milepost.distributed.recovery import Recovery, WorkersLost, WorkerTimeouts, reason, recovery
from milepost.errors import InputError, MilepostError
from milepost.progress import progress_bar
from milepost.types import Episode

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


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


@dataclass(frozen=True)
class Fault:
    """An injected failure (tests and benchmarks): the first ``times`` attempts of an episode end, as the episode
    finishes and before its chunk is returned, in ``kind``: ``exit`` (the process exits: ``ActorDiedError``),
    ``raise`` (a ``RuntimeError`` in the actor: ``RayTaskError``, the actor lives) or ``hang`` (the actor sleeps
    until the driver's episode timeout kills it)."""

    times: int
    kind: str = "exit"

    def __post_init__(self) -> None:
        if self.kind not in ("exit", "raise", "hang"):
            raise ValueError(f"fault kind must be exit, raise or hang, got {self.kind!r}")


Faults = Mapping[EpisodeId, int | Fault]
"""Injected failures by episode id; an int ``n`` is ``Fault(n, "exit")``."""


class RolloutWorker:
    """The actor: builds its kit once, then plays chunks of jobs with ``agent.loop.run_episodes``.

    ``faults`` injects failures for tests and benchmarks (see :class:`Fault`).
    """

    def __init__(self, build: KitBuilder, faults: Faults | None = None) -> None:
        try:
            import torch

            torch.set_num_threads(1)  # one core per actor: Ray schedules actors by CPU
        except ImportError:  # scripted policies need no torch
            pass
        self.faults = {k: Fault(v) if isinstance(v, int) else v for k, v in (faults or {}).items()}
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
        doomed = {}
        for a in chunk:
            fault = self.faults.get(episode_id(a.job))
            if fault is not None and fault.times > a.attempt:
                doomed[episode_id(a.job)] = fault.kind

        def check(ep: Episode) -> None:
            kind = doomed.get((ep.task_id, ep.sample))
            if kind == "exit":
                os._exit(17)  # the process dies, its chunk never returns
            elif kind == "raise":
                raise RuntimeError(f"injected fault at episode {(ep.task_id, ep.sample)}")
            elif kind == "hang":
                time.sleep(10**6)

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


def default_chunk_size(jobs: int, workers: int) -> int:
    """Jobs per actor call unless the caller sets it: half the jobs per worker, so a lost call costs little."""
    return max(1, math.ceil(jobs / (2 * workers)))


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
    """Import Ray and join the cluster ``RAY_ADDRESS`` names, or start a local one (``num_cpus`` cores) whose
    every server listens on 127.0.0.1 only (a Ray cluster runs any code a client sends it)."""
    try:
        import ray
    except ImportError:
        raise InputError("--workers needs Ray: pip install 'milepost[ray]'") from None
    if ray.is_initialized():
        return ray
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        _start_local_cluster(ray, num_cpus)
    return ray


def _start_local_cluster(ray: Any, num_cpus: int | None) -> None:
    """Start a one-node Ray cluster bound to loopback, and check that it is.

    Ray's gRPC servers (GCS, raylet, every worker's core worker) listen on 127.0.0.1 when the node's address is
    127.0.0.1 and on every interface otherwise (``src/ray/rpc/grpc_server.cc``, ``listen_to_localhost_only``).
    ``ray.init(_node_ip_address="127.0.0.1")`` does not get there on Linux: ``ray/_private/worker.py`` ``init``
    passes it to ``services.resolve_ip_for_localhost``, which swaps a loopback address for the machine's routable
    one. Ray's single-node mode (its default on macOS and Windows) does: with ``ray_constants.ENABLE_RAY_CLUSTER``
    false (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, read once at import in ``ray/_private/ray_constants.py``),
    ``services.get_node_ip_address`` answers 127.0.0.1 (``ray/_private/services.py``) and the GCS, the raylet,
    the workers and the runtime-env agent bind there. The flag is set for the start only (joining a remote
    cluster later in this process needs the routable address; after ``init`` Ray reads the node's own address),
    and the result is checked, so a Ray that changes the mechanism fails closed rather than open.
    """
    from ray._private import ray_constants

    before = getattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, dashboard_host=LOOPBACK, logging_level=logging.WARNING)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
    address = ray.util.get_node_ip_address()
    if address != LOOPBACK:
        ray.shutdown()
        raise MilepostError(
            f"Ray started its local cluster on {address}, not {LOOPBACK}; refusing to expose it. "
            "Start a cluster you have secured and set RAY_ADDRESS (docs/scaling.md)"
        )


@dataclass
class WorkerRun:
    """The outcome of :func:`play_on_workers`."""

    episodes: list[Episode]
    """one per submitted job, in job order"""
    counts: LedgerCounts
    recoveries_s: list[float] = field(default_factory=list)
    """per replaced actor: seconds from the failure being seen to the replacement being ready"""


@dataclass
class _Call:
    """A chunk out on an actor: the actor's slot, the chunk, and the time (``time.monotonic``) it is due by."""

    slot: int
    chunk: list[Attempt]
    due: float


class WorkerPool:
    """``workers`` Ray actors that stay up between calls (a trainer's rollouts: the model loads once).

    Args:
        build: builds each actor's kit (environments, policy, settings, agent) inside the actor.
        workers: actors (>= 1), one CPU each.
        faults: injected failures (see :class:`Fault`); tests and benchmarks only.
        timeouts: how long to wait on Ray (default: :meth:`WorkerTimeouts.from_env`).
    """

    def __init__(
        self,
        build: KitBuilder,
        workers: int,
        faults: Faults | None = None,
        timeouts: WorkerTimeouts | None = None,
    ) -> None:
        if workers < 1:
            raise InputError(f"workers must be >= 1, got {workers}")
        self.timeouts = timeouts if timeouts is not None else WorkerTimeouts.from_env()
        self.ray = init_ray()
        self.build = build
        self.faults = faults
        self.weights: Any = None  # the object ref of the last pushed weights: replacements load them too
        # No Ray-side restarts or task retries: the ledger replays lost episodes exactly once (ledger.py).
        options = {"num_cpus": 1, "num_gpus": worker_gpus(), "max_restarts": 0, "max_task_retries": 0}
        self.actor_class = self.ray.remote(**options)(RolloutWorker)
        # None marks a slot whose actor was lost and could not be started again (retried at the next call).
        self.actors: list[Any] = [self.actor_class.remote(build, faults) for _ in range(workers)]
        try:  # all start at once; each is waited for in turn
            for actor in self.actors:
                self._check_ready(actor)
        except MilepostError:
            self.close()
            raise
        except self._ray_error as exc:
            self.close()
            raise WorkersLost(f"a Ray worker could not start: {self._start_failure(exc)}") from None
        except BaseException:
            self.close()
            raise

    @property
    def _ray_error(self) -> type[BaseException]:
        return self.ray.exceptions.RayError

    def _start_failure(self, exc: BaseException) -> str:
        if isinstance(exc, self.ray.exceptions.GetTimeoutError):
            return (
                f"not ready within {self.timeouts.start:.0f} s (MILEPOST_WORKER_START_TIMEOUT; the cluster may "
                "have no free CPU or GPU for it)"
            )
        return reason(exc)

    def _check_ready(self, actor: Any) -> None:
        """Wait for ``actor``'s kit (and the last pushed weights) within the start timeout; raise what failed."""
        error = self.ray.get(actor.ready.remote(), timeout=self.timeouts.start)
        if error is not None:
            raise InputError(error)
        if self.weights is not None:
            self.ray.get(actor.load_weights.remote(self.weights), timeout=self.timeouts.start)

    def _kill(self, actor: Any) -> None:
        """Stop an actor and whatever it runs. Ray forbids ``ray.cancel(force=True)`` on actor tasks and a plain
        cancel only flags a running one (``ray/_private/worker.py`` ``cancel``): ``ray.kill`` is its way."""
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception as exc:  # already gone, or the cluster is shutting down: nothing left to stop
            log.debug("killing a worker: %s", reason(exc))

    def _restart(self, i: int) -> bool:
        """Replace actor ``i`` by a new one; False (the slot left empty) when the new one does not start."""
        old, self.actors[i] = self.actors[i], None
        if old is not None:
            self._kill(old)
        actor = self.actor_class.remote(self.build, self.faults)
        try:
            self._check_ready(actor)
        except Exception as exc:
            self._kill(actor)
            if recovery(exc) is Recovery.RAISE:
                raise
            left = sum(a is not None for a in self.actors)
            log.warning("worker %d could not be started again (%s); %d left", i, self._start_failure(exc), left)
            return False
        self.actors[i] = actor
        return True

    def _fetch(self, ref: Any, call: _Call) -> list[dict[str, Any]]:
        """The episodes of a finished call (``call`` says which; tests inject failures here)."""
        return self.ray.get(ref, timeout=self.timeouts.fetch)

    def push(self, state_dict: dict[str, Any]) -> None:
        """Load new weights into every actor's model (put in the object store once, read by each); an actor lost
        meanwhile is replaced (the new one loads them as it starts)."""
        self.weights = self.ray.put(state_dict)
        refs = {i: a.load_weights.remote(self.weights) for i, a in enumerate(self.actors) if a is not None}
        for i, ref in refs.items():
            try:
                self.ray.get(ref, timeout=self.timeouts.start)
            except self._ray_error as exc:
                if recovery(exc) is not Recovery.REPLACE:  # the weights do not fit the model: no retry helps
                    raise _cause(exc) from None
                log.warning("worker %d lost while loading weights (%s); replacing it", i, reason(exc))
                self._restart(i)

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
        """Play ``jobs`` on the actors; every job ends in exactly one episode (see :func:`play_on_workers`).

        Raises:
            WorkersLost: every actor was lost and none could be started again (the episodes collected so far
                have been passed to ``on_episode``).
        """
        ray = self.ray
        jobs = list(jobs)
        ledger = EpisodeLedger(jobs, seed=seed, max_attempts=max_attempts, policy=policy_name)
        for i, actor in enumerate(self.actors):
            if actor is None:  # lost in an earlier call and not started again then
                self._restart(i)
        workers = len(self.actors)
        if chunk_size is None:
            chunk_size = default_chunk_size(len(jobs), workers)
        recoveries: list[float] = []
        bar = progress_bar(
            total=len(jobs), desc=f"episodes [{workers} workers]", enabled=progress, unit="ep", leave=False
        )
        inflight: dict[Any, _Call] = {}
        idle = [i for i, actor in enumerate(self.actors) if actor is not None]

        def emit(ep: Episode) -> None:
            if on_episode is not None:
                on_episode(ep)
            bar.update(1)

        def lost(call: _Call, why: str, replace: bool) -> None:
            log.warning("worker %d: %s (its %d episodes go back)", call.slot, why, len(call.chunk))
            for ep in ledger.lost(call.chunk, why):
                emit(ep)
            if not replace:
                idle.append(call.slot)
                return
            seen = time.perf_counter()
            if self._restart(call.slot):
                recoveries.append(time.perf_counter() - seen)
                idle.append(call.slot)

        try:
            while not ledger.done:
                while idle:
                    chunk = ledger.take(chunk_size)
                    if not chunk:
                        break
                    i = idle.pop(0)
                    due = time.monotonic() + self.timeouts.episode * len(chunk)
                    inflight[self.actors[i].play.remote(chunk, seed)] = _Call(i, chunk, due)
                if not inflight:
                    if all(actor is None for actor in self.actors):
                        raise WorkersLost(
                            f"every Ray worker was lost and none could be started again; {ledger.counts.collected} "
                            f"of {len(jobs)} episodes were collected (run again to play the rest)"
                        )
                    raise RuntimeError("episode ledger stalled with episodes neither queued nor running")
                wait_s = max(0.0, min(call.due for call in inflight.values()) - time.monotonic())
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=wait_s)
                if not ready:  # the earliest call is overdue: its actor hangs (or its node is unreachable)
                    now = time.monotonic()
                    for ref, call in list(inflight.items()):
                        if call.due <= now:
                            del inflight[ref]
                            limit = self.timeouts.episode * len(call.chunk)
                            lost(call, f"no answer within {limit:.0f} s (MILEPOST_WORKER_EPISODE_TIMEOUT)", True)
                    continue
                for ref in ready:
                    call = inflight.pop(ref)
                    try:
                        rows = self._fetch(ref, call)
                    except self._ray_error as exc:
                        action = recovery(exc)
                        if action is Recovery.RAISE:
                            raise _cause(exc) from None
                        lost(call, f"worker lost: {reason(exc)}", action is Recovery.REPLACE)
                        continue
                    for row in rows:
                        ep = Episode.from_dict(row)
                        if ledger.collect(ep):
                            emit(ep)
                    idle.append(call.slot)
        finally:
            bar.close()
            for call in inflight.values():  # an interrupted call: nothing of it may land in a later one
                actor, self.actors[call.slot] = self.actors[call.slot], None
                if actor is not None:
                    self._kill(actor)
        episodes = [ledger.results[episode_id(job)] for job in jobs]
        return WorkerRun(episodes, ledger.counts, recoveries)

    def close(self) -> None:
        for actor in self.actors:
            if actor is not None:
                self._kill(actor)
        self.actors = []


def _cause(exc: BaseException) -> BaseException:
    """The user's one-line error an actor raised (``RayTaskError(InputError)``), else ``exc`` itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, MilepostError) else exc


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
    faults: Faults | None = None,
    timeouts: WorkerTimeouts | None = None,
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
        chunk_size: jobs per actor call (default: half the jobs per worker, so a lost call costs little).
        faults: injected failures (see :class:`Fault`); tests and benchmarks only.
        timeouts: how long to wait on Ray (default: :meth:`WorkerTimeouts.from_env`).
        progress: show a progress bar of collected episodes.
    """
    if workers < 1:
        raise InputError(f"--workers must be >= 0, got {workers}")
    pool = WorkerPool(build, workers, faults, timeouts)
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
