"""A golden playthrough: the exact text a model sees, turn by turn, checked in and diffed.

Regenerate after an intended change with ``MILEPOST_UPDATE_GOLDEN=1 pytest tests/envs/sudoku/test_golden.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from milepost.envs.sudoku import SudokuEnv
from milepost.types import Task

GOLDEN = Path(__file__).with_name("golden_4x4.txt")
ANSWERS = [
    "<think>start top left</think> REASON: r1c1 misses only 1. ACTION: value(1, r1c1)",
    "I think the answer is 3",
    "ACTION: value(2, r1c1)",
    "ACTION: value(r2c1, 3); value(2, r2c4)",
    "ACTION: value(3, r2c1)",
    "ACTION: value(3, r4c1)",
    "REASON: 1 fits. ACTION: value(1, r2c4)",
]


def transcript(task: Task) -> str:
    env = SudokuEnv(size=4, render="grid", wrong_fill="dead_end")
    obs, info = env.reset(options={"task": task})
    lines = ["GOAL: " + env.goal_text(), "OBSERVATION 0:", obs, "INFO: " + json.dumps(info, sort_keys=True)]
    for t, answer in enumerate(ANSWERS, 1):
        obs, reward, terminated, truncated, info = env.step(answer)
        lines += [
            f"ANSWER {t}: {answer}",
            f"OBSERVATION {t}:",
            obs,
            f"REWARD {reward:+.3f} TERMINATED {terminated} TRUNCATED {truncated}",
            "INFO: " + json.dumps(info, sort_keys=True),
        ]
        if terminated or truncated:
            break
    return "\n".join(lines) + "\n"


def test_golden_transcript(task4: Task) -> None:
    text = transcript(task4)
    if os.environ.get("MILEPOST_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert GOLDEN.read_text() == text
