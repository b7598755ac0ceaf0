"""``milepost data ENV ...``: generate a level dataset folder (train, test and manifest.json).

``--format jsonl`` (the default) writes ``train.jsonl`` / ``test.jsonl``; ``--format parquet`` writes
``train.parquet`` / ``test.parquet`` (needs the ``hf`` extra). Every command that reads a dataset reads both.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from milepost.cli import data_rushhour, data_sudoku, data_webshop

    p = sub.add_parser("data", help="generate a level dataset", description=__doc__)
    envs = p.add_subparsers(dest="env", metavar="ENV", required=True)
    for module in (data_sudoku, data_rushhour, data_webshop):
        module.add_parser(envs)


def add_format_argument(p: argparse.ArgumentParser) -> None:
    """``--format jsonl|parquet``, shared by every ``milepost data`` subcommand."""
    p.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="split files: jsonl (default) or parquet (needs pyarrow: pip install 'milepost[hf]')",
    )


def format_flags(args: argparse.Namespace) -> list[str]:
    """The ``--format`` words of the recorded command line (none for the default), after checking that the
    format can be written, so that a missing pyarrow fails before minutes of generation."""
    if args.format == "jsonl":
        return []
    from milepost.tables import pyarrow

    pyarrow()
    return ["--format", args.format]
