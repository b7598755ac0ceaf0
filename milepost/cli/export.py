"""``milepost export episodes RUN_DIR --format chat|parquet``: a run's episodes for other tools.

``chat``: one conversation per turn (JSONL; ``messages`` as the model saw them plus its answer, the conversational
format of TRL's SFTTrainer), with the recorded token ids and log-probs alongside. ``parquet``: one row per turn,
for analysis (pandas, DuckDB, ``datasets``). RUN_DIR is an evaluation run folder or a training run with
``eval-NNNNNN`` folders. The file goes beside the episodes unless ``--out`` says where; an existing file is replaced
only with ``--overwrite``, and never one of the run's own files.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export episodes for other tools", description=__doc__)
    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    e = what.add_parser(
        "episodes",
        help="episodes as chat conversations or a parquet table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("run_dir", metavar="RUN_DIR", help="evaluation run folder (or training run folder)")
    e.add_argument("--format", choices=("chat", "parquet"), required=True, help="chat (JSONL) or parquet")
    e.add_argument(
        "--out",
        default=None,
        help="file to write (default: RUN_DIR/episodes.chat.jsonl or RUN_DIR/episodes.parquet)",
    )
    e.add_argument(
        "--overwrite", action="store_true", help="replace the file --out names if it exists (never the run's own)"
    )
    e.add_argument("--data", default=None, help="chat: the run's dataset, when it moved since the run")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from milepost.export import export_episodes

    target, rows = export_episodes(
        args.run_dir, args.format, args.out, data=args.data, progress=not args.no_progress, overwrite=args.overwrite
    )
    print(f"wrote {rows} turns to {target}")
    return 0
