"""``--format jsonl|parquet``: the split-file format every ``milepost data ENV`` subcommand offers.

Its own module so that the subcommands (``cli/data_*.py``) and the ``milepost data`` parser that lists them
(``cli/data.py``) both import it and neither imports the other's importer: data -> data_ENV -> data_format.
"""

from __future__ import annotations

import argparse


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
