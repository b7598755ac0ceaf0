"""The paper config's update rehearsed on this CPU (issue 24): ``configs/paper/sudoku9_atomic.yaml``'s shapes,
a random-init Qwen3 of width 64 and 2 layers, two gloo ranks under ``torchrun``, the trainer's own ``update``.

Scaled down: the paper's 1,664 turns per step (32 tasks x 4 samples x ~26 turns over M = 2 minibatches) become
8 (4 per rank), so the test runs in minutes on two cores; every row keeps the paper's shape (prompts of ~1,000
tokens, answers up to 2,048, a vocabulary of 151,936). Memory does not depend on the turn count (that is what
the test checks), so the scaled step says what the full one needs per micro-batch.

Tolerance of the one-shot comparison: SGD (lr 1, gradient clipped to norm 1), so a parameter's difference is its
gradient's; 5e-6 absolute on every element, against a step that moves the weights by more than 1e-3. The float32
sums over the rows and their ~1,000 positions run in another order; measured: 1.06e-6 at most (one element of
the 9.7M of the tied embedding), all the others within 1e-6.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from milepost.backends.logprobs import LOGITS_CHUNK_TOKENS

pytestmark = pytest.mark.rehearsal
STEP = Path(__file__).with_name("rehearsal_step.py")
ROOT = Path(__file__).resolve().parents[2]
VOCAB, MAX_ANSWER, TURNS, BUDGET = 151_936, 2048, 8, 4096


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    env.pop("WORLD_SIZE", None)
    return env


def _run(out: Path, *args: str, ranks: int = 2) -> list[dict]:
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)]
    command = [*(launch if ranks > 1 else [sys.executable]), str(STEP), str(out), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(Path(f"{out}.rank{r}.json").read_text()) for r in range(ranks)]


def test_paper_shapes_fit_the_micro_batch_budget_on_two_ranks(tmp_path: Path) -> None:
    ranks = _run(tmp_path / "step", "--turns", str(TURNS), "--micro", str(BUDGET))
    stats = ranks[0]["stats"]
    assert stats["turns"] == TURNS and stats["tokens"] > TURNS * 500  # answers of paper length were trained on
    # Every rank the same micro-steps (each forward and backward is a collective): the shares need 4 and 3
    # micro-batches at this budget, so the second rank ran one zero-weight step.
    assert ranks[0]["forwards"] == ranks[1]["forwards"] == stats["micro_steps"] == 4
    assert stats["padding_micro_steps"] == 1
    # Memory: the one-shot update would hold the share's float32 logits (rows x 2,049 x V, 5 GB per copy for
    # the 4 rows of a share, and three copies); the micro-batched one holds a chunk of the output head's logits
    # (LOGITS_CHUNK_TOKENS x V, a few copies in its backward) plus a micro-batch's activations, whatever the
    # minibatch.
    one_copy = TURNS // 2 * (MAX_ANSWER + 1) * VOCAB * 4 / 2**20
    chunk = LOGITS_CHUNK_TOKENS * VOCAB * 4 / 2**20
    bound = 6 * chunk + 256  # MB: chunk copies, a micro-batch's activations at width 64, gradients and AdamW
    for rank in ranks:
        grown = rank["rss_peak_mb"] - rank["rss_before_mb"]
        assert 0 < grown < bound < one_copy / 2, (grown, bound, one_copy)


def test_paper_shapes_take_the_one_shot_step(tmp_path: Path) -> None:
    """A small case at the paper's vocabulary and prompt lengths: one process with each minibatch in one
    forward (budget 0) against two ranks with every row a micro-batch of its own (budget 1)."""
    small = ["--turns", "6", "--max-answer", "48", "--optimizer", "sgd", "--save"]
    _run(tmp_path / "one", *small, "--micro", "0", ranks=1)
    two = _run(tmp_path / "two", *small, "--micro", "1")
    assert two[0]["forwards"] == two[1]["forwards"] == 3
    a, b = torch.load(tmp_path / "one"), torch.load(tmp_path / "two")
    assert a.keys() == b.keys()
    sys.path.insert(0, str(STEP.parent))
    try:
        from rehearsal_step import build_model
    finally:
        sys.path.pop(0)
    initial = build_model().state_dict()
    assert max((a[k] - initial[k]).abs().max().item() for k in a) > 1e-3  # the step moved the weights
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=0, atol=5e-6)
