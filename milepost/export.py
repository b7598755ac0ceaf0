"""Episodes out of milepost: chat conversations for SFT in other tools, and a flat parquet table for analysis.

An evaluation run folder holds ``episodes.jsonl`` and ``run.json`` (what was played, how); a training run holds
one such folder per evaluation (``eval-NNNNNN``). Both exports read those.

**Chat** (``chat_rows``): one conversation per turn, ``messages`` = the system and user messages exactly as the
model saw them, then the answer as the assistant message (the conversational format of TRL's ``SFTTrainer``),
with the turn's recorded ``prompt_ids``, ``completion_ids`` and behaviour ``logprobs`` alongside. An episode does
not store its prompts, so each one is played again through the real environment and agent loop
(``run_episodes`` with ``backends.scripted.ReplayPolicy``, as ``milepost.training.sft`` replays a teacher),
answering with the recorded texts; the replay must reach the recorded observations and actions, else the export stops.

**Table** (``turn_table``): one row per turn, the episode's fields beside the turn's, reward terms as columns,
token ids and log-probs as list columns. It needs neither the dataset nor a replay.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milepost.errors import InputError
from milepost.io import read_jsonl
from milepost.progress import phase
from milepost.types import REWARD_TERM_NAMES, Episode, Task

EPISODES = "episodes.jsonl"
log = logging.getLogger(__name__)
FORMATS = ("chat", "parquet")


@dataclass
class RunEpisodes:
    """The episodes of one evaluation folder, with its ``run.json`` (None when it has none)."""

    folder: Path
    name: str  # the folder's name relative to the run given ("" for the run itself)
    episodes: list[Episode]
    lines: list[int]  # each episode's line in episodes.jsonl
    run: dict[str, Any] | None


def find_runs(path: str | Path) -> list[RunEpisodes]:
    """The evaluation folders of ``path``: an eval run folder (or its ``episodes.jsonl``), or a training run
    folder with ``eval-NNNNNN`` evaluations.

    Raises:
        InputError: no episodes there, or a record that is not an episode (``FILE:LINE: ...``).
    """
    root = Path(path)
    if root.is_file() and root.name == EPISODES:
        root = root.parent
    if not root.is_dir():
        raise InputError(f"{root}: no such run folder")
    if (root / EPISODES).is_file():
        folders = [(root, "")]
    else:
        folders = [(f, f.name) for f in sorted(root.glob("eval-*")) if (f / EPISODES).is_file()]
    if not folders:
        raise InputError(
            f"{root}: no {EPISODES} (give an evaluation run folder, or a training run with eval-NNNNNN folders)"
        )
    runs = []
    for folder, name in folders:
        episodes, lines = [], []
        seen: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
        skipped = 0
        for lineno, row in enumerate(read_jsonl(folder / EPISODES, finite=True), 1):
            try:
                episode = Episode.from_dict(row)
            except InputError as exc:
                raise InputError(f"{folder / EPISODES}:{lineno}: {exc}") from None
            key = (episode.task_id, episode.sample)  # the episode's identity in a run (runner: one per key)
            if key in seen:
                first, kept = seen[key]
                if kept != row:
                    raise InputError(
                        f"{folder / EPISODES}:{lineno}: task {key[0]} sample {key[1]} again, unlike line {first}; "
                        "the run holds two different records of one episode"
                    )
                skipped += 1
                continue
            seen[key] = (lineno, row)
            episodes.append(episode)
            lines.append(lineno)
        if skipped:
            log.warning("%s: %d duplicate episode line(s) exported once", folder / EPISODES, skipped)
        run_file = folder / "run.json"
        try:
            run = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise InputError(f"{run_file}: not valid JSON ({getattr(exc, 'msg', type(exc).__name__)})") from None
        if run is not None and not isinstance(run, dict):
            raise InputError(f"{run_file}: expected a JSON object")
        runs.append(RunEpisodes(folder, name, episodes, lines, run))
    return runs


# ---------------------------------------------------------------------------------------------------------------
# The flat table


def turn_records(runs: Sequence[RunEpisodes]) -> list[dict[str, Any]]:
    """One flat record per turn of every episode (see ``turn_schema`` for the columns)."""
    rows = []
    for run in runs:
        for ep in run.episodes:
            for turn in ep.turns:
                rows.append(
                    {
                        "run": run.name,
                        "task_id": ep.task_id,
                        "sample": ep.sample,
                        "episode_seed": ep.seed,
                        "policy": ep.policy,
                        "env": str(ep.meta.get("env", "")),
                        "level": ep.level,
                        "goal_distance": ep.goal_distance,
                        "success": ep.success,
                        "termination": ep.termination.value,
                        "episode_steps": ep.steps,
                        "turn": turn.index,
                        "observation": turn.observation,
                        "text": turn.text,
                        "actions": turn.actions,
                        "reward": turn.reward,
                        **{f"reward_{name}": float(turn.reward_terms[name]) for name in REWARD_TERM_NAMES},  # type: ignore[literal-required]
                        "subgoals_completed": turn.subgoals_completed,
                        "new_subgoals": turn.new_subgoals,
                        "remaining_distance": turn.remaining_distance,
                        "correct_actions": turn.correct_actions,
                        "n_requested": turn.n_requested,
                        "error": turn.error,
                        "finish_reason": turn.finish_reason,
                        "state_key": turn.state_key,
                        "prompt_tokens": len(turn.prompt_ids),
                        "completion_tokens": len(turn.completion_ids),
                        "prompt_ids": turn.prompt_ids,
                        "completion_ids": turn.completion_ids,
                        "logprobs": turn.logprobs,
                        "episode_meta": json.dumps(ep.meta, separators=(",", ":")),
                    }
                )
    return rows


def turn_schema() -> Any:
    """The Arrow schema of the flat table: typed columns, lists for actions, subgoals, token ids and log-probs."""
    from milepost.tables import pyarrow

    pa, _ = pyarrow()
    ints = pa.list_(pa.int64())
    fields = [
        ("run", pa.string()),
        ("task_id", pa.string()),
        ("sample", pa.int64()),
        ("episode_seed", pa.int64()),
        ("policy", pa.string()),
        ("env", pa.string()),
        ("level", pa.string()),
        ("goal_distance", pa.int64()),
        ("success", pa.bool_()),
        ("termination", pa.string()),
        ("episode_steps", pa.int64()),
        ("turn", pa.int64()),
        ("observation", pa.string()),
        ("text", pa.string()),
        ("actions", pa.list_(pa.string())),
        ("reward", pa.float64()),
        *((f"reward_{name}", pa.float64()) for name in REWARD_TERM_NAMES),
        ("subgoals_completed", ints),
        ("new_subgoals", ints),
        ("remaining_distance", pa.int64()),
        ("correct_actions", pa.int64()),
        ("n_requested", pa.int64()),
        ("error", pa.string()),
        ("finish_reason", pa.string()),
        ("state_key", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("prompt_ids", ints),
        ("completion_ids", ints),
        ("logprobs", pa.list_(pa.float64())),
        ("episode_meta", pa.string()),
    ]
    return pa.schema(fields, metadata={"milepost": json.dumps({"record": "milepost turn", "one_row_per": "turn"})})


def turn_table(runs: Sequence[RunEpisodes]) -> Any:
    """The flat ``pyarrow.Table`` of every turn."""
    from milepost.tables import pyarrow

    pa, _ = pyarrow()
    return pa.Table.from_pylist(turn_records(runs), schema=turn_schema())


# ---------------------------------------------------------------------------------------------------------------
# Chat conversations


def _spec(run: RunEpisodes, data: str | Path | None) -> Any:
    """The ``EvalSpec`` of a run's ``run.json`` (``data`` overrides the dataset it names)."""
    from milepost.agent.loop import AgentSettings
    from milepost.evaluation.runner import EvalSpec

    where = run.folder / "run.json"
    if run.run is None:
        raise InputError(f"{run.folder}: no run.json (the chat export replays the run's prompts and needs it)")
    fields = dict(run.run)
    try:
        fields["settings"] = AgentSettings(**fields.get("settings", {}))
        if data is not None:
            fields["data"] = str(data)
        spec = EvalSpec(**fields)
        if not isinstance(spec.data, str) or not isinstance(spec.split, str) or type(spec.seed) is not int:
            raise TypeError("data and split must be strings, seed an integer")
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: not an evaluation run's record ({exc})") from None
    if not Path(spec.data).exists():
        raise InputError(f"{where}: its dataset {spec.data} is not there (pass --data DATASET)")
    if spec.agent != "plain" and (spec.planner != "programmatic" or spec.judge is not None or spec.judge_every):
        raise InputError(
            f"{where}: the prompts held plans or verdicts of a model (--planner {spec.planner}, --judge "
            f"{spec.judge}) that {EPISODES} does not record; export --format parquet instead"
        )
    return spec


