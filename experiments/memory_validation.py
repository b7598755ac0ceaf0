"""The memory plan against measured peak RSS of a real update on this CPU (``milepost memory``'s validation).

Each case builds a random-init Qwen3 (``transformers.Qwen3Config``: width 64-256, 2-4 layers, vocabulary up to
151,936) in fp32, makes a minibatch of turns with random prompt and answer ids (prompts of slightly different
lengths, so the rows are padded; no shared prefix, so the rows are scored whole, as under FSDP), and runs the
trainer's own ``update`` once in a fresh subprocess. Measured: the process's peak resident memory during
``update`` minus its resident memory just before it (the model and optimizer built; the peak is reset first
through ``/proc/self/clear_refs`` so the model build's transients do not count; ``ru_maxrss`` is reported beside
it), with glibc's default allocator and with ``MALLOC_MMAP_THRESHOLD_`` fixed. Predicted:
:func:`milepost.training.memory.update_terms` for one rank in fp32, less the weights (already in the baseline).

    python -m experiments.memory_validation --out docs/results/memory
    python -m experiments.memory_validation --out docs/results/memory --micro-batch-tokens 4096   # after the
        # micro-batched update is merged: rl.micro_batch_tokens is set on every case

Writes ``validation.md`` (the table, the command, the error statistics), ``validation.json`` and
``validation.png`` (predicted vs measured).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Case:
    hidden: int
    layers: int
    vocab: int
    prompt: int
    answer: int
    rows: int
    """turns per minibatch"""
    minibatches: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    checkpointing: bool = False

    @property
    def label(self) -> str:
        ck = " ckpt" if self.checkpointing else ""
        return f"h{self.hidden} L{self.layers} V{self.vocab} {self.rows}x({self.prompt}+{self.answer}){ck}"


CASES = [
    Case(64, 2, 151936, 64, 64, 4),
    Case(64, 2, 151936, 256, 256, 2),
    Case(128, 2, 151936, 512, 128, 4),
    Case(256, 4, 151936, 96, 32, 8),
    Case(256, 4, 32000, 1024, 1024, 2),
    Case(256, 4, 4096, 1024, 1024, 4),
    Case(128, 3, 4096, 2048, 2048, 1),
    Case(256, 2, 8192, 1536, 512, 4),
    Case(192, 4, 65536, 512, 512, 2, heads=6, kv_heads=2),
    Case(256, 4, 4096, 1024, 1024, 4, checkpointing=True),
]
"""Shapes chosen so each term leads somewhere: logits (large vocabulary), activations (long rows, small
vocabulary), the attention masks (2,048-token rows), checkpointing."""


def _rss_now() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _rss_peak() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def measure(case: Case, micro_batch_tokens: int | None) -> dict[str, Any]:
    """Run one update of ``case`` in this process; returns bytes measured."""
    import random

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from milepost.training.config import TrainConfig
    from milepost.training.trainer import TurnSample, update

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=case.vocab,
        hidden_size=case.hidden,
        intermediate_size=3 * case.hidden,
        num_hidden_layers=case.layers,
        num_attention_heads=case.heads,
        num_key_value_heads=case.kv_heads,
        head_dim=case.head_dim,
        tie_word_embeddings=True,
        max_position_embeddings=8192,
    )
    model = Qwen3ForCausalLM(config).float()
    if case.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    rng = random.Random(0)
    samples = []
    for j in range(case.rows * case.minibatches):
        # Prompts 0-3 tokens short of the longest: the rows are padded, as a real minibatch's are.
        prompt = [rng.randrange(1, case.vocab) for _ in range(case.prompt - j % 4)]
        answer = [rng.randrange(1, case.vocab) for _ in range(case.answer)]
        logp = [-rng.uniform(5.0, 15.0) for _ in answer]
        samples.append(TurnSample(prompt, answer, logp, rng.gauss(0.0, 1.0)))
    cfg = TrainConfig()
    cfg.rl.minibatches = case.minibatches
    cfg.threads = 1
    if micro_batch_tokens is not None:
        if not hasattr(cfg.rl, "micro_batch_tokens"):
            raise SystemExit("--micro-batch-tokens: this checkout's RLConfig has no micro_batch_tokens")
        cfg.rl.micro_batch_tokens = micro_batch_tokens
    if case.checkpointing and hasattr(cfg.rl, "activation_checkpointing"):
        cfg.rl.activation_checkpointing = True
    base_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    reset = _reset_peak()
    base = _rss_now()
    start = time.perf_counter()
    update(model, optimizer, samples, cfg, pad_id=0, rng=random.Random(1))
    seconds = time.perf_counter() - start
    peak = _rss_peak() if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "baseline": base,
        "peak": peak,
        "measured": peak - base,
        "ru_maxrss_minus_baseline": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base,
        "ru_maxrss_before": base_max,
        "peak_reset": reset,
        "seconds": seconds,
        "params": sum(p.numel() for p in model.parameters()),
    }


def predict(case: Case, micro_batch_tokens: int | None) -> tuple[int, dict[str, int]]:
    """The plan's update peak above the weights for one fp32 rank, and its terms."""
    from milepost.training.memory import ModelShape, Workload, update_terms

    shape = ModelShape(
        "validation",
        case.hidden,
        case.layers,
        case.heads,
        case.kv_heads,
        case.head_dim,
        3 * case.hidden,
        case.vocab,
        tied=True,
    )
    work = Workload(
        rows=case.rows,
        prompt_tokens=case.prompt,
        answer_tokens=case.answer,
        micro_batch_tokens=micro_batch_tokens,
        activation_checkpointing=case.checkpointing,
    )
    persistent, transient, step = update_terms(shape, work, bf16=False, gpus=1)
    above = [t for t in persistent if t.name != "weights"]
    total = sum(t.bytes for t in above) + max(sum(t.bytes for t in transient), step.bytes)
    terms = {t.name: t.bytes for t in [*persistent, *transient, step]}
    return total, terms | {"params": shape.params}


