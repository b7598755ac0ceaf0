"""Rollout throughput of the batched agent loop against episodes played one at a time.

Both sides play the same 64 four-by-four Sudoku episodes (same tasks, same prompts, greedy decoding, the same
turn budget) with the tiny 1M model:

1. ``run_episodes`` with ``HFBackend``: all live episodes advance in lock-step, one batched generation per turn;
2. the baseline: each episode alone, each turn through plain ``model.generate`` (KV cache, greedy), the answer
   decoded and stepped through the same environment.

Generated tokens per second of each, their ratio (target >= 8x), and the batched loop's model FLOP rate
(2 x parameters per generated token) as a fraction of this machine's measured fp32 matmul rate.
Writes ``benchmarks/results/rollout.{md,json,png}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))

from bench_generation import matmul_rate

from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.agent.memory import MemoryItem, SlidingWindowMemory
from milepost.agent.parsing import parse_answer
from milepost.agent.prompts import build_messages
from milepost.backends.base import GenerationRequest
from milepost.backends.hf import HFBackend
from milepost.backends.tiny import build_tiny_model, count_parameters
from milepost.envs.sudoku import SudokuEnv, make_task
from milepost.envs.sudoku.generator import generate_easy

RESULTS = Path(__file__).parent / "results"


def one_at_a_time(backend: HFBackend, tasks: list[Any], settings: AgentSettings, max_steps: int) -> int:
    """Play each task alone with plain ``model.generate``; returns generated tokens."""
    tokens = 0
    env = SudokuEnv(size=4, max_steps=max_steps, render="cells")
    for task in tasks:
        obs, _ = env.reset(options={"task": task})
        memory = SlidingWindowMemory(settings.memory_k)
        done = False
        while not done:
            ids = backend.encode(GenerationRequest(messages=build_messages(env.goal_text(), obs, memory.items())))
            x = torch.tensor([ids])
            y = backend.model.generate(
                x,
                attention_mask=torch.ones_like(x),
                do_sample=False,
                max_new_tokens=settings.max_new_tokens,
                pad_token_id=backend.pad_id,
                eos_token_id=sorted(backend.eos_ids),
                use_cache=True,
            )
            new = y[0, len(ids) :].tolist()
            tokens += len(new)
            text = backend.decode(new)
            before = obs
            obs, _, terminated, truncated, info = env.step(text)
            parsed = parse_answer(text)
            memory.add(MemoryItem(before, parsed.reason, parsed.action or text.strip(), info["error"]))
            done = terminated or truncated
    return tokens


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(args.model) if args.model else build_tiny_model(Path(tmp) / "m", size="1m", seed=0)
        backend = HFBackend(model_dir)
        params = count_parameters(backend.model)
        tasks = [make_task(*generate_easy(4, 6, 0, i), level="S2", index=i) for i in range(args.episodes)]
        settings = AgentSettings(
            memory_k=1, temperature=0.0, max_new_tokens=args.max_new_tokens, batch_size=args.episodes
        )
        policy = BackendPolicy(backend, settings)

        def make() -> SudokuEnv:
            return SudokuEnv(size=4, max_steps=args.max_steps, render="cells")

        run_episodes(make, [Job(t) for t in tasks[:4]], policy, settings, progress=False)  # warm-up
        # CPU seconds of this process (one torch thread), not wall time: the machine is shared, and wall
        # time would count other jobs' slices. Wall times are reported beside them.
        wall, cpu = time.perf_counter(), time.process_time()
        episodes = run_episodes(make, [Job(t) for t in tasks], policy, settings, progress=False)
        batched_s, batched_wall = time.process_time() - cpu, time.perf_counter() - wall
        batched_tokens = sum(len(t.completion_ids) for ep in episodes for t in ep.turns)
        wall, cpu = time.perf_counter(), time.process_time()
        single_tokens = one_at_a_time(backend, tasks[: args.single], settings, args.max_steps)
        single_s, single_wall = time.process_time() - cpu, time.perf_counter() - wall
    batched_rate = batched_tokens / batched_s
    single_rate = single_tokens / single_s
    fp32 = matmul_rate(args.episodes, 128, 320, torch.float32)
    square = matmul_rate(1024, 1024, 1024, torch.float32)
    achieved = 2.0 * params * batched_rate
    return {
        "parameters": params,
        "episodes": args.episodes,
        "single_episodes": args.single,
        "max_steps": args.max_steps,
        "max_new_tokens": args.max_new_tokens,
        "threads": args.threads,
        "turns": sum(len(ep.turns) for ep in episodes),
        "batched_tokens": batched_tokens,
        "batched_s": batched_s,
        "batched_wall_s": batched_wall,
        "single_wall_s": single_wall,
        "batched_tokens_per_s": batched_rate,
        "single_tokens": single_tokens,
        "single_s": single_s,
        "single_tokens_per_s": single_rate,
        "ratio": batched_rate / single_rate,
        "matmul_fp32_decode_flops": fp32,
        "matmul_fp32_square_flops": square,
        "model_flops_per_s": achieved,
        "fraction_decode_shape": achieved / fp32,
        "fraction_square": achieved / square,
        "load_average": os.getloadavg(),
    }


def write_report(r: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "rollout.json").write_text(json.dumps(r, indent=2) + "\n")
    md = (
        "# Rollout throughput: batched agent loop vs one episode at a time (tiny model, CPU)\n\n"
        f"{r['episodes']} 4x4 Sudoku episodes (6 empty cells, budget {r['max_steps']} turns, memory K = 1, greedy, "
        f"up to {r['max_new_tokens']} new tokens a turn); model {r['parameters']:,} parameters; {r['threads']} torch "
        f"thread(s); load average {', '.join(f'{x:.1f}' for x in r['load_average'])} (a shared machine). The baseline "
        f"plays {r['single_episodes']} of the episodes one at a time with plain `model.generate`.\n\n"
        "| run | generated tokens | CPU seconds | wall seconds | tokens per CPU second |\n"
        "| --- | ---: | ---: | ---: | ---: |\n"
        f"| batched loop (`run_episodes`, {r['episodes']} episodes) | {r['batched_tokens']:,} | {r['batched_s']:.1f} | "
        f"{r['batched_wall_s']:.1f} | {r['batched_tokens_per_s']:,.0f} |\n"
        f"| one at a time (`model.generate`) | {r['single_tokens']:,} | {r['single_s']:.1f} | "
        f"{r['single_wall_s']:.1f} | {r['single_tokens_per_s']:,.0f} |\n\n"
        f"**Ratio: {r['ratio']:.1f}x** (target >= 8x).\n\n"
        f"Model FLOP rate of the batched loop: {r['model_flops_per_s'] / 1e9:.2f} GFLOP/s = "
        f"**{100 * r['fraction_decode_shape']:.1f}%** of the fp32 matmul rate at the decode shape "
        f"({r['matmul_fp32_decode_flops'] / 1e9:.1f} GFLOP/s) and {100 * r['fraction_square']:.1f}% of a 1024^3 fp32 "
        f"matmul ({r['matmul_fp32_square_flops'] / 1e9:.1f} GFLOP/s). Environment stepping, prompt building and "
        "tokenisation are inside the loop's time.\n\n![rollout](rollout.png)\n"
    )
    (out / "rollout.md").write_text(md)
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(
        ["one at a time", "batched loop"],
        [r["single_tokens_per_s"], r["batched_tokens_per_s"]],
        color=["C7", "C0"],
    )
    ax.set_ylabel("generated tokens / s")
    ax.set_title(f"rollout throughput ({r['ratio']:.1f}x)")
    fig.tight_layout()
    fig.savefig(out / "rollout.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default=None, help="model dir (default: build a tiny 1M model)")
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--single", type=int, default=16, help="episodes the one-at-a-time baseline plays")
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    result = run(args)
    write_report(result, Path(args.out))
    print((Path(args.out) / "rollout.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
