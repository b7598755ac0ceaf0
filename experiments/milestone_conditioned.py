"""The milestone-conditioned policy (framework guide 000, step 4) on 4x4 Sudoku, tiny CPU profile.

Steps: the 4x4 dataset (levels S1-S5, as in the README), the shipped start ``checkpoints/sudoku4-sft`` evaluated
with the plain prompt and with the conditioned prompt (one target subgoal, ``--agent subgoal``), a short RL run
of ``configs/tiny-cpu/sudoku4_milestone_conditioned.yaml`` (``rl.reward: subgoal``), the trained policy
evaluated with the conditioned prompt, and a report (``experiments/results/milestone_conditioned.{md,json,png}``).
Besides success it reports the targets: the share of turns that reached the target their prompt named and the
targets reached per episode. The numbers are what the run measured.

Usage (one thread; the wall time is in the report)::

    python experiments/milestone_conditioned.py --work runs/milestone [--iterations 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
CONFIG = ROOT / "configs" / "tiny-cpu" / "sudoku4_milestone_conditioned.yaml"


def target_stats(run: Path) -> dict[str, float]:
    """From an evaluation folder's episodes: success and subgoals per episode; with target records (the target
    prompt) also the targets reached per episode, the share of turns that reached their target, and the share
    of completed subgoals that were the target."""
    from milepost.io import read_jsonl

    rows = list(read_jsonl(run / "episodes.jsonl"))
    turns = sum(len(r["turns"]) for r in rows)
    out = {"episodes": float(len(rows)), "success": sum(bool(r["success"]) for r in rows) / max(len(rows), 1)}
    out["subgoals_per_episode"] = sum(len(t["new_subgoals"]) for r in rows for t in r["turns"]) / max(len(rows), 1)
    records = [r["meta"]["target"] for r in rows if "target" in r.get("meta", {})]
    if records:
        reached = sum(sum(rec["reached"]) for rec in records)
        out["target_turn_rate"] = reached / max(turns, 1)
        out["targets_per_episode"] = reached / len(records)
        completed = sum(len(t["new_subgoals"]) for r in rows if "target" in r.get("meta", {}) for t in r["turns"])
        # Of the subgoals completed, the share that were the prompt's target: how far the policy follows it.
        out["on_target_share"] = reached / max(completed, 1)
    out["turns_per_episode"] = turns / max(len(rows), 1)
    return out


def main() -> None:
    import torch

    from milepost.backends.hf import HFBackend
    from milepost.config import load_config
    from milepost.datasets import write_dataset
    from milepost.envs.levels import parse_levels
    from milepost.envs.sudoku.dataset import build_dataset
    from milepost.io import atomic_write_json, atomic_write_text, read_jsonl
    from milepost.tracking import read_metrics
    from milepost.training.config import TrainConfig
    from milepost.training.trainer import evaluate_policy, train_rl

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/milestone")
    p.add_argument("--iterations", type=int, default=None, help="RL iterations (default: the config's)")
    p.add_argument("--eval-every", type=int, default=0, help="also evaluate on the training levels every N iterations")
    p.add_argument("--seed", type=int, default=0, help="run seed (RL sampling and evaluation sampling)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--results", default=str(RESULTS), help="folder of the report")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    # Each step's measured time is kept in WORK/timings.json, so a rerun that reuses a finished step (its output
    # is there) reports the time the step took when it ran, not the zero of skipping it.
    timings_file = work / "timings.json"
    timings: dict[str, float] = json.loads(timings_file.read_text()) if timings_file.exists() else {}

    def step(name: str, done: Path, run: Any) -> None:
        if done.exists():  # made by an earlier run: its time, when that run measured it, is in timings.json
            return
        t = time.perf_counter()
        run()
        timings[name] = time.perf_counter() - t
        atomic_write_json(timings_file, timings)

    data = work / "data"

    def make_data() -> None:
        splits, manifest = build_dataset(4, parse_levels("S1-S5", "sudoku", 4), 400, 40, 0, progress=False)
        write_dataset(data, splits, manifest, overwrite=True)

    step("data", data / "manifest.json", make_data)
    over = [f"data={data}", f"threads={args.threads}", f"seed={args.seed}"]
    over += [f"rl.iterations={args.iterations}"] if args.iterations else []
    cfg = load_config(TrainConfig, CONFIG, over)
    plain = dataclasses.replace(
        cfg,
        agent=dataclasses.replace(cfg.agent, agent_kind="plain"),
        rl=dataclasses.replace(cfg.rl, reward="outcome"),
    )
    start_model = ROOT / "checkpoints" / "sudoku4-sft"
    evals = {
        "start, plain prompt": (plain, start_model, work / "start-plain"),
        "start, target prompt": (cfg, start_model, work / "start-target"),
    }
    for label, (c, model, out) in evals.items():
        step(
            f"eval {label}",
            out / "metrics.json",
            lambda c=c, m=model, o=out, lb=label: evaluate_policy(c, HFBackend(m), o, lb, progress=False),
        )
    run = work / f"rl-{cfg.rl.iterations}"
    # Periodic evaluations on the training levels (test split): the test success along the run.
    train_cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, every=args.eval_every, levels=cfg.levels))
    step(
        f"rl {cfg.rl.iterations} iterations",
        run / "final" / "config.json",
        lambda: train_rl(train_cfg, run, resume=(run / "checkpoints" / "latest").exists(), progress=False),
    )
    final = run / "final"
    after = work / f"rl-{cfg.rl.iterations}-target"
    step(
        "eval after RL",
        after / "metrics.json",
        lambda: evaluate_policy(cfg, HFBackend(final), after, "RL, target prompt", progress=False),
    )
    evals["after RL, target prompt"] = (cfg, final, after)
    # Reference: the scripted oracle (which solves but does not follow the target) with the target prompt.
    oracle = work / "oracle-target"
    step("eval oracle", oracle / "metrics.json", lambda: evaluate_oracle(cfg, oracle))
    evals["oracle (reference), target prompt"] = (cfg, Path("oracle"), oracle)

    table: dict[str, Any] = {}
    for label, (_, _, out) in evals.items():
        metrics = json.loads((out / "metrics.json").read_text())
        table[label] = {
            "levels": {lv["level"]: lv for lv in metrics["levels"]},
            **target_stats(out),
        }
    curve = [r for r in read_metrics(run / "metrics.jsonl") if r.get("phase") != "warmup"]
    periodic_rows = list(read_jsonl(run / "eval.jsonl")) if (run / "eval.jsonl").exists() else []
    test_curve = [{"iteration": r["iteration"], "avg": mean_avg(r["levels"])} for r in periodic_rows if r["levels"]]
    start_row = table["start, target prompt"]["levels"]
    after_row = table["after RL, target prompt"]["levels"]
    train_levels = [lv for lv in start_row if lv in {x["level"] for r in periodic_rows for x in r["levels"]}]
    if train_levels:
        test_curve.insert(0, {"iteration": 0, "avg": mean_avg([start_row[lv] for lv in train_levels])})
        test_curve.append({"iteration": cfg.rl.iterations, "avg": mean_avg([after_row[lv] for lv in train_levels])})
    names = ["data", *(f"eval {lb}" for lb in list(evals)[:2]), f"rl {cfg.rl.iterations} iterations", "eval after RL"]
    names.append("eval oracle")
    used = {k: timings[k] for k in names if k in timings}
    wall = sum(used.values())
    report = {
        "config": str(CONFIG.relative_to(ROOT)),
        "iterations": cfg.rl.iterations,
        "episodes_per_iteration": cfg.rl.tasks_per_iter * cfg.rl.samples_per_task,
        "eval": {"n": cfg.eval.n, "limit": cfg.eval.limit, "levels": cfg.levels},
        "table": table,
        "training": [
            {k: r.get(k) for k in ("iteration", "rollout/success", "rollout/subgoals", "loss/policy")} for r in curve
        ],
        "test_curve": test_curve,
        "timings_s": {k: round(v, 1) for k, v in used.items()},
        "wall_s": round(wall, 1),
        "threads": args.threads,
        "seed": args.seed,
    }
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    atomic_write_json(results / "milestone_conditioned.json", report)
    atomic_write_text(results / "milestone_conditioned.md", render(report, args))
    plot(report, results / "milestone_conditioned.png")
    print(render(report, args))


def evaluate_oracle(cfg: Any, out: Path) -> None:
    """The scripted oracle on the test split with the config's agent (the target prompt) and evaluation."""
    from milepost.evaluation.runner import EvalSpec, evaluate
    from milepost.training.setup import agent_settings, make_agent

    spec = EvalSpec(
        env=cfg.env.name,
        data=cfg.data,
        policy="oracle",
        n=cfg.eval.n,
        ks=cfg.eval.ks,
        levels=cfg.eval.levels,
        limit=cfg.eval.limit,
        env_kwargs=cfg.env.env_kwargs(),
        settings=agent_settings(cfg),
        seed=cfg.seed,
        agent=cfg.agent.agent_kind,
    )
    evaluate(spec, out, progress=False, agent=make_agent(cfg))


