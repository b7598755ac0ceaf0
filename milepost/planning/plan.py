"""Plans: an ordered list of ``Subgoal`` records over one episode's predicate vocabulary.

A plan item either points at one of the environment's subgoals (``refs[i]`` is its index in
``env.subgoals``, and the item carries that subgoal's predicate) or at nothing (a judge-only item from an
LLM planner, never required). ``programmatic_plan`` orders the environment's pending subgoals the way the
domain's solver reaches them; the LLM planner builds its plans in ``milepost.planning.schema``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from milepost.planning.domains.base import Domain, Vocabulary
from milepost.types import Subgoal

PLAN_SOURCES = ("programmatic", "llm", "fallback")


@dataclass
class Plan:
    """An ordered plan and where it came from.

    Attributes:
        subgoals: plan items in order; ``Subgoal.index`` is the position in the plan.
        refs: per item, the index of the environment subgoal it maps to, or None (judge-only).
        source: ``programmatic``, ``llm``, or ``fallback`` (the LLM planner failed and the programmatic
            planner stood in).
        notes: why an LLM answer was rejected, adjusted or completed (one line each).
    """

    subgoals: list[Subgoal]
    refs: list[int | None]
    source: str
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.subgoals) != len(self.refs):
            raise ValueError("plan: one env reference per subgoal")
        if self.source not in PLAN_SOURCES:
            raise ValueError(f"plan: unknown source {self.source!r}")

    def __len__(self) -> int:
        return len(self.subgoals)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (predicates become ``checkable`` flags)."""
        return {
            "source": self.source,
            "notes": list(self.notes),
            "subgoals": [{**g.to_dict(), "env_subgoal": ref} for g, ref in zip(self.subgoals, self.refs)],
        }


def env_item(env: Any, env_index: int, position: int, steps: int, preconditions: Sequence[int] = ()) -> Subgoal:
    """A plan item that is environment subgoal ``env_index`` (its description, criteria and predicate)."""
    goal = env.subgoals[env_index]
    return Subgoal(
        index=position,
        description=goal.description,
        success_criteria=goal.success_criteria,
        preconditions=list(preconditions),
        estimated_steps=max(1, int(steps)),
        required=True,
        predicate=goal.predicate,
    )


def pending_subgoals(env: Any) -> list[int]:
    """Environment subgoals not completed yet (the env latches completions, so these are the open ones)."""
    done = set(env.completed)
    return [g.index for g in env.subgoals if g.index not in done]


def programmatic_plan(
    env: Any, domain: Domain, vocab: Vocabulary, *, source: str = "programmatic", notes: Sequence[str] = ()
) -> Plan:
    """The environment's pending subgoals in the order the domain's solver reaches them from the current
    state; each item's preconditions are the environment's, as plan positions."""
    order = domain.order(env, vocab, pending_subgoals(env))
    position = {env_index: k for k, (env_index, _) in enumerate(order)}
    items = []
    for k, (env_index, steps) in enumerate(order):
        pre = [position[p] for p in env.subgoals[env_index].preconditions if p in position]
        items.append(env_item(env, env_index, k, steps, pre))
    return Plan(items, [env_index for env_index, _ in order], source, list(notes))