def chat_rows(runs: Sequence[RunEpisodes], data: str | Path | None = None, *, progress: bool = False) -> list[dict]:
    """One chat conversation per turn of every episode (module docstring), in episode and turn order.

    Args:
        runs: evaluation folders (``find_runs``).
        data: the dataset, when the one ``run.json`` names has moved.
        progress: show a progress bar of replayed episodes.

    Raises:
        InputError: a run without ``run.json`` or its dataset, an episode of a task the dataset lacks, or a
            replay that does not reach the recorded observation and actions.
    """
    from milepost.agent.loop import Job, episode_seed, run_episodes
    from milepost.backends.scripted import ReplayPolicy
    from milepost.datasets import load_tasks
    from milepost.envs import make_env
    from milepost.evaluation.proxy import board_prompt
    from milepost.evaluation.runner import build_agent

    rows = []
    for run in runs:
        spec = _spec(run, data)
        with phase(f"loading the {spec.split} tasks of {spec.data}", enabled=progress):
            tasks = {t.task_id: t for t in load_tasks(spec.data, spec.split)}
        file = run.folder / EPISODES
        for ep, line in zip(run.episodes, run.lines):
            if ep.task_id not in tasks:
                raise InputError(f"{file}:{line}: task {ep.task_id} is not in the {spec.split} split of {spec.data}")
            want = episode_seed(spec.seed, Job(tasks[ep.task_id], ep.sample))
            if ep.seed != want:
                raise InputError(f"{file}:{line}: seed {ep.seed}, but run.json's seed {spec.seed} gives {want}")
        replay = ReplayPolicy(run.episodes, keep_messages=True)
        if spec.single_turn and spec.env == "sudoku":  # the short-horizon proxy's own one-turn prompt
            replay.messages = {i: [board_prompt(tasks[ep.task_id])] for i, ep in enumerate(run.episodes) if ep.turns}
        elif run.episodes:
            sizes = {tasks[ep.task_id].size for ep in run.episodes}
            for size in sorted(sizes):
                jobs = [
                    Job(tasks[ep.task_id], i) for i, ep in enumerate(run.episodes) if tasks[ep.task_id].size == size
                ]
                replayed = run_episodes(
                    functools.partial(make_env, spec.env, **{**spec.env_kwargs, "size": size}),
                    jobs,
                    replay,
                    spec.settings,
                    seed=spec.seed,
                    progress=progress,
                    agent=build_agent(spec, replay),
                )
                for again in replayed:
                    _check_replay(run.episodes[again.sample], again.turns, f"{file}:{run.lines[again.sample]}")
        for i, ep in enumerate(run.episodes):
            for turn, messages in zip(ep.turns, replay.messages.get(i, [])):
                rows.append(_chat_row(run, ep, turn, messages, tasks[ep.task_id]))
    return rows