def mean_avg(levels: list[dict[str, Any]]) -> float:
    """Mean over levels of avg@n (the success rate over every sample)."""
    return sum(lv["avg"]["value"] for lv in levels) / max(len(levels), 1)


def render(report: dict[str, Any], args: argparse.Namespace) -> str:
    levels = sorted({lv for row in report["table"].values() for lv in row["levels"]})
    ks = sorted({k for row in report["table"].values() for lv in row["levels"].values() for k in lv["pass_at"]})
    head = "| run | " + " | ".join(f"{lv} pass@{k} (%)" for lv in levels for k in ks)
    head += " | episodes solved (%) | targets reached / episode | turns reaching their target (%)"
    head += " | completed subgoals that were the target (%) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label, row in report["table"].items():
        cells = [f"{100 * row['levels'][lv]['pass_at'][k]['value']:.1f}" for lv in levels for k in ks]
        tgt = row.get("targets_per_episode")
        rate = row.get("target_turn_rate")
        share = row.get("on_target_share")
        cells += [
            f"{100 * row['success']:.1f}",
            "-" if tgt is None else f"{tgt:.2f}",
            "-" if rate is None else f"{100 * rate:.1f}",
            "-" if share is None else f"{100 * share:.1f}",
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    curve = report["training"]
    train_line = ", ".join(f"{100 * (r['rollout/success'] or 0):.0f}" for r in curve)
    command = f"python experiments/milestone_conditioned.py --work {args.work}"
    command += f" --iterations {args.iterations}" if args.iterations else ""
    command += f" --eval-every {args.eval_every}" if args.eval_every else ""
    command += f" --seed {args.seed}" if args.seed else ""
    ev = report["eval"]
    return "\n".join(
        [
            "# Milestone-conditioned policy (4x4 Sudoku, tiny CPU profile)",
            "",
            f"Command: `{command}` ({report['threads']} torch thread). Config `{report['config']}`: start "
            f"`checkpoints/sudoku4-sft`, {report['iterations']} RL iterations of {report['episodes_per_iteration']} "
            f"episodes on levels {ev['levels']}, `rl.reward: subgoal` (1 on the turn that reaches the target "
            "subgoal its prompt names, returns cut there). Evaluation: test split, "
            f"{ev['limit']} tasks per level, n = {ev['n']} samples each. One seed ({report['seed']}). Wall time "
            f"{report['wall_s'] / 60:.1f} min on the shared 2-core machine, loaded by other jobs "
            f"({', '.join(f'{k} {v / 60:.1f} min' for k, v in report['timings_s'].items())}; each step timed "
            "when it ran).",
            "",
            *lines,
            "",
            "Training rollouts solved per iteration (%; iteration i plays the policy after i - 1 updates): "
            f"{train_line}.",
            *(
                [
                    "",
                    f"Test success on the training levels ({report['eval']['levels']}, avg@n, target prompt) along the "
                    "run (%): "
                    + ", ".join(f"after {r['iteration']} updates: {100 * r['avg']:.1f}" for r in report["test_curve"])
                    + ".",
                ]
                if report.get("test_curve")
                else []
            ),
            "",
            "![milestone-conditioned](milestone_conditioned.png)",
            "",
        ]
    )


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    labels = list(report["table"])
    a.bar(
        range(len(labels)),
        [100 * report["table"][k]["success"] for k in labels],
        color=["#999", "#69c", "#26a", "#ccc"][: len(labels)],
    )
    a.set_xticks(range(len(labels)), [k.replace(", ", "\n") for k in labels], fontsize=8)
    a.set_ylabel("test episodes solved (%)")
    a.set_title("success before / after")
    curve = report["training"]
    its = [r["iteration"] - 1 for r in curve]  # iteration i plays the policy after i - 1 updates
    b.plot(its, [100 * (r["rollout/success"] or 0) for r in curve], marker="o", label="training rollouts solved (%)")
    b.plot(its, [r["rollout/subgoals"] or 0 for r in curve], marker="s", label="rollout subgoals / episode")
    if report.get("test_curve"):
        tc = report["test_curve"]
        label = f"test solved, {report['eval']['levels']} (%)"
        b.plot([r["iteration"] for r in tc], [100 * r["avg"] for r in tc], marker="^", label=label)
    b.set_xlabel("policy updates")
    b.set_title("along the run")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
