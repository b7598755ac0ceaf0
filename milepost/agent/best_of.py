"""Best-of-k answers kept by the environment's own rules: a policy that samples ``k`` answers per turn and plays
the first one the environment would accept (``TextEnv.answer_error``: the format, the action count and the
action's legality), or the first sample when none would be.

This is inference with the game's rules in the loop (the "admissible actions" filter of text-game agents), not a
better model: a report of it says so next to the plain agent's numbers. Sample 0 of each turn uses the plain
agent's seed (``BackendPolicy``), so ``k = 1`` plays exactly the plain episodes, and for any ``k`` a turn whose
first sample is accepted plays what the plain agent would. The cost is ``k`` generations per turn; ``stats``
counts what this process generated and kept.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from milepost.agent.loop import AgentSettings, LiveEpisode, turn_seed
from milepost.backends.base import Backend, GenerationRequest
from milepost.types import Completion


def sample_seed(turn_seed: int, j: int) -> int:
    """Sample ``j``'s seed in a turn: the plain agent's own seed for sample 0, a stable draw from it otherwise."""
    return turn_seed if j == 0 else random.Random(f"{turn_seed}:{j}").randrange(2**31)


def sample_k(backend: Backend, settings: AgentSettings, episodes: Sequence[Any], k: int) -> list[list[Completion]]:
    """``k`` sampled answers to each live episode's prompt, in one batch; sample ``j`` of a turn has
    ``sample_seed(turn seed, j)``, so sample 0 is what ``BackendPolicy`` would answer."""
    requests = []
    for ep in episodes:
        seed = turn_seed(ep)
        messages = ep.messages()
        requests += [
            GenerationRequest(messages=messages, params=settings.sampling(sample_seed(seed, j))) for j in range(k)
        ]
    outs = backend.generate(requests)
    return [outs[i * k : (i + 1) * k] for i in range(len(episodes))]


class LegalBestOf:
    """A model backend as a policy that keeps, each turn, the first of ``k`` sampled answers the environment would
    accept.

    ``stats``: turns played, turns whose kept answer the environment accepts, accepted samples, generated tokens.
    """

    def __init__(self, backend: Backend, settings: AgentSettings, k: int) -> None:
        if k < 1:
            raise ValueError(f"best-of k must be >= 1, got {k}")
        self.backend = backend
        self.settings = settings
        self.k = k
        self.name = f"{backend.name}+best-of-{k}"
        self.scripted = False
        self.stats = {"turns": 0, "kept_accepted": 0, "accepted_samples": 0, "tokens": 0}

    def act(self, episodes: Sequence[LiveEpisode]) -> list[Completion]:
        kept = []
        for ep, cands in zip(episodes, sample_k(self.backend, self.settings, episodes, self.k)):
            env: Any = getattr(ep.env, "unwrapped", ep.env)
            accepted = [j for j, c in enumerate(cands) if c.error is None and env.answer_error(c.text) is None]
            kept.append(cands[accepted[0] if accepted else 0])
            self.stats["turns"] += 1
            self.stats["kept_accepted"] += bool(accepted)
            self.stats["accepted_samples"] += len(accepted)
            self.stats["tokens"] += sum(len(c.completion_ids) for c in cands)
        return kept
