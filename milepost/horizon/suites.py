"""The fixed, versioned task suites that ``milepost horizon`` plays: ``tiny`` and ``standard``.

A suite is a list of parts; each part is one environment at one size, a set of levels, a number of test tasks per
level, the generator seed, the turn budget H_max and the samples per task. The tasks come from the same
generators as ``milepost data`` (``envs/*/dataset.py``, which ``cli/data_*.py`` call), with a fixed seed, and
every build is checked against the content hash pinned here: when a generator changes what it makes, the build
stops and asks for a new suite version instead of silently measuring on other tasks. Reports carry the suite's
name, version and hash, so two reports are comparable exactly when these agree.

Tasks whose optimal solution does not fit the budget (the oracle's ceiling: ``optimal_turns > H_max``) are
generated and hashed but not played; the manifest lists and counts them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from milepost.datasets import load_tasks, write_dataset
from milepost.envs.actions import ActionMode
from milepost.envs.levels import parse_levels
from milepost.errors import InputError
from milepost.io import atomic_write_json
from milepost.types import Task

MANIFEST = "manifest.json"
TASKS = "tasks.json"
"""every generated task of every part, in generation order: what the content hash covers"""


@dataclass(frozen=True)
class SuitePart:
    """One environment's share of a suite."""

    name: str
    """folder and label of the part, e.g. ``sudoku4``"""
    env: str
    size: int
    """board side (Sudoku), 6 (Rush Hour), items per order (web shop)"""
    levels: str
    per_level: int
    """test tasks per level"""
    seed: int
    max_steps: int
    """H_max: the turn budget, atomic actions"""
    n: int
    """samples per task"""
    generator: dict[str, Any] = field(default_factory=dict)
    """extra generator arguments (web shop: catalogue_seed, catalogue_size; Rush Hour: max_walls)"""


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    parts: tuple[SuitePart, ...]
    content_hash: str
    """sha256 of the generated tasks and the parts' settings (``suite_hash``), pinned at release"""
    description: str = ""


_SHOP = {"catalogue_seed": 0, "catalogue_size": 1000}

SUITES: dict[str, Suite] = {
    "tiny": Suite(
        "tiny",
        1,
        (
            SuitePart("sudoku4", "sudoku", 4, "S1-S5", 6, 0, 16, 4),
            SuitePart("rushhour-short", "rushhour", 6, "1-3,4-6", 4, 0, 30, 4),
        ),
        content_hash="884d96e5403bc23b7f56ecb5896c8c3f9dde5c70241285a9bbbd93467c8d4ad1",
        description="4x4 Sudoku (3-12 empty cells, H_max 16) and short Rush Hour (1-6 moves, H_max 30): "
        "minutes on a CPU with a 1M-parameter model",
    ),
    "standard": Suite(
        "standard",
        1,
        (
            SuitePart("sudoku9", "sudoku", 9, "L1-L7", 8, 0, 50, 4),
            SuitePart("rushhour", "rushhour", 6, "4-6,7-9,10-12,13-15,16-18,19-21", 6, 0, 30, 4),
            SuitePart("webshop1", "webshop", 1, "3-5", 8, 0, 15, 4, _SHOP),
            SuitePart("webshop2", "webshop", 2, "6-8,9-11", 6, 0, 30, 4, _SHOP),
            SuitePart("webshop3", "webshop", 3, "9-11,12-14,15-17", 4, 0, 45, 4, _SHOP),
        ),
        content_hash="8ee9b824a19a6e55ff025aaffb55dd6d6fe7da8739f89d389899a5aa9e1fd530",
        description="Sudoku 9x9 L1-L7 (H_max 50), Rush Hour 4-6 .. 19-21 moves (atomic, H_max 30), web-shop "
        "orders of 1-3 items (H_max 15 per item)",
    ),
}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise InputError(f"unknown suite {name!r} (known: {', '.join(SUITES)})") from None


def generate_part(part: SuitePart) -> list[Task]:
    """The part's test tasks, from the dataset generators ``milepost data`` uses."""
    levels = parse_levels(part.levels, part.env, part.size)
    if part.env == "sudoku":
        from milepost.envs.sudoku import dataset as sudoku

        splits, _ = sudoku.build_dataset(part.size, levels, 0, part.per_level, part.seed, progress=False)
    elif part.env == "rushhour":
        from milepost.envs.rushhour.dataset import build_dataset as rush

        splits, _ = rush(levels, 0, part.per_level, part.seed, max_walls=int(part.generator.get("max_walls", 0)))
    elif part.env == "webshop":
        from milepost.envs.webshop.dataset import build_dataset as shop

        splits, _ = shop(
            levels,
            part.size,
            0,
            part.per_level,
            part.seed,
            catalogue_seed=int(part.generator["catalogue_seed"]),
            catalogue_size=int(part.generator["catalogue_size"]),
        )
    else:
        raise InputError(f"suite part {part.name}: unknown environment {part.env!r}")
    return splits["test"]


def fits_budget(task: Task, max_steps: int) -> bool:
    """Whether the oracle can finish ``task`` in ``max_steps`` atomic turns."""
    from milepost.backends.scripted import MOVES

    return int(MOVES.get(task.env).optimal_turns(task, ActionMode("atomic"))) <= max_steps


