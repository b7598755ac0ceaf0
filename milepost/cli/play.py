"""``milepost play ENV``: a person plays a puzzle in the terminal through the same environment agents use."""

from __future__ import annotations

import argparse
import io
import sys

from milepost.cli.registry_help import env_names, size_help
from milepost.envs import ENVS, make_env
from milepost.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "play",
        help="play a puzzle in the terminal",
        description="Play a puzzle through the environment: type actions (e.g. value(5, r3c7) or "
        "move(B, up)); 'quit' ends the game. Reads standard input, so it can be scripted.",
    )
    p.add_argument("env", help=f"environment: {env_names()}")
    p.add_argument("--size", type=int, default=None, help=f"size, per environment: {size_help()}")
    p.add_argument("--level", default=None, help="level name, e.g. L3 (Sudoku 9x9), S2 (small boards), 10-12")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated puzzle")
    p.add_argument("--max-steps", type=int, default=None, help="turn budget H_max (env default if omitted)")
    p.add_argument("--action-mode", default="atomic", help="atomic | flexible | fixed | slide")
    p.add_argument("--macro-k", type=int, default=None, help="flexible mode: actions per turn at most")
    p.add_argument("--render", default=None, help="Sudoku renderer: grid | cells | candidates | hints | hints_tail")
    p.add_argument(
        "--profile",
        choices=("milepost", "webshop"),
        default=None,
        help="web shop: milepost (default) | webshop (princeton-nlp/WebShop's reward, rules and text)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.env not in ENVS:
        raise InputError(f"unknown environment {args.env!r} (known: {', '.join(ENVS.names())})")
    kwargs: dict[str, object] = {"level": args.level, "action_mode": args.action_mode}
    for key in ("size", "max_steps", "macro_k", "render", "profile"):
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    if args.profile is not None and args.env != "webshop":
        raise InputError(f"--profile is a web-shop option; {args.env} has one set of rules")
    env = make_env(args.env, **kwargs)
    if isinstance(sys.stdin, io.TextIOWrapper):
        # Bytes that are not UTF-8 (a binary file piped in) become a format error, not a UnicodeDecodeError.
        sys.stdin.reconfigure(errors="replace")
    obs, info = env.reset(seed=args.seed)
    print(env.goal_text())
    print(f"Goal distance: {info['goal_distance']} | budget: {env.max_steps} turns | 'quit' to stop\n")
    print(obs)
    total = 0.0
    while True:
        try:
            line = input(f"\nturn {info['steps'] + 1}> ")
        except EOFError:
            print("\n(end of input)")
            return 0
        if line.strip().lower() in ("quit", "exit", "q"):
            return 0
        obs, reward, terminated, truncated, info = env.step(line)
        total += reward
        print(obs)
        applied = ", ".join(info["actions"]) or "nothing"
        done = f"{len(info['subgoals_completed'])}/{info['num_subgoals']}"
        print(f"applied: {applied} | reward {reward:+.2f} | subgoals {done} | remaining {info['remaining_distance']}")
        if terminated or truncated:
            print(f"\nEpisode over: {info['termination_reason']} after {info['steps']} turns, return {total:+.2f}")
            sys.stdout.flush()
            return 0
