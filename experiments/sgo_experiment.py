"""Plain agent against SGO agent with equal model size and training budget (issue: subgoal-driven planning).

One tiny model is built once (one tokenizer fitted to both agents' prompts, one weight initialisation) and
fine-tuned twice on oracle demonstrations of the same 4x4 Sudoku training tasks with the same number of SFT
steps: the plain arm sees goal, memory and observation; the SGO arm also sees the programmatic plan as a
checklist and answers with a PROGRESS line before its move (a milestone-conditioned policy; its oracle moves
toward the current subgoal). Each arm is then evaluated with its own agent kind on every test level (n = 4
samples per task, pass@1, pass@4, avg@4) and the failures are classified by the shared taxonomy, in
particular the share of 'stuck midway'.

Both arms use the recipe of the shipped checkpoint ``checkpoints/sudoku4-sft``
(``configs/tiny-cpu/sudoku4_sft.yaml``): tiny model ``1m``, cell-first answers, 15% noisy demonstration turns,
renderer ``hints``, memory K = 0, H_max = 16, lr 1e-3, 2 epochs; except that neither arm sees macro
demonstrations (``macro_share`` 0, atomic actions only), so that the comparison is about planning. The
demonstrations are counted before training and, should the noisy turns leave the arms with different example
counts, the epochs are set so that both take the same number of optimizer steps.

Every training seed (``--seeds``, default 0,1,2) repeats both arms from its own initialisation; the report gives
each arm's success and stuck-midway share of failures as a mean with a 95% t-interval across seeds. It also
runs the checks that tell a bug from a learning limit: the oracle played through each agent at evaluation, the
demonstrations' sizes in the tiny tokenizer's tokens against the answer caps, how often the SGO targets differ
from the plain ones, and what each trained model predicts, teacher-forced, on held-out demonstrations (PROGRESS,
REASON and ACTION tokens apart).

Usage (one CPU thread; measured per seed at the defaults on the shared 2-core machine, load 4-6: 19-30
minutes, of which SFT 5-8 min plain and 11-15 min SGO, the longer SGO prompts, and evaluation 0.5-1 and 3 min)::

    milepost data sudoku --size 4 --levels S1-S5 --train 400 --test 40 --seed 0 --out /tmp/sgo_data
    nice -n 10 python experiments/sgo_experiment.py --data /tmp/sgo_data --work '/tmp/sgo_runs/seed{seed}' --limit 10

Writes ``experiments/results/sgo.{md,json,png}``. The numbers are what this run measured, good or bad.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # common.py

from common import write_experiment

from milepost.agent.loop import AgentSettings
from milepost.backends.hf import HFBackend, load_model, resolve_device_dtype
from milepost.backends.tiny import build_tiny_model, default_corpus
from milepost.config import EnvConfig, to_yaml
from milepost.evaluation.failures import FAILURE_KINDS
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.evaluation.seeds import mean_interval
from milepost.io import atomic_write_json
from milepost.tracking import read_metrics
from milepost.training.config import AgentConfig, SFTConfig, TrainConfig
from milepost.training.setup import prompt_corpus, select_tasks
from milepost.training.sft import demonstrations, train_sft

RESULTS = Path(__file__).parent / "results"
ARMS = ("plain", "sgo")


def new_tokens(arm: str, args: argparse.Namespace) -> int:
    """The answer-length cap of an arm: the SGO answer carries a PROGRESS line (about 15 more tokens)."""
    return args.sgo_max_new_tokens if arm == "sgo" else args.max_new_tokens


def arm_config(arm: str, args: argparse.Namespace, model: Path, epochs: float | None = None) -> TrainConfig:
    """The SFT config of one arm: identical except for the agent kind (and the answer length it needs), and
    the epochs when the arms' demonstration counts differ (``epochs``: the value that equalises the steps)."""
    return TrainConfig(
        name=f"sgo-exp-{arm}",
        model=str(model),
        data=args.data,
        levels="S1-S5",
        env=EnvConfig(name="sudoku", size=4, max_steps=args.max_steps, render=args.render, action_mode="atomic"),
        agent=AgentConfig(
            memory_k=args.memory_k, temperature=0.8, max_new_tokens=new_tokens(arm, args), agent_kind=arm
        ),
        sft=SFTConfig(
            tasks=args.tasks,
            noise=args.noise,
            macro_share=0.0,
            cell_first=args.cell_first,
            epochs=args.epochs if epochs is None else epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            warmup_steps=args.warmup_steps,
        ),
        seed=args.seed,
        threads=args.threads,
        checkpoint_every=10_000,
    )


