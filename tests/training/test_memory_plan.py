"""The memory plan (``milepost.training.memory``, ``milepost memory``): parameter counts against the published
figures and against instantiated models, the activation formula against the tensors autograd saves, the plan's
arithmetic, and the command's output and errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from milepost.cli.main import main  # noqa: E402
from milepost.errors import InputError  # noqa: E402
from milepost.training.memory import (  # noqa: E402
    GIB,
    MODELS,
    ModelShape,
    Setup,
    Workload,
    activation_bytes_per_token_layer,
    largest_micro_batch,
    model_shape,
    parse_bytes,
    plan,
    shape_from_config,
    verdict,
)

PAPER = "configs/paper/sudoku9_atomic.yaml"

# The model cards state counts to two or three significant digits (0.6B, 1.7B, 8.2B; 0.44B, 1.4B, 6.95B), so a
# count computed from the shapes must agree to the rounding: within 3%. Gemma 3's report gives millions.
QWEN_TOLERANCE = 0.03
GEMMA_TOLERANCE = 0.01


@pytest.mark.parametrize("name", ["qwen3-0.6b", "qwen3-1.7b", "qwen3-8b"])
def test_qwen3_counts_match_the_model_cards(name: str) -> None:
    shape = model_shape(name)
    published = MODELS[name].published
    assert shape.params == pytest.approx(published["total"], rel=QWEN_TOLERANCE)
    assert shape.non_embedding_params == pytest.approx(published["non_embedding"], rel=QWEN_TOLERANCE)


def test_exact_counts_of_the_named_models() -> None:
    # The shapes' own arithmetic, written out: Qwen3-1.7B's is the count docs/scaling.md has used since wave 2.
    assert model_shape("qwen3-1.7b").params == 1_720_574_976
    assert model_shape("qwen3-8b").params == 8_190_735_360


def test_gemma3_12b_counts_match_the_report() -> None:
    shape = model_shape("gemma3-12b")
    published = MODELS["gemma3-12b"].published
    projector = 1152 * 3840 + 1152  # trained with the tower; the report's "vision encoder" is the tower alone
    assert shape.vision_params - projector == pytest.approx(published["vision"], rel=GEMMA_TOLERANCE)
    assert shape.embedding_params == pytest.approx(published["embedding"], rel=GEMMA_TOLERANCE)
    assert shape.non_embedding_params == pytest.approx(published["non_embedding"], rel=GEMMA_TOLERANCE)


def _meta_count(config: object) -> int:
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once


def _tiny_configs() -> list[object]:
    from transformers import Gemma3Config, LlamaConfig, Qwen2Config, Qwen3Config

    small = {"hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 3, "num_attention_heads": 4}
    return [
        Qwen3Config(vocab_size=301, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, **small),
        Qwen3Config(vocab_size=301, num_key_value_heads=1, head_dim=24, tie_word_embeddings=False, **small),
        Qwen2Config(vocab_size=257, num_key_value_heads=2, tie_word_embeddings=False, **small),
        LlamaConfig(vocab_size=257, num_key_value_heads=4, tie_word_embeddings=False, **small),
        Gemma3Config(
            text_config={"vocab_size": 263, "num_key_value_heads": 2, "head_dim": 16, **small},
            vision_config={
                "hidden_size": 32,
                "intermediate_size": 40,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "image_size": 56,
                "patch_size": 14,
            },
            mm_tokens_per_image=16,
        ),
    ]


@pytest.mark.parametrize("config", _tiny_configs(), ids=lambda c: f"{c.model_type}")
def test_formula_equals_an_instantiated_model(config: object) -> None:
    assert shape_from_config(config).params == _meta_count(config)


def _saved_bytes(layers: int, dtype: torch.dtype, padded: bool, rows: int = 2, length: int = 64) -> int:
    """Bytes of the non-parameter tensors autograd saves in a forward of a tiny Qwen3."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(dtype).train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(1, 128, (rows, length))
    mask = torch.ones(rows, length, dtype=torch.long)
    if padded:
        mask[1, 0] = 0
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
    return sum(saved.values())


@pytest.mark.parametrize("dtype,size", [(torch.float32, 4), (torch.bfloat16, 2)])
@pytest.mark.parametrize("padded", [False, True])
def test_activation_formula_counts_what_autograd_saves(dtype: torch.dtype, size: int, padded: bool) -> None:
    rows, length = 2, 64
    one_layer = _saved_bytes(2, dtype, padded) - _saved_bytes(1, dtype, padded)
    shape = ModelShape("tiny", 64, 1, 4, 2, 16, 160, 128, tied=True)
    mask = size * rows * length**2 if padded else 0  # the mask SDPA converts and saves in each layer
    assert one_layer == activation_bytes_per_token_layer(shape, size, padded) * rows * length + mask


def test_kv_cache_per_token() -> None:
    assert model_shape("qwen3-8b").kv_bytes_per_token() == 2 * 36 * 8 * 128 * 2


