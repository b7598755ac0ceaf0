"""Scripted Rush Hour moves: the oracle's next move and the error modes of the noisy oracle.

These read the game state directly (they are policies, not text generators); ``milepost.backends.scripted``
turns them into answers. Every function returns an action's text, or None when no such move exists.
"""

from __future__ import annotations

import math
import random

from milepost.envs.actions import ActionMode
from milepost.envs.rushhour.rules import RushHourRules, oracle_move
from milepost.envs.rushhour.solver import optimal_move, solve_board
from milepost.envs.rushhour.state import DIRECTIONS, Move
from milepost.types import Task


def _reason(move: Move) -> str:
    # Short on purpose: SFT teaches these reasons to tiny models, whose every generated token costs time.
    return "A drives to the exit." if move.vehicle == "A" else f"{move.vehicle} makes room."


def oracle(rules: RushHourRules) -> tuple[str, str] | None:
    """The next move of the tie-broken optimal solution (steps, or moves in slide mode) and a reason."""
    move = oracle_move(rules)
    return None if move is None else (move.text(), _reason(move))


def oracle_sequence(rules: RushHourRules, count: int | None) -> list[tuple[str, str]]:
    """Up to ``count`` one-cell moves of a step-optimal solution (None: until solved), planned on a copy."""
    state = rules.state.clone()
    out: list[tuple[str, str]] = []
    while count is None or len(out) < count:
        move = optimal_move(rules.cluster, state, "steps")
        if move is None:
            break
        out.append((move.text(), _reason(move)))
        state.apply(move)
    return out


def illegal(rules: RushHourRules, rng: random.Random) -> str:
    """A well-formed move the rules refuse: into a vehicle, a wall or the edge, else along the wrong axis."""
    state = rules.state
    letters = sorted(state.layout.index_of)
    blocked = [
        Move(letter, direction)
        for letter in letters
        for direction in DIRECTIONS
        if state.why_illegal(Move(letter, direction)) is not None
        and (direction in ("left", "right")) == state.layout.vehicles[state.layout.index_of[letter]].horizontal
    ]
    if blocked:
        return rng.choice(blocked).text()
    letter = rng.choice(letters)
    horizontal = state.layout.vehicles[state.layout.index_of[letter]].horizontal
    return Move(letter, rng.choice(("up", "down") if horizontal else ("left", "right"))).text()


def wrong(rules: RushHourRules, rng: random.Random) -> str | None:
    """A legal move that brings the goal no closer (in the rules' metric): a detour."""
    table = rules.cluster.table(rules.metric)
    here = table[rules.state.key]
    choices = []
    for move in rules.state.legal_actions(slides=rules.slide):
        child = rules.state.clone()
        child.apply(move)
        if table[child.key] >= here:
            choices.append(move)
    return rng.choice(choices).text() if choices else None


def random_legal(rules: RushHourRules, rng: random.Random) -> str | None:
    """A uniformly random legal move (one cell; any slide in slide mode)."""
    choices = rules.state.legal_actions(slides=rules.slide)
    return rng.choice(choices).text() if choices else None


def malformed(rng: random.Random) -> str:
    """An answer no parser accepts."""
    return rng.choice(["move(A)", "I am not sure.", "slide B up", "move(B, north)", ""])


def optimal_turns(task: Task, mode: ActionMode) -> int:
    """Fewest turns that can solve ``task`` under ``mode``: moves in slide mode, else one-cell steps, at most
    ``max_actions`` of them per turn."""
    meta = task.meta
    if "min_steps" not in meta or "min_moves" not in meta:
        cluster = solve_board(task.payload["board"])
        meta = {"min_steps": cluster.min_steps, "min_moves": cluster.min_moves}
    if mode.kind == "slide":
        return int(meta["min_moves"])
    per_turn = mode.max_actions
    steps = int(meta["min_steps"])
    if per_turn is None:
        return 1 if steps else 0
    return math.ceil(steps / per_turn)
