"""Per-environment planning knowledge: the predicate vocabulary, referent checks and programmatic orders.

The vocabulary of an episode is the environment's own subgoal list after ``reset`` (each with its predicate):
a programmatic plan is an ordering of those subgoals, and an LLM plan's items are mapped onto them by name
(``box 3``, ``vehicle C``, ``exit``). Each environment contributes one ``Domain`` that knows how its
subgoals are named, which names exist on the board, what contradicts the state, and in which order a solver
reaches them. The vocabulary types and the ``Domain`` protocol live in ``domains/base.py``; the domains are
registered explicitly here.
"""

from __future__ import annotations

from typing import Any

from milepost.planning.domains.base import Domain
from milepost.planning.domains.rushhour import RushHourDomain
from milepost.planning.domains.sudoku import SudokuDomain
from milepost.planning.domains.webshop import WebShopDomain
from milepost.registry import Registry

DOMAINS: Registry[Domain] = Registry("planning domain")


def domain_for(env: Any) -> Domain:
    """The domain of a reset environment (by its task's ``env`` name).

    Raises:
        InputError: no domain is registered for the environment.
    """
    task = getattr(env, "task", None)
    if task is None:
        raise RuntimeError("planning needs a reset environment")
    return DOMAINS.get(str(task.env))


DOMAINS.register("sudoku", SudokuDomain())
DOMAINS.register("rushhour", RushHourDomain())
DOMAINS.register("webshop", WebShopDomain())

__all__ = ["DOMAINS", "domain_for"]
