"""The memory plan behind ``milepost memory``: what one training rank holds, byte by byte, before a GPU is rented.

The plan models the trainer as it runs (``training/trainer.py`` ``update``, ``distributed/fsdp.py``): FSDP2 over
N ranks, so the fp32 master parameters, their fp32 gradients and AdamW's two fp32 moments are each split N ways;
under ``bf16`` the layers are gathered and computed in bf16 (FSDP2 ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``); the update runs micro-batches of at most ``rl.micro_batch_tokens`` tokens (absent: a
rank's whole share of a minibatch at once, the behaviour before micro-batching), and rank 0 also holds the
rollout generator (``hf``: a full copy of the model; ``vllm``: ``rollout.gpu_memory_utilization`` of the GPU,
which holds the bf16 weights and the KV cache).

Peak of a rank during the update (bytes)::

    weights + gradients + optimizer + generator + reserve
        + max(activations(micro-batch) + logits(chunk) + gathered layers, optimizer step temporaries)

Activations per token per decoder layer, for the Qwen3 / Gemma 3 decoder layer of ``transformers`` (5.x,
``modeling_qwen3.py``: RMSNorm computes in fp32, q/k RMSNorm, rotary embedding, SDPA, SwiGLU MLP), counted as the
tensors autograd saves for backward, with ``a`` the bytes of the compute dtype (2 under bf16, 4 in fp32)::

    norms (input, post-attention): 2 x [(4 + a) h  saved by RMSNorm  +  a h  its output, saved by the projections]
        (fp32: the fp32 cast is the input itself, so 2 x 3 x 4 h)
    q / k RMSNorm + rotary:        (4 + 3a)(n_q + n_k)      (fp32 input, normalised, output, rotate_half copy)
    SDPA:                          a (2 n_q + 2 n_k) + 4 H   (q, k, v, output; fp32 log-sum-exp per head)
    o_proj input:                  a n_q                     (the transposed output made contiguous)
    SwiGLU MLP:                    4 a i                     (gate, act(gate), up, act x up)

with h the width, n_q = heads x head_dim, n_k = kv_heads x head_dim, i the MLP width. Gemma 3's two extra
norms per layer add (4 + 2a) h each. The padded rows' attention mask is kept once as booleans (B x T x T) and,
converted to the compute dtype by ``scaled_dot_product_attention``, once per layer (PyTorch
``aten/src/ATen/native/transformers/attention.cpp``, ``convert_boolean_attn_mask``). With activation
checkpointing a layer keeps only its input (a h per token) and one layer is recomputed at a time, after the
logits' backward has freed them.

Logits (``backends/logprobs.py`` ``sequence_logprobs``): the LM head's output over the answer columns, then the
fp32 copy, the tempered copy and ``log_softmax``: (a + 12) bytes per (row x answer column x vocabulary entry)
at the forward's peak (fp32: 12). With ``logits_chunk_tokens`` only that many tokens' logits exist at once.

Validated against measured peak RSS of ``update`` on a CPU at small shapes (``experiments/memory_validation.py``,
``docs/results/memory/``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from milepost.errors import InputError

GIB = 1024**3
RESERVE_BYTES = 1 * GIB
"""CUDA context, NCCL buffers and allocator slack per GPU: an allowance, not a measurement"""
VLLM_OVERHEAD_BYTES = 2 * GIB
"""vLLM's share left after weights and KV cache (its profiled activation peak, CUDA graphs): an allowance"""


