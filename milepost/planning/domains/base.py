"""The vocabulary of planning domains: terms, resolutions, the ``Domain`` protocol and ``PlanRejected``.

Each environment's domain (``domains/sudoku.py``, ``rushhour.py``, ``webshop.py``) builds on these, and the
package (``milepost.planning.domains``) registers the domains; this module imports neither, so imports run
package -> domain -> base.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from milepost.errors import MilepostError


class PlanRejected(MilepostError):
    """A planner answer that cannot be used; ``reason`` is the one line recorded with the fallback."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Term:
    """One word of the predicate vocabulary: an environment subgoal and its short name.

    Attributes:
        kind: ``box`` | ``row`` | ``col`` (Sudoku), ``vehicle`` | ``exit`` (Rush Hour).
        ident: the unit number (1-based) or the vehicle letter; empty for ``exit``.
        env_index: index of the subgoal in ``env.subgoals``.
    """

    kind: str
    ident: str
    env_index: int

    @property
    def label(self) -> str:
        """The name planners and prompts use: ``box 3``, ``column 2``, ``vehicle C``, ``exit``."""
        word = {"col": "column"}.get(self.kind, self.kind)
        return f"{word} {self.ident}".strip()


class Vocabulary:
    """The terms of one episode, in environment subgoal order, looked up by ``(kind, ident)``."""

    def __init__(self, terms: Sequence[Term]) -> None:
        self.terms = list(terms)
        self._by_key = {(t.kind, t.ident): t for t in self.terms}
        self._by_env = {t.env_index: t for t in self.terms}

    def lookup(self, kind: str, ident: str) -> Term | None:
        return self._by_key.get((kind, ident))

    def for_env(self, env_index: int) -> Term | None:
        return self._by_env.get(env_index)

    def labels(self) -> list[str]:
        return [t.label for t in self.terms]

    def __len__(self) -> int:
        return len(self.terms)


@dataclass(frozen=True)
class Resolution:
    """Where an LLM plan item points: a term (machine-checkable), or nothing (judge-only)."""

    term: Term | None
    note: str = ""  # why an item stays unmapped or was dropped, for the plan's notes
    drop: bool = False  # the item is a no-op in this state (e.g. a unit already complete): leave it out


class Domain(Protocol):
    """What the planners need to know about one environment (its state and rules come from the env)."""

    name: str

    def vocabulary(self, env: Any) -> Vocabulary:
        """The terms of ``env.subgoals`` (every subgoal gets one; an unknown description is a bug)."""
        ...

    def resolve(self, item: Mapping[str, Any], env: Any, vocab: Vocabulary) -> Resolution:
        """Map one schema-checked LLM item onto the vocabulary.

        Raises:
            PlanRejected: the item names a cell, unit or vehicle that does not exist, or contradicts the
                state.
        """
        ...

    def order(self, env: Any, vocab: Vocabulary, pending: Sequence[int]) -> list[tuple[int, int]]:
        """The programmatic order of the ``pending`` environment subgoals from the current state, each with
        its estimated steps: ``[(env_index, steps), ...]``. Deterministic (ties by environment index)."""
        ...

    def focus_move(self, env: Any, term: Term | None, **style: Any) -> tuple[str, str] | None:
        """A correct next action that works toward ``term`` (and its reason), for scripted demonstrators;
        None to let the plain oracle choose. ``style``: the oracle's text options (Sudoku ``cell_first``)."""
        ...
