"""Dataset directories (DESIGN: Contracts): ``train`` / ``test`` splits and ``manifest.json``, in JSONL or parquet.

A split is ``{split}.jsonl`` (one task record per line) or ``{split}.parquet`` (one row per task: the record's
scalar fields as typed columns, ``payload`` and ``meta`` as JSON text, so that every record comes back exactly:
Arrow's nested structs would merge the keys of different rows, e.g. give one web-shop item the option names of
another as nulls). Every reader goes through ``load_tasks`` / ``load``, which check each record against its
environment (``milepost.envs.records``), whatever the format; ``to_hf`` / ``from_hf`` convert to and from a
Hugging Face ``datasets.DatasetDict``.

A dataset is written into a temporary sibling folder and renamed into place, so a reader never sees a
half-written dataset and an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milepost.envs.records import first_problem
from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_jsonl, read_jsonl, umask
from milepost.tables import HINT, pyarrow, read_parquet, write_parquet
from milepost.types import Task

SPLITS = ("train", "test")
FORMATS = ("jsonl", "parquet")
COLUMNS = tuple(f.name for f in dataclasses.fields(Task))
JSON_COLUMNS = ("payload", "meta")
"""Task fields stored as JSON text in parquet and Hugging Face datasets (their keys vary by environment)."""


@dataclass
class LevelDataset:
    """A dataset folder, read and checked: the tasks of each split it has, its manifest and the split files."""

    splits: dict[str, list[Task]]
    manifest: dict[str, Any]  # {} for a folder without manifest.json
    files: dict[str, Path]


def write_dataset(
    out: str | Path,
    splits: Mapping[str, Sequence[Task]],
    manifest: dict[str, Any],
    *,
    overwrite: bool = False,
    format: str = "jsonl",
) -> Path:
    """Write ``{split}.jsonl`` (or ``{split}.parquet``) for each split plus ``manifest.json`` into ``out`` atomically.

    Raises:
        InputError: if ``out`` exists and is not empty and ``overwrite`` is false; an unknown format; parquet
            without pyarrow installed; one puzzle in two splits (``check_disjoint``).
    """
    if format not in FORMATS:
        raise InputError(f"unknown dataset format {format!r} (choose from {', '.join(FORMATS)})")
    if format == "parquet":
        pyarrow()  # fail before anything is written
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise InputError(f"{target} already exists and is not empty (pass --overwrite to replace it)")
    check_disjoint(splits)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tmp.chmod(0o777 & ~umask())  # mkdtemp makes it 0700; the dataset is as readable as any folder the user makes
        for split, tasks in splits.items():
            if format == "parquet":
                write_parquet(tmp / f"{split}.parquet", task_table(tasks))
            else:
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


def puzzle_key(task: Task) -> str:
    """What makes two tasks one puzzle whatever their ids: a Rush Hour task's cluster (``meta.cluster_id``, which
    every lettering and position of the cluster shares), else the environment, size and payload (the board, the
    puzzle, the order). The generators also apply their own, wider rules (a Sudoku puzzle up to symmetry)."""
    cluster = task.meta.get("cluster_id") if task.env == "rushhour" else None
    if isinstance(cluster, str) and cluster:
        return f"rushhour:cluster:{cluster}"
    return f"{task.env}:{task.size}:" + json.dumps(task.payload, sort_keys=True, separators=(",", ":"))


def check_disjoint(splits: Mapping[str, Sequence[Task]]) -> None:
    """Refuse a dataset whose splits share a puzzle under different ids (``puzzle_key``): a test task that is also
    a training task measures recall, not skill. Checked when any dataset is written, generated or converted.

    Raises:
        InputError: naming both tasks.
    """
    first: dict[str, tuple[str, str]] = {}
    for split, tasks in splits.items():
        for task in tasks:
            key = puzzle_key(task)
            seen = first.setdefault(key, (split, task.task_id))
            if seen[0] != split:
                raise InputError(
                    f"{split} task {task.task_id} is the same puzzle as {seen[0]} task {seen[1]}: a puzzle may sit "
                    "in one split only (a generator or source repeated it)"
                )


def task_row(task: Task) -> dict[str, Any]:
    """The parquet / Hugging Face row of a task: its record with ``payload`` and ``meta`` as JSON text."""
    row = task.to_dict()
    for name in JSON_COLUMNS:
        row[name] = json.dumps(row[name], separators=(",", ":"), ensure_ascii=False)
    return row


def task_schema() -> Any:
    """The Arrow schema of a parquet split (typed scalar columns, JSON text for payload and meta)."""
    pa, _ = pyarrow()
    types = {"size": pa.int64(), "goal_distance": pa.int64(), "seed": pa.int64(), "index": pa.int64()}
    note = {"record": "milepost Task", "json_columns": list(JSON_COLUMNS)}
    return pa.schema(
        [(name, types.get(name, pa.string())) for name in COLUMNS], metadata={"milepost": json.dumps(note)}
    )


def task_table(tasks: Iterable[Task]) -> Any:
    """A ``pyarrow.Table`` of tasks in the parquet split layout."""
    pa, _ = pyarrow()
    return pa.Table.from_pylist([task_row(t) for t in tasks], schema=task_schema())


def row_task(row: Mapping[str, Any], where: str) -> Task:
    """The task of a parquet / Hugging Face row; ``payload`` and ``meta`` may be JSON text or mappings.

    Raises:
        InputError: ``WHERE: FIELD: why`` for JSON that does not parse or a record that is not a task.
    """
    record = dict(row)
    for name in JSON_COLUMNS:
        value = record.get(name)
        if isinstance(value, str):
            try:
                record[name] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: {name}: not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise InputError(f"{where}: {name}: JSON nested too deeply") from None
    try:
        return Task.from_dict(record)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def split_file(folder: Path, split: str) -> Path | None:
    """The file of ``split`` in a dataset folder (``.jsonl`` or ``.parquet``), or None.

    Raises:
        InputError: if the folder holds the split in both formats.
    """
    found = [folder / f"{split}.{fmt}" for fmt in FORMATS if (folder / f"{split}.{fmt}").is_file()]
    if len(found) > 1:
        raise InputError(f"{folder}: the {split} split is there twice ({found[0].name} and {found[1].name})")
    return found[0] if found else None


def _read_records(file: Path) -> list[Task]:
    """The tasks of one split file, each record converted (``FILE:N: ...`` on the first bad one)."""
    if file.suffix == ".parquet":
        table = read_parquet(file)
        missing = [name for name in COLUMNS if name not in table.column_names and name != "meta"]
        if missing:
            raise InputError(f"{file}: missing column(s) {', '.join(missing)} (a milepost task split has {COLUMNS})")
        return [row_task(row, f"{file}:{n}") for n, row in enumerate(table.to_pylist(), 1)]
    tasks = []
    for n, row in enumerate(read_jsonl(file), 1):
        try:
            tasks.append(Task.from_dict(row))
        except InputError as exc:
            raise InputError(f"{file}:{n}: {exc}") from None
    return tasks


def _task_ids(file: Path) -> Iterable[tuple[int, Any]]:
    """``(record number, task_id)`` of a sibling split file, read without checking its records."""
    if file.suffix == ".parquet":
        try:
            ids = read_parquet(file, columns=["task_id"]).column("task_id").to_pylist()
        except InputError:  # not parquet, or no task_id column: reading that split itself says so
            ids = []
        return enumerate(ids, 1)
    return ((n, row.get("task_id")) for n, row in enumerate(read_jsonl(file), 1))


def load_tasks(path: str | Path, split: str = "test") -> list[Task]:
    """The tasks of one split of a dataset folder (or of a ``.jsonl`` / ``.parquet`` file given directly), checked.

    Every record must match the Task contract and its environment (``milepost.envs.records``: payload,
    recomputed goal distance, level of the table); task ids must be unique in the file and across the
    folder's splits; a record's ``split`` must name its file; and the folder's ``manifest.json``, when there
    is one, must agree with the records (environment, board size, levels, counts).

    Raises:
        InputError: a missing folder or split, or the first bad record, as ``FILE:N: FIELD: why`` (N: the
            record's line in a JSONL file, its row in a parquet file, from 1).
    """
    source = Path(path)
    if not source.exists():
        raise InputError(f"{source}: no such dataset")
    if source.suffix in (".jsonl", ".parquet"):
        file: Path | None = source
    else:
        file = split_file(source, split) if source.is_dir() else None
    if file is None or not file.is_file():
        raise InputError(f"{source}: no {split} split ({split}.jsonl or {split}.parquet missing)")
    tasks = _read_records(file)
    name = file.stem if file.stem in SPLITS else None
    others: dict[str, str] = {}
    if name is not None:
        for other in SPLITS:
            sibling = split_file(file.parent, other) if other != name else None
            if sibling is not None:
                for n, task_id in _task_ids(sibling):
                    if isinstance(task_id, str):
                        others.setdefault(task_id, f"{sibling}:{n}")
    manifest_file = file.parent / "manifest.json"
    manifest = load_manifest(file.parent) if manifest_file.exists() else None
    unit = "line" if file.suffix == ".jsonl" else "row"
    check_split(tasks, str(file), name, others, manifest, str(manifest_file), unit)
    return tasks


def check_split(
    tasks: Sequence[Task],
    label: str,
    split: str | None,
    others: Mapping[str, str],
    manifest: Mapping[str, Any] | None,
    manifest_label: str,
    unit: str = "line",
) -> None:
    """The checks of ``load_tasks`` on one split's tasks, wherever they came from.

    Args:
        tasks: the split's tasks, in order; record ``i`` is reported as ``{label}:{i + 1}``.
        label: the split's file (or another name for it).
        split: the split's name (each record's ``split`` must be it or empty), None for an ad-hoc file.
        others: task ids of the other splits, each with where it is.
        manifest: the dataset's manifest, None when it has none.
        manifest_label: where the manifest is, for messages.
        unit: what a record number counts in messages ("line", "row").

    Raises:
        InputError: ``LABEL:N: FIELD: why`` for the first problem.
    """

    def at(i: int) -> str:
        return f"{label}:{i + 1}"

    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.task_id in seen:
            raise InputError(f"{at(i)}: task_id: {task.task_id!r} is also on {unit} {seen[task.task_id] + 1}")
        seen[task.task_id] = i
        if split is not None and task.split not in ("", split):
            raise InputError(f"{at(i)}: split: {task.split!r} in the {split} file")
        if task.task_id in others:
            raise InputError(f"{at(i)}: task_id: {task.task_id!r} is also in {others[task.task_id]}")
    if manifest is not None:
        _check_manifest(manifest_label, manifest, label, at, split, tasks)
    problem = first_problem(tasks)
    if problem is not None:
        raise InputError(f"{at(problem.index)}: {problem.field}: {problem.message}")


def _check_manifest(
    where: str,
    manifest: Mapping[str, Any],
    label: str,
    at: Callable[[int], str],
    split: str | None,
    tasks: Sequence[Task],
) -> None:
    """Records against the fields of ``manifest.json`` that it has (hand-made datasets may have fewer)."""
    levels = manifest.get("levels")
    for i, task in enumerate(tasks):
        for name in ("env", "size"):
            if name in manifest and getattr(task, name) != manifest[name]:
                value = getattr(task, name)
                raise InputError(f"{at(i)}: {name}: {value!r}, but {where} says {manifest[name]!r}")
        if isinstance(levels, dict) and task.level not in levels:
            known = ", ".join(map(str, levels))
            raise InputError(f"{at(i)}: level: {task.level!r} is not among {where}'s levels ({known})")
    counts = manifest.get("counts")
    expected = counts.get(split) if split is not None and isinstance(counts, dict) else None
    if isinstance(expected, int) and expected != len(tasks):
        raise InputError(f"{label}: {len(tasks)} tasks, but {where} counts {expected} in {split}")


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


def load(path: str | Path) -> LevelDataset:
    """Every split of a dataset folder (JSONL or parquet), checked as ``load_tasks`` checks one, and its manifest.

    Raises:
        InputError: a path that is not a folder, a folder with neither split, or the first bad record.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such dataset folder" if not folder.exists() else f"{folder}: not a folder")
    files = {split: file for split in SPLITS if (file := split_file(folder, split)) is not None}
    if not files:
        raise InputError(f"{folder}: no train or test split (train.jsonl / test.jsonl or .parquet)")
    splits = {split: load_tasks(folder, split) for split in files}
    manifest = load_manifest(folder) if (folder / "manifest.json").exists() else {}
    return LevelDataset(splits, manifest, files)


