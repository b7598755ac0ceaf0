"""``milepost show EPISODES.jsonl`` (or ``milepost show RUN_DIR``): replay an episode in the terminal, turn by turn.

``--web`` serves a web-shop episode in the shop's web page instead (as ``milepost shop --replay`` does), where
"Replay next step" applies its turns one by one and the page lists each step's action with the agent's reasoning
(and the next step's before it is applied). The task comes from ``--data`` (default: the dataset and split
that the evaluation folder's ``metrics.json`` names).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from milepost.types import Task


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="replay a recorded episode", description=__doc__)
    p.add_argument("episodes", help="an episodes.jsonl file, or the run folder that holds one (an eval's --out)")
    p.add_argument("--index", type=int, default=0, help="which episode (line) to show; negative counts back")
    p.add_argument("--task", default=None, help="show the first episode of this task id instead")
    p.add_argument("--web", action="store_true", help="web-shop episodes: replay it in the shop's web page")
    p.add_argument("--data", default=None, help="--web: dataset of the task (default: from the eval's metrics.json)")
    p.add_argument("--split", default=None, help="--web: split of --data (default: the eval's, else test)")
    p.add_argument("--host", default="127.0.0.1", help="--web: interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="--web: TCP port (default 8080)")
    p.set_defaults(func=run)


def web_task(args: argparse.Namespace, task_id: str) -> Task:
    """The web-shop task of an episode: from ``--data``, else from the dataset the evaluation folder names."""
    from milepost.datasets import load_tasks
    from milepost.errors import InputError

    data, split = args.data, args.split
    metrics = Path(args.episodes).parent / "metrics.json"
    if data is None:
        if not metrics.is_file():
            raise InputError(f"--web: no {metrics} to name the dataset; pass --data")
        try:
            meta = json.loads(metrics.read_text(encoding="utf-8")).get("meta", {})
        except (ValueError, UnicodeDecodeError):
            raise InputError(f"--web: {metrics} is not a JSON metrics file; pass --data") from None
        data, split = meta.get("data"), split or meta.get("split")
        if not isinstance(data, str):
            raise InputError(f"--web: {metrics} names no dataset; pass --data")
    tasks = [t for t in load_tasks(data, split or "test") if t.task_id == task_id]
    if not tasks:
        raise InputError(f"--web: no task {task_id!r} in the {split or 'test'} split of {data}")
    if tasks[0].env != "webshop":
        raise InputError(f"--web replays web-shop episodes; task {task_id} is a {tasks[0].env} task")
    return tasks[0]


def explain(answer: str) -> tuple[str, str]:
    """An answer's action and the agent's reasoning (its think block and REASON), for the web page's steps."""
    from milepost.agent.parsing import parse_answer

    said = parse_answer(answer)
    reasoning = " ".join(x for x in (f"(thinking: {said.think})" if said.think else "", said.reason) if x)
    return said.action or answer.strip(), reasoning


def run(args: argparse.Namespace) -> int:
    from milepost.errors import InputError
    from milepost.io import read_jsonl
    from milepost.types import Episode

    path = Path(args.episodes)
    if path.is_dir():  # a run folder (`milepost eval --out`): its episodes
        if not (path / "episodes.jsonl").is_file():
            raise InputError(f"{path} is a folder without an episodes.jsonl (give a run folder or the file)")
        args.episodes = str(path / "episodes.jsonl")
    rows = list(read_jsonl(args.episodes, finite=True))
    if not rows:
        raise InputError(f"{args.episodes}: no episodes")
    if args.task is not None:
        matches = [r for r in rows if r.get("task_id") == args.task]
        if not matches:
            raise InputError(f"{args.episodes}: no episode of task {args.task!r}")
        row = matches[0]
    else:
        if not -len(rows) <= args.index < len(rows):
            raise InputError(f"{args.episodes}: --index {args.index} out of range (0..{len(rows) - 1})")
        row = rows[args.index]
    ep = Episode.from_dict(row)
    if args.web:
        from milepost.cli.shop import serve

        return serve(web_task(args, ep.task_id), [turn.text for turn in ep.turns], args.host, args.port,
                     explain=explain)  # fmt: skip
    print(
        f"task {ep.task_id} | level {ep.level} | goal distance {ep.goal_distance} | policy {ep.policy} | "
        f"sample {ep.sample} | seed {ep.seed}"
    )
    for turn in ep.turns:
        print(f"\n--- turn {turn.index + 1} ---")
        print(turn.observation)
        print(f">>> {turn.text.strip()}")
        terms = ", ".join(f"{k} {v:+g}" for k, v in turn.reward_terms.items() if v)
        applied = ", ".join(turn.actions) or "nothing"
        extra = f" | rejected: {turn.error}" if turn.error else ""
        remaining = "?" if turn.remaining_distance is None else turn.remaining_distance  # unknown distance
        print(
            f"applied: {applied} | reward {turn.reward:+.2f}{' (' + terms + ')' if terms else ''} | "
            f"remaining {remaining} | subgoals {len(turn.subgoals_completed)}{extra}"
        )
    outcome = "SOLVED" if ep.success else f"FAILED ({ep.termination.value})"
    print(f"\n{outcome} after {ep.steps} turns")
    if ep.meta.get("error"):
        print(f"backend error: {ep.meta['error']}")
    return 0
