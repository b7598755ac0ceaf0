"""``milepost compare RUN_DIR...``: put runs side by side (table + plots) from their saved metrics.

Evaluation folders, and training runs with or without an evaluation (``eval/``): a run without one is
compared by its training curves, with the command that evaluates it. Runs of different environments, board
sizes or level sets are compared with a one-line warning on stderr (and in the report).
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare runs side by side", description=__doc__)
    p.add_argument("runs", nargs="+", help="evaluation folders or training runs (with or without eval/)")
    p.add_argument("--labels", default=None, help="comma list of labels, one per run")
    p.add_argument("--k", default=None, help="pass@k rows to show (default: every k some run reports)")
    p.add_argument("--out", default="runs/compare", help="folder for comparison.md and the PNG plots")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from milepost.errors import InputError
    from milepost.evaluation.compare import compare

    labels = args.labels.split(",") if args.labels else None
    try:
        ks = [int(k) for k in args.k.split(",") if k.strip()] if args.k else None
    except ValueError:
        raise InputError(f"--k: expected a comma list of integers, got {args.k!r}") from None
    result = compare(args.runs, args.out, labels, ks)
    print(result.text)
    for warning in result.warnings:
        print(f"milepost: warning: {warning}", file=sys.stderr)
    return 0
