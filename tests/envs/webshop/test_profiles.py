"""Side by side: the ``milepost`` and ``webshop`` profiles stepped through the same episodes, asserting exactly
where their rules, rewards and observations differ."""

from __future__ import annotations

import gymnasium as gym
import pytest

import milepost  # noqa: F401 - registers milepost/WebShop-v0
from milepost.config import EnvConfig
from milepost.envs.webshop.env import WebShopEnv
from milepost.envs.webshop.moves import best_action
from milepost.envs.webshop.profile import UNBOUNDED_STEPS
from milepost.envs.webshop.render import original_text
from milepost.envs.webshop.state import Action
from milepost.errors import InputError
from milepost.types import Task
from tests.envs.webshop.conftest import tasks_of


@pytest.fixture(scope="module")
def task() -> Task:
    """A one-item task whose target has options."""
    return next(t for t in tasks_of(1, 30) if t.payload["items"][0]["options"])


def _pair(task: Task, **kwargs: object) -> tuple[WebShopEnv, WebShopEnv]:
    envs = (WebShopEnv(profile="milepost", **kwargs), WebShopEnv(profile="webshop", **kwargs))  # type: ignore[arg-type]
    for env in envs:
        env.reset(options={"task": task})
    return envs


def _both(envs: tuple[WebShopEnv, WebShopEnv], action: str) -> list[tuple[str, float, dict]]:
    out = []
    for env in envs:
        obs, reward, _, _, info = env.step(action)
        out.append((obs, reward, info))
    return out


def _open_target(envs: tuple[WebShopEnv, WebShopEnv], task: Task) -> None:
    item = task.payload["items"][0]
    _both(envs, f"search[{item['query']}]")
    for env in envs:
        while item["product_id"] not in env.state.clickables():
            env.step("click[Next >]")
        env.step(f"click[{item['product_id']}]")


def test_gymnasium_make_takes_the_profile_and_the_config_passes_it() -> None:
    env = gym.make("milepost/WebShop-v0", profile="webshop")
    assert env.unwrapped.profile == "webshop"  # type: ignore[attr-defined]
    assert EnvConfig(name="webshop", render="text", profile="webshop").env_kwargs()["profile"] == "webshop"
    assert "profile" not in EnvConfig(name="sudoku").env_kwargs()
    with pytest.raises(ValueError, match=r"env\.profile"):
        EnvConfig(name="sudoku", profile="webshop")
    with pytest.raises(InputError, match="unknown profile"):
        WebShopEnv(profile="amazon")


def test_budget_per_item_only_under_milepost() -> None:
    assert WebShopEnv(size=2).max_steps == 30
    assert WebShopEnv(size=2, profile="webshop").max_steps == UNBOUNDED_STEPS
    assert WebShopEnv(profile="webshop", max_steps=100).max_steps == 100


def test_search_from_a_product_page(task: Task) -> None:
    envs = _pair(task)
    _open_target(envs, task)
    before = [env.state.key() for env in envs]
    (m_obs, m_reward, m_info), (w_obs, w_reward, w_info) = _both(envs, "search[something else entirely]")
    # milepost: refused with the reason and the valid penalty; the page stays.
    assert m_info["reward_terms"]["valid"] == -1.0 and m_reward < 0
    assert "Last action rejected: search[...] works only on the search page" in m_obs
    assert envs[0].state.key() == before[0]
    # webshop: the search runs from the product page.
    assert w_reward == 0.0 and w_info["error"] is None
    assert envs[1].state.page == "results" and envs[1].state.query == "something else entirely"
    assert w_obs.startswith("Instruction: [SEP] ") and "Page 1 (Total results:" in w_obs


def test_invalid_action_is_a_silent_no_op_only_under_webshop(task: Task) -> None:
    envs = _pair(task)
    item = task.payload["items"][0]
    _both(envs, f"search[{item['query']}]")
    pages = [env.rules.render(None) for env in envs]  # type: ignore[union-attr]
    for bad in ("click[Checkout]", "click[B0NOTHERE]", "buy it now please"):
        (m_obs, m_reward, m_info), (w_obs, w_reward, w_info) = _both(envs, bad)
        assert m_reward < 0 and m_info["error"] and "Last action rejected" in m_obs, bad
        assert w_reward == 0.0 and w_info["error"] is None and w_obs == pages[1], bad
        assert envs[1].rules.noop_reason  # type: ignore[union-attr]
        assert w_info["remaining_distance"] == envs[1].rules.goal_distance - 1  # type: ignore[union-attr]


