"""A milepost dataset as verl's parquet files: ``python -m milepost.integrations.verl.data DATA OUT``.

verl's ``RLHFDataset`` reads one row per prompt: ``prompt`` (chat messages), ``data_source``, ``agent_name``
(which agent loop plays the row) and ``extra_info`` (passed to the agent loop). Each row here holds the task's
first prompt (milepost's own ``build_messages``; what the agent loop renders again after ``reset``) and the task
record as JSON in ``extra_info.task``. Writes ``OUT/train.parquet`` and ``OUT/test.parquet``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from milepost.agent.prompts import ANSWER_FORMAT, build_messages
from milepost.datasets import load_tasks
from milepost.envs import make_env
from milepost.envs.levels import parse_levels
from milepost.errors import InputError
from milepost.types import Task

AGENT_NAME = "milepost_agent"  # agent_loop.AGENT_NAME, kept here so this module imports without verl


def rows(tasks: list[Task]) -> list[dict[str, Any]]:
    """One verl dataset row per task."""
    out = []
    envs: dict[tuple[str, int], Any] = {}
    for i, task in enumerate(tasks):
        env = envs.setdefault((task.env, task.size), make_env(task.env, size=task.size))
        obs, _ = env.reset(seed=task.seed, options={"task": task})
        out.append(
            {
                "data_source": f"milepost/{task.env}",
                "prompt": build_messages(env.goal_text(), obs, (), None, ANSWER_FORMAT),
                "agent_name": AGENT_NAME,
                "extra_info": {"index": i, "task_id": task.task_id, "task": json.dumps(task.to_dict())},
            }
        )
    return out


def write_parquet(data: str | Path, out: str | Path, levels: str | None = None) -> dict[str, int]:
    """``OUT/{train,test}.parquet`` from the milepost dataset folder ``data``; returns the row counts.

    ``levels`` (e.g. ``L3-L4``) keeps the training tasks of those levels only; the test split stays whole.
    """
    import pandas as pd  # verl depends on pandas and pyarrow; milepost itself does not

    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split in ("train", "test"):
        tasks = load_tasks(data, split)
        if split == "train" and levels and tasks:
            wanted = {lv.name for lv in parse_levels(levels, tasks[0].env, tasks[0].size)}
            tasks = [t for t in tasks if t.level in wanted]
            if not tasks:
                raise InputError(f"{data}: no train tasks at levels {levels}")
        table = pd.DataFrame(rows(tasks))
        tmp = target / f".{split}.parquet.tmp"
        table.to_parquet(tmp, index=False)
        tmp.replace(target / f"{split}.parquet")  # atomic: a reader never sees half a file
        counts[split] = len(table)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m milepost.integrations.verl.data", description=__doc__)
    parser.add_argument("data", help="milepost dataset folder (milepost data ...)")
    parser.add_argument("out", help="output folder for train.parquet and test.parquet")
    parser.add_argument("--levels", help="training levels to keep, e.g. L3-L4 (default: all)")
    args = parser.parse_args(argv)
    try:
        counts = write_parquet(args.data, args.out, args.levels)
    except InputError as exc:
        print(f"milepost: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {counts['train']} train rows, {counts['test']} test rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