@dataclass(frozen=True)
class ModelShape:
    """The shapes of a decoder-only LM that memory depends on (the fields of its ``transformers`` config)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    qk_norm: bool = True
    norms_per_layer: int = 2
    """RMSNorms around attention and MLP: 2 (Qwen3, Llama) or 4 (Gemma 3's pre and post norms)"""
    qkv_bias: bool = False
    vision_params: int = 0
    """parameters outside the decoder that are trained with it (Gemma 3's SigLIP tower and projector)"""
    source: str = ""

    @property
    def embedding_params(self) -> int:
        """Input embedding, plus the LM head when it is not tied to it."""
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer."""
        h, nq, nk = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = h * nq + 2 * h * nk + nq * h + (nq + 2 * nk if self.qkv_bias else 0)
        qk_norm = 2 * self.head_dim if self.qk_norm else 0
        return attention + qk_norm + 3 * h * self.intermediate + self.norms_per_layer * h

    @property
    def non_embedding_params(self) -> int:
        """Decoder layers and the final norm (the model cards' "non-embedding" count)."""
        return self.layers * self.layer_params + self.hidden

    @property
    def params(self) -> int:
        """Every trained parameter, counted once (a tied LM head shares the embedding)."""
        return self.embedding_params + self.non_embedding_params + self.vision_params

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV cache per token: 2 (K and V) x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def siglip_params(cfg: Any, text_hidden: int) -> int:
    """Parameters of a SigLIP vision tower (``SiglipVisionConfig``) and Gemma 3's projector into the decoder."""
    hv, iv, patch = cfg.hidden_size, cfg.intermediate_size, cfg.patch_size
    embed = cfg.num_channels * patch * patch * hv + hv + (cfg.image_size // patch) ** 2 * hv
    layer = 2 * 2 * hv + 4 * (hv * hv + hv) + (hv * iv + iv) + (iv * hv + hv)  # 2 norms, attention, MLP
    mlp = (hv * iv + iv) + (iv * hv + hv)
    # The attention-pooling head (probe, nn.MultiheadAttention, norm, MLP) exists only with vision_use_head.
    head = hv + 4 * (hv * hv + hv) + 2 * hv + mlp if getattr(cfg, "vision_use_head", False) else 0
    projector = hv * text_hidden + hv  # mm_input_projection_weight and mm_soft_emb_norm
    return embed + cfg.num_hidden_layers * layer + 2 * hv + head + projector


_DECODERS = ("qwen3", "qwen2", "llama", "mistral", "gemma3_text", "gemma3")


def shape_from_config(config: Any, name: str = "", source: str = "") -> ModelShape:
    """A :class:`ModelShape` from a ``transformers`` config (Qwen3, Qwen2, Llama, Mistral, Gemma 3).

    Raises:
        InputError: for another architecture.
    """
    kind = getattr(config, "model_type", "")
    if kind not in _DECODERS:
        raise InputError(f"model {name or kind}: architecture {kind!r} is not one of {', '.join(_DECODERS)}")
    vision = 0
    text = config
    if kind == "gemma3":  # the multimodal checkpoint: AutoModelForCausalLM loads (and trains) the vision tower too
        text = config.text_config
        vision = siglip_params(config.vision_config, text.hidden_size)
    gemma = text.model_type.startswith("gemma3")
    heads = text.num_attention_heads
    return ModelShape(
        name=name or kind,
        hidden=text.hidden_size,
        layers=text.num_hidden_layers,
        heads=heads,
        kv_heads=getattr(text, "num_key_value_heads", None) or heads,
        head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads,
        intermediate=text.intermediate_size,
        vocab=text.vocab_size,
        tied=bool(getattr(config, "tie_word_embeddings", getattr(text, "tie_word_embeddings", False))),
        qk_norm=text.model_type in ("qwen3", "gemma3_text"),
        norms_per_layer=4 if gemma else 2,
        qkv_bias=text.model_type == "qwen2",
        vision_params=vision,
        source=source,
    )


def _qwen3(hidden: int, intermediate: int, layers: int, heads: int, tied: bool) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=151936,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=tied,
        max_position_embeddings=40960,
    )


def _gemma3_12b() -> Any:
    from transformers import Gemma3Config, Gemma3TextConfig, SiglipVisionConfig

    text = Gemma3TextConfig(
        vocab_size=262208,
        hidden_size=3840,
        intermediate_size=15360,
        num_hidden_layers=48,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        sliding_window=1024,
    )
    vision = SiglipVisionConfig(
        hidden_size=1152,
        intermediate_size=4304,
        num_hidden_layers=27,
        num_attention_heads=16,
        image_size=896,
        patch_size=14,
        vision_use_head=False,
    )
    return Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), tie_word_embeddings=True)


