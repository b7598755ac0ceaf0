"""The worker pool's recovery decisions without a cluster: every Ray failure kind a call can end in is either
replayed (the chunk's episodes back on the queue; the actor kept or replaced) or raised, and with the ledger no
episode is lost or doubled however the failures fall. Timeouts come from the environment, checked."""

from __future__ import annotations

import pytest

from milepost.agent.loop import Job
from milepost.distributed.ledger import EpisodeLedger, episode_id
from milepost.distributed.recovery import Recovery, WorkerTimeouts, reason, recovery
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.evaluation.failures import is_infra_failure
from milepost.types import Episode, TerminationReason

rex = pytest.importorskip("ray.exceptions")
REF = "ab" * 14  # an object id, as Ray prints them


def _task_error(cause: Exception) -> Exception:
    """What ``ray.get`` raises when the actor's method raised ``cause`` (Ray's own construction)."""
    try:
        raise cause
    except Exception as exc:
        return rex.RayTaskError("play", f"Traceback ...\n{type(exc).__name__}: {exc}", exc).as_instanceof_cause()


FAILURES = {
    "actor died": (rex.ActorDiedError(), Recovery.REPLACE),
    "actor unavailable": (rex.ActorUnavailableError("unreachable", None), Recovery.REPLACE),
    "worker crashed": (rex.WorkerCrashedError(), Recovery.REPLACE),
    "node died": (rex.NodeDiedError("node 10.0.0.2 died"), Recovery.REPLACE),
    "memory monitor": (rex.OutOfMemoryError("Task was killed due to the node running low on memory"), Recovery.REPLACE),
    "object lost": (rex.ObjectLostError(REF, None, ""), Recovery.REPLACE),
    "owner died": (rex.OwnerDiedError(REF, None, ""), Recovery.REPLACE),
    "object freed": (rex.ObjectFreedError(REF, None, ""), Recovery.REPLACE),
    "fetch timed out": (rex.ObjectFetchTimedOutError(REF, None, ""), Recovery.REPLACE),
    "driver's fetch timeout": (rex.GetTimeoutError("Get timed out"), Recovery.REPLACE),
    "task cancelled": (rex.TaskCancelledError(), Recovery.REPLACE),
    "actor code raised": (_task_error(RuntimeError("CUDA out of memory")), Recovery.KEEP),
    "bad input in the actor": (_task_error(InputError("no model at /x")), Recovery.RAISE),
    "driver's raylet died": (rex.LocalRayletDiedError(), Recovery.RAISE),
    "not Ray's": (KeyError("bug"), Recovery.RAISE),
}


@pytest.mark.parametrize("kind", FAILURES)
def test_each_failure_kind_has_a_recovery(kind: str) -> None:
    exc, expected = FAILURES[kind]
    assert recovery(exc) is expected
    line = reason(exc)
    assert "\n" not in line and line.startswith(type(getattr(exc, "cause", None) or exc).__name__)


def test_reason_names_what_the_actor_raised() -> None:
    assert reason(_task_error(RuntimeError("CUDA out of memory"))) == "RuntimeError: CUDA out of memory"
    assert reason(rex.NodeDiedError("node 10.0.0.2 died")) == "NodeDiedError: node 10.0.0.2 died"


def _jobs(n_tasks: int, samples: int) -> list[Job]:
    tasks = [make_task(*generate_easy(4, 6, 9, i), level="S2", split="test", index=i) for i in range(n_tasks)]
    return [Job(t, s) for t in tasks for s in range(samples)]


def _played(job: Job) -> Episode:
    return Episode(
        task_id=job.task.task_id,
        policy="oracle",
        sample=job.sample,
        seed=0,
        termination=TerminationReason.SOLVED,
        success=True,
        goal_distance=job.task.goal_distance,
        steps=1,
    )


def test_every_replayable_failure_loses_and_doubles_nothing() -> None:
    """The pool's loop in miniature: each chunk out ends in the next failure kind (cycling), or in its episodes
    when the failure list is spent; late duplicates of lost chunks arrive too. Every episode ends exactly once."""
    replayable = [exc for exc, action in FAILURES.values() if action is not Recovery.RAISE]
    jobs = _jobs(4, 3)
    ledger = EpisodeLedger(jobs, seed=0, max_attempts=3, policy="p")
    failures = iter(replayable)
    collected: list[tuple[str, int]] = []
    lost_chunks = []
    while not ledger.done:
        chunk = ledger.take(3)
        assert chunk, "the ledger stalled"
        exc = next(failures, None)
        if exc is None:
            for a in chunk:
                if ledger.collect(_played(a.job)):
                    collected.append(episode_id(a.job))
            continue
        for ep in ledger.lost(chunk, f"worker lost: {reason(exc)}"):
            collected.append((ep.task_id, ep.sample))
        lost_chunks.append(chunk)
    for chunk in lost_chunks:  # a lost call's result turning up after all (a hung actor that answers late)
        for a in chunk:
            assert not ledger.collect(_played(a.job))
    assert sorted(collected) == sorted(episode_id(j) for j in jobs)
    c = ledger.counts
    assert c.lost_chunks == len(replayable) and c.collected == len(jobs) and c.duplicated > 0
    exhausted = [ep for ep in ledger.results.values() if is_infra_failure(ep)]
    assert len(exhausted) == c.exhausted > 0  # some episodes met three failures: recorded, with the last reason
    assert all("(3 attempts)" in ep.meta["error"] and "Error" in ep.meta["error"] for ep in exhausted)


def test_timeouts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("START", "EPISODE", "FETCH"):
        monkeypatch.delenv(f"MILEPOST_WORKER_{name}_TIMEOUT", raising=False)
    assert WorkerTimeouts.from_env() == WorkerTimeouts()
    assert WorkerTimeouts().start > 0 and WorkerTimeouts().episode > 0 and WorkerTimeouts().fetch > 0
    monkeypatch.setenv("MILEPOST_WORKER_EPISODE_TIMEOUT", "12.5")
    assert WorkerTimeouts.from_env() == WorkerTimeouts(episode=12.5)
    for bad in ("0", "-3", "x", "nan", "inf"):
        monkeypatch.setenv("MILEPOST_WORKER_FETCH_TIMEOUT", bad)
        with pytest.raises(InputError, match="MILEPOST_WORKER_FETCH_TIMEOUT"):
            WorkerTimeouts.from_env()
    with pytest.raises(InputError, match="start timeout"):
        WorkerTimeouts(start=0)
