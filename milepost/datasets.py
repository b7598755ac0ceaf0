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
    """The tasks of one split of a dataset folder (or of a ``.jsonl`` file given directly).

    Raises:
        InputError: a missing folder or split, or a record that does not match the Task contract.
    """
    source = Path(path)
    file = source if source.suffix == ".jsonl" else source / f"{split}.jsonl"
    if not source.exists():
        raise InputError(f"{source}: no such dataset")
    if not file.is_file():
        raise InputError(f"{source}: no {split} split ({file.name} missing)")
    tasks = []
    for lineno, row in enumerate(read_jsonl(file), 1):
        try:
            tasks.append(Task.from_dict(row))
        except InputError as exc:
            raise InputError(f"{file}:{lineno}: {exc}") from None
    return tasks


def load_manifest(path: str | Path) -> dict[str, Any]:
    file = Path(path) / "manifest.json"
    if not file.is_file():
        raise InputError(f"{path}: no manifest.json")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{file}: expected a JSON object")
    return data
