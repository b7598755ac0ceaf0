"""FSDP2 wraps each decoder layer: ``decoder_layers`` finds the text decoder's layers, also in a multimodal model."""

from __future__ import annotations

import torch
from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Qwen3Config, Qwen3ForCausalLM

from milepost.distributed.fsdp import decoder_layers


def test_a_causal_lm_gives_its_decoder_layers() -> None:
    model = Qwen3ForCausalLM(
        Qwen3Config(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            vocab_size=128,
        )
    )
    layers = decoder_layers(model)
    assert layers == list(model.model.layers)


def test_a_multimodal_model_gives_its_text_decoder_layers_not_the_vision_towers() -> None:
    torch.manual_seed(0)
    config = Gemma3Config(
        text_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "vocab_size": 300,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 3,
            "num_attention_heads": 2,
            "image_size": 28,
            "patch_size": 14,
        },
        mm_tokens_per_image=4,
    )
    model = Gemma3ForConditionalGeneration(config)
    layers = decoder_layers(model)
    # The vision tower (3 Siglip layers) comes first in modules(); the text decoder has 2.
    assert [type(layer).__name__ for layer in layers] == ["Gemma3DecoderLayer"] * 2
    assert layers == list(model.model.language_model.layers)
