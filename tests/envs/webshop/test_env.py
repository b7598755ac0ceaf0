"""The web-shop text environment: Gymnasium contract, penalties, subgoals, partial credit, parser fuzzing."""

from __future__ import annotations

import random

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import milepost.envs  # noqa: F401 - registers the environments
from milepost.backends.scripted import ScriptedPolicy
from milepost.envs.webshop import WebShopEnv, parse_action
from milepost.envs.webshop.moves import best_action
from milepost.errors import InputError
from milepost.types import Task


def _env(task: Task, **kwargs: object) -> WebShopEnv:
    env = WebShopEnv(size=task.size, **kwargs)  # type: ignore[arg-type]
    env.reset(options={"task": task})
    return env


def test_check_env_passes_through_gymnasium_make() -> None:
    env = gymnasium.make("milepost/WebShop-v0")
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert info["goal_distance"] == info["remaining_distance"] > 0
    assert 3 <= info["goal_distance"] <= 5  # default level 3-5


def test_seeded_rollouts_match() -> None:
    def rollout(seed: int) -> list[tuple[str, float, bool, bool]]:
        env = WebShopEnv(size=2, level="6-8")
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        out = [(obs, 0.0, False, False)]
        for i in range(14):
            move = best_action(env.rules)  # type: ignore[arg-type]
            action = move.text() if i % 3 and move else env.action_space.sample()
            obs, reward, term, trunc, _ = env.step(action)
            out.append((obs, reward, term, trunc))
            if term or trunc:
                break
        return out

    assert rollout(11) == rollout(11)
    assert rollout(11) != rollout(12)


def test_oracle_episode_latches_every_subgoal_in_order(two_item_tasks: list[Task]) -> None:
    task = two_item_tasks[0]
    env = _env(task)
    obs, info = env.reset(options={"task": task})
    total, steps = 0.0, 0
    while True:
        action = best_action(env.rules)  # type: ignore[arg-type]
        assert action is not None
        obs, reward, term, trunc, info = env.step(f"REASON: next. ACTION: {action.text()}")
        assert env.observation_space.contains(obs)
        total += reward
        steps += 1
        assert info["remaining_distance"] == task.goal_distance - steps
        if term or trunc:
            break
    assert term and not trunc and info["solved"] and info["termination_reason"] == "solved"
    assert info["subgoals_completed"] == list(range(info["num_subgoals"]))
    assert info["reward_terms"]["outcome"] == 1.0 and steps == task.goal_distance


def test_invalid_and_malformed_actions_change_nothing(one_item_tasks: list[Task]) -> None:
    env = _env(one_item_tasks[0])
    before = env.state.key()
    obs, reward, term, _, info = env.step("click[Buy Now]")  # not on the search page
    assert info["reward_terms"]["valid"] == -1.0 and info["error"] and reward < 0
    assert env.state.key() == before and not term and "Last action rejected" in obs
    _, reward, term, _, info = env.step("buy the tee")
    assert info["reward_terms"]["format"] == -1.0 and env.state.key() == before
    obs, reward, term, _, info = env.step("click[caf\u00e9 tee]")  # a non-ASCII click value: a format error
    assert info["reward_terms"]["format"] == -1.0 and env.observation_space.contains(obs)
    obs, reward, term, _, info = env.step("search[caf\u00e9 tee]")  # a query folds to ASCII (search_query)
    assert info["error"] is None and env.state.query == "cafe tee" and env.observation_space.contains(obs)


def test_wrong_purchase_ends_with_partial_credit(one_item_tasks: list[Task]) -> None:
    task = next(t for t in one_item_tasks if t.payload["items"][0]["options"])
    env = _env(task)
    env.step(f"search[{task.payload['items'][0]['query']}]")
    pid = task.payload["items"][0]["product_id"]
    while pid not in env.state.clickables():
        env.step("click[Next >]")
    env.step(f"click[{pid.lower()}]")  # ids are matched case-insensitively
    _, reward, term, _, info = env.step("click[buy now]")  # no options selected
    item = task.payload["items"][0]
    n = len(item["attributes"]) + len(item["options"]) + 1
    expected = (n - len(item["options"])) / n
    assert term and not info["solved"] and info["termination_reason"] == "dead_end"
    assert info["reward_terms"]["outcome"] == pytest.approx(expected)
    assert reward == pytest.approx(expected)


def test_budget_truncates(one_item_tasks: list[Task]) -> None:
    env = _env(one_item_tasks[0], max_steps=2)
    env.step("click[Nothing]")
    *_, term, trunc, info = env.step("click[Nothing]")
    assert trunc and not term and info["termination_reason"] == "budget_exhausted"


