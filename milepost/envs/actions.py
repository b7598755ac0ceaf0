"""Action text handling shared by the environments: the ACTION segment and macro-action counting.

An answer may be a bare action list (``value(5, r3c7); value(2, r3c8)``) or a full model answer
(``<think>..</think> REASON: ... ACTION: ...``); in the latter case the text after the last ``ACTION:`` is
used. The segment is split on ``;`` and each piece is handed to the environment's own action parser.

The action grammar is ASCII: tags match in ASCII case only and pieces are trimmed of ASCII whitespace only, so
case folding or compatibility forms of other scripts (``ı``, the Kelvin sign, fullwidth letters, no-break
spaces) never turn text into an action; the parsers refuse any piece that is not ASCII.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

_ACTION_TAGS = ("ACTION:", "Action:", "action:")
# str.upper() can change a string's length ("ß" -> "SS"), so a position found in text.upper() would not be a
# position in text: any other casing is found by an ASCII-only case-insensitive search instead.
_SPACE = string.whitespace
_ANY_CASE_TAG = re.compile(r"action:", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class ActionMode:
    """How many actions one step may carry.

    ``atomic``: exactly one. ``flexible``: 1..k (``k=None``: unbounded). ``fixed``: exactly n (ablations).
    ``slide``: exactly one, but an action may move several cells (Rush Hour ``move(X, dir, N)``).
    """

    kind: str = "atomic"
    k: int | None = None
    n: int | None = None

    def count_error(self, count: int) -> str | None:
        """Why ``count`` actions are not acceptable in this mode, or None."""
        if count == 0:
            return "no action given"
        if self.kind in ("atomic", "slide"):
            return None if count == 1 else f"{count} actions given; this mode takes exactly one per step"
        if self.kind == "fixed":
            return None if count == self.n else f"{count} actions given; this mode takes exactly {self.n}"
        if self.k is not None and count > self.k:
            return f"{count} actions given; at most {self.k} per step"
        return None

    @property
    def max_actions(self) -> int | None:
        if self.kind in ("atomic", "slide"):
            return 1
        return self.n if self.kind == "fixed" else self.k


def action_segment(text: str) -> str:
    """The part of ``text`` after the last ``ACTION:`` tag (any common casing), else ``text`` itself."""
    best = -1
    for tag in _ACTION_TAGS:
        pos = text.rfind(tag)
        if pos > best:
            best = pos
    if best < 0:
        best = max((m.start() for m in _ANY_CASE_TAG.finditer(text)), default=-1)
        if best < 0:
            return text
    return text[best + 7 :]


def split_actions(segment: str) -> list[str]:
    """Split an ACTION segment on ``;`` (newlines also separate), dropping empty pieces.

    Pieces are trimmed of ASCII whitespace only: ``str.strip()`` would also drop no-break spaces, control
    separators such as ``\\x1c`` and other scripts' spaces, letting them pass as part of an action.
    """
    if ";" not in segment and "\n" not in segment:
        piece = segment.strip(_SPACE)
        return [piece] if piece else []
    pieces = (p.strip(_SPACE) for p in segment.replace("\n", ";").split(";"))
    return [p for p in pieces if p]