def _check_replay(recorded: Episode, turns: Sequence[Any], where: str) -> None:
    if len(turns) != len(recorded.turns):
        raise InputError(f"{where}: the replay took {len(turns)} turns, the record {len(recorded.turns)}")
    for again, turn in zip(turns, recorded.turns):
        for name in ("observation", "actions"):
            if getattr(again, name) != getattr(turn, name):
                raise InputError(
                    f"{where}: turn {turn.index}: the replay's {name} differs from the record (the dataset, the "
                    "environment or its settings changed since the run)"
                )


def _chat_row(run: RunEpisodes, ep: Episode, turn: Any, messages: list[dict[str, str]], task: Task) -> dict:
    return {
        "messages": [*messages, {"role": "assistant", "content": turn.text}],
        "prompt_ids": turn.prompt_ids,
        "completion_ids": turn.completion_ids,
        "logprobs": turn.logprobs,
        "run": run.name,
        "task_id": ep.task_id,
        "env": task.env,
        "level": ep.level,
        "sample": ep.sample,
        "turn": turn.index,
        "policy": ep.policy,
        "success": ep.success,
        "termination": ep.termination.value,
        "reward": turn.reward,
        "reward_terms": dict(turn.reward_terms),
        "actions": turn.actions,
        "error": turn.error,
        "finish_reason": turn.finish_reason,
    }


