"""The technique table: HoDoKu's solving order, step scores and levels, and the paper's tiers.

HoDoKu (Hobiger, 2.2.0, ``Options.DEFAULT_SOLVER_STEPS``) gives every technique an index that fixes the
order in which its solver looks for steps, a base score added per step, and a difficulty level. A puzzle's
HoDoKu level is the highest level among the steps of its solution path, bumped to the next level while the
total score exceeds the level's cap (``LEVEL_CAPS``). The paper (appendix D.4) sorts techniques into three
tiers instead: easy (a cell with one candidate left), medium (local reasoning) and hard (long-range or chained
reasoning; every technique it does not name as easy or medium).

Only the techniques the grader implements are listed; a puzzle that needs anything else is graded ``beyond``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Tier = Literal["easy", "medium", "hard", "beyond"]
TIERS: tuple[Tier, ...] = ("easy", "medium", "hard", "beyond")
"""Paper tiers from easiest to hardest; ``beyond`` = the grader could not finish the puzzle."""

HodokuLevel = Literal["easy", "medium", "hard", "unfair", "extreme"]
HODOKU_LEVELS: tuple[HodokuLevel, ...] = ("easy", "medium", "hard", "unfair", "extreme")
LEVEL_CAPS: dict[HodokuLevel, float] = {
    "easy": 800,
    "medium": 1000,
    "hard": 1600,
    "unfair": 1800,
    "extreme": float("inf"),
}
"""HoDoKu's maximum score per level (``DEFAULT_DIFFICULTY_LEVELS``)."""


class Technique(StrEnum):
    """The techniques the grader finds; values are HoDoKu's names."""

    FULL_HOUSE = "Full House"
    NAKED_SINGLE = "Naked Single"
    HIDDEN_SINGLE = "Hidden Single"
    LOCKED_PAIR = "Locked Pair"
    LOCKED_TRIPLE = "Locked Triple"
    LOCKED_CANDIDATES_1 = "Locked Candidates Type 1 (Pointing)"
    LOCKED_CANDIDATES_2 = "Locked Candidates Type 2 (Claiming)"
    NAKED_PAIR = "Naked Pair"
    NAKED_TRIPLE = "Naked Triple"
    HIDDEN_PAIR = "Hidden Pair"
    HIDDEN_TRIPLE = "Hidden Triple"
    NAKED_QUADRUPLE = "Naked Quadruple"
    HIDDEN_QUADRUPLE = "Hidden Quadruple"
    X_WING = "X-Wing"
    SWORDFISH = "Swordfish"
    JELLYFISH = "Jellyfish"
    REMOTE_PAIR = "Remote Pair"
    BUG_PLUS_1 = "Bivalue Universal Grave + 1"
    SKYSCRAPER = "Skyscraper"
    TWO_STRING_KITE = "2-String Kite"
    TURBOT_FISH = "Turbot Fish"
    EMPTY_RECTANGLE = "Empty Rectangle"
    W_WING = "W-Wing"
    XY_WING = "XY-Wing"
    XYZ_WING = "XYZ-Wing"
    UNIQUENESS_1 = "Uniqueness Test 1"
    UNIQUENESS_2 = "Uniqueness Test 2"
    UNIQUENESS_3 = "Uniqueness Test 3"
    UNIQUENESS_4 = "Uniqueness Test 4"
    UNIQUENESS_5 = "Uniqueness Test 5"
    UNIQUENESS_6 = "Uniqueness Test 6"
    HIDDEN_RECTANGLE = "Hidden Rectangle"
    AVOIDABLE_RECTANGLE_1 = "Avoidable Rectangle Type 1"
    AVOIDABLE_RECTANGLE_2 = "Avoidable Rectangle Type 2"
    FINNED_X_WING = "Finned X-Wing"
    SASHIMI_X_WING = "Sashimi X-Wing"
    FINNED_SWORDFISH = "Finned Swordfish"
    SASHIMI_SWORDFISH = "Sashimi Swordfish"
    FINNED_JELLYFISH = "Finned Jellyfish"
    SASHIMI_JELLYFISH = "Sashimi Jellyfish"


@dataclass(frozen=True)
class TechniqueInfo:
    """One row of the table."""

    technique: Technique
    code: str  # HoDoKu's library code (the technique field of reglib lines)
    order: int  # HoDoKu's solver index: lower is tried first
    score: int  # HoDoKu's base score per step
    level: HodokuLevel
    tier: Tier  # the paper's tier (appendix D.4)


