"""Plain agent against SGO agent on Rush Hour, from one start that knows the rules (issue 28, comparison 1).

The SGO+MiRA paper reports that subgoal-driven online planning lowers the stuck-midway share of failures and
raises success (WebArena-Lite: 48.4% -> 39.9%, 23.0 -> 32.1). Here both arms fine-tune the same Rush Hour start
(``--init``, by default ``checkpoints/rushhour-sft-dagger``: avg@4 45% at 4-6, of whose failures 57% are stuck
midway) for the same number of optimizer steps on demonstrations of the same states, each in its own agent's
format:

- **plain**: goal and board; the answer is ``REASON: ... ACTION: move(X, dir)``.
- **sgo**: the SGO agent's prompt (the programmatic plan as a checklist of exit-row blockers, then the exit,
  with the reflection instructions); the answer starts with the PROGRESS line a perfect reflection writes
  (``PROGRESS: done=...; current=N; next=N``). In Rush Hour the SGO oracle's move is the plain oracle's (the
  optimal solution clears the blockers in plan order: ``RushHourDomain.focus_move``), so the arms differ only in
  what the prompt shows and the answer states, not in the moves they are taught.

Demonstrations: from every training puzzle, ``--per-cluster`` states are drawn across 1..``--max-dist`` one-cell
steps from the goal (the whole cluster is solved, as in ``experiments/sft_starts.py``); each state becomes the
start of an oracle episode of at most ``--turns`` turns played through the real agent loop
(``RandomOptimalOracle``: a move drawn uniformly among the optimal ones, ``--label random``, or the tie-broken
solution's, ``--label tiebreak``), with ``--noise`` of the turns an illegal move first (only the oracle's turns
are targets), so the prompts are exactly the evaluation's and later turns show ticked checklist items. The
states, and so the moves, are the same for both arms of a seed.

Each arm is then evaluated with its own agent on the test puzzles of ``--eval-levels`` (``--eval-limit`` per
level, ``--n`` samples at temperature 0.8); the failures are classified by the shared taxonomy. The start model
is evaluated under both agents too (the SGO agent around a policy that never saw its prompt). Every seed
(``--seeds``) repeats both arms; a seed sets the drawn states, the demonstration noise, the batch order and the
evaluation's sampling (the start weights are shared). The report gives means with 95% t-intervals over seeds and
the paired difference per seed.

Jobs (the start evaluations, then each seed's arms) are claimed with a lock file in their run folder
(``milepost.io.RunLock``), so several
invocations on one ``--work`` share the jobs without training one twice; every job writes its ``result.json``
atomically and a rerun skips finished jobs and resumes a training from its last checkpoint. Usage (two workers
on the 2-core machine)::

    nice -n 10 python -m experiments.sgo_rushhour --work runs/sgo-rush &
    nice -n 10 python -m experiments.sgo_rushhour --work runs/sgo-rush &
    wait; python -m experiments.sgo_rushhour --work runs/sgo-rush --report

Writes ``experiments/results/sgo_rushhour.{md,json,png}``. The numbers are what the run measured, good or bad.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
CONFIGS = ROOT / "configs" / "tiny-cpu"
ARMS = ("plain", "sgo")
LABELS = {"random": "any optimal move, drawn uniformly", "tiebreak": "the tie-broken optimal solution's next move"}
NEW_TOKENS = {"plain": 32, "sgo": 64}  # the answer cap: the SGO answer carries the PROGRESS line (~25 tokens)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- data ----------------------------------------------------------------------------------------------------


def start_tasks(train: list[Any], per_cluster: int, max_dist: int, seed: int) -> list[Any]:
    """Episode starts: ``per_cluster`` states of every training puzzle's cluster at 1..max_dist one-cell steps
    from the goal, each as a ``Task`` of its own (its goal distance solved again from the state)."""
    from experiments.sft_starts import sample_states
    from milepost.envs.rushhour.env import make_task
    from milepost.envs.rushhour.solver import solve_board
    from milepost.envs.rushhour.state import RushHourState

    rng = random.Random(seed)
    out: list[Any] = []
    t0 = time.perf_counter()
    for n, task in enumerate(train):
        cluster = solve_board(task.payload["board"])
        # sample_states spreads k states over the distances from 1 up, so k = per_cluster would stop at
        # distance per_cluster: draw from a spread over every distance up to max_dist instead.
        spread = sample_states(cluster, max_dist, max_dist, rng)
        for key in rng.sample(spread, min(per_cluster, len(spread))):
            state = RushHourState(cluster.layout, cluster.layout.unpack(key))
            out.append(make_task(state.board(), split="train", seed=seed, index=len(out), source=task.task_id))
        if (n + 1) % 300 == 0:
            log(f"starts: {n + 1}/{len(train)} clusters, {len(out)} states, {time.perf_counter() - t0:.0f}s")
    return out


def shared_starts(work: Path, seed: int, build: Any) -> list[Any]:
    """The seed's episode starts, built once for both arms (``starts-s<seed>.json``): the first worker builds
    them under a lock, another one waits for the file."""
    from milepost.io import RunLock, atomic_write_json
    from milepost.types import Task

    path = work / f"starts-s{seed}.json"
    lock = RunLock(work / f"starts-s{seed}")
    while not path.exists():
        if not lock.acquire():
            time.sleep(5)
            continue
        try:
            if not path.exists():
                atomic_write_json(path, [t.to_dict() for t in build()])
        finally:
            lock.release()
    return [Task.from_dict(d) for d in json.loads(path.read_text())]


def arm_config(base: Any, arm: str, args: argparse.Namespace, seed: int) -> Any:
    """The training and evaluation config of one arm: the same except for the agent kind and its answer cap."""
    return dataclasses.replace(
        base,
        seed=seed,
        agent=dataclasses.replace(base.agent, agent_kind=arm, max_new_tokens=NEW_TOKENS[arm]),
        sft=dataclasses.replace(base.sft, noise=args.noise, macro_share=0.0),
        eval=dataclasses.replace(base.eval, n=args.n, ks=[1, args.n], limit=args.eval_limit, levels=args.eval_levels),
    )


class RandomOptimalOracle:
    """The demonstrator of both arms (a scripted policy for ``run_episodes``): with probability ``noise`` an
    illegal move (the turn is not a target; the next prompt carries the rejection), else a move drawn uniformly
    among those that bring the state one step closer (``label`` random) or the tie-broken solution's next move
    (``label`` tiebreak). Under the SGO agent every answer starts with the PROGRESS line a perfect reflection
    writes. Random labels keep several optimal moves probable: a tie-broken oracle teaches one move per state,
    and ``experiments/results/sgo_rushhour.md`` records what that did to the plain start."""

    scripted = True

    def __init__(self, tokenizer: Any, encode: Any, noise: float, label: str) -> None:
        self.tokenizer, self.encode, self.noise, self.label = tokenizer, encode, noise, label
        self.name = f"{label}-optimal-oracle:{noise:g}"

    def answer(self, ep: Any) -> str:
        from experiments.sft_starts import optimal_moves
        from milepost.agent.parsing import format_answer
        from milepost.envs.rushhour.moves import _reason, illegal
        from milepost.envs.rushhour.rules import oracle_move
        from milepost.planning.sgo import SGOState

        rules = ep.env.rules
        if ep.rng.random() < self.noise:
            text = format_answer("this move looks fine.", illegal(rules, ep.rng))
        else:
            move = (
                oracle_move(rules)
                if self.label == "tiebreak"
                else ep.rng.choice(optimal_moves(rules.cluster, rules.state))
            )
            assert move is not None  # an episode ends at the goal: every live state has an optimal move
            text = format_answer(_reason(move), move.text())
        guide = ep.agent_state
        return f"{guide.progress_line()} {text}" if isinstance(guide, SGOState) else text

    def act(self, episodes: Any) -> list[Any]:
        from milepost.types import Completion

        out = []
        for ep in episodes:
            text = self.answer(ep)
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            out.append(
                Completion(
                    prompt_ids=self.encode(ep.messages()),
                    completion_ids=ids,
                    logprobs=None,
                    text=text,
                    finish_reason="stop",
                )
            )
        return out


def arm_examples(
    cfg: Any, starts: list[Any], backend: Any, turns: int, label: str = "random"
) -> tuple[list[list[int]], list[list[int]]]:
    """The arm's demonstrations: an episode of at most ``turns`` turns of ``RandomOptimalOracle`` from every
    start, through the real agent loop (prompts exactly as at evaluation). Only the oracle's own moves are
    targets. Returns prompt ids and completion ids (+ EOS)."""
    from milepost.agent.loop import Job, run_episodes
    from milepost.backends.base import GenerationRequest
    from milepost.training.setup import agent_settings, env_factory, make_agent
    from milepost.training.sft import is_oracle_move

    def encode(messages: list[dict[str, str]]) -> list[int]:
        return list(backend.encode(GenerationRequest(messages=messages)))

    short = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, max_steps=turns))
    policy = RandomOptimalOracle(backend.tokenizer, encode, cfg.sft.noise, label)
    episodes = run_episodes(
        env_factory(short, 6),
        [Job(t) for t in starts],
        policy,
        agent_settings(short),
        seed=cfg.seed,
        agent=make_agent(short),
    )
    eos = min(backend.eos_ids)
    prompts, completions = [], []
    for ep in episodes:
        for turn in ep.turns:
            if not is_oracle_move(turn):
                continue
            prompts.append(list(turn.prompt_ids))
            completions.append([*turn.completion_ids, eos])
    return prompts, completions


# -- one job -------------------------------------------------------------------------------------------------


def run_job(name: str, run: Path, args: argparse.Namespace, data: Path) -> None:
    """A start evaluation (``start-<arm>``) or one seed's arm (``<arm>-s<seed>``): fine-tune, evaluate, write
    ``result.json``."""
    import torch

    from milepost.backends.hf import HFBackend, load_model, resolve_device_dtype
    from milepost.config import load_config
    from milepost.datasets import load_tasks
    from milepost.io import atomic_write, atomic_write_json
    from milepost.training.config import TrainConfig
    from milepost.training.trainer import evaluate_policy

    torch.set_num_threads(args.threads)
    arm, _, rest = name.partition("-")
    seed = 0 if rest == "start" or arm == "start" else int(rest[1:])
    if arm == "start":
        arm = rest
    base = load_config(TrainConfig, CONFIGS / "rushhour_sft.yaml", [f"data={data}", "levels=4-6"])
    cfg = arm_config(base, arm, args, seed)
    t0 = time.perf_counter()
    timing: dict[str, float] = {}
    ckpt = run / "model"
    resumed = (ckpt / "trainer_state.pt").exists()
    model, tokenizer = load_model(ckpt if resumed else Path(args.init), *resolve_device_dtype("cpu", "float32"))
    backend = HFBackend(model=model, tokenizer=tokenizer, name=name)
    train_info: dict[str, Any] = {}
    if not name.startswith("start-"):
        ex_file = run / "examples.pt"
        if ex_file.exists():
            ex = torch.load(ex_file, weights_only=False)
        else:
            starts = shared_starts(
                run.parent,
                seed,
                lambda: start_tasks(
                    load_tasks(data, "train")[: args.train_limit or None], args.per_cluster, args.max_dist, seed
                ),
            )
            te = time.perf_counter()
            prompts, completions = arm_examples(cfg, starts, backend, args.turns, args.label)
            ex = {"prompts": prompts, "completions": completions, "starts": len(starts)}
            ex["build_s"] = time.perf_counter() - te
            atomic_write(ex_file, lambda tmp: torch.save(ex, tmp))
        prompts, completions = ex["prompts"], ex["completions"]
        longest = max(len(c) for c in completions)
        if longest > NEW_TOKENS[arm]:
            raise SystemExit(
                f"sgo_rushhour: {arm}: an answer has {longest} tokens, more than the cap {NEW_TOKENS[arm]}"
            )
        train_info = train(run, model, tokenizer, prompts, completions, args, seed)
        train_info.update(
            examples=len(prompts),
            starts=ex["starts"],
            build_s=ex["build_s"],
            prompt_tokens=sum(map(len, prompts)) / len(prompts),
            answer_tokens=sum(map(len, completions)) / len(completions),
            longest_answer=longest,
        )
    timing["train_s"] = time.perf_counter() - t0
    te = time.perf_counter()
    model.eval()
    out = run / "eval"
    metrics = evaluate_policy(cfg, backend, out, name, False)
    timing["eval_s"] = time.perf_counter() - te
    result = {
        "job": name,
        "arm": arm,
        "seed": seed,
        "levels": metrics["levels"],
        "sgo": (metrics.get("sgo") or {}).get("all"),
        "train": train_info,
        "timing": timing,
        "load_end": os.getloadavg()[0],
    }
    atomic_write_json(run / "result.json", result)
    log(f"{name}: done {json.dumps({k: round(v) for k, v in timing.items()})}")


def train(
    run: Path,
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    completions: list[list[int]],
    args: argparse.Namespace,
    seed: int,
) -> dict[str, Any]:
    """``--steps`` AdamW steps (cosine from ``--lr`` to 10% after ``--warmup``) of the completion loss, the
    pool's common prompt prefix run once per batch; checkpoints every ``--save-every`` steps (resumable)."""
    import numpy as np
    import torch

    from experiments.sft_starts import check_shared_prefix, save_trainer, shared_prefix_loss
    from milepost.backends.logprobs import shared_prefix_length

    ckpt = run / "model"
    state = torch.load(ckpt / "trainer_state.pt", weights_only=False) if (ckpt / "trainer_state.pt").exists() else {}
    pad = tokenizer.pad_token_id
    shared = shared_prefix_length(prompts)  # the goal text (and, for SGO, the checklist's first words)
    if not shared:
        raise SystemExit("sgo_rushhour: the demonstration prompts share no prefix (the goal text)")
    prefix = prompts[0][:shared]
    diff = check_shared_prefix(model, prefix, prompts[:4], completions[:4], pad)
    if diff > 1e-3:
        raise SystemExit(f"sgo_rushhour: the shared-prefix loss differs from the plain loss by {diff:.2e}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)

    def schedule(step: int) -> float:
        if step < args.warmup:
            return (step + 1) / args.warmup
        frac = (step - args.warmup) / max(1, args.steps - args.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    if state:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
    rng = np.random.default_rng(seed)
    order: list[Any] = []
    while len(order) < args.steps:
        perm = rng.permutation(len(prompts))
        order += [perm[lo : lo + args.batch] for lo in range(0, len(perm) - args.batch + 1, args.batch)]
    curve: list[dict[str, float]] = state.get("curve", [])
    spent = state.get("train_s", 0.0)
    start = state.get("step", 0)
    model.train()
    t0 = time.perf_counter()
    loss_sum, loss_n = 0.0, 0
    for step in range(start, args.steps):
        idx = order[step]
        loss = shared_prefix_loss(
            model, prefix, [prompts[i][len(prefix) :] for i in idx], [completions[i] for i in idx], pad
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        loss_sum += loss.item()
        loss_n += 1
        done = step + 1
        if done % args.save_every == 0 or done == args.steps:
            now = time.perf_counter()
            spent += now - t0
            t0 = now
            curve.append({"step": done, "loss": loss_sum / loss_n, "train_s": spent})
            log(f"{run.name}: step {done}/{args.steps} loss {loss_sum / loss_n:.4f} ({spent / 60:.1f} min)")
            loss_sum, loss_n = 0.0, 0
            save_trainer(model, tokenizer, ckpt, optimizer, scheduler, done, curve, spent)
    return {"steps": args.steps, "batch": args.batch, "prefix_tokens": len(prefix), "curve": curve, "train_s": spent}


# -- report --------------------------------------------------------------------------------------------------


def level_numbers(result: dict[str, Any]) -> dict[str, Any]:
    """Success, step accuracy and the stuck-midway share of failures, over all evaluated levels."""
    eps = solved = 0
    step_w = 0.0
    for lv in result["levels"]:
        n = lv["tasks"] * lv["samples"]
        eps += n
        solved += round(lv["avg"]["value"] * n)
        step_w += lv["step_accuracy"] * n
    failures = _summed(lv.get("failures", {}) for lv in result["levels"])
    failed, stuck = sum(failures.values()), failures.get("stuck_midway", 0)
    return {
        "episodes": eps,
        "success": solved / eps,
        "step_accuracy": step_w / eps,
        "failed": failed,
        "stuck": stuck,
        "stuck_share": stuck / failed if failed else None,
        "failures": failures,
    }


def _summed(counts: Any) -> dict[str, int]:
    """Failure counts (dicts of kind -> count) added up."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(total)


def gather(work: Path, seeds: list[int]) -> dict[str, Any]:

    out: dict[str, Any] = {"start": {}, "arms": {}, "paired": {}}
    for arm in ARMS:
        f = work / f"start-{arm}" / "result.json"
        if f.exists():
            r = json.loads(f.read_text())
            out["start"][arm] = {**level_numbers(r), "sgo": r["sgo"], "timing": r["timing"]}
    per: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in ARMS}
    for arm in ARMS:
        for seed in seeds:
            f = work / f"{arm}-s{seed}" / "result.json"
            if f.exists():
                r = json.loads(f.read_text())
                per[arm][seed] = {**level_numbers(r), "sgo": r["sgo"], "train": r["train"], "timing": r["timing"]}
    out["arms"], out["paired"] = summarise(per)
    return out


def summarise(per: dict[str, dict[int, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per arm (runs by seed, each with success / step accuracy / stuck share / failures): the mean over seeds
    with its 95% t-interval; and SGO - plain paired by seed, for success and stuck share."""
    from milepost.evaluation.seeds import mean_interval

    arms: dict[str, Any] = {}
    for arm, runs in per.items():
        if not runs:
            continue
        row: dict[str, Any] = {"seeds": sorted(runs), "per_seed": runs}
        for key in ("success", "step_accuracy", "stuck_share"):
            vals = [runs[s][key] for s in sorted(runs) if runs[s][key] is not None]
            row[key] = mean_interval(vals) if vals else None
        row["failures"] = _summed(r["failures"] for r in runs.values())
        arms[arm] = row
    paired: dict[str, Any] = {}
    both = sorted(set(per.get("plain", {})) & set(per.get("sgo", {})))
    for key in ("success", "stuck_share"):
        # A seed without failures in either arm has no stuck share: it is left out of that difference.
        pairs = [(per["sgo"][s][key], per["plain"][s][key]) for s in both]
        diffs = [a - b for a, b in pairs if a is not None and b is not None]
        if diffs:
            paired[key] = {"seeds": both, "per_seed": diffs, "mean_ci": mean_interval(diffs)}
    return arms, paired


def _pct(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return f"{100 * v[0]:.1f} [{100 * v[1]:.1f}, {100 * v[2]:.1f}]"
    return f"{100 * v:.1f}"


def start_source(init: str) -> str:
    """Where a committed Rush Hour start comes from: the SFT report that built it (``checkpoints/rushhour-sft-X``
    is exported by ``experiments/results/sft_starts_X.md``; the first DAgger start by its second round's report),
    or nothing for another path."""
    name = Path(init).name
    if not name.startswith("rushhour-sft-"):
        return ""
    tag = name.removeprefix("rushhour-sft-")
    report = "sft_starts_dagger2.md" if tag == "dagger" else f"sft_starts_{tag}.md"
    if not (Path(__file__).parent / "results" / report).is_file():
        return ""
    return f" (the Rush Hour SFT start of `{report}`)"


def render(res: dict[str, Any]) -> str:
    meta = res["meta"]
    g = res["results"]
    lines = [
        f"# Plain agent vs SGO agent (Rush Hour, tiny model fine-tuned from one start, {meta['steps']} steps per arm)",
        "",
        f"Command: `{meta['command']}`.",
        "",
        f"Start: `{meta['init']}`{start_source(meta['init'])}. Both arms fine-tune it for "
        f"{meta['steps']} steps of batch {meta['batch']} (lr {meta['lr']}, {meta['warmup']} warm-up steps, cosine to "
        f"10%) on oracle demonstrations of the same states: {meta['per_cluster']} states drawn from the solved "
        f"cluster of each of the {meta['train_puzzles']} training puzzles at 1-{meta['max_dist']} one-cell steps from "
        f"the goal, each the start of an oracle episode of at most {meta['turns']} turns through the real agent loop "
        f"(target move: {LABELS[meta.get('label', 'tiebreak')]}), "
        f"{100 * meta['noise']:.0f}% of the turns an illegal move first (not a target). The plain arm's prompt is goal "
        "and board; the SGO arm's adds the programmatic plan as a checklist (exit-row blockers in the order the "
        "optimal solution clears them, then the exit) and its answer starts with the true PROGRESS line. The moves "
        "taught are the same in both arms (in Rush Hour the SGO oracle's move toward the current subgoal is the "
        "plain oracle's).",
        "",
        f"Evaluation: test puzzles of level(s) {meta['eval_levels']} ({meta['eval_limit']} per level; other clusters "
        f"than every training puzzle of the start and of these demonstrations), {meta['n']} samples at temperature "
        f"0.8, H_max 30, atomic moves, each arm with its own agent (SGO: programmatic planner, no judge, stuck "
        "detection with at most 2 replans). A seed sets the drawn states, the noise, the batch order and the "
        "evaluation's sampling; the start's weights are shared by all seeds.",
        "",
        "## Across training seeds",
        "",
        "Mean over seeds [95% t-interval]. Success: solved share of the seed's episodes (avg@n). Stuck midway: "
        "share of the failed episodes that the failure taxonomy calls stuck midway.",
        "",
        "| arm | seeds | success % | stuck-midway share of failures % | step accuracy % | per seed (success / stuck) |",
        "|---|---|---|---|---|---|",
    ]
    for arm, s in g["start"].items():
        lines.append(
            f"| start under the {arm} agent (no fine-tuning) | - | {_pct(s['success'])} | {_pct(s['stuck_share'])} | "
            f"{_pct(s['step_accuracy'])} | - |"
        )
    for arm, row in g["arms"].items():
        per = "; ".join(
            f"{_pct(row['per_seed'][s]['success'])} / {_pct(row['per_seed'][s]['stuck_share'])}" for s in row["seeds"]
        )
        lines.append(
            f"| {arm} (fine-tuned) | {len(row['seeds'])} | {_pct(row['success'])} | {_pct(row['stuck_share'])} | "
            f"{_pct(row['step_accuracy'])} | {per} |"
        )
    if g["paired"]:
        lines += ["", "Paired difference SGO - plain over seeds (same seed: same states, same test tasks):", ""]
        for key, label in (("success", "success"), ("stuck_share", "stuck-midway share")):
            if key in g["paired"]:
                p = g["paired"][key]
                m, lo, hi = p["mean_ci"]
                each = ", ".join(f"{100 * d:+.1f}" for d in p["per_seed"])
                lines.append(f"- {label}: {100 * m:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}] (per seed {each})")
    kinds = sorted({k for row in g["arms"].values() for k in row["failures"]} | {"stuck_midway"})
    if g["arms"]:
        lines += [
            "",
            "## Failure taxonomy (fine-tuned arms, seeds pooled; first match wins)",
            "",
            "| failure | " + " | ".join(g["arms"]) + " |",
            "|---|" + "---|" * len(g["arms"]),
        ]
        for kind in kinds:
            cells = []
            for row in g["arms"].values():
                total = sum(row["failures"].values())
                v = row["failures"].get(kind, 0)
                cells.append(f"{v} ({100 * v / total:.1f}%)" if total else "0")
            lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    sgo_rows = [("start", g["start"].get("sgo", {}).get("sgo"))]
    if "sgo" in g["arms"]:
        sgo_rows += [(f"seed {s}", r["sgo"]) for s, r in g["arms"]["sgo"]["per_seed"].items()]
    sgo_rows = [(k, v) for k, v in sgo_rows if v]
    if sgo_rows:
        lines += [
            "",
            "## SGO agent statistics",
            "",
            "| run | episodes | turns | PROGRESS lines | 'current' not the checklist's | claims (accepted / rejected) "
            "| replans | skips |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for k, v in sgo_rows:
            lines.append(
                f"| {k} | {v.get('episodes', 0)} | {v.get('turns', 0)} | {v.get('progress_lines', 0)} | "
                f"{v.get('focus_mismatches', 0)} | {v.get('claims', 0)} ({v.get('claims_accepted', 0)} / "
                f"{v.get('claims_rejected', 0)}) | {v.get('replans', 0)} | {v.get('skips', 0)} |"
            )
    if "sgo" in g["arms"] or "plain" in g["arms"]:
        lines += [
            "",
            "## Training",
            "",
            "| run | examples | prompt / answer tokens (mean) | final loss | train min | eval min |",
        ]
        lines.append("|---|---|---|---|---|---|")
        for arm, row in g["arms"].items():
            for s in row["seeds"]:
                r = row["per_seed"][s]
                t = r["train"]
                lines.append(
                    f"| {arm} seed {s} | {t['examples']} | {t['prompt_tokens']:.0f} / {t['answer_tokens']:.1f} | "
                    f"{t['curve'][-1]['loss']:.4f} | {t['train_s'] / 60:.1f} | {r['timing']['eval_s'] / 60:.1f} |"
                )
    lines += [
        "",
        "Paper reference (SGO+MiRA, WebArena-Lite, Gemini-2.5-Pro): success 23.0% -> 32.1% with SGO, stuck-midway "
        "share of failures 48.4% -> 39.9%. Different task, model and scale: only the direction is comparable.",
        "",
        f"![plain vs SGO on Rush Hour](sgo_rushhour{meta.get('tag', '')}.png)",
        "",
    ]
    if res.get("reading"):
        lines += [res["reading"].rstrip(), ""]
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> None:
    g = res["results"]
    title = "Rush Hour: plain vs SGO agent (mean over seeds, 95% t-interval; dots: seeds)"
    plot_arms(path, g["arms"], title, start=g["start"], label="{arm}\nfine-tuned")


def plot_arms(
    path: Path, arms: dict[str, Any], title: str, *, start: dict[str, Any] | None = None, label: str = "{arm}"
) -> None:
    """Success and stuck-midway share per arm: bars of the mean over seeds with its interval, a dot per seed, and
    grey bars for the ``start`` models. ``label`` is formatted with ``arm`` and ``seeds`` (their number)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, key, name in (
        (axes[0], "success", "success (avg@n) %"),
        (axes[1], "stuck_share", "stuck-midway share of failures %"),
    ):
        labels, vals, errs, colors = [], [], [], []
        for arm, s in (start or {}).items():
            labels.append(f"start\n{arm} agent")
            vals.append(100 * (s[key] or 0))
            errs.append((0, 0))
            colors.append("0.7")
        for arm, row in arms.items():
            if row[key] is None:
                continue
            m, lo, hi = row[key]
            labels.append(label.format(arm=arm, seeds=len(row["seeds"])))
            vals.append(100 * m)
            errs.append((100 * (m - lo), 100 * (hi - m)))
            colors.append("C1" if arm == "sgo" else "C0")
            for s in row["seeds"]:
                v = row["per_seed"][s][key]
                if v is not None:
                    ax.plot(len(labels) - 1, 100 * v, "k.", ms=5)
        x = range(len(labels))
        ax.bar(x, vals, color=colors, yerr=list(zip(*errs)) if errs else None, capsize=4)
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.set_title(name, fontsize=10)
        ax.set_ylim(0, 100)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- main ----------------------------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/sgo-rush")
    p.add_argument("--init", default=str(ROOT / "checkpoints" / "rushhour-sft-dagger"))
    p.add_argument(
        "--data",
        default=None,
        help="Rush Hour dataset (default: built in --work as experiments/sft_starts.py builds it, data seed 1: the "
        "dataset the start was trained on, whose test puzzles are other clusters)",
    )
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--train-limit", type=int, default=0, help="use the first N training puzzles (0 = all)")
    p.add_argument("--per-cluster", type=int, default=4, help="episode starts drawn per training cluster")
    p.add_argument("--max-dist", type=int, default=20, help="farthest start drawn, in one-cell steps")
    p.add_argument("--turns", type=int, default=4, help="oracle turns per start")
    p.add_argument(
        "--label",
        choices=("random", "tiebreak"),
        default="random",
        help="target move: any optimal move drawn uniformly, or the tie-broken solution's next move",
    )
    p.add_argument("--noise", type=float, default=0.2, help="share of demonstration turns that are an illegal move")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--save-every", type=int, default=50)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--eval-limit", type=int, default=40)
    p.add_argument("--eval-levels", default="4-6")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--arms", default="plain,sgo", help="arms to train (a sensitivity run may train one)")
    p.add_argument("--tag", default="", help="suffix of the result files (sgo_rushhour<tag>.md)")
    p.add_argument("--report", action="store_true", help="only write the report from the finished jobs")
    p.add_argument(
        "--reading", default=None, help="a Markdown file of hand-written reading, kept at the end of the report"
    )
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from experiments.rushhour_arms import check_start_disjoint
    from experiments.sft_starts import build_data
    from milepost.io import RunLock

    if args.data:
        data = Path(args.data)
    else:
        data = build_data(work, "1-3,4-6,7-9", 300, 40, 1)
    check_start_disjoint(Path(args.init), data)
    arms = [a for a in args.arms.split(",") if a]
    if not arms or set(arms) - set(ARMS):
        raise SystemExit(f"sgo_rushhour: --arms {args.arms}: give a comma list of {', '.join(ARMS)}")
    jobs = [f"start-{arm}" for arm in ARMS] + [f"{arm}-s{seed}" for seed in seeds for arm in arms]
    if not args.report:
        for name in jobs:
            run = work / name
            if (run / "result.json").exists():
                continue
            lock = RunLock(run)
            if not lock.acquire():
                log(f"{name}: taken by another worker")
                continue
            try:
                log(f"{name}: start (load {os.getloadavg()[0]:.1f})")
                run_job(name, run, args, data)
            finally:
                lock.release()
    missing = [j for j in jobs if not (work / j / "result.json").exists()]
    if missing:
        log(f"not finished yet: {', '.join(missing)} (the report is written when every job is done)")
        return
    write_report(args, work, seeds, data)


def write_report(args: argparse.Namespace, work: Path, seeds: list[int], data: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import write_experiment

    from milepost.datasets import load_tasks

    kept, skip = [], False
    for a in sys.argv[1:]:  # the workers' command: without the report-only options
        if skip or a == "--report" or a.startswith("--reading="):
            skip = False
            continue
        skip = a == "--reading"
        if not skip:
            kept.append(a)
    command = "python -m experiments.sgo_rushhour " + " ".join(shlex.quote(a) for a in kept)
    meta = {
        "command": command,
        "init": os.path.relpath(args.init, ROOT) if os.path.isabs(args.init) else args.init,
        "seeds": seeds,
        "train_puzzles": len(load_tasks(data, "train")[: args.train_limit or None]),
        **{k: getattr(args, k) for k in ("per_cluster", "max_dist", "turns", "label", "noise", "steps", "batch", "lr")},
        **{k: getattr(args, k) for k in ("warmup", "n", "eval_limit", "eval_levels", "tag")},
    }
    res: dict[str, Any] = {"meta": meta, "results": gather(work, seeds)}
    if args.reading:
        res["reading"] = Path(args.reading).read_text(encoding="utf-8")
    print(write_experiment(RESULTS, f"sgo_rushhour{args.tag}", res, render, plot))


if __name__ == "__main__":
    main()