def default_out(path: str | Path, format: str) -> Path:
    """Where an export goes without ``--out``: beside the episodes of the run given."""
    root = Path(path)
    root = root.parent if root.is_file() else root
    return root / ("episodes.chat.jsonl" if format == "chat" else "episodes.parquet")


def check_target(target: Path, runs: Sequence[RunEpisodes], root: str | Path, *, overwrite: bool) -> None:
    """Refuse to write an export where it would destroy something: a file of the run itself (its episodes,
    ``run.json``, metrics, checkpoints...; earlier exports at the default names aside), anything but a regular
    file, an existing file without ``overwrite``, or a path whose folder does not exist.

    Raises:
        InputError: one line saying which.
    """
    from milepost.io import check_replaceable

    exports = {"episodes.chat.jsonl", "episodes.parquet"}
    folder = Path(root)
    folder = folder.parent if folder.is_file() else folder
    own = {p.resolve() for p in folder.rglob("*") if p.is_file() and p.name not in exports}
    own |= {(run.folder / name).resolve() for run in runs for name in (EPISODES, "run.json")}
    if target.resolve() in own:
        raise InputError(f"{target}: a file of the run being exported; choose another --out")
    check_replaceable(target)
    if not target.parent.is_dir():
        raise InputError(f"{target.parent}: no such folder (create it first, or choose another --out)")
    if target.exists() and not overwrite:
        raise InputError(f"{target}: exists; pass --overwrite to replace it")


def export_episodes(
    path: str | Path,
    format: str,
    out: str | Path | None = None,
    *,
    data: str | Path | None = None,
    progress: bool = False,
    overwrite: bool = False,
) -> tuple[Path, int]:
    """Write the episodes of a run as ``format`` (chat JSONL or a parquet table); returns the file and its rows.

    ``overwrite`` replaces an existing file at the target (never a file of the run itself, ``check_target``).

    Raises:
        InputError: an unknown format, a run without episodes, a target ``check_target`` refuses, anything
            ``chat_rows`` refuses.
    """
    from milepost.io import atomic_write_jsonl
    from milepost.tables import pyarrow, write_parquet

    if format not in FORMATS:
        raise InputError(f"unknown export format {format!r} (choose from {', '.join(FORMATS)})")
    if format == "parquet":
        pyarrow()  # before reading anything
    with phase(f"reading the episodes of {path}", enabled=progress):
        runs = find_runs(path)
    target = Path(out) if out is not None else default_out(path, format)
    check_target(target, runs, path, overwrite=overwrite)  # before the replay, which can take minutes
    if format == "chat":
        rows = chat_rows(runs, data, progress=progress)
        with phase(f"writing {len(rows)} conversations to {target}", enabled=progress):
            _write(target, lambda: atomic_write_jsonl(target, rows))
        return target, len(rows)
    with phase(f"building the turn table and writing {target}", enabled=progress):
        table = turn_table(runs)
        _write(target, lambda: write_parquet(target, table))
    return target, table.num_rows


def _write(target: Path, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError as exc:  # a full disk, a read-only folder: the export is lost, the run is not
        raise InputError(f"{target}: cannot write the export ({exc.strerror or type(exc).__name__})") from None
