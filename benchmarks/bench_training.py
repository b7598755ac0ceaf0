"""Training throughput of the tiny models on CPU, and where an RL iteration's time goes.

1. SFT training steps (forward + backward + AdamW step, the loss on response tokens only, exactly as
   ``milepost sft`` computes it) on one batch of real demonstrations: oracle episodes of 4x4 Sudoku played
   through the agent loop with the tiny CPU profile's observation (``configs/tiny-cpu/sudoku4_sft.yaml``: hints
   renderer, memory K = 0, 15% noisy turns, 40% macro tasks), prompts through the chat template. For the 1M and
   5M tiny models, fp32 and bf16 autocast (labelled with whether this CPU has native bf16 instructions).
   Tokens per second count every real (unpadded) prompt and response token the step processes; the model FLOP
   rate is 6 x parameters x tokens/s, reported as a fraction of this machine's fp32 (and bf16) matmul rate
   measured in the same run (``matmul_rate`` of ``bench_generation``). The baseline, measured in the same run
   on the same batch: the 1M model trained one example at a time (gradient accumulation, one optimizer step),
   i.e. the same work without batching; and the same batched step with the shared prompt prefix computed per
   row instead of once (``sequence_logprobs(..., share_prefix=False)``).
2. One pass of SFT over a pool of demonstrations (``--pool-batches`` batches of the same kind), batches cut from
   the plain shuffle against length-grouped batches (``sft.group_by_length``; ``milepost.training.sft.sft_batches``),
   same model, same examples: real tokens per second of each and the ratio, with each order's padding share.
3. The share of wall time spent in rollout against update in an RL phase: ``perf/rollout_s`` and
   ``perf/update_s`` of each iteration in a run's ``metrics.jsonl`` (``--run DIR``), or, without ``--run``, of a
   short phase run here (``train_rl`` from ``checkpoints/sudoku4-sft`` with ``configs/tiny-cpu/sudoku4_atomic.yaml``
   on a small S2-S3 dataset).

The process is pinned to one core and torch uses one thread; each rate is the best of ``--repeats`` runs, the
runs taken in turn within each repeat. Writes ``benchmarks/results/training.{md,json,png}``.
Run: ``.venv/bin/python benchmarks/bench_training.py`` (``--help`` for the options; about 2-3 minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))

from bench_generation import matmul_rate
from common import best_rates, pin_one_core

from milepost.backends.hf import HFBackend
from milepost.backends.logprobs import sequence_logprobs
from milepost.backends.tiny import build_tiny_model, count_parameters, default_corpus
from milepost.config import load_config
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.tracking import read_metrics
from milepost.training.config import TrainConfig
from milepost.training.losses import sft_loss
from milepost.training.setup import prompt_corpus
from milepost.training.sft import Example, demonstrations, sft_batches

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SFT_CONFIG = ROOT / "configs" / "tiny-cpu" / "sudoku4_sft.yaml"
RL_CONFIG = ROOT / "configs" / "tiny-cpu" / "sudoku4_atomic.yaml"
CHECKPOINT = ROOT / "checkpoints" / "sudoku4-sft"


def native_bf16() -> bool:
    """Whether this CPU has bf16 instructions (AVX512-BF16 or AMX); without them autocast emulates bf16."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


@contextlib.contextmanager
def quiet() -> Any:
    """Silence the progress bars transformers prints on stderr while loading weights."""
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        yield


def sft_batch(cfg: TrainConfig, backend: HFBackend, batch_size: int, seed: int) -> list[Example]:
    """``batch_size`` demonstration turns of 4x4 tasks spread over S1-S5 (3-12 empty cells), as ``milepost sft``
    builds them for this tokenizer."""
    tasks = [make_task(*generate_easy(4, 3 + i % 10, seed, i), level="S", index=i) for i in range(2 * batch_size)]
    examples = demonstrations(cfg, tasks, backend, progress=False)
    return random.Random(seed).sample(examples, min(batch_size, len(examples)))


