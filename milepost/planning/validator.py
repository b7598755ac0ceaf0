"""The subgoal validator: a claimed completion counts only when the environment's predicate holds.

An optional LLM judge (any backend, asked YES / NO with the state and the subgoal) is combined with the
predicate, never substituted for it: where a predicate exists a claim needs both (a YES with a false
predicate is a disagreement and a rejection; a NO with a true predicate is a disagreement too, and the
claim is not accepted); where none exists the judge is the only check, and without a judge such a claim
cannot be verified and is not accepted. A judge answer that is neither YES nor NO abstains (counted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from milepost.backends.base import Backend, GenerationRequest, SamplingParams
from milepost.types import Subgoal

_VERDICT = re.compile(r"\b(YES|NO)\b", re.IGNORECASE)


class Judge(Protocol):
    """Says whether a subgoal is achieved in a state: True, False, or None (no usable answer)."""

    name: str

    def judge(self, subgoal: Subgoal, state_text: str, *, seed: int = 0) -> bool | None: ...


def judge_messages(subgoal: Subgoal, state_text: str) -> list[dict[str, str]]:
    """The judge's prompt: the subgoal, its success criterion and the current state."""
    return [
        {"role": "system", "content": "You check an agent's progress on a puzzle. Answer YES or NO only."},
        {
            "role": "user",
            "content": (
                f"Subgoal: {subgoal.description}\n"
                f"Success criterion: {subgoal.success_criteria or subgoal.description}\n\n"
                f"Current state:\n{state_text}\n\n"
                "Is this subgoal achieved in the current state? Answer YES or NO."
            ),
        },
    ]


def parse_verdict(text: str) -> bool | None:
    """The first YES or NO word of an answer (within its first 200 characters), None when there is none."""
    m = _VERDICT.search(text[:200]) if isinstance(text, str) else None
    return None if m is None else m[1].upper() == "YES"


class LLMJudge:
    """An LLM-as-judge over any backend (greedy, a few tokens)."""

    def __init__(self, backend: Backend, *, max_new_tokens: int = 8) -> None:
        self.backend = backend
        self.max_new_tokens = max_new_tokens
        self.name = f"judge:{backend.name}"

    def judge(self, subgoal: Subgoal, state_text: str, *, seed: int = 0) -> bool | None:
        params = SamplingParams(temperature=0.0, max_new_tokens=self.max_new_tokens, seed=seed, logprobs=False)
        request = GenerationRequest(messages=judge_messages(subgoal, state_text), params=params)
        try:
            completion = self.backend.generate([request])[0]
        except Exception:  # an unreachable judge abstains; the predicate (where there is one) still decides
            return None
        if completion.finish_reason in ("error", "context_overflow"):
            return None
        return parse_verdict(completion.text)


@dataclass(frozen=True)
class Verdict:
    """The validator's decision on one claim, with both checks' answers (None: not asked / no answer)."""

    accepted: bool
    predicate: bool | None
    judge: bool | None
    reason: str


@dataclass
class ValidatorStats:
    """Counts over the claims one validator has seen (per episode: the SGO agent keeps one per episode)."""

    claims: int = 0
    accepted: int = 0
    rejected: int = 0
    unverifiable: int = 0  # no predicate and no usable judge answer
    judge_calls: int = 0
    judge_abstained: int = 0
    disagreements: int = 0  # judge and predicate both answered and differ
    disagreement_items: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "disagreement_items"}


class SubgoalValidator:
    """Checks claimed completions (see the module docstring for how predicate and judge combine).

    Args:
        judge: an optional ``Judge``.
    """

    def __init__(self, judge: Judge | None = None) -> None:
        self.judge = judge
        self.stats = ValidatorStats()

    def validate(
        self, subgoal: Subgoal, state: Any, state_text: str, *, latched: bool = False, seed: int = 0
    ) -> Verdict:
        """Decide one claim that ``subgoal`` is complete.

        Args:
            subgoal: the claimed plan item.
            state: the live game state its predicate reads.
            state_text: the state as text, for the judge.
            latched: the environment already latched this subgoal (it held earlier: subgoals latch).
            seed: seed of the judge call.
        """
        stats = self.stats
        stats.claims += 1
        pred: bool | None = None
        if subgoal.predicate is not None:
            pred = bool(latched or subgoal.predicate(state))
        verdict: bool | None = None
        if self.judge is not None:
            stats.judge_calls += 1
            verdict = self.judge.judge(subgoal, state_text, seed=seed)
            if verdict is None:
                stats.judge_abstained += 1
        if pred is not None and verdict is not None and pred != verdict:
            stats.disagreements += 1
            stats.disagreement_items.append(subgoal.index)
        if pred is None and verdict is None:
            stats.unverifiable += 1
            return Verdict(False, None, None, "no predicate and no judge answer: cannot be verified")
        accepted = (pred if pred is not None else True) and (verdict if verdict is not None else True)
        if accepted:
            stats.accepted += 1
            return Verdict(True, pred, verdict, "verified")
        stats.rejected += 1
        reason = "the state does not satisfy it" if pred is False else "the judge says it is not achieved"
        return Verdict(False, pred, verdict, reason)
