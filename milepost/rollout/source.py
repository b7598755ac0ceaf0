"""The trainer's rollout source: a generator backend plus the way it gets the trainer's weights.

``milepost train`` plays its episodes through ``source.backend`` and, after each update, calls
``source.sync(model, version)`` so that the generator serves the new weights before the next rollout. Three
sources, one protocol (``rollout.backend`` in the config):

* ``hf``: the trainer's own model behind an ``HFBackend``; there is nothing to push (:class:`SharedWeights`).
* ``vllm``: an in-process vLLM engine started on the trainer's weights; a push writes the weights once as
  safetensors and the engine reloads them in place (:class:`DiskReload` over ``VLLMBackend.reload_weights``).
* ``openai:MODEL@URL``: a vLLM server, checked first to temper its log-probs (``--logprobs-mode
  processed_logprobs``: :class:`LogprobsModeProbe`); prompts go as token ids to ``/v1/completions`` with token ids and
  log-probs requested; a push writes the weights where the server can read them and calls its reload route
  (:class:`ServerReload`: ``/collective_rpc`` under ``VLLM_SERVER_DEV_MODE=1``, then ``/reset_prefix_cache``).

Weight transfer sits behind :class:`WeightSync` alone, so a GPU fast path (vLLM's weight-transfer engine over
NCCL or CUDA IPC) is one more ``WeightSync`` and the trainer does not change.

Policy versions: version v is the policy after v updates. ``source.version`` is the version the generator
serves; episodes record it (``Episode.meta["policy_version"]``) and the trainer logs the staleness
(trainer version - rollout version), which the importance weights absorb.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from milepost.backends.base import Backend, BackendError, parse_policy_spec
from milepost.backends.logprobs import base_model
from milepost.errors import InputError
from milepost.rollout.sizing import (
    ModelShape,
    check_engine_fits,
    check_full_logprobs,
    context_window,
    device_bytes,
    engine_memory,
)
from milepost.rollout.vllm_worker import EXTENSION, RELOAD_METHOD, check_reload

WEIGHTS_FILE = "model.safetensors"


class WeightSync(Protocol):
    """Makes a generator serve a model's current weights."""

    def push(self, model: Any, tokenizer: Any) -> None:
        """Serve ``model``'s weights from the next request on."""
        ...


class RolloutSource(Protocol):
    """Where the trainer's episodes come from (see the module docstring).

    Attributes:
        name: label for logs (``hf``, ``vllm``, ``openai:MODEL@URL``).
        backend: the generator the agent loop drives; returns token ids and behaviour log-probs.
        version: the policy version the generator serves (-1 before the first sync).
    """

    name: str
    backend: Backend
    version: int

    def sync(self, model: Any, tokenizer: Any, version: int) -> float:
        """Push ``model`` (policy ``version``) to the generator; returns the seconds it took."""
        ...

    def close(self) -> None:
        """Release the generator (engine processes, HTTP connections)."""
        ...


@dataclass
class Generator:
    """A :class:`RolloutSource` made of a backend and a :class:`WeightSync`."""

    name: str
    backend: Backend
    weights: WeightSync
    version: int = -1

    def sync(self, model: Any, tokenizer: Any, version: int) -> float:
        start = time.perf_counter()
        self.weights.push(model, tokenizer)
        self.version = version
        return time.perf_counter() - start

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()


class SharedWeights:
    """The generator runs the trainer's own model object: every update is already served."""

    def push(self, model: Any, tokenizer: Any) -> None:
        return None