def _hf() -> Any:
    try:
        import datasets
    except ImportError:
        raise InputError(f"Hugging Face datasets are not installed ({HINT})") from None
    return datasets


def hf_features() -> Any:
    """The ``datasets.Features`` of a task split (the parquet layout: payload and meta as JSON text)."""
    datasets = _hf()
    kinds = {"size": "int64", "goal_distance": "int64", "seed": "int64", "index": "int64"}
    return datasets.Features({name: datasets.Value(kinds.get(name, "string")) for name in COLUMNS})


def to_hf(path: str | Path) -> Any:
    """A dataset folder as a ``datasets.DatasetDict`` (one ``Dataset`` per split it has), checked on the way.

    Rows follow the parquet layout (``payload`` and ``meta`` as JSON text: ``json.loads`` gives the dicts back).
    Each split's ``info.description`` holds the manifest as JSON, so it survives ``save_to_disk`` /
    ``load_from_disk``; ``from_hf`` reads it back.
    """
    datasets = _hf()
    data = load(path)
    features = hf_features()
    description = json.dumps(data.manifest)
    return datasets.DatasetDict(
        {
            split: datasets.Dataset.from_list(
                [task_row(t) for t in tasks],
                features=features,
                info=datasets.DatasetInfo(description=description, features=features),
                split=datasets.NamedSplit(split),
            )
            for split, tasks in data.splits.items()
        }
    )


