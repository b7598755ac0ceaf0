"""A golden playthrough of a two-item order: the exact text a model sees, turn by turn, checked in and diffed.

Regenerate after an intended change with
``MILEPOST_UPDATE_GOLDEN=1 pytest tests/envs/webshop/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from milepost.envs.webshop import WebShopEnv, generate_task

GOLDEN = Path(__file__).with_name("golden_webshop.txt")
ANSWERS = [
    "<think>start with the lip balm</think> REASON: search. ACTION: search[paraben free sensitive skin lip balm]",
    "ACTION: click[B055CQ54PK]",
    "ACTION: click[Reviews]",
    "ACTION: click[< Prev]",
    "ACTION: click[8 fl oz]",
    "I think mint is right",
    "ACTION: click[Checkout]",
    "ACTION: click[mint]",
    "REASON: both options set. ACTION: click[Add to Cart]",
    "ACTION: search[keto friendly kosher low sodium green tea]",
    "ACTION: click[b03v0jluj6]",
    "ACTION: click[pack of 12]",
    "ACTION: click[Buy Now]",
]


def transcript() -> str:
    task = generate_task(4, 3, 2, catalogue_size=300)
    assert task is not None
    env = WebShopEnv(size=2, reward_weights={"milestone": 1.0})
    obs, info = env.reset(options={"task": task})
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
    assert "TERMINATED True" in text.splitlines()[-2] and '"solved": true' in text.splitlines()[-1]
