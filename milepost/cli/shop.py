"""``milepost shop``: serve a web-shop task as a web page (search box, results, product page, cart).

The page is driven by the same environment as the text shop: every button is a ``click[...]`` action, the search
box a ``search[...]``, with the same rewards and subgoal events. Pick the task from a dataset (``--data`` with
``--task-id`` or ``--index``) or generate one (``--items``, ``--level``, ``--seed``). ``--replay EPISODES.jsonl``
loads a recorded episode of that task (``--episode`` picks the line; default the first of the task) so that
"Replay next step" steps through it.

Binds 127.0.0.1 unless told otherwise, and warns when bound beyond loopback: the shop has no login. Each browser
gets its own episode (a session cookie); requests naming another host (DNS rebinding) or posted from another
site's page are refused; ``--allow-host NAME`` accepts a DNS name the shop is reached under. A new browser never
takes an episode in play (when all are, it gets a 503), no other site may frame the page, and a client gets
``--read-timeout`` seconds for a request's headers and again for its body.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from milepost.cli.serve import READ_TIMEOUT_S  # one literal for both servers (serve.limits holds the value)
from milepost.errors import InputError
from milepost.io import loads_finite
from milepost.types import Task

# Literal lists keep `milepost --help` from importing the web shop; tests/cli/test_shop_options.py checks them
# against milepost.envs.webshop's DIFFICULTIES and PROFILES.
DIFFICULTIES = ("easy", "medium", "hard")
PROFILES = ("milepost", "webshop")
DEFAULT_PROFILE = "milepost"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shop", help="serve a web-shop task as a web page", description=__doc__)
    p.add_argument(
        "--data",
        default=None,
        help="dataset folder (from `milepost data webshop`, JSONL or parquet) or one split file (.jsonl / .parquet)",
    )
    p.add_argument("--split", default="test", help="split of --data (default test)")
    p.add_argument("--task-id", default=None, help="task of --data by id")
    p.add_argument("--index", type=int, default=0, help="task of --data by position (default 0)")
    p.add_argument("--items", type=int, default=1, help="generated task: items per order (default 1)")
    p.add_argument("--level", default=None, help="generated task: goal-distance level, e.g. 3-5")
    p.add_argument("--seed", type=int, default=0, help="generated task: seed (default 0)")
    p.add_argument(
        "--difficulty",
        choices=DIFFICULTIES,
        default="easy",
        help="generated task: instructions and catalogue (default easy; see milepost data webshop --difficulty)",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default=DEFAULT_PROFILE,
        help=f"the shop's reward and rules (default {DEFAULT_PROFILE}; webshop: princeton-nlp/WebShop's)",
    )
    p.add_argument("--replay", default=None, help="episodes.jsonl of an eval run to step through")
    p.add_argument("--episode", type=int, default=None, help="line of --replay (default: the first of the task)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the shop may be reached under besides loopback and its address (repeatable)",
    )
    p.add_argument(
        "--read-timeout",
        type=float,
        default=READ_TIMEOUT_S,
        metavar="S",
        help=f"seconds for a request's headers, and again for its body (default {READ_TIMEOUT_S:g})",
    )
    p.set_defaults(func=run)


def pick_task(args: argparse.Namespace) -> Task:
    """The task the arguments name (from a dataset, or freshly generated)."""
    if args.data is not None:
        from milepost.datasets import load_tasks

        tasks = load_tasks(args.data, args.split)
        if args.task_id is not None:
            found = [t for t in tasks if t.task_id == args.task_id]
            if not found:
                raise InputError(f"{args.data}: no task {args.task_id!r} in the {args.split} split")
            task = found[0]
        elif not 0 <= args.index < len(tasks):
            raise InputError(f"--index {args.index}: the {args.split} split has {len(tasks)} tasks")
        else:
            task = tasks[args.index]
        if task.env != "webshop":
            raise InputError(f"task {task.task_id} is a {task.env} task, not webshop")
        return task
    from milepost.envs.webshop import WebShopEnv

    return WebShopEnv(size=args.items, level=args.level, difficulty=args.difficulty).sample_task(args.seed)


def replay_texts(path: str, task: Task, line: int | None) -> list[str]:
    """The answer texts of a recorded episode of ``task`` (each turn's full text, errors included)."""
    source = Path(path)
    if not source.is_file():
        raise InputError(f"--replay {source}: no such file")
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, text in enumerate(source.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not text.strip():
            continue
        row = loads_finite(text, f"--replay {source}:{n}")
        if not isinstance(row, dict):
            raise InputError(f"--replay {source}:{n}: an episode is a JSON object, not {type(row).__name__}")
        rows.append((n, row))
    if line is not None:
        if not 0 <= line < len(rows):
            raise InputError(f"--episode {line}: {source} has {len(rows)} episodes")
        n, row = rows[line]
        if row.get("task_id") != task.task_id:
            raise InputError(f"--episode {line} is of task {row.get('task_id')!r}, not {task.task_id!r}")
    else:
        n, row = next(((n, r) for n, r in rows if r.get("task_id") == task.task_id), (0, {}))
        if not row:
            raise InputError(f"{source}: no episode of task {task.task_id!r}")
    turns = row.get("turns", [])
    if not isinstance(turns, list) or not all(isinstance(turn, dict) for turn in turns):
        raise InputError(f"--replay {source}:{n}: turns must be a list of objects")
    return [str(turn.get("text", "")) for turn in turns]


def serve(
    task: Task,
    replay: list[str] | None,
    host: str,
    port: int,
    allowed_hosts: Sequence[str] = (),
    explain: Callable[[str], tuple[str, str]] | None = None,
    profile: str = DEFAULT_PROFILE,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> int:
    """Serve ``task``'s shop (with ``replay``'s answers behind "Replay next step") until interrupted; ``explain``
    splits an answer into its action and reasoning for the page's list of steps (default: the shop's own).

    Raises:
        InputError: one line, for missing extras, a port outside 0..65535, a busy port, an unknown address or a
            read timeout that is not positive.
    """
    if not read_timeout_s > 0:  # also refuses nan
        raise InputError(f"--read-timeout must be positive, got {read_timeout_s:g}")
    try:
        from milepost.envs.webshop.html import create_app
        from milepost.serve.runner import bind_socket, is_loopback, serve_forever
    except ImportError as exc:
        raise InputError(f"the web shop needs the serve and web extras (fastapi, uvicorn, jinja2): {exc}") from None
    app = (
        create_app(task, replay, allowed_hosts=allowed_hosts, profile=profile, read_timeout_s=read_timeout_s)
        if explain is None
        else create_app(
            task, replay, allowed_hosts=allowed_hosts, explain=explain, profile=profile, read_timeout_s=read_timeout_s
        )
    )
    if not is_loopback(host):
        print(f"milepost: warning: serving the shop on {host}: anyone who can reach it can use it", file=sys.stderr)
    sock = bind_socket(host, port)  # "on http://..." only once the port is ours
    try:
        shown = f"[{host}]" if ":" in host else host
        bound = sock.getsockname()[1]
        print(f"milepost shop: task {task.task_id} (goal distance {task.goal_distance}) on http://{shown}:{bound}/")
        serve_forever(app, sock, log_level="warning", header_timeout_s=read_timeout_s)
    finally:
        sock.close()
    return 0


def run(args: argparse.Namespace) -> int:
    task = pick_task(args)
    replay = replay_texts(args.replay, task, args.episode) if args.replay else None
    read_timeout = getattr(args, "read_timeout", READ_TIMEOUT_S)  # callers building a Namespace may leave it out
    return serve(task, replay, args.host, args.port, args.allow_host, profile=args.profile, read_timeout_s=read_timeout)
