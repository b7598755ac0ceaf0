"""Medium and hard web-shop tasks: paraphrased instructions over catalogues with options per product type and
same-title siblings, and a goal distance that stays exact (closed form against breadth-first search)."""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import pytest

from milepost.cli.main import main
from milepost.datasets import load_tasks
from milepost.envs.actions import ActionMode
from milepost.envs.levels import LEVELS
from milepost.envs.webshop.catalogue import CATEGORIES, get_catalogue
from milepost.envs.webshop.distance import bfs_distance
from milepost.envs.webshop.moves import best_action
from milepost.envs.webshop.records import check_record
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.tasks import generate_task
from milepost.envs.webshop.vocab import ATTRIBUTE_PHRASES, TYPE_OPTIONS, TYPE_PHRASES
from milepost.errors import InputError
from milepost.types import Task
from tests.envs.webshop.test_distance import _walk_states

SIZE = 300


def tasks_at(difficulty: str, k: int, count: int, seed: int = 0, size: int = SIZE) -> list[Task]:
    out: list[Task] = []
    index = 0
    while len(out) < count:
        task = generate_task(seed, index, k, catalogue_size=size, difficulty=difficulty)
        if task is not None:
            out.append(task)
        index += 1
    return out


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_closed_form_equals_bfs_at_each_difficulty(difficulty: str) -> None:
    rng = random.Random(5)
    checked = 0
    for k, count in ((1, 5), (2, 1)):
        for task in tasks_at(difficulty, k, count, seed=k):
            rules = WebShopRules(task, action_mode=ActionMode())
            assert bfs_distance(rules.state) == task.goal_distance == rules.remaining_distance()
            for state in _walk_states(rules, rng, 10 if k == 1 else 3):  # two-item BFS is costly
                assert rules.model.remaining(state) == bfs_distance(state), repr(state)
                checked += 1
            task.level = next(lv.name for lv in LEVELS[("webshop", k)] if lv.contains(task.goal_distance))
            assert check_record(task) is None
    assert checked > 25


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_the_oracle_buys_in_exactly_the_goal_distance(difficulty: str) -> None:
    for task in tasks_at(difficulty, 2, 4, seed=9):
        rules = WebShopRules(task, action_mode=ActionMode())
        steps = 0
        while not rules.is_solved():
            action = best_action(rules)
            assert action is not None
            rules.apply(action)
            steps += 1
        assert steps == task.goal_distance and rules.state.outcome() == 1.0


def test_bfs_agrees_on_a_hard_target_past_the_first_results_page() -> None:
    deep = [t for t in tasks_at("hard", 1, 60, seed=2, size=1000) if t.meta["result_pages"][0] > 0][:2]
    assert deep, "hard tasks put some targets past page 1"
    for task in deep:
        rules = WebShopRules(task, action_mode=ActionMode())
        assert bfs_distance(rules.state) == task.goal_distance


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_options_belong_to_the_product_type(difficulty: str) -> None:
    catalogue = get_catalogue(0, SIZE, difficulty)
    for p in catalogue.products:
        allowed = dict(TYPE_OPTIONS[p.ptype])
        for dim, values in p.options:
            assert set(values) <= set(allowed[dim]), (p.ptype, dim)
    earbuds = [p for p in catalogue.products if p.ptype == "wireless earbuds"]
    assert earbuds and all(p.dims in ((), ("color",)) for p in earbuds)
    # Within a type no option value sits in two dimensions, so a click names one.
    for ptype, dims in TYPE_OPTIONS.items():
        values = [v for _, vs in dims for v in vs]
        assert len(values) == len(set(values)), ptype


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_same_title_siblings_differ_only_in_options_or_price(difficulty: str) -> None:
    catalogue = get_catalogue(0, SIZE, difficulty)
    twins = 0
    by_title: dict[tuple[int, str], list[int]] = {}
    for p in catalogue.products:
        by_title.setdefault((p.family, p.title), []).append(p.index)
    for members in by_title.values():
        for a, b in itertools.pairwise(members):
            pa, pb = catalogue.products[a], catalogue.products[b]
            if pa.attributes == pb.attributes and pa.brand == pb.brand:
                assert (pa.options, pa.price) != (pb.options, pb.price)
                twins += 1
    assert twins > (60 if difficulty == "hard" else 10)


def test_titles_use_several_templates_and_pages_do_not_restate_the_attributes() -> None:
    catalogue = get_catalogue(0, SIZE, "medium")
    shapes = {" - ": 0, " by ": 0, " | ": 0, "Edition": 0, " for ": 0}
    for p in catalogue.products:
        for mark in shapes:
            shapes[mark] += mark in p.title
        assert not any(b.startswith(f"{a.capitalize()}:") for a in p.attributes for b in p.bullets())
        assert p.description() != get_catalogue(0, SIZE, "easy").products[0].description()
    assert all(n > 0 for n in shapes.values()), shapes
    hard = get_catalogue(0, SIZE, "hard")
    assert all(sum(a.title() in p.title for a in p.attributes) <= 1 for p in hard.products)


def test_paraphrases_name_no_other_attribute_type_or_option() -> None:
    attributes = {a for c in CATEGORIES for a in c.attributes}
    values = {v for dims in TYPE_OPTIONS.values() for _, vs in dims for v in vs}
    for attr, phrases in ATTRIBUTE_PHRASES.items():
        assert attr in attributes
        for phrase in phrases:
            assert phrase not in attributes | values | set(TYPE_OPTIONS), phrase
    for ptype, phrases in TYPE_PHRASES.items():
        assert all(p == ptype or p not in TYPE_OPTIONS for p in phrases)


def test_hard_instructions_are_not_the_canonical_query() -> None:
    easy, medium, hard = (tasks_at(d, 1, 20, seed=4) for d in ("easy", "medium", "hard"))
    for task in easy:
        item = task.payload["items"][0]
        assert all(a in task.payload["instruction"] for a in item["attributes"])
    said = 0
    for task in hard:
        item = task.payload["items"][0]
        words = task.payload["instruction"]
        assert item["query"] not in words
        assert item["text"] == words and f"{item['price_limit']:.2f} dollars" in words
        assert not re.search(r"\b(size|color|volume|pack|flavor): ", words)  # options without their labels
        said += sum(a not in words for a in item["attributes"])
    assert said >= 15
    assert sum(t.payload["instruction"].startswith("i am looking for a") for t in medium) < 15


def test_data_webshop_difficulty_writes_checked_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hard"
    argv = ["data", "webshop", "--difficulty", "hard", "--train", "3", "--test", "2", "--catalogue-size", "300"]
    assert main([*argv, "--out", str(out)]) == 0
    tasks = load_tasks(out, "train") + load_tasks(out, "test")
    assert len(tasks) == 5 and all(t.payload["difficulty"] == "hard" and "-hard-" in t.task_id for t in tasks)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["difficulty"] == "hard" and "--difficulty hard" in manifest["command"]
    bad = tasks[0]
    bad.payload["difficulty"] = "brutal"
    assert check_record(bad) == (
        "payload",
        "webshop payload: difficulty must be one of easy, medium, hard, not 'brutal'",
    )
    with pytest.raises(InputError, match="difficulty"):
        generate_task(0, 0, 1, difficulty="brutal")
    with pytest.raises(SystemExit):  # argparse's choices
        main([*argv[:2], "--difficulty", "brutal", "--out", str(tmp_path / "x")])
