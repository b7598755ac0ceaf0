"""SFT batch order: the plain shuffle and length-grouped batches (``sft.group_by_length``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milepost.training.sft import GROUP_CHUNK, sft_batches


def _padding(lengths: list[int], batches: list[list[int]]) -> float:
    """Share of padded positions when every batch is padded to its longest example."""
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return 1 - sum(lengths[i] for b in batches for i in b) / padded


def test_plain_order_is_the_concatenated_shuffles() -> None:
    rng, ref = random.Random(3), random.Random(3)
    flat: list[int] = []
    for _ in range(2):
        perm = list(range(10))
        ref.shuffle(perm)
        flat += perm
    batches = sft_batches([5] * 10, 2, 4, False, rng)
    assert batches == [flat[i : i + 4] for i in range(0, 20, 4)]


@settings(max_examples=50, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 700), min_size=1, max_size=400),
    batch=st.integers(1, 17),
    passes=st.integers(1, 3),
    seed=st.integers(0, 99),
)
def test_grouped_batches_cover_each_pass_once(lengths: list[int], batch: int, passes: int, seed: int) -> None:
    batches = sft_batches(lengths, passes, batch, True, random.Random(seed))
    per_pass = -(-len(lengths) // batch)
    assert len(batches) == passes * per_pass
    for p in range(passes):
        part = batches[p * per_pass : (p + 1) * per_pass]
        assert sorted(i for b in part for i in b) == list(range(len(lengths)))
        assert all(len(b) == batch for b in part[:-1])
    assert batches == sft_batches(lengths, passes, batch, True, random.Random(seed))


def test_grouping_cuts_padding_and_keeps_the_order_random() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(150, 650) for _ in range(3000)]
    plain = sft_batches(lengths, 1, 16, False, random.Random(1))
    grouped = sft_batches(lengths, 1, 16, True, random.Random(1))
    assert _padding(lengths, plain) > 0.3
    assert _padding(lengths, grouped) < 0.05
    # The batch order is shuffled: batch maxima are not sorted, and chunks of GROUP_CHUNK batches mix.
    maxima = [max(lengths[i] for i in b) for b in grouped]
    assert maxima != sorted(maxima, reverse=True) and maxima != sorted(maxima)
    assert len(grouped) > GROUP_CHUNK


@pytest.mark.parametrize("group", [False, True])
def test_short_data_still_gives_batches(group: bool) -> None:
    assert sft_batches([3, 9, 4], 2, 8, group, random.Random(0)) != []
