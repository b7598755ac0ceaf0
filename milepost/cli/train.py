"""``milepost sft`` and ``milepost train``: supervised fine-tuning on solver demonstrations, and REINFORCE.

Both read a YAML config (``configs/``) with ``key=value`` overrides (dotted keys nest, e.g.
``rl.lr=1e-4 env.action_mode=flexible``), write checkpoints and ``metrics.jsonl`` into ``--out``, and
continue an interrupted run exactly with ``--resume``. A checkpoint without its ``manifest.json`` (milepost writes
one with each) is resumed only with ``--trust-checkpoint``. A checkpoint that cannot be written for want of space
ends the command with one line and exit status 1; the previous checkpoint is kept.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="YAML config file (configs/*.yaml)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value (repeatable), e.g. --set rl.iterations=50",
    )
    p.add_argument("--out", required=True, help="run folder (checkpoints, metrics.jsonl, final model)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="resume from a checkpoint that has no manifest.json (its values are still checked)",
    )
    p.add_argument("--no-progress", action="store_true")


def add_parser(sub: argparse._SubParsersAction) -> None:
    sft = sub.add_parser("sft", help="supervised fine-tuning on solver demonstrations", description=__doc__)
    _common(sft)
    sft.set_defaults(func=_guarded(run_sft))
    train = sub.add_parser("train", help="RL (REINFORCE, paper advantages and IS weights)", description=__doc__)
    _common(train)
    train.add_argument("--eval", action="store_true", help="evaluate the final policy on the test split")
    train.set_defaults(func=_guarded(run_train))


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` inside ``--trust-checkpoint``'s scope; a checkpoint that could not be written is one line, exit 1."""

    def guarded(args: argparse.Namespace) -> int:
        from milepost.training.checkpoint import CheckpointWriteError, trusted

        try:
            with trusted(args.trust_checkpoint):
                return run(args)
        except CheckpointWriteError as exc:  # not bad input (exit 2): the machine ran out of room
            print(f"milepost: error: {exc}", file=sys.stderr)
            return exc.exit_code

    return guarded


def _config(args: argparse.Namespace) -> object:
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    return load_config(TrainConfig, args.config, args.overrides)


def run_sft(args: argparse.Namespace) -> int:
    from milepost.training.sft import train_sft

    final = train_sft(_config(args), args.out, resume=args.resume, progress=not args.no_progress)  # type: ignore[arg-type]
    print(f"SFT model written to {final}")
    return 0


def run_train(args: argparse.Namespace) -> int:
    from milepost.training.config import TrainConfig
    from milepost.training.trainer import train_rl

    cfg = _config(args)
    assert isinstance(cfg, TrainConfig)
    final = train_rl(cfg, args.out, resume=args.resume, progress=not args.no_progress, final_eval=args.eval)
    import os

    if os.environ.get("RANK", "0") != "0":  # torchrun: rank 0 reports and evaluates
        return 0
    print(f"policy written to {final}")
    if args.eval:  # evaluated by train_rl before its trackers closed
        from pathlib import Path

        print((Path(args.out) / "eval" / "report.md").read_text(encoding="utf-8"))
    return 0
