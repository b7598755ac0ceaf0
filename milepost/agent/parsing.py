"""The answer format ``<think>...</think> REASON: ... ACTION: ...`` (paper appendix C.1).

The think block is dropped from memory; REASON is kept. A missing or empty ACTION is not an error here: the
environment's parser turns it into a format penalty, so model output never crashes the loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_REASON = re.compile(r"REASON\s*:\s*(.*?)(?=,?\s*ACTION\s*:|$)", re.DOTALL | re.IGNORECASE)
_ACTION = re.compile(r"ACTION\s*:\s*(.*)", re.DOTALL | re.IGNORECASE)
_TAG = re.compile("ACTION", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAnswer:
    think: str
    reason: str
    action: str  # text after the last ACTION: tag, stripped; "" when there is none


def parse_answer(text: str) -> ParsedAnswer:
    """Split a model answer into its think block, REASON and ACTION parts (each may be empty)."""
    think_match = _THINK.search(text)
    think = think_match.group(1).strip() if think_match else ""
    rest = _THINK.sub(" ", text) if think_match else text
    reason_match = _REASON.search(rest)
    reason = reason_match.group(1).strip().rstrip(",").strip() if reason_match else ""
    # The last ACTION tag, found in ``rest`` itself: an index into rest.upper() is off after a character whose
    # upper case is longer ("ß" -> "SS").
    tags = [m.start() for m in _TAG.finditer(rest)]
    action = ""
    if tags:
        action_match = _ACTION.match(rest, tags[-1])
        if action_match:
            action = action_match.group(1).strip()
    return ParsedAnswer(think=think, reason=reason, action=action)


def format_answer(reason: str, action: str, think: str | None = None) -> str:
    """The canonical answer text (what SFT demonstrations and scripted policies write)."""
    head = f"<think>{think}</think> " if think else ""
    return f"{head}REASON: {reason} ACTION: {action}"
