"""``milepost show EPISODES.jsonl``: replay an episode in the terminal, turn by turn."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="replay a recorded episode", description=__doc__)
    p.add_argument("episodes", help="an episodes.jsonl file")
    p.add_argument("--index", type=int, default=0, help="which episode (line) to show; negative counts back")
    p.add_argument("--task", default=None, help="show the first episode of this task id instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from milepost.errors import InputError
    from milepost.io import read_jsonl
    from milepost.types import Episode

    rows = list(read_jsonl(args.episodes))
    if not rows:
        raise InputError(f"{args.episodes}: no episodes")
    if args.task is not None:
        matches = [r for r in rows if r.get("task_id") == args.task]
        if not matches:
            raise InputError(f"{args.episodes}: no episode of task {args.task!r}")
        row = matches[0]
    else:
        if not -len(rows) <= args.index < len(rows):
            raise InputError(f"{args.episodes}: --index {args.index} out of range (0..{len(rows) - 1})")
        row = rows[args.index]
    ep = Episode.from_dict(row)
    print(
        f"task {ep.task_id} | level {ep.level} | goal distance {ep.goal_distance} | policy {ep.policy} | "
        f"sample {ep.sample} | seed {ep.seed}"
    )
    for turn in ep.turns:
        print(f"\n--- turn {turn.index + 1} ---")
        print(turn.observation)
        print(f">>> {turn.text.strip()}")
        terms = ", ".join(f"{k} {v:+g}" for k, v in turn.reward_terms.items() if v)
        applied = ", ".join(turn.actions) or "nothing"
        extra = f" | rejected: {turn.error}" if turn.error else ""
        remaining = "?" if turn.remaining_distance is None else turn.remaining_distance  # unknown distance
        print(
            f"applied: {applied} | reward {turn.reward:+.2f}{' (' + terms + ')' if terms else ''} | "
            f"remaining {remaining} | subgoals {len(turn.subgoals_completed)}{extra}"
        )
    outcome = "SOLVED" if ep.success else f"FAILED ({ep.termination.value})"
    print(f"\n{outcome} after {ep.steps} turns")
    if ep.meta.get("error"):
        print(f"backend error: {ep.meta['error']}")
    return 0
