"""The ``milepost`` command: one module per subcommand, each exposing ``add_parser(subparsers)``.

Every ``MilepostError`` (bad input, impossible request) ends the command with a one-line message and exit
status 2; nothing else is caught, so real bugs keep their traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from milepost import __version__
from milepost.errors import MilepostError


def _subcommands() -> list[ModuleType]:
    # Imported lazily so `milepost --help` stays fast and a subcommand's heavy imports load only when used.
    from milepost.cli import compare, data, demo, eval, plan, play, serve, show, tiny, train

    return [data, play, eval, show, compare, train, demo, tiny, serve, plan]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="milepost",
        description="Build, train and evaluate LLM agents on long-horizon tasks.",
    )
    parser.add_argument("--version", action="version", version=f"milepost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _subcommands():
        module.add_parser(sub)
    return parser


def _quiet_libraries() -> None:
    """transformers 5 draws progress bars on every model load and save; milepost shows its own progress."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # the package works without the ML extra for data and env commands
        return
    hf_logging.disable_progress_bar()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in {"eval", "sft", "train", "demo", "serve", "tiny"}:
        _quiet_libraries()
    try:
        result = args.func(args)
    except MilepostError as exc:
        print(f"milepost: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("milepost: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
