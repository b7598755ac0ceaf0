"""An all-solved batch: returns that differ only by discounting are not blown up to unit variance (issue 59.14).

When every episode of a batch succeeds, the outcome carries no signal; the discounted returns gamma^(T - 1 - t)
differ by a few hundredths. Plain batch normalisation (``std_floor: 0``, the paper's) scales those differences to
unit variance, so the first turns of the longer episodes get advantages near -2 for their length alone: the
demo's atomic arm collapsed so at one seed. The default ``rl.std_floor`` keeps them within the floor's scale.
"""

from __future__ import annotations

import torch

from milepost.training.returns import advantages
from milepost.types import Episode, TerminationReason, Turn, zero_terms

GAMMA = 0.995
LENGTHS = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 12, 11]  # all-success episodes of S2-S3-like lengths


def _outcome_rewards(length: int, success: bool = True) -> torch.Tensor:
    r = torch.zeros(length)
    r[-1] = 1.0 if success else 0.0
    return r


def _bound(floor: float) -> float:
    """Largest |trajectory advantage| an all-solved batch can get: its returns lie in [gamma^(T_max - 1), 1]."""
    return (1.0 - GAMMA ** (max(LENGTHS) - 1)) / floor


def test_pure_function_keeps_an_all_solved_batch_within_the_floor() -> None:
    traj = [_outcome_rewards(n) for n in LENGTHS]
    steps = [torch.zeros(n) for n in LENGTHS]
    plain = torch.cat(advantages(traj, steps, gamma=GAMMA, alpha=0.2, std_floor=0.0))
    floored = torch.cat(advantages(traj, steps, gamma=GAMMA, alpha=0.2, std_floor=0.1))
    # The paper's normalisation: unit variance from discount differences alone.
    assert abs(float(plain.std(unbiased=False)) - 1.0) < 1e-3
    assert float(plain.abs().max()) > 1.5
    # The floor: bounded by (1 - gamma^(T_max - 1)) / floor, a small fraction of the unit scale.
    assert float(floored.abs().max()) <= _bound(0.1) + 1e-6
    assert float(floored.std(unbiased=False)) < 0.2
    # The same sign pattern: the floor rescales, it does not reorder.
    assert torch.equal(plain > 0, floored > 0)


def test_floor_leaves_a_batch_with_one_failure_in_32_as_the_paper_normalises_it() -> None:
    lengths = [4 + (i % 8) for i in range(32)]
    traj = [_outcome_rewards(n, success=i != 5) for i, n in enumerate(lengths)]
    steps = [torch.zeros(n) for n in lengths]
    plain = torch.cat(advantages(traj, steps, gamma=GAMMA, alpha=0.2, std_floor=0.0))
    floored = torch.cat(advantages(traj, steps, gamma=GAMMA, alpha=0.2, std_floor=0.1))
    assert torch.allclose(plain, floored)


def _episode(task: str, sample: int, length: int) -> Episode:
    turns = []
    for i in range(length):
        terms = zero_terms()
        terms["outcome"] = 1.0 if i == length - 1 else 0.0
        turns.append(
            Turn(
                index=i,
                observation=f"{task} state {i}",
                text="",
                actions=[f"a{i}"],
                reward=terms["outcome"],
                reward_terms=terms,
                subgoals_completed=[],
                remaining_distance=length - 1 - i,
                state_key=f"{task}:{i}",
            )
        )
    return Episode(task, "test", sample, 0, TerminationReason.SOLVED, True, length, length, turns=turns)


def test_trainer_advantage_path_by_default_bounds_an_all_solved_batch() -> None:
    from milepost.training.config import TrainConfig
    from milepost.training.trainer import batch_advantages

    cfg = TrainConfig()
    assert cfg.rl.estimator == "paper" and cfg.rl.normalisation == "batch"
    eps = [_episode(f"t{i // 4}", i % 4, n) for i, n in enumerate(LENGTHS)]
    adv = torch.cat(batch_advantages(eps, cfg))
    assert cfg.rl.gamma == GAMMA
    assert float(adv.abs().max()) <= _bound(cfg.rl.std_floor) + 1e-6
    assert float(adv.std(unbiased=False)) < 0.2  # not unit variance (the paper's normalisation gives 1.0)
