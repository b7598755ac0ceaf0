"""Fuzz the text environments: seeded random answers, counting crashes, observations outside the observation space
and state changes on rejected input.

Each environment gets ``--n`` answers (default 100,000) over a pool of tasks and settings (Sudoku: 4x4, 6x6 and
9x9, every renderer, atomic / flexible / fixed modes, both wrong-fill rules; Rush Hour: generated boards of
several levels, atomic / slide / flexible / fixed modes, one with walls; web shop: one- and two-item orders,
every observation mode (``text``, ``text_rich``, ``accessibility``) and every action grammar (``search[...]`` /
``click[...]``, the accessibility tree's ``click [N]`` / ``type [N] [...]``) in atomic / flexible / fixed modes).
The answers mix, by weight:

* the oracle's move and well-formed moves the rules refuse, so the valid and invalid-action paths are reached;
* grammar-shaped answers whose slots are swapped for non-ASCII look-alikes: characters that case-fold or
  normalise to ASCII (dotted and dotless I, the Kelvin sign, long s, sharp s), fullwidth forms, other scripts'
  digits, combining marks, no-break and zero-width spaces, Greek and Cyrillic homoglyphs;
* valid answers with random single-character edits, long and ``;``-heavy answers, random Unicode text (lone
  surrogates included), ``ACTION:`` tags in any casing, and a few non-string actions.

Per step it checks: ``step`` does not raise; the observation is in ``env.observation_space``; the state equals
the state before the step with exactly the reported ``info["actions"]`` replayed (so a rejected answer changed
nothing, and a macro answer rejected part-way changed only what it reports); an answer whose ACTION segment is
not ASCII is a format error. All four counts must be 0.

Run: ``python benchmarks/fuzz_envs.py [--n 100000] [--seed 0] [--env sudoku|rushhour|webshop|all]``.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from milepost.envs.actions import action_segment
from milepost.envs.levels import get_level
from milepost.envs.rushhour import RushHourEnv
from milepost.envs.rushhour import make_task as rush_task
from milepost.envs.rushhour.generator import generate_puzzle
from milepost.envs.rushhour.moves import illegal as rush_illegal
from milepost.envs.rushhour.rules import RushHourRules, oracle_move, parse_move
from milepost.envs.sudoku import SudokuEnv
from milepost.envs.sudoku import make_task as sudoku_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.envs.sudoku.moves import illegal as sudoku_illegal
from milepost.envs.sudoku.rules import SudokuRules, oracle_fill, parse_fill
from milepost.envs.webshop import WebShopEnv
from milepost.envs.webshop import moves as shop_moves
from milepost.envs.webshop.render import elements as shop_elements
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.state import parse_action as parse_shop_action
from milepost.types import Task

# Characters that fold, normalise or classify as ASCII letters, digits or spaces.
ODD_LETTERS = "\u0130\u0131\u212a\u017f\u00df\u0391\u0392\u0421\u0415\u043e\u03bf\u0433\u0441\uff22\uff4d"
ODD_DIGITS = "\u0663\u0969\u09e9\u0e53\uff13\U0001d7d1\u00b3\u2083"
COMBINING = "\u0301\u0307\u0338\u20dd"
ODD_SPACES = "\u00a0\u2003\u3000\u200b\u200d\ufeff\x1c\x1f\x85"
UNICODE_RANGES = [(0x20, 0x7E), (0x00, 0x1F), (0x80, 0x24F), (0x370, 0x4FF), (0x600, 0x6FF), (0x900, 0x9FF),
                  (0x2000, 0x206F), (0x2100, 0x214F), (0x3000, 0x30FF), (0xD800, 0xDFFF), (0xFF00, 0xFFEF),
                  (0x1D400, 0x1D7FF), (0x1F600, 0x1F64F)]  # fmt: skip


def fullwidth(text: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if ch.isascii() and ch.isalnum() else ch for ch in text)


def random_unicode(rng: random.Random, size: int) -> str:
    out = []
    for _ in range(size):
        lo, hi = rng.choice(UNICODE_RANGES)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def confuse(text: str, rng: random.Random) -> str:
    """``text`` with one to three characters swapped for look-alikes, marked, or surrounded by odd spaces."""
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(chars))
        ch = chars[i]
        roll = rng.random()
        if ch.isdigit() and roll < 0.7:
            chars[i] = rng.choice(ODD_DIGITS)
        elif ch.isalpha() and roll < 0.4:
            chars[i] = rng.choice(ODD_LETTERS)
        elif ch.isalnum() and roll < 0.6:
            chars[i] = fullwidth(ch)
        elif roll < 0.8:
            chars[i] = ch + rng.choice(COMBINING)
        else:
            chars[i] = ch + rng.choice(ODD_SPACES)
    return "".join(chars)


def mutate(text: str, rng: random.Random) -> str:
    """One random edit of ``text``: insert, replace or delete a character (ASCII or not)."""
    i = rng.randrange(len(text) + 1)
    ch = rng.choice(string.printable) if rng.random() < 0.6 else random_unicode(rng, 1)
    op = rng.randrange(3)
    if op == 0:
        return text[:i] + ch + text[i:]
    if op == 1:
        return text[:i] + ch + text[i + 1 :]
    return text[:i] + text[i + 1 :]


def wrap(answer: str, rng: random.Random) -> str:
    """``answer`` alone, or after a think block and an ACTION tag in some casing (a few tags not ASCII)."""
    roll = rng.random()
    if roll < 0.4:
        return answer
    tag = rng.choice(["ACTION:", "Action:", "action:", "aCtIoN:", "ACT\u0130ON:", "\u00df\u00dfACTION:", "ＡCTION:"])
    think = rng.choice(["", "<think>ok</think> ", "<think>ça va, ünïcode</think> REASON: because. "])
    return f"{think}{tag} {answer}"


@dataclass
class Counts:
    inputs: int = 0
    crashes: int = 0
    outside_space: int = 0
    rejected_state_changes: int = 0
    non_ascii_accepted: int = 0
    applied_steps: int = 0
    rejected_steps: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def note(self, what: str, text: Any) -> None:
        if len(self.examples) < 10:
            self.examples.append(f"{what}: {text!r}"[:300])


@dataclass
class Target:
    """One environment setting of the pool: how to build it, how to snapshot and replay its state."""

    name: str
    make: Callable[[], Any]
    task: Task
    snapshot: Callable[[Any], Any]
    replay: Callable[[Any, list[str]], Any]  # snapshot + applied action texts -> expected snapshot
    answers: Callable[[Any, random.Random], str]  # well-formed answer: oracle or illegal


def _sudoku_replay(snap: tuple[list[int], int], actions: list[str]) -> tuple[list[int], int]:
    cells, n = list(snap[0]), snap[1]
    for text in actions:
        fill = parse_fill(text)
        assert fill is not None, text
        cells[fill.row * n + fill.col] = fill.digit
    return cells, n


def _sudoku_answer(env: SudokuEnv, rng: random.Random) -> str:
    rules = env.rules
    assert isinstance(rules, SudokuRules)
    fill = oracle_fill(env.state)
    cell_first = rng.random() < 0.3
    if fill is not None and rng.random() < 0.6:
        count = env.action_mode.max_actions or rng.randint(1, 3)
        texts = [fill.text(cell_first)]
        texts += [sudoku_illegal(rules, rng, cell_first) for _ in range(count - 1)]
        return "; ".join(texts)
    return sudoku_illegal(rules, rng, cell_first)


def sudoku_targets(rng: random.Random) -> list[Target]:
    targets = []
    settings: list[dict[str, Any]] = [
        {"size": 4, "render": "grid"},
        {"size": 4, "render": "cells", "action_mode": "flexible", "macro_k": 3, "wrong_fill": "continue"},
        {"size": 6, "render": "candidates", "action_mode": "fixed", "macro_n": 2},
        {"size": 6, "render": "hints", "wrong_fill": "continue", "allow_overwrite": True},
        {"size": 9, "render": "hints_tail", "action_mode": "flexible"},
        {"size": 9, "render": "grid", "subgoals": ["boxes", "rows", "cols"]},
    ]
    for k, kwargs in enumerate(settings):
        n = kwargs["size"]
        empties = {4: 8, 6: 16, 9: 40}[n]
        puzzle, solution = generate_easy(n, empties, 0, k)
        task = sudoku_task(puzzle, solution, level="", index=k)
        targets.append(
            Target(
                f"sudoku{n}-{kwargs.get('render')}-{kwargs.get('action_mode', 'atomic')}",
                lambda kwargs=kwargs: SudokuEnv(max_steps=60, **kwargs),
                task,
                lambda env: (list(env.state.cells), env.state.n),
                _sudoku_replay,
                _sudoku_answer,
            )
        )
    return targets


def _rush_replay(snap: Any, actions: list[str]) -> Any:
    state = snap.clone()
    for text in actions:
        move = parse_move(text)
        assert move is not None, text
        state.apply(move)
    return state


def _rush_answer(env: RushHourEnv, rng: random.Random) -> str:
    rules = env.rules
    assert isinstance(rules, RushHourRules)
    move = oracle_move(rules)
    if move is not None and rng.random() < 0.6:
        count = env.action_mode.max_actions or rng.randint(1, 3)
        return "; ".join([move.text()] + [rush_illegal(rules, rng) for _ in range(count - 1)])
    return rush_illegal(rules, rng)


def rush_targets(rng: random.Random) -> list[Target]:
    targets = []
    settings: list[tuple[str, int, dict[str, Any]]] = [
        ("4-6", 0, {}),
        ("7-9", 0, {"action_mode": "slide"}),
        ("10-12", 2, {"action_mode": "flexible", "macro_k": 3}),
        ("13-15", 0, {"action_mode": "fixed", "macro_n": 2}),
        ("16-18", 0, {"action_mode": "flexible"}),
    ]
    for k, (level, walls, kwargs) in enumerate(settings):
        made = generate_puzzle(0, k, get_level("rushhour", 6, level), max_walls=walls)
        task = rush_task(made.board, level=level, index=k)
        targets.append(
            Target(
                f"rushhour-{level}-{kwargs.get('action_mode', 'atomic')}",
                lambda kwargs=kwargs: RushHourEnv(**kwargs),
                task,
                lambda env: env.state.clone(),
                _rush_replay,
                _rush_answer,
            )
        )
    return targets


def _shop_replay(snap: Any, actions: list[str]) -> Any:
    state = snap.clone()
    for text in actions:  # the env reports numbered-element actions in their plain form
        action = parse_shop_action(text)
        assert action is not None and not action.ref, text
        state.apply(action)
    return state


def _shop_action(rules: WebShopRules, rng: random.Random) -> str:
    """One well-formed action: the oracle's, a detour, a random legal one, one the page refuses, a search for
    other words, or a numbered-element form (valid only in the accessibility tree, and only for some numbers)."""
    roll = rng.random()
    if roll < 0.3:
        found = shop_moves.oracle(rules)
        if found is not None:
            return found[0]
    if roll < 0.45:
        detour = shop_moves.wrong(rules, rng)
        if detour is not None:
            return detour
    if roll < 0.6:
        legal = shop_moves.random_legal(rules, rng)
        if legal is not None:
            return legal
    if roll < 0.75:
        return shop_moves.illegal(rules, rng)
    if roll < 0.8:
        words = rng.sample([*rules.order.items[0].query.split(), "cheap", "red", "xl", "[", "]"], 3)
        return f"search[{' '.join(words)}]"
    ref = rng.randint(0, len(shop_elements(rules.state)) + 3)
    if rng.random() < 0.5:
        return f"click [{ref}]"
    return f"type [{ref}] [{rules.order.items[rng.randrange(len(rules.order.items))].query}]"


def _shop_answer(env: WebShopEnv, rng: random.Random) -> str:
    rules = env.rules
    assert isinstance(rules, WebShopRules)
    count = env.action_mode.max_actions or rng.randint(1, 3)
    if env.action_mode.kind != "atomic" and rng.random() < 0.5:
        return "; ".join(text for text, _ in shop_moves.oracle_sequence(rules, count)) or _shop_action(rules, rng)
    return "; ".join(_shop_action(rules, rng) for _ in range(count))


def shop_targets(rng: random.Random) -> list[Target]:
    targets = []
    settings: list[dict[str, Any]] = [
        {"size": 1, "render": "text"},
        {"size": 1, "render": "text_rich", "action_mode": "flexible", "macro_k": 3},
        {"size": 1, "render": "accessibility", "action_mode": "flexible"},
        {"size": 2, "render": "accessibility"},
        {"size": 2, "render": "text", "action_mode": "fixed", "macro_n": 2},
        {"size": 2, "render": "text_rich", "action_mode": "fixed", "macro_n": 3},
    ]
    for k, kwargs in enumerate(settings):
        task = WebShopEnv(size=kwargs["size"], catalogue_size=300).sample_task(k)
        targets.append(
            Target(
                f"webshop{kwargs['size']}-{kwargs['render']}-{kwargs.get('action_mode', 'atomic')}",
                lambda kwargs=kwargs: WebShopEnv(catalogue_size=300, **kwargs),
                task,
                lambda env: env.rules.state.clone(),
                _shop_replay,
                _shop_answer,
            )
        )
    return targets


def draw_answer(env: Any, target: Target, rng: random.Random) -> tuple[str, Any]:
    """One fuzz input and its kind."""
    roll = rng.random()
    if roll < 0.25:
        return "well-formed", wrap(target.answers(env, rng), rng)
    if roll < 0.55:
        return "look-alike", wrap(confuse(target.answers(env, rng), rng), rng)
    if roll < 0.70:
        return "mutated", wrap(mutate(target.answers(env, rng), rng), rng)
    if roll < 0.85:
        return "unicode", random_unicode(rng, rng.randint(0, 120))
    if roll < 0.97:
        pieces = [target.answers(env, rng) for _ in range(rng.randint(1, 6))]
        pieces = [confuse(p, rng) if rng.random() < 0.3 else p for p in pieces]
        sep = rng.choice([";", "; ", "\n", " ;\u00a0", ";;", "\r\n"])
        return "multi", wrap(
            sep.join(pieces) + (random_unicode(rng, rng.randint(0, 3000)) if rng.random() < 0.1 else ""), rng
        )
    return "non-string", rng.choice([None, b"move(A, right)", 7, ["value(1, r1c1)"]])


def fuzz(targets: list[Target], n: int, rng: random.Random) -> Counts:
    counts = Counts()
    envs = [t.make() for t in targets]
    for env, target in zip(envs, targets):
        env.reset(seed=0, options={"task": target.task})
    for _ in range(n):
        k = rng.randrange(len(targets))
        env, target = envs[k], targets[k]
        kind, text = draw_answer(env, target, rng)
        counts.kinds[kind] = counts.kinds.get(kind, 0) + 1
        counts.inputs += 1
        before = target.snapshot(env)
        try:
            obs, _, terminated, truncated, info = env.step(text)
        except Exception as exc:  # the count this script exists for
            counts.crashes += 1
            counts.note(f"crash {type(exc).__name__}: {exc}", text)
            env.reset(options={"task": target.task})
            continue
        if not env.observation_space.contains(obs):
            counts.outside_space += 1
            counts.note("outside space", obs[-200:])
        expected = target.replay(before, info["actions"])
        if info["error"] is not None:
            counts.rejected_steps += 1
            if target.snapshot(env) != expected:
                counts.rejected_state_changes += 1
                counts.note("state change on rejected input", text)
        else:
            counts.applied_steps += 1
        segment = action_segment(text) if isinstance(text, str) else ""
        if not segment.isascii() and info["reward_terms"]["format"] != -1.0:
            counts.non_ascii_accepted += 1
            counts.note("non-ASCII accepted", text)
        if terminated or truncated or rng.random() < 0.02:
            env.reset(options={"task": target.task})
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="inputs per environment (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", choices=("sudoku", "rushhour", "webshop", "all"), default="all")
    args = parser.parse_args(argv)
    builders = {"sudoku": sudoku_targets, "rushhour": rush_targets, "webshop": shop_targets}
    failed = False
    header = f"{'env':<10} {'inputs':>8} {'crashes':>8} {'outside':>8} {'changed':>8} {'non-ASCII':>9} " + (
        f"{'applied':>8} {'rejected':>8} {'seconds':>8}"
    )
    print(header)
    for name, build in builders.items():
        if args.env not in ("all", name):
            continue
        rng = random.Random(f"fuzz:{name}:{args.seed}")
        start = time.perf_counter()
        counts = fuzz(build(rng), args.n, rng)
        seconds = time.perf_counter() - start
        print(
            f"{name:<10} {counts.inputs:>8} {counts.crashes:>8} {counts.outside_space:>8} "
            f"{counts.rejected_state_changes:>8} {counts.non_ascii_accepted:>9} {counts.applied_steps:>8} "
            f"{counts.rejected_steps:>8} {seconds:>8.1f}"
        )
        print(f"           kinds: {dict(sorted(counts.kinds.items()))}")
        for example in counts.examples:
            print(f"           {example}")
        failed |= bool(counts.crashes or counts.outside_space or counts.rejected_state_changes)
        failed |= bool(counts.non_ascii_accepted)
    print("columns: outside = observations outside the space; changed = state changes on rejected input;")
    print("non-ASCII = answers whose ACTION segment is not ASCII that were not format errors")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