def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The model's weights as a plain (non-PEFT) model names them, LoRA adapters merged in, each tensor once.

    The merged weights are new tensors (:func:`lora_merged_weights`); the model's own weights are never written,
    so a push leaves the base weights bit-identical (peft's ``merge_adapter()`` / ``unmerge_adapter()`` add and
    subtract the adapter in place, which rounds the base weights a little at every push in bf16).

    Tied weights (an output head sharing the input embedding) appear once, under their first name, as
    ``save_pretrained`` writes them; vLLM's loaders skip the tied name.

    Raises:
        InputError: an adapter kind whose merge is not W + scale * B @ A (DoRA and other LoRA variants).
    """
    base = base_model(model)
    merged = lora_merged_weights(base)
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, tensor in base.state_dict().items():
        if "lora_" in name or tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        value = merged.get(name, tensor)
        out[name.replace(".base_layer.", ".")] = value.detach().to("cpu", copy=True).contiguous()
    return out


def lora_merged_weights(base: Any) -> dict[str, torch.Tensor]:
    """The merged weight (and bias) of every LoRA layer in ``base``, as new tensors keyed by their state-dict
    names (``...q_proj.base_layer.weight``); empty for a model without adapters.

    Each is what peft's own ``LoraLayer.merge`` (peft/tuners/lora/layer.py, ``Linear.merge``, non-safe branch)
    writes in place, computed on a copy: ``W += get_delta_weight(adapter)`` for each active adapter not yet
    merged (``check_adapters_to_merge``), where ``get_delta_weight`` is peft's ``transpose(B @ A,
    fan_in_fan_out) * scaling`` in the adapter's dtype; and ``bias += lora_B.bias * scaling`` with
    ``lora_bias``. Same operations in the same order, so the result equals ``merge_and_unload()``'s bit for bit.
    """
    try:
        from peft.tuners.lora import layer as lora
    except ImportError:  # no peft: no adapters
        return {}
    kinds = (lora.Linear, lora.Embedding, lora._ConvNd)
    out: dict[str, torch.Tensor] = {}
    for prefix, module in base.named_modules():
        if not isinstance(module, lora.LoraLayer):
            continue
        adapters = [a for a in module.active_adapters if a in module.lora_A and a not in module.merged_adapters]
        if not adapters:
            continue
        variants = [a for a in adapters if a in getattr(module, "lora_variant", {})]
        if variants or not isinstance(module, kinds):
            what = f"adapter {variants[0]!r} is a LoRA variant (DoRA...)" if variants else type(module).__name__
            raise InputError(f"weight push: {prefix}: {what}; only plain LoRA on Linear, Embedding, Conv merges here")
        layer: Any = module.get_base_layer()
        with torch.no_grad():
            weight = layer.weight.detach().clone()
            bias = layer.bias.detach().clone() if getattr(layer, "bias", None) is not None else None
            for adapter in adapters:
                weight += module.get_delta_weight(adapter)
                if module.lora_bias[adapter] and bias is not None:
                    bias += module.lora_B[adapter].bias * module.scaling[adapter]
        out[f"{prefix}.base_layer.weight"] = weight
        if bias is not None:
            out[f"{prefix}.base_layer.bias"] = bias
    return out


def write_weights(model: Any, tokenizer: Any, folder: Path) -> Path:
    """Write ``model``'s weights to ``folder/model.safetensors`` (atomically); the first call also writes the
    config and tokenizer, so the folder is a complete model directory an engine can start from."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "config.json").is_file():
        base = base_model(model)
        base.config.save_pretrained(folder)
        generation = getattr(base, "generation_config", None)
        if generation is not None:
            generation.save_pretrained(folder)
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            tokenizer.save_pretrained(folder)
    tmp = folder / f".{WEIGHTS_FILE}.tmp"
    save_file(merged_state_dict(model), str(tmp), metadata={"format": "pt"})
    os.replace(tmp, folder / WEIGHTS_FILE)
    return folder


@dataclass
class DiskReload:
    """Write the weights to ``folder`` once per push, then tell the generator to load them from there."""

    folder: Path
    reload: Callable[[Path], None]

    def push(self, model: Any, tokenizer: Any) -> None:
        self.reload(write_weights(model, tokenizer, self.folder))


class ServerReload:
    """The reload route of a vLLM server: ``POST /collective_rpc`` (milepost's worker extension reloads the
    folder in place), then ``POST /reset_prefix_cache``. The server must run with ``VLLM_SERVER_DEV_MODE=1``
    and ``--worker-extension-cls milepost.rollout.vllm_worker.WeightReload`` and see the same folder."""

    def __init__(self, base_url: str, timeout: float = 600.0, api_key_env: str = "OPENAI_API_KEY") -> None:
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.timeout = timeout
        key = os.environ.get(api_key_env)
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def __call__(self, folder: Path) -> None:
        import httpx

        body = {"method": RELOAD_METHOD, "kwargs": {"weights_path": str(folder.resolve())}}
        try:
            reply = httpx.post(f"{self.root}/collective_rpc", json=body, headers=self.headers, timeout=self.timeout)
            if reply.status_code == 404:
                raise BackendError(
                    f"{self.root} has no weight-reload route (/collective_rpc): start the vLLM server with "
                    f"VLLM_SERVER_DEV_MODE=1 and --worker-extension-cls {EXTENSION}"
                )
            if reply.status_code != 200:
                raise BackendError(f"{self.root}/collective_rpc: HTTP {reply.status_code}: {reply.text[:300]}")
            check_reload(json.loads(reply.text or "{}").get("results") or [], self.root)
            reply = httpx.post(f"{self.root}/reset_prefix_cache", headers=self.headers, timeout=self.timeout)
            if reply.status_code != 200 or not json.loads(reply.text or "{}").get("success", False):
                raise BackendError(f"{self.root}/reset_prefix_cache: HTTP {reply.status_code}: {reply.text[:300]}")
        except httpx.HTTPError as exc:
            raise BackendError(f"{self.root}: weight reload failed: {type(exc).__name__}: {exc}") from exc


