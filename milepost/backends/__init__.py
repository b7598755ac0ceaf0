"""Model backends: local ``transformers`` models (``hf``), OpenAI-compatible servers (``openai``), and the
``tiny`` model builder. Importing this package registers the ``hf`` and ``openai`` factories; the heavy
modules (torch, transformers, openai) load only when a backend is built.
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


def _make_openai(spec: PolicySpec, **options: Any) -> Backend:
    from milepost.backends.openai_compat import OpenAIBackend

    return OpenAIBackend(spec.model, base_url=spec.base_url, **options)


BACKENDS.register("hf", _make_hf)
BACKENDS.register("openai", _make_openai)

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