def equal_budgets(args: argparse.Namespace, initial: Path) -> dict[str, dict[str, Any]]:
    """Count each arm's demonstrations exactly as ``train_sft`` makes them (same tasks, same per-episode
    random streams) and give each arm the epochs that make the optimizer steps equal: the steps of
    ``--epochs`` over the larger example set. Also checks that the answer caps hold every demonstration."""
    model, tokenizer = load_model(initial, *resolve_device_dtype(None, "float32"))
    backend = HFBackend(model=model, tokenizer=tokenizer, name="count")
    counts: dict[str, dict[str, Any]] = {}
    for arm in ARMS:
        cfg = arm_config(arm, args, initial)
        tasks = select_tasks(cfg, "train")
        tasks = random.Random(cfg.seed).sample(tasks, min(cfg.sft.tasks, len(tasks)))
        examples = demonstrations(cfg, tasks, backend, progress=False)
        longest = max(len(e.completion_ids) for e in examples)  # with the end-of-sequence token
        if longest > new_tokens(arm, args):
            raise SystemExit(
                f"{arm}: the longest demonstration answer has {longest} tokens (with end of sequence), more than "
                f"the cap {new_tokens(arm, args)}; raise --{'sgo-' if arm == 'sgo' else ''}max-new-tokens"
            )
        counts[arm] = {"examples": len(examples), "batches": math.ceil(len(examples) / args.batch_size)}
        counts[arm]["longest_answer_tokens"] = longest
    target = max(int(args.epochs * c["batches"]) for c in counts.values())
    for c in counts.values():
        # int(epochs * batches) is what train_sft takes; the half step keeps float rounding from losing one.
        c["epochs"] = args.epochs if int(args.epochs * c["batches"]) == target else (target + 0.5) / c["batches"]
        c["steps"] = target
    return counts


