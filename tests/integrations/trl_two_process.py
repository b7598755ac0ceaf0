"""One GRPO step of TRL's own ``GRPOTrainer`` with milepost's rollout, run under ``torchrun --nproc_per_node 2``
on CPU (gloo): one group of 4 generations of one task, 2 on each process. Each process writes the episodes it
played (sample number, seed, answer tokens) to ``OUT/rank{R}.json``; ``test_trl_processes.py`` reads them."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from milepost.envs import make_env
from milepost.integrations.trl import MilepostRollout, reward_functions, reward_weights

SFT = Path(__file__).resolve().parents[2] / "checkpoints" / "sudoku4-sft"
ENV_KWARGS = {"size": 4, "render": "hints", "max_steps": 2}


def main(out: Path) -> None:
    # A hang prints every thread's stack and fails within the test's timeout, instead of leaving a bare timeout.
    faulthandler.dump_traceback_later(240, exit=True)
    torch.set_num_threads(1)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    env = make_env("sudoku", **ENV_KWARGS)
    rollout = MilepostRollout("sudoku", [env.sample_task(0)], env_kwargs=ENV_KWARGS, max_new_tokens=16)
    played: list[dict] = []

    def record(prompts: list, trainer: GRPOTrainer) -> dict:
        result = rollout(prompts, trainer)
        played.extend(
            {"sample": e.sample, "seed": e.seed, "answer": [t for turn in e.turns for t in turn.completion_ids]}
            for e in rollout.episodes
        )
        return result

    args = GRPOConfig(
        output_dir=str(out / "grpo"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=2,
        num_generations=4,
        max_steps=1,
        learning_rate=1e-4,
        report_to=[],
        save_strategy="no",
        reward_weights=reward_weights(),
        temperature=1.0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(SFT, dtype=torch.float32),
        reward_funcs=reward_functions(),
        args=args,
        train_dataset=rollout.dataset(),
        processing_class=AutoTokenizer.from_pretrained(SFT),
        rollout_func=record,
    )
    trainer.train()
    report = {"processes": trainer.accelerator.num_processes, "played": played}
    (out / f"rank{trainer.accelerator.process_index}.json").write_text(json.dumps(report))
    # Both reports are written; end the process without tearing gloo down. Each teardown failed one CI run here:
    # interpreter exit with the group alive aborted rank 0 ('terminate called without an active exception', gloo's
    # worker threads freeing tensors during finalisation: pytorch/pytorch#179291), and barrier +
    # destroy_process_group hung both ranks for 900 s after both reports were on disk (pytorch/pytorch#75097, open).
    # torchrun only needs the exit codes, and the test reads the files.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
