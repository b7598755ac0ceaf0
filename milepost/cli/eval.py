"""``milepost eval``: play a dataset split with a policy and report success by goal distance."""

from __future__ import annotations

import argparse
from typing import Any

from milepost.errors import InputError


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a policy on a dataset by goal distance", description=__doc__)
    p.add_argument("--env", required=True, help="environment: sudoku | rushhour")
    p.add_argument("--data", required=True, help="dataset folder (from `milepost data`) or a .jsonl file")
    p.add_argument("--split", default="test")
    p.add_argument(
        "--policy", required=True, help="hf:PATH | openai:MODEL@BASE_URL | oracle | noisy-oracle:P[:MODE] | random"
    )
    p.add_argument(
        "--agent",
        default="plain",
        choices=("plain", "sgo"),
        help="agent kind: plain, or sgo (subgoal planning, reflection, validation, replan / skip)",
    )
    p.add_argument(
        "--planner",
        default="programmatic",
        help="sgo: programmatic | llm:SPEC (SPEC = hf:PATH | openai:MODEL@BASE_URL)",
    )
    p.add_argument("--judge", default=None, help="sgo: LLM judge backend (hf:PATH | openai:MODEL@BASE_URL)")
    p.add_argument("--max-replans", type=int, default=2, help="sgo: replans per episode at most")
    p.add_argument("--n", type=int, default=4, help="samples per task (n >= every k)")
    p.add_argument("--k", type=_int_list, default=[1, 4], help="pass@k values, e.g. 1,4")
    p.add_argument("--levels", default=None, help="only these levels (e.g. L1-L3 or 4-6,7-9)")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks per level")
    p.add_argument("--out", required=True, help="run folder (episodes.jsonl, metrics.json, report.md, PNG)")
    p.add_argument("--max-steps", type=int, default=None, help="turn budget H_max (env default if omitted)")
    p.add_argument("--action-mode", default=None, help="atomic | flexible | fixed | slide")
    p.add_argument("--macro-k", type=int, default=None)
    p.add_argument("--macro-n", type=int, default=None)
    p.add_argument("--render", default=None, help="Sudoku renderer: grid | cells | candidates | hints | hints_tail")
    p.add_argument("--memory-k", type=int, default=2, help="K: turns kept in memory")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64, help="episodes advanced together")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from milepost.agent.loop import AgentSettings
    from milepost.evaluation.runner import EvalSpec, evaluate

    env_kwargs: dict[str, Any] = {}
    for key in ("max_steps", "action_mode", "macro_k", "macro_n", "render"):
        if getattr(args, key) is not None:
            env_kwargs[key] = getattr(args, key)
    try:
        settings = AgentSettings(
            memory_k=args.memory_k,
            temperature=args.temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    spec = EvalSpec(
        env=args.env,
        data=args.data,
        policy=args.policy,
        split=args.split,
        agent=args.agent,
        n=args.n,
        ks=args.k,
        levels=args.levels,
        limit=args.limit,
        env_kwargs=env_kwargs,
        settings=settings,
        seed=args.seed,
        planner=args.planner,
        judge=args.judge,
        max_replans=args.max_replans,
    )
    evaluate(spec, args.out, progress=not args.no_progress)
    from pathlib import Path

    report = (Path(args.out) / "report.md").read_text(encoding="utf-8")
    print(report)
    print(f"written: {args.out}/metrics.json, report.md, success.png, episodes.jsonl")
    return 0
