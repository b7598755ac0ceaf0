"""``milepost compare RUN_DIR...``: put runs side by side (table + plots) from their saved metrics."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare runs side by side", description=__doc__)
    p.add_argument("runs", nargs="+", help="evaluation folders or training runs (with eval/metrics.json)")
    p.add_argument("--labels", default=None, help="comma list of labels, one per run")
    p.add_argument("--k", default="1,4", help="pass@k rows to show")
    p.add_argument("--out", default="runs/compare", help="folder for comparison.md and the PNG plots")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from milepost.evaluation.compare import compare_runs

    labels = args.labels.split(",") if args.labels else None
    ks = [int(k) for k in args.k.split(",") if k.strip()]
    print(compare_runs(args.runs, args.out, labels, ks))
    return 0