PROBE_TEMPERATURE = 0.5


def tempering_applied(at_one: dict[str, float], at_t: dict[str, float], temperature: float) -> bool | None:
    """Whether a server's returned log-probs are tempered, from the top log-probs of one position sampled at
    temperature 1 (``at_one``) and at ``temperature`` (``at_t``), same prompt.

    ``processed_logprobs`` returns ``log_softmax(logits / T)``, so the gap between two tokens' log-probs scales by
    1 / T; ``raw_logprobs`` returns ``log_softmax(logits)`` whatever T, so the gap stays. Returns None when the
    probe cannot tell (fewer than two tokens in common, or no gap between them).
    """
    common = [k for k in at_one if k in at_t]
    if len(common) < 2:
        return None
    hi = max(common, key=lambda k: at_one[k])
    lo = min(common, key=lambda k: at_one[k])
    gap = at_one[hi] - at_one[lo]
    if gap < 1e-3:
        return None
    ratio = (at_t[hi] - at_t[lo]) / gap
    return abs(ratio - 1 / temperature) < abs(ratio - 1)


class LogprobsModeProbe:
    """Checks that a vLLM server returns the tempered log-probs the trainer needs (``--logprobs-mode
    processed_logprobs``; vLLM's default ``raw_logprobs`` ignores the temperature): one token of the same prompt at
    temperature 1 and at :data:`PROBE_TEMPERATURE`, top log-probs compared (:func:`tempering_applied`). vLLM
    does not report its ``logprobs_mode`` through the API, so the answers themselves are the evidence."""

    def __init__(self, base_url: str, model: str, timeout: float = 60.0, api_key_env: str = "OPENAI_API_KEY") -> None:
        root = base_url.rstrip("/")
        self.url = f"{root if root.endswith('/v1') else root + '/v1'}/completions"
        self.model = model
        self.timeout = timeout
        key = os.environ.get(api_key_env)
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def top_logprobs(self, prompt_ids: list[int], temperature: float) -> dict[str, float]:
        import httpx

        body = {
            "model": self.model,
            "prompt": prompt_ids,
            "max_tokens": 1,
            "temperature": temperature,
            "top_p": 1.0,
            "logprobs": 5,
            "seed": 0,
        }
        try:
            reply = httpx.post(self.url, json=body, headers=self.headers, timeout=self.timeout)
            reply.raise_for_status()
            top = reply.json()["choices"][0]["logprobs"]["top_logprobs"][0]
            return {str(k): float(v) for k, v in top.items()}
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError(f"{self.url}: the log-probs probe failed: {type(exc).__name__}: {exc}") from exc

    def check(self, prompt_ids: list[int]) -> None:
        """Raises ``InputError`` (one line, naming the setting) unless the server tempers its log-probs."""
        verdict = tempering_applied(
            self.top_logprobs(prompt_ids, 1.0), self.top_logprobs(prompt_ids, PROBE_TEMPERATURE), PROBE_TEMPERATURE
        )
        if verdict is not True:
            seen = "untempered log-probs" if verdict is False else "log-probs that do not show the temperature"
            raise InputError(
                f"rollout.backend openai: the server at {self.url} returns {seen}; the trainer needs log_softmax("
                "logits / T): start vLLM with --logprobs-mode processed_logprobs"
            )


def special_ids(model: Any, tokenizer: Any) -> tuple[int, frozenset[int]]:
    """(padding id, end-of-sequence ids) as the ``hf`` backend chooses them."""
    ids: set[int] = set()
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if gen_eos is not None:
        ids.update(int(i) for i in (gen_eos if isinstance(gen_eos, list | tuple) else [gen_eos]))
    if not ids:
        raise BackendError("the tokenizer has no end-of-sequence token, so no answer could end")
    pad = getattr(tokenizer, "pad_token_id", None)
    return (int(pad) if pad is not None else min(ids)), frozenset(ids)


