"""Rush Hour rules for the text layer: action parsing, legality per mode, subgoals, distances, goal text."""

from __future__ import annotations

import re
from collections.abc import Callable

from milepost.envs.actions import ActionMode
from milepost.envs.rushhour.board import BITS, EXIT_ROW, Layout
from milepost.envs.rushhour.solver import Cluster, optimal_move, solve_board
from milepost.envs.rushhour.state import Move, RushHourState
from milepost.errors import InputError
from milepost.types import Subgoal, Task

# One vehicle letter, a direction word, an optional cell count. The count is capped at 3 digits so a
# pathological answer cannot make int() slow; a letter that is not on the board still parses (it is then an
# invalid action, not a format error), as does a count of 0 or one above what slide mode allows. re.ASCII:
# without it IGNORECASE folds the Kelvin sign into k and dotless i into I, and \d takes other scripts' digits.
_MOVE = re.compile(
    r"move\(\s*([A-Za-z])\s*,\s*(up|down|left|right)\s*(?:,\s*(\d{1,3})\s*)?\)\.?", re.IGNORECASE | re.ASCII
)


RENDERERS = ("grid", "legal")
"""Rush Hour observation renderers: ``grid`` (the board) | ``legal`` (the board, then the legal actions of the mode,
the way ALFWorld and ScienceWorld list admissible commands)."""


def check_renderer(render: str) -> None:
    """Raise ``InputError`` naming the known renderers when ``render`` is not one of them."""
    if render not in RENDERERS:
        raise InputError(f"rushhour: unknown renderer {render!r} (known: {', '.join(RENDERERS)})")


def render_observation(state: RushHourState, feedback: str | None, *, style: str = "grid", slide: bool = False) -> str:
    """The observation text of ``state``: the grid; with ``style`` ``legal`` a ``Legal moves:`` line in
    ``legal_actions`` order (one-cell moves, or every slide in slide mode); then the rejection line when
    ``feedback`` is given (the caller has made it printable)."""
    text = state.render_text()
    if style == "legal":
        moves = state.legal_actions(slides=slide)
        text += "\nLegal moves: " + (", ".join(m.text() for m in moves) or "none")
    return text if feedback is None else f"{text}\nLast answer rejected: {feedback}"


def parse_move(text: str) -> Move | None:
    """``move(X, dir)`` or ``move(X, dir, N)`` to a ``Move``; None when the text is neither.

    The grammar is ASCII: any other character, even one that case-folds to an ASCII letter, is a format error.
    """
    if not text.isascii():
        return None
    m = _MOVE.fullmatch(text)
    if m is None:
        return None
    return Move(m[1].upper(), m[2].lower(), int(m[3]) if m[3] is not None else 1)


def blocks_exit_row(layout: Layout, i: int, pos: int) -> bool:
    """True when vehicle ``i`` at offset ``pos`` has a cell in the exit row."""
    v = layout.vehicles[i]
    return (v.lane == EXIT_ROW) if v.horizontal else pos <= EXIT_ROW < pos + v.length


def _cleared(i: int) -> Callable[[RushHourState], bool]:
    """The predicate "vehicle i has no cell in the exit row"."""
    return lambda s: not blocks_exit_row(s.layout, i, s.positions[i])


def make_subgoals(cluster: Cluster, metric: str) -> tuple[list[Subgoal], list[list[int]]]:
    """The verifiable subgoals of a puzzle, in the order a fixed optimal solution reaches them.

    One subgoal per vehicle that blocks the exit row, right of the primary car, at the start: "X no longer
    blocks the exit row", ordered by when the tie-broken optimal solution (in ``metric``) first clears it;
    then "A reaches the exit". ``estimated_steps`` counts one-cell steps of that solution since the previous
    subgoal. Returns the subgoals and, per vehicle, the indices of the subgoals its moves can complete.
    """
    layout = cluster.layout
    state = RushHourState(layout, layout.unpack(cluster.start))
    right_of_a = state.positions[0] + 2
    blockers = {
        i
        for i, v in enumerate(layout.vehicles)
        if i and not v.horizontal and v.lane >= right_of_a and blocks_exit_row(layout, i, state.positions[i])
    }
    cleared: list[tuple[int, int]] = []  # (vehicle, one-cell steps since the previous subgoal)
    since = 0
    for move in cluster.solution(metric):
        state.apply(move)
        since += move.cells
        i = layout.index_of[move.vehicle]
        if i in blockers and not blocks_exit_row(layout, i, state.positions[i]):
            blockers.discard(i)
            cleared.append((i, since))
            since = 0
    touched: list[list[int]] = [[] for _ in layout.vehicles]
    goals: list[Subgoal] = []
    for i, steps in cleared:
        letter = layout.vehicles[i].letter
        touched[i].append(len(goals))
        goals.append(
            Subgoal(
                index=len(goals),
                description=f"Clear vehicle {letter} out of the exit row (row {EXIT_ROW + 1})",
                success_criteria=f"no cell of {letter} is in row {EXIT_ROW + 1}",
                estimated_steps=max(steps, 1),
                predicate=_cleared(i),
            )
        )
    touched[0].append(len(goals))
    goals.append(
        Subgoal(
            index=len(goals),
            description="Drive the red car A to the exit",
            success_criteria=f"A covers columns 5-6 of row {EXIT_ROW + 1}",
            preconditions=list(range(len(goals))),
            estimated_steps=max(since, 1),
            predicate=lambda s: s.is_solved(),
        )
    )
    return goals, touched


