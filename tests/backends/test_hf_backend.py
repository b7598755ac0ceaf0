"""The hf backend: batched left-padded decoding, seeded sampling, behaviour log-probs, stop rules,
bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.backends.base import GenerationRequest, ModelLoadError, SamplingParams
from milepost.backends.hf import HFBackend, render_prompt
from milepost.backends.logprobs import process_logits, sequence_logprobs, shared_prefix_length
from milepost.envs import make_env

PROMPTS = ["Solve", "value(3, r1c2)", "ACTION: value(1, r2c2)\nREASON: box 1 is nearly done, so fill it"]


def sudoku_prompt(seed: int) -> str:
    env = make_env("sudoku", size=4)
    obs, _ = env.reset(seed=seed)
    return f"{env.goal_text()}\n{obs}\nACTION:"


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(tiny_model_dir)


def greedy(n: int = 12, **kw: Any) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_new_tokens=n, **kw)


def test_loads_on_cpu_in_float32(backend: HFBackend) -> None:
    assert backend.device.type == "cpu" and backend.dtype == torch.float32
    assert backend.max_context == 4096 and backend.name.startswith("hf:")


def test_batched_greedy_equals_one_at_a_time(backend: HFBackend) -> None:
    prompts = [*PROMPTS, sudoku_prompt(1)]
    batched = backend.generate([GenerationRequest(prompt=p, params=greedy()) for p in prompts])
    for prompt, got in zip(prompts, batched):
        alone = backend.generate([GenerationRequest(prompt=prompt, params=greedy())])[0]
        assert got.completion_ids == alone.completion_ids
        assert got.prompt_ids == alone.prompt_ids == backend.tokenizer(prompt)["input_ids"]
        assert got.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert got.text == backend.decode(got.completion_ids)
        assert got.finish_reason == "length" and len(got.completion_ids) == 12


def test_shared_prefix_prefill_gives_the_same_answers(backend: HFBackend, tiny_model_dir: Path) -> None:
    """Prefilling the prefix all rows share once (the default) changes no token and no log-probability."""
    prompts = [sudoku_prompt(s) for s in range(5)] + [sudoku_prompt(0)]  # the goal text is shared; one repeat
    ids = [backend.tokenizer(p)["input_ids"] for p in prompts]
    assert shared_prefix_length(ids) >= 16  # the shared-prefix path is the one taken
    params = [greedy(10, logprobs=True), SamplingParams(temperature=1.0, max_new_tokens=10, seed=3)] * 3
    requests = [GenerationRequest(prompt=p, params=q) for p, q in zip(prompts, params)]
    plain = HFBackend(tiny_model_dir, share_prefix=False)
    for got, ref in zip(backend.generate(requests), plain.generate(requests), strict=True):
        assert got.completion_ids == ref.completion_ids and got.prompt_ids == ref.prompt_ids
        assert got.logprobs == pytest.approx(ref.logprobs, abs=1e-4)
    same = [GenerationRequest(prompt=prompts[0], params=greedy(6))] * 3  # all but the last token shared
    assert [c.completion_ids for c in backend.generate(same)] == [plain.generate(same)[0].completion_ids] * 3


def test_greedy_matches_plain_model_generate(backend: HFBackend) -> None:
    prompt = sudoku_prompt(2)
    got = backend.generate([GenerationRequest(prompt=prompt, params=greedy(10))])[0]
    ids = torch.tensor([got.prompt_ids])
    ref = backend.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=10,
        min_new_tokens=10,
        pad_token_id=backend.pad_id,
    )
    assert got.completion_ids == ref[0, ids.shape[1] :].tolist()


def test_seeded_sampling_is_reproducible_and_batch_independent(backend: HFBackend) -> None:
    params = SamplingParams(temperature=1.0, max_new_tokens=16, seed=11)
    alone = backend.generate([GenerationRequest(prompt=PROMPTS[0], params=params)])[0]
    again = backend.generate([GenerationRequest(prompt=PROMPTS[0], params=params)])[0]
    assert alone.completion_ids == again.completion_ids
    others = [
        GenerationRequest(prompt=p, params=SamplingParams(temperature=1.0, max_new_tokens=n, seed=99))
        for p, n in zip(PROMPTS[1:], (4, 24))
    ]
    mixed = backend.generate([*others, GenerationRequest(prompt=PROMPTS[0], params=params)])[-1]
    assert mixed.completion_ids == alone.completion_ids
    other_seed = SamplingParams(temperature=1.0, max_new_tokens=16, seed=12)
    assert (
        backend.generate([GenerationRequest(prompt=PROMPTS[0], params=other_seed)])[0].completion_ids
        != alone.completion_ids
    )


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.0, max_new_tokens=10),
        SamplingParams(temperature=0.8, max_new_tokens=10, seed=1),
        SamplingParams(temperature=1.3, top_p=0.9, max_new_tokens=10, seed=2),
        SamplingParams(temperature=0.7, top_k=20, top_p=0.95, max_new_tokens=10, seed=3),
    ],
    ids=["greedy", "t0.8", "top_p", "top_k+top_p"],
)
def test_logprobs_match_recomputation(backend: HFBackend, params: SamplingParams) -> None:
    done = backend.generate([GenerationRequest(prompt=p, params=params) for p in PROMPTS])
    recomputed = backend.completion_logprobs(done, params)
    for b, c in enumerate(done):
        assert c.logprobs is not None and len(c.logprobs) == len(c.completion_ids)
        assert recomputed[b, : len(c.logprobs)].tolist() == pytest.approx(c.logprobs, abs=1e-5)


def test_truncation_limits_the_draws_but_not_the_scored_logprobs(backend: HFBackend) -> None:
    full = SamplingParams(temperature=1.0, max_new_tokens=8, seed=5)
    cut = SamplingParams(temperature=1.0, top_k=5, max_new_tokens=8, seed=5)
    a = backend.generate([GenerationRequest(prompt=PROMPTS[2], params=full)])[0]
    b = backend.generate([GenerationRequest(prompt=PROMPTS[2], params=cut)])[0]
    assert a.logprobs is not None and b.logprobs is not None
    # Every token drawn under top-k = 5 is among the 5 most likely of its step ...
    ids = torch.tensor([b.prompt_ids + b.completion_ids])
    with torch.no_grad():
        logits = backend.model(ids).logits[0, len(b.prompt_ids) - 1 : -1]  # (C, V)
    ranks = (logits > logits.gather(-1, torch.tensor(b.completion_ids).unsqueeze(-1))).sum(-1)
    assert int(ranks.max()) < 5
    # ... and is scored under the untruncated distribution, as the trainer scores it (finite for any token).
    expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(b.completion_ids).unsqueeze(-1))
    assert b.logprobs == pytest.approx(expected.squeeze(-1).tolist(), abs=1e-4)
    anything = sequence_logprobs(backend.model, [b.prompt_ids], [[int(logits[0].argmin())]], 1.0)
    assert torch.isfinite(anything).all()


def test_stop_string_cuts_ids_and_text_at_the_same_token(backend: HFBackend) -> None:
    free = backend.generate([GenerationRequest(prompt=PROMPTS[1], params=greedy(20))])[0]
    pieces = [backend.decode(free.completion_ids[: i + 1]) for i in range(len(free.completion_ids))]
    stop_at = 5
    stop = pieces[stop_at][len(pieces[stop_at - 1]) :][-1:] or "x"
    first = next(i for i, text in enumerate(pieces) if stop in text)
    got = backend.generate([GenerationRequest(prompt=PROMPTS[1], params=greedy(20, stop=[stop, "\u2603"]))])[0]
    assert got.finish_reason == "stop"
    assert got.completion_ids == free.completion_ids[: first + 1]
    assert got.text == backend.decode(got.completion_ids) and stop in got.text
    assert stop not in backend.decode(got.completion_ids[:-1])


def test_eos_ends_the_answer_and_later_tokens_are_dropped(tiny_model_dir: Path) -> None:
    backend = HFBackend(tiny_model_dir)
    free = backend.generate([GenerationRequest(prompt=PROMPTS[0], params=greedy(6))])[0]
    third = free.completion_ids[2]
    backend.eos_ids = frozenset({*backend.eos_ids, third})  # pretend the third token is an end token
    got = backend.generate([GenerationRequest(prompt=PROMPTS[0], params=greedy(6))])[0]
    cut = free.completion_ids.index(third) + 1
    assert got.finish_reason == "stop" and got.completion_ids == free.completion_ids[:cut]
    assert got.logprobs == pytest.approx(free.logprobs[:cut], abs=1e-5)


def test_context_overflow_and_window_limit(tiny_model_dir: Path) -> None:
    backend = HFBackend(tiny_model_dir, max_context=24)
    long_prompt = "value(1, r1c1) " * 10
    short = GenerationRequest(prompt="Solve", params=greedy(100))
    over = GenerationRequest(prompt=long_prompt, params=greedy(5))
    out = backend.generate([short, over])
    assert out[1].finish_reason == "context_overflow" and out[1].completion_ids == []
    assert "does not fit" in (out[1].error or "") and len(out[1].prompt_ids) >= 24
    assert out[0].finish_reason == "length" and len(out[0].prompt_ids) + len(out[0].completion_ids) == 24


def test_bad_requests_become_error_completions(backend: HFBackend) -> None:
    out = backend.generate(
        [
            GenerationRequest(prompt_ids=[10**6]),
            GenerationRequest(prompt=""),
            GenerationRequest(prompt="ok", params=greedy(2)),
        ]
    )
    assert [c.finish_reason for c in out] == ["error", "error", "length"]
    assert "outside the vocabulary" in (out[0].error or "") and "empty prompt" in (out[1].error or "")


def test_chat_requests_use_the_template(backend: HFBackend) -> None:
    req = GenerationRequest(messages=[{"role": "user", "content": "hi"}], params=greedy(3))
    text, templated = render_prompt(backend.tokenizer, req)
    assert templated and text.endswith("<|assistant|>\n")
    done = backend.generate([req])[0]
    assert done.prompt_ids == backend.tokenizer(text, add_special_tokens=False)["input_ids"]

    class Plain:
        chat_template = None

    plain, templated = render_prompt(Plain(), req)
    assert not templated and plain == "User: hi\n\nAssistant:"
    custom, _ = render_prompt(Plain(), req, lambda msgs: "|".join(m["content"] for m in msgs) + " ANSWER:")
    assert custom == "hi ANSWER:"


def test_prompt_ids_requests_skip_tokenisation(backend: HFBackend) -> None:
    ids = backend.tokenizer(PROMPTS[1])["input_ids"]
    a = backend.generate([GenerationRequest(prompt_ids=ids, params=greedy(5))])[0]
    b = backend.generate([GenerationRequest(prompt=PROMPTS[1], params=greedy(5))])[0]
    assert a.completion_ids == b.completion_ids and a.prompt_ids == ids


def test_in_memory_model_keeps_its_training_mode(backend: HFBackend) -> None:
    other = HFBackend(model=backend.model, tokenizer=backend.tokenizer, max_context=64)
    backend.model.train()
    try:
        assert other.generate([GenerationRequest(prompt="a", params=greedy(2))])[0].finish_reason == "length"
        assert backend.model.training
    finally:
        backend.model.eval()


def test_logprobs_can_be_left_out(backend: HFBackend) -> None:
    done = backend.generate([GenerationRequest(prompt="a", params=greedy(2, logprobs=False))])[0]
    assert done.logprobs is None and len(done.completion_ids) == 2


def test_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist") as info:
        HFBackend(tmp_path / "no-such-model")
    assert "\n" not in str(info.value)
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        HFBackend(tmp_path)


def test_tokenizer_problems_are_load_errors(backend: HFBackend) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    small = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
        )
    )
    with pytest.raises(ModelLoadError, match="embedding has 50"):
        HFBackend(model=small, tokenizer=backend.tokenizer)

    class NoEos:
        eos_token_id = None
        pad_token_id = 0

    small.generation_config.eos_token_id = None
    with pytest.raises(ModelLoadError, match="end-of-sequence"):
        HFBackend(model=small, tokenizer=NoEos())


def test_growing_kv_cache_matches_transformers_cache(backend: HFBackend) -> None:
    from transformers import DynamicCache

    from milepost.backends.kvcache import make_kv_cache
    from milepost.backends.logprobs import model_forward

    ids = torch.tensor([backend.tokenizer("value(1, r1c1) value(2, r1c2)")["input_ids"]] * 3)
    mask = torch.ones_like(ids)
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    caches = [make_kv_cache(backend.model, capacity=2), DynamicCache(config=backend.model.config)]
    with torch.no_grad():
        outs = [model_forward(backend.model, ids, mask, pos, c, logits_to_keep=1) for c in caches]
        keep = torch.tensor([0, 2])
        for c in caches:
            c.batch_select_indices(keep)
        for step in range(5):  # grows past the 2-position buffer several times
            tok = torch.full((2, 1), 7 + step)
            mask = torch.ones(2, ids.shape[1] + step + 1, dtype=torch.long)
            p = torch.full((2, 1), ids.shape[1] + step)
            outs = [model_forward(backend.model, tok, mask, p, c, logits_to_keep=1) for c in caches]
            assert torch.allclose(outs[0], outs[1], atol=1e-5)
    assert caches[0].get_seq_length() == caches[1].get_seq_length() == ids.shape[1] + 5


def test_draws_follow_the_processed_distribution(backend: HFBackend) -> None:
    n = 600
    reqs = [
        GenerationRequest(prompt=PROMPTS[1], params=SamplingParams(temperature=2.0, top_k=3, max_new_tokens=1, seed=s))
        for s in range(n)
    ]
    done = backend.generate(reqs)
    prompt = torch.tensor([done[0].prompt_ids])
    with torch.no_grad():
        logits = backend.model(prompt).logits[0, -1]  # (V,)
    sampled = process_logits(logits, 2.0, top_k=3).exp()  # what is drawn from
    scored = torch.log_softmax(logits.float() / 2.0, -1)  # what is reported (untruncated, tempered)
    counts: dict[int, int] = {}
    for c in done:
        assert c.logprobs is not None and c.logprobs[0] == pytest.approx(float(scored[c.completion_ids[0]]), abs=1e-4)
        counts[c.completion_ids[0]] = counts.get(c.completion_ids[0], 0) + 1
    assert len(counts) <= 3 and all(sampled[tok] > 0 for tok in counts)
    for tok, k in counts.items():  # within 4.5 standard deviations of the binomial mean
        prob = float(sampled[tok])
        sd = (n * prob * (1 - prob)) ** 0.5
        assert abs(k - n * prob) <= 4.5 * sd + 1


def test_relative_path_under_an_existing_folder_is_not_a_hub_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match="does not exist"):
        HFBackend("runs/tiny")
