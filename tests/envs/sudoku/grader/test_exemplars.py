"""HoDoKu's exemplar library, whole puzzles: the puzzle filed under a technique needs that technique.

Every exemplar whose annotated solution path uses only techniques the grader implements must be solved, and
its path must use the section's technique, its first such step eliminating as many candidates as annotated
(``bf2(9)``: an X-Wing that removes nine). The library (1.0) was annotated by an older HoDoKu than the 2.2
behaviour the grader follows (and that the regression library checks): for the puzzles listed below, HoDoKu
2.2 itself takes the same path as the grader (hodoku-py, validated against HoDoKu 2.2's jar, gives identical
steps; ``test_hodoku_parity.py``), so they are kept as known differences from the annotation. Exemplars that
need other techniques are counted, not required.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest

from milepost.envs.sudoku.grader import Grade, grade
from tests.envs.sudoku.grader.reglib import EXEMPLAR_CODES, read_exemplars

EXEMPLARS = [ex for ex in read_exemplars() if ex.technique is not None]

_LOCKED = "HoDoKu 2.2 calls this naked pair a Naked Pair (it eliminates only in its box); the path then takes "
_ORDER = "HoDoKu 2.2 tries {0} (index {1}) before {2}, and it applies here"
_SASHIMI = (
    "a Finned Swordfish (every base row has two body cells: HoDoKu 2.2's rule, checked by reglib 0311 at "
    "line 584) comes first in HoDoKu 2.2's order; the 1.0 library labelled such fish Sashimi"
)
_FIRST = "HoDoKu 2.2 takes the first {0} of its scan order ({1} eliminations); the annotation counts another"
KNOWN_DIFFERENCES: dict[int, str] = {
    62: _LOCKED + "a Locked Triple",
    63: _LOCKED + "a Locked Triple",
    228: _ORDER.format("Turbot Fish", 3120, "Finned X-Wing"),
    230: _ORDER.format("Turbot Fish", 3120, "Finned X-Wing"),
    263: _ORDER.format("Turbot Fish", 3120, "Sashimi X-Wing"),
    **{line: _SASHIMI for line in range(267, 273)},
    **{line: _ORDER.format("2-String Kite", 3100, "Empty Rectangle (3170)") for line in (391, 392, 393)},
}
COUNT_DIFFERENCES: dict[int, str] = {
    165: _FIRST.format("Hidden Triple", 11) + " (no Hidden Triple removes 9 after the singles)",
    234: _FIRST.format("Finned Swordfish", 1),
    236: _FIRST.format("Finned Swordfish", 1),
    266: _FIRST.format("Sashimi Swordfish", 1),
    724: _FIRST.format("XY-Wing", 2),
}


@cache
def _grade(line: int) -> Grade:
    """Each exemplar is graded once per session (about 1.5 s for all of them)."""
    return grade(next(e for e in EXEMPLARS if e.line == line).puzzle)


def _outcome(line: int) -> tuple[bool, bool]:
    ex = next(e for e in EXEMPLARS if e.line == line)
    found = _grade(line)
    return found.solved, ex.technique in found.techniques


def test_library_is_read_whole() -> None:
    assert len(read_exemplars()) == 669
    assert len(EXEMPLARS) == 440  # puzzles in sections of implemented techniques


@pytest.mark.parametrize("section", sorted({ex.section for ex in EXEMPLARS}))
def test_section_puzzles_need_their_technique(section: str) -> None:
    required = [ex for ex in EXEMPLARS if ex.section == section and ex.implemented_path]
    problems = {}
    for ex in required:
        found = _grade(ex.line)
        if not found.solved:
            problems[ex.line] = f"not solved ({found.remaining} cells left)"
        elif ex.line in KNOWN_DIFFERENCES:
            continue
        elif ex.technique not in found.techniques:
            problems[ex.line] = f"path uses {[t.value for t in found.techniques]}"
        elif ex.line not in COUNT_DIFFERENCES:
            first = next(s for s in found.steps if s.technique == ex.technique)
            if ex.count is not None and len(first.eliminations) != ex.count:
                problems[ex.line] = f"{first.describe()} eliminates {len(first.eliminations)}, not {ex.count}"
    assert not problems


@pytest.mark.parametrize("line", sorted(KNOWN_DIFFERENCES))
def test_known_differences_still_differ(line: int) -> None:
    """Guards the list: if a change makes one of these match, it should leave the list."""
    solved, uses = _outcome(line)
    assert solved and not uses, KNOWN_DIFFERENCES[line]


def test_count_differences_still_differ() -> None:
    for line in COUNT_DIFFERENCES:
        ex = next(e for e in EXEMPLARS if e.line == line)
        first = next(s for s in _grade(line).steps if s.technique == ex.technique)
        assert len(first.eliminations) != ex.count


def test_summary_counts() -> None:
    """The closing note's counts (print with ``-s``): implemented paths matched; other exemplars using it."""
    matched, required, used, other = Counter[str](), Counter[str](), Counter[str](), Counter[str]()
    counted = Counter[str]()
    for ex in EXEMPLARS:
        found = _grade(ex.line)
        if ex.implemented_path:
            required[ex.section] += 1
            matched[ex.section] += ex.technique in found.techniques
            first = next((s for s in found.steps if s.technique == ex.technique), None)
            counted[ex.section] += first is not None and len(first.eliminations) == ex.count
        else:
            other[ex.section] += 1
            used[ex.section] += ex.technique in found.techniques
    for section in sorted(required | other):
        print(
            f"{section}: {matched[section]}/{required[section]} implemented paths use it ({counted[section]} "
            f"with the annotated count); {used[section]}/{other[section]} others use it"
        )
    assert sum(required.values()) - sum(matched.values()) == len(KNOWN_DIFFERENCES)
    assert sum(matched.values()) - sum(counted.values()) == len(COUNT_DIFFERENCES)
    assert set(EXEMPLAR_CODES) >= {"s", "lc1", "bf2", "sk", "xy", "u1", "bug1", "rp"}
