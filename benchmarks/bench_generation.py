"""Rollout throughput of the ``hf`` backend on CPU with the tiny model.

Measures, on the same 64 real Sudoku prompts (4x4 goal + rendered board, through the chat template):

1. batched generation with ``HFBackend`` (all 64 sequences in one left-padded batch, KV cache);
2. the same 64 sequences generated one at a time with plain ``model.generate`` (KV cache, greedy, same
   ``max_new_tokens``): the baseline; the target is a ratio of at least 8x;
3. this machine's matmul rate (fp32 and bf16) with ``torch.matmul`` on the shapes a decode step multiplies and
   on a large square, so the achieved model FLOP rate (2 x parameters per token) can be read as a fraction.

Writes ``benchmarks/results/generation.{md,json,png}``.
Run: ``.venv/bin/python benchmarks/bench_generation.py`` (``--help`` for the options).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend
from milepost.backends.tiny import build_tiny_model, count_parameters
from milepost.envs import make_env

RESULTS = Path(__file__).parent / "results"


def sudoku_requests(n: int, params: SamplingParams) -> list[GenerationRequest]:
    """``n`` agent-style chat prompts: the 4x4 goal as system message, a rendered board as user message."""
    env = make_env("sudoku", size=4)
    requests = []
    for seed in range(n):
        obs, _ = env.reset(seed=seed)
        messages = [
            {"role": "system", "content": env.goal_text()},
            {"role": "user", "content": f"Current observation:\n{obs}"},
        ]
        requests.append(GenerationRequest(messages=messages, params=params))
    return requests


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall time of ``repeats`` calls (after the caller's warm-up) and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def matmul_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 0.4) -> float:
    """FLOP/s of ``(m, k) @ (k, n)`` in ``dtype``, from as many calls as fit in about ``seconds``."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(3):
        torch.matmul(a, b)
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        torch.matmul(a, b)
        calls += 1
    return 2.0 * m * k * n * calls / elapsed


def plain_generate(backend: HFBackend, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """The baseline: ``model.generate`` on one sequence at a time (greedy, KV cache)."""
    outs = []
    for ids in prompts:
        x = torch.tensor([ids])
        y = backend.model.generate(
            x,
            attention_mask=torch.ones_like(x),
            do_sample=False,
            max_new_tokens=max_new,
            pad_token_id=backend.pad_id,
            eos_token_id=sorted(backend.eos_ids),
            use_cache=True,
        )
        outs.append(y[0, len(ids) :].tolist())
    return outs


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(args.model_dir) if args.model_dir else build_tiny_model(Path(tmp) / "tiny", size=args.size)
        fp32 = HFBackend(model_dir, dtype="float32", max_batch_size=args.n)
        bf16 = HFBackend(model_dir, dtype="bfloat16", max_batch_size=args.n)
    params = count_parameters(fp32.model)
    cfg = fp32.model.config
    greedy = sudoku_requests(args.n, SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens))
    sampled = sudoku_requests(args.n, SamplingParams(temperature=0.8, max_new_tokens=args.max_new_tokens, seed=0))
    prompts = [fp32.encode(r) for r in greedy]

    fp32.generate(greedy[:8])  # warm-up: allocator, kernels, lazy imports
    bf16.generate(greedy[:8])
    plain_generate(fp32, prompts[:2], 8)
    # Batched and baseline runs alternate, so that load from other processes on a shared machine hits both.
    batched_times, plain_times = [], []
    for i in range(max(args.repeats, args.baseline_repeats)):
        if i < args.repeats:
            t, batched = timed(lambda: fp32.generate(greedy), 1)
            batched_times.append(t)
        if i < args.baseline_repeats:
            t, plain = timed(lambda: plain_generate(fp32, prompts, args.max_new_tokens), 1)
            plain_times.append(t)
    t_batched, t_plain = statistics.median(batched_times), statistics.median(plain_times)
    t_sampled, sampled_out = timed(lambda: fp32.generate(sampled), args.repeats)
    t_bf16, bf16_out = timed(lambda: bf16.generate(greedy), args.repeats)

    def tokens(outs: list[Any]) -> int:
        return sum(len(o if isinstance(o, list) else o.completion_ids) for o in outs)

    same = sum(p == b.completion_ids for p, b in zip(plain, batched))
    rates = {
        name: tokens(outs) / t
        for name, outs, t in [
            ("plain_generate_one_at_a_time", plain, t_plain),
            ("batched_fp32_greedy", batched, t_batched),
            ("batched_fp32_sampled", sampled_out, t_sampled),
            ("batched_bf16_greedy", bf16_out, t_bf16),
        ]
    }
    d, ff, vocab = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    matmul = {
        "fp32_decode_mlp": matmul_rate(args.n, d, ff, torch.float32),
        "fp32_decode_lm_head": matmul_rate(args.n, d, vocab, torch.float32),
        "fp32_square_1024": matmul_rate(1024, 1024, 1024, torch.float32),
        "bf16_decode_mlp": matmul_rate(args.n, d, ff, torch.bfloat16),
        "bf16_square_1024": matmul_rate(1024, 1024, 1024, torch.bfloat16),
    }
    flops_per_token = 2 * params
    mean_context = statistics.mean(len(p) for p in prompts) + args.max_new_tokens / 2
    attention_flops = 4 * cfg.num_hidden_layers * mean_context * cfg.num_attention_heads * cfg.head_dim
    achieved = rates["batched_fp32_greedy"] * flops_per_token
    return {
        "model": {
            "dir": str(args.model_dir or f"tiny {args.size} (built)"),
            "arch": cfg.model_type,
            "parameters": params,
            "hidden": d,
            "layers": cfg.num_hidden_layers,
            "vocab": vocab,
        },
        "setup": {
            "sequences": args.n,
            "max_new_tokens": args.max_new_tokens,
            "threads": args.threads,
            "mean_prompt_tokens": statistics.mean(len(p) for p in prompts),
            "repeats": args.repeats,
            "load_average": os.getloadavg(),
            "torch": torch.__version__,
        },
        "seconds_each_repeat": {"plain": plain_times, "batched_fp32_greedy": batched_times},
        "seconds": {
            "plain": t_plain,
            "batched_fp32_greedy": t_batched,
            "batched_fp32_sampled": t_sampled,
            "batched_bf16_greedy": t_bf16,
        },
        "tokens_per_s": rates,
        "speedup_batched_vs_plain": rates["batched_fp32_greedy"] / rates["plain_generate_one_at_a_time"],
        "greedy_sequences_identical_to_plain": f"{same}/{args.n}",
        "matmul_flops_per_s": matmul,
        "model_flops_per_token": flops_per_token,
        "attention_flops_per_token": attention_flops,
        "achieved_flops_per_s": achieved,
        "fraction_of_decode_shape_matmul": achieved / matmul["fp32_decode_mlp"],
        "fraction_of_peak_matmul": achieved / matmul["fp32_square_1024"],
    }


