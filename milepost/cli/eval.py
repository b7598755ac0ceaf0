"""``milepost eval``: play a dataset split with a policy and report success by goal distance.

Exit status 0 when every episode was played; 3 when some ended because the backend gave up (infrastructure
failures: left out of the metrics and counted in the report); rerun the same command with ``--retry-failed``
to play exactly those again.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from milepost.backends.base import HTTPOptions
from milepost.cli.registry_help import backend_help, env_names, policy_help
from milepost.errors import InputError
from milepost.planning.planner import LLM_BACKENDS, PLANNER_FORMS

INFRA_EXIT = 3


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a policy on a dataset by goal distance", description=__doc__)
    p.add_argument("--env", required=True, help=f"environment: {env_names()}")
    p.add_argument(
        "--data",
        required=True,
        help="dataset folder (from `milepost data`, JSONL or parquet) or one split file (.jsonl / .parquet)",
    )
    p.add_argument("--split", default="test")
    p.add_argument("--policy", required=True, help=policy_help())
    p.add_argument(
        "--agent",
        default=None,
        choices=("plain", "sgo", "subgoal"),
        help="agent kind: plain, sgo (subgoal planning, reflection, validation, replan / skip), or subgoal (the "
        "milestone-conditioned prompt: one target subgoal); default: the checkpoint's prompt card, else plain",
    )
    p.add_argument(
        "--planner",
        default="programmatic",
        help=f"sgo: {PLANNER_FORMS}",
    )
    p.add_argument("--judge", default=None, help=f"sgo: LLM judge backend ({backend_help(LLM_BACKENDS)})")
    p.add_argument("--max-replans", type=int, default=2, help="sgo: replans per episode at most")
    p.add_argument(
        "--judge-every",
        type=int,
        default=0,
        metavar="N",
        help="sgo: every N turns the --judge backend says on-track / off-track; off-track replans (default 0: never)",
    )
    p.add_argument(
        "--single-turn",
        action="store_true",
        help="the short-horizon proxy: Sudoku solved in one answer (the whole board, checked cell by cell), "
        "Rush Hour with slide moves (compressed horizon)",
    )
    p.add_argument(
        "--best-of",
        type=int,
        default=1,
        metavar="K",
        help="sample K answers per turn and play the first the environment would accept (format, action count, "
        "legality): inference with the game's rules in the loop, reported as such; K generations per turn "
        "(default 1: the plain policy)",
    )
    p.add_argument(
        "--avoid-revisits",
        action="store_true",
        help="with --best-of K: of the accepted answers play the first that leads to a state the episode has not "
        "been in (a loop check; games with state keys: Rush Hour)",
    )
    p.add_argument(
        "--probe",
        choices=("knowledge",),
        default=None,
        help="instead of playing: the knowledge probe, generated multiple-choice sets (rules, technique "
        "definitions, technique identification) from the data's puzzles, accuracy per set (Sudoku)",
    )
    p.add_argument("--probe-items", type=int, default=50, help="--probe: items per set at most (default 50)")
    p.add_argument("--n", type=int, default=4, help="samples per task (n >= every k)")
    p.add_argument("--k", type=_int_list, default=[1, 4], help="pass@k values, e.g. 1,4")
    p.add_argument("--levels", default=None, help="only these levels (e.g. L1-L3 or 4-6,7-9)")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks per level")
    p.add_argument("--out", required=True, help="run folder (episodes.jsonl, metrics.json, report.md, PNG)")
    p.add_argument("--max-steps", type=int, default=None, help="turn budget H_max (env default if omitted)")
    p.add_argument(
        "--action-mode", default=None, help="atomic | flexible | fixed | slide (default: the prompt card's, else env's)"
    )
    p.add_argument("--macro-k", type=int, default=None)
    p.add_argument("--macro-n", type=int, default=None)
    p.add_argument(
        "--render",
        default=None,
        help="observation renderer (Sudoku: grid | cells | candidates | hints | hints_tail; Rush Hour: grid | legal; "
        "web shop: text | text_rich | accessibility); default: the prompt card's, else the env's",
    )
    p.add_argument(
        "--profile",
        choices=("milepost", "webshop"),
        default=None,
        help="web shop: milepost (default) | webshop (princeton-nlp/WebShop's reward, rules and text)",
    )
    p.add_argument(
        "--memory-k", type=int, default=None, help="K: turns kept in memory (default: the prompt card's, else 2)"
    )
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument(
        "--max-new-tokens", type=int, default=None, help="answer tokens per turn (default: the prompt card's, else 256)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="episodes advanced together")
    p.add_argument("--seed", type=int, default=0)
    http = HTTPOptions()
    p.add_argument("--timeout", type=float, default=http.timeout, help="openai: seconds per HTTP request")
    p.add_argument("--max-retries", type=int, default=http.max_retries, help="openai: retries after the first attempt")
    p.add_argument(
        "--backoff-base", type=float, default=http.backoff_base, help="openai: first retry delay (s), doubling"
    )
    p.add_argument("--backoff-max", type=float, default=http.backoff_max, help="openai: cap on one retry delay (s)")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="play again the episodes of --out that the backend failed (same seeds), replacing their records",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="Ray actors playing the episodes (0: in this process); RAY_ADDRESS joins a running cluster",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from milepost.agent.loop import AgentSettings
    from milepost.evaluation.runner import EvalSpec, evaluate
    from milepost.prompt_card import apply_card, policy_card

    # --single-turn sets its own action mode (the proxy's), so the card does not supply one.
    keys = ("render", "memory_k", "agent", "max_new_tokens") + (() if args.single_turn else ("action_mode",))
    defaults = {"agent": "plain", "memory_k": 2, "max_new_tokens": 256}
    apply_card(args, policy_card(args.policy), defaults, args.env, keys)
    env_kwargs: dict[str, Any] = {}
    for key in ("max_steps", "action_mode", "macro_k", "macro_n", "render", "profile"):
        if getattr(args, key) is not None:
            env_kwargs[key] = getattr(args, key)
    if args.profile is not None and args.env != "webshop":
        raise InputError(f"--profile is a web-shop option; {args.env} has one set of rules")
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
        judge_every=args.judge_every,
        http=HTTPOptions(args.timeout, args.max_retries, args.backoff_base, args.backoff_max),
        single_turn=args.single_turn,
        best_of=args.best_of,
        avoid_revisits=args.avoid_revisits,
    )
    if args.probe is not None:
        return _probe(spec, args)
    from milepost.distributed.eval_pool import eval_pool

    pool = eval_pool(args.workers)
    result = evaluate(spec, args.out, progress=not args.no_progress, retry_failed=args.retry_failed, pool=pool)
    from pathlib import Path

    report = (Path(args.out) / "report.md").read_text(encoding="utf-8")
    print(report)
    print(f"written: {args.out}/" + ", ".join(["metrics.json", "report.md", *result["plots"], "episodes.jsonl"]))
    infra = result["meta"]["infra_failures"]
    if infra["episodes"]:
        first = f" (first: {infra['errors'][0]})" if infra["errors"] else ""
        print(
            f"milepost: {infra['episodes']} episode(s) failed for infrastructure reasons{first}; "
            "rerun the same command with --retry-failed to play them again",
            file=sys.stderr,
        )
        return INFRA_EXIT
    return 0


def _probe(spec: Any, args: argparse.Namespace) -> int:
    """``--probe knowledge``: generate the items from the selected tasks, answer them, report accuracy per set."""
    from pathlib import Path

    from milepost.evaluation.probe import run_probe
    from milepost.evaluation.runner import build_policy, select_tasks

    if spec.env != "sudoku":
        raise InputError(f"--probe knowledge: the probe's sets are about Sudoku, not {spec.env}")
    if spec.agent != "plain" or spec.single_turn:
        raise InputError("--probe: not with --agent sgo or --single-turn (the probe asks questions, it does not play)")
    if args.probe_items < 1:
        raise InputError(f"--probe-items must be >= 1, got {args.probe_items}")
    tasks = select_tasks(spec)
    policy = build_policy(spec)
    result = run_probe(
        tasks, policy, spec.settings, args.out, per_set=args.probe_items, seed=spec.seed, label=spec.policy
    )
    print((Path(args.out) / "report.md").read_text(encoding="utf-8"))
    print(f"written: {args.out}/probe.jsonl, metrics.json, report.md ({len(result['sets'])} sets)")
    return 0
