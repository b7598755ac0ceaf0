"""One ``update`` (two minibatches) of a tiny model on a fixed batch of turns, in one process or, under
``torchrun``, with FSDP2 over the processes; writes the loss and the updated parameters to ``OUT`` (rank 0).

    python tests/distributed/fsdp_step.py MODEL_DIR OUT
    torchrun --standalone --nproc_per_node 2 tests/distributed/fsdp_step.py MODEL_DIR OUT
"""

from __future__ import annotations

import random
import sys

import torch

from milepost.backends.hf import load_model
from milepost.backends.logprobs import sequence_logprobs
from milepost.distributed.fsdp import setup
from milepost.training.config import RLConfig, TrainConfig
from milepost.training.trainer import TurnSample, update

TURNS = 7  # odd, so the two minibatches (4 + 3 turns) split unevenly over two ranks


def main(model_dir: str, out: str) -> None:
    torch.set_num_threads(1)
    cfg = TrainConfig(name="step", model=model_dir, data="unused", rl=RLConfig(minibatches=2, lr=1e-3), device="cpu")
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
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=cfg.rl.weight_decay)
    stats = update(model, optimizer, samples, cfg, 0, random.Random(1), fsdp=fsdp)
    state = fsdp.full_state_dict(model) if fsdp is not None else model.state_dict()
    if fsdp is None or fsdp.is_main:
        torch.save({"stats": stats, "state": {k: v.detach().clone() for k, v in state.items()}}, out)
    if fsdp is not None:
        fsdp.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
