"""``milepost data ENV ...``: generate a level dataset folder (train, test and manifest.json).

``--format jsonl`` (the default) writes ``train.jsonl`` / ``test.jsonl``; ``--format parquet`` writes
``train.parquet`` / ``test.parquet`` (needs the ``hf`` extra). Every command that reads a dataset reads both.
"""

from __future__ import annotations

import argparse

from milepost.cli import data_rushhour, data_sudoku, data_webshop

SUBCOMMANDS = (data_sudoku, data_rushhour, data_webshop)
"""One module per environment, each with ``add_parser(envs)`` and ``run(args)``; they import only what is
below this module (``cli/data_format.py``), so imports run one way. A test checks that every registered
environment has one."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="generate a level dataset", description=__doc__)
    envs = p.add_subparsers(dest="env", metavar="ENV", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(envs)
