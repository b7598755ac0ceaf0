"""Which shop a task's payload names: a generated catalogue (seed, size, difficulty) or WebShop's data loaded from
files (``catalogue_file``, written by ``milepost data webshop --from-webshop``)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from milepost.envs.webshop.catalogue import DIFFICULTIES, get_catalogue
from milepost.envs.webshop.goal import Shop, get_shop
from milepost.errors import InputError


@functools.lru_cache(maxsize=4)
def generated_shop(seed: int, size: int, difficulty: str = "easy") -> Shop:
    """The shop of a generated catalogue, cached (easy shares ``goal.get_shop``'s cache)."""
    if difficulty == "easy":
        return get_shop(seed, size)
    return Shop(get_catalogue(seed, size, difficulty))


@functools.lru_cache(maxsize=2)
def _file_shop(path: str, mtime_ns: int) -> Shop:
    from milepost.envs.webshop.original import read_catalogue

    return Shop(read_catalogue(Path(path)))


def file_shop(path: str | Path) -> Shop:
    """The shop of a converted WebShop catalogue file, cached while the file is unchanged."""
    p = Path(path)
    try:
        stamp = p.stat().st_mtime_ns
    except OSError:
        raise InputError(f"webshop: catalogue file {p} not found (was the dataset folder moved?)") from None
    return _file_shop(str(p.resolve()), stamp)


def shop_for(payload: dict[str, Any]) -> Shop:
    """The shop a web-shop payload names.

    Raises:
        InputError: missing or mistyped catalogue fields, an unknown difficulty, or a missing catalogue file.
    """
    if "catalogue_file" in payload:
        return file_shop(str(payload["catalogue_file"]))
    try:
        seed, size = int(payload["catalogue_seed"]), int(payload["catalogue_size"])
    except (KeyError, TypeError, ValueError):
        raise InputError("webshop payload needs catalogue_seed and catalogue_size (or catalogue_file)") from None
    difficulty = payload.get("difficulty", "easy")
    if difficulty not in DIFFICULTIES:
        raise InputError(f"webshop payload: difficulty must be one of {', '.join(DIFFICULTIES)}, not {difficulty!r}")
    return generated_shop(seed, size, difficulty)
