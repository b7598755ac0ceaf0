"""FSDP2 under ``torchrun`` on this CPU (gloo, two processes): one update equals the single-process update on
the same batch, and a two-process ``milepost train`` resumed from a checkpoint ends exactly like the
uninterrupted run.

Tolerances of the one-step check: the loss agrees to 1e-5 relative (only the order of the float sums differs).
The parameters agree to 1e-6 for at least 99.9% of the elements and to 5e-5 for all (3% of the 1.7e-3 that
each parameter moves): AdamW divides each gradient by its own magnitude, so an element whose gradient is
near zero turns a last-bit difference of the gradient's sum into a visible difference of its step (the step's
AdamW uses eps 1e-6 for that reason: at 1e-8 one element ended 5.3e-5 apart in a CI run).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from milepost.config import EnvConfig, to_yaml
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.io import read_jsonl
from milepost.training.checkpoint import load_checkpoint_state
from milepost.training.config import AgentConfig, EvalConfig, RLConfig, TrainConfig

pytestmark = pytest.mark.distributed
STEP = Path(__file__).with_name("fsdp_step.py")
ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    """The subprocesses import this checkout's milepost (a script's own folder comes first on its path)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    env.pop("WORLD_SIZE", None)
    return env


def _torchrun(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = _env()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _one_and_two(model_dir: Path, tmp_path: Path, *args: str) -> tuple[dict, dict, Path]:
    """One process, each minibatch in one forward (budget 0), and two ranks with ``args``."""
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    single = [sys.executable, str(STEP), str(model_dir), str(one), "0", *args[1:]]
    subprocess.run(single, check=True, env=_env(), timeout=600)
    _torchrun(str(STEP), str(model_dir), str(two), *args)
    return torch.load(one), torch.load(two), two


def _moved(model_dir: Path, state: dict[str, torch.Tensor]) -> float:
    initial = load_initial(model_dir)
    return max((state[k] - initial[k]).abs().max().item() for k in initial)


def test_one_fsdp_step_equals_the_single_process_step(tiny_model_dir: Path, tmp_path: Path) -> None:
    a, b, two = _one_and_two(tiny_model_dir, tmp_path)  # two ranks at the default budget: one micro-step each
    assert b["stats"]["turns"] == a["stats"]["turns"] == 7 and b["stats"]["tokens"] == a["stats"]["tokens"]
    assert b["stats"]["loss"] == pytest.approx(a["stats"]["loss"], rel=1e-5)
    assert b["stats"]["grad_norm"] == pytest.approx(a["stats"]["grad_norm"], rel=1e-5)
    assert b["stats"]["masked_frac"] == a["stats"]["masked_frac"]
    assert a["state"].keys() == b["state"].keys()
    assert _moved(tiny_model_dir, a["state"]) > 1e-3  # the step moved the weights: the comparison is not vacuous
    close = sum(int(((a["state"][k] - b["state"][k]).abs() <= 1e-6).sum()) for k in a["state"])
    total = sum(v.numel() for v in a["state"].values())
    assert close >= 0.999 * total
    for key, value in a["state"].items():
        torch.testing.assert_close(b["state"][key], value, rtol=0, atol=5e-5)
    assert [json.loads(Path(f"{two}.rank{r}.json").read_text())["micro_steps"] for r in (0, 1)] == [2, 2]


def test_ranks_with_different_micro_step_counts_take_the_one_shot_step(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Budget 1: every row is a micro-batch of its own, so the 3-turn minibatch gives rank 0 two micro-steps and
    rank 1 one, which pads with a zero-weight step (without it the collectives would wait for ever). SGD, so
    the parameters' agreement is the gradients': 1e-6 absolute on every element (a move of ~1e-2)."""
    a, b, two = _one_and_two(tiny_model_dir, tmp_path, "1", "sgd")
    assert b["stats"]["turns"] == a["stats"]["turns"] == 7
    assert b["stats"]["loss"] == pytest.approx(a["stats"]["loss"], rel=1e-5)
    assert _moved(tiny_model_dir, a["state"]) > 1e-3
    for key, value in a["state"].items():
        torch.testing.assert_close(b["state"][key], value, rtol=0, atol=1e-6)
    ranks = [json.loads(Path(f"{two}.rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1]  # the same micro-steps and forwards on every rank
    assert ranks[0]["micro_steps"] == ranks[0]["forwards"] == 4  # max(2, 2) + max(2, 1)
    assert b["stats"]["padding_micro_steps"] == 1  # summed over ranks: rank 1's one zero-weight step


def test_ranks_wait_for_rank_0_up_to_the_configured_timeout(tmp_path: Path) -> None:
    """Rank 1 waits on the gloo group while rank 0 works alone for 8 s: within a 1-minute timeout the episodes
    arrive; with a 2-second one the wait fails instead of hanging."""
    wait = str(STEP.with_name("fsdp_wait.py"))
    ok = _torchrun(wait, "1", "8")
    assert "rank 1 received 3" in ok.stdout
    short = _torchrun(wait, "0.033", "8", check=False)
    assert short.returncode != 0
    assert "rank 1 received" not in short.stdout
    assert "timed out" in (short.stdout + short.stderr).lower() or "timeout" in (short.stdout + short.stderr).lower()


def load_initial(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(model_dir / "model.safetensors")


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    splits: dict[str, list] = {"train": [], "test": []}
    for split, count in (("train", 12), ("test", 2)):
        for i in range(count):
            empties = rng.randint(3, 4)
            task = make_task(
                *generate_easy(4, empties, 5, i + 100 * (split == "test")), level="S1", split=split, index=i
            )
            splits[split].append(task)
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 5})


def test_two_process_training_resumes_exactly(tiny_model_dir: Path, data4: Path, tmp_path: Path) -> None:
    cfg = TrainConfig(
        name="fsdp",
        model=str(tiny_model_dir),
        data=str(data4),
        env=EnvConfig(size=4, max_steps=4, render="cells"),
        agent=AgentConfig(memory_k=1, max_new_tokens=12),
        rl=RLConfig(iterations=2, tasks_per_iter=2, samples_per_task=2, minibatches=2, lr=1e-3),
        eval=EvalConfig(n=1, ks=[1], limit=1),
        threads=1,
        checkpoint_every=1,
        device="cpu",
    )
    config = tmp_path / "fsdp.yaml"
    config.write_text(to_yaml(cfg))
    full = tmp_path / "full"
    train = ["-m", "milepost", "train", "--config", str(config), "--no-progress"]
    _torchrun(*train, "--out", str(full))
    # The state a crash after the first checkpoint leaves: its checkpoint, a second metrics row to be redone.
    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "final")
    shutil.rmtree(cut / "checkpoints" / "step-000002")
    (cut / "checkpoints" / "latest").write_text("step-000001\n")
    _torchrun(*train, "--out", str(cut), "--resume")
    ckpt = Path("checkpoints") / "step-000002"
    a, b = load_tensors(full / ckpt / "model.safetensors"), load_tensors(cut / ckpt / "model.safetensors")
    assert a.keys() == b.keys() and a
    assert all(torch.equal(a[k], b[k]) for k in a)
    # The optimizer (AdamW moments, step counts), as a single-process run indexes it. (The trainer derives every
    # random choice from (seed, iteration) and does not restore the global RNG state, so that is not compared.)
    opt_a, opt_b = (load_checkpoint_state(run / ckpt)[0]["optimizer"] for run in (full, cut))
    assert json.dumps(opt_a["param_groups"]) == json.dumps(opt_b["param_groups"]) and len(opt_a["state"]) == len(a)
    for i, state in opt_a["state"].items():
        assert state.keys() == opt_b["state"][i].keys() == {"step", "exp_avg", "exp_avg_sq"}
        assert all(torch.equal(state[k], opt_b["state"][i][k]) for k in state)
    assert (
        load_tensors(full / "final" / "model.safetensors").keys()
        == load_tensors(full / ckpt / "model.safetensors").keys()
    )

    def rows(run: Path) -> list[dict]:
        return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in read_jsonl(run / "metrics.jsonl")]

    assert rows(full) == rows(cut) and len(rows(full)) == 2
    assert rows(full)[0]["train/turns"] > 0  # the update saw turns from the episodes rank 0 played
    assert json.loads((full / ckpt / "checkpoint.json").read_text())["step"] == 2


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path)


def test_rank_0_loads_once_and_keeps_a_generator_only_for_hf(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Issue 24, rank 0's memory: rank 0 alone reads the weights (rank 1 builds the architecture on the meta
    device and receives its shard); the unsharded generator copy exists for the ``hf`` source alone; under
    ``bf16`` the layers are gathered and computed in bf16 over float32 master shards; a checkpoint does not
    push the weights into the generator (with ``rollout.sync_every`` 2 the version it serves stays 0 until
    the sync)."""
    out = tmp_path / "load"
    _torchrun(str(STEP.with_name("fsdp_load.py")), str(tiny_model_dir), str(out))
    ranks = [json.loads(Path(f"{out}.rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["loads"] for r in ranks] == [2, 0]  # two models loaded by rank 0, none by rank 1
    assert [r["meta_before_shard"] for r in ranks] == [False, True]
    assert all(r["logits_equal"] for r in ranks)  # every rank computes with the loaded weights
    main = ranks[0]
    assert main["weights_equal"] and main["generator"]
    assert main["generator_unchanged_by_checkpoint"] and main["version_after_checkpoint"] == 0
    assert main["generator_synced"] and main["version_after_sync"] == 1
    assert not main["generator_for_vllm"]
    assert all(r["bf16_compute_dtype"] == ["torch.bfloat16"] and r["master_dtype"] == ["torch.float32"] for r in ranks)