@pytest.mark.parametrize(
    "text,expected", [("80GiB", 80 * GIB), ("80 GB", 80 * 10**9), ("141GB", 141 * 10**9), ("0.5GiB", GIB // 2)]
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["80", "eighty", "80XB", "0GiB", "-1GiB", ""])
def test_parse_bytes_refuses(text: str) -> None:
    if text == "80":  # a bare number is bytes: allowed, but tiny
        assert parse_bytes(text) == 80
        return
    with pytest.raises(InputError, match="--gpu-memory"):
        parse_bytes(text)


def _work(**kw: object) -> Workload:
    defaults: dict[str, object] = {"rows": 208, "prompt_tokens": 1024, "answer_tokens": 2048, "generation_rows": 128}
    return Workload(**(defaults | kw))  # type: ignore[arg-type]


def test_sharding_divides_the_states_and_micro_batches_bound_activations() -> None:
    shape = model_shape("qwen3-1.7b")
    one = plan(shape, _work(micro_batch_tokens=12288), Setup(gpus=1, gpu_memory=80 * GIB))[0]
    eight = plan(shape, _work(micro_batch_tokens=12288), Setup(gpus=8, gpu_memory=80 * GIB))[1]
    terms = {t.name: t.bytes for t in one.persistent}
    assert terms["optimizer"] == 8 * shape.params
    assert {t.name: t.bytes for t in eight.persistent}["optimizer"] == 8 * shape.params // 8
    whole = plan(shape, _work(), Setup(gpus=8, gpu_memory=80 * GIB))[1]
    act = {t.name: t.bytes for t in whole.transient}["activations"]
    micro = {t.name: t.bytes for t in eight.transient}["activations"]
    assert act > 50 * micro  # 208 rows at once against 4 rows (12,288 tokens)


def test_checkpointing_and_chunks_shrink_their_terms() -> None:
    shape = model_shape("qwen3-8b")
    setup = Setup(gpus=8, gpu_memory=80 * GIB)
    plain = {t.name: t.bytes for t in plan(shape, _work(micro_batch_tokens=12288), setup)[1].transient}
    ckpt = _work(micro_batch_tokens=12288, activation_checkpointing=True, logits_chunk_tokens=1024)
    small = {t.name: t.bytes for t in plan(shape, ckpt, setup)[1].transient}
    assert small["activations"] < plain["activations"] / 10
    assert small["logits"] == 14 * 1024 * shape.vocab


def test_largest_micro_batch_is_the_edge_of_fitting() -> None:
    shape = model_shape("qwen3-1.7b")
    setup = Setup(gpus=8, gpu_memory=80 * GIB, rollout="vllm", gpu_memory_utilization=0.3, max_model_len=4096)
    work = _work()
    rows = largest_micro_batch(shape, work, setup)
    assert rows >= 1
    peak = [max(r.update_peak for r in plan(shape, _work(rows=n), setup)) for n in (rows, rows + 1)]
    assert peak[0] <= setup.gpu_memory < peak[1]


def test_verdicts() -> None:
    shape = model_shape("qwen3-1.7b")
    good = Setup(gpus=8, gpu_memory=80 * GIB, rollout="vllm", gpu_memory_utilization=0.3, max_model_len=4096)
    assert verdict(shape, _work(micro_batch_tokens=6144), good) == "fits"
    whole = verdict(shape, _work(), good)
    assert whole.startswith("does not fit: rank 0 needs") and "rl.micro_batch_tokens <=" in whole
    short = Setup(gpus=8, gpu_memory=80 * GIB, rollout="vllm", gpu_memory_utilization=0.3, max_model_len=2048)
    cut = verdict(shape, _work(micro_batch_tokens=6144), short)
    assert "rollout.max_model_len 2,048 < prompt + answer 3,072" in cut
    tiny_share = Setup(gpus=8, gpu_memory=80 * GIB, rollout="vllm", gpu_memory_utilization=0.1, max_model_len=4096)
    eight_b = verdict(model_shape("qwen3-8b"), _work(micro_batch_tokens=6144), tiny_share)
    assert "raise rollout.gpu_memory_utilization" in eight_b


def test_cli_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["memory", "--config", PAPER, "--model", "qwen3-1.7b", "--gpus", "8", "--gpu-memory", "80GiB"]
    args += ["--rollout", "vllm", "--set", "rollout.gpu_memory_utilization=0.3", "--set", "rollout.max_model_len=4096"]
    assert main([*args, "--micro-batch-tokens", "6144"]) == 0
    out = capsys.readouterr().out
    for word in ("weights", "gradients", "optimizer", "activations", "logits", "generator", "vLLM KV cache"):
        assert word in out
    assert "largest micro-batch that fits:" in out and out.rstrip().endswith("fits")
    assert main([*args, "--set", "rl.micro_batch_tokens=0"]) == 1  # the whole share at once: does not fit
    assert "does not fit" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--model", "qwen9-1t"], "--model 'qwen9-1t': not one of"),
        (["--model", "qwen3-1.7b", "--gpu-memory", "lots"], "--gpu-memory 'lots'"),
        (["--model", "qwen3-1.7b", "--gpus", "0"], "--gpus: must be >= 1"),
    ],
)
def test_cli_bad_input_is_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "--config", PAPER, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_missing_config(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    assert main(["memory", "--config", "no/such.yaml", "--model", "qwen3-1.7b"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_cli_reads_a_checkpoint_config(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from transformers import Qwen3Config

    folder = Path(str(tmp_path)) / "ckpt"
    Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2).save_pretrained(
        folder
    )
    shape = model_shape(str(folder))
    assert shape.layers == 2 and shape.hidden == 64
    (folder / "config.json").unlink()
    assert main(["memory", "--config", PAPER, "--model", str(folder)]) == 2
    assert "no config.json" in capsys.readouterr().err
