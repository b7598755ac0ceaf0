"""``rl.reward: success`` against the web shop's graded outcome: a wrong purchase played through the real
environment earns WebShop's partial credit as its ``outcome`` term, which the ``outcome`` reward passes on and the
``success`` reward (the SGO+MiRA paper's silent outcome) and the guide's completion bonus do not."""

from __future__ import annotations

import pytest

from milepost.config import load_config
from milepost.envs.webshop.env import WebShopEnv
from milepost.rewards.milestone import TRAJECTORY_REWARDS, MilestoneRewardConfig, RewardContext
from milepost.training.config import TrainConfig
from milepost.types import Episode, TerminationReason, Turn
from tests.envs.webshop.conftest import CATALOGUE, tasks_of


def _played(actions: list[str]) -> Episode:
    """The episode of ``actions`` on the first 1-item test order, its turns filled from the env's step infos."""
    task = tasks_of(1, 1)[0]
    env = WebShopEnv(size=1, catalogue_size=CATALOGUE)
    env.reset(options={"task": task})
    turns, info = [], {}
    for i, action in enumerate(actions):
        _, reward, _, _, info = env.step(action)
        turns.append(
            Turn(
                index=i,
                observation="",
                text=action,
                actions=list(info["actions"]),
                reward=reward,
                reward_terms=dict(info["reward_terms"]),
                subgoals_completed=list(info["subgoals_completed"]),
                remaining_distance=info["remaining_distance"],
                new_subgoals=list(info["new_subgoals"]),
            )
        )
    solved = bool(info.get("solved", False))
    return Episode(
        task_id=task.task_id,
        policy="script",
        sample=0,
        seed=0,
        termination=TerminationReason.SOLVED if solved else TerminationReason.DEAD_END,
        success=solved,
        goal_distance=task.goal_distance,
        steps=len(turns),
        turns=turns,
        meta={"num_subgoals": info.get("num_subgoals", 0)},
    )


def _wrong_purchase() -> Episode:
    task = tasks_of(1, 1)[0]
    item = task.payload["items"][0]
    # The target product, bought with its options left unset: the right product, the wrong line.
    return _played([f"search[{item['query']}]", f"click[{item['product_id']}]", "click[Buy Now]"])


CTX = RewardContext(max_steps=15, milestone_weight=1.0, milestone=MilestoneRewardConfig(completion_bonus=10.0))


def test_a_wrong_purchase_pays_partial_credit_as_outcome_but_nothing_as_success() -> None:
    ep = _wrong_purchase()
    assert not ep.success and ep.turns[-1].reward_terms["outcome"] > 0  # WebShop's graded reward
    outcome = TRAJECTORY_REWARDS.get("outcome")(ep, CTX)
    assert outcome[-1].item() == pytest.approx(ep.turns[-1].reward_terms["outcome"])
    assert TRAJECTORY_REWARDS.get("success")(ep, CTX).tolist() == [0.0, 0.0, 0.0]


def test_the_guide_pays_no_completion_bonus_for_a_wrong_purchase() -> None:
    guide = TRAJECTORY_REWARDS.get("guide")(_wrong_purchase(), CTX)
    assert guide.max().item() < CTX.milestone.completion_bonus


def test_a_solved_episode_pays_the_success_bit_on_its_last_turn() -> None:
    task = tasks_of(1, 1)[0]
    item = task.payload["items"][0]
    options = [f"click[{value}]" for value in item["options"].values()]
    ep = _played([f"search[{item['query']}]", f"click[{item['product_id']}]", *options, "click[Buy Now]"])
    assert ep.success
    assert TRAJECTORY_REWARDS.get("success")(ep, CTX).tolist() == [0.0] * (len(ep.turns) - 1) + [1.0]
    assert TRAJECTORY_REWARDS.get("outcome")(ep, CTX)[-1].item() == 1.0
    assert TRAJECTORY_REWARDS.get("guide")(ep, CTX)[-1].item() >= CTX.milestone.completion_bonus
    assert TRAJECTORY_REWARDS.get("success")(_played([]), CTX).numel() == 0


@pytest.mark.parametrize("reward", ["outcome", "success"])
def test_mira_doubly_robust_accepts_the_outcome_scale_rewards(reward: str) -> None:
    cfg = load_config(TrainConfig, None, [f"rl.reward={reward}", "mira.enabled=true", "mira.estimator=dr"])
    assert cfg.rl.reward == reward and cfg.mira.enabled
