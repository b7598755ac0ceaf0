"""Reading HoDoKu's regression library and checking one case the way HoDoKu's ``RegressionTester`` does.

A line is ``:<code>[-variant]:<candidates>:<givens>:<deleted>:<eliminations>:<placements>:<extra>:``. The
board is the givens (``+`` marks a placed digit; both are placed here) with the deleted candidates removed.
Every step of the technique whose digits equal ``<candidates>`` must have exactly the listed eliminations /
placements, and there must be at least one; a ``-x`` variant is a fail case, where there must be none.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from milepost.envs.sudoku.grader import single_digit
from milepost.envs.sudoku.grader.candidates import Board
from milepost.envs.sudoku.grader.grader import FINDERS
from milepost.envs.sudoku.grader.scores import BY_CODE, Technique

DATA = Path(__file__).resolve().parents[3] / "data" / "sudoku" / "hodoku"
REGLIB = DATA / "reglib-1.3.txt"
EXEMPLARS = DATA / "exemplars-1.0.txt"


def _triples(field: str) -> frozenset[tuple[int, int]]:
    """``"436 257"`` -> {(cell, digit)}: digit 4 at r3c6, digit 2 at r5c7."""
    out = set()
    for token in field.split():
        d, r, c = int(token[0]), int(token[1]), int(token[2])
        out.add(((r - 1) * 9 + c - 1, d))
    return frozenset(out)


@dataclass(frozen=True)
class Case:
    line: int
    code: str
    variant: str
    digits: tuple[int, ...]
    values: tuple[int, ...]
    placed: int  # board of the "+" cells: filled, but not givens
    deleted: frozenset[tuple[int, int]]
    eliminations: frozenset[tuple[int, int]]
    placements: frozenset[tuple[int, int]]

    @property
    def technique(self) -> Technique | None:
        return BY_CODE.get(self.code)

    @property
    def fail_case(self) -> bool:
        return self.variant == "x"

    @property
    def label(self) -> str:
        return f"{self.code}{'-' + self.variant if self.variant else ''}@{self.line}"

    def board(self) -> Board:
        board = Board.from_puzzle(list(self.values), placed=self.placed)
        for cell, digit in self.deleted:
            board.eliminate(cell, digit)
        return board


def parse_case(text: str, line: int = 0) -> Case:
    parts = text.strip().split(":")
    code, _, variant = parts[1].partition("-")
    values = []
    placed = 0
    plus = False
    for ch in parts[3]:
        if ch == "+":
            plus = True
            continue
        if plus:
            placed |= 1 << len(values)
            plus = False
        values.append(0 if ch in ".0" else int(ch))
    assert len(values) == 81, text
    field = lambda i: parts[i] if len(parts) > i else ""  # noqa: E731
    return Case(
        line,
        code,
        variant,
        tuple(sorted(int(ch) for ch in parts[2])),
        tuple(values),
        placed,
        _triples(field(4)),
        _triples(field(5)),
        _triples(field(6)),
    )


def read_cases(path: Path = REGLIB) -> list[Case]:
    cases = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith(":"):
            cases.append(parse_case(raw, lineno))
    return cases


def check(case: Case) -> str | None:
    """None when the case passes; otherwise why it fails."""
    technique = case.technique
    if technique is None:
        return f"technique code {case.code} is not implemented"
    board = case.board()
    finder = FINDERS[technique]
    if technique == Technique.EMPTY_RECTANGLE and case.variant == "1":
        # Variant 1 turns on HoDoKu's option for boxes with one place on each line (off in the grader).
        finder = partial(single_digit.empty_rectangle, allow_two=True)
    found = [s for s in finder(board) if s.technique == technique and s.digits == case.digits]
    if case.fail_case:
        return f"fail case, but found {found[0].describe()}" if found else None
    if not found:
        return "no step found"
    for step in found:
        if frozenset(step.eliminations) != case.eliminations or frozenset(step.placements) != case.placements:
            return f"wrong step {step.describe()}"
    return None


# -- exemplars ---------------------------------------------------------------------------------------------

_T = Technique
EXEMPLAR_CODES: dict[str, frozenset[Technique]] = {
    "s": frozenset({_T.FULL_HOUSE, _T.NAKED_SINGLE, _T.HIDDEN_SINGLE}),
    "lc1": frozenset({_T.LOCKED_CANDIDATES_1}),
    "lc2": frozenset({_T.LOCKED_CANDIDATES_2}),
    "l2": frozenset({_T.LOCKED_PAIR}),
    "l3": frozenset({_T.LOCKED_TRIPLE}),
    "n2": frozenset({_T.NAKED_PAIR}),
    "n3": frozenset({_T.NAKED_TRIPLE}),
    "n4": frozenset({_T.NAKED_QUADRUPLE}),
    "h2": frozenset({_T.HIDDEN_PAIR}),
    "h3": frozenset({_T.HIDDEN_TRIPLE}),
    "h4": frozenset({_T.HIDDEN_QUADRUPLE}),
    "bf2": frozenset({_T.X_WING}),
    "bf3": frozenset({_T.SWORDFISH}),
    "bf4": frozenset({_T.JELLYFISH}),
    "fbf2": frozenset({_T.FINNED_X_WING}),
    "fbf3": frozenset({_T.FINNED_SWORDFISH}),
    "fbf4": frozenset({_T.FINNED_JELLYFISH}),
    "sbf2": frozenset({_T.SASHIMI_X_WING}),
    "sbf3": frozenset({_T.SASHIMI_SWORDFISH}),
    "sbf4": frozenset({_T.SASHIMI_JELLYFISH}),
    "sk": frozenset({_T.SKYSCRAPER}),
    "2sk": frozenset({_T.TWO_STRING_KITE}),
    "tf": frozenset({_T.TURBOT_FISH}),
    "er": frozenset({_T.EMPTY_RECTANGLE}),
    "w": frozenset({_T.W_WING}),
    "xy": frozenset({_T.XY_WING}),
    "xyz": frozenset({_T.XYZ_WING}),
    "u1": frozenset({_T.UNIQUENESS_1}),
    "u2": frozenset({_T.UNIQUENESS_2}),
    "u3": frozenset({_T.UNIQUENESS_3}),
    "u4": frozenset({_T.UNIQUENESS_4}),
    "u5": frozenset({_T.UNIQUENESS_5}),
    "u6": frozenset({_T.UNIQUENESS_6}),
    "hr": frozenset({_T.HIDDEN_RECTANGLE}),
    "bug1": frozenset({_T.BUG_PLUS_1}),
    "ar1": frozenset({_T.AVOIDABLE_RECTANGLE_1}),
    "ar2": frozenset({_T.AVOIDABLE_RECTANGLE_2}),
    "rp": frozenset({_T.REMOTE_PAIR}),
}
"""Solution-path codes of HoDoKu's exemplar library that name implemented techniques."""


