"""Rush Hour game state: the object solvers, planners, subgoal predicates and tests use directly."""

from __future__ import annotations

from typing import NamedTuple, Self

from milepost.envs.rushhour.board import BITS, EXIT_ROW, GOAL_POS, SIDE, Layout, parse_board

DIRECTIONS = ("up", "down", "left", "right")  # also the tie-break order between directions
_SIGN = {"up": -1, "down": 1, "left": -1, "right": 1}
_VERTICAL = frozenset(("up", "down"))
# Column numbers on top, row numbers on the left, the exit on the right of the exit row, then the legend.
_GRID = "\n".join(
    ["   " + " ".join(str(c + 1) for c in range(SIDE))]
    + [f"{r + 1}  {{}}" + ("  <- exit" if r == EXIT_ROW else "") for r in range(SIDE)]
    + ["{}"]
)


class Move(NamedTuple):
    """Slide vehicle ``vehicle`` (display letter) ``cells`` cells toward ``direction``."""

    vehicle: str
    direction: str
    cells: int = 1

    def text(self) -> str:
        """Canonical action text: ``move(B, up)`` for one cell, ``move(B, up, 3)`` for a slide."""
        if self.cells == 1:
            return f"move({self.vehicle}, {self.direction})"
        return f"move({self.vehicle}, {self.direction}, {self.cells})"


class RushHourState:
    """Vehicle offsets on a fixed layout, with the occupancy bitmask and packed key kept up to date.

    ``positions[i]`` is vehicle i's column (horizontal) or row (vertical) in the layout's order; ``key`` is
    ``layout.pack(positions)``, the index into a solved cluster's distance tables.
    """

    __slots__ = ("key", "layout", "occ", "positions")

    def __init__(self, layout: Layout, positions: list[int]) -> None:
        self.layout = layout
        self.positions = list(positions)
        self.occ = layout.occupancy(self.positions)
        self.key = layout.pack(self.positions)

    @classmethod
    def from_board(cls, board: str) -> RushHourState:
        """A state from a Fogleman board string (raises ``InputError`` when malformed)."""
        layout, positions = parse_board(board)
        return cls(layout, positions)

    # -- game-state API ------------------------------------------------------------------------------------

    def legal_actions(self, slides: bool = False) -> list[Move]:
        """Legal moves in tie-break order (vehicle letter, then up, down, left, right, then length).

        One-cell moves by default; ``slides=True`` lists every slide of any length.
        """
        out = []
        for i in self.layout.display_order:
            v = self.layout.vehicles[i]
            # A vehicle moves along one axis; (up, down) and (left, right) are each in DIRECTIONS order.
            back, fwd = ("left", "right") if v.horizontal else ("up", "down")
            for word, sign in ((back, -1), (fwd, 1)):
                run = self._free_run(i, sign)
                for cells in range(1, (run if slides else min(run, 1)) + 1):
                    out.append(Move(v.letter, word, cells))
        return out

    def why_illegal(self, move: Move) -> str | None:
        """Why ``move`` cannot be played here (unknown vehicle, off-axis, blocked), or None when legal."""
        i = self.layout.index_of.get(move.vehicle)
        if i is None:
            return f"there is no vehicle {move.vehicle} (vehicles: {', '.join(sorted(self.layout.index_of))})"
        v = self.layout.vehicles[i]
        if (move.direction in _VERTICAL) == v.horizontal:
            axis = "left/right" if v.horizontal else "up/down"
            return f"{v.letter} is {'horizontal' if v.horizontal else 'vertical'}: it moves {axis} only"
        if move.cells < 1:
            return f"a move must cover at least 1 cell, not {move.cells}"
        run = self._free_run(i, _SIGN[move.direction])
        if run >= move.cells:
            return None
        stopped = self.positions[i] + _SIGN[move.direction] * (run + (v.length if _SIGN[move.direction] > 0 else 1))
        plural = "s" if move.cells > 1 else ""
        if not 0 <= stopped < SIDE:
            return f"{v.letter} cannot move {move.direction} {move.cells} cell{plural}: the edge of the board"
        cell = v.lane * SIDE + stopped if v.horizontal else stopped * SIDE + v.lane
        what = "a wall" if cell in self.layout.walls else self._vehicle_at(cell)
        where = f"row {cell // SIDE + 1}, column {cell % SIDE + 1}"
        return f"{v.letter} cannot move {move.direction} {move.cells} cell{plural}: blocked by {what} at {where}"

    def apply(self, move: Move) -> None:
        """Play a legal move; raises ``ValueError`` naming the reason when it is not legal."""
        why = self.why_illegal(move)
        if why is not None:
            raise ValueError(why)
        self.shift(self.layout.index_of[move.vehicle], _SIGN[move.direction] * move.cells)

    def is_solved(self) -> bool:
        return self.positions[0] == GOAL_POS

    def clone(self) -> Self:
        other = object.__new__(type(self))
        other.layout = self.layout
        other.positions = list(self.positions)
        other.occ = self.occ
        other.key = self.key
        return other

    def render_text(self) -> str:
        """The grid with 1-based row and column numbers, the exit marked, and which way each vehicle moves."""
        layout = self.layout
        cells = layout.blank[:]
        for v, covers, pos in zip(layout.vehicles, layout.cell_lists, self.positions):
            for c in covers[pos]:
                cells[c] = v.letter
        rows = [" ".join(cells[k : k + SIDE]) for k in range(0, SIDE * SIDE, SIDE)]
        return _GRID.format(*rows, layout.legend)

    # -- helpers -------------------------------------------------------------------------------------------

    def board(self, letters: str = "original") -> str:
        """The Fogleman string of this state (original letters by default)."""
        return self.layout.board(self.positions, letters=letters)

    def shift(self, i: int, delta: int) -> None:
        """Move vehicle ``i`` by ``delta`` offsets without checking (callers have checked legality)."""
        masks = self.layout.masks[i]
        old = self.positions[i]
        new = old + delta
        self.occ ^= masks[old] ^ masks[new]
        self.positions[i] = new
        self.key += delta << (BITS * i)

    def _free_run(self, i: int, sign: int) -> int:
        """How many cells vehicle ``i`` can slide toward ``sign`` before hitting something."""
        rows = self.layout.entering[i]
        pos = self.positions[i]
        run = 0
        while True:
            enter = rows[pos][0 if sign > 0 else 1]
            if enter == 0 or self.occ & enter:
                return run
            run += 1
            pos += sign

    def _vehicle_at(self, cell: int) -> str:
        bit = 1 << cell
        for i, masks in enumerate(self.layout.masks):
            if masks[self.positions[i]] & bit:
                return f"vehicle {self.layout.vehicles[i].letter}"
        return "nothing"  # pragma: no cover - callers only ask about occupied cells

    def __repr__(self) -> str:
        return f"RushHourState({self.board()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RushHourState) and other.layout is self.layout and other.key == self.key

    def __hash__(self) -> int:
        return hash((id(self.layout), self.key))
