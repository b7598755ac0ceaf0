"""Diagnostic arm for ``sgo_experiment.py``: SGO's prompts and PROGRESS line, but the plain oracle's moves.

The SGO arm of ``sgo_experiment.py`` differs from the plain arm in two ways at once: its prompts carry the plan
checklist (and its answers a PROGRESS line), and its demonstrator moves toward the current subgoal, which on about
30% of turns is another cell than the plain demonstrator's (the first candidate line with the ``hints`` renderer).
This arm keeps the first difference and removes the second (the SGO guide names no move, so the demonstrator
falls back to the plain oracle's), trained from the same initialisation with the same steps, and evaluated with
the SGO agent: it tells which of the two the tiny model fails on. One seed; a diagnostic, not a method.

Usage (after ``sgo_experiment.py`` trained the seed, whose initial model and budgets it reuses)::

    nice -n 10 python experiments/sgo_plain_moves.py --data /tmp/sgo_data --work '/tmp/sgo_runs/seed{seed}' --seeds 0

Prints a JSON line: SFT steps and loss, avg@4 per level, step accuracy, and the teacher-forced segment accuracy.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import sgo_experiment as X  # the experiment beside this file (run as a script, its folder is on sys.path)

from milepost.agent.loop import AgentSettings
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.io import atomic_write_json
from milepost.planning.sgo import SGOState
from milepost.tracking import read_metrics
from milepost.training.sft import train_sft


def main(argv: list[str] | None = None) -> int:
    args = X.parse_args(argv)
    seed = args.seeds[0]
    args.seed = seed
    work = X.seed_work(args, seed)
    initial = work / "initial"
    steps = X.equal_budgets(args, initial)["sgo"]["steps"]  # the experiment's arms' optimizer steps
    # The diagnostic's one change: the SGO guide names no move, so the demonstrator takes the plain oracle's.
    SGOState.oracle_action = lambda self, env, **style: None  # type: ignore[method-assign]
    batches = X.equal_budgets(args, initial)["sgo"]["batches"]  # its demonstrations now (the noise may differ)
    epochs = args.epochs if int(args.epochs * batches) == steps else (steps + 0.5) / batches
    cfg = X.arm_config("sgo", args, initial, epochs)
    cfg = dataclasses.replace(cfg, name="sgo-exp-sgo-plain-moves")
    out_dir = work / "sgo-plain-moves"
    t0 = time.perf_counter()
    final = out_dir / "final"
    if not (final / "config.json").exists():
        final = train_sft(cfg, out_dir, progress=args.progress)
    rows = read_metrics(out_dir / "metrics.jsonl")
    t1 = time.perf_counter()
    spec = EvalSpec(
        env="sudoku",
        data=args.data,
        policy=f"hf:{final}",
        agent="sgo",
        n=args.n,
        ks=[1, args.n],
        limit=args.limit,
        env_kwargs={"max_steps": args.max_steps, "render": args.render},
        settings=AgentSettings(
            memory_k=args.memory_k, temperature=0.8, max_new_tokens=X.new_tokens("sgo", args), batch_size=64
        ),
        seed=seed,
    )
    result = evaluate(spec, out_dir / f"eval-limit{args.limit}", progress=args.progress)
    t2 = time.perf_counter()
    levels = result["levels"]
    record = {
        "arm": "sgo prompts, plain oracle moves",
        "seed": seed,
        "sft_steps": rows[-1]["step"],
        "sft_examples": rows[-1]["train/examples"],
        "sft_final_loss": rows[-1]["loss/sft"],
        "avg": {lv["level"]: lv["avg"]["value"] for lv in levels},
        "success": X._totals(levels)["success"],
        "step_accuracy": {lv["level"]: lv["step_accuracy"] for lv in levels},
        "teacher_forced": X.teacher_forced(args, "sgo", final),
        "sft_s": round(t1 - t0, 1),
        "eval_s": round(t2 - t1, 1),
        "command": args.command.replace("sgo_experiment.py", "sgo_plain_moves.py"),
    }
    # Beside sgo.md, whose diagnostics section quotes it (``sgo_experiment.py --render-only`` rewrites it).
    atomic_write_json(Path(args.out) / "sgo_plain_moves.json", record)
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