def from_hf(
    data: Mapping[str, Any],
    out: str | Path,
    *,
    format: str = "parquet",
    manifest: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a dataset folder from Hugging Face splits (a ``DatasetDict``, or any mapping of split name to rows).

    Rows are task records (``payload`` / ``meta`` as JSON text or as mappings); they are checked as
    ``load_tasks`` checks a file before anything is written. The manifest is ``manifest``, else the JSON object
    in the splits' ``info.description`` (as ``to_hf`` stores it), else one derived from the records
    (environment, board size, counts per split and level).

    Raises:
        InputError: a split other than train / test, a bad record (``SPLIT:N: FIELD: why``).
    """
    unknown = sorted(set(data) - set(SPLITS))
    if unknown:
        raise InputError(f"split(s) {', '.join(map(str, unknown))}: a milepost dataset has train and test only")
    splits: dict[str, list[Task]] = {}
    for split in SPLITS:
        if split in data:
            rows = data[split].to_list() if hasattr(data[split], "to_list") else list(data[split])
            splits[split] = [row_task(row, f"{split}:{n}") for n, row in enumerate(rows, 1)]
    if manifest is None:
        manifest = _described_manifest(data) or derived_manifest(splits)
    for split, tasks in splits.items():
        others = {t.task_id: f"{o}:{n}" for o in splits if o != split for n, t in enumerate(splits[o], 1)}
        check_split(tasks, split, split, others, manifest, "the manifest", "row")
    return write_dataset(out, splits, manifest, overwrite=overwrite, format=format)


def _described_manifest(data: Mapping[str, Any]) -> dict[str, Any] | None:
    for split in data.values():
        text = getattr(getattr(split, "info", None), "description", "") or ""
        try:
            manifest = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(manifest, dict) and manifest:
            return manifest
    return None


def derived_manifest(splits: Mapping[str, Sequence[Task]]) -> dict[str, Any]:
    """A manifest from the records alone (for data that came without one): environment, size, counts."""
    tasks = [t for part in splits.values() for t in part]
    manifest: dict[str, Any] = {"source": "records (no manifest came with the data)"}
    for name in ("env", "size"):
        values = {getattr(t, name) for t in tasks}
        if len(values) == 1:
            manifest[name] = values.pop()
    levels: dict[str, Any] = {}
    for split, part in splits.items():
        for t in part:
            counts = levels.setdefault(t.level, {"counts": dict.fromkeys(splits, 0)})["counts"]
            counts[split] += 1
    manifest["levels"] = levels
    manifest["counts"] = {split: len(part) for split, part in splits.items()}
    return manifest