def train_step(
    model: Any, optimizer: torch.optim.Optimizer, batch: list[Example], pad_id: int, bf16: bool, share: bool = True
) -> None:
    """One SFT step as ``train_sft`` takes it: response-token loss, backward, clip, AdamW step (``share``: the
    prompt prefix all rows share is run once, as ``sequence_logprobs`` does by default)."""
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with autocast:
        logp = sequence_logprobs(
            model,
            [e.prompt_ids for e in batch],
            [e.completion_ids for e in batch],
            1.0,
            pad_id=pad_id,
            share_prefix=share,
        )
    lengths = torch.tensor([len(e.completion_ids) for e in batch])
    mask = torch.arange(logp.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    loss = sft_loss(logp.float(), mask)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def accumulated_step(model: Any, optimizer: torch.optim.Optimizer, batch: list[Example], pad_id: int) -> None:
    """The baseline: the same batch one example at a time (gradients accumulated, one optimizer step)."""
    optimizer.zero_grad(set_to_none=True)
    for e in batch:
        logp = sequence_logprobs(model, [e.prompt_ids], [e.completion_ids], 1.0, pad_id=pad_id)
        mask = torch.ones_like(logp, dtype=torch.bool)
        (sft_loss(logp, mask) / len(batch)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def sft_pool(cfg: TrainConfig, backend: HFBackend, count: int, seed: int) -> list[Example]:
    """``count`` demonstration turns of 4x4 tasks over S1-S5, as ``sft_batch`` draws them."""
    examples: list[Example] = []
    i = 0
    while len(examples) < count:
        tasks = [make_task(*generate_easy(4, 3 + j % 10, seed + 1, j), level="S", index=j) for j in range(i, i + 64)]
        examples += demonstrations(cfg, tasks, backend, progress=False)
        i += 64
    return random.Random(seed).sample(examples, count)


def padding_share(pool: list[Example], batches: list[list[int]]) -> float:
    """Share of computed positions that are padding when each batch pads prompts and answers to its longest."""
    real = padded = 0
    for b in batches:
        real += sum(len(pool[i].prompt_ids) + len(pool[i].completion_ids) for i in b)
        padded += len(b) * (max(len(pool[i].prompt_ids) for i in b) + max(len(pool[i].completion_ids) for i in b))
    return 1 - real / padded


def grouping(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One pass over the same pool with plain-shuffle batches and with length-grouped batches."""
    cfg = load_config(TrainConfig, SFT_CONFIG, ["threads=1"])
    corpus = [*default_corpus(), *prompt_corpus(cfg)]
    with quiet():
        backend = HFBackend(build_tiny_model(tmp / "grouping", size=args.sizes[0], seed=0, corpus=corpus))
    model, pad = backend.model, backend.pad_id
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    pool = sft_pool(cfg, backend, args.pool_batches * args.batch_size, args.seed)
    lengths = [len(e.prompt_ids) + len(e.completion_ids) for e in pool]
    tokens = sum(lengths)
    orders = {
        name: sft_batches(lengths, 1, args.batch_size, group, random.Random(args.seed))
        for name, group in (("plain", False), ("grouped", True))
    }

    def one_pass(batches: list[list[int]]) -> None:
        for b in batches:
            train_step(model, optimizer, [pool[i] for i in b], pad, False)

    train_step(model, optimizer, pool[: args.batch_size], pad, False)  # warm-up
    rates = best_rates({k: timed_tokens(lambda o=o: one_pass(o), tokens) for k, o in orders.items()}, args.repeats)
    return {
        "examples": len(pool),
        "batches": args.pool_batches,
        "model": args.sizes[0],
        "tokens": tokens,
        "tokens_per_s": rates,
        "padding_share": {k: padding_share(pool, o) for k, o in orders.items()},
        "ratio_grouped_vs_plain": (rates["grouped"] or 0.0) / (rates["plain"] or 1.0),
    }


def timed_tokens(fn: Callable[[], None], tokens: int) -> Callable[[], tuple[int, float]]:
    def run() -> tuple[int, float]:
        start = time.perf_counter()
        fn()
        return tokens, time.perf_counter() - start

    return run


def throughput(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    cfg = load_config(TrainConfig, SFT_CONFIG, ["threads=1"])
    corpus = [*default_corpus(), *prompt_corpus(cfg)]  # the tokenizer `milepost sft` builds for tiny:SIZE
    models: dict[str, dict[str, Any]] = {}
    runs: dict[str, Callable[[], tuple[int, float]] | None] = {}
    batch: list[Example] = []
    for size in args.sizes:
        with quiet():
            backend = HFBackend(build_tiny_model(tmp / size, size=size, seed=0, corpus=corpus))
        model, pad = backend.model, backend.pad_id
        model.train()
        batch = sft_batch(cfg, backend, args.batch_size, args.seed)  # same tokenizer corpus: same batch each size
        tokens = sum(len(e.prompt_ids) + len(e.completion_ids) for e in batch)
        width = max(len(e.prompt_ids) for e in batch) + max(len(e.completion_ids) for e in batch)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        c = model.config
        models[size] = {
            "parameters": count_parameters(model),
            "hidden": c.hidden_size,
            "intermediate": c.intermediate_size,
            "layers": c.num_hidden_layers,
            "vocab": c.vocab_size,
            "tokens_per_step": tokens,
            "padded_tokens_per_step": len(batch) * width,
        }
        steps: dict[str, Callable[[], None]] = {
            f"{size}_fp32": lambda m=model, o=optimizer, b=batch, p=pad: train_step(m, o, b, p, False),
            f"{size}_bf16_autocast": lambda m=model, o=optimizer, b=batch, p=pad: train_step(m, o, b, p, True),
        }
        if size == args.sizes[0]:
            steps[f"{size}_fp32_prefix_per_row"] = lambda m=model, o=optimizer, b=batch, p=pad: train_step(
                m, o, b, p, False, share=False
            )
            steps[f"{size}_fp32_one_at_a_time"] = lambda m=model, o=optimizer, b=batch, p=pad: accumulated_step(
                m, o, b, p
            )
        for name, step in steps.items():
            step()  # warm-up: allocator, kernels
            runs[name] = timed_tokens(step, tokens)
    rates = best_rates(runs, args.repeats)
    first = args.sizes[0]
    matmul = {"fp32_square_1024": matmul_rate(1024, 1024, 1024, torch.float32)}
    matmul["bf16_square_1024"] = matmul_rate(1024, 1024, 1024, torch.bfloat16)
    for size, info in models.items():
        # The MLP's up-projection at the step's own shape: every padded position of the batch x hidden x MLP width.
        matmul[f"fp32_train_shape_{size}"] = matmul_rate(
            info["padded_tokens_per_step"], info["hidden"], info["intermediate"], torch.float32
        )
    results: dict[str, dict[str, float]] = {}
    for name, rate in rates.items():
        assert rate is not None
        size = name.split("_")[0]
        flops = 6.0 * models[size]["parameters"] * rate
        peak = matmul["bf16_square_1024"] if "bf16" in name else matmul["fp32_square_1024"]
        results[name] = {
            "tokens_per_s": rate,
            "model_flops_per_s": flops,
            "fraction_of_fp32_square_matmul": flops / matmul["fp32_square_1024"],
            "fraction_of_same_dtype_square_matmul": flops / peak,
            "fraction_of_fp32_train_shape_matmul": flops / matmul[f"fp32_train_shape_{size}"],
        }
    base = rates[f"{first}_fp32_one_at_a_time"] or 1.0
    return {
        "models": models,
        "batch": {
            "examples": len(batch),
            "mean_prompt_tokens": statistics.mean(len(e.prompt_ids) for e in batch),
            "mean_response_tokens": statistics.mean(len(e.completion_ids) for e in batch),
            "observation": f"4x4 Sudoku, render={cfg.env.render}, memory_k={cfg.agent.memory_k}",
        },
        "runs": results,
        "matmul_flops_per_s": matmul,
        "native_bf16": native_bf16(),
        "ratios": {
            "batched_vs_one_at_a_time": (rates[f"{first}_fp32"] or 0.0) / base,
            "shared_prefix_vs_per_row": (rates[f"{first}_fp32"] or 0.0)
            / (rates[f"{first}_fp32_prefix_per_row"] or 1.0),
            **{f"bf16_vs_fp32_{s}": (rates[f"{s}_bf16_autocast"] or 0.0) / (rates[f"{s}_fp32"] or 1.0) for s in models},
        },
    }


def rl_phase(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Rollout vs update time per iteration, from ``--run`` or from a short RL phase run here."""
    if args.run:
        run_dir = Path(args.run)
        source = f"the RL run in {run_dir} (--run)"
        setup: dict[str, Any] = {}
    else:
        from milepost.cli.main import main as cli
        from milepost.training.trainer import train_rl

        data = tmp / "bench_train_data"
        argv = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "40", "--test", "8", "--seed", "0"]
        with contextlib.redirect_stdout(sys.stderr):
            if cli([*argv, "--out", str(data), "--no-progress"]) != 0:
                raise SystemExit("bench_training: could not write the RL phase's dataset")
        model = Path(args.model).resolve()
        overrides = [
            f"data={data}",
            f"model={model}",
            f"rl.iterations={args.iterations}",
            f"rl.tasks_per_iter={args.tasks_per_iter}",
            "threads=1",
            f"checkpoint_every={args.iterations}",
        ]
        cfg = load_config(TrainConfig, RL_CONFIG, overrides)
        run_dir = tmp / "rl"
        with quiet():
            train_rl(cfg, run_dir, progress=False)
        shown = model.relative_to(ROOT) if model.is_relative_to(ROOT) else model
        settings = " ".join([f"model={shown}", *overrides[2:]])
        source = f"short phase run here ({RL_CONFIG.relative_to(ROOT)} with {settings}, on 4x4 S2-S3 data)"
        setup = {
            "samples_per_task": cfg.rl.samples_per_task,
            "minibatches": cfg.rl.minibatches,
            "levels": cfg.levels,
            "max_steps": cfg.env.max_steps,
            "max_new_tokens": cfg.agent.max_new_tokens,
        }
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if "perf/rollout_s" in r and "perf/update_s" in r]
    if not rows:
        raise SystemExit(f"{run_dir}/metrics.jsonl has no perf/rollout_s and perf/update_s rows (not an RL run?)")
    iterations = [
        {
            "iteration": r.get("iteration"),
            "rollout_s": r["perf/rollout_s"],
            "update_s": r["perf/update_s"],
            "rollout_share": r["perf/rollout_s"] / max(r["perf/rollout_s"] + r["perf/update_s"], 1e-9),
            "turns": r.get("train/turns"),
            "update_tokens": r.get("train/tokens"),
            "success": r.get("rollout/success"),
        }
        for r in rows
    ]
    rollout = sum(i["rollout_s"] for i in iterations)
    update = sum(i["update_s"] for i in iterations)
    return {
        "source": source,
        "run_dir": str(run_dir) if args.run else None,
        "setup": setup,
        "iterations": iterations,
        "rollout_s": rollout,
        "update_s": update,
        "rollout_share": rollout / max(rollout + update, 1e-9),
        "update_share": update / max(rollout + update, 1e-9),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    pinned = pin_one_core()
    torch.set_num_threads(1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        sft = throughput(args, tmp)
        grouped = grouping(args, tmp)
        rl = rl_phase(args, tmp)
    return {
        "setup": {
            "pinned": pinned,
            "threads": 1,
            "repeats": args.repeats,
            "batch_size": args.batch_size,
            "load_average": os.getloadavg(),
            "torch": torch.__version__,
            "wall_s": time.perf_counter() - start,
        },
        "sft_step": sft,
        "sft_grouping": grouped,
        "rl_phase": rl,
    }


def write_report(result: dict[str, Any], out: Path) -> None:
    """``training.json``, ``training.md`` and ``training.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "training.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    s, sft, rl = result["setup"], result["sft_step"], result["rl_phase"]
    g = result["sft_grouping"]
    b, m = sft["batch"], sft["matmul_flops_per_s"]
    bf16_label = "native AVX512-BF16 / AMX" if sft["native_bf16"] else "no native bf16 instructions: emulated"
    model_lines = [
        f"| {size} | {info['parameters']:,} | {info['hidden']} x {info['layers']} layers | "
        f"{info['tokens_per_step']:,} ({info['padded_tokens_per_step']:,} padded) |"
        for size, info in sft["models"].items()
    ]
    run_lines = [
        f"| {name.replace('_', ' ')} | {r['tokens_per_s']:,.0f} | {r['model_flops_per_s'] / 1e9:.2f} | "
        f"{100 * r['fraction_of_fp32_square_matmul']:.1f}% | {100 * r['fraction_of_same_dtype_square_matmul']:.1f}% | "
        f"{100 * r['fraction_of_fp32_train_shape_matmul']:.1f}% |"
        for name, r in sft["runs"].items()
    ]
    ratios = sft["ratios"]
    iter_lines = [
        f"| {i['iteration']} | {i['rollout_s']:.2f} | {i['update_s']:.2f} | {100 * i['rollout_share']:.0f}% | "
        f"{int(i['turns']) if i['turns'] is not None else '-'} | "
        f"{'-' if i['success'] is None else format(i['success'], '.2f')} |"
        for i in rl["iterations"]
    ]
    lines = [
        "# Training throughput (tiny models, CPU) and the rollout / update split of RL",
        "",
        f"One pinned core ({s['pinned']}), {s['threads']} torch thread, best of {s['repeats']} runs taken in turn; "
        f"load average {', '.join(f'{x:.1f}' for x in s['load_average'])} (a shared machine: read absolute "
        f"figures as orders of magnitude, ratios as the comparison). Whole benchmark {s['wall_s']:.0f} s.",
        "",
        "## SFT step: forward + backward + AdamW, loss on response tokens",
        "",
        f"One batch of {b['examples']} demonstration turns ({b['observation']}): mean prompt "
        f"{b['mean_prompt_tokens']:.0f} tokens, mean response {b['mean_response_tokens']:.0f} tokens "
        "(answer + end token), built by `milepost.training.sft.demonstrations` as `milepost sft` builds them.",
        "",
        "| model | parameters | shape | tokens per step |",
        "| --- | ---: | --- | ---: |",
        *model_lines,
        "",
        f"bf16 autocast: {bf16_label}.",
        "",
        "| run | tokens/s | model GFLOP/s (6N x tok/s) | of fp32 1024^3 matmul | of same-dtype 1024^3 matmul "
        "| of fp32 matmul at the step's MLP shape |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *run_lines,
        "",
        f"**Batched step vs the same batch one example at a time: {ratios['batched_vs_one_at_a_time']:.1f}x** "
        "(the baseline, same run). The shared prompt prefix run once for the batch (`sequence_logprobs` default) "
        f"vs once per row: **{ratios['shared_prefix_vs_per_row']:.2f}x**. bf16 autocast vs fp32: "
        + ", ".join(f"{k.removeprefix('bf16_vs_fp32_')} {v:.2f}x" for k, v in ratios.items() if k.startswith("bf16_"))
        + ".",
        "",
        "| matmul (torch.matmul) | GFLOP/s |",
        "| --- | ---: |",
        *(f"| {name.replace('_', ' ')} | {rate / 1e9:,.1f} |" for name, rate in m.items()),
        "",
        "6N counts every parameter (tied embeddings once) and leaves out attention scores; padded positions "
        "are computed but not counted as tokens.",
        "",
        "## SFT pass: plain-shuffle batches vs length-grouped batches (`sft.group_by_length`)",
        "",
        f"One pass over {g['examples']} demonstration turns of the same kind ({g['batches']} batches of "
        f"{s['batch_size']}; {g['tokens']:,} real tokens), tiny {g['model']} fp32, the same steps as above.",
        "",
        "| batches | tokens/s | padding share |",
        "| --- | ---: | ---: |",
        *(
            f"| {name} | {g['tokens_per_s'][name]:,.0f} | {100 * g['padding_share'][name]:.1f}% |"
            for name in ("plain", "grouped")
        ),
        "",
        f"**Length-grouped vs plain batches: {g['ratio_grouped_vs_plain']:.2f}x** (same run, same examples).",
        "",
        "## RL phase: rollout vs update",
        "",
        f"Source: {rl['source']}.",
        "",
        "| iteration | rollout s | update s | rollout share | turns in the loss | rollout success |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        *iter_lines,
        "",
        f"**Rollout {100 * rl['rollout_share']:.0f}% / update {100 * rl['update_share']:.0f}%** of the "
        f"{rl['rollout_s'] + rl['update_s']:.1f} s spent in the phase's iterations (evaluation and checkpoints "
        "not included).",
        "",
        "![training](training.png)",
        "",
    ]
    (out / "training.md").write_text("\n".join(lines), encoding="utf-8")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = list(sft["runs"])
    left.bar(
        [textwrap.fill(n.replace("_", " "), 12) for n in names],
        [sft["runs"][n]["tokens_per_s"] for n in names],
        color=["C7" if "one_at_a_time" in n else ("C1" if "bf16" in n else "C0") for n in names],
    )
    left.set_ylabel("training tokens / s")
    left.set_yscale("log")
    left.set_title(f"SFT step, batch {b['examples']} (batched {ratios['batched_vs_one_at_a_time']:.1f}x)")
    left.tick_params(axis="x", labelsize=7)
    its = [str(i["iteration"]) for i in rl["iterations"]]
    roll = [i["rollout_s"] for i in rl["iterations"]]
    upd = [i["update_s"] for i in rl["iterations"]]
    right.bar(its, roll, label="rollout", color="C0")
    right.bar(its, upd, bottom=roll, label="update", color="C3")
    right.set_xlabel("RL iteration")
    right.set_ylabel("seconds")
    right.set_title(f"RL: rollout {100 * rl['rollout_share']:.0f}% of iteration time")
    right.legend()
    fig.tight_layout()
    fig.savefig(out / "training.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["1m", "5m"], help="tiny presets (default 1m 5m)")
    parser.add_argument("--batch-size", type=int, default=32, help="demonstration turns per step (default 32)")
    parser.add_argument("--pool-batches", type=int, default=6, help="batches in the grouping comparison's pool")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each configuration (best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run", default=None, help="an RL run folder to read perf/ timings from (default: run one)")
    parser.add_argument("--model", default=str(CHECKPOINT), help="initial policy of the RL phase run here")
    parser.add_argument("--iterations", type=int, default=2, help="RL iterations of the phase run here")
    parser.add_argument("--tasks-per-iter", type=int, default=4, help="tasks per RL iteration (x4 samples)")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(argv)
    result = run(args)
    write_report(result, Path(args.out))
    print((Path(args.out) / "training.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
