"""The check of a web-shop ``Task`` record (DESIGN: Contracts), for ``milepost.envs.records``.

A record is trusted only after its facts are recomputed from the payload: the catalogue (seed, size) holds
every target product, each item's requirement is met by its target and by no other product, its category is the
target's, the canonical query finds the target, the goal distance is the closed form's, and the level of the
table holds it.
"""

from __future__ import annotations

from milepost.envs.levels import LEVELS
from milepost.envs.webshop.distance import INF, DistanceModel
from milepost.envs.webshop.goal import matching
from milepost.envs.webshop.rules import order_of
from milepost.errors import InputError
from milepost.types import Task


def check_record(task: Task) -> tuple[str, str] | None:
    """``(field, why)`` for the first problem of a web-shop record, or None when it checks out."""
    table = LEVELS.get(("webshop", task.size))
    if table is None:
        sizes = ", ".join(str(s) for e, s in LEVELS if e == "webshop")
        return "size", f"webshop orders hold {sizes} items, not {task.size}"
    try:
        order = order_of(task)
    except InputError as exc:
        return "payload", str(exc).removeprefix(f"task {task.task_id}: ")
    if len(order.items) != task.size:
        return "size", f"{task.size}, but the payload lists {len(order.items)} items"
    catalogue = order.shop.catalogue
    for n, (req, target) in enumerate(zip(order.items, order.targets), 1):
        if matching(catalogue, req, limit=2) != [target]:
            return "payload", f"item {n}: {req.product_id} is not the one product meeting the requirement"
        # The category earns half credit for a product of another type (Requirement.score): a wrong one
        # changes the reward, so it must be the target's.
        if req.category != catalogue.products[target].category:
            actual = catalogue.products[target].category
            return "payload", f"item {n}: category {req.category!r}, but {req.product_id} is in {actual!r}"
    model = DistanceModel(order)
    if any(p >= INF for p in model.best_page):
        return "payload", "a target is not among the results of any canonical query"
    distance = model.goal_distance()
    if task.goal_distance != distance:
        return "goal_distance", f"{task.goal_distance}, but the shortest purchase takes {distance} actions"
    level = next((lv for lv in table if lv.name == task.level), None)
    if level is None:
        return "level", f"{task.level!r} is not a webshop level"
    if not level.contains(distance):
        return "level", f"{level.name} holds goal distances {level.lo}-{level.hi}, not {distance}"
    return None
