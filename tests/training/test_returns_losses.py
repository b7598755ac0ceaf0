"""Hand-computed values for every return, advantage and weight function."""

from __future__ import annotations

import math

import pytest
import torch

from milepost.training.losses import ISConfig, importance_weights, reinforce_loss, sft_loss
from milepost.training.returns import advantages, discounted_returns, normalise

T = torch.tensor


def test_discounted_returns_by_hand() -> None:
    g = discounted_returns(T([0.0, 0.0, 1.0]), 0.5)
    assert g.tolist() == [0.25, 0.5, 1.0]
    g = discounted_returns(T([1.0, 2.0, 3.0]), 1.0)
    assert g.tolist() == [6.0, 5.0, 3.0]
    with pytest.raises(ValueError, match="gamma"):
        discounted_returns(T([1.0]), 1.5)


def test_segmented_returns_restart_after_each_subgoal() -> None:
    # Milestones at turns 1 and 3, outcome at turn 4: segments [0, 1], [2, 3], [4].
    rewards = T([0.0, 1.0, 0.0, 1.0, 1.0])
    cuts = T([False, True, False, True, False])
    g = discounted_returns(rewards, 0.5, cuts)
    assert g.tolist() == [0.5, 1.0, 0.5, 1.0, 1.0]
    # Outcome only, no cuts: every segment but the last would have return 0 under cuts.
    outcome_only = discounted_returns(T([0.0, 0.0, 0.0, 0.0, 1.0]), 0.5, cuts)
    assert outcome_only.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_normalise_batch_and_groups() -> None:
    x = T([1.0, 3.0])
    assert normalise(x).tolist() == pytest.approx([-1.0, 1.0], abs=1e-5)
    assert normalise(T([2.0, 2.0, 2.0])).tolist() == [0.0, 0.0, 0.0]
    y = normalise(T([1.0, 3.0, 10.0, 10.0]), T([0, 0, 1, 1]))
    assert y.tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0], abs=1e-5)


def test_advantage_combines_normalised_return_and_step_reward() -> None:
    # Two one-turn episodes: success with no penalty, failure with a format error.
    adv = advantages([T([1.0]), T([0.0])], [T([0.0]), T([-1.0])], gamma=0.995, alpha=0.2)
    assert [a.item() for a in adv] == pytest.approx([1.0 + 0.2, -1.0 - 0.2], abs=1e-5)
    raw = advantages([T([1.0]), T([0.0])], [T([0.0]), T([-1.0])], alpha=0.5, normalisation="none")
    assert [a.item() for a in raw] == pytest.approx([1.0, -0.5])
    only_traj = advantages([T([0.0, 1.0]), T([0.0, 0.0])], [T([-1.0, 0.0]), T([0.0, 0.0])], gamma=1.0, alpha=0.0)
    # Returns [1, 1, 0, 0] -> mean 0.5, std 0.5 -> [1, 1, -1, -1].
    assert torch.cat(only_traj).tolist() == pytest.approx([1.0, 1.0, -1.0, -1.0], abs=1e-5)


def test_group_normalisation_uses_each_tasks_episodes() -> None:
    adv = advantages(
        [T([1.0]), T([0.0]), T([1.0]), T([1.0])],
        [T([0.0])] * 4,
        alpha=0.2,
        normalisation="group",
        groups=[0, 0, 1, 1],
    )
    # Task 0: returns (1, 0) -> (+1, -1); task 1: all successes -> no signal.
    assert [a.item() for a in adv] == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-5)
    with pytest.raises(ValueError, match="one group id per episode"):
        advantages([T([1.0])], [T([0.0])], normalisation="group")


def test_importance_weights_truncate_and_mask() -> None:
    cfg = ISConfig(cap=3.0, low=0.995, high=1.01)
    mask = T([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0]])
    old = torch.zeros(4, 3)
    new = torch.zeros(4, 3)
    new[1] = math.log(1.005)  # rho_geo = 1.005 (kept), rho_seq = 1.005^3
    new[2] = math.log(1.02)  # rho_geo = 1.02 > C_high (masked)
    new[3, 0] = math.log(0.99)  # below C_low (masked); padding positions never count
    new[0, 2] = 5.0  # padding: ignored
    w, kept = importance_weights(new, old, mask, cfg)
    assert kept.tolist() == [True, True, False, False]
    assert w.tolist() == pytest.approx([1.0, 1.005**3, 0.0, 0.0], rel=1e-5)
    big = torch.full((1, 40), math.log(1.009))  # geo 1.009 kept; seq 1.009^40 = 1.43
    w, _ = importance_weights(big, torch.zeros(1, 40), torch.ones(1, 40), ISConfig(cap=1.2))
    assert w.item() == pytest.approx(1.2)
    w, kept = importance_weights(new, old, mask, ISConfig(mask=False, truncate=False))
    assert kept.all() and w[2].item() == pytest.approx(1.02**3, rel=1e-5)
    with pytest.raises(ValueError, match="C_low"):
        ISConfig(low=1.2)


def test_reinforce_and_sft_losses() -> None:
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -9.0]], requires_grad=True)
    mask = T([[1, 1], [1, 0]])
    loss = reinforce_loss(logp, mask, T([2.0, -1.0]), T([1.0, 0.5]))
    # -(1*2*(-3) + 0.5*(-1)*(-0.5)) / 2 = -(-6 + 0.25) / 2 = 2.875
    assert loss.item() == pytest.approx(2.875)
    loss.backward()
    assert logp.grad is not None and logp.grad[1, 1].item() == 0.0
    assert logp.grad[0, 0].item() == pytest.approx(-1.0)  # d/dlogp of -(w*A*logp)/2 = -(1*2)/2
    assert sft_loss(torch.tensor([[-1.0, -3.0], [-2.0, -7.0]]), mask).item() == pytest.approx(2.0)


def test_std_floor_stops_blowing_up_nearly_constant_returns() -> None:
    # Two solved episodes of 2 and 3 turns: returns differ only by discounting (gamma 0.99).
    traj = [T([0.0, 1.0]), T([0.0, 0.0, 1.0])]
    steps = [T([0.0, 0.0]), T([0.0, 0.0, 0.0])]
    plain = torch.cat(advantages(traj, steps, gamma=0.99, alpha=0.0))
    floored = torch.cat(advantages(traj, steps, gamma=0.99, alpha=0.0, std_floor=0.5))
    assert plain.abs().max() > 1.0  # the paper's normalisation turns a 2% spread into unit-variance signal
    assert floored.abs().max() < 0.05
