"""A golden playthrough: the exact text a model sees, turn by turn, checked in and diffed.

Regenerate after an intended change with
``MILEPOST_UPDATE_GOLDEN=1 pytest tests/envs/rushhour/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from milepost.envs.rushhour import RushHourEnv, make_task

GOLDEN = Path(__file__).with_name("golden_rushhour.txt")
BOARD = "oBBBoHoooGoHAAoGoHoooCCCoDDDoooEEEFF"  # 7 moves, 12 one-cell steps (Fogleman's database)
ANSWERS = [
    "<think>G is stuck under B</think> REASON: make room above G. ACTION: move(B, left)",
    "I would move the truck out of the way",
    "ACTION: move(G, up)",
    "ACTION: move(A, up)",
    "ACTION: move(H, down)",
    "REASON: C blocks H. ACTION: move(C, left)",
    "ACTION: move(E, left)",
    "ACTION: move(F, left)",
    "ACTION: move(H, down)",
    "ACTION: move(H, down)",
    "ACTION: move(H, down, 1)",
    "ACTION: move(A, right)",
    "ACTION: move(A, right)",
    "ACTION: move(A, right)",
    "ACTION: move(A, right)",
]


def transcript() -> str:
    env = RushHourEnv(reward_weights={"milestone": 1.0})
    obs, info = env.reset(options={"task": make_task(BOARD, level="7-9", index=1)})
    lines = ["GOAL: " + env.goal_text(), "SUBGOALS: " + json.dumps([g.to_dict() for g in env.subgoals])]
    lines += ["OBSERVATION 0:", obs, "INFO: " + json.dumps(info, sort_keys=True)]
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


def test_golden_transcript() -> None:
    text = transcript()
    if os.environ.get("MILEPOST_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert GOLDEN.read_text() == text
    assert "TERMINATED True" in text.splitlines()[-2]
