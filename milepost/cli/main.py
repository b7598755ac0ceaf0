"""The ``milepost`` command: one module per subcommand, each exposing ``add_parser(subparsers)``.

Every ``MilepostError`` (bad input, impossible request) ends the command with a one-line message and exit
status 2; nothing else is caught, so real bugs keep their traceback.

``--log-level`` (or ``MILEPOST_LOG_LEVEL``; default ``warning``) sets what the package's loggers print on
stderr; it is accepted before or after the subcommand.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from milepost import __version__
from milepost.errors import InputError, MilepostError

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_ENV = "MILEPOST_LOG_LEVEL"
log = logging.getLogger("milepost.cli")


def _subcommands() -> list[ModuleType]:
    # Imported lazily so `milepost --help` stays fast and a subcommand's heavy imports load only when used.
    from milepost.cli import (
        compare,
        credit,
        data,
        demo,
        eval,
        export,
        horizon,
        openenv,
        plan,
        play,
        serve,
        shop,
        show,
        tiny,
        train,
    )
    from milepost.cli import memory as memory_cli
    from milepost.cli import models as models_cli

    cmds = [data, play, eval, show, compare, train, demo, tiny, serve, plan, shop, horizon, export, credit, memory_cli]
    return [*cmds, openenv, models_cli]


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose "invalid choice" error names the nearest choice (``milepost evl`` -> eval).

    Python 3.14's ``suggest_on_error`` does this in the same method; subparsers inherit the class.
    """

    def _check_value(self, action: argparse.Action, value: object) -> None:
        choices = action.choices
        if choices is not None and value not in choices and isinstance(value, str):
            names = [str(c) for c in choices]
            near = difflib.get_close_matches(value, names, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} ({hint}choose from {', '.join(names)})")
        super()._check_value(action, value)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="milepost",
        description="Build, train and evaluate LLM agents on long-horizon tasks.",
    )
    parser.add_argument("--version", action="version", version=f"milepost {__version__}")
    log_help = f"what to log on stderr: {' | '.join(LOG_LEVELS)} (default: ${LOG_ENV}, else warning)"
    parser.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default=None, help=log_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _subcommands():
        module.add_parser(sub)
    for command in sub.choices.values():  # also after the subcommand; SUPPRESS keeps a value given before it
        command.add_argument(
            "--log-level", type=str.lower, choices=LOG_LEVELS, default=argparse.SUPPRESS, help=log_help
        )
    return parser


class _CLIHandler(logging.StreamHandler):
    """The handler ``configure_logging`` installs (told apart so a second call replaces it)."""


def configure_logging(level: str | None = None) -> None:
    """Send the ``milepost`` loggers to stderr at ``level`` (else ``$MILEPOST_LOG_LEVEL``, else warning).

    Only the package's loggers are configured, not the root logger, so libraries keep their own defaults.

    Raises:
        InputError: when ``MILEPOST_LOG_LEVEL`` names no level.
    """
    name = (level or os.environ.get(LOG_ENV) or "warning").strip().lower()
    if name not in LOG_LEVELS:
        raise InputError(f"{LOG_ENV}={name!r} is not one of {', '.join(LOG_LEVELS)}")
    logger = logging.getLogger("milepost")
    for old in [h for h in logger.handlers if isinstance(h, _CLIHandler)]:
        logger.removeHandler(old)
    handler = _CLIHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("milepost %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(name.upper())


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
    if args.command in {"eval", "sft", "train", "demo", "serve", "tiny", "horizon", "credit"}:
        _quiet_libraries()
    try:
        configure_logging(args.log_level)
        log.debug("milepost %s: %s", __version__, " ".join(sys.argv[1:] if argv is None else argv))
        result = args.func(args)
    except MilepostError as exc:
        print(f"milepost: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("milepost: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `milepost ... | head`: the reader left. Point stdout at devnull so the interpreter's final flush does not
        # raise again (the recipe in Python's signal docs), and end quietly like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
