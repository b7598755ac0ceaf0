"""Shared fixtures. ``tiny_model_dir``: a randomly initialised tiny Qwen3 model directory, built once per
session (nothing is downloaded).

Hypothesis explores new random examples on every local run; with ``MILEPOST_CI=1`` (``.ci/run``) it draws the
same examples every time, so a landing is never decided by a lucky or unlucky draw.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)

if os.environ.get("MILEPOST_CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Rush Hour distance caches go to a folder of this test session, never to the user's ~/.cache."""
    os.environ["MILEPOST_CACHE_DIR"] = str(tmp_path_factory.mktemp("milepost-cache"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 0.5M-parameter Qwen3-architecture model with the environment-fitted tokenizer (seed 0)."""
    import torch

    from milepost.backends.tiny import build_tiny_model

    torch.set_num_threads(1)  # two shared cores: a second thread mostly spins waiting for the other
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen3-0.5m", arch="qwen3", size="0.5m", seed=0)
