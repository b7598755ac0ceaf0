"""scripts/device/paper_iteration.py at a tiny size on CPU (so it works the first time it meets a GPU), the
paper workload it derives, and the Qwen3 shapes it builds (counted on the meta device: no memory)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device" / "paper_iteration.py"


@pytest.fixture(scope="module")
def script() -> Any:
    spec = importlib.util.spec_from_file_location("paper_iteration", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["paper_iteration"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("size", "lo", "hi"), [("0.6b", 0.55e9, 0.65e9), ("1.7b", 1.6e9, 1.8e9)])
def test_qwen3_shapes_have_the_published_sizes(script: Any, size: str, lo: float, hi: float) -> None:
    model = script.build_model(size, torch.device("meta"), torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    assert lo < n < hi and next(model.parameters()).dtype == torch.bfloat16


def test_the_paper_workload_comes_from_an_oracle_episode(script: Any) -> None:
    work = script.paper_workload(SCRIPT.parents[2] / "configs" / "paper" / "sudoku9_atomic.yaml")
    assert (work.episodes, work.minibatches) == (32 * 4, 2)
    assert 21 <= work.turns <= 30  # L3-L4: goal distance 21-30, one fill per atomic turn
    assert 500 < work.prompt_tokens < 3000 and 5 < work.answer_tokens < 100
    assert script.qwen3_pieces("r1c3 12") == 7  # r 1 c 3 " " 1 2: digits one by one, as Qwen splits them


def test_tiny_iteration_runs_on_cpu(script: Any, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["--sizes", "tiny", "--device", "cpu", "--turns", "1", "--episodes", "3", "--prompt-tokens", "24"]
    (result,) = script.main([*args, "--new-tokens", "4", "--micro", "2", "--peak-tflops", "1", "--json", str(out)])
    assert result["engine"] == "hf" and result["generate_s"] > 0 and result["update_s"] > 0
    assert 0 < result["update_share"] < 1 and 0 < result["mfu_update"] < 1
    assert result["generate_tokens_per_s"] == pytest.approx(3 * 4 / result["generate_s"])
    assert json.loads(out.read_text())["results"][0]["size"] == "tiny"
