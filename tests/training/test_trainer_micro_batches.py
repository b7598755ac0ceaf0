"""The update in micro-batches (``rl.micro_batch_tokens``) with gradient accumulation takes the same optimizer
step as the whole minibatch in one forward and backward, for rows of very different lengths and every objective.

Tolerance: the parameters after one SGD step agree to 1e-6 absolute (the step moves them by ~1e-2; only the
order of the float32 sums differs), the reported loss to 1e-5 relative. SGD, so a parameter's difference is
the gradient's; AdamW would divide each by its own magnitude (see tests/distributed/test_fsdp.py).
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.backends.hf import load_model
from milepost.backends.logprobs import sequence_logprobs
from milepost.distributed.fsdp import FSDP
from milepost.training.config import MiRAConfig, RLConfig, TrainConfig
from milepost.training.trainer import TurnSample, micro_batches, padded_tokens, update


def _samples(model: Any, lengths: list[tuple[int, int]], seed: int = 0) -> list[TurnSample]:
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    prompts = [torch.randint(3, vocab, (p,), generator=gen).tolist() for p, _ in lengths]
    answers = [torch.randint(3, vocab, (c,), generator=gen).tolist() for _, c in lengths]
    with torch.no_grad():
        old = sequence_logprobs(model, prompts, answers, 1.0, share_prefix=False)
    # Behaviour log-probs a little off the current ones, so the importance weights are not all 1.
    noise = 0.002 * torch.randn(old.shape, generator=gen)
    adv = torch.randn(len(lengths), generator=gen).tolist()
    return [TurnSample(p, a, (old[i, : len(a)] + noise[i, : len(a)]).tolist(), adv[i]) for i, (p, a) in
            enumerate(zip(prompts, answers))]  # fmt: skip


LENGTHS = [(3, 2), (40, 60), (5, 1), (12, 30), (60, 3), (4, 45), (20, 20)]  # (prompt, answer): very different


def _step(model: Any, samples: list[TurnSample], cfg: TrainConfig, ref: Any = None) -> tuple[dict, dict]:
    net = copy.deepcopy(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    stats = update(net, optimizer, samples, cfg, 0, random.Random(1), ref=None if ref is None else ref)
    return stats, {k: v.detach().clone() for k, v in net.state_dict().items()}


def _cfg(budget: int, **kw: Any) -> TrainConfig:
    rl = RLConfig(minibatches=1, micro_batch_tokens=budget, grad_clip=1e9, is_low=0.9, is_high=1.1)
    return TrainConfig(name="m", data="unused", rl=rl, device="cpu", **kw)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> Any:
    model, _ = load_model(tiny_model_dir, torch.device("cpu"), torch.float32)
    return model


@pytest.mark.parametrize("budget", [1, 90, 200])
def test_accumulated_micro_steps_equal_the_one_shot_step(tiny: Any, budget: int) -> None:
    samples = _samples(tiny, LENGTHS)
    one_stats, one = _step(tiny, samples, _cfg(0))
    micro_stats, micro = _step(tiny, samples, _cfg(budget))
    assert one_stats["micro_steps"] == 1 and micro_stats["micro_steps"] == len(micro_batches(samples, budget)) > 1
    assert micro_stats["loss"] == pytest.approx(one_stats["loss"], rel=1e-5)
    for key in ("turns", "tokens", "masked_frac", "onpolicy_rho_min", "onpolicy_rho_max"):
        assert micro_stats[key] == pytest.approx(one_stats[key], rel=1e-6), key
    initial = tiny.state_dict()
    assert max((one[k] - initial[k]).abs().max().item() for k in one) > 1e-3  # the step moved the weights
    for key in one:
        torch.testing.assert_close(micro[key], one[key], rtol=0, atol=1e-6)


def test_micro_steps_equal_the_one_shot_step_for_mira_mse_with_kl(tiny: Any) -> None:
    """The MSE regression (a mean over rows) and the KL term (a mean over answer tokens) are weighted by rows
    and by tokens respectively."""
    samples = _samples(tiny, LENGTHS, seed=1)
    ref = copy.deepcopy(tiny)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    mira = MiRAConfig(enabled=True, objective="mse", kl_coef=0.5, beta=0.5)
    one_stats, one = _step(tiny, samples, _cfg(0, mira=mira), ref)
    _, micro = _step(tiny, samples, _cfg(1, mira=mira), ref)
    assert one_stats["loss"] > 0
    for key in one:
        torch.testing.assert_close(micro[key], one[key], rtol=0, atol=1e-6)


def test_activation_checkpointing_takes_the_same_step(tiny: Any) -> None:
    from milepost.training.trainer import enable_activation_checkpointing

    samples = _samples(tiny, LENGTHS)
    _, plain = _step(tiny, samples, _cfg(200))
    checkpointed = copy.deepcopy(tiny)
    enable_activation_checkpointing(checkpointed)
    assert checkpointed.is_activation_checkpointing and not tiny.is_activation_checkpointing
    _, ckpt = _step(checkpointed, samples, _cfg(200))
    for key in plain:
        torch.testing.assert_close(ckpt[key], plain[key], rtol=0, atol=1e-6)


def test_micro_batches_keep_to_the_budget_and_bucket_by_length(tiny: Any) -> None:
    samples = _samples(tiny, LENGTHS)
    assert micro_batches(samples, 0) == [samples] == micro_batches(samples, padded_tokens(samples))
    for budget in (1, 90, 200, 400):
        parts = micro_batches(samples, budget)
        assert sorted(map(id, (s for part in parts for s in part))) == sorted(map(id, samples))  # each row once
        assert all(padded_tokens(part) <= budget or len(part) == 1 for part in parts)
    # Longest rows first, so a micro-batch pads little: at 200 tokens the (40, 60) and (4, 45) rows, which
    # would pad to 105 columns, never share one with the short (3, 2) and (5, 1) rows.
    parts = micro_batches(samples, 200)
    totals = [[len(s.prompt_ids) + len(s.completion_ids) for s in part] for part in parts]
    assert totals == sorted(totals, key=max, reverse=True)
    padded = sum(padded_tokens(part) for part in parts)
    assert padded < padded_tokens(samples) / 2  # the whole minibatch pads every row to 120 columns


class _RankOfTwo:
    """Rank ``rank`` of a simulated two-rank world for ``update``'s FSDP hooks: FSDP's own pure ``share``, ``split``
    and ``micro_steps``; ``reduce_stats`` records what it was asked to sum (one process: nothing to add)."""

    world = 2
    share = FSDP.share
    split = FSDP.split
    micro_steps = FSDP.micro_steps

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.reduced: list[tuple[dict[str, float], tuple[str, ...]]] = []

    def reduce_stats(self, stats: dict[str, float], sums: tuple[str, ...]) -> dict[str, float]:
        self.reduced.append((dict(stats), sums))
        return dict(stats)


def test_a_short_rank_pads_with_zero_weight_steps_and_takes_its_scaled_share(tiny: Any) -> None:
    # Three rows, one per micro-batch (budget 1): rank 0's share holds 2, rank 1's 1, so rank 1 runs one padding
    # step whose gradient must be exactly zero, and its loss is scaled by N * len(local) / len(batch) = 2 / 3.
    samples = _samples(tiny, [(3, 2), (40, 60), (5, 9)], seed=3)
    cfg = _cfg(1)
    rank = _RankOfTwo(1)
    net = copy.deepcopy(tiny)
    stats = update(net, torch.optim.SGD(net.parameters(), lr=0.1), samples, cfg, 0, random.Random(1), fsdp=rank)
    assert stats["micro_steps"] == 2 and stats["padding_micro_steps"] == 1 and stats["turns"] == 1
    assert len(rank.reduced) == 1
    reduced, sums = rank.reduced[0]
    assert sums == ("loss", "kept", "weight", "turns", "tokens", "padding") and reduced["padding"] == 1
    # The same rank's share alone, unscaled: parameter moves differ exactly by the scale.
    order = list(range(len(samples)))
    random.Random(1).shuffle(order)
    local = [samples[i] for i in order][1::2]
    _, alone = _step(tiny, local, cfg)
    base = tiny.state_dict()
    for name, value in net.state_dict().items():
        moved, moved_alone = value - base[name], alone[name] - base[name]
        assert torch.allclose(moved, moved_alone * (2 / 3), rtol=0.0, atol=1e-6), name  # moves ~1e-2


def test_a_rank_left_without_turns_counts_nothing_and_moves_nothing(tiny: Any) -> None:
    samples = _samples(tiny, [(6, 4)], seed=4)
    rank = _RankOfTwo(1)  # one row for two ranks: rank 1 runs it at scale 0
    net = copy.deepcopy(tiny)
    stats = update(net, torch.optim.SGD(net.parameters(), lr=0.1), samples, _cfg(0), 0, random.Random(1), fsdp=rank)
    assert stats["turns"] == 0 and stats["tokens"] == 0 and stats["micro_steps"] == 1
    assert rank.reduced[0][0]["kept"] == 0 and rank.reduced[0][0]["weight"] == 0
    for name, value in net.state_dict().items():
        assert torch.equal(value, tiny.state_dict()[name]), name