def task_board(task: Task) -> str:
    """The board of a Rush Hour task's payload.

    Raises:
        InputError: a payload without a ``board`` string.
    """
    board = task.payload.get("board") if isinstance(task.payload, dict) else None
    if not isinstance(board, str):
        raise InputError(f"task {task.task_id}: payload needs a 'board' string")
    return board


class RushHourRules:
    """The per-task rules object that ``TextEnv`` composes (see ``milepost.envs.base.Rules``).

    Distances come from the task's solved cluster (cached per board), so a step costs dictionary lookups.
    ``remaining_distance`` and progress are in one-cell steps, except in slide mode where they are in moves.
    """

    def __init__(self, task: Task, *, action_mode: ActionMode, render: str = "grid") -> None:
        check_renderer(render)
        board = task_board(task)
        try:
            cluster = solve_board(board)
        except InputError as exc:
            raise InputError(f"task {task.task_id}: {exc}") from None
        if not cluster.solvable:
            raise InputError(f"task {task.task_id}: the board cannot be solved")
        self.task = task
        self.cluster = cluster
        self.action_mode = action_mode
        self.render_style = render
        self.slide = action_mode.kind == "slide"
        self.metric = "moves" if self.slide else "steps"
        self.state = RushHourState(cluster.layout, cluster.layout.unpack(cluster.start))
        self.goal_distance = int(cluster.min_steps or 0)
        self._table = cluster.table(self.metric)
        self.subgoals, self._touched = make_subgoals(cluster, self.metric)

    # -- Rules protocol ------------------------------------------------------------------------------------

    def parse(self, piece: str) -> Move | None:
        return parse_move(piece)

    def check(self, action: Move) -> str | None:
        if action.cells > 1 and not self.slide:
            return (
                f"{self.action_mode.kind} mode moves one cell per action: write move({action.vehicle}, "
                f"{action.direction}) (move(X, dir, N) with N > 1 is the slide mode)"
            )
        return self.state.why_illegal(action)

    def apply(self, action: Move) -> bool:
        state = self.state
        before = self._table[state.key]
        i = state.layout.index_of[action.vehicle]
        sign = 1 if action.direction in ("down", "right") else -1
        state.shift(i, sign * action.cells)
        return self._table[state.key] < before

    def is_solved(self) -> bool:
        return self.state.is_solved()

    def state_key(self) -> int:
        """The packed vehicle positions (``RushHourState.key``): equal keys are equal boards of this task."""
        return self.state.key

    def successor_key(self, action: Move) -> int:
        """The key after the legal ``action``, as ``apply`` would leave it (``RushHourState.shift``'s update)."""
        state = self.state
        sign = 1 if action.direction in ("down", "right") else -1
        return state.key + (sign * action.cells << (BITS * state.layout.index_of[action.vehicle]))

    def snapshot(self) -> tuple[list[int], int, int]:
        """The live state's positions, occupancy and key (``TextEnv`` plays a macro answer, then ``restore``)."""
        state = self.state
        return list(state.positions), state.occ, state.key

    def restore(self, saved: tuple[list[int], int, int]) -> None:
        """Put ``snapshot``'s state back into the live state object (in place: callers may hold it)."""
        state = self.state
        state.positions[:] = saved[0]
        state.occ, state.key = saved[1], saved[2]

    def is_dead(self) -> bool:
        return False  # every move can be undone, so a solvable puzzle stays solvable

    def remaining_distance(self) -> int | None:
        return self._table[self.state.key]

    def touched_subgoals(self, action: Move) -> list[int]:
        i = self.state.layout.index_of.get(action.vehicle)
        return self._touched[i] if i is not None else []

    def format_action(self, action: Move) -> str:
        return action.text()

    def render(self, feedback: str | None) -> str:
        # TextEnv already replaces characters outside the observation charset in quoted model text.
        return render_observation(self.state, feedback, style=self.render_style, slide=self.slide)

    def goal_text(self) -> str:
        mode = self.action_mode
        if mode.kind == "slide":
            how = "Give exactly one action per turn; move(X, dir, N) slides X by N cells (N defaults to 1)."
        elif mode.kind == "atomic":
            how = "Give exactly one action per turn."
        elif mode.kind == "fixed":
            how = f"Give exactly {mode.n} actions per turn, separated by ';'; they are applied in order."
        elif mode.k is None:
            how = "Give one or more actions per turn, separated by ';'; they are applied in order."
        else:
            how = f"Give between 1 and {mode.k} actions per turn, separated by ';'; they are applied in order."
        return (
            "Solve this 6x6 Rush Hour puzzle: slide the vehicles so that the red car A reaches the exit on "
            f"the right of row {EXIT_ROW + 1}. Vehicles move only along their length (horizontal ones "
            "left/right, vertical ones up/down) and cannot pass through each other or walls. An action moves "
            f"vehicle X one cell: move(X, up|down|left|right). {how}"
        )


def oracle_move(rules: RushHourRules) -> Move | None:
    """The next action of an optimal solution from the current state, in the rules' metric (one-cell steps,
    or moves in slide mode), by the fixed tie-break (vehicle letter, then up, down, left, right, then the
    shortest slide). None when the puzzle is solved."""
    return optimal_move(rules.cluster, rules.state, rules.metric)
