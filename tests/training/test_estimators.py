"""GiGPO, GRPO-style, distance and random estimators against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from milepost.training.estimators import (
    anchor_group_sizes,
    dead_end_penalty,
    distance_advantages,
    gigpo_advantages,
    grpo_advantages,
    random_advantages,
    turn_distances,
)
from milepost.types import Episode, TerminationReason, Turn, zero_terms


def turn(i: int, after: int | None, state: str, actions: int = 1) -> Turn:
    return Turn(
        index=i,
        observation=f"state {state}",
        text="",
        actions=[f"a{k}" for k in range(actions)],
        reward=0.0,
        reward_terms=zero_terms(),
        subgoals_completed=[],
        remaining_distance=after,
        state_key=state,
    )


def episode(task: str, sample: int, d0: int, path: list[tuple[int | None, str]], success: bool) -> Episode:
    turns = [turn(i, after, state) for i, (after, state) in enumerate(path)]
    reason = TerminationReason.SOLVED if success else TerminationReason.BUDGET_EXHAUSTED
    return Episode(task, "test", sample, 0, reason, success, d0, len(turns), turns=turns)


def test_turn_distances_follow_the_recorded_remaining_distance() -> None:
    ep = episode("t", 0, 3, [(2, "A"), (2, "B"), (None, "C"), (None, "D")], False)
    assert turn_distances(ep) == [(3.0, 2.0), (2.0, 2.0), (2.0, math.inf), (math.inf, math.inf)]


def test_distance_advantages_by_hand() -> None:
    # deltas: +1, 0, -1 (into distance 3) and dead end (-penalty) then 0 inside it.
    a = episode("t", 0, 3, [(2, "A"), (2, "B"), (3, "C")], False)
    b = episode("u", 0, 2, [(None, "X"), (None, "Y")], False)
    penalty = dead_end_penalty([a, b])
    assert penalty == 4.0  # largest finite distance 3, plus 1
    raw = distance_advantages([a, b], normalisation="none")
    assert torch.cat(raw).tolist() == [1.0, 0.0, -1.0, -4.0, 0.0]
    norm = torch.cat(distance_advantages([a, b]))
    x = torch.tensor([1.0, 0.0, -1.0, -4.0, 0.0])
    expected = (x - x.mean()) / (x.std(unbiased=False) + 1e-6)
    assert norm.tolist() == pytest.approx(expected.tolist(), abs=1e-6)


def test_grpo_advantages_normalise_outcomes_within_each_task() -> None:
    eps = [episode("t", i, 2, [(1, "A"), (0, "B")], i < 1) for i in range(2)] + [episode("u", 0, 1, [(0, "A")], True)]
    adv = grpo_advantages(eps, [1.0, 0.0, 1.0])
    # Task t: outcomes (1, 0), mean 0.5, population std 0.5 -> +1 / -1 on every turn; task u alone -> 0.
    assert adv[0].tolist() == pytest.approx([1.0, 1.0], abs=1e-5)
    assert adv[1].tolist() == pytest.approx([-1.0, -1.0], abs=1e-5)
    assert adv[2].tolist() == [0.0]


def test_gigpo_matches_hand_computed_groups() -> None:
    # One task, three episodes from the same start state S. Episodes 0 and 1 pass through state M.
    #   ep0: S -> M -> goal (success, 2 turns)        ep1: S -> M -> X -> (fail, 3 turns)
    #   ep2: S -> Y (fail, 1 turn)
    e0 = episode("t", 0, 2, [(1, "S"), (0, "M")], True)
    e1 = episode("t", 1, 2, [(1, "S"), (2, "M"), (2, "X")], False)
    e2 = episode("t", 2, 2, [(3, "S")], False)
    gamma = 0.5
    adv = gigpo_advantages([e0, e1, e2], [1.0, 0.0, 0.0], gamma=gamma, omega=1.0, scale="std", eps=0.0)
    # Episode level: R = (1, 0, 0), mean 1/3, unbiased std sqrt(1/3).
    sd = math.sqrt(1 / 3)
    ae = [(1 - 1 / 3) / sd, (0 - 1 / 3) / sd, (0 - 1 / 3) / sd]
    # Discounted returns (outcome at the last turn): e0 (0.5, 1), e1 (0, 0, 0), e2 (0,).
    # Anchor S: returns (0.5, 0, 0): mean 1/6, unbiased std sqrt(1/12) -> (1/3, -1/6, -1/6) / sqrt(1/12).
    s = math.sqrt(1 / 12)
    as_s = [(0.5 - 1 / 6) / s, (0 - 1 / 6) / s, (0 - 1 / 6) / s]
    # Anchor M: returns (1, 0): mean 0.5, std sqrt(0.5) -> (0.5, -0.5) / sqrt(0.5). X is alone -> 0.
    m = math.sqrt(0.5)
    as_m = [0.5 / m, -0.5 / m]
    assert adv[0].tolist() == pytest.approx([ae[0] + as_s[0], ae[0] + as_m[0]], abs=1e-5)
    assert adv[1].tolist() == pytest.approx([ae[1] + as_s[1], ae[1] + as_m[1], ae[1] + 0.0], abs=1e-5)
    assert adv[2].tolist() == pytest.approx([ae[2] + as_s[2]], abs=1e-5)
    assert anchor_group_sizes([e0, e1, e2]) == [1, 2, 3]


def test_gigpo_mean_scale_and_separate_tasks() -> None:
    # The same state key in two different tasks is two anchors; mean scaling subtracts the mean only.
    a0 = episode("t", 0, 1, [(0, "S")], True)
    a1 = episode("t", 1, 1, [(1, "S")], False)
    b0 = episode("u", 0, 1, [(1, "S")], False)
    adv = gigpo_advantages([a0, a1, b0], [1.0, 0.0, 0.0], gamma=1.0, scale="mean")
    assert adv[0].item() == pytest.approx(0.5 + 0.5)
    assert adv[1].item() == pytest.approx(-0.5 - 0.5)
    # u's single episode: episode advantage = R (verl-agent's mean 0 / std 1 for a group of one); no step group.
    assert adv[2].item() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="scale"):
        gigpo_advantages([a0], [1.0], scale="max")


def test_random_advantages_are_seeded_and_centred() -> None:
    eps = [episode("t", i, 40, [(40 - k - 1, str(k)) for k in range(40)], False) for i in range(20)]
    a = torch.cat(random_advantages(eps, seed=3))
    b = torch.cat(random_advantages(eps, seed=3))
    assert torch.equal(a, b)
    assert abs(float(a.mean())) < 0.15 and 0.85 < float(a.std()) < 1.15


def test_trainer_uses_the_configured_estimator() -> None:
    from dataclasses import replace

    from milepost.training.config import TrainConfig
    from milepost.training.trainer import batch_advantages

    eps = [
        episode("t", 0, 2, [(1, "S"), (0, "M")], True),
        episode("t", 1, 2, [(1, "S"), (2, "M"), (None, "X")], False),
        episode("u", 0, 1, [(1, "A")], False),
    ]
    base = TrainConfig()
    paper = torch.cat(batch_advantages(eps, base))
    gig_cfg = replace(base, rl=replace(base.rl, estimator="gigpo", gigpo_gamma=0.5, gigpo_omega=2.0))
    gig = torch.cat(batch_advantages(eps, gig_cfg))
    expected = torch.cat(gigpo_advantages(eps, [1.0, 0.0, 0.0], gamma=0.5, omega=2.0))
    assert torch.equal(gig, expected)
    dist = torch.cat(batch_advantages(eps, replace(base, rl=replace(base.rl, estimator="distance"))))
    assert torch.equal(dist, torch.cat(distance_advantages(eps)))
    assert not torch.allclose(paper, dist) and not torch.allclose(paper, gig)
    # The random control: the same draws for the same seed and iteration (a resumed run replays them), new ones
    # for the next iteration and for another training seed.
    rand_cfg = replace(base, rl=replace(base.rl, estimator="random"))
    first = torch.cat(batch_advantages(eps, rand_cfg, iteration=1))
    assert torch.equal(first, torch.cat(batch_advantages(eps, rand_cfg, iteration=1)))
    assert not torch.allclose(first, torch.cat(batch_advantages(eps, rand_cfg, iteration=2)))
    assert not torch.allclose(first, torch.cat(batch_advantages(eps, replace(rand_cfg, seed=1), iteration=1)))


def test_estimator_settings_are_checked() -> None:
    from milepost.training.config import RLConfig, TrainConfig

    with pytest.raises(ValueError, match=r"rl\.estimator: 'ppo' is not one of paper, gigpo, distance"):
        RLConfig(estimator="ppo")
    with pytest.raises(ValueError, match=r"rl\.gigpo_gamma"):
        RLConfig(estimator="gigpo", gigpo_gamma=2.0)
    with pytest.raises(ValueError, match="apply to the paper estimator only"):
        TrainConfig(rl=RLConfig(estimator="distance", subgoal_decomposition=True))