def suite_hash(suite: Suite, tasks: dict[str, list[Task]]) -> str:
    """sha256 over the suite's name, version, parts (budgets, samples, generator settings) and every task record."""
    body = {
        "name": suite.name,
        "version": suite.version,
        "parts": [asdict(p) for p in suite.parts],
        "tasks": {name: [t.to_dict() for t in part] for name, part in tasks.items()},
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_suite(suite: Suite, root: str | Path, *, check_hash: bool = True) -> dict[str, Any]:
    """Generate (or reuse) the suite under ``root``: one dataset folder per part holding the tasks the oracle can
    finish within the budget, ``root/tasks.json`` with every generated task, and ``root/manifest.json``.
    Returns the manifest.

    A cached suite is re-hashed at every call, never trusted by its manifest: ``tasks.json`` must hash to the
    pinned hash (or, for an unpinned suite, to the one it was built with), each part's ``test.jsonl`` must hold
    exactly the generated tasks that fit the budget, and the manifest is rewritten from those tasks.

    Raises:
        InputError: the generated tasks do not hash to the pinned ``content_hash`` (the generators changed:
            the suite needs a new version), ``root`` holds another suite, or the cached files were edited.
    """
    root = Path(root)
    manifest_file = root / MANIFEST
    if manifest_file.exists() and (root / TASKS).exists():
        return _verify_cached(suite, root, check_hash)
    tasks = {part.name: generate_part(part) for part in suite.parts}
    digest = suite_hash(suite, tasks)
    if check_hash and suite.content_hash and digest != suite.content_hash:
        raise InputError(
            f"suite {suite.name} v{suite.version}: the generated tasks hash to {digest[:12]}, not the pinned "
            f"{suite.content_hash[:12]}: the generators changed, so this is no longer the same suite (give it a "
            "new version and hash)"
        )
    for part in suite.parts:
        kept = [t for t in tasks[part.name] if fits_budget(t, part.max_steps)]
        data_manifest = {
            "env": part.env,
            "size": part.size,
            "suite": f"{suite.name} v{suite.version}",
            "levels": {lv: {} for lv in sorted({t.level for t in kept})},
            "counts": {"test": len(kept)},
        }
        if kept:
            write_dataset(root / part.name, {"test": kept}, data_manifest, overwrite=True)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(root / TASKS, {name: [t.to_dict() for t in part] for name, part in tasks.items()})
    manifest = _manifest(suite, tasks, digest)
    atomic_write_json(manifest_file, manifest)
    return manifest


def _verify_cached(suite: Suite, root: Path, check_hash: bool) -> dict[str, Any]:
    """Re-hash a cached suite's files and rebuild its manifest from them (see ``build_suite``)."""
    old: dict[str, Any] = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    if (old.get("name"), old.get("version")) != (suite.name, suite.version):
        raise InputError(f"{root} holds suite {old.get('name')} v{old.get('version')}, not {suite.name}")

    def edited(what: str) -> InputError:
        return InputError(
            f"{root}: {what}, so these are not the tasks of {suite.name} v{suite.version}; delete {root} (and the "
            "runs played on it) to rebuild the suite"
        )

    try:
        raw = json.loads((root / TASKS).read_text(encoding="utf-8"))
        tasks = {part.name: [Task.from_dict(r) for r in raw[part.name]] for part in suite.parts}
    except (ValueError, KeyError, TypeError) as exc:
        raise edited(f"{TASKS} is unreadable ({type(exc).__name__}: {exc})") from None
    digest = suite_hash(suite, tasks)
    expected = suite.content_hash if check_hash and suite.content_hash else old.get("hash")
    if digest != expected:
        raise edited(f"{TASKS} hashes to {digest[:12]}, not {str(expected)[:12]}")
    for part in suite.parts:
        kept = [t.to_dict() for t in tasks[part.name] if fits_budget(t, part.max_steps)]
        try:
            played = [t.to_dict() for t in part_tasks(root, part)]
        except InputError as exc:
            raise edited(f"{part.name}/test.jsonl does not load ({exc})") from None
        if played != kept:
            raise edited(f"{part.name}/test.jsonl holds {len(played)} tasks that are not the suite's {len(kept)}")
    manifest = _manifest(suite, tasks, digest)
    if manifest != old:
        atomic_write_json(root / MANIFEST, manifest)
    return manifest


def _manifest(suite: Suite, tasks: dict[str, list[Task]], digest: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in suite.parts:
        kept = [t for t in tasks[part.name] if fits_budget(t, part.max_steps)]
        left = [t for t in tasks[part.name] if not fits_budget(t, part.max_steps)]
        parts.append(
            {
                **asdict(part),
                "tasks": len(tasks[part.name]),
                "played": len(kept),
                "left_out": [{"task_id": t.task_id, "goal_distance": t.goal_distance} for t in left],
                "distances": sorted({t.goal_distance for t in kept}),
            }
        )
    return {
        "name": suite.name,
        "version": suite.version,
        "hash": digest,
        "pinned": suite.content_hash == digest,
        "description": suite.description,
        "parts": parts,
        "tasks": sum(p["tasks"] for p in parts),
        "played": sum(p["played"] for p in parts),
        "left_out": sum(len(p["left_out"]) for p in parts),
    }


def part_tasks(root: str | Path, part: SuitePart) -> list[Task]:
    folder = Path(root) / part.name
    return load_tasks(folder, "test") if (folder / "test.jsonl").exists() else []