def test_text_rich_mode_marks_clickables(one_item_tasks: list[Task]) -> None:
    env = _env(one_item_tasks[0], render="text_rich")
    obs, *_ = env.step(f"search[{one_item_tasks[0].payload['items'][0]['query']}]")
    assert "[button] Back to Search [button_]" in obs and "[button] Next > [button_]" in obs


def test_bad_settings_are_input_errors() -> None:
    with pytest.raises(InputError):
        WebShopEnv(size=5)
    with pytest.raises(InputError):
        WebShopEnv(render="html")
    with pytest.raises(InputError):
        WebShopEnv(action_mode="slide")


@pytest.mark.parametrize("policy", ["random", "noisy-oracle"])
def test_scripted_policies_play_without_errors(policy: str, one_item_tasks: list[Task]) -> None:
    rng = random.Random(0)
    scripted = ScriptedPolicy(policy, p=0.5, mode="mixed")
    for task in one_item_tasks[:4]:
        env = _env(task)
        for _ in range(env.max_steps):
            obs, _, term, trunc, _ = env.step(scripted.answer(env, rng))
            assert env.observation_space.contains(obs)
            if term or trunc:
                break


_ACTIONS = st.one_of(
    st.text(max_size=80),
    st.builds(lambda k, v: f"{k}[{v}]", st.sampled_from(["search", "click", "Click", "SEARCH"]), st.text(max_size=40)),
    st.sampled_from(["click[Next >]", "click[< Prev]", "click[Back to Search]", "click[Buy Now]", "search[]"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_ACTIONS)
def test_fuzzed_actions_never_raise_and_rejections_leave_the_state(text: str, one_item_tasks: list[Task]) -> None:
    env = _env(one_item_tasks[1])
    env.step(f"search[{one_item_tasks[1].payload['items'][0]['query']}]")
    before = env.state.key()
    obs, *_, info = env.step(text)
    assert env.observation_space.contains(obs)
    if info["error"] is not None:
        assert env.state.key() == before
    action = parse_action(text.strip())
    if action is not None:
        assert action.value.isascii() and "[" not in action.value


def test_accessibility_tree_mode_plays_by_element_numbers(two_item_tasks: list[Task]) -> None:
    from milepost.envs.webshop.render import TEXTBOX, elements

    task = two_item_tasks[1]
    env = _env(task, render="accessibility")
    obs, _ = env.reset(options={"task": task})
    assert obs.startswith("[1] RootWebArea") and "textbox 'Search'" in obs
    static = next(n for n, (role, _, _) in enumerate(elements(env.state), 2) if role == "StaticText")
    *_, info = env.step(f"click [{static}]")
    assert info["reward_terms"]["valid"] == -1.0 and "not clickable" in (info["error"] or "")
    while True:
        plain = best_action(env.rules)  # type: ignore[arg-type]
        assert plain is not None
        items = elements(env.state)
        if plain.kind == "search":
            n = next(i for i, (role, _, _) in enumerate(items, 2) if role == TEXTBOX)
            answer = f"type [{n}] [{plain.value}] [1]"
        else:
            n = next(i for i, (_, _, value) in enumerate(items, 2) if value == plain.value)
            answer = f"click [{n}]"
        obs, _, term, _, info = env.step(answer)
        assert info["actions"] == [plain.text()] and f"[{n}]" not in (info["error"] or "")
        if term:
            break
    assert info["solved"] and info["steps"] == task.goal_distance + 1


def test_element_numbers_are_format_errors_outside_the_accessibility_mode(one_item_tasks: list[Task]) -> None:
    env = _env(one_item_tasks[0])
    *_, info = env.step("click [3]")
    assert info["reward_terms"]["format"] == -1.0


_REF_ACTIONS = st.one_of(
    st.builds(lambda n: f"click [{n}]", st.integers(-3, 60)),
    st.builds(lambda n, v: f"type [{n}] [{v}]", st.integers(0, 60), st.text(max_size=30)),
    _ACTIONS,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_REF_ACTIONS, min_size=1, max_size=4))
def test_fuzzed_accessibility_actions_never_raise(texts: list[str], one_item_tasks: list[Task]) -> None:
    env = _env(one_item_tasks[2], render="accessibility")
    for text in texts:
        before = env.state.key()
        obs, _, term, trunc, info = env.step(text)
        assert env.observation_space.contains(obs)
        if info["error"] is not None:
            assert env.state.key() == before
        if term or trunc:
            break


def test_import_milepost_is_enough_for_gymnasium_make_webshop() -> None:
    import subprocess
    import sys

    code = (
        "import milepost, gymnasium, sys\n"
        "assert 'milepost.envs' not in sys.modules\n"
        "env = gymnasium.make('milepost/WebShop-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert env.observation_space.contains(obs) and info['goal_distance'] > 0\n"
        "assert 'torch' not in sys.modules and 'fastapi' not in sys.modules, 'heavy import'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
