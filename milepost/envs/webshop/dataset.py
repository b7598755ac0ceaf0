"""Web-shop level datasets: orders of k items binned by goal distance, with disjoint train / test products.

Split rule: the catalogue's products are divided once (a seeded shuffle; a fifth go to test) and each split
draws its targets only from its own part, so no test task shares a target product with a training task. Task
``index`` of a split is fixed by (seed, index): training tasks use even indices, test tasks odd ones. An order
whose set of targets already appeared is skipped. ``difficulty`` (easy | medium | hard) picks the catalogue and the
wording of the instructions (``tasks``). ``build_original_dataset`` makes one-item tasks from WebShop's own data.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from milepost.envs.levels import LEVELS, Level
from milepost.envs.webshop.catalogue import CATALOGUE_VERSION, DIFFICULTIES
from milepost.envs.webshop.goal import Shop
from milepost.envs.webshop.original import Loaded
from milepost.envs.webshop.sources import generated_shop
from milepost.envs.webshop.tasks import GENERATOR_VERSION, generate_task, make_task
from milepost.errors import InputError
from milepost.types import Task

TEST_SHARE = 0.2
# Draws per requested task before a level is declared out of reach.
_DRAWS_PER_TASK = 400


def product_pools(size: int, seed: int) -> dict[str, list[int]]:
    """The catalogue's product indices divided into the train and test pools."""
    order = list(range(size))
    random.Random(f"webshop-split:{seed}").shuffle(order)
    cut = max(1, int(size * TEST_SHARE))
    return {"test": sorted(order[:cut]), "train": sorted(order[cut:])}


