"""Rank 0's memory under FSDP, on two gloo ranks: the weights are loaded once, the generator copy exists for
the ``hf`` rollout source alone, layers compute in bf16 under ``bf16``, and a checkpoint leaves the generator
(and the policy version it serves) alone. Each rank writes what it saw to ``OUT.rankR.json``.

    torchrun --standalone --nproc_per_node 2 tests/distributed/fsdp_load.py MODEL_DIR OUT
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import torch

from milepost.backends.hf import load_model
from milepost.distributed.fsdp import setup
from milepost.training.config import RLConfig, RolloutConfig, TrainConfig
from milepost.training.trainer import TurnSample, update


def main(model_dir: str, out: str) -> None:
    torch.set_num_threads(1)
    seen: dict = {"loads": 0}

    def load() -> tuple:
        seen["loads"] += 1
        return load_model(model_dir, torch.device("cpu"), torch.float32)

    # The hf rollout source (a generator copy on rank 0), sync every 2 updates, float32.
    cfg = TrainConfig(name="load", model=model_dir, data="unused", device="cpu", rl=RLConfig(lr=1e-2),
                      rollout=RolloutConfig(sync_every=2))  # fmt: skip
    fsdp = setup(cfg)
    assert fsdp is not None
    model, tokenizer = fsdp.load(load)
    seen["meta_before_shard"] = any(p.is_meta for p in model.parameters())
    model = fsdp.shard(model)
    reference, _ = load_model(model_dir, torch.device("cpu"), torch.float32)  # what every rank must now hold
    full = fsdp.full_state_dict(model)
    ids = torch.tensor([[5, 9, 13, 17, 21]])
    with torch.no_grad():
        seen["logits_equal"] = torch.equal(model(input_ids=ids).logits, reference(input_ids=ids).logits)
    if fsdp.is_main:
        seen["weights_equal"] = all(torch.equal(full[k], v) for k, v in reference.state_dict().items())
        seen["generator"] = fsdp.generator_model is not None
    source = fsdp.rollout_source(cfg, model, tokenizer, Path(out).parent / "run")
    source.sync(model, tokenizer, 0)
    before = {k: v.clone() for k, v in fsdp.generator_model.state_dict().items()} if fsdp.is_main else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr)
    samples = [
        TurnSample([5, 6, 7, 8], [9, 10, 11], [-6.0, -6.0, -6.0], 1.0),
        TurnSample([5, 6], [7, 8], [-6.0] * 2, -1.0),
    ]
    update(model, optimizer, samples, cfg, 0, random.Random(0), fsdp=fsdp)
    fsdp.save_checkpoint(Path(out).parent / "run", 1, model, tokenizer, optimizer, "name: load\n")
    seen["version_after_checkpoint"] = source.version
    if fsdp.is_main:
        after = fsdp.generator_model.state_dict()
        seen["generator_unchanged_by_checkpoint"] = all(torch.equal(before[k], after[k]) for k in before)
    source.sync(model, tokenizer, 1)
    updated = fsdp.full_state_dict(model)
    if fsdp.is_main:
        after = fsdp.generator_model.state_dict()
        seen["generator_synced"] = all(torch.equal(updated[k], after[k]) for k in updated)
        seen["version_after_sync"] = source.version

    # A vllm / openai source: no generator copy; bf16: layers gathered and computed in bf16.
    cfg16 = TrainConfig(name="load16", model=model_dir, data="unused", device="cpu", bf16=True,
                        rollout=RolloutConfig(backend="vllm"))  # fmt: skip
    fsdp.keep_generator, fsdp.bf16, fsdp.generator_model = cfg16.rollout.backend == "hf", cfg16.bf16, None
    model16, _ = fsdp.load(load)
    model16 = fsdp.shard(model16)
    dtypes: list[str] = []
    layer = model16.model.layers[0].mlp.up_proj
    layer.register_forward_pre_hook(lambda m, a: dtypes.append(str(m.weight.dtype)))
    seen["master_dtype"] = sorted({str(p.dtype) for p in model16.parameters()})  # the sharded parameters
    with torch.no_grad():
        model16(input_ids=ids)
    seen["bf16_compute_dtype"] = dtypes
    seen["generator_for_vllm"] = fsdp.generator_model is not None
    with open(f"{out}.rank{fsdp.rank}.json", "w") as f:
        json.dump(seen, f)
    fsdp.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
