"""scripts/device/paper_iteration.py at a tiny size on CPU (so it works the first time it meets a GPU), the
paper workload it derives, and the Qwen3 shapes it builds (counted on the meta device: no memory)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
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


def test_tiny_iteration_runs_the_trainers_update(script: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--tiny`` plays and trains through ``milepost.training.trainer.update`` (no update of its own), with
    micro-batches (every row alone at its budget)."""
    import milepost.training.trainer as trainer

    calls: list[int] = []
    real = trainer.update

    def counted(*args: Any, **kwargs: Any) -> dict[str, float]:
        calls.append(len(args[2]))
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "update", counted)
    out = tmp_path / "r.json"
    (result,) = script.main(["--tiny", "--json", str(out)])
    assert calls == [3]  # 3 rows x 1 turn, in one call of the trainer's update
    assert result["engine"] == "hf" and result["generate_s"] > 0 and result["update_s"] > 0
    assert result["micro_steps"] == 3  # 2 + 1 rows in the two minibatches, one micro-batch each
    assert 0 < result["update_share"] < 1 and 0 < result["mfu_update"] < 1
    assert result["generate_tokens_per_s"] == pytest.approx(3 * 4 / result["generate_s"])
    assert json.loads(out.read_text())["results"][0]["size"] == "tiny"


def test_mfu_counts_the_head_on_answer_tokens_only(script: Any) -> None:
    params, head = 1_000_000, 300_000
    longer_prompt = script.update_flops(params, head, 100, 4, 1) - script.update_flops(params, head, 0, 4, 1)
    assert longer_prompt == 6 * (params - head) * 100  # prompt tokens never reach the head
    longer_answer = script.update_flops(params, head, 0, 5, 1) - script.update_flops(params, head, 0, 4, 1)
    assert longer_answer == 6 * params
    assert script.generate_flops(params, head, 100, 4, 2) == 2 * 2 * ((params - head) * 104 + head * 4)


def test_runs_from_the_repository_root_as_a_module(tmp_path: Path) -> None:
    root = SCRIPT.parents[2]
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    out = tmp_path / "m.json"
    command = [sys.executable, "-m", "scripts.device.paper_iteration", "--tiny", "--json", str(out)]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| tiny |" in done.stdout and json.loads(out.read_text())["results"][0]["micro_steps"] == 3