@dataclass(frozen=True)
class NamedModel:
    build: Any
    """() -> the transformers config with the published hyperparameters"""
    source: str
    published: dict[str, float] = field(default_factory=dict)
    """parameter counts as the model card / report states them (``total``, ``non_embedding``, ``embedding``,
    ``vision``)"""


MODELS: dict[str, NamedModel] = {
    # Model cards and config.json at huggingface.co/Qwen/Qwen3-{0.6B,1.7B,8B} ("Number of Parameters" lines).
    "qwen3-0.6b": NamedModel(
        lambda: _qwen3(1024, 3072, 28, 16, True),
        "huggingface.co/Qwen/Qwen3-0.6B config.json; model card: 0.6B parameters, 0.44B non-embedding",
        {"total": 0.6e9, "non_embedding": 0.44e9},
    ),
    "qwen3-1.7b": NamedModel(
        lambda: _qwen3(2048, 6144, 28, 16, True),
        "huggingface.co/Qwen/Qwen3-1.7B config.json; model card: 1.7B parameters, 1.4B non-embedding",
        {"total": 1.7e9, "non_embedding": 1.4e9},
    ),
    "qwen3-8b": NamedModel(
        lambda: _qwen3(4096, 12288, 36, 32, False),
        "huggingface.co/Qwen/Qwen3-8B config.json; model card: 8.2B parameters, 6.95B non-embedding",
        {"total": 8.2e9, "non_embedding": 6.95e9},
    ),
    # google/gemma-3-12b-it config.json; Gemma 3 Technical Report (arXiv:2503.19786) Table 1.
    "gemma3-12b": NamedModel(
        _gemma3_12b,
        "huggingface.co/google/gemma-3-12b-it config.json; Gemma 3 report Table 1: vision encoder 417M, "
        "embedding 1,012M, non-embedding 10,759M",
        {"vision": 417e6, "embedding": 1012e6, "non_embedding": 10759e6},
    ),
}


def model_shape(name_or_path: str) -> ModelShape:
    """The shape of a named model (:data:`MODELS`) or of a local checkpoint folder's ``config.json``.

    Raises:
        InputError: for an unknown name, a folder without ``config.json`` or an unsupported architecture.
    """
    key = name_or_path.strip().lower()
    if key in MODELS:
        named = MODELS[key]
        return shape_from_config(named.build(), key, named.source)
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise InputError(f"--model {name_or_path!r}: not one of {', '.join(MODELS)} and no such folder")
    if not (path / "config.json").is_file():
        raise InputError(f"--model {name_or_path}: not a model folder (no config.json)")
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"--model {name_or_path}: config.json does not load ({str(exc).splitlines()[0]})") from None
    return shape_from_config(config, path.name, f"{path / 'config.json'}")


_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}
_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "kb": 1000, "mb": 1000**2}
_UNITS |= {"gb": 1000**3, "tb": 1000**4}


