"""Prompt construction: task goal g, optional plan, memory m_t (last K turns) and observation o_t.

Returns chat messages; backends render them with the tokenizer's chat template when it has one and with
``plain_prompt`` otherwise, so a tiny model and Qwen3 see the same content.
"""

from __future__ import annotations

from collections.abc import Sequence

from milepost.agent.memory import MemoryItem

ANSWER_FORMAT = "Answer as: <think>your reasoning</think> REASON: one short sentence ACTION: your action"
# The SGO agent's format: the reflection (which subgoals are done, the current one, the next one) comes first,
# in plan numbers, so that the validator can check the claims before the action is judged.
SGO_ANSWER_FORMAT = (
    "Answer as: <think>your reasoning</think> PROGRESS: done=N,N; current=N; next=N "
    "REASON: one short sentence ACTION: your action"
)


def build_messages(
    goal: str,
    observation: str,
    memory: Sequence[MemoryItem] = (),
    plan: str | None = None,
    answer_format: str = ANSWER_FORMAT,
) -> list[dict[str, str]]:
    """System message: goal, plan and answer format. User message: recent turns, then the observation."""
    system = goal if plan is None else f"{goal}\n\n{plan}"
    system = f"{system}\n{answer_format}"
    parts: list[str] = []
    if memory:
        parts.append("Recent turns:")
        for item in memory:
            parts.append(f"Observation:\n{item.observation}")
            parts.append(f"REASON: {item.reason} ACTION: {item.action}")
            if item.feedback:
                parts.append(f"Rejected: {item.feedback}")
        parts.append("")
    parts.append(f"Current observation:\n{observation}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def plain_prompt(messages: Sequence[dict[str, str]]) -> str:
    """The plain-text rendering used when a tokenizer has no chat template; the answer follows it."""
    return "\n\n".join(m["content"] for m in messages) + "\nANSWER: "