def build_dataset(
    levels: Sequence[Level],
    k: int,
    n_train: int,
    n_test: int,
    seed: int,
    *,
    catalogue_seed: int,
    catalogue_size: int,
    command: str = "",
    difficulty: str = "easy",
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """Tasks per split for each level, and the manifest (DESIGN: Contracts).

    Raises:
        InputError: negative counts, or a level whose goal distances the draws do not reach.
    """
    if n_train < 0 or n_test < 0 or n_train + n_test == 0:
        raise InputError(f"--train/--test must be >= 0 and not both 0 (got {n_train}, {n_test})")
    if difficulty not in DIFFICULTIES:
        raise InputError(f"--difficulty must be one of {', '.join(DIFFICULTIES)}, not {difficulty!r}")
    generated_shop(catalogue_seed, catalogue_size, difficulty)  # builds (and checks the size of) the catalogue
    pools = product_pools(catalogue_size, seed)
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    per_level: dict[str, dict[str, Any]] = {lv.name: {"goal_distance": [lv.lo, lv.hi], "counts": {}} for lv in levels}
    seen: set[tuple[str, ...]] = set()
    for parity, (split, wanted) in enumerate((("train", n_train), ("test", n_test))):
        bins: dict[str, list[Task]] = {lv.name: [] for lv in levels}
        budget = _DRAWS_PER_TASK * wanted * len(levels)
        draw = 0
        while any(len(b) < wanted for b in bins.values()):
            if draw >= budget:
                short = [name for name, b in bins.items() if len(b) < wanted]
                raise InputError(
                    f"webshop: levels {', '.join(short)} not reached for {k}-item orders in {budget} draws "
                    f"({split}); pick levels nearer {3 * k}-{7 * k} or a larger catalogue"
                )
            index = 2 * draw + parity
            draw += 1
            task = generate_task(
                seed,
                index,
                k,
                catalogue_seed=catalogue_seed,
                catalogue_size=catalogue_size,
                pool=pools[split],
                difficulty=difficulty,
            )
            if task is None:
                continue
            level = next((lv for lv in levels if lv.contains(task.goal_distance)), None)
            ids = tuple(sorted(item["product_id"] for item in task.payload["items"]))
            if level is None or len(bins[level.name]) >= wanted or ids in seen:
                continue
            seen.add(ids)
            task.level, task.split = level.name, split
            tag = "" if difficulty == "easy" else f"{difficulty}-"
            task.task_id = f"webshop-{tag}{split}-{level.name}-{seed}-{index}"
            task.meta["pool"] = split
            bins[level.name].append(task)
        for name, tasks in bins.items():
            splits[split].extend(tasks)
            per_level[name]["counts"][split] = len(tasks)
    manifest: dict[str, Any] = {
        "env": "webshop",
        "size": k,
        "command": command,
        "seed": seed,
        "catalogue": {"seed": catalogue_seed, "size": catalogue_size, "version": CATALOGUE_VERSION},
        "difficulty": difficulty,
        "generator": GENERATOR_VERSION,
        "level_measure": "goal_distance (search[...] / click[...] actions to a successful purchase)",
        "goal_distance": "shortest number of actions, searches from the canonical query set",
        "split_rule": f"targets from disjoint product pools (test share {TEST_SHARE}); no order twice",
        "levels": per_level,
        "counts": {split: len(tasks) for split, tasks in splits.items()},
    }
    return splits, manifest


def build_original_dataset(
    loaded: Loaded, seed: int, catalogue_file: str, *, command: str = "", source: str = ""
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """One-item tasks from WebShop's data (``original.load_webshop``), split by product: a seeded fifth of the
    ASINs (at least one when there are two) go to test, so no test task shares a target with a training task.
    Each task's level is the row of the goal-distance table that holds its distance; its payload names
    ``catalogue_file`` (the converted catalogue written beside the splits)."""
    if not loaded.goals:
        reasons = "; ".join(f"{why}: {n}" for why, n in loaded.skipped.most_common()) or "no instructions"
        raise InputError(f"--from-webshop: no instruction could be scored exactly ({reasons})")
    asins = sorted({req.product_id for req, _ in loaded.goals})
    random.Random(f"webshop-split:{seed}").shuffle(asins)
    cut = max(1, int(len(asins) * TEST_SHARE)) if len(asins) > 1 else 0
    test_ids = set(asins[:cut])
    shop = Shop(loaded.catalogue)
    table = LEVELS[("webshop", 1)]
    splits: dict[str, list[Task]] = {"train": [], "test": []}
    for n, (req, key) in enumerate(loaded.goals):
        split = "test" if req.product_id in test_ids else "train"
        task = make_task(
            [req], catalogue_seed=0, catalogue_size=len(loaded.catalogue), split=split, seed=seed, index=n,
            shop=shop, payload={"catalogue_file": catalogue_file, "source": "webshop"},
            meta={"webshop_goal": key},
        )  # fmt: skip
        level = next((lv for lv in table if lv.contains(task.goal_distance)), None)
        if level is None:
            loaded.skipped["goal distance outside the level table"] += 1
            continue
        task.level = level.name
        task.task_id = f"webshop-orig-{split}-{level.name}-{key.replace(':', '-')}"
        splits[split].append(task)
    levels: dict[str, dict[str, Any]] = {}
    for split, tasks in splits.items():
        for task in tasks:
            info = levels.setdefault(task.level, {"counts": {"train": 0, "test": 0}})
            info["counts"][split] += 1
    manifest: dict[str, Any] = {
        "env": "webshop",
        "size": 1,
        "command": command,
        "seed": seed,
        "source": {"webshop_dir": source, **loaded.files, "products": len(loaded.catalogue)},
        "catalogue": {"file": catalogue_file, "size": len(loaded.catalogue)},
        "generator": GENERATOR_VERSION,
        "level_measure": "goal_distance (search[...] / click[...] actions to a successful purchase)",
        "goal_distance": "shortest number of actions; searches from the canonical query, the instruction's "
        "attributes joined by spaces",
        "split_rule": f"targets from disjoint ASINs (test share {TEST_SHARE})",
        "instructions": {
            "read": len(loaded.goals) + sum(loaded.skipped.values()),
            "tasks": len(loaded.goals),
            "skipped": dict(loaded.skipped.most_common()),
        },
        "levels": dict(sorted(levels.items(), key=lambda kv: int(kv[0].split("-")[0]))),
        "counts": {split: len(tasks) for split, tasks in splits.items()},
    }
    return splits, manifest
