"""Token in, token out with a real BPE tokenizer and chat template: SmolLM2-135M-Instruct's (49,152 tokens,
byte-level BPE, ChatML template; tests/data/smollm2_tokenizer, see its PROVENANCE.md).

Text does not round-trip through a BPE tokenizer: ``encode(decode(ids))`` differs from ``ids`` when the model
sampled a non-canonical split of a word, ordinary tokens that spell a special token, or half of a multi-byte
character. So the ids a turn trains on must be the ids it sampled, never its text re-encoded. The policy here is
a randomly initialised Llama with SmolLM2's vocabulary (the real model is 134.5M parameters; the import test in
tests/backends/test_models_import.py runs that one): its samples are close to uniform over the vocabulary, so
they are full of such cases.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend
from milepost.envs import make_env
from milepost.errors import InputError
from milepost.integrations.transcript import ConversationPolicy
from milepost.training.config import TrainConfig
from milepost.training.trainer import turn_samples

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "smollm2_tokenizer"
ENV_KWARGS = {"size": 4, "render": "hints", "max_steps": 3}

# A Qwen3-style template (the rule of Qwen3's own template, written small): an assistant message before the last
# user message loses its <think>...</think> block, and enable_thinking=false pre-fills an empty think block. So the
# rendering of turn k+1 is not turn k's rendering plus its answer.
THINK_DROPPING_TEMPLATE = (
    "{%- set ns = namespace(last=0) %}"
    "{%- for m in messages %}{% if m['role'] == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}"
    "{%- for m in messages %}"
    "{%- set content = m['content'] %}"
    "{%- if m['role'] == 'assistant' and loop.index0 < ns.last and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip() %}{% endif %}"
    "{{- '<|im_start|>' + m['role'] + '\n' + content + '<|im_end|>\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{% endif %}"
    "{%- endif %}"
)
# A template that replaces every earlier answer: no append-only transcript can be cut from it.
ANSWER_HIDING_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m['role'] == 'assistant' and not loop.last %}{{- '<|im_start|>assistant\n(earlier answer)<|im_end|>\n' }}"
    "{%- else %}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{% endif %}"
)


def load_smollm2_tokenizer(folder: Path) -> Any:
    """SmolLM2's tokenizer from the committed fixture (tokenizer.json is stored gzip-compressed)."""
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(FIXTURE / name, folder / name)
    with gzip.open(FIXTURE / "tokenizer.json.gz", "rb") as src, (folder / "tokenizer.json").open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_smollm2_tokenizer(tmp_path_factory.mktemp("smollm2-tokenizer"))


