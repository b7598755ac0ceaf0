"""The processed distribution (temperature, top-k, top-p) that sampler and trainer share."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.backends.logprobs import MIN_SHARED_PREFIX, process_logits, sequence_logprobs, shared_prefix_length


def test_temperature_scales_then_normalises() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    got = process_logits(logits, 0.5)
    assert torch.allclose(got, torch.log_softmax(logits / 0.5, -1))
    assert torch.allclose(got.exp().sum(-1), torch.ones(1))


def test_greedy_uses_the_untempered_full_distribution() -> None:
    logits = torch.tensor([[3.0, 1.0, 0.5, 0.1]])
    got = process_logits(logits, 0.0, top_p=0.1, top_k=1)  # truncation is ignored at temperature 0
    assert torch.allclose(got, torch.log_softmax(logits, -1))


def test_top_k_keeps_k_tokens_renormalised() -> None:
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]])
    got = process_logits(logits, 1.0, top_k=2)
    assert torch.isinf(got[0, 2:]).all() and torch.isfinite(got[0, :2]).all()
    assert torch.allclose(got[0, :2], torch.log_softmax(logits[0, :2], -1))


def test_top_k_keeps_ties_at_the_kth_value() -> None:
    got = process_logits(torch.tensor([[2.0, 1.0, 1.0, 0.0]]), 1.0, top_k=2)
    assert torch.isfinite(got[0, :3]).all() and torch.isinf(got[0, 3])


def test_top_p_keeps_the_smallest_nucleus() -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().unsqueeze(0)
    for p, kept in [(0.5, 1), (0.51, 2), (0.8, 2), (0.81, 3), (0.96, 4), (1.0, 4)]:
        got = process_logits(logits, 1.0, top_p=p)
        assert int(torch.isfinite(got).sum()) == kept, p
        assert math.isclose(float(torch.logsumexp(got, -1)), 0.0, abs_tol=1e-6)
        expected = probs[:kept] / probs[:kept].sum()
        assert torch.allclose(got[0, :kept].exp(), expected, atol=1e-6)


def test_top_k_applies_before_top_p() -> None:
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    # top-k 2 leaves {0.4, 0.3} -> renormalised 0.571, 0.429; top-p 0.5 then keeps only the first.
    got = process_logits(logits, 1.0, top_p=0.5, top_k=2)
    assert int(torch.isfinite(got).sum()) == 1 and math.isclose(float(got[0, 0]), 0.0, abs_tol=1e-6)


def test_per_row_parameters_and_leading_dims() -> None:
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    temps, top_p, top_k = [0.0, 0.7, 1.3], [1.0, 0.9, 0.5], [0, 3, 0]
    got = process_logits(logits, temps, top_p, top_k)
    for b in range(3):
        assert torch.equal(got[b], process_logits(logits[b], temps[b], top_p[b], top_k[b]))
    assert int(torch.isfinite(got[1]).sum(-1).max()) <= 3


def test_gradient_flows_through_kept_tokens() -> None:
    logits = torch.randn(2, 7, requires_grad=True)
    out = process_logits(logits, 0.9, top_p=0.8)
    out.gather(-1, out.argmax(-1, keepdim=True)).sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_logits_are_processed_in_float32(dtype: torch.dtype) -> None:
    got = process_logits(torch.randn(2, 9).to(dtype), 0.8)
    assert got.dtype == torch.float32


def _grads(model: Any) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_shared_prefix_gives_the_same_logprobs_and_gradients(tiny_model_dir: Path) -> None:
    """Running the prefix every prompt shares once, then copying its keys and values to every row, changes
    neither the log-probs nor the gradients (which then sum over the rows through the copy)."""
    from milepost.backends.hf import HFBackend

    backend = HFBackend(tiny_model_dir)
    model = backend.model
    model.train()
    system = backend.tokenizer("Solve this 4x4 Sudoku: fill every empty cell so that each row holds 1-4.")["input_ids"]
    prompts = [system + backend.tokenizer(f"r{i}c{i % 3 + 1}: {i}" * (i + 1))["input_ids"] for i in range(5)]
    completions = [backend.tokenizer(f"value(r1c{i % 4 + 1}, {i % 4 + 1})")["input_ids"][: 3 + i] for i in range(5)]
    assert shared_prefix_length(prompts) >= MIN_SHARED_PREFIX
    out = {}
    for share in (False, True):
        model.zero_grad()
        logp = sequence_logprobs(model, prompts, completions, 0.8, pad_id=backend.pad_id, share_prefix=share)
        logp.sum().backward()
        out[share] = (logp.detach(), _grads(model))
    assert torch.allclose(out[True][0], out[False][0], atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5, rtol=1e-4) for a, b in zip(out[True][1], out[False][1], strict=True))
    model.eval()


def test_shared_prefix_length_leaves_each_row_a_token() -> None:
    same = [list(range(40))] * 3
    assert shared_prefix_length(same) == 39
    assert shared_prefix_length([list(range(40))]) == 0  # one row: nothing to share
    assert shared_prefix_length([list(range(40)), [*range(10), 99, *range(30)]]) == 0  # under the minimum
    assert shared_prefix_length([list(range(40)), [*range(20), 99]]) == 20


def _full_logits_logprobs(model: Any, prompts: list, completions: list, temperature: Any) -> torch.Tensor:
    """The reference: every position's full float32 logits, tempered, log-softmaxed, gathered (one row at a
    time, no padding)."""
    rows = []
    width = max(len(c) for c in completions)
    for p, c in zip(prompts, completions):
        t = temperature[len(rows)] if isinstance(temperature, list) else temperature
        ids = torch.tensor([p + c])
        logits = model(input_ids=ids).logits[0, len(p) - 1 : -1].float()  # (len(c), V)
        logp = torch.log_softmax(logits / (t if t > 0 else 1.0), -1).gather(-1, torch.tensor(c).unsqueeze(-1))[:, 0]
        rows.append(torch.nn.functional.pad(logp, (0, width - len(c))))
    return torch.stack(rows)


@pytest.mark.parametrize("chunk", [1, 5, 4096])
def test_chunked_scoring_equals_the_full_logits(tiny_model_dir: Path, chunk: int) -> None:
    """The output head run a chunk of positions at a time (each chunk recomputed in backward) gives the full
    logits' log-probs and gradients: 1e-5 on both (float32 rounding of the sums)."""
    from milepost.backends.hf import load_model

    model, _ = load_model(tiny_model_dir, torch.device("cpu"), torch.float32)
    model.train()
    gen = torch.Generator().manual_seed(3)
    vocab = model.config.vocab_size
    prompts = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (5, 9, 3)]
    completions = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (7, 2, 11)]
    temps = [0.8, 0.0, 1.3]
    out = {}
    for name in ("chunked", "full"):
        model.zero_grad()
        if name == "chunked":
            logp = sequence_logprobs(model, prompts, completions, temps, share_prefix=False, chunk_tokens=chunk)
        else:
            logp = _full_logits_logprobs(model, prompts, completions, temps)
        (logp * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
        out[name] = (logp.detach(), _grads(model))
    torch.testing.assert_close(out["chunked"][0], out["full"][0], atol=1e-5, rtol=1e-5)
    assert len(out["chunked"][1]) == len(out["full"][1]) > 0
    for a, b in zip(out["chunked"][1], out["full"][1], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_scoring_never_holds_the_whole_logits(tiny_model_dir: Path) -> None:
    """No tensor of the full (B, C, V) logits' size is created: the output head sees at most a chunk."""
    from milepost.backends.hf import load_model

    model, _ = load_model(tiny_model_dir, torch.device("cpu"), torch.float32)
    model.train()
    vocab = model.config.vocab_size
    rows, width, chunk = 4, 40, 32
    seen: list[tuple[int, ...]] = []
    model.get_output_embeddings().register_forward_hook(lambda m, a, out: seen.append(tuple(out.shape)))
    prompts = [[5, 6, 7]] * rows
    completions = [[(i + j) % (vocab - 3) + 3 for j in range(width)] for i in range(rows)]
    logp = sequence_logprobs(model, prompts, completions, 0.8, share_prefix=False, chunk_tokens=chunk)
    logp.sum().backward()
    assert logp.shape == (rows, width)
    assert seen and max(s[0] * s[1] for s in seen) <= chunk  # forward and backward recomputation alike
