"""GRPO with TRL on milepost episodes: TRL's own ``GRPOTrainer``, milepost's environments and agent loop.

    pip install 'milepost[trl]'
    milepost data sudoku --size 4 --levels S1-S5 --train 400 --test 40 --seed 0 --out runs/data/sudoku4
    python docs/examples/trl_grpo.py --model checkpoints/sudoku4-sft --data runs/data/sudoku4 --steps 10

Each GRPO sample is one whole episode (``milepost.integrations.trl``); the environment's reward terms are the
reward functions, weighted as the environment weights them. Runs on CPU (``--cpu``, the default without CUDA).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a causal LM folder, e.g. checkpoints/sudoku4-sft")
    parser.add_argument("--data", required=True, help="a milepost dataset folder (milepost data ...)")
    parser.add_argument("--env", default="sudoku")
    parser.add_argument("--tasks", type=int, default=64, help="training tasks taken from the train split")
    parser.add_argument("--steps", type=int, default=10, help="GRPO optimiser steps")
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4, help="episodes per task (the GRPO group)")
    parser.add_argument("--max-steps", type=int, default=8, help="turn budget H_max of each episode")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--render", default="hints")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--out", default="runs/trl-grpo")
    parser.add_argument("--cpu", action="store_true", default=not torch.cuda.is_available())
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from milepost.datasets import load_tasks
    from milepost.errors import MilepostError
    from milepost.integrations.trl import MilepostRollout, reward_functions, reward_weights

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL
    if args.cpu:
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    try:
        tasks = load_tasks(args.data, "train")[: args.tasks]
        env_kwargs = {"max_steps": args.max_steps}
        if args.env == "sudoku":
            env_kwargs |= {"size": tasks[0].size, "render": args.render}
        rollout = MilepostRollout(args.env, tasks, env_kwargs=env_kwargs, max_new_tokens=args.max_new_tokens)
    except MilepostError as exc:
        print(f"milepost: error: {exc}", file=sys.stderr)
        return 2
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    config = GRPOConfig(
        output_dir=args.out,
        use_cpu=args.cpu,
        bf16=False,
        per_device_train_batch_size=args.prompts_per_step * args.generations,
        num_generations=args.generations,
        max_steps=args.steps,
        learning_rate=args.lr,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        reward_weights=reward_weights(),
        temperature=1.0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_functions(),
        args=config,
        train_dataset=rollout.dataset(),
        processing_class=AutoTokenizer.from_pretrained(args.model),
        rollout_func=rollout,
    )
    trainer.train()
    trainer.save_model(args.out)
    history = [row for row in trainer.state.log_history if "loss" in row]
    with open(os.path.join(args.out, "log_history.json"), "w") as fh:
        json.dump(trainer.state.log_history, fh, indent=1)
    for row in history:
        print(
            f"step {row['step']:>3}  loss {row['loss']:+.4f}  reward {row['reward']:+.3f}  "
            f"outcome {row['rewards/milepost_outcome/mean']:.2f}  format {row['rewards/milepost_format/mean']:+.2f}  "
            f"valid {row['rewards/milepost_valid/mean']:+.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
