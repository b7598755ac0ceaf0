"""Vectorised milepost environments through ``gymnasium.make_vec`` (no extra needed: Gymnasium is a dependency).

``import milepost`` registers the ids, and the text spaces batch as tuples of strings, so
``gymnasium.make_vec("milepost/Sudoku-v0", num_envs=8, vectorization_mode="sync", size=4)`` works as is.

The asynchronous mode needs one setting: ``AsyncVectorEnv``'s default shared-memory transport reads a ``Text``
observation out of shared memory once, when the vector env is built (Gymnasium 1.4; the same cause as
Farama-Foundation/Gymnasium#1164 for ``Dict`` spaces), so every later observation comes back as that stale,
empty buffer (a string of the charset's first character). Observations must travel through the worker pipes
instead: ``vector_kwargs={"shared_memory": False}``. :func:`make_vec` passes it for you.

``make_vec(..., conventions=True)`` wraps every sub-environment in
:class:`milepost.integrations.conventions.ConventionsInfo`, so the batched ``info`` also carries
``goal_distance``, ``remaining_distance``, ``optimal_advantage``, ``turn_rewards`` and ``env_state_hash``.
"""

from __future__ import annotations

from typing import Any

import gymnasium

import milepost
from milepost.envs import GYM_IDS
from milepost.errors import InputError

MODES = ("sync", "async")


def gym_id(env: str) -> str:
    """The Gymnasium id of a milepost environment given by its short name (``sudoku``) or its id."""
    if env in milepost.GYMNASIUM_ENVS:
        return env
    if env in GYM_IDS:
        return GYM_IDS[env]
    known = ", ".join(sorted(GYM_IDS))
    raise InputError(f"unknown environment {env!r} (known: {known}, or their milepost/... Gymnasium ids)")


def make_vec(
    env: str,
    num_envs: int,
    mode: str = "sync",
    *,
    vector_kwargs: dict[str, Any] | None = None,
    conventions: bool = False,
    **env_kwargs: Any,
) -> gymnasium.vector.VectorEnv:
    """``gymnasium.make_vec`` for a milepost environment, with the async transport that text needs.

    Args:
        env: short name (``sudoku``, ``rushhour``, ``webshop``) or Gymnasium id (``milepost/Sudoku-v0``).
        num_envs: sub-environments; sub-env ``i`` is seeded ``seed + i`` by ``reset(seed=seed)``.
        mode: ``sync`` (one process) or ``async`` (one worker process per sub-environment).
        vector_kwargs: further arguments of ``SyncVectorEnv`` / ``AsyncVectorEnv``.
        conventions: wrap each sub-environment in ``ConventionsInfo`` (the adapters' shared ``info`` keys).
        env_kwargs: the environment's own arguments (``size=4``, ``max_steps=...``).

    Raises:
        InputError: an unknown environment or mode, ``num_envs < 1``, or ``shared_memory=True`` for async.
    """
    if mode not in MODES:
        raise InputError(f"vector mode must be one of {', '.join(MODES)}, got {mode!r}")
    if num_envs < 1:
        raise InputError(f"num_envs must be >= 1, got {num_envs}")
    options = dict(vector_kwargs or {})
    if mode == "async":
        if options.get("shared_memory"):
            raise InputError("async milepost envs cannot use shared_memory=True: Text observations would go stale")
        options["shared_memory"] = False
    from milepost.integrations.conventions import ConventionsInfo

    return gymnasium.make_vec(
        gym_id(env),
        num_envs=num_envs,
        vectorization_mode=mode,
        vector_kwargs=options,
        wrappers=[ConventionsInfo] if conventions else None,
        **env_kwargs,
    )