_T = Technique
# (technique, library code, HoDoKu index, score, HoDoKu level, paper tier).
_ROWS: tuple[tuple[Technique, str, int, int, HodokuLevel, Tier], ...] = (
    (_T.FULL_HOUSE, "0000", 100, 4, "easy", "easy"),
    (_T.NAKED_SINGLE, "0003", 200, 4, "easy", "easy"),
    (_T.HIDDEN_SINGLE, "0002", 300, 14, "easy", "medium"),
    (_T.LOCKED_PAIR, "0110", 1000, 40, "medium", "medium"),
    (_T.LOCKED_TRIPLE, "0111", 1100, 60, "medium", "medium"),
    (_T.LOCKED_CANDIDATES_1, "0100", 1200, 50, "medium", "medium"),
    (_T.LOCKED_CANDIDATES_2, "0101", 1210, 50, "medium", "medium"),
    (_T.NAKED_PAIR, "0200", 1300, 60, "medium", "medium"),
    (_T.NAKED_TRIPLE, "0201", 1400, 80, "medium", "medium"),
    (_T.HIDDEN_PAIR, "0210", 1500, 70, "medium", "medium"),
    (_T.HIDDEN_TRIPLE, "0211", 1600, 100, "medium", "medium"),
    (_T.NAKED_QUADRUPLE, "0202", 2000, 120, "hard", "hard"),
    (_T.HIDDEN_QUADRUPLE, "0212", 2100, 150, "hard", "hard"),
    (_T.X_WING, "0300", 2200, 140, "hard", "medium"),
    (_T.SWORDFISH, "0301", 2300, 150, "hard", "hard"),
    (_T.JELLYFISH, "0302", 2400, 160, "hard", "hard"),
    (_T.REMOTE_PAIR, "0703", 2800, 110, "hard", "hard"),
    (_T.BUG_PLUS_1, "0610", 2900, 100, "hard", "hard"),
    (_T.SKYSCRAPER, "0400", 3000, 130, "hard", "hard"),
    (_T.TWO_STRING_KITE, "0401", 3100, 150, "hard", "hard"),
    (_T.TURBOT_FISH, "0403", 3120, 120, "hard", "hard"),
    (_T.EMPTY_RECTANGLE, "0402", 3170, 120, "hard", "hard"),
    (_T.W_WING, "0803", 3200, 150, "hard", "hard"),
    (_T.XY_WING, "0800", 3300, 160, "hard", "hard"),
    (_T.XYZ_WING, "0801", 3400, 180, "hard", "hard"),
    (_T.UNIQUENESS_1, "0600", 3500, 100, "hard", "medium"),
    (_T.UNIQUENESS_2, "0601", 3600, 100, "hard", "medium"),
    (_T.UNIQUENESS_3, "0602", 3700, 100, "hard", "medium"),
    (_T.UNIQUENESS_4, "0603", 3800, 100, "hard", "medium"),
    (_T.UNIQUENESS_5, "0604", 3900, 100, "hard", "hard"),
    (_T.UNIQUENESS_6, "0605", 4000, 100, "hard", "medium"),
    (_T.HIDDEN_RECTANGLE, "0606", 4010, 100, "hard", "hard"),
    (_T.AVOIDABLE_RECTANGLE_1, "0607", 4020, 100, "hard", "hard"),
    (_T.AVOIDABLE_RECTANGLE_2, "0608", 4030, 100, "hard", "hard"),
    (_T.FINNED_X_WING, "0310", 4100, 130, "hard", "hard"),
    (_T.SASHIMI_X_WING, "0320", 4200, 150, "hard", "hard"),
    (_T.FINNED_SWORDFISH, "0311", 4300, 200, "unfair", "hard"),
    (_T.SASHIMI_SWORDFISH, "0321", 4400, 240, "unfair", "hard"),
    (_T.FINNED_JELLYFISH, "0312", 4500, 250, "unfair", "hard"),
    (_T.SASHIMI_JELLYFISH, "0322", 4600, 260, "unfair", "hard"),
)

TABLE: dict[Technique, TechniqueInfo] = {row[0]: TechniqueInfo(*row) for row in _ROWS}
"""Every implemented technique, in HoDoKu's solving order."""

BY_CODE: dict[str, Technique] = {info.code: t for t, info in TABLE.items()}
"""Technique by HoDoKu library code (``0300`` -> X-Wing)."""

TIER_RANK: dict[Tier, int] = {tier: i for i, tier in enumerate(TIERS)}
LEVEL_RANK: dict[HodokuLevel, int] = {level: i for i, level in enumerate(HODOKU_LEVELS)}


def hodoku_level(techniques: dict[Technique, int]) -> tuple[HodokuLevel, int]:
    """HoDoKu's level and score of a finished solution path, from its technique counts.

    The level starts at the hardest technique's level and moves up while the score exceeds the level's cap,
    as ``SudokuSolver`` does after a solve.
    """
    score = sum(TABLE[t].score * count for t, count in techniques.items())
    rank = max((LEVEL_RANK[TABLE[t].level] for t in techniques), default=0)
    while score > LEVEL_CAPS[HODOKU_LEVELS[rank]]:
        rank += 1
    return HODOKU_LEVELS[rank], score


def paper_tier(techniques: dict[Technique, int] | list[Technique]) -> Tier:
    """The paper's tier of a finished solution path: the hardest tier among its techniques."""
    return max((TABLE[t].tier for t in techniques), key=TIER_RANK.__getitem__, default="easy")