MMAP_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
"""glibc: serve every allocation over 64 KiB by mmap, so freed tensors leave RSS at once. By default glibc raises
its mmap threshold after each free of a large block (up to 32 MiB), and tensors under it then come from the
heap, where freed activations stay resident between the forward and the backward: RSS then counts allocator
fragmentation, which a GPU's caching allocator does not have in the same form."""


def _run_case(index: int, micro_batch_tokens: int | None, env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "experiments.memory_validation", "--case", str(index)]
    if micro_batch_tokens is not None:
        cmd += ["--micro-batch-tokens", str(micro_batch_tokens)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise SystemExit(f"case {index} failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def write(rows: list[dict[str, Any]], out: Path, command: str) -> None:
    """validation.json, validation.md and validation.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    errors = [r["predicted"] / r["measured"] - 1 for r in rows]
    errors_mmap = [r["predicted"] / r["measured_mmap"] - 1 for r in rows]
    lines = [
        "# Memory plan vs measured peak RSS of a real update (CPU, fp32)",
        "",
        f"Command: `{command}`",
        "",
        "Each row: one `milepost.training.trainer.update` call (2 minibatches, so the second minibatch runs with",
        "the first one's gradients and AdamW's moments in memory) on a random-init Qwen3 in a fresh process.",
        "Measured = peak RSS during `update` minus RSS just before it (peak reset through `/proc/self/clear_refs`);",
        "predicted = `milepost.training.memory.update_terms` for one fp32 rank, less the weights. MiB.",
        "Measured twice: with glibc's default allocator, and with `MALLOC_MMAP_THRESHOLD_=65536` (every block over",
        "64 KiB mapped and unmapped on its own, so RSS holds the live tensors and not the heap's fragmentation).",
        "",
        "| # | case | params | rows x (prompt + answer) | grads + AdamW | activations | logits | predicted "
        "| measured | error | measured (mmap) | error (mmap) |",
        "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, err, err_mmap in zip(rows, errors, errors_mmap):
        t = r["terms"]
        lines.append(
            f"| {r['number']} | {r['label']} | {r['params']:,} "
            f"| {r['case']['rows']} x ({r['case']['prompt']} + {r['case']['answer']}) "
            f"| {_mib(t['gradients'] + t['optimizer'])} | {_mib(t['activations'])} | {_mib(t['logits'])} "
            f"| {_mib(r['predicted'])} | {_mib(r['measured'])} | {err:+.1%} "
            f"| {_mib(r['measured_mmap'])} | {err_mmap:+.1%} |"
        )
    lines += [""]
    for name, errs in (("default allocator", errors), ("mmap allocator", errors_mmap)):
        worst = max(errs, key=abs)
        mean_abs = sum(abs(e) for e in errs) / len(errs)
        inside = sum(abs(e) <= 0.25 for e in errs)
        lines.append(f"- {name}: mean |error| {mean_abs:.1%}, worst {worst:+.1%}; {inside} of {len(errs)} within 25%.")
    lines += [
        "",
        "![predicted vs measured](validation.png)",
        "",
    ]
    (out / "validation.md").write_text("\n".join(lines), encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    measured = [r["measured"] / 2**20 for r in rows]
    measured_mmap = [r["measured_mmap"] / 2**20 for r in rows]
    predicted = [r["predicted"] / 2**20 for r in rows]
    top = max(measured + measured_mmap + predicted) * 1.15
    ax.plot([0, top], [0, top], color="grey", lw=1, label="predicted = measured")
    ax.fill_between([0, top], [0, top * 0.75], [0, top * 1.25], color="grey", alpha=0.15, label="within 25%")
    ax.scatter(measured, predicted, zorder=3, label="glibc default allocator")
    ax.scatter(measured_mmap, predicted, zorder=3, marker="x", label="MALLOC_MMAP_THRESHOLD_=65536")
    for m, p, r in zip(measured, predicted, rows):
        ax.annotate(str(r["number"]), (m, p), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("measured peak RSS of update (MiB)")
    ax.set_ylabel("predicted by the memory plan (MiB)")
    ax.set_title("milepost memory: predicted vs measured (CPU, fp32)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "validation.png", dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/memory"))
    parser.add_argument("--micro-batch-tokens", type=int, default=None, help="set rl.micro_batch_tokens (post-merge)")
    parser.add_argument("--cases", default=None, help="comma list of case numbers (1-based; default all)")
    parser.add_argument("--table", action="store_true", help="rebuild the table from OUT/cases without measuring")
    parser.add_argument("--case", type=int, default=None, help=argparse.SUPPRESS)  # the subprocess's own entry
    args = parser.parse_args(argv)
    if args.case is not None:
        print(json.dumps(measure(CASES[args.case], args.micro_batch_tokens)))
        return
    chosen = [int(c) - 1 for c in args.cases.split(",")] if args.cases else list(range(len(CASES)))
    if args.table:
        chosen = []
    parts = args.out / "cases"  # one file per case: runs of different cases (even at once) add to one table
    parts.mkdir(parents=True, exist_ok=True)
    command = "python -m experiments.memory_validation " + " ".join(argv if argv is not None else sys.argv[1:])
    for i in chosen:
        case = CASES[i]
        got = _run_case(i, args.micro_batch_tokens)
        mmap = _run_case(i, args.micro_batch_tokens, MMAP_ENV)
        predicted, terms = predict(case, args.micro_batch_tokens)
        row = {"number": i + 1, "label": case.label, "case": asdict(case), "predicted": predicted, "terms": terms}
        row |= {**got, "measured_mmap": mmap["measured"], "command": command.strip()}
        tmp = parts / f"{i + 1:02d}.json.tmp"
        tmp.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
        tmp.replace(parts / f"{i + 1:02d}.json")
        print(
            f"{i + 1:>2} {case.label:<40} predicted {_mib(predicted):>7} MiB  measured {_mib(got['measured']):>7} MiB"
            f"  ({predicted / got['measured'] - 1:+.1%}; mmap allocator {_mib(mmap['measured'])} MiB,"
            f" {predicted / mmap['measured'] - 1:+.1%}; {got['seconds']:.1f} s)",
            flush=True,
        )
        _table(args.out, args.micro_batch_tokens)
    if args.table:
        _table(args.out, args.micro_batch_tokens)


def _table(out: Path, micro_batch_tokens: int | None) -> None:
    """validation.md / .json / .png from every case measured so far in ``out/cases``."""
    rows = [json.loads(f.read_text(encoding="utf-8")) for f in sorted((out / "cases").glob("*.json"))]
    for r in rows:  # the measurements stay; the prediction is the plan's of today
        r["predicted"], r["terms"] = predict(CASES[r["number"] - 1], micro_batch_tokens)
    flag = f" --micro-batch-tokens {micro_batch_tokens}" if micro_batch_tokens else ""
    write(rows, out, f"python -m experiments.memory_validation --out {out}{flag}")


if __name__ == "__main__":
    main()
