"""``milepost data ENV ...``: generate a level dataset folder (train.jsonl, test.jsonl, manifest.json)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from milepost.cli import data_rushhour, data_sudoku, data_webshop

    p = sub.add_parser("data", help="generate a level dataset", description=__doc__)
    envs = p.add_subparsers(dest="env", metavar="ENV", required=True)
    for module in (data_sudoku, data_rushhour, data_webshop):
        module.add_parser(envs)