def seed_work(args: argparse.Namespace, seed: int) -> Path:
    """The scratch folder of one training seed: ``--work`` with ``{seed}`` filled in (the default), or
    ``--work`` itself when it has no ``{seed}`` and only one seed runs, else ``--work/seed{seed}``."""
    if "{seed}" in args.work:
        return Path(args.work.replace("{seed}", str(seed)))
    return Path(args.work) if len(args.seeds) == 1 else Path(args.work) / f"seed{seed}"


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Both arms of one training seed (the seed sets the weight initialisation, the demonstration tasks and
    noise, the batch order and the evaluation's sampling); a rerun reuses what is already trained and evaluated."""
    args = argparse.Namespace(**{**vars(args), "seed": seed})
    work = seed_work(args, seed)
    work.mkdir(parents=True, exist_ok=True)
    initial = work / "initial"
    if not (initial / "config.json").exists():
        corpus = [*default_corpus()]
        for arm in ARMS:
            corpus += prompt_corpus(arm_config(arm, args, initial))
        build_tiny_model(initial, size=args.size, seed=args.seed, corpus=corpus)
    built = json.loads((initial / "milepost_tiny.json").read_text())
    if (built.get("size"), built.get("seed")) != (args.size, args.seed):
        raise SystemExit(f"{initial} holds a {built.get('size')} model of seed {built.get('seed')}: use a new --work")
    budgets = equal_budgets(args, initial)
    out: dict[str, Any] = {"arms": {}, "timings": {}, "budgets": budgets}
    for arm in ARMS:
        cfg = arm_config(arm, args, initial, budgets[arm]["epochs"])
        t0 = time.perf_counter()
        final = work / arm / "final"
        trained = not (final / "config.json").exists()
        if trained:
            final = train_sft(cfg, work / arm, progress=args.progress)
        elif (work / arm / "config.yaml").read_text(encoding="utf-8") != to_yaml(cfg):
            raise SystemExit(f"{work / arm} was trained with another config: use a new --work")
        rows = read_metrics(work / arm / "metrics.jsonl")
        if rows[-1]["train/examples"] != budgets[arm]["examples"]:
            raise RuntimeError(f"{arm}: trained on {rows[-1]['train/examples']} examples, counted {budgets[arm]}")
        t1 = time.perf_counter()
        spec = EvalSpec(
            env="sudoku",
            data=args.data,
            policy=f"hf:{final}",
            agent=arm,
            n=args.n,
            ks=[1, args.n],
            limit=args.limit,
            env_kwargs={"max_steps": args.max_steps, "render": args.render},
            settings=AgentSettings(
                memory_k=args.memory_k, temperature=0.8, max_new_tokens=new_tokens(arm, args), batch_size=64
            ),
            seed=args.seed,
        )
        result = evaluate(spec, work / arm / f"eval-limit{args.limit}", progress=args.progress)
        t2 = time.perf_counter()
        out["arms"][arm] = {
            "sft_steps": rows[-1]["step"],
            "sft_examples": rows[-1]["train/examples"],
            "sft_final_loss": rows[-1]["loss/sft"],
            "sft_epochs": cfg.sft.epochs,
            "levels": result["levels"],
            "sgo": result.get("sgo"),
            "teacher_forced": teacher_forced(args, arm, final),
        }
        # A rerun reuses a trained and evaluated arm (same config): the times of the run that did the work are
        # kept beside it (timings.json) and reported, not the rerun's.
        timing_file = work / arm / "timings.json"
        if trained or not timing_file.exists():
            timing = {"sft_s": round(t1 - t0, 1) if trained else "reused", "eval_s": round(t2 - t1, 1)}
            atomic_write_json(timing_file, timing)
        out["timings"][arm] = json.loads(timing_file.read_text())
    steps = {arm: out["arms"][arm]["sft_steps"] for arm in ARMS}
    if len(set(steps.values())) != 1:
        raise RuntimeError(f"unequal training budgets: {steps}")
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    out: dict[str, Any] = {"seeds": {}}
    for seed in args.seeds:
        out["seeds"][str(seed)] = run_seed(args, seed)
    out["diagnostics"] = diagnostics(args, seed_work(args, args.seeds[0]) / "initial")
    out["summary"] = summarise(out)
    out["meta"] = {k: v for k, v in vars(args).items() if k != "progress"}
    out["meta"].update(python=platform.python_version(), torch=torch.__version__)
    return out


# -- diagnostics: is a gap between the arms a bug (mismatched prompts, cut answers, a broken agent) or learning? --


def oracle_under_agents(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The oracle (the demonstrator, not a model) played through each arm's agent at evaluation, on the same
    test tasks: an agent that broke its own demonstrator (rejected its PROGRESS claims, cut its answers) would
    show here, whatever the model learned."""
    out: dict[str, Any] = {}
    for arm in ARMS:
        spec = EvalSpec(
            env="sudoku",
            data=args.data,
            policy="oracle",
            agent=arm,
            n=1,
            ks=[1],
            limit=args.limit,
            env_kwargs={"max_steps": args.max_steps, "render": args.render},
            settings=AgentSettings(memory_k=args.memory_k, max_new_tokens=new_tokens(arm, args), batch_size=64),
            seed=args.seeds[0],
        )
        result = evaluate(spec, work / f"oracle-{arm}", progress=False)
        totals = _totals(result["levels"])
        out[arm] = {"episodes": totals["episodes"], "success": totals["success"]}
        if arm == "sgo":
            out[arm]["sgo"] = {k: result["sgo"]["all"].get(k, 0) for k in SGO_KEYS}
    return out


SGO_KEYS = ("claims", "claims_accepted", "claims_rejected", "focus_mismatches", "replans", "progress_lines", "turns")


class _TargetProbe:
    """The SGO arm's (noise-free) oracle, also noting on every turn whether its move toward the current subgoal
    is the move the plain arm's oracle makes in the same state (the cell the plain model learns to pick)."""

    name = "oracle-probe"
    scripted = True

    def __init__(self, style: dict[str, Any]) -> None:
        from milepost.backends.scripted import MOVES, ScriptedPolicy

        self.policy = ScriptedPolicy("oracle", style=style)
        self.moves, self.style = MOVES.get("sudoku"), style
        self.turns = self.same = 0

    def act(self, episodes: Any) -> Any:
        for ep in episodes:
            plain = self.moves.oracle(ep.env.rules, **self.style)
            focus = ep.agent_state.oracle_action(ep.env, **self.style) or plain
            self.turns += 1
            self.same += focus[0] == plain[0]
        return self.policy.act(episodes)


def diagnostics(args: argparse.Namespace, initial: Path) -> dict[str, Any]:
    """Checks that need no trained model: the oracle under each agent, the demonstrations' sizes in the tiny
    tokenizer's tokens (prompts, answers against the caps), and how often the SGO targets differ from the
    plain targets in the same state."""
    from milepost.agent.loop import Job, run_episodes
    from milepost.training.setup import agent_settings, env_factory, make_agent

    args = argparse.Namespace(**{**vars(args), "seed": args.seeds[0]})
    out: dict[str, Any] = {"oracle": oracle_under_agents(args, initial.parent)}
    model, tokenizer = load_model(initial, *resolve_device_dtype(None, "float32"))
    backend = HFBackend(model=model, tokenizer=tokenizer, name="count")
    sizes: dict[str, Any] = {}
    for arm in ARMS:
        cfg = arm_config(arm, args, initial)
        tasks = select_tasks(cfg, "train")
        tasks = random.Random(cfg.seed).sample(tasks, min(cfg.sft.tasks, len(tasks)))
        examples = demonstrations(cfg, tasks, backend, progress=False)
        prompts = [len(e.prompt_ids) for e in examples]
        answers = [len(e.completion_ids) for e in examples]
        sizes[arm] = {
            "examples": len(examples),
            "prompt_tokens_mean": round(sum(prompts) / len(prompts), 1),
            "prompt_tokens_max": max(prompts),
            "answer_tokens_mean": round(sum(answers) / len(answers), 1),
            "answer_tokens_max": max(answers),
            "answer_cap": new_tokens(arm, args),
        }
    out["demonstrations"] = sizes
    cfg = arm_config("sgo", args, initial)
    tasks = select_tasks(cfg, "train")
    tasks = random.Random(cfg.seed).sample(tasks, min(cfg.sft.tasks, len(tasks)))
    probe = _TargetProbe({"cell_first": True} if args.cell_first else {})
    run_episodes(
        env_factory(cfg, 4),
        [Job(t) for t in tasks],
        probe,
        agent_settings(cfg),
        seed=cfg.seed,
        progress=False,
        agent=make_agent(cfg),
    )
    out["sgo_target_is_plain_target"] = {"turns": probe.turns, "same": probe.same}
    return out


def teacher_forced(args: argparse.Namespace, arm: str, final: Path, tasks: int = 20) -> dict[str, Any]:
    """What a trained arm learned, segment by segment: on noise-free oracle demonstrations of held-out (test)
    tasks, the mean loss and the share of tokens whose greedy prediction is the target, for the PROGRESS line,
    the REASON and the ACTION, and the share of answers whose every token is predicted right."""
    model, tokenizer = load_model(final, *resolve_device_dtype(None, "float32"))
    model.eval()
    backend = HFBackend(model=model, tokenizer=tokenizer, name="probe")
    cfg = arm_config(arm, argparse.Namespace(**{**vars(args), "noise": 0.0}), final)
    held_out = select_tasks(cfg, "test")
    held_out = random.Random(0).sample(held_out, min(tasks, len(held_out)))
    examples = demonstrations(cfg, held_out, backend, progress=False)
    segs: dict[str, list[float]] = {}
    whole = 0
    with torch.no_grad():
        for e in examples:
            ids = torch.tensor([e.prompt_ids + e.completion_ids])
            logp = torch.log_softmax(model(input_ids=ids).logits[0, len(e.prompt_ids) - 1 : -1].float(), -1)
            target = torch.tensor(e.completion_ids)
            nll = -logp.gather(-1, target[:, None])[:, 0]
            right = logp.argmax(-1) == target
            whole += int(bool(right.all()))
            seg = "progress"
            for j, piece in enumerate(tokenizer.convert_ids_to_tokens(e.completion_ids[:-1])):
                seg = "reason" if "REASON" in piece else "action" if "ACTION" in piece else seg
                s = segs.setdefault(seg, [0.0, 0, 0])
                s[0] += float(nll[j])
                s[1] += 1
                s[2] += int(right[j])
    out: dict[str, Any] = {
        seg: {"tokens": n, "loss": round(loss / n, 4), "greedy_right": right_ / n}
        for seg, (loss, n, right_) in segs.items()
    }
    out["answers"] = len(examples)
    out["answers_all_right"] = whole / max(1, len(examples))
    return out


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """Per arm, across seeds: success (all levels), stuck-midway share of failures, step accuracy and final
    SFT loss, each as every seed's value and the mean with its 95% t-interval across seeds."""
    out: dict[str, Any] = {}
    for arm in ARMS:
        per: dict[str, list[float]] = {"success": [], "stuck_share": [], "step_accuracy": [], "sft_loss": []}
        for r in result["seeds"].values():
            levels = r["arms"][arm]["levels"]
            t = _totals(levels)
            per["success"].append(t["success"])
            if t["failed"]:
                per["stuck_share"].append(t["failures"].get("stuck_midway", 0) / t["failed"])
            attempted = [lv["step_accuracy"] for lv in levels if lv["step_accuracy"] is not None]
            per["step_accuracy"].append(sum(attempted) / max(1, len(attempted)))
            per["sft_loss"].append(r["arms"][arm]["sft_final_loss"])
        out[arm] = {k: {"values": v, "mean_interval": list(mean_interval(v)) if v else None} for k, v in per.items()}
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _mi(stat: dict[str, Any] | None, pct: bool = True) -> str:
    """'mean [lo, hi]' of a summary statistic (in % when ``pct``), '-' when undefined."""
    if not stat or stat["mean_interval"] is None:
        return "-"
    m, lo, hi = stat["mean_interval"]
    if pct:
        return f"{100 * m:.1f} [{100 * max(0.0, lo):.0f}, {100 * min(1.0, hi):.0f}]"
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def _values(stat: dict[str, Any], pct: bool = True) -> str:
    return ", ".join(f"{100 * v:.1f}" if pct else f"{v:.3f}" for v in stat["values"]) or "-"


def render(result: dict[str, Any]) -> str:
    """Success and stuck-midway share across seeds, success per level, failure taxonomy, SGO statistics, and the
    diagnostics that tell a bug from a learning limit."""
    meta = result["meta"]
    seeds = list(result["seeds"])
    runs = list(result["seeds"].values())
    first = runs[0]["arms"]
    levels = [lv["level"] for lv in first["plain"]["levels"]]
    n = meta["n"]
    noise = f"{100 * meta['noise']:g}% noisy (illegal-move) turns, " if meta["noise"] else ""
    answers = "cell-first answers `value(rXcY, n)`" if meta["cell_first"] else "digit-first answers"
    summary = result["summary"]
    tasks_per_arm = sum(lv["tasks"] for lv in first["plain"]["levels"])
    lines = [
        "# Plain agent vs SGO agent (4x4 Sudoku, tiny model, equal SFT budget)",
        "",
        f"Command: `{meta['command']}` "
        f"(data: `milepost data sudoku --size 4 --levels S1-S5 --train 400 --test 40 --seed 0`).",
        f"Model: tiny Qwen3 `{meta['size']}`; training seeds {', '.join(seeds)} (a seed sets the weight "
        "initialisation, the demonstration tasks and noise, the batch order and the evaluation's sampling; the "
        "tokenizer is the same); within a seed both arms start from one initialisation. SFT (the recipe of "
        f"`checkpoints/sudoku4-sft` without macro demonstrations: {answers}, {noise}atomic actions only, lr "
        f"{meta['lr']:g}) on demonstrations of {meta['tasks']} training tasks, {first['plain']['sft_steps']} steps "
        f"of batch {meta['batch_size']} per arm (examples per arm: {first['plain']['sft_examples']}). Evaluation: "
        f"the first {meta['limit']} test tasks of every level ({tasks_per_arm} tasks), n = {n} samples at "
        f"temperature 0.8, H_max = {meta['max_steps']}, renderer `{meta['render']}`, memory K = "
        f"{meta['memory_k']}, at most {meta['max_new_tokens']} (plain) / {meta['sgo_max_new_tokens']} (SGO: the "
        "PROGRESS line) new tokens per turn; SGO uses the programmatic planner, no judge, at most 2 replans.",
        "",
        "## Across training seeds",
        "",
        "Mean over seeds with a 95% Student-t interval across seeds (the spread of training), then each seed's "
        f"value. Success: solved share of all {tasks_per_arm * n} episodes of a seed (avg@{n} over all levels). "
        "Stuck midway: share of the failed episodes that the taxonomy calls stuck midway (undefined for a seed "
        "without failures).",
        "",
        "| arm | success % | per seed | stuck-midway share of failures % | per seed | step accuracy % | "
        "final SFT loss |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in ARMS:
        st = summary[arm]
        lines.append(
            f"| {arm} | {_mi(st['success'])} | {_values(st['success'])} | {_mi(st['stuck_share'])} | "
            f"{_values(st['stuck_share'])} | {_mi(st['step_accuracy'])} | {_mi(st['sft_loss'], pct=False)} |"
        )
    lines += [
        "",
        f"## avg@{n} success per level (mean over seeds [95% t-interval]; per seed)",
        "",
        "| level | tasks | plain | SGO | plain per seed | SGO per seed |",
        "|---|---|---|---|---|---|",
    ]
    for level in levels:
        cells = []
        for arm in ARMS:
            vals = [next(lv for lv in r["arms"][arm]["levels"] if lv["level"] == level)["avg"]["value"] for r in runs]
            cells.append({"values": vals, "mean_interval": list(mean_interval(vals))})
        tasks = next(lv for lv in first["plain"]["levels"] if lv["level"] == level)["tasks"]
        lines.append(
            f"| {level} | {tasks} | {_mi(cells[0])} | {_mi(cells[1])} | {_values(cells[0])} | {_values(cells[1])} |"
        )
    pooled = {arm: _totals([lv for r in runs for lv in r["arms"][arm]["levels"]]) for arm in ARMS}
    lines += [
        "",
        "## Failure taxonomy (all seeds pooled; share of failed episodes; first match wins)",
        "",
        "| failure | plain | SGO |",
        "|---|---|---|",
    ]
    for kind in FAILURE_KINDS:
        p, s = pooled["plain"]["failures"].get(kind, 0), pooled["sgo"]["failures"].get(kind, 0)
        if p or s:
            lines.append(
                f"| {kind} | {p} ({_share(p, pooled['plain']['failed'])}) | "
                f"{s} ({_share(s, pooled['sgo']['failed'])}) |"
            )
    lines.append(
        f"| failed episodes | {pooled['plain']['failed']} of {pooled['plain']['episodes']} | "
        f"{pooled['sgo']['failed']} of {pooled['sgo']['episodes']} |"
    )
    sgo: dict[str, int] = {}
    for r in runs:
        for k, v in r["arms"]["sgo"]["sgo"]["all"].items():
            sgo[k] = sgo.get(k, 0) + v
    lines += [
        "",
        "## SGO agent statistics (all levels, all seeds)",
        "",
        f"Episodes {sgo['episodes']}; turns {sgo['turns']}, of which with a PROGRESS line "
        f"{sgo['progress_lines']}; items done in the final plans {sgo['items_done']} of {sgo['items']} (a replan "
        f"keeps the done items and appends the new plan); replans {sgo['replans']}; skips {sgo['skips']}; claims "
        f"checked {sgo['claims']} (accepted {sgo['claims_accepted']}, rejected {sgo['claims_rejected']}); "
        f"'current' named differently from the checklist on {sgo['focus_mismatches']} turns.",
    ]
    lines += _diagnostics_lines(result)
    lines += [
        "",
        "Paper reference (WebArena-Lite, Gemini-2.5-Pro): success 23.0% -> 32.1% with SGO, stuck-midway "
        "share of failures 48.4% -> 39.9%. Different task, model and scale: only the direction is comparable.",
        "",
        "Timings per seed (s; load: the lead's two 1-thread trainings shared the 2 cores): "
        + "; ".join(f"seed {s}: {json.dumps(r['timings'])}" for s, r in result["seeds"].items())
        + ".",
        "",
        "![plain vs SGO](sgo.png)",
        "",
    ]
    return "\n".join(lines)


def _diagnostics_lines(result: dict[str, Any]) -> list[str]:
    """The checks that separate a bug from a learning limit (see ``diagnostics`` and ``teacher_forced``)."""
    d = result["diagnostics"]
    o, demo, same = d["oracle"], d["demonstrations"], d["sgo_target_is_plain_target"]
    sgo = o["sgo"]["sgo"]
    lines = [
        "",
        "## Is it a bug or learning? Diagnostics",
        "",
        f"- The oracle (the demonstrator) under each agent at evaluation, same test tasks: plain "
        f"{_pct(o['plain']['success'])}%, SGO {_pct(o['sgo']['success'])}% of {o['sgo']['episodes']} episodes "
        f"solved; under SGO {sgo['progress_lines']} of {sgo['turns']} turns carry a PROGRESS line, 'current' "
        f"differs from the checklist on {sgo['focus_mismatches']}, claims checked {sgo['claims']} (rejected "
        f"{sgo['claims_rejected']}: the oracle's done list only repeats what the tracker already observed), "
        f"replans {sgo['replans']}. The agent does not break its own demonstrator.",
        "- Demonstrations in the tiny tokenizer's tokens (prompt mean / max; answer with end of sequence mean / "
        "max, against the cap): "
        + "; ".join(
            f"{arm} {v['examples']} examples, prompt {v['prompt_tokens_mean']} / {v['prompt_tokens_max']}, answer "
            f"{v['answer_tokens_mean']} / {v['answer_tokens_max']} (cap {v['answer_cap']})"
            for arm, v in demo.items()
        )
        + ". No answer is cut at evaluation; the SGO prompts are about twice as long.",
        "- Training and evaluation build prompts with one function (`LiveEpisode.messages` -> "
        "`HFBackend.encode`), so the SGO demonstration prompts equal the evaluation prompts token for token "
        "(`tests/planning/test_sft_sgo.py::test_sgo_demonstration_prompts_are_the_evaluation_prompts`).",
        f"- The SGO targets are a different policy: its oracle moves toward the current subgoal, and on "
        f"{_share(same['turns'] - same['same'], same['turns'])} of {same['turns']} noise-free SGO demonstration "
        "turns that is a different cell from the plain oracle's (the fewest-candidates cell with the lowest "
        "index: with the `hints` renderer, the first candidate line of the prompt): the plain model can copy one "
        "line, the SGO model has to find the current box in the checklist and the first of its cells in the "
        "candidate list.",
    ]
    probe = Path(result["meta"]["out"]) / "sgo_plain_moves.json"
    if probe.exists():  # written by experiments/sgo_plain_moves.py
        pm = json.loads(probe.read_text())
        ptf = pm["teacher_forced"]
        lines.append(
            f"- Which difference does the model fail on? `experiments/sgo_plain_moves.py` (seed {pm['seed']}) "
            "trains the SGO arm again with the plain oracle's moves (the plain arm's targets, behind SGO's prompt "
            f"and PROGRESS line), {pm['sft_steps']} steps: final loss {pm['sft_final_loss']:.3f}, avg@4 "
            f"{_pct(pm['success'])}% (S1 {_pct(pm['avg']['S1'])}%), teacher-forced PROGRESS "
            f"{_pct(ptf['progress']['greedy_right'])}%, REASON {_pct(ptf['reason']['greedy_right'])}%, ACTION "
            f"{_pct(ptf['action']['greedy_right'])}%, answers all right {_pct(ptf['answers_all_right'])}%. So the "
            "subgoal-directed targets are not what the model fails on: with the plain arm's very moves, the SGO "
            "prompt (twice as long, the checklist) and the PROGRESS prefix alone keep the 1M model from learning "
            "to copy the move at this budget."
        )
    lines += [
        "",
        "What each trained model learned, teacher-forced on noise-free oracle demonstrations of 20 held-out test "
        "tasks (mean over seeds; greedy-right: share of target tokens that are the model's argmax):",
        "",
        "| arm | PROGRESS greedy-right % | REASON greedy-right % | ACTION greedy-right % | REASON loss | answers all "
        "right % |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ARMS:
        tf = [r["arms"][arm]["teacher_forced"] for r in result["seeds"].values()]

        def mean(seg: str, key: str, tf: list[dict[str, Any]] = tf) -> str:
            vals = [t[seg][key] for t in tf if seg in t]
            if not vals:
                return "-"
            m = sum(vals) / len(vals)
            return f"{100 * m:.1f}" if key == "greedy_right" else f"{m:.3f}"

        whole = sum(t["answers_all_right"] for t in tf) / len(tf)
        lines.append(
            f"| {arm} | {mean('progress', 'greedy_right')} | {mean('reason', 'greedy_right')} | "
            f"{mean('action', 'greedy_right')} | {mean('reason', 'loss')} | {100 * whole:.1f} |"
        )
    return lines


def _share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%" if total else "-"


def _totals(levels: list[dict[str, Any]]) -> dict[str, Any]:
    episodes = sum(sum(lv["terminations"].values()) for lv in levels)
    solved = sum(lv["terminations"].get("solved", 0) for lv in levels)
    failures: dict[str, int] = {}
    for lv in levels:
        for kind, count in lv["failures"].items():
            failures[kind] = failures.get(kind, 0) + count
    return {
        "episodes": episodes,
        "success": solved / max(episodes, 1),
        "failed": episodes - solved,
        "failures": failures,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(result["seeds"].values())
    levels = [lv["level"] for lv in runs[0]["arms"]["plain"]["levels"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.38
    for k, arm in enumerate(ARMS):
        xs = [i + (k - 0.5) * width for i in range(len(levels))]
        per_seed = [
            [100 * next(lv for lv in r["arms"][arm]["levels"] if lv["level"] == level)["avg"]["value"] for r in runs]
            for level in levels
        ]
        stats = [mean_interval(v) for v in per_seed]
        err = [[m - max(0.0, lo) for m, lo, _ in stats], [min(100.0, hi) - m for m, _, hi in stats]]
        ax1.bar(xs, [m for m, _, _ in stats], width, yerr=err, capsize=2, label=arm, color=f"C{k}", alpha=0.8)
        for x, vals in zip(xs, per_seed):
            ax1.plot([x] * len(vals), vals, "k.", ms=3)
        pooled = [
            _totals([next(lv for lv in r["arms"][arm]["levels"] if lv["level"] == level) for r in runs])
            for level in levels
        ]
        stuck = [100 * t["failures"].get("stuck_midway", 0) / max(1, t["failed"]) for t in pooled]
        ax2.bar(xs, stuck, width, label=arm, color=f"C{k}")
        for x, t in zip(xs, pooled):  # a share of no failures is undefined, not 0%
            if not t["failed"]:
                ax2.text(x, 1, "no failures", rotation=90, ha="center", va="bottom", fontsize=7, color=f"C{k}")
    n = result["meta"]["n"]
    titles = (
        f"avg@{n} success (%): mean over {len(runs)} seeds, 95% t-int., dots: seeds",
        "stuck midway (% of failures, seeds pooled)",
    )
    for ax, title in zip((ax1, ax2), titles):
        ax.set_xticks(range(len(levels)), levels)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 118)
        ax.set_yticks(range(0, 101, 20))
        ax.legend(loc="upper center", ncol=2, fontsize=8)
    fig.suptitle("4x4 Sudoku, tiny model, equal SFT budget: plain vs SGO")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The experiment's options (``--seeds`` as a list of ints, ``command`` the command line as run)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="/tmp/sgo_data", help="4x4 dataset folder (see the usage above)")
    parser.add_argument(
        "--work",
        default="/tmp/sgo_runs/seed{seed}",
        help="scratch folder of a seed's models and runs ({seed} is filled in; without it, several seeds get "
        "WORK/seedS)",
    )
    parser.add_argument("--size", default="1m", help="tiny model preset")
    parser.add_argument("--tasks", type=int, default=500, help="demonstration tasks (the recipe: 800 with macros)")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--noise", type=float, default=0.15, help="share of noisy demonstration turns")
    parser.add_argument(
        "--cell-first", action=argparse.BooleanOptionalAction, default=True, help="answers value(rXcY, n)"
    )
    parser.add_argument("--max-steps", type=int, default=16, help="H_max")
    parser.add_argument("--render", default="hints", help="Sudoku renderer (hints: the tiny CPU profile's view)")
    parser.add_argument("--memory-k", type=int, default=0, help="K: turns in memory (the board is fully observed)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="answer tokens per turn, plain arm")
    parser.add_argument(
        "--sgo-max-new-tokens", type=int, default=48, help="answer tokens per turn, SGO arm (+16: the PROGRESS line)"
    )
    parser.add_argument("--n", type=int, default=4, help="samples per test task")
    parser.add_argument("--limit", type=int, default=10, help="test tasks per level")
    parser.add_argument("--seeds", default="0,1,2", help="training seeds, comma list (each: both arms again)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--render-only", action="store_true", help="rewrite sgo.md / sgo.png from OUT/sgo.json")
    parser.add_argument("--out", default=str(RESULTS), help="where sgo.md / sgo.json / sgo.png go")
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--seeds: expected a comma list of integers, got {args.seeds!r}")
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds: give distinct seeds, got {args.seeds!r}")
    args.command = shlex.join(["python", "experiments/sgo_experiment.py", *(sys.argv[1:] if argv is None else argv)])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:  # the tables and plot again from OUT/sgo.json (e.g. after sgo_plain_moves.py ran)
        result = json.loads((Path(args.out) / "sgo.json").read_text())
    else:
        result = run(args)
    print(write_experiment(Path(args.out), "sgo", result, render, plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
