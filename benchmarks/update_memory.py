"""Peak RSS of one RL update (``milepost.training.trainer.update``) on a real model at the web shop's 2-item
shapes: full-weight AdamW, bf16 autocast, with or without MiRA's reference model (``objective: mse``), for a given
``rl.micro_batch_tokens`` and ``rl.activation_checkpointing``. Sizes the memory of comparison 2 of issue 28.

Run each setting in its own process, since peak RSS only grows::

    python benchmarks/update_memory.py --model runs/models/webshop1-smollm2 --rows 24 --micro 8192
    python benchmarks/update_memory.py --model runs/models/webshop1-smollm2 --rows 24 --micro 8192 --ref
    python benchmarks/update_memory.py --model runs/models/webshop1-smollm2 --rows 24 --micro 2048 --ref
    python benchmarks/update_memory.py --model runs/models/webshop1-smollm2 --rows 24 --micro 8192 --ref --checkpointing

Prompt lengths are drawn from 303-894 tokens and answers of 20 tokens, the range of the SmolLM2 1-item start's
turns on 2-item orders (``experiments/results/webshop2_start``); the token ids are random (memory and time do not
depend on them).
"""

from __future__ import annotations

import argparse
import copy
import random
import resource
import time

import torch
from transformers import AutoModelForCausalLM

from milepost.config import load_config
from milepost.training.config import TrainConfig
from milepost.training.trainer import TurnSample, enable_activation_checkpointing, update


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a causal LM directory")
    p.add_argument("--rows", type=int, default=24, help="turns in the update (one minibatch)")
    p.add_argument("--micro", type=int, default=8192, help="rl.micro_batch_tokens")
    p.add_argument("--ref", action="store_true", help="MiRA's objective: mse against a reference copy")
    p.add_argument("--checkpointing", action="store_true", help="rl.activation_checkpointing")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    over = [f"rl.micro_batch_tokens={args.micro}", "rl.minibatches=1", "bf16=true", "agent.temperature=0.8"]
    if args.ref:
        over += ["mira.enabled=true", "mira.objective=mse"]
    cfg = load_config(TrainConfig, None, over)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    if args.checkpointing:
        enable_activation_checkpointing(model)
    ref = copy.deepcopy(model).eval() if args.ref else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    loaded = rss_gb()
    rng = random.Random(0)
    vocab = model.config.vocab_size
    samples = [
        TurnSample(
            [rng.randrange(1, vocab) for _ in range(rng.randint(303, 894))],
            [rng.randrange(1, vocab) for _ in range(20)],
            [-2.0] * 20,
            rng.gauss(0.0, 1.0),
        )
        for _ in range(args.rows)
    ]
    tokens = sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
    t = time.perf_counter()
    stats = update(model, optimizer, samples, cfg, 0, random.Random(0), ref)
    print(
        f"rows {args.rows} ({tokens} tokens), micro {args.micro}, ref {args.ref}, checkpointing {args.checkpointing}: "
        f"{stats['micro_steps']:.0f} micro-steps, loaded {loaded:.2f} GB, peak RSS {rss_gb():.2f} GB, "
        f"{time.perf_counter() - t:.0f} s"
    )


if __name__ == "__main__":
    main()
