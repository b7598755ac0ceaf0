"""Cost per token of LoRA SFT and of generation on the imported SmolLM2-135M-Instruct, on this machine.

A measurement, not a training run: a few steps of the SFT loss on 4x4 Sudoku solver demonstrations, built by
milepost's own SFT path (``training.sft.demonstrations``: oracle episodes through the real environment, agent loop
and SmolLM2's chat template; loss ``training.losses.sft_loss`` on ``backends.logprobs.sequence_logprobs``, as
``milepost sft`` computes it), with a peft LoRA adapter on every projection; then generation through the ``hf``
backend on the same agent prompts. Prints and writes JSON with the machine's load (``os.getloadavg``) beside every
time, and the hours a full SFT of configs/tiny-cpu/sudoku4_sft.yaml's size would take at the measured rate.

    milepost models import smollm2-135m --out runs/models/smollm2-135m
    milepost data sudoku --size 4 --levels S1-S5 --train 8 --test 4 --seed 0 --out runs/data/sudoku4-small
    OMP_NUM_THREADS=1 nice -n 10 python -m experiments.smollm2_lora_cost --model runs/models/smollm2-135m \
        --data runs/data/sudoku4-small --out docs/results/models/smollm2_cost.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend, load_model
from milepost.backends.logprobs import sequence_logprobs
from milepost.config import load_config
from milepost.io import atomic_write_json
from milepost.training.config import TrainConfig
from milepost.training.losses import sft_loss
from milepost.training.setup import select_tasks
from milepost.training.sft import demonstrations, lora_adapter

SFT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tiny-cpu" / "sudoku4_sft.yaml"


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the imported model folder")
    ap.add_argument("--data", required=True, help="a 4x4 Sudoku dataset folder (milepost data sudoku --size 4)")
    ap.add_argument("--out", required=True, help="JSON file of the measurements")
    ap.add_argument("--tasks", type=int, default=12, help="demonstration tasks")
    ap.add_argument("--steps", type=int, default=20, help="LoRA SFT steps measured")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    result: dict[str, Any] = {"threads": args.threads, "model": args.model, "load_start": load()}

    cfg = load_config(TrainConfig, SFT_CONFIG, [f"model={args.model}", f"data={args.data}", f"sft.tasks={args.tasks}"])
    model, tokenizer = load_model(args.model, torch.device("cpu"), torch.float32)
    backend = HFBackend(model=model, tokenizer=tokenizer, name="smollm2")
    tasks = random.Random(0).sample(select_tasks(cfg, "train"), args.tasks)
    t0 = time.perf_counter()
    examples = demonstrations(cfg, tasks, backend, progress=False)
    result["demonstrations"] = {
        "tasks": len(tasks),
        "examples": len(examples),
        "seconds": round(time.perf_counter() - t0, 1),
        "prompt_tokens_mean": round(statistics.mean(len(e.prompt_ids) for e in examples), 1),
        "completion_tokens_mean": round(statistics.mean(len(e.completion_ids) for e in examples), 1),
    }
    print(json.dumps(result["demonstrations"]))

    # -- LoRA SFT steps ---------------------------------------------------------------------------------------
    # The adapter `milepost sft` builds with sft.lora_rank (alpha twice the rank, every projection).
    cfg.sft.lora_rank = args.rank
    peft_model = lora_adapter(cfg, model, None)
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    result["lora"] = {
        "rank": args.rank,
        "targets": list(cfg.sft.lora_targets),
        "trainable_parameters": sum(p.numel() for p in trainable),
    }
    optimizer = torch.optim.AdamW(trainable, lr=2e-4)
    rng = random.Random(0)
    peft_model.train()
    times, tokens, losses = [], [], []
    for step in range(args.steps):
        batch = rng.sample(examples, min(args.batch_size, len(examples)))
        start = time.perf_counter()
        logp = sequence_logprobs(
            peft_model, [e.prompt_ids for e in batch], [e.completion_ids for e in batch], 1.0, pad_id=backend.pad_id
        )
        lengths = torch.tensor([len(e.completion_ids) for e in batch])
        mask = torch.arange(logp.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        loss = sft_loss(logp.float(), mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        tokens.append(sum(len(e.prompt_ids) + len(e.completion_ids) for e in batch))
        losses.append(round(loss.item(), 4))
        rate = tokens[-1] / times[-1]
        print(f"step {step + 1}/{args.steps}: loss {losses[-1]:.3f}, {rate:.0f} tokens/s, load {load()}")
    measured = slice(1, None) if len(times) > 1 else slice(None)  # the first step pays for allocations
    tps = sum(tokens[measured]) / sum(times[measured])
    result["sft_steps"] = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "tokens_per_s": round(tps, 1),
        "seconds_per_step": round(statistics.mean(times[measured]), 2),
        "tokens_per_step": round(statistics.mean(tokens), 1),
        "losses": losses,
        "load_after": load(),
    }
    # A full SFT of sudoku4_sft.yaml's size (800 tasks, 2 epochs): the demonstrations' examples per task and
    # tokens per example as measured here.
    full_cfg = load_config(TrainConfig, SFT_CONFIG)
    per_task = len(examples) / len(tasks)
    per_example = statistics.mean(len(e.prompt_ids) + len(e.completion_ids) for e in examples)
    full_tokens = full_cfg.sft.tasks * per_task * per_example * full_cfg.sft.epochs
    result["full_sft_estimate"] = {
        "tasks": full_cfg.sft.tasks,
        "epochs": full_cfg.sft.epochs,
        "examples": round(full_cfg.sft.tasks * per_task),
        "tokens": round(full_tokens),
        "hours_at_measured_rate": round(full_tokens / tps / 3600, 2),
        "steps_at_batch_32": math.ceil(full_cfg.sft.tasks * per_task * full_cfg.sft.epochs / 32),
    }

    # -- generation through the hf backend (LoRA merged off: the base weights plus the adapter as trained) -----
    peft_model.eval()
    gen = HFBackend(model=peft_model, tokenizer=tokenizer, name="smollm2-lora")
    from milepost.agent.prompts import build_messages
    from milepost.envs import make_env

    env = make_env("sudoku", size=4, render="hints", max_steps=16)
    prompts = []
    for task in tasks[:8]:
        obs, _ = env.reset(options={"task": task})
        prompts.append(build_messages(env.goal_text(), obs))
    result["generation"] = {}
    for n in (1, 8):
        params = SamplingParams(temperature=0.8, max_new_tokens=32, seed=0)
        requests = [GenerationRequest(messages=m, params=params) for m in prompts[:n]]
        start = time.perf_counter()
        done = gen.generate(requests)
        secs = time.perf_counter() - start
        new = sum(len(c.completion_ids) for c in done)
        result["generation"][f"batch_{n}"] = {
            "new_tokens": new,
            "prompt_tokens_mean": round(statistics.mean(len(c.prompt_ids) for c in done), 1),
            "seconds": round(secs, 2),
            "new_tokens_per_s": round(new / secs, 1),
            "load": load(),
        }
        print(json.dumps(result["generation"][f"batch_{n}"]))
        if n == 1:
            result["generation"]["sample_answer"] = done[0].text
    result["load_end"] = load()
    atomic_write_json(args.out, result)
    print(json.dumps({k: result[k] for k in ("sft_steps", "full_sft_estimate")}, indent=1))


if __name__ == "__main__":
    main()
