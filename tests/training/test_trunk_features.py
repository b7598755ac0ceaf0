"""MiRA's trunk-critic features: the full model's last hidden state at each prompt's final token, computed by the
decoder trunk alone, so the output head never makes full-vocabulary logits for a batch of prompts."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaForCausalLM

from milepost.backends.tiny import tiny_config
from milepost.training.critics import trunk_features

PAD = 0


def small_model() -> LlamaForCausalLM:
    """milepost's own tiny Llama (``tiny_config``) at a test size."""
    torch.manual_seed(0)
    dims = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    cfg = tiny_config("llama", {**dims, "num_attention_heads": 4, "num_key_value_heads": 2}, 301, PAD, 1)
    return LlamaForCausalLM(cfg)


PROMPTS = [[5, 9, 13, 200, 7], [3, 4], [11, 250, 17, 19, 23, 29, 31], [300]]


def reference(model: LlamaForCausalLM, prompts: list[list[int]]) -> torch.Tensor:
    """Each prompt alone, no padding: the full model's final-layer hidden state at its last token."""
    rows = []
    with torch.no_grad():
        for p in prompts:
            out = model(input_ids=torch.tensor([p]), output_hidden_states=True)
            rows.append(out.hidden_states[-1][0, -1])
    return torch.stack(rows)


def head_calls(model: LlamaForCausalLM) -> list[tuple[int, ...]]:
    calls: list[tuple[int, ...]] = []
    model.lm_head.register_forward_hook(lambda _m, _i, out: calls.append(tuple(out.shape)))
    return calls


@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_features_equal_the_full_models_last_hidden_state_and_skip_the_output_head(batch_size: int) -> None:
    model = small_model()
    calls = head_calls(model)
    feats = trunk_features(model, PROMPTS, PAD, batch_size=batch_size)
    assert feats.shape == (len(PROMPTS), 32)
    assert calls == []  # no (B, T, V) logits were made
    torch.testing.assert_close(feats, reference(model, PROMPTS), atol=1e-5, rtol=1e-5)


def test_a_peft_wrapped_policy_uses_its_base_models_trunk_with_the_adapter() -> None:
    from peft import LoraConfig, get_peft_model

    model = small_model()
    calls = head_calls(model)
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    # a non-zero adapter, so features without it would differ
    for name, p in lora.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    lora.train()
    feats = trunk_features(lora, PROMPTS, PAD)
    assert lora.training  # the mode is restored
    assert calls == []
    with_adapter = reference(lora.get_base_model(), PROMPTS)
    torch.testing.assert_close(feats, with_adapter, atol=1e-5, rtol=1e-5)
    with lora.disable_adapter():
        without = reference(lora.get_base_model(), PROMPTS)
    assert (feats - without).abs().max() > 1e-3


def test_a_model_without_get_decoder_falls_back_to_the_full_forward() -> None:
    model = small_model()

    class NoDecoder(torch.nn.Module):
        """A causal LM exposing only ``forward`` (and ``config``), like a wrapper that hides the trunk."""

        def __init__(self, inner: LlamaForCausalLM) -> None:
            super().__init__()
            self.inner, self.config = inner, inner.config

        def forward(self, **kwargs: object) -> object:
            return self.inner(**kwargs)

    feats = trunk_features(NoDecoder(model), PROMPTS, PAD, batch_size=2)
    torch.testing.assert_close(feats, reference(model, PROMPTS), atol=1e-5, rtol=1e-5)