@dataclass(frozen=True)
class Exemplar:
    line: int
    section: str  # e.g. "0300"
    puzzle: str
    codes: tuple[str, ...]  # the annotated path, e.g. ("s", "bf2", "s")
    counts: tuple[int | None, ...]  # eliminations per annotated step: "bf2(9)" -> 9

    @property
    def technique(self) -> Technique | None:
        return BY_CODE.get(self.section)

    @property
    def count(self) -> int | None:
        """The annotated number of eliminations of the section technique's first step."""
        technique = self.technique
        for code, count in zip(self.codes, self.counts):
            if technique is not None and EXEMPLAR_CODES.get(code) == frozenset({technique}):
                return count
        return None

    @property
    def implemented_path(self) -> bool:
        """Whether every technique of the annotated path is one the grader implements."""
        return all(code in EXEMPLAR_CODES for code in self.codes)


def read_exemplars(path: Path = EXEMPLARS) -> list[Exemplar]:
    out = []
    section = ""
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith("#") and raw[1:5].isdigit() and raw[5:6] == ":":
            # The library files Avoidable Rectangle Type 2 under 0607 too; the regression library's code is 0608.
            section = "0608" if "Avoidable Rectangle Type 2" in raw else raw[1:5]
        elif raw[:1].isdigit() or raw[:1] == ".":
            puzzle, _, note = raw.partition("#")
            tokens = note.split()
            codes = tuple(token.split("(")[0] for token in tokens)
            counts = tuple(int(t.split("(")[1].rstrip(")")) if "(" in t else None for t in tokens)
            out.append(Exemplar(lineno, section, puzzle.strip(), codes, counts))
    return out
