"""Returns, advantages, importance weights and losses at their edges: boundary values of every check, defaults,
one-turn and empty batches, exact values where the normalisation's epsilon or a sign would show.

Written from the mutation gate's survivors (`make mutation`): each test pins a behaviour that a plausible slip
in `returns.py` or `losses.py` would change.
"""

from __future__ import annotations

import math

import pytest
import torch

from milepost.training.losses import (
    ISConfig,
    importance_weights,
    kl_penalty,
    mse_policy_loss,
    reinforce_loss,
    sft_loss,
)
from milepost.training.returns import (
    EPS,
    advantages,
    baseline_advantages,
    combine_with_steps,
    discounted_returns,
    doubly_robust_advantages,
    normalise,
)


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def d(*values: float) -> torch.Tensor:
    """float64, so that the normalisation's epsilon (1e-6) shows above the rounding."""
    return torch.tensor(values, dtype=torch.float64)


# -- returns ---------------------------------------------------------------------------------------------------


def test_discount_bounds_are_inclusive_and_dtype_is_kept() -> None:
    assert discounted_returns(t(1.0, 2.0), 0.0).tolist() == [1.0, 2.0]  # gamma = 0: no look-ahead
    assert discounted_returns(t(1.0, 2.0), 1.0).tolist() == [3.0, 2.0]
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\]"):
            discounted_returns(t(1.0), bad)
    doubles = torch.tensor([1.0, 1.0 / 3.0], dtype=torch.float64)
    out = discounted_returns(doubles, 0.9, cuts=torch.tensor([False, True]))
    assert out.dtype == torch.float64 and out[1].item() == 1.0 / 3.0  # no float32 rounding on the way


def test_normalise_exact_values_single_values_and_groups() -> None:
    scale = 1.0 / (1.0 + EPS)  # std 1: (x - mean) / (std + eps)
    assert normalise(d(0.0, 2.0)).tolist() == pytest.approx([-scale, scale], abs=1e-9)
    assert normalise(t(5.0)).tolist() == [0.0]  # one value carries no signal
    assert normalise(t()).numel() == 0
    groups = torch.tensor([0, 0, 1])
    assert normalise(d(0.0, 2.0, 7.0), groups).tolist() == pytest.approx([-scale, scale, 0.0], abs=1e-9)
    floored = normalise(d(0.0, 0.2), std_floor=1.0)  # std 0.1 raised to the floor 1
    assert floored.tolist() == pytest.approx([-0.1 / (1.0 + EPS), 0.1 / (1.0 + EPS)], abs=1e-9)
    g_floored = normalise(t(0.0, 0.2, 0.0, 2.0), torch.tensor([0, 0, 1, 1]), std_floor=1.0)
    assert g_floored.tolist() == pytest.approx([-0.1, 0.1, -1.0, 1.0], abs=1e-5)


def test_advantage_defaults_are_the_papers() -> None:
    """Defaults: gamma 0.995, alpha 0.2, batch normalisation, no std floor."""
    traj = [t(0.0, 1.0), t(0.0, 0.0)]
    steps = [t(-1.0, 0.0), t(0.0, 0.0)]
    explicit = advantages(traj, steps, gamma=0.995, alpha=0.2, normalisation="batch", std_floor=0.0)
    default = advantages(traj, steps)
    assert torch.cat(default).tolist() == pytest.approx(torch.cat(explicit).tolist(), abs=1e-7)
    other = advantages(traj, steps, alpha=1.0)
    assert torch.cat(default).tolist() != pytest.approx(torch.cat(other).tolist(), abs=1e-3)
    values = [t(1.0, 3.0)]
    assert combine_with_steps(values, [t(0.0, 0.0)], 0.0)[0].tolist() == pytest.approx(
        [-1.0 / (1.0 + EPS), 1.0 / (1.0 + EPS)], abs=2e-7
    )  # batch normalisation by default, no floor
    small = [t(0.0, 0.2)]
    assert combine_with_steps(small, [t(0.0, 0.0)], 0.0)[0].tolist() == pytest.approx([-1.0, 1.0], abs=1e-4)


def test_advantage_argument_checks_name_the_problem() -> None:
    with pytest.raises(ValueError, match="one entry per episode"):
        advantages([t(1.0)], [])
    with pytest.raises(ValueError, match="normalisation must be batch, group or none, got 'mean'"):
        advantages([t(1.0)], [t(0.0)], normalisation="mean")
    with pytest.raises(ValueError, match="one group id per episode"):
        advantages([t(1.0)], [t(0.0)], normalisation="group", groups=[0, 1])


def test_one_turn_and_empty_batches() -> None:
    # A single turn, unnormalised: its own return plus alpha times its step reward.
    (one,) = advantages([t(2.0)], [t(-1.0)], alpha=0.5, normalisation="none")
    assert one.tolist() == [1.5]
    (one,) = combine_with_steps([t(2.0)], [t(-1.0)], 0.5, "none")
    assert one.tolist() == [1.5]
    # Episodes without turns: empty advantages of the right shapes, whatever the normalisation.
    for norm in ("batch", "none"):
        empty = advantages([t(), t()], [t(), t()], normalisation=norm)
        assert [a.shape for a in empty] == [torch.Size([0]), torch.Size([0])]
        assert [a.shape for a in combine_with_steps([t()], [t()], 0.2, norm)] == [torch.Size([0])]
    assert advantages([], []) == []