def write_report(result: dict[str, Any], out: Path) -> None:
    """``generation.json``, ``generation.md`` and ``generation.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "generation.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    r, s, m = result["tokens_per_s"], result["setup"], result["matmul_flops_per_s"]
    lines = [
        "# Generation throughput (hf backend, tiny model, CPU)",
        "",
        f"Model: {result['model']['arch']}, {result['model']['parameters']:,} parameters; "
        f"{s['sequences']} Sudoku 4x4 prompts (mean {s['mean_prompt_tokens']:.0f} tokens), "
        f"{s['max_new_tokens']} new tokens each; {s['threads']} torch thread(s); load average "
        f"{', '.join(f'{x:.1f}' for x in s['load_average'])} "
        "(a shared machine: read as orders of magnitude).",
        "",
        "| run | new tokens/s |",
        "| --- | ---: |",
        *(f"| {name.replace('_', ' ')} | {rate:,.0f} |" for name, rate in r.items()),
        "",
        f"**Batched vs one at a time: {result['speedup_batched_vs_plain']:.1f}x** (target >= 8x). "
        f"Greedy outputs identical to plain `generate`: {result['greedy_sequences_identical_to_plain']}.",
        "",
        "| matmul (torch.matmul) | GFLOP/s |",
        "| --- | ---: |",
        *(f"| {name.replace('_', ' ')} | {rate / 1e9:,.1f} |" for name, rate in m.items()),
        "",
        f"Model FLOPs per token ~ 2 x parameters = {result['model_flops_per_token'] / 1e6:.2f} MFLOP "
        f"(attention adds ~{result['attention_flops_per_token'] / 1e6:.2f} MFLOP at the mean context). "
        f"Batched fp32 greedy achieves {result['achieved_flops_per_s'] / 1e9:.2f} GFLOP/s: "
        f"**{100 * result['fraction_of_decode_shape_matmul']:.0f}%** of the fp32 matmul rate at the decode "
        f"step's own shape ({s['sequences']} x hidden x MLP width) and "
        f"**{100 * result['fraction_of_peak_matmul']:.1f}%** of the 1024^3 fp32 matmul rate.",
        "",
    ]
    (out / "generation.md").write_text("\n".join(lines), encoding="utf-8")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [textwrap.fill(n.replace("_", " "), 16) for n in r]
    left.bar(names, list(r.values()), color=["grey", "C0", "C1", "C2"])
    left.set_ylabel("new tokens / s")
    left.set_title(f"{s['sequences']} sequences: batched vs one at a time ({result['speedup_batched_vs_plain']:.1f}x)")
    left.tick_params(axis="x", labelsize=7)
    labels = ["achieved\n(2N x tok/s)", *(textwrap.fill(n.replace("_", " "), 12) for n in m)]
    values = [result["achieved_flops_per_s"] / 1e9, *(v / 1e9 for v in m.values())]
    right.bar(labels, values, color=["C0", *(["C3"] * len(m))])
    right.set_ylabel("GFLOP/s")
    right.set_yscale("log")
    right.set_title("model FLOP rate vs measured matmul rate")
    right.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(out / "generation.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default=None, help="model directory (default: build the tiny model)")
    parser.add_argument("--size", default="1m", help="tiny preset when building (default 1m)")
    parser.add_argument("--n", type=int, default=64, help="sequences (default 64)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the cores are shared)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each batched run (median)")
    parser.add_argument("--baseline-repeats", type=int, default=2, help="timed repeats of the slow baseline")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(argv)
    result = run(args)
    write_report(result, Path(args.out))
    print((Path(args.out) / "generation.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
