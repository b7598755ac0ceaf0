"""The episode ledger without Ray: first result wins, lost chunks go back on the queue, exhausted episodes
become infrastructure failures, and the counts say what happened."""

from __future__ import annotations

import pytest

from milepost.agent.loop import Job, episode_seed
from milepost.distributed.ledger import EpisodeLedger
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.evaluation.failures import is_infra_failure
from milepost.types import Episode, TerminationReason


def _jobs(n_tasks: int = 3, samples: int = 2) -> list[Job]:
    tasks = [make_task(*generate_easy(4, 6, 9, i), level="S2", split="test", index=i) for i in range(n_tasks)]
    return [Job(t, s) for t in tasks for s in range(samples)]


def _played(job: Job, seed: int = 0) -> Episode:
    return Episode(
        task_id=job.task.task_id,
        policy="oracle",
        sample=job.sample,
        seed=episode_seed(seed, job),
        termination=TerminationReason.SOLVED,
        success=True,
        goal_distance=job.task.goal_distance,
        steps=3,
    )


def test_first_result_wins_and_duplicates_are_counted() -> None:
    jobs = _jobs()
    ledger = EpisodeLedger(jobs, seed=0)
    chunk = ledger.take(4)
    assert [a.job for a in chunk] == jobs[:4] and all(a.attempt == 0 for a in chunk)
    first = _played(jobs[0])
    assert ledger.collect(first)
    late = _played(jobs[0])
    late.steps = 99
    assert not ledger.collect(late)
    assert ledger.results[(jobs[0].task.task_id, 0)].steps == 3
    assert ledger.counts.duplicated == 1 and ledger.counts.collected == 1 and ledger.counts.submitted == 6
    with pytest.raises(ValueError, match="never submitted"):
        ledger.collect(_played(Job(make_task(*generate_easy(4, 6, 9, 77), level="S2", split="test", index=77))))


def test_a_lost_chunk_goes_back_and_an_exhausted_episode_is_an_infra_failure() -> None:
    jobs = _jobs(2, 1)
    ledger = EpisodeLedger(jobs, seed=5, max_attempts=2, policy="hf:x")
    chunk = ledger.take(2)
    ledger.collect(_played(jobs[0], 5))  # finished and returned before the worker died: not played again
    assert ledger.lost(chunk, "worker lost") == []
    assert ledger.counts.retried == 1 and ledger.counts.lost_chunks == 1
    again = ledger.take(10)
    assert [(a.job, a.attempt) for a in again] == [(jobs[1], 1)]
    failed = ledger.lost(again, "worker lost: ActorDiedError")
    assert ledger.done and ledger.counts.exhausted == 1 and ledger.counts.collected == 2
    (ep,) = failed
    assert is_infra_failure(ep) and ep.policy == "hf:x" and ep.seed == episode_seed(5, jobs[1])
    assert ep.meta["error"] == "worker lost: ActorDiedError (2 attempts)"
    assert ledger.take(10) == []


def test_ids_must_be_distinct_and_attempts_positive() -> None:
    jobs = _jobs(1, 1)
    with pytest.raises(ValueError, match="twice"):
        EpisodeLedger(jobs + jobs, seed=0)
    with pytest.raises(ValueError, match="max_attempts"):
        EpisodeLedger(jobs, seed=0, max_attempts=0)


def test_a_lost_chunk_is_retried_whole_then_alone() -> None:
    jobs = _jobs(3, 2)
    ledger = EpisodeLedger(jobs, seed=0, max_attempts=3)
    chunk = ledger.take(3)
    ledger.lost(chunk, "worker lost")
    fresh = ledger.take(10)
    assert [a.job for a in fresh] == jobs[3:]  # first attempts still travel together, up to n
    again = ledger.take(1)  # the lost chunk again, whole and in its order (the same batch), whatever n is
    assert [(a.job, a.attempt) for a in again] == [(j, 1) for j in jobs[:3]]
    ledger.lost(again, "worker lost")
    alone = [ledger.take(10) for _ in range(3)]
    assert [[(a.job, a.attempt) for a in r] for r in alone] == [[(j, 2)] for j in jobs[:3]]
    assert ledger.counts.retried == 6 and ledger.counts.lost_chunks == 2
