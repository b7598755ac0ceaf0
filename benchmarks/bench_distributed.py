"""Evaluation on Ray workers against in-process: throughput, scaling on 2 cores, Ray's overhead, recovery.

The same 64 four-by-four Sudoku episodes (16 tasks x 4 samples) are played three ways, for a scripted policy
(``noisy-oracle:0.7:format``) and for the ``hf`` backend (the tiny 1M model, greedy):

1. in-process: ``agent.loop.run_episodes`` (what ``milepost eval --workers 0`` does);
2. a ``WorkerPool`` of 1 Ray actor, and 3. of 2 (what ``--workers 1`` / ``--workers 2`` run).

Each worker run is timed in two parts: set-up (actors started, each building its policy: for ``hf`` loading the
model) and play. Reported: episodes/s, the scaling efficiency of 2 workers on the machine's 2 cores
(T_1 / (2 T_2), play time), Ray's overhead per episode ((T_1 play - T_in-process) / episodes), and the time to
recover from a killed worker (an injected ``os._exit`` at one episode: the death seen -> a replacement actor
ready, and the run's extra play time against the same run without the fault). The local cluster is started
once (``ray.init(num_cpus=2)``). Writes ``benchmarks/results/distributed.{md,json,png}``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))

from common import write_experiment

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.backends.tiny import build_tiny_model
from milepost.datasets import write_dataset
from milepost.distributed.eval_pool import EvalKit
from milepost.distributed.workers import WorkerPool
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.evaluation.runner import EvalSpec

RESULTS = Path(__file__).parent / "results"


def _jobs(data: Path) -> list[Job]:
    from milepost.datasets import load_tasks

    return [Job(t, s) for t in load_tasks(str(data), "test") for s in range(4)]


def measure(spec: EvalSpec, env_kwargs: dict[str, Any], jobs: list[Job]) -> dict[str, Any]:
    """In-process, 1 and 2 workers, and 2 workers with one injected death; seconds of each part."""
    kit = EvalKit(spec, env_kwargs)
    start = time.perf_counter()
    local = kit()
    setup_local = time.perf_counter() - start
    start = time.perf_counter()
    episodes = run_episodes(local.make_env, jobs, local.policy, local.settings, seed=spec.seed, progress=False)
    play_local = time.perf_counter() - start
    out: dict[str, Any] = {"in_process": {"setup_s": setup_local, "play_s": play_local, "episodes": len(episodes)}}
    reference = {(e.task_id, e.sample): e.to_dict() for e in episodes}
    for workers in (1, 2):
        start = time.perf_counter()
        pool = WorkerPool(kit, workers)  # actors started, each with its policy built
        setup = time.perf_counter() - start
        try:
            start = time.perf_counter()
            run = pool.play(jobs, seed=spec.seed, progress=False)
            play = time.perf_counter() - start
        finally:
            pool.close()
        same = all(e.to_dict() == reference[(e.task_id, e.sample)] for e in run.episodes)
        out[f"workers_{workers}"] = {"setup_s": setup, "total_s": setup + play, "play_s": play, "same": same}
    doomed = (jobs[len(jobs) // 3].task.task_id, jobs[len(jobs) // 3].sample)
    pool = WorkerPool(kit, 2, faults={doomed: 1})
    try:
        start = time.perf_counter()
        run = pool.play(jobs, seed=spec.seed, progress=False)
        faulty = time.perf_counter() - start
    finally:
        pool.close()
    c = run.counts
    out["fault"] = {
        "total_s": faulty,
        "extra_s": faulty - out["workers_2"]["play_s"],
        "recovery_s": run.recoveries_s,
        "counts": {k: getattr(c, k) for k in ("submitted", "collected", "retried", "duplicated", "exhausted")},
        "same": all(e.to_dict() == reference[(e.task_id, e.sample)] for e in run.episodes),
    }
    n = len(jobs)
    p1, p2, p0 = out["workers_1"]["play_s"], out["workers_2"]["play_s"], play_local
    out["summary"] = {
        "episodes_per_s": {"in_process": n / p0, "workers_1": n / p1, "workers_2": n / p2},
        "scaling_efficiency": p1 / (2 * p2),
        "speedup_2_vs_in_process": p0 / p2,
        "ray_overhead_ms_per_episode": 1000 * (p1 - p0) / n,
    }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    tasks = [make_task(*generate_easy(4, 6, 9, i + 6), level="S2", split="test", index=i) for i in range(16)]
    data = write_dataset(tmp / "ds", {"train": [], "test": tasks}, {"seed": 9})
    model = build_tiny_model(tmp / "tiny", size="1m", seed=0)
    jobs = _jobs(data)
    env_kwargs = {"max_steps": args.max_steps, "size": 4}
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        result: dict[str, Any] = {"episodes": len(jobs), "max_steps": args.max_steps, "runs": {}}
        policies = {
            "scripted": ("noisy-oracle:0.7:format", AgentSettings(batch_size=64)),
            "hf": (
                f"hf:{model}",
                AgentSettings(temperature=0.0, max_new_tokens=args.max_new_tokens, memory_k=1, batch_size=64),
            ),
        }
        for name, (policy, settings) in policies.items():
            spec = EvalSpec(env="sudoku", data=str(data), policy=policy, n=4, settings=settings, seed=0)
            result["runs"][name] = measure(spec, env_kwargs, jobs)
            print(name, result["runs"][name]["summary"], flush=True)
    finally:
        ray.shutdown()
    result["ray"] = ray.__version__
    result["cpus"] = os.cpu_count()
    result["load_average"] = os.getloadavg()
    return result


def render(r: dict[str, Any]) -> str:
    rows = []
    for name, m in r["runs"].items():
        s = m["summary"]["episodes_per_s"]
        rows.append(
            f"| {name} | {s['in_process']:.1f} | {s['workers_1']:.1f} | {s['workers_2']:.1f} | "
            f"{m['in_process']['setup_s']:.2f} / {m['workers_1']['setup_s']:.2f} / {m['workers_2']['setup_s']:.2f} | "
            f"{m['summary']['scaling_efficiency']:.0%} | {m['summary']['speedup_2_vs_in_process']:.2f}x | "
            f"{m['summary']['ray_overhead_ms_per_episode']:.1f} |"
        )
    faults = []
    for name, m in r["runs"].items():
        f = m["fault"]
        c = f["counts"]
        faults.append(
            f"| {name} | {', '.join(f'{x:.2f}' for x in f['recovery_s'])} | {f['extra_s']:.2f} | {c['submitted']} | "
            f"{c['collected']} | {c['retried']} | {c['duplicated']} | {c['exhausted']} | "
            f"{'yes' if f['same'] and m['workers_1']['same'] and m['workers_2']['same'] else 'NO'} |"
        )
    load = ", ".join(f"{x:.1f}" for x in r["load_average"])
    return (
        "# Evaluation on Ray workers vs in-process (CPU, 2 cores)\n\n"
        f"{r['episodes']} 4x4 Sudoku episodes (16 tasks x 4 samples, budget {r['max_steps']} turns); scripted policy "
        "`noisy-oracle:0.7:format`, and `hf` with the tiny 1M model (greedy). Ray "
        f"{r['ray']}, local cluster `ray.init(num_cpus=2)`, one CPU per actor, 1 torch thread each; "
        f"{r['cpus']} cores, load average {load} (a machine shared with other jobs: read ratios, not absolutes).\n\n"
        "Episodes/s count play time only; set-up (in-process policy build / actors started and each building its "
        "policy) is listed apart. Scaling efficiency: T_1 / (2 T_2) of play time. Ray overhead per episode: "
        "(T_1 play - T_in-process play) / episodes.\n\n"
        "| policy | in-process ep/s | 1 worker ep/s | 2 workers ep/s | set-up s (in-proc / 1 / 2) | scaling "
        "efficiency | 2 workers vs in-process | Ray overhead ms/episode |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n\n"
        "## A killed worker (2 workers, `os._exit` at one episode, first attempt)\n\n"
        "Recovery: from the death seen by the driver to a replacement actor ready (policy built). Extra play s: "
        "the play time of the run with the fault minus that of the same run without it. Episodes equal: every "
        "episode of the 1-worker, 2-worker and faulty runs equals its in-process twin.\n\n"
        "| policy | recovery s | extra play s | submitted | collected | retried | duplicated | exhausted | "
        "episodes equal |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n"
        + "\n".join(faults)
        + "\n\n![distributed](distributed.png)\n"
    )


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(r["runs"]), figsize=(4 * len(r["runs"]), 3))
    for ax, (name, m) in zip(axes, r["runs"].items()):
        s = m["summary"]["episodes_per_s"]
        ax.bar(["in-process", "1 worker", "2 workers"], [s["in_process"], s["workers_1"], s["workers_2"]])
        ax.set_title(f"{name}: scaling {m['summary']['scaling_efficiency']:.0%}")
        ax.set_ylabel("episodes / s (play)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    result = run(args)
    print(write_experiment(Path(args.out), "distributed", result, render, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