def parse_bytes(text: str) -> int:
    """``80GiB``, ``80GB``, ``141 GB``, ``81920MiB`` -> bytes (GiB / MiB binary; GB / MB decimal).

    Raises:
        InputError: for anything else, or a size that is not positive.
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InputError(f"--gpu-memory {text!r}: expected a size such as 80GiB, 80GB or 141GB")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise InputError(f"--gpu-memory {text!r}: must be positive")
    return value


@dataclass(frozen=True)
class Workload:
    """What one rank's update and rank 0's generator process (from a training config)."""

    rows: int
    """turns in this rank's share of one minibatch"""
    prompt_tokens: int
    answer_tokens: int
    micro_batch_tokens: int | None = None
    """token budget of a micro-batch (``rl.micro_batch_tokens``); None: the rank's share at once"""
    activation_checkpointing: bool = False
    logits_chunk_tokens: int | None = None
    """tokens whose logits exist at once (chunked log-probs); None: a micro-batch's answer tokens at once"""
    generation_rows: int = 1
    """sequences rank 0 generates at once (the iteration's episodes advance together)"""

    @property
    def row_tokens(self) -> int:
        return self.prompt_tokens + self.answer_tokens

    def micro_batch_rows(self) -> int:
        """Rows in one micro-batch: as many whole rows as the budget holds (at least one), at most the share."""
        if self.micro_batch_tokens is None:
            return self.rows
        return max(1, min(self.rows, self.micro_batch_tokens // self.row_tokens))


@dataclass(frozen=True)
class Setup:
    """How the run is laid out on the GPUs."""

    gpus: int
    gpu_memory: int
    bf16: bool = True
    rollout: str = "hf"
    """hf | vllm | openai (a server elsewhere: nothing on the trainer's GPUs)"""
    gpu_memory_utilization: float = 0.1
    max_model_len: int = 2048
    reserve: int = RESERVE_BYTES


def activation_bytes_per_token_layer(shape: ModelShape, act: int, masked: bool = True) -> int:
    """Bytes autograd saves per token in one decoder layer (the module docstring's formula), without the mask.

    ``act`` is the compute dtype's size (2: bf16, 4: fp32); ``masked``: the rows are padded, so transformers
    passes SDPA a mask and repeats K and V to every query head (``integrations/sdpa_attention.py``
    ``use_gqa_in_sdpa``: GQA only without a mask).
    """
    h, i = shape.hidden, shape.intermediate
    nq, nk = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    heads = shape.heads + shape.kv_heads
    if shape.norms_per_layer == 4:
        # Gemma3RMSNorm: the fp32 input and normalised value (8 h) and the rsqrt (4); only the two pre-norms'
        # outputs are saved by a projection, the post-norms' go into the residual sum.
        norms = 4 * (8 * h + 4) + 2 * act * h
        qk = 8 * (nq + nk) + 4 * heads
    else:
        # Qwen3RMSNorm: the fp32 input (4 h; in fp32 the input itself), the rsqrt (4), the normalised value cast
        # back (a h), and its output, saved by the projections after it (a h).
        norms = 2 * ((4 + act) * h + 4 + act * h)
        qk = (4 + act) * (nq + nk) + 4 * heads if shape.qk_norm else 0
    # The rotary product saves only cos / sin (shared by the layers); SDPA saves q, k, v, its output (which
    # o_proj reads as a view) and the fp32 log-sum-exp per head.
    kv = nq if masked else nk
    sdpa = act * (2 * nq + 2 * kv) + 4 * shape.heads
    return norms + qk + sdpa + 4 * act * i


def _final_bytes_per_token(shape: ModelShape, act: int) -> int:
    """Saved outside the layers per token: the final norm and its output, cos / sin, the input ids."""
    h = shape.hidden
    final = 8 * h + 4 + act * h if shape.norms_per_layer == 4 else (4 + act) * h + 4 + act * h
    return final + 2 * act * shape.head_dim + 8


@dataclass(frozen=True)
class Term:
    """One line of the plan."""

    name: str
    bytes: int
    note: str = ""


@dataclass
class RankPlan:
    """The peak of one rank, as its terms."""

    label: str
    persistent: list[Term]
    transient: list[Term]
    """the update's micro-step (activations, logits, gathered layers): summed with ``persistent``"""
    step: Term
    """the optimizer step's temporaries (after the activations are freed)"""
    rollout: list[Term] = field(default_factory=list)
    """rank 0 while it generates (the update's transients are freed then)"""

    @property
    def update_peak(self) -> int:
        base = sum(t.bytes for t in self.persistent)
        return base + max(sum(t.bytes for t in self.transient), self.step.bytes)

    @property
    def rollout_peak(self) -> int:
        return sum(t.bytes for t in self.persistent) + sum(t.bytes for t in self.rollout)

    @property
    def peak(self) -> int:
        return max(self.update_peak, self.rollout_peak)


def update_terms(shape: ModelShape, work: Workload, bf16: bool, gpus: int) -> tuple[list[Term], list[Term], Term]:
    """(persistent, micro-step, optimizer-step) terms of a training rank, without generator and reserve."""
    p = shape.params
    act = 2 if bf16 else 4
    persistent = [
        Term("weights", 4 * p // gpus, f"fp32 master parameters, {p:,} / {gpus} ranks"),
        Term("gradients", 4 * p // gpus, "fp32 (reduced in fp32), sharded"),
        Term("optimizer", 8 * p // gpus, "AdamW exp_avg + exp_avg_sq, fp32, sharded"),
    ]
    rows = work.micro_batch_rows()
    length = work.row_tokens
    tokens = rows * length
    masked = rows > 1  # one row has no padding: transformers then skips the mask (causal SDPA)
    per_layer = activation_bytes_per_token_layer(shape, act, masked)
    # The boolean (B, 1, T, T) mask lives through the forward; SDPA converts it to the compute dtype in every
    # layer and saves that copy for backward (torch attention.cpp convert_boolean_attn_mask; the CUDA
    # memory-efficient kernel takes the boolean as it is, so on a GPU this term is an upper bound).
    mask_layer = act * rows * length**2 if masked else 0
    ends = tokens * _final_bytes_per_token(shape, act) + (rows * length**2 if masked else 0)
    answer_cols = work.answer_tokens + 1  # the LM head runs on the answer columns and the last prompt column
    logit_tokens = rows * answer_cols
    if work.logits_chunk_tokens is not None:
        logit_tokens = min(logit_tokens, work.logits_chunk_tokens)
    logits = (act + 12) * logit_tokens * shape.vocab if act < 4 else 12 * logit_tokens * shape.vocab
    if work.activation_checkpointing:
        # Backward frees the logits before it recomputes the last layer, so the recomputed layer and the logits
        # never coexist: the activations term holds only what the recomputation adds beyond the logits.
        recompute = per_layer * tokens + mask_layer
        layers = shape.layers * act * shape.hidden * tokens + max(0, recompute - logits)
        how = f"checkpointed: {shape.layers} layer inputs; 1 layer recomputed after the logits are freed"
    else:
        layers = shape.layers * (per_layer * tokens + mask_layer)
        how = f"{per_layer:,} B/token/layer x {shape.layers} layers"
    transient = [
        Term("activations", layers + ends, f"{_rows(rows)} x {length:,} tokens, {how}"),
        Term("logits", logits, f"{logit_tokens:,} tokens x {shape.vocab:,} vocabulary"),
    ]
    if gpus > 1:
        # FSDP2 keeps the root's parameters (embeddings, LM head, vision tower) gathered through forward and
        # backward, and gathers one layer ahead; backward holds a layer's unsharded gradient and its fp32 copy.
        root = shape.embedding_params + shape.vision_params + shape.hidden
        gathered = act * (root + 2 * shape.layer_params) + (act + 4) * shape.layer_params
        transient.append(Term("gathered", gathered, "FSDP2 root + 2 layers unsharded, 1 layer's gradient"))
    step = Term("optimizer step", 4 * p // gpus, "foreach AdamW temporaries (after backward)")
    return persistent, transient, step


def plan(shape: ModelShape, work: Workload, setup: Setup) -> list[RankPlan]:
    """Rank 0 and the other ranks (one plan when ``setup.gpus`` is 1)."""
    persistent, transient, step = update_terms(shape, work, setup.bf16, setup.gpus)
    reserve = Term("reserve", setup.reserve, "CUDA context, NCCL, allocator slack (allowance)")
    kv_act = 2 if setup.bf16 else 4
    if setup.rollout == "vllm":
        share = int(setup.gpu_memory_utilization * setup.gpu_memory)
        generator = Term("generator", share, f"vLLM gpu_memory_utilization {setup.gpu_memory_utilization}")
        rollout: list[Term] = []  # the KV cache lives inside vLLM's share
    elif setup.rollout == "hf":
        generator = Term("generator", 4 * shape.params, "full fp32 copy of the model (hf rollout)")
        rows, length = work.generation_rows, work.row_tokens
        kv = rows * length * shape.kv_bytes_per_token(kv_act)
        rollout = [Term("KV cache", kv, f"{rows} sequences x {length:,} tokens (hf generate)")]
    else:
        generator = Term("generator", 0, "a server elsewhere")
        rollout = []
    main = RankPlan("rank 0", [*persistent, generator, reserve], transient, step, rollout)
    if setup.gpus == 1:
        return [main]
    others = RankPlan(f"ranks 1-{setup.gpus - 1}", [*persistent, reserve], transient, step)
    return [main, others]


def vllm_kv_cache(shape: ModelShape, setup: Setup) -> int:
    """Bytes vLLM has for its KV cache: its share less the bf16 weights and its own overhead."""
    return int(setup.gpu_memory_utilization * setup.gpu_memory) - 2 * shape.params - VLLM_OVERHEAD_BYTES


def largest_micro_batch(shape: ModelShape, work: Workload, setup: Setup) -> int:
    """Most whole rows per micro-batch that keep every rank within ``setup.gpu_memory`` (0: not even one)."""
    lo, hi = 0, 1
    while hi <= 1 << 20 and _fits_rows(shape, work, setup, hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # peak grows with rows: bisect between a fitting and a failing count
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _fits_rows(shape, work, setup, mid) else (lo, mid)
    return lo


def _fits_rows(shape: ModelShape, work: Workload, setup: Setup, rows: int) -> bool:
    trial = replace(work, rows=rows, micro_batch_tokens=None)
    return all(r.update_peak <= setup.gpu_memory for r in plan(shape, trial, setup))


def verdict(shape: ModelShape, work: Workload, setup: Setup) -> str:
    """``fits``, or the one line saying what does not."""
    ranks = plan(shape, work, setup)
    if setup.rollout == "vllm":
        if setup.max_model_len < work.row_tokens:
            return (
                f"does not fit: rollout.max_model_len {setup.max_model_len:,} < prompt + answer "
                f"{work.row_tokens:,} tokens (answers would be cut short)"
            )
        kv = vllm_kv_cache(shape, setup)
        need = setup.max_model_len * shape.kv_bytes_per_token()
        if kv < need:
            return (
                f"does not fit: vLLM's share ({setup.gpu_memory_utilization} x {_gib(setup.gpu_memory)}) leaves "
                f"{_gib(kv)} for the KV cache after {_gib(2 * shape.params)} of bf16 weights; one sequence of "
                f"{setup.max_model_len:,} tokens needs {_gib(need)}: raise rollout.gpu_memory_utilization"
            )
    for rank in ranks:
        if rank.peak > setup.gpu_memory:
            phase = "rollout" if rank.rollout_peak > rank.update_peak else "update"
            big = max([*rank.persistent, *rank.transient, *rank.rollout], key=lambda t: t.bytes)
            fix = _advice(shape, work, setup, rank, phase)
            return (
                f"does not fit: {rank.label} needs {_gib(rank.peak)} of {_gib(setup.gpu_memory)} in the {phase} "
                f"(largest: {big.name} {_gib(big.bytes)}); {fix}"
            )
    return "fits"


def _advice(shape: ModelShape, work: Workload, setup: Setup, rank: RankPlan, phase: str) -> str:
    if phase == "rollout":
        return "generate fewer sequences at once or use rollout.backend vllm"
    rows = largest_micro_batch(shape, work, setup)
    if rows >= 1:
        return f"set rl.micro_batch_tokens <= {rows * work.row_tokens:,} ({_rows(rows)})"
    if not work.activation_checkpointing:
        return "not one row fits: set rl.activation_checkpointing true"
    if setup.rollout != "openai":
        return "not one row fits: move generation off the trainer's GPUs or add GPUs"
    return "not one row fits: add GPUs"


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _gib(n: int) -> str:
    return f"{n / GIB:,.1f} GiB"


def report(shape: ModelShape, work: Workload, setup: Setup) -> str:
    """The plan as text: model, workload, a table of terms per rank, the largest micro-batch and the verdict."""
    ranks = plan(shape, work, setup)
    lines = [
        f"model {shape.name}: {shape.params:,} parameters ({shape.layers} layers, width {shape.hidden}, "
        f"vocabulary {shape.vocab:,}){'' if not shape.source else f'  [{shape.source}]'}",
        f"{setup.gpus} x {_gib(setup.gpu_memory)}, {'bf16' if setup.bf16 else 'fp32'}, rollout {setup.rollout}; "
        f"per rank and minibatch: {work.rows} rows of {work.prompt_tokens:,} + {work.answer_tokens:,} tokens; "
        f"micro-batch: "
        + (f"{work.micro_batch_tokens:,} tokens" if work.micro_batch_tokens else "the whole share (no budget)")
        + f" = {_rows(work.micro_batch_rows())}; activation checkpointing "
        + ("on" if work.activation_checkpointing else "off"),
        "",
    ]
    names: list[str] = []
    for rank in ranks:
        for t in [*rank.persistent, *rank.transient, rank.step, *rank.rollout]:
            if t.name not in names:
                names.append(t.name)
    head = f"{'term':<16}" + "".join(f"{r.label:>14}" for r in ranks) + "  note"
    lines += [head, "-" * len(head)]
    for name in names:
        cells, note = [], ""
        for rank in ranks:
            everything = [*rank.persistent, *rank.transient, rank.step, *rank.rollout]
            term = next((t for t in everything if t.name == name), None)
            cells.append(f"{_gib(term.bytes):>14}" if term else f"{'-':>14}")
            note = note or (term.note if term else "")
        lines.append(f"{name:<16}{''.join(cells)}  {note}")
    lines.append(f"{'peak (update)':<16}" + "".join(f"{_gib(r.update_peak):>14}" for r in ranks))
    if any(r.rollout for r in ranks):
        lines.append(f"{'peak (rollout)':<16}" + "".join(f"{_gib(r.rollout_peak):>14}" for r in ranks))
    lines.append("")
    if setup.rollout == "vllm":
        kv = vllm_kv_cache(shape, setup)
        per_seq = setup.max_model_len * shape.kv_bytes_per_token()
        seqs = max(kv, 0) // per_seq if per_seq else 0
        lines.append(
            f"vLLM KV cache: {_gib(max(kv, 0))} = {max(kv, 0) // shape.kv_bytes_per_token():,} tokens "
            f"({shape.kv_bytes_per_token():,} B/token), {seqs:,} sequences of max_model_len {setup.max_model_len:,}"
        )
    rows = largest_micro_batch(shape, work, setup)
    lines.append(
        f"largest micro-batch that fits: {_rows(rows)} = {rows * work.row_tokens:,} tokens (rl.micro_batch_tokens)"
        if rows
        else "largest micro-batch that fits: none (not one row)"
    )
    lines.append(verdict(shape, work, setup))
    return "\n".join(lines)


def workload_from_config(
    cfg: Any,
    gpus: int,
    prompt_tokens: int,
    turns_per_episode: int | None = None,
    answer_tokens: int | None = None,
    micro_batch_tokens: int | None = None,
    activation_checkpointing: bool | None = None,
    logits_chunk_tokens: int | None = None,
) -> Workload:
    """The workload of a :class:`~milepost.training.config.TrainConfig` on ``gpus`` ranks.

    A minibatch holds ``tasks_per_iter x samples_per_task x turns / minibatches`` turns (turns per episode default
    to ``env.max_steps``, the cap); rank r takes every N-th. Answers default to ``agent.max_new_tokens``. The
    micro-batch settings come from ``rl.micro_batch_tokens`` / ``rl.activation_checkpointing`` when the config
    has them, unless given here.
    """
    episodes = cfg.rl.tasks_per_iter * cfg.rl.samples_per_task
    turns = episodes * (turns_per_episode or cfg.env.max_steps)
    per_minibatch = math.ceil(turns / cfg.rl.minibatches)
    if micro_batch_tokens is None:
        micro_batch_tokens = getattr(cfg.rl, "micro_batch_tokens", None) or None
    if activation_checkpointing is None:
        activation_checkpointing = bool(getattr(cfg.rl, "activation_checkpointing", False))
    if logits_chunk_tokens is None:
        # The update scores the output head a chunk of positions at a time (backends.logprobs).
        from milepost.backends.logprobs import LOGITS_CHUNK_TOKENS

        logits_chunk_tokens = getattr(cfg.rl, "logits_chunk_tokens", None) or LOGITS_CHUNK_TOKENS
    return Workload(
        rows=math.ceil(per_minibatch / gpus),
        prompt_tokens=prompt_tokens,
        answer_tokens=answer_tokens or cfg.agent.max_new_tokens,
        micro_batch_tokens=micro_batch_tokens,
        activation_checkpointing=activation_checkpointing,
        logits_chunk_tokens=logits_chunk_tokens,
        generation_rows=episodes,
    )
