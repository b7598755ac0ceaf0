"""Action-shaped text with non-ASCII look-alikes mixed in, for the environments' grammar tests and the fuzz script.

The action grammar is ASCII. These strategies build answers from grammar slots (``move(X, dir, N)``,
``value(n, rXcY)``, an ``ACTION:`` tag, separators), each slot either its ASCII form, so that the valid paths are
reached, or a form that Unicode case folding, compatibility normalisation or ``\\d`` would wrongly accept.
"""

from __future__ import annotations

from hypothesis import strategies as st

# Characters that fold, normalise or classify as something ASCII.
DOTTED_I = "\u0130"  # İ: lower() is "i̇"; re.IGNORECASE matched it with [A-Za-z]
DOTLESS_I = "\u0131"  # ı: upper() is "I"
KELVIN = "\u212a"  # K: lower() is "k"
LONG_S = "\u017f"  # ſ: upper() is "S"
SHARP_S = "\u00df"  # ß: upper() is "SS" (changes the length)
FOREIGN_DIGITS = "\u0663\u0969\u09e9\uff13\U0001d7d1"  # ٣ ३ ৩ ３ 𝟑 (Arabic-Indic, Devanagari, Bengali, fullwidth, bold)
COMBINING = "\u0301\u0307\u0338"  # acute, dot above, long solidus overlay
SPACES = "\u00a0\u2003\u3000\u200b\x1c\x85"  # no-break, em, ideographic, zero-width space; ASCII FS; NEL
LOOKALIKES = "\u0391\u0392\u0421\u0415\u043e\u03bf"  # Greek Alpha/Beta, Cyrillic Es/Ie/o, Greek omicron


def fullwidth(text: str) -> str:
    """``text`` with ASCII letters and digits turned into their fullwidth compatibility forms (``ｍｏｖｅ``)."""
    return "".join(chr(ord(ch) + 0xFEE0) if ch.isascii() and ch.isalnum() else ch for ch in text)


ODD_LETTERS = st.sampled_from([DOTTED_I, DOTLESS_I, KELVIN, LONG_S, SHARP_S, *LOOKALIKES, fullwidth("B")])
ODD_DIGITS = st.sampled_from(list(FOREIGN_DIGITS))


def _mark(word: str) -> st.SearchStrategy[str]:
    """``word`` unchanged (most often), fullwidth, upper-cased, or with a combining mark after one character."""
    marked = st.tuples(st.integers(0, max(len(word) - 1, 0)), st.sampled_from(list(COMBINING))).map(
        lambda t: word[: t[0] + 1] + t[1] + word[t[0] + 1 :]
    )
    return st.one_of(st.just(word), st.just(word), st.just(word.upper()), st.just(fullwidth(word)), marked)


def _space() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(["", " ", "  "]), st.sampled_from(list(SPACES)))


def _tag() -> st.SearchStrategy[str]:
    odd = ["ACT" + DOTTED_I + "ON: ", "act" + DOTLESS_I + "on: ", SHARP_S * 3 + "ACTION: ", fullwidth("ACTION") + ": "]
    prefix = st.sampled_from(["", "<think>é ok</think> REASON: ünïcode is fine here. "])
    return st.tuples(prefix, st.sampled_from(["", "ACTION: ", "action: ", "AcTiOn: ", *odd])).map("".join)


def rush_actions(letters: str = "ABCDEFGHQ") -> st.SearchStrategy[str]:
    """One or two ``move(X, dir[, N])`` answers, each slot ASCII or a look-alike."""
    letter = st.one_of(st.sampled_from(list(letters + letters.lower())), ODD_LETTERS)
    direction = st.sampled_from(["up", "down", "left", "right"]).flatmap(_mark)
    count = st.one_of(st.just(""), st.integers(0, 4).map(str), ODD_DIGITS).map(lambda c: f", {c}" if c else "")
    one = st.tuples(_mark("move"), st.just("("), _space(), letter, st.just(","), _space(), direction, count)
    move = st.tuples(one.map("".join), st.just(")"), st.sampled_from(["", ".", "\uff0e"]), _space()).map("".join)
    answer = st.lists(move, min_size=1, max_size=2).map("; ".join)
    return st.tuples(_tag(), answer).map("".join)


def sudoku_actions(n: int = 4) -> st.SearchStrategy[str]:
    """One or two ``value(n, rXcY)`` / ``value(rXcY, n)`` answers, each slot ASCII or a look-alike."""
    digit = st.one_of(st.integers(1, n).map(str), st.integers(1, n).map(str), ODD_DIGITS)
    r = st.one_of(st.sampled_from(["r", "R"]), st.sampled_from(["\u0433", fullwidth("r")]))  # г: Cyrillic ge
    cell = st.tuples(r, digit, st.sampled_from(["c", "C", "\u0441", fullwidth("c")]), digit).map("".join)
    digit_first = st.tuples(digit, st.just(","), _space(), cell)
    cell_first = st.tuples(cell, st.just(","), _space(), digit)
    args = st.one_of(digit_first, cell_first).map("".join)
    fill = st.tuples(_mark("value"), st.just("("), args, st.just(")"), _space()).map("".join)
    answer = st.lists(fill, min_size=1, max_size=2).map("; ".join)
    return st.tuples(_tag(), answer).map("".join)
