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
    finish within the budget, and ``root/manifest.json``. Returns the manifest.

    Raises:
        InputError: the generated tasks do not hash to the pinned ``content_hash`` (the generators changed:
            the suite needs a new version), or ``root`` holds another suite.
    """
    root = Path(root)
    manifest_file = root / MANIFEST
    if manifest_file.exists():
        manifest: dict[str, Any] = json.loads(manifest_file.read_text(encoding="utf-8"))
        if (manifest.get("name"), manifest.get("version")) != (suite.name, suite.version):
            raise InputError(f"{root} holds suite {manifest.get('name')} v{manifest.get('version')}, not {suite.name}")
        if all((root / p.name / "test.jsonl").exists() for p in suite.parts) and (
            not check_hash or not suite.content_hash or manifest.get("hash") == suite.content_hash
        ):
            return manifest
    tasks = {part.name: generate_part(part) for part in suite.parts}
    digest = suite_hash(suite, tasks)
    if check_hash and suite.content_hash and digest != suite.content_hash:
        raise InputError(
            f"suite {suite.name} v{suite.version}: the generated tasks hash to {digest[:12]}, not the pinned "
            f"{suite.content_hash[:12]}: the generators changed, so this is no longer the same suite (give it a "
            "new version and hash)"
        )
    parts: list[dict[str, Any]] = []
    for part in suite.parts:
        kept = [t for t in tasks[part.name] if fits_budget(t, part.max_steps)]
        left = [t for t in tasks[part.name] if not fits_budget(t, part.max_steps)]
        levels = sorted({t.level for t in kept})
        data_manifest = {
            "env": part.env,
            "size": part.size,
            "suite": f"{suite.name} v{suite.version}",
            "levels": {lv: {} for lv in levels},
            "counts": {"test": len(kept)},
        }
        if kept:
            write_dataset(root / part.name, {"test": kept}, data_manifest, overwrite=True)
        parts.append(
            {
                **asdict(part),
                "tasks": len(tasks[part.name]),
                "played": len(kept),
                "left_out": [{"task_id": t.task_id, "goal_distance": t.goal_distance} for t in left],
                "distances": sorted({t.goal_distance for t in kept}),
            }
        )
    manifest = {
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
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(manifest_file, manifest)
    return manifest


def part_tasks(root: str | Path, part: SuitePart) -> list[Task]:
    folder = Path(root) / part.name
    return load_tasks(folder, "test") if (folder / "test.jsonl").exists() else []