def test_group_normalisation_applies_to_the_step_term_too() -> None:
    # Task 0's step rewards are all -1, task 1's all 0: per group they carry no signal, over the batch they would.
    adv = combine_with_steps([t(0.0, 0.0), t(0.0, 0.0)], [t(-1.0, -1.0), t(0.0, 0.0)], 1.0, "group", [0, 1])
    assert torch.cat(adv).tolist() == [0.0, 0.0, 0.0, 0.0]
    # the std floor reaches the step term as well
    floored = combine_with_steps([t(0.0, 0.0)], [t(0.0, -0.2)], 1.0, "batch", std_floor=1.0)
    assert floored[0].tolist() == pytest.approx([0.1, -0.1], abs=1e-5)


def test_doubly_robust_advantage_by_hand() -> None:
    rewards, values = t(0.0, 1.0), t(0.5, 0.25, 0.0)
    gamma, lam = 0.9, 0.25
    # td_t = r_t + gamma V(s_t+1) - V(s_t); mc_t = R - V(s_t)
    td = [0.0 + 0.9 * 0.25 - 0.5, 1.0 + 0.0 - 0.25]
    mc = [1.0 - 0.5, 1.0 - 0.25]
    expected = [lam * a + (1 - lam) * b for a, b in zip(td, mc)]
    got = doubly_robust_advantages(rewards, values, 1.0, gamma=gamma, lam=lam)
    assert got.tolist() == pytest.approx(expected, abs=1e-6)
    default = doubly_robust_advantages(rewards, values, 1.0, gamma=gamma)  # lam = 0.5 by default
    assert default.tolist() == pytest.approx([0.5 * a + 0.5 * b for a, b in zip(td, mc)], abs=1e-6)
    assert doubly_robust_advantages(rewards, values, 0.0, gamma=gamma, lam=0.0).tolist() == pytest.approx([-0.5, -0.25])
    assert doubly_robust_advantages(rewards, values, 0.0, gamma=gamma, lam=1.0).tolist() == pytest.approx(td)
    for bad in (-0.01, 1.01):
        with pytest.raises(ValueError, match=r"lambda must be in \[0, 1\], got"):
            doubly_robust_advantages(rewards, values, 1.0, gamma=gamma, lam=bad)
    with pytest.raises(ValueError, match=r"need T \+ 1 = 3 values, got 2"):
        doubly_robust_advantages(rewards, t(0.5, 0.25), 1.0, gamma=gamma)


def test_baseline_advantage_by_hand() -> None:
    got = baseline_advantages(t(0.0, 1.0), t(0.5, 0.25, 0.0), gamma=0.9)
    assert got.tolist() == pytest.approx([0.9 - 0.5, 1.0 - 0.25])
    with pytest.raises(ValueError, match=r"need T \+ 1 = 3 values, got 2"):
        baseline_advantages(t(0.0, 1.0), t(0.5, 0.25), gamma=0.9)


# -- importance weights and losses -----------------------------------------------------------------------------


def test_is_config_bounds_are_inclusive() -> None:
    ISConfig(cap=0.5, low=1.0, high=1.0)  # C may be below 1; the band may shrink to exactly 1
    with pytest.raises(ValueError, match=r"is.cap \(C\) must be > 0, got 0"):
        ISConfig(cap=0.0)
    for low, high in ((0.0, 1.5), (1.1, 1.5), (0.5, 0.9)):
        with pytest.raises(ValueError, match="0 < C_low <= 1 <= C_high"):
            ISConfig(low=low, high=high)


def test_geo_mis_band_is_closed_and_one_token_turns_are_not_halved() -> None:
    mask = torch.ones(3, 1)
    old = torch.zeros(3, 1)
    new = torch.tensor([[math.log(0.5)], [math.log(2.0)], [math.log(2.0) + 1e-3]])
    cfg = ISConfig(cap=10.0, low=0.5, high=2.0)
    weights, kept = importance_weights(new, old, mask, cfg)
    assert kept.dtype == torch.bool and kept.tolist() == [True, True, False]  # both ends of the band are kept
    assert weights.tolist() == pytest.approx([0.5, 2.0, 0.0], abs=1e-6)


def test_truncation_can_be_switched_off() -> None:
    mask = torch.ones(1, 2)
    new, old = torch.full((1, 2), 1.0), torch.zeros(1, 2)  # rho_seq = e^2 > C = 3
    capped, _ = importance_weights(new, old, mask, ISConfig(cap=3.0, mask=False))
    assert capped.tolist() == pytest.approx([3.0])
    raw, kept = importance_weights(new, old, mask, ISConfig(cap=3.0, mask=False, truncate=False))
    assert raw.tolist() == pytest.approx([math.exp(2.0)]) and kept.tolist() == [True]


def test_losses_by_hand_on_two_token_turns() -> None:
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -4.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    adv, weights = t(1.0, -2.0), t(1.0, 0.5)
    # -(1 * 1 * (-3) + 0.5 * (-2) * (-0.5)) / 2
    assert reinforce_loss(logp, mask, adv, weights).item() == pytest.approx(-(-3.0 + 0.5) / 2)
    assert sft_loss(logp[1:], mask[1:]).item() == pytest.approx(0.5)  # one response token
    ref = torch.tensor([[-1.5, -2.0], [0.0, 0.0]])
    # log ratios 0.5 and -0.5; beta 2: (1 - 1)^2 and (-1 + 2)^2
    assert mse_policy_loss(logp, ref, mask, adv, 2.0).item() == pytest.approx((0.0 + 1.0) / 2)
    assert mse_policy_loss(logp, ref, mask, t(2.0, 0.0), 2.0).item() == pytest.approx((1.0 + 1.0) / 2)
    d = torch.tensor([-0.5, 0.0, 0.5])  # log ref - log new on the three response tokens
    expected = float((torch.exp(d) - d - 1).mean())
    assert kl_penalty(logp, ref, mask).item() == pytest.approx(expected)
