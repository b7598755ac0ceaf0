"""Web-shop level datasets: orders of k items binned by goal distance, with disjoint train / test products.

Split rule: the catalogue's products are divided once (a seeded shuffle; a fifth go to test) and each split
draws its targets only from its own part, so no test task shares a target product with a training task. Task
``index`` of a split is fixed by (seed, index): training tasks use even indices, test tasks odd ones. An order
whose set of targets already appeared is skipped.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from milepost.envs.levels import Level
from milepost.envs.webshop.catalogue import CATALOGUE_VERSION
from milepost.envs.webshop.goal import get_shop
from milepost.envs.webshop.tasks import GENERATOR_VERSION, generate_task
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
) -> tuple[dict[str, list[Task]], dict[str, Any]]:
    """Tasks per split for each level, and the manifest (DESIGN: Contracts).

    Raises:
        InputError: negative counts, or a level whose goal distances the draws do not reach.
    """
    if n_train < 0 or n_test < 0 or n_train + n_test == 0:
        raise InputError(f"--train/--test must be >= 0 and not both 0 (got {n_train}, {n_test})")
    get_shop(catalogue_seed, catalogue_size)  # builds (and checks the size of) the catalogue once
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
                seed, index, k, catalogue_seed=catalogue_seed, catalogue_size=catalogue_size, pool=pools[split]
            )
            if task is None:
                continue
            level = next((lv for lv in levels if lv.contains(task.goal_distance)), None)
            ids = tuple(sorted(item["product_id"] for item in task.payload["items"]))
            if level is None or len(bins[level.name]) >= wanted or ids in seen:
                continue
            seen.add(ids)
            task.level, task.split = level.name, split
            task.task_id = f"webshop-{split}-{level.name}-{seed}-{index}"
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
        "generator": GENERATOR_VERSION,
        "level_measure": "goal_distance (search[...] / click[...] actions to a successful purchase)",
        "goal_distance": "shortest number of actions, searches from the canonical query set",
        "split_rule": f"targets from disjoint product pools (test share {TEST_SHARE}); no order twice",
        "levels": per_level,
        "counts": {split: len(tasks) for split, tasks in splits.items()},
    }
    return splits, manifest
