"""GAE(lambda) as MiRA's fourth advantage estimator: hand-computed values, its limits, and the config seam."""

from __future__ import annotations

import pytest
import torch

from milepost.config import load_config
from milepost.errors import InputError
from milepost.training.config import MiRAConfig, RLConfig, TrainConfig
from milepost.training.mira import episode_advantages
from milepost.training.returns import baseline_advantages, gae_advantages

R = torch.tensor([0.25, 0.04, 1.3])  # shaped rewards
V = torch.tensor([0.5, 0.6, 0.8, 0.0])  # V(s_T) = 0 after the last turn
# TD errors at gamma 0.9: 0.25 + 0.54 - 0.5, 0.04 + 0.72 - 0.6, 1.3 + 0 - 0.8
DELTA = [0.29, 0.16, 0.5]


def test_gae_by_hand() -> None:
    # lambda 0.5: gamma * lambda = 0.45; A_2 = 0.5, A_1 = 0.16 + 0.45 * 0.5, A_0 = 0.29 + 0.45 * 0.385
    assert gae_advantages(R, V, gamma=0.9, lam=0.5).tolist() == pytest.approx([0.46325, 0.385, 0.5])
    # the guide's lambda 0.95: gamma * lambda = 0.855; A_1 = 0.16 + 0.4275, A_0 = 0.29 + 0.855 * 0.5875
    assert gae_advantages(R, V, gamma=0.9).tolist() == pytest.approx([0.7923125, 0.5875, 0.5])


def test_gae_limits_are_td_and_monte_carlo() -> None:
    assert gae_advantages(R, V, gamma=0.9, lam=0.0).tolist() == pytest.approx(DELTA)
    # lambda 1 telescopes to the discounted return minus the baseline
    full = gae_advantages(R, V, gamma=0.9, lam=1.0)
    assert full.tolist() == pytest.approx(baseline_advantages(R, V, gamma=0.9).tolist())
    assert full.tolist() == pytest.approx([0.839, 0.61, 0.5])


def test_gae_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="T \\+ 1"):
        gae_advantages(R, V[:-1], gamma=0.9)
    with pytest.raises(ValueError, match="lambda"):
        gae_advantages(R, V, gamma=0.9, lam=1.5)


def test_episode_advantages_with_the_gae_estimator() -> None:
    rewards, potentials = torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.2, 0.5, 0.6, 1.0])
    # shaped with c = 1: 0 + 0.9 * 0.5 - 0.2, 0 + 0.9 * 0.6 - 0.5, 1 + 0 - 0.6 = R above
    cfg = TrainConfig(rl=RLConfig(gamma=0.9), mira=MiRAConfig(enabled=True, estimator="gae", gae_lambda=0.5))
    assert episode_advantages(rewards, potentials, V, 1.0, cfg, 1.0).tolist() == pytest.approx([0.46325, 0.385, 0.5])
    assert MiRAConfig().gae_lambda == 0.95


def test_gae_config_checks() -> None:
    cfg = load_config(TrainConfig, None, ["mira.enabled=true", "mira.estimator=gae", "mira.gae_lambda=0.9"])
    assert (cfg.mira.estimator, cfg.mira.gae_lambda) == ("gae", 0.9)
    with pytest.raises(InputError, match=r"mira\.gae_lambda"):
        load_config(TrainConfig, None, ["mira.gae_lambda=1.2"])
    # GAE's TD errors put V (a success probability) beside r_t: the rewards must be on the 0/1 outcome scale.
    with pytest.raises(InputError, match=r"mira\.estimator gae.*rl\.reward outcome"):
        load_config(TrainConfig, None, ["mira.enabled=true", "mira.estimator=gae", "rl.reward=milestone"])
