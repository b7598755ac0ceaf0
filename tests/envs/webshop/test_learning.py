"""Learning on the shop: the env config takes the shop's renderers, the tiny tokenizer knows the shop's words,
and SFT demonstrations come from the oracle through the real agent loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.backends.hf import HFBackend
from milepost.backends.tiny import build_tokenizer, default_corpus
from milepost.config import EnvConfig, load_config
from milepost.envs import make_env
from milepost.envs.webshop.moves import best_action
from milepost.errors import InputError
from milepost.training.config import AgentConfig, SFTConfig, TrainConfig
from milepost.training.setup import env_factory, prompt_corpus
from milepost.training.sft import demonstrations
from milepost.types import Task

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("render", ["text", "text_rich", "accessibility"])
def test_env_config_chooses_the_shop_renderers(render: str) -> None:
    cfg = load_config(EnvConfig, None, ["name=webshop", "size=1", f"render={render}"])
    env = make_env(cfg.name, **cfg.env_kwargs())
    obs, _ = env.reset(seed=0)
    marks = {"text": "[SEP]", "text_rich": "[button]", "accessibility": "[1] RootWebArea"}
    assert marks[render] in obs


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["name=sudoku", "render=accessibility"], "env.render: 'accessibility' is not one of grid, cells"),
        (["name=webshop", "render=hints"], "env.render: 'hints' is not one of grid, text, text_rich, accessibility"),
        (["name=rushhour", "render=text"], "env.render: 'text' is not one of grid, legal for rushhour"),
    ],
)
def test_env_config_refuses_another_environments_renderer(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_config(EnvConfig, None, overrides)


def test_the_shipped_webshop_config_loads() -> None:
    cfg = load_config(TrainConfig, ROOT / "configs" / "tiny-cpu" / "webshop_sft.yaml")
    assert cfg.env.name == "webshop" and cfg.env.render == "text" and cfg.model.startswith("tiny:")


def _cfg(size: int = 1) -> TrainConfig:
    return TrainConfig(
        model="unused",
        data="unused",
        env=EnvConfig(name="webshop", size=size, max_steps=16, render="text"),
        agent=AgentConfig(memory_k=0, max_new_tokens=48),
        sft=SFTConfig(tasks=4),
        threads=1,
    )


def _pages(size: int, seeds: range) -> list[str]:
    """Every observation of oracle episodes of generated tasks (result and product pages included)."""
    out = []
    for seed in seeds:
        env = make_env("webshop", size=size)
        obs, _ = env.reset(seed=seed)
        out.append(obs)
        while (action := best_action(env.rules)) is not None:
            obs, *_ = env.step(action.text())
            out.append(obs)
    return out


def test_the_tiny_tokenizer_fitted_for_the_shop_knows_its_words() -> None:
    pages = _pages(2, range(3))  # unseen by the corpus (it plays seeds from 10,000)
    plain = build_tokenizer(default_corpus())
    shop = build_tokenizer([*default_corpus(), *prompt_corpus(_cfg(2))])

    def chars_per_token(tok: object) -> float:
        return sum(len(p) for p in pages) / sum(len(tok(p)["input_ids"]) for p in pages)  # type: ignore[operator]

    assert chars_per_token(shop) > 1.1 * chars_per_token(plain)
    # Page labels and option words become whole tokens.
    for word in (" Search", " Price", " Buy", " Add", " Description"):
        assert len(shop(word)["input_ids"]) == 1, word


def test_sft_demonstrations_are_the_oracles_turns_through_the_agent_loop(
    tiny_model_dir: Path, one_item_tasks: list[Task], two_item_tasks: list[Task]
) -> None:
    backend = HFBackend(tiny_model_dir)
    for size, tasks in ((1, one_item_tasks[:3]), (2, two_item_tasks[:2])):
        examples = demonstrations(_cfg(size), tasks, backend, progress=False)
        # One example per action of a shortest purchase, each prompt the page the agent saw then.
        assert len(examples) == sum(t.goal_distance for t in tasks)
        prompts = [backend.decode(e.prompt_ids) for e in examples]
        answers = [backend.decode(e.completion_ids) for e in examples]
        for task in tasks:  # each task's first prompt is its search page, answered by the canonical search
            assert any(task.payload["instruction"] in p and p.rstrip().endswith("[SEP] Search") for p in prompts)
        searches = [a for a in answers if a.startswith("REASON: Search for the next item. ACTION: search[")]
        assert len(searches) == sum(len(t.payload["items"]) for t in tasks)
        # One purchase per episode: Buy Now takes the cart plus the open product, so k-1 items go to the cart.
        assert sum("ACTION: click[Buy Now]" in a for a in answers) == len(tasks)
        assert sum("ACTION: click[Add to Cart]" in a for a in answers) == len(searches) - len(tasks)
        # Every prompt fits the tiny model's context with room for the answer.
        longest = max(len(e.prompt_ids) + len(e.completion_ids) for e in examples)
        assert longest < backend.tokenizer.model_max_length


def test_an_env_built_from_the_config_plays_a_two_item_task_of_a_mixed_dataset(two_item_tasks: list[Task]) -> None:
    # The shipped config names size 1; evaluation and SFT build the env with the first task's size, and a
    # 2-item task on it keeps its own requirements and the config's turn budget.
    env = env_factory(_cfg(1), 1)()
    _, info = env.reset(options={"task": two_item_tasks[0]})
    steps = 0
    while (action := best_action(env.rules)) is not None:
        _, _, terminated, truncated, info = env.step(action.text())
        steps += 1
        if terminated or truncated:
            break
    assert info["solved"] and steps == two_item_tasks[0].goal_distance
