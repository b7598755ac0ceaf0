"""Shared fixtures. ``tiny_model_dir``: a randomly initialised tiny Qwen3 model directory, built once per
session (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 0.5M-parameter Qwen3-architecture model with the environment-fitted tokenizer (seed 0)."""
    import torch

    from milepost.backends.tiny import build_tiny_model

    torch.set_num_threads(1)  # two shared cores: a second thread mostly spins waiting for the other
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen3-0.5m", arch="qwen3", size="0.5m", seed=0)
