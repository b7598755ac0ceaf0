"""What the worker pool does when a Ray call fails, and how long it waits before it calls a worker lost.

The pool (``workers.WorkerPool``) hands chunks of episodes to Ray actors. A chunk can come back as an error
instead of episodes; :func:`recovery` says what that error means for the actor that held it:

- ``KEEP``: the actor's own code raised (``RayTaskError``): the process answered, so it lives; the chunk's
  episodes go back on the queue and the actor takes the next chunk.
- ``REPLACE``: the actor, its node or its result is gone or unreachable (``ActorDiedError``,
  ``ActorUnavailableError``, ``WorkerCrashedError``, ``NodeDiedError``, Ray's ``OutOfMemoryError`` from the
  memory monitor, ``ObjectLostError`` and its kinds ``OwnerDiedError`` / ``ObjectFreedError`` /
  ``ObjectFetchTimedOutError``, a ``GetTimeoutError`` of the driver's own fetch, any other ``RayError``): the
  chunk's episodes go back on the queue and a new actor takes the slot.
- ``RAISE``: retrying cannot help: bad input raised inside the actor (a ``MilepostError``: the user's one-line
  error), the driver's own raylet died (``LocalRayletDiedError``: the cluster this process runs is gone), the
  cluster refused our credentials (``AuthenticationError``), or the actors' runtime environment cannot be set up
  (``RuntimeEnvSetupError``).

Retries are bounded by the ledger (``ledger.EpisodeLedger``: ``max_attempts`` per episode, then an
infrastructure failure), so a failure that repeats costs attempts, never a hang or a lost episode. The exception
classes are Ray's (``ray/exceptions.py``; the error types the driver can see are those
``ray/_private/serialization.py`` ``_deserialize_object`` turns into exceptions).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

from milepost.errors import InputError, MilepostError


class WorkersLost(MilepostError):
    """No Ray worker is left to play the remaining episodes (each one lost and none could be started again)."""


class Recovery(enum.Enum):
    """What a failed call means for the actor that made it (see the module doc)."""

    KEEP = "keep"
    REPLACE = "replace"
    RAISE = "raise"


def recovery(exc: BaseException) -> Recovery:
    """What to do with the actor whose call ended in ``exc`` (an exception ``ray.get`` raised)."""
    from ray import exceptions as rex

    if isinstance(exc, MilepostError):  # RayTaskError(InputError) is both (Ray's ``as_instanceof_cause``)
        return Recovery.RAISE
    fatal = (rex.LocalRayletDiedError, rex.AuthenticationError, rex.RuntimeEnvSetupError)
    if isinstance(exc, fatal):
        return Recovery.RAISE
    if isinstance(exc, rex.RayTaskError):
        return Recovery.KEEP
    if isinstance(exc, rex.RayError):
        return Recovery.REPLACE
    return Recovery.RAISE  # not Ray's: a bug of ours, not the cluster's


def reason(exc: BaseException) -> str:
    """One line naming a failure, for logs and the records of episodes that ran out of attempts."""
    cause = getattr(exc, "cause", None)  # RayTaskError: the exception the actor raised
    shown = cause if isinstance(cause, BaseException) else exc
    lines = [line.strip() for line in str(shown).splitlines() if line.strip()]
    name = type(shown).__name__
    return f"{name}: {lines[0]}"[:200] if lines else name


@dataclass(frozen=True)
class WorkerTimeouts:
    """Seconds the driver waits on Ray before it treats a worker as lost (each read from the environment by
    :meth:`from_env`; the defaults suit a model of a few billion parameters on a shared node)."""

    start: float = 900.0
    """``MILEPOST_WORKER_START_TIMEOUT``: a new actor scheduled, its kit built (model loaded), weights loaded"""
    episode: float = 1800.0
    """``MILEPOST_WORKER_EPISODE_TIMEOUT``: per episode of a chunk; a chunk not back within its episodes times
    this is a hung worker (killed, its episodes played elsewhere)"""
    fetch: float = 300.0
    """``MILEPOST_WORKER_FETCH_TIMEOUT``: fetching a finished chunk's episodes from the object store"""

    def __post_init__(self) -> None:
        for name in ("start", "episode", "fetch"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise InputError(f"worker {name} timeout must be a number of seconds > 0, got {value!r}")

    @classmethod
    def from_env(cls) -> WorkerTimeouts:
        """The defaults, overridden by ``MILEPOST_WORKER_{START,EPISODE,FETCH}_TIMEOUT`` (seconds)."""
        values: dict[str, float] = {}
        for name in ("start", "episode", "fetch"):
            var = f"MILEPOST_WORKER_{name.upper()}_TIMEOUT"
            text = os.environ.get(var)
            if text is None:
                continue
            try:
                value = float(text)
            except ValueError:
                value = -1.0
            if not 0 < value < float("inf"):
                raise InputError(f"{var} must be a number of seconds > 0, got {text!r}")
            values[name] = value
        return cls(**values)