def engine_window(cfg: Any, model: Any, device_memory: int | None = None) -> int:
    """The in-process vLLM engine's context window for ``cfg``, after checking that the engine fits its share of
    the device and can give the log-probs the sampler needs (``milepost.rollout.sizing``).

    Args:
        cfg: the training config (``rollout``, ``agent``, ``bf16``).
        model: the trainer's model (its config gives the shapes; its parameters the weight count).
        device_memory: bytes of the device the engine shares (default: the CUDA device's, else the RAM).

    Raises:
        InputError: a window with no room for the answers, an engine that does not fit, or whole-vocabulary
            log-probs at a large vocabulary.
    """
    base = base_model(model)
    params = sum(p.numel() for n, p in base.named_parameters() if "lora_" not in n)
    shape = ModelShape.from_config(base.config, params)
    rollout, agent = cfg.rollout, cfg.agent
    window = context_window(rollout.max_model_len, rollout.max_prompt_tokens, agent.max_new_tokens, shape.max_positions)
    if agent.top_p < 1.0 or agent.top_k > 0:
        check_full_logprobs(shape.vocab)
    total = device_memory if device_memory is not None else device_bytes()
    need = engine_memory(shape, 2 if cfg.bf16 else 4, window, total, rollout.gpu_memory_utilization)
    check_engine_fits(need, rollout.gpu_memory_utilization, total, window)
    return window


def make_rollout_source(cfg: Any, model: Any, tokenizer: Any, run_dir: Path) -> RolloutSource:
    """The rollout source ``cfg.rollout`` names, generating with ``model``'s weights (not yet synced for the
    remote kinds: the trainer's first ``sync`` pushes them).

    Raises:
        InputError: a spec that cannot give token ids and log-probs.
        BackendError: the generator cannot be built or reached.
    """
    rollout = cfg.rollout
    kind = rollout.backend.partition(":")[0]
    folder = Path(rollout.sync_dir) if rollout.sync_dir else run_dir / "rollout-weights"
    if kind == "hf":
        from milepost.backends.hf import HFBackend

        # Rollouts run at the precision the loss scores at, so on-policy rho is 1 (is/onpolicy_rho).
        backend = HFBackend(
            model=model, tokenizer=tokenizer, name=f"hf:{cfg.name}", autocast=torch.bfloat16 if cfg.bf16 else None
        )
        return Generator("hf", backend, SharedWeights())
    truncated = cfg.agent.top_p < 1.0 or cfg.agent.top_k > 0
    if kind == "vllm":
        from milepost.backends.vllm import VLLMBackend

        if rollout.backend != "vllm":
            raise InputError("rollout.backend: vllm takes no path (the engine starts on the trainer's weights)")
        window = engine_window(cfg, model)
        write_weights(model, tokenizer, folder)
        vllm_backend = VLLMBackend(
            folder,
            # Exact scoring log-probs under top-p / top-k need the whole vocabulary (see backends.vllm).
            logprobs="full" if truncated else "processed",
            dtype="bfloat16" if cfg.bf16 else "float32",
            gpu_memory_utilization=rollout.gpu_memory_utilization,
            max_model_len=window,
            seed=cfg.seed,
            name=f"vllm:{cfg.name}",
            enforce_eager=rollout.enforce_eager,
        )
        return Generator("vllm", vllm_backend, DiskReload(folder, vllm_backend.reload_weights))
    from milepost.backends.openai_compat import OpenAIBackend

    spec = parse_policy_spec(rollout.backend)
    if truncated:
        raise InputError(
            "rollout.backend openai: a server returns log-probs renormalised over the top-p / top-k survivors, "
            "not the untruncated ones the trainer scores; use agent.top_p 1 and agent.top_k 0, or rollout.backend vllm"
        )
    server = OpenAIBackend(
        spec.model,
        base_url=spec.base_url,
        use_chat=False,
        require_logprobs=True,
        require_token_ids=True,
        tokenizer=tokenizer,
    )
    probe_ids = list(tokenizer("1 2 3 4 5 6 7 8", add_special_tokens=False)["input_ids"])
    LogprobsModeProbe(spec.base_url or "", spec.model).check(probe_ids)
    return Generator(str(spec), server, DiskReload(folder, ServerReload(spec.base_url or "")))