def test_pages_past_the_last_exist_only_under_webshop(task: Task) -> None:
    envs = _pair(task)
    _both(envs, f"search[{task.payload['items'][0]['query']}]")
    last = (len(envs[0].state.results) - 1) // 10
    for env in envs:
        for _ in range(last):
            env.step("click[Next >]")
    (m_obs, m_reward, _), (w_obs, w_reward, _) = _both(envs, "click[Next >]")
    assert m_reward < 0 and "is not clickable" in m_obs and envs[0].state.page_no == last
    assert w_reward == 0.0 and envs[1].state.page_no == last + 1 and envs[1].state.page_results() == ()
    assert w_obs.endswith(f"Page {last + 2} (Total results: {len(envs[1].state.results)}) [SEP] < Prev [SEP] Next >")
    # The distance counts the way back: one < Prev more than from the last page (or a fresh search, if shorter).
    past = envs[1].rules.remaining_distance()  # type: ignore[union-attr]
    *_, info = envs[1].step("click[< Prev]")
    assert envs[1].state.page_no == last and info["remaining_distance"] in (past - 1, past)  # type: ignore[operator]


def test_the_oracle_buys_under_both_and_both_pay_one(task: Task) -> None:
    envs = _pair(task)
    for env in envs:
        steps, reward, terminated = 0, 0.0, False
        while not terminated:
            action = best_action(env.rules)  # type: ignore[arg-type]
            assert action is not None
            _, reward, terminated, _, info = env.step(action.text())
            steps += 1
        assert info["solved"] and steps == task.goal_distance and reward == pytest.approx(1.0)


def test_search_from_anywhere_shortens_some_mid_episode_distances(task: Task) -> None:
    """On a wrong product's page milepost needs Back to Search before the search; webshop searches at once."""
    envs = _pair(task)
    order = envs[0].state.order
    wrong = next(i for i in order.shop.index.search(order.items[0].query) if i != order.targets[0])
    distances = []
    for env in envs:
        state = env.state.clone()
        state.apply(Action("search", order.items[0].query))
        state.results = tuple(i for i in state.results if i != order.targets[0])  # < Prev does not help
        state.page, state.product = "item", wrong
        state.selection = (None,) * len(state.open_product().options)
        distances.append(env.rules.model.remaining(state))  # type: ignore[union-attr]
    assert distances == [task.goal_distance + 1, task.goal_distance]


def test_a_wrong_purchase_is_credited_by_each_profile_s_formula(task: Task) -> None:
    """Buy the target without choosing its options: neither succeeds; milepost's exact-match score and WebShop's
    reward (type, attribute, option and price parts) are each that profile's outcome term."""
    envs = _pair(task)
    _open_target(envs, task)
    results = _both(envs, "click[Buy Now]")
    item = task.payload["items"][0]
    n = len(item["attributes"]) + len(item["options"]) + 1
    for env, (_, reward, info) in zip(envs, results):
        assert not info["solved"] and info["termination_reason"] == "dead_end"
        assert info["reward_terms"]["outcome"] == pytest.approx((n - len(item["options"])) / n)
        assert reward == pytest.approx(env.state.outcome())


def test_webshop_text_rich_marks_clicked_options_and_opened_products(task: Task) -> None:
    env = WebShopEnv(profile="webshop", render="text_rich")
    env.reset(options={"task": task})
    item = task.payload["items"][0]
    obs, *_ = env.step(f"search[{item['query']}]")
    assert obs.startswith("Instruction:\n") and "[button] Back to Search [button_]\n" in obs
    assert f"\n[button] {item['product_id']} [button_]\n" in obs
    while item["product_id"] not in env.state.clickables():
        env.step("click[Next >]")
    env.step(f"click[{item['product_id']}]")
    dim, value = next(iter(item["options"].items()))
    obs, *_ = env.step(f"click[{value}]")
    assert obs.startswith(f"You have clicked {value}.\nInstruction:\n")
    assert f"  [clicked button] {value} [clicked button_]\n" in obs and f"\n{dim}\n" in obs
    assert "[button] Buy Now [button_]" in obs and "Add to Cart" not in obs  # one item: WebShop has no cart
    obs, *_ = env.step("click[< Prev]")
    assert f"\n[clicked button] {item['product_id']} [clicked button_]\n" in obs
    assert obs == original_text(env.state, rich=True)


def test_webshop_text_is_webshop_s_simple_mode(task: Task) -> None:
    env = WebShopEnv(profile="webshop")
    obs, _ = env.reset(options={"task": task})
    assert obs == f"WebShop [SEP] Instruction: [SEP] {task.payload['instruction']} [SEP] Search"
    milepost_obs, _ = WebShopEnv().reset(options={"task": task})
    assert milepost_obs != obs
