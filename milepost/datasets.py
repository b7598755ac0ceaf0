"""Dataset directories (DESIGN: Contracts): ``train.jsonl``, ``test.jsonl`` and ``manifest.json``.

A dataset is written into a temporary sibling folder and renamed into place, so a reader never sees a
half-written dataset and an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from milepost.envs.records import first_problem
from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_jsonl, read_jsonl
from milepost.types import Task

SPLITS = ("train", "test")


def write_dataset(
    out: str | Path,
    splits: Mapping[str, Sequence[Task]],
    manifest: dict[str, Any],
    *,
    overwrite: bool = False,
) -> Path:
    """Write ``{split}.jsonl`` for each split plus ``manifest.json`` into ``out`` atomically.

    Raises:
        InputError: if ``out`` exists and is not empty and ``overwrite`` is false.
    """
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise InputError(f"{target} already exists and is not empty (pass --overwrite to replace it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for split, tasks in splits.items():
            atomic_write_jsonl(tmp / f"{split}.jsonl", (t.to_dict() for t in tasks))
        atomic_write_json(tmp / "manifest.json", manifest)
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def load_tasks(path: str | Path, split: str = "test") -> list[Task]:
    """The tasks of one split of a dataset folder (or of a ``.jsonl`` file given directly), checked.

    Every record must match the Task contract and its environment (``milepost.envs.records``: payload,
    recomputed goal distance, level of the table); task ids must be unique in the file and across the
    folder's splits; a record's ``split`` must name its file; and the folder's ``manifest.json``, when there
    is one, must agree with the records (environment, board size, levels, counts).

    Raises:
        InputError: a missing folder or split, or the first bad record, as ``FILE:LINE: FIELD: why``.
    """
    source = Path(path)
    file = source if source.suffix == ".jsonl" else source / f"{split}.jsonl"
    if not source.exists():
        raise InputError(f"{source}: no such dataset")
    if not file.is_file():
        raise InputError(f"{source}: no {split} split ({file.name} missing)")
    tasks: list[Task] = []
    lines: list[int] = []
    for lineno, row in enumerate(read_jsonl(file), 1):
        try:
            tasks.append(Task.from_dict(row))
        except InputError as exc:
            raise InputError(f"{file}:{lineno}: {exc}") from None
        lines.append(lineno)
    _check_records(file, tasks, lines)
    return tasks


def _check_records(file: Path, tasks: list[Task], lines: list[int]) -> None:
    """The file-level checks of ``load_tasks``: ids, split names, manifest, then each record's content."""
    split = file.stem if file.stem in SPLITS else None
    seen: dict[str, int] = {}
    for task, lineno in zip(tasks, lines):
        if task.task_id in seen:
            raise InputError(f"{file}:{lineno}: task_id: {task.task_id!r} is also on line {seen[task.task_id]}")
        seen[task.task_id] = lineno
        if split is not None and task.split not in ("", split):
            raise InputError(f"{file}:{lineno}: split: {task.split!r} in the {split} file")
    if split is not None:
        for other in SPLITS:
            sibling = file.with_name(f"{other}.jsonl")
            if other == split or not sibling.is_file():
                continue
            for lineno, row in enumerate(read_jsonl(sibling), 1):
                task_id = row.get("task_id")
                if isinstance(task_id, str) and task_id in seen:
                    raise InputError(f"{file}:{seen[task_id]}: task_id: {task_id!r} is also in {sibling}:{lineno}")
    manifest_file = file.parent / "manifest.json"
    if manifest_file.exists():
        _check_manifest(manifest_file, load_manifest(file.parent), file, split, tasks, lines)
    problem = first_problem(tasks)
    if problem is not None:
        raise InputError(f"{file}:{lines[problem.index]}: {problem.field}: {problem.message}")


def _check_manifest(
    where: Path, manifest: dict[str, Any], file: Path, split: str | None, tasks: list[Task], lines: list[int]
) -> None:
    """Records against the fields of ``manifest.json`` that it has (hand-made datasets may have fewer)."""
    levels = manifest.get("levels")
    for task, lineno in zip(tasks, lines):
        for name in ("env", "size"):
            if name in manifest and getattr(task, name) != manifest[name]:
                value = getattr(task, name)
                raise InputError(f"{file}:{lineno}: {name}: {value!r}, but {where} says {manifest[name]!r}")
        if isinstance(levels, dict) and task.level not in levels:
            known = ", ".join(map(str, levels))
            raise InputError(f"{file}:{lineno}: level: {task.level!r} is not among {where}'s levels ({known})")
    counts = manifest.get("counts")
    expected = counts.get(split) if split is not None and isinstance(counts, dict) else None
    if isinstance(expected, int) and expected != len(tasks):
        raise InputError(f"{file}: {len(tasks)} tasks, but {where} counts {expected} in {split}")


def load_manifest(path: str | Path) -> dict[str, Any]:
    file = Path(path) / "manifest.json"
    if not file.is_file():
        raise InputError(f"{path}: no manifest.json" + (" (a folder of that name)" if file.exists() else ""))
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{file}: not UTF-8 text (a binary file?)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{file}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"{file}: expected a JSON object")
    return data