@pytest.fixture(scope="module")
def model(tokenizer: Any) -> Any:
    """A small random Llama over SmolLM2's vocabulary (the imported model's architecture, 1.6M parameters)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def backend_with(model: Any, tokenizer: Any, template: str | None = None, **kwargs: Any) -> HFBackend:
    tok = tokenizer
    if template is not None:
        import copy

        tok = copy.copy(tokenizer)
        tok.chat_template = template
    return HFBackend(model=model, tokenizer=tok, name="smollm2-vocab", **kwargs)


def ids_of(tokenizer: Any, pieces: list[str]) -> list[int]:
    """One id per piece, each encoded on its own (so a word split in two stays two tokens)."""
    out = []
    for piece in pieces:
        ids = tokenizer(piece, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, (piece, ids)
        out += ids
    return out


def reencoded(tokenizer: Any, ids: list[int]) -> list[int]:
    return list(tokenizer(tokenizer.decode(ids), add_special_tokens=False)["input_ids"])


def test_fixture_is_smollm2s_tokenizer(tokenizer: Any) -> None:
    assert len(tokenizer) == 49152
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert "You are a helpful AI assistant named SmolLM" in text  # the template's default system prompt


@pytest.mark.parametrize(
    ("pieces", "why"),
    [
        (["ACT", "ION"], "a non-canonical split of a word: the text re-encodes as one token"),
        ([" ", "value"], "a space sampled apart from its word: re-encoded they merge"),
        (
            ["<", "|", "im", "_", "end", "|", ">"],
            "ordinary tokens spelling the end-of-turn token: re-encoded it IS one",
        ),
        (["value", "(", "2"], "canonical: the round trip holds (control case)"),
    ],
)
def test_decode_encode_drift(tokenizer: Any, pieces: list[str], why: str) -> None:
    ids = ids_of(tokenizer, pieces)
    again = reencoded(tokenizer, ids)
    assert tokenizer.decode(again) == tokenizer.decode(ids)  # the same text...
    if "control" in why:
        assert again == ids
    else:
        assert again != ids, why  # ...other ids
    if "end-of-turn" in why:
        assert again == [tokenizer.eos_token_id]


def test_half_a_character_does_not_round_trip(tokenizer: Any) -> None:
    """A byte-level token holding the first byte of 'é' decodes to U+FFFD, which re-encodes as three other bytes."""
    whole = tokenizer("é", add_special_tokens=False)["input_ids"]
    lead = tokenizer.convert_tokens_to_ids("Ã")  # GPT-2 byte-level alphabet: byte 0xC3
    assert lead not in whole or len(whole) > 1
    assert tokenizer.decode([lead]) == "\ufffd"
    assert reencoded(tokenizer, [lead]) != [lead]


def _spy(backend: HFBackend) -> list[Any]:
    """Record every completion the backend returns (the ids the model actually sampled)."""
    seen: list[Any] = []
    generate = backend.generate

    def recording(requests: Any) -> Any:
        out = generate(requests)
        seen.extend(out)
        return out

    backend.generate = recording  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("template", [None, THINK_DROPPING_TEMPLATE], ids=["smollm2", "think-dropping"])
def test_episode_turns_keep_the_sampled_ids(model: Any, tokenizer: Any, template: str | None) -> None:
    """run_episodes records each turn's sampled ids and their behaviour log-probs; the RL trainer's samples
    are those ids, and the model scores them as it sampled them. Some sampled answers do not round-trip, so a
    record of the text re-encoded would train on other tokens."""
    backend = backend_with(model, tokenizer, template)
    sampled = _spy(backend)
    settings = AgentSettings(memory_k=2, temperature=1.0, max_new_tokens=10, batch_size=4)
    env = make_env("sudoku", **ENV_KWARGS)
    jobs = [Job(env.sample_task(seed)) for seed in range(4)]
    episodes = run_episodes(
        lambda: make_env("sudoku", **ENV_KWARGS), jobs, BackendPolicy(backend, settings), settings, progress=False
    )
    turns = [t for ep in episodes for t in ep.turns]
    assert len(turns) >= 8
    by_ids = {(tuple(c.prompt_ids), tuple(c.completion_ids)) for c in sampled}
    for turn in turns:
        assert (tuple(turn.prompt_ids), tuple(turn.completion_ids)) in by_ids
    drift = [t for t in turns if reencoded(tokenizer, t.completion_ids) != t.completion_ids]
    assert drift, "no sampled answer drifted under decode + encode: the test would not catch a re-encoding"
    samples = turn_samples(episodes, TrainConfig())
    assert [s.completion_ids for s in samples] == [t.completion_ids for t in turns if t.logprobs]
    scored = backend.completion_logprobs(sampled[:4], SamplingParams(temperature=1.0))
    for row, c in enumerate(sampled[:4]):
        assert scored[row, : len(c.completion_ids)].tolist() == pytest.approx(c.logprobs, abs=1e-4)


def _conversation(backend: HFBackend, n_episodes: int = 2) -> tuple[ConversationPolicy, list[Any]]:
    settings = AgentSettings(memory_k=0, temperature=1.0, max_new_tokens=8, batch_size=n_episodes)
    policy = ConversationPolicy(backend, settings)
    env = make_env("sudoku", **ENV_KWARGS)
    jobs = [Job(env.sample_task(seed), sample=i) for i, seed in enumerate(range(n_episodes))]
    episodes = run_episodes(lambda: make_env("sudoku", **ENV_KWARGS), jobs, policy, settings, progress=False)
    return policy, episodes


@pytest.mark.parametrize("template", [None, THINK_DROPPING_TEMPLATE], ids=["smollm2", "think-dropping"])
def test_multi_turn_transcript_appends_and_never_re_renders(model: Any, tokenizer: Any, template: str | None) -> None:
    """The TRL adapter's one-sequence episode: turn k+1's prompt is turn k's prompt + its sampled ids + the
    observation's tokens, whatever the template would render for the whole conversation."""
    kwargs = {"enable_thinking": False} if template else {}
    backend = backend_with(model, tokenizer, template, chat_template_kwargs=kwargs)
    policy, episodes = _conversation(backend)
    generation_prompt = backend.encode(GenerationRequest(messages=[{"role": "user", "content": "x"}]))[-4:]
    for ep in episodes:
        assert ep.steps >= 2
        for before, after in zip(ep.turns, ep.turns[1:]):
            head = before.prompt_ids + before.completion_ids
            assert after.prompt_ids[: len(head)] == head
        for turn in ep.turns:  # every turn ends with the same generation prompt (the empty think block included)
            assert turn.prompt_ids[-4:] == generation_prompt
        script = policy.transcripts[ep.sample]
        assert script.context()[: len(ep.turns[-1].prompt_ids)] == ep.turns[-1].prompt_ids


def test_think_dropping_template_is_not_prefix_stable(tokenizer: Any) -> None:
    """Why the transcript is built by appending: re-rendering the conversation after turn 1 changes turn 1."""
    import copy

    tok = copy.copy(tokenizer)
    tok.chat_template = THINK_DROPPING_TEMPLATE
    first = [{"role": "system", "content": "goal"}, {"role": "user", "content": "obs 1"}]
    answer = "<think>r1c1 must be 2</think> ACTION: value(2, r1c1)"
    turn1 = tok.apply_chat_template(first, tokenize=False, add_generation_prompt=True)
    later = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "obs 2"}]
    turn2 = tok.apply_chat_template(later, tokenize=False, add_generation_prompt=True)
    assert not turn2.startswith(turn1 + answer)
    assert "<think>r1c1" not in turn2


def test_template_that_hides_earlier_answers_is_refused(model: Any, tokenizer: Any) -> None:
    backend = backend_with(model, tokenizer, ANSWER_HIDING_TEMPLATE)
    with pytest.raises(InputError, match="rewrites earlier assistant"):
        _conversation(backend, n_episodes=1)
