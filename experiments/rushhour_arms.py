"""The Rush Hour arms (seed paper, Table 8 and Figure 9) in the tiny CPU profile: atomic actions, slide macro
actions, subgoal decomposition and the horizon curriculum, on equal budgets from one SFT start.

Steps: the level dataset (4-6, 7-9, 10-12 moves), SFT of a tiny from-scratch model on oracle demonstrations
(``configs/tiny-cpu/rushhour_sft.yaml``: half atomic, half slide moves), each arm's RL run
(``configs/tiny-cpu/rushhour_{atomic,slide,subgoal,curriculum}.yaml``), the SFT start evaluated in atomic and in
slide mode, every arm evaluated on every level, and a comparison report
(``experiments/results/rushhour_arms.{md,json}``, plots beside it). The numbers are what the run measured.

Usage (one thread per job; the wall time is in the report)::

    python experiments/rushhour_arms.py --work runs/rush [--iterations 8] [--sft-tasks 240]
        [--start checkpoints/rushhour-sft]

``--start DIR`` skips the SFT step and starts every arm (and the "SFT start" rows) from that model directory,
e.g. the step-level start of ``experiments/sft_starts.py`` (atomic moves only: its slide-mode row then measures a
start that never saw a slide).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
CONFIGS = ROOT / "configs" / "tiny-cpu"
ARMS = ("atomic", "slide", "subgoal", "curriculum")


def check_start_disjoint(start: Path, data: Path) -> None:
    """Refuse a start model that was trained on a cluster of this experiment's test puzzles (its folder lists
    its training clusters in ``milepost_train_clusters.json``, as ``experiments/sft_starts.py --export`` writes)."""
    from milepost.datasets import load_tasks

    listed = start / "milepost_train_clusters.json"
    if not listed.is_file():
        print(f"rushhour_arms: {start} lists no training clusters; test puzzles not checked against its training")
        return
    seen = set(json.loads(listed.read_text())["train_cluster_ids"])
    shared = [t.task_id for t in load_tasks(data, "test") if t.meta.get("cluster_id") in seen]
    if shared:
        raise SystemExit(
            f"rushhour_arms: {len(shared)} test puzzles of {data} are training clusters of {start} "
            f"(first: {shared[0]}); use another --work (dataset) or start"
        )


def main() -> None:
    import torch

    from milepost.backends.hf import HFBackend
    from milepost.config import load_config
    from milepost.datasets import write_dataset
    from milepost.envs.levels import parse_levels
    from milepost.envs.rushhour.dataset import build_dataset
    from milepost.evaluation.compare import compare
    from milepost.training.config import TrainConfig
    from milepost.training.sft import train_sft
    from milepost.training.trainer import evaluate_policy, train_rl

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/rush")
    p.add_argument("--iterations", type=int, default=None, help="RL iterations per arm (default: the configs')")
    p.add_argument("--sft-tasks", type=int, default=None, help="SFT demonstration tasks (default: the config's)")
    p.add_argument("--train", type=int, default=120, help="training tasks per level")
    p.add_argument("--test", type=int, default=8, help="test tasks per level")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--start", default=None, help="start model directory (skips the SFT step)")
    args = p.parse_args()
    if args.start and not (Path(args.start) / "config.json").is_file():
        raise SystemExit(f"rushhour_arms: --start {args.start}: no model directory (config.json) there")
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    timings: dict[str, float] = {}
    start = time.perf_counter()

    data = work / "data"
    if not (data / "manifest.json").exists():
        levels = parse_levels("4-6,7-9,10-12", "rushhour", 6)
        splits, manifest = build_dataset(levels, args.train, args.test, 0, progress=False)
        write_dataset(data, splits, manifest, overwrite=True)
    timings["data_s"] = time.perf_counter() - start
    if args.start:
        check_start_disjoint(Path(args.start), data)

    common = [f"data={data}", f"threads={args.threads}"]
    sft_over = common + ([f"sft.tasks={args.sft_tasks}"] if args.sft_tasks else [])
    sft_cfg = load_config(TrainConfig, CONFIGS / "rushhour_sft.yaml", sft_over)
    final = Path(args.start) if args.start else work / "sft" / "final"
    t = time.perf_counter()
    if not (final / "config.json").exists():
        resume = (work / "sft" / "checkpoints" / "latest").exists()
        final = train_sft(sft_cfg, work / "sft", resume=resume, progress=False)
    timings["sft_s"] = time.perf_counter() - t

    arm_over = common + [f"model={final}"] + ([f"rl.iterations={args.iterations}"] if args.iterations else [])
    cfgs = {}
    for arm in ARMS:
        over = list(arm_over)
        if arm == "curriculum" and args.iterations:
            half = args.iterations // 2
            over.append(
                f"rl.curriculum=[{{levels: 4-6, iterations: {half}}}, "
                f"{{levels: 7-9, iterations: {args.iterations - half}}}]"
            )
        cfg = load_config(TrainConfig, CONFIGS / f"rushhour_{arm}.yaml", over)
        cfgs[arm] = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, levels=None))
    for mode, arm in (("atomic", "atomic"), ("slide", "slide")):
        target = work / "sft-start" / mode
        t = time.perf_counter()
        if not (target / "metrics.json").exists():
            evaluate_policy(cfgs[arm], HFBackend(final), target, f"SFT ({mode})", progress=False)
        timings[f"sft_eval_{mode}_s"] = time.perf_counter() - t
    for arm, cfg in cfgs.items():
        run = work / f"rl-{arm}"
        t = time.perf_counter()
        model = run / "final"
        if not (model / "config.json").exists():
            model = train_rl(cfg, run, resume=(run / "checkpoints" / "latest").exists(), progress=False)
        if not (run / "eval" / "metrics.json").exists():
            evaluate_policy(cfg, HFBackend(model), run / "eval", f"RL {arm}", progress=False)
        timings[f"rl_{arm}_s"] = time.perf_counter() - t
    runs = [work / "sft-start" / "atomic", work / "sft-start" / "slide"] + [work / f"rl-{a}" for a in ARMS]
    labels = ["SFT start (atomic)", "SFT start (slide)"] + [f"RL {a}" for a in ARMS]
    report_dir = work / "report"
    text = compare(runs, report_dir, labels, ks=[1, 4]).text
    timings["total_s"] = time.perf_counter() - start
    base = cfgs["atomic"]
    header = (
        "# Rush Hour arms (tiny CPU profile)\n\n"
        f"Command: `python experiments/rushhour_arms.py --work {args.work}"
        + (f" --iterations {args.iterations}" if args.iterations else "")
        + (f" --sft-tasks {args.sft_tasks}" if args.sft_tasks else "")
        + (f" --start {args.start}" if args.start else "")
        + f"`. Data: {args.train} training and {args.test} test tasks per level (4-6, 7-9, 10-12 moves), seed 0. "
        + (
            f"SFT start: `{args.start}` (given; no SFT step). RL: "
            if args.start
            else f"SFT: tiny 1M model from scratch, {sft_cfg.sft.tasks} demonstration tasks (half slide moves). RL: "
        )
        + f"{base.rl.iterations} iterations of {base.rl.tasks_per_iter} tasks x {base.rl.samples_per_task} samples "
        "per arm on 7-9 moves (the curriculum: 4-6 then 7-9); H_max 30 atomic, 20 slide. One seed. Wall time "
        f"{timings['total_s'] / 60:.1f} min on the shared 2-core machine ("
        + ", ".join(f"{k[:-2]} {v / 60:.1f} min" for k, v in timings.items() if k != "total_s")
        + ").\n\n"
    )
    report = header + text.replace("# Comparison\n", "")
    for png in report_dir.glob("*.png"):
        report = report.replace(f"]({png.name})", f"](rushhour_arms_{png.name})")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rushhour_arms.md").write_text(report, encoding="utf-8")
    (RESULTS / "rushhour_arms.json").write_text(json.dumps({"timings_s": timings}, indent=2) + "\n")
    for png in report_dir.glob("*.png"):
        shutil.copyfile(png, RESULTS / f"rushhour_arms_{png.name}")
    print(report)


if __name__ == "__main__":
    main()
