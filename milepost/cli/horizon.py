"""``milepost horizon``: how long a task a policy finishes, as a goal distance with an interval.

``milepost horizon --policy SPEC [--suite tiny|standard] [--agent plain|sgo] [--workers N] --out DIR`` plays a
fixed, versioned suite (``horizon.suites``) through the evaluation runner and writes ``horizon.md``,
``horizon.png`` and ``horizon.json``: success against goal distance per environment, the logistic fit in log
distance (METR's form) with its bootstrap band, the per-step reliability fit q^d beside it with a likelihood
comparison, the 50% and 80% horizons with intervals, and the failure taxonomy per distance band.

Horizons are per environment (each has its own step budget); the one number across environments is the
geometric mean of theirs, labelled so. A curve that gives no horizon (no failures, no successes, one distance,
success that does not fall) is said in words, with an exact one-sided bound where one exists.

``milepost horizon compare A B ... --out DIR`` draws several reports' curves, one panel per environment, and says
per environment whether their horizons differ ("yes", "no" or "cannot tell"); ``--intersect`` compares runs
whose task sets differ on the tasks they share. Exit status 3 when some episodes failed for infrastructure reasons
(left out of the fit, counted in the report); ``--retry-failed`` plays exactly those again. A rerun into the same
``--out`` resumes: finished episodes are not played again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from milepost.backends.base import HTTPOptions
from milepost.cli.registry_help import policy_help
from milepost.errors import InputError
from milepost.horizon.estimator import RESAMPLING

INFRA_EXIT = 3


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "horizon",
        help="the horizon score: success against goal distance, 50%%/80%% horizons with intervals",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--policy", default=None, help=policy_help())
    p.add_argument("--suite", default="tiny", help="tiny (default) | standard")
    p.add_argument("--agent", default="plain", choices=("plain", "sgo"), help="agent kind (default plain)")
    p.add_argument("--workers", type=int, default=0, help="Ray actors playing the episodes (0: in this process)")
    p.add_argument("--out", default=None, help="output folder (suite/, runs/PART/, horizon.md, .png, .json)")
    p.add_argument("--boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument(
        "--resampling",
        default="two-level",
        choices=RESAMPLING,
        help="bootstrap: two-level (default; tasks, then each task's samples: METR's scheme, conservative, 95%% "
        "intervals covered 98-99%% in simulation) or tasks (each drawn task keeps its counts: narrower, covered "
        "86.5-91%%)",
    )
    p.add_argument(
        "--render",
        default=None,
        help="Sudoku parts: grid | cells | candidates | hints | hints_tail (default: a Sudoku checkpoint's prompt "
        "card, else the env's)",
    )
    p.add_argument(
        "--memory-k", type=int, default=None, help="K: turns kept in memory (default: the prompt card's, else 2)"
    )
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument(
        "--max-new-tokens", type=int, default=None, help="answer tokens per turn (default: the prompt card's, else 256)"
    )
    p.add_argument("--batch-size", type=int, default=64, help="episodes advanced together")
    p.add_argument("--seed", type=int, default=0)
    http = HTTPOptions()
    p.add_argument("--timeout", type=float, default=http.timeout, help="openai: seconds per HTTP request")
    p.add_argument("--max-retries", type=int, default=http.max_retries, help="openai: retries after the first attempt")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="play again the episodes of --out that the backend failed (same seeds), replacing their records",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run, horizon_command=None)
    sub2 = p.add_subparsers(dest="horizon_command", metavar="compare")
    c = sub2.add_parser("compare", help="several horizon reports on one plot, with whether they differ")
    c.add_argument("runs", nargs="+", help="`milepost horizon` output folders (same suite)")
    c.add_argument("--labels", default=None, help="comma list of labels, one per run")
    c.add_argument("--out", dest="compare_out", required=True, help="folder for horizon_compare.md / .png / .json")
    c.add_argument("--boot", dest="compare_boot", type=int, default=1000, help="paired bootstrap resamples")
    c.add_argument(
        "--intersect",
        action="store_true",
        help="compare on the tasks every run holds (default: refuse runs whose task sets differ)",
    )
    c.set_defaults(func=run_compare)


def _apply_card(args: argparse.Namespace) -> None:
    """The checkpoint's prompt card for K and the answer cap (every part of the suite), and for the renderer when
    it was trained on Sudoku (``--render`` sets the Sudoku parts only)."""
    from milepost.prompt_card import apply_card, policy_card

    card = policy_card(args.policy)
    keys = ("memory_k", "max_new_tokens") + (("render",) if card and card.get("env") == "sudoku" else ())
    apply_card(args, card, {"memory_k": 2, "max_new_tokens": 256}, None, keys)


def run(args: argparse.Namespace) -> int:
    from milepost.agent.loop import AgentSettings
    from milepost.distributed.eval_pool import eval_pool
    from milepost.horizon.report import REPORT, play_suite, summarise_horizon
    from milepost.horizon.suites import get_suite

    if args.policy is None or args.out is None:
        raise InputError("horizon: --policy and --out are required (or: milepost horizon compare A B ... --out DIR)")
    if args.boot < 1:
        raise InputError(f"--boot must be >= 1, got {args.boot}")
    if not 0.0 < args.confidence < 1.0:
        raise InputError(f"--confidence must be in (0, 1), got {args.confidence}")
    suite = get_suite(args.suite)
    _apply_card(args)
    try:
        settings = AgentSettings(
            memory_k=args.memory_k,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    manifest, episodes = play_suite(
        suite,
        args.out,
        policy=args.policy,
        agent=args.agent,
        settings=settings,
        sudoku_render=args.render,
        seed=args.seed,
        pool=eval_pool(args.workers),
        http=HTTPOptions(timeout=args.timeout, max_retries=args.max_retries),
        progress=not args.no_progress,
        retry_failed=args.retry_failed,
    )
    meta = {
        "policy": args.policy,
        "agent": args.agent,
        "settings": {
            "memory_k": args.memory_k,
            "temperature": args.temperature,
            "max_new_tokens": args.max_new_tokens,
            "sudoku render": args.render or "env default",
        },
    }
    result = summarise_horizon(
        manifest,
        episodes,
        args.out,
        meta=meta,
        boot=args.boot,
        confidence=args.confidence,
        seed=args.seed,
        resampling=args.resampling,
    )
    print((Path(args.out) / REPORT).read_text(encoding="utf-8"))
    print(f"written: {args.out}/horizon.md, horizon.png, horizon.json, runs/, suite/")
    infra = result["meta"]["infra_failures"]
    if infra:
        print(
            f"milepost: {infra} episode(s) failed for infrastructure reasons and are left out; "
            "rerun the same command with --retry-failed to play them again",
            file=sys.stderr,
        )
        return INFRA_EXIT
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from milepost.horizon.compare import compare_horizons

    if args.compare_boot < 1:
        raise InputError(f"--boot must be >= 1, got {args.compare_boot}")
    labels = args.labels.split(",") if args.labels else None
    print(compare_horizons(args.runs, args.compare_out, labels, boot=args.compare_boot, intersect=args.intersect))
    return 0
