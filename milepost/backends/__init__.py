"""Model backends: local ``transformers`` models (``hf``), an in-process vLLM engine (``vllm``, optional extra),
OpenAI-compatible servers (``openai``), and the ``tiny`` model builder. Importing this package registers the
``hf``, ``vllm`` and ``openai`` factories; the heavy modules (torch, transformers, vllm, openai) load only when a
backend is built.
"""

from __future__ import annotations

from typing import Any

from milepost.backends.base import (
    BACKENDS,
    Backend,
    BackendError,
    BackendUnavailableError,
    FinishReason,
    GenerationRequest,
    LogprobsUnavailableError,
    ModelLoadError,
    PolicySpec,
    SamplingParams,
    make_backend,
    parse_policy_spec,
)


def _make_hf(spec: PolicySpec, **options: Any) -> Backend:
    from milepost.backends.hf import HFBackend

    return HFBackend(spec.model, **options)


def _make_vllm(spec: PolicySpec, **options: Any) -> Backend:
    from milepost.backends.vllm import VLLMBackend

    return VLLMBackend(spec.model, **options)


def _make_openai(spec: PolicySpec, **options: Any) -> Backend:
    from milepost.backends.openai_compat import OpenAIBackend

    return OpenAIBackend(spec.model, base_url=spec.base_url, **options)


BACKENDS.register("hf", _make_hf)
BACKENDS.register("openai", _make_openai)
BACKENDS.register("vllm", _make_vllm)

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "FinishReason",
    "GenerationRequest",
    "LogprobsUnavailableError",
    "ModelLoadError",
    "PolicySpec",
    "SamplingParams",
    "make_backend",
    "parse_policy_spec",
]
