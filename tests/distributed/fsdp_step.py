"""One ``update`` (two minibatches) of a tiny model on a fixed batch of turns, in one process or, under
``torchrun``, with FSDP2 over the processes; writes the loss and the updated parameters to ``OUT`` (rank 0) and
each rank's micro-step and forward counts to ``OUT.rankR.json``.

    python tests/distributed/fsdp_step.py MODEL_DIR OUT [MICRO_BATCH_TOKENS [OPTIMIZER]]
    torchrun --standalone --nproc_per_node 2 tests/distributed/fsdp_step.py MODEL_DIR OUT [MICRO_BATCH_TOKENS ...]

``MICRO_BATCH_TOKENS`` is ``rl.micro_batch_tokens`` (default: the config's; 1 runs every row alone);
``OPTIMIZER`` is adamw (the trainer's optimizer, eps 1e-6; default) or sgd (lr 0.1: a parameter's change is its
gradient's).
"""

from __future__ import annotations

import json
import random
import sys

import torch

from milepost.backends.hf import load_model
from milepost.backends.logprobs import sequence_logprobs
from milepost.distributed.fsdp import setup
from milepost.training.config import RLConfig, TrainConfig
from milepost.training.trainer import TurnSample, update

TURNS = 7  # odd, so the two minibatches (4 + 3 turns) split unevenly over two ranks


def main(model_dir: str, out: str, micro: int | None = None, optimizer_name: str = "adamw") -> None:
    torch.set_num_threads(1)
    rl = (
        RLConfig(minibatches=2, lr=1e-3)
        if micro is None
        else RLConfig(minibatches=2, lr=1e-3, micro_batch_tokens=micro)
    )
    cfg = TrainConfig(name="step", model=model_dir, data="unused", rl=rl, device="cpu")
    model, _ = load_model(model_dir, torch.device("cpu"), torch.float32)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompts = [
        torch.randint(3, vocab, (int(n),), generator=gen).tolist()
        for n in torch.randint(4, 12, (TURNS,), generator=gen)
    ]
    answers = [
        torch.randint(3, vocab, (int(n),), generator=gen).tolist() for n in torch.randint(2, 8, (TURNS,), generator=gen)
    ]
    with torch.no_grad():
        old = sequence_logprobs(model, prompts, answers, cfg.agent.temperature, pad_id=0)
    advantages = torch.randn(TURNS, generator=gen).tolist()
    samples = [
        TurnSample(p, a, old[i, : len(a)].tolist(), advantages[i]) for i, (p, a) in enumerate(zip(prompts, answers))
    ]
    fsdp = setup(cfg)
    if fsdp is not None:
        model = fsdp.shard(model)
    forwards = [0]
    model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    # eps 1e-6, not the trainer's 1e-8: Adam's first step is lr * g / (|g| + eps), so where g is ~0 a last-bit
    # difference of its sum moves the element by up to lr * dg / eps; at 1e-8 one element of 9,216 ended 5.3e-5
    # apart in a CI run (the bound is 5e-5). At 1e-6 that amplification is 100x smaller; elsewhere nothing changes.
    optimizer: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=0.0, eps=1e-6)
    if optimizer_name == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stats = update(model, optimizer, samples, cfg, 0, random.Random(1), fsdp=fsdp)
    rank = fsdp.rank if fsdp is not None else 0
    with open(f"{out}.rank{rank}.json", "w") as f:
        json.dump({"micro_steps": stats["micro_steps"], "forwards": forwards[0]}, f)
    state = fsdp.full_state_dict(model) if fsdp is not None else model.state_dict()
    if fsdp is None or fsdp.is_main:
        torch.save({"stats": stats, "state": {k: v.detach().clone() for k, v in state.items()}}, out)
    if fsdp is not None:
        fsdp.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None, *sys.argv[4:5])
