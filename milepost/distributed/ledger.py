"""The driver's episode ledger: every episode submitted to workers is collected exactly once, or reported.

An episode is keyed by its id ``(task_id, sample)``; its seed derives from the id (``agent.loop.episode_seed``),
so an episode played again on another worker replays exactly. The ledger hands out jobs in chunks, takes
results back (the first result for an id wins; a later one is counted as a duplicate and dropped), and puts the
jobs of a lost chunk (its call came back as an error or not at all: ``recovery``) back on the queue. After
``max_attempts`` lost attempts an episode is recorded as an infrastructure failure
(``TerminationReason.BACKEND_ERROR``: left out of pass@k, counted in the report, played again by
``milepost eval --retry-failed``), never dropped silently.

Ray's own task retries are deliberately not used: they re-execute a task whose result may already have been
produced (at-least-once); the ledger gives exactly-once collection on top of at-least-once execution.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from milepost.agent.loop import Job, episode_seed
from milepost.types import Episode, TerminationReason

EpisodeId = tuple[str, int]
"""(task_id, sample): the key of an episode in the ledger"""


def episode_id(job: Job) -> EpisodeId:
    return (job.task.task_id, job.sample)


@dataclass
class LedgerCounts:
    """What happened to the episodes of one run (the closing note's fault-injection figures)."""

    submitted: int = 0
    """distinct episodes handed to the ledger"""
    collected: int = 0
    """distinct episodes with a result (played, or recorded as an infrastructure failure)"""
    retried: int = 0
    """re-submissions after a lost chunk (one episode retried twice counts twice)"""
    duplicated: int = 0
    """results that arrived for an id already collected (dropped)"""
    exhausted: int = 0
    """episodes whose every attempt was lost: recorded as infrastructure failures"""
    lost_chunks: int = 0
    """chunks whose call came back as an error or not at all (the worker died, hung, raised, lost the result)"""


@dataclass(frozen=True)
class Attempt:
    """One job as handed to a worker: the job, how many earlier attempts of it were lost, and (for a first
    retry) the lost chunk it goes out with again."""

    job: Job
    attempt: int
    group: int = -1


class EpisodeLedger:
    """Exactly-once bookkeeping of episodes played by workers that may die.

    Args:
        jobs: the episodes to play; ids must be distinct.
        seed: the run seed (episode seeds derive from it and the id).
        max_attempts: attempts per episode at most (>= 1) before it counts as an infrastructure failure.
        policy: the policy's name, for the records of infrastructure failures.
    """

    def __init__(self, jobs: Iterable[Job], *, seed: int, max_attempts: int = 3, policy: str = "") -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.seed = seed
        self.policy = policy
        self.max_attempts = max_attempts
        self.queue: deque[Attempt] = deque()
        self.jobs: dict[EpisodeId, Job] = {}
        self.attempts: dict[EpisodeId, int] = {}
        self.results: dict[EpisodeId, Episode] = {}
        self.counts = LedgerCounts()
        for job in jobs:
            key = episode_id(job)
            if key in self.jobs:
                raise ValueError(f"episode {key} submitted twice")
            self.jobs[key] = job
            self.attempts[key] = 0
            self.queue.append(Attempt(job, 0))
        self.counts.submitted = len(self.jobs)

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.jobs)

    def take(self, n: int) -> list[Attempt]:
        """Up to ``n`` queued first attempts (skipping ids collected meanwhile); retries go out otherwise.

        A lost chunk is first retried whole, in its own order: the same batch as before, so a batch-sensitive
        backend (padding changes the last bits of a model's logits) replays exactly what the dead worker would
        have returned. Later retries go out alone: which episode killed the worker is unknown, and alone an
        episode that kills every worker it meets spends no one else's attempts.
        """
        out: list[Attempt] = []
        while self.queue:
            item = self.queue[0]
            if episode_id(item.job) in self.results:
                self.queue.popleft()
                continue
            same_group = bool(out) and item.group >= 0 and item.group == out[0].group
            if out and not same_group and (item.attempt > 0 or out[0].attempt > 0 or len(out) >= n):
                break
            out.append(self.queue.popleft())
            if item.attempt > 1:
                break
        return out

    def collect(self, episode: Episode) -> bool:
        """Record a result; True when it is the first for its id (the caller keeps it), False for a duplicate."""
        key = (episode.task_id, episode.sample)
        if key not in self.jobs:
            raise ValueError(f"result for an episode never submitted: {key}")
        if key in self.results:
            self.counts.duplicated += 1
            return False
        self.results[key] = episode
        self.counts.collected += 1
        return True

    def lost(self, chunk: Iterable[Attempt], reason: str) -> list[Episode]:
        """The call holding ``chunk`` was lost: requeue its unfinished episodes, or give up on those out of attempts.

        Returns the infrastructure-failure episodes recorded for the exhausted ones (already collected).
        """
        self.counts.lost_chunks += 1
        group = self.counts.lost_chunks
        failed = []
        for item in chunk:
            key = episode_id(item.job)
            if key in self.results:
                continue
            self.attempts[key] = item.attempt + 1
            if self.attempts[key] >= self.max_attempts:
                episode = self.infra_failure(item.job, f"{reason} ({self.attempts[key]} attempts)")
                self.collect(episode)
                self.counts.exhausted += 1
                failed.append(episode)
            else:
                self.counts.retried += 1
                self.queue.append(Attempt(item.job, self.attempts[key], group if self.attempts[key] == 1 else -1))
        return failed

    def infra_failure(self, job: Job, reason: str) -> Episode:
        """The record of an episode no worker could finish: an infrastructure failure, not an agent failure."""
        return Episode(
            task_id=job.task.task_id,
            policy=self.policy,
            sample=job.sample,
            seed=episode_seed(self.seed, job),
            termination=TerminationReason.BACKEND_ERROR,
            success=False,
            goal_distance=job.task.goal_distance,
            steps=0,
            level=job.task.level,
            turns=[],
            meta={"env": job.task.env, "error": reason, "worker_lost": True},
        )
