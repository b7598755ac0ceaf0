"""Best-of-k answers kept by the environment's own rules: a policy that samples ``k`` answers per turn and plays
the first one the environment would accept (``TextEnv.answer_error``: the format, the action count and the
action's legality), or the first sample when none would be.

With ``avoid_revisits`` the kept answer is the first accepted one whose next state the episode has not been in
(``TextEnv.answer_successor`` against the states seen so far, ``TextEnv.state_key``), else the first accepted one:
a loop check for a policy that has no memory of its own moves (a Markov policy that steps back and forth between
two boards until the turn budget runs out, the failure that holds most of the Rush Hour starts' actions:
experiments/results/rushhour_step_accuracy_split_legal.md). Games without state keys play as without it.

This is inference with the game's rules in the loop (the "admissible actions" filter of text-game agents), not a
better model: a report of it says so next to the plain agent's numbers. Sample 0 of each turn uses the plain
agent's seed (``BackendPolicy``), so ``k = 1`` plays exactly the plain episodes, and for any ``k`` a turn whose
first sample is accepted plays what the plain agent would. The cost is ``k`` generations per turn; ``stats``
counts what this process generated and kept, and each episode's own counts go into its record
(``Episode.meta["policy_counts"]``, from ``LiveEpisode.policy_state["counts"]``), so that an evaluation's
``metrics.json`` sums them over its episodes, resumed or played by workers (``evaluation.runner.best_of_summary``).
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

    ``avoid_revisits``: among the accepted answers prefer the first that leads to a state the episode has not
    been in. ``stats``: turns played, turns whose kept answer the environment accepts, accepted samples, generated
    tokens; with ``avoid_revisits`` also ``revisits_avoided`` (turns where the first accepted answer led back and
    another did not) and ``revisits_kept`` (turns where every accepted answer led back). The same counts per
    episode in ``policy_state["counts"]``.
    """

    def __init__(self, backend: Backend, settings: AgentSettings, k: int, *, avoid_revisits: bool = False) -> None:
        if k < 1:
            raise ValueError(f"best-of k must be >= 1, got {k}")
        self.backend = backend
        self.settings = settings
        self.k = k
        self.avoid_revisits = avoid_revisits
        self.name = f"{backend.name}+best-of-{k}" + ("-new-states" if avoid_revisits else "")
        self.scripted = False
        self.stats = self._zero()

    def _zero(self) -> dict[str, int]:
        counts = {"turns": 0, "kept_accepted": 0, "accepted_samples": 0, "tokens": 0}
        if self.avoid_revisits:
            counts |= {"revisits_avoided": 0, "revisits_kept": 0}
        return counts

    def _count(self, ep: LiveEpisode, **added: int) -> None:
        """Add to this process's ``stats`` and to the episode's own counts."""
        counts = ep.policy_state.get("counts")
        if counts is None:
            counts = ep.policy_state["counts"] = self._zero()
        for key, n in added.items():
            self.stats[key] += n
            counts[key] += n

    def act(self, episodes: Sequence[LiveEpisode]) -> list[Completion]:
        kept = []
        for ep, cands in zip(episodes, sample_k(self.backend, self.settings, episodes, self.k)):
            env: Any = getattr(ep.env, "unwrapped", ep.env)
            accepted = [j for j, c in enumerate(cands) if c.error is None and env.answer_error(c.text) is None]
            choice = accepted[0] if accepted else 0
            if self.avoid_revisits and accepted:
                choice = self._first_new(ep, env, cands, accepted)
            kept.append(cands[choice])
            self._count(
                ep,
                turns=1,
                kept_accepted=int(bool(accepted)),
                accepted_samples=len(accepted),
                tokens=sum(len(c.completion_ids) for c in cands),
            )
        return kept

    def _first_new(self, ep: LiveEpisode, env: Any, cands: list[Completion], accepted: list[int]) -> int:
        """The first of ``accepted`` whose answer leads to a state not yet seen in ``ep`` (the first of them when
        all lead back); the current state joins the seen ones."""
        seen: set[Any] = ep.policy_state.setdefault("seen_states", set())
        now = env.state_key()
        if now is None:
            return accepted[0]
        seen.add(now)
        new = [j for j in accepted if env.answer_successor(cands[j].text) not in seen]
        if not new:
            self._count(ep, revisits_kept=1)
            return accepted[0]
        self._count(ep, revisits_avoided=int(new[0] != accepted[0]))
        return new[0]
