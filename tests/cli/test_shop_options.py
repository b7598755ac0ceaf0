"""`milepost shop --profile / --difficulty`: the CLI's literal lists match the web shop's, and both options reach
the served shop."""

from __future__ import annotations

import argparse

import pytest
from fastapi.testclient import TestClient

from milepost.cli import shop as shop_cli
from milepost.envs.webshop import WebShopEnv
from milepost.envs.webshop.catalogue import DIFFICULTIES
from milepost.envs.webshop.html import create_app
from milepost.envs.webshop.profile import DEFAULT_PROFILE, PROFILES
from milepost.errors import InputError


def test_the_cli_lists_are_the_web_shops() -> None:
    assert shop_cli.DIFFICULTIES == DIFFICULTIES
    assert set(shop_cli.PROFILES) == set(PROFILES)
    assert shop_cli.DEFAULT_PROFILE == DEFAULT_PROFILE


def _args(**over: object) -> argparse.Namespace:
    base = {"data": None, "items": 1, "level": None, "seed": 3, "difficulty": "easy"}
    base.update(over)
    return argparse.Namespace(**base)


def test_a_generated_task_has_the_asked_difficulty() -> None:
    easy = shop_cli.pick_task(_args())
    hard = shop_cli.pick_task(_args(difficulty="hard"))
    assert "difficulty" not in easy.payload
    assert hard.payload["difficulty"] == "hard"
    # the env's own sampled tasks follow it too, and a wrong name is one line
    assert WebShopEnv(difficulty="medium").sample_task(0).payload["difficulty"] == "medium"
    with pytest.raises(InputError, match="difficulty must be one of easy, medium, hard"):
        WebShopEnv(difficulty="brutal")


def test_the_served_shop_plays_by_its_profile() -> None:
    task = shop_cli.pick_task(_args())
    # the milepost profile rejects a click on a button the page lacks (a penalty); webshop's is a silent no-op
    seen = {}
    for profile in ("milepost", "webshop"):
        client = TestClient(create_app(task, profile=profile))
        client.get("/")
        client.post("/act", data={"action": "click[bogus-button]"})
        seen[profile] = client.get("/state.json").json()
    assert seen["milepost"]["total_reward"] == pytest.approx(-0.1)
    assert "not clickable" in seen["milepost"]["events"][0]["error"]
    assert seen["webshop"]["total_reward"] == 0.0
    assert seen["webshop"]["events"][0]["error"] is None
    assert seen["webshop"]["events"][0]["applied"] == ["click[bogus-button] (no-op)"]
    with pytest.raises(InputError):
        create_app(task, profile="amazon")
