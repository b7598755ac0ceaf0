"""HoDoKu's regression library, technique by technique: every case of an implemented technique must give
exactly the listed eliminations / placements (and fail cases none), as HoDoKu's ``RegressionTester`` checks.

The whole library of implemented techniques runs in well under a second, so it is part of the default run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from milepost.envs.sudoku.grader import FINDERS, TABLE
from milepost.envs.sudoku.grader.scores import BY_CODE
from tests.envs.sudoku.grader.reglib import Case, check, parse_case, read_cases

CASES = read_cases()
IMPLEMENTED = sorted({c.code for c in CASES if c.technique in FINDERS})
# Pass counts per technique at the time of writing (all cases of every implemented technique).
EXPECTED_TOTALS = {
    "0000": 37, "0002": 36, "0003": 35, "0100": 36, "0101": 36, "0110": 18, "0111": 14, "0200": 27,
    "0201": 27, "0202": 11, "0210": 27, "0211": 27, "0212": 17, "0300": 11, "0301": 11, "0302": 12,
    "0310": 10, "0311": 11, "0312": 10, "0320": 9, "0321": 9, "0322": 7, "0400": 10, "0401": 12,
    "0402": 18, "0403": 9, "0600": 17, "0601": 20, "0602": 13, "0603": 21, "0604": 8, "0605": 12,
    "0606": 23, "0607": 10, "0608": 15, "0610": 15, "0703": 20, "0800": 9, "0801": 16, "0803": 14,
}  # fmt: skip


def test_library_is_read_whole() -> None:
    assert len(CASES) == 1112
    assert sum(EXPECTED_TOTALS.values()) == sum(1 for c in CASES if c.code in EXPECTED_TOTALS) == 700


def test_every_implemented_technique_has_cases() -> None:
    codes = {TABLE[t].code for t in FINDERS}
    assert set(IMPLEMENTED) == codes == set(EXPECTED_TOTALS)


@pytest.mark.parametrize("code", IMPLEMENTED)
def test_technique_passes_every_library_case(code: str) -> None:
    cases = [c for c in CASES if c.code == code]
    failures = {c.label: why for c in cases if (why := check(c)) is not None}
    assert len(cases) == EXPECTED_TOTALS[code]
    assert not failures, f"{code}: {len(cases) - len(failures)}/{len(cases)} pass; failing: {failures}"


def test_fail_cases_are_checked() -> None:
    fail_cases = [c for c in CASES if c.fail_case and c.code in EXPECTED_TOTALS]
    assert {c.code for c in fail_cases} == {"0606", "0610"}
    assert all(check(c) is None for c in fail_cases)


def test_a_wrong_expectation_fails() -> None:
    """The checker itself: the same board with another elimination listed must not pass."""
    line = (
        ":0300:9:6+7.+83.+1+2+5+1+8.....7.+23517.8....8.6....4.73..2....6......+7+9+34+25+6+81+5+4+1+69873+2"
        "+8+6+2+7+1+3+59+4::916 926 929 946 949 966 969::"
    )
    good = parse_case(line)
    assert check(good) is None
    wrong = parse_case(line.replace("::916 926", "::916 936"))
    assert check(wrong) is not None and check(wrong).startswith("wrong step")  # type: ignore[union-attr]
    none_here = Case(**{**good.__dict__, "digits": (1,)})
    assert check(none_here) == "no step found"


def test_pass_counts_per_technique() -> None:
    """The closing note's table: pass / total per technique (printed with ``-s``)."""
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for case in CASES:
        if case.code in EXPECTED_TOTALS:
            total[case.code] += 1
            passed[case.code] += check(case) is None
    rows = [f"{code} {BY_CODE[code].value}: {passed[code]}/{total[code]}" for code in sorted(total)]
    print("\n".join(rows))
    assert passed == total
