"""Rules-checked best-of-k at play time for a Rush Hour plan model (issue 28): inference, not a better start.

``rushhour_plan_check`` found that a plan-target model's ACTION is optimal where its written plan is right, and that
one sample's plan is right in only 13-25% of turns beyond three cells from the goal. This script asks how much of the
step-accuracy gap a check of the plan closes: each turn the policy samples ``k`` answers and keeps the best by the
game's rules alone (no solver, no distances):

1. answers whose plan is legal cell by cell, ends with A at the exit and starts with the ACTION, the shortest first;
2. then answers whose ACTION is a legal move;
3. then the rest. Ties go to the lower sample index; sample 0 draws with the plain agent's seed, so ``k = 1`` plays
   exactly the plain evaluation.

``--check action`` is the ablation: it keeps the first sample with a legal ACTION and never reads the plan, so it
works for a model that writes no plan (the short-reason starts) and says how much of the gain is only "do not play
an illegal move". ``--levels`` and ``--temperature`` evaluate the same tasks' other level or another temperature.

It is a verifier with a simulator at inference, a different claim from the start's own step accuracy: a model that
proposes right plans often enough, and a checker that knows the rules, together play well. Every ``k`` reruns the
same evaluation (the tasks, samples, seeds and settings of the ``--like`` eval folder's ``run.json``) and writes a
``milepost eval`` folder (resumable), then a report of success, step accuracy, turns, how often any of the ``k``
samples held a solving plan, and the tokens generated per turn (the cost).

Usage::

    python -m experiments.plan_verify --model checkpoints/rushhour-sft-plan-back-dagger5 \\
        --like runs/sft-starts-plan-back-dagger5/eval-891 --k 1,4,16,64 --work runs/plan-verify \\
        --out experiments/results/rushhour_plan_verify.md
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.plan_check import parse_plan, replay
from experiments.report_files import pct
from milepost.agent.best_of import sample_k

CHECKS = ("plan", "action")


def plan_score(state: Any, text: str, check: str = "plan") -> tuple[int, int]:
    """How far an answer's plan checks out in ``state``, by the rules alone (higher is better): ``(2, -cells)``
    when the plan is legal, solves the puzzle and starts with the ACTION; ``(1, 0)`` when only the ACTION is a legal
    move; ``(0, 0)`` otherwise. ``check="action"`` (the ablation) reads the ACTION only: ``(1, 0)`` or ``(0, 0)``."""
    if check not in CHECKS:
        raise ValueError(f"unknown check {check!r} (choose from {', '.join(CHECKS)})")
    from milepost.agent.parsing import parse_answer
    from milepost.envs.rushhour.rules import parse_move

    parsed = parse_answer(text)
    action = parse_move(parsed.action) if parsed.action else None
    if action is None or action.cells != 1 or state.why_illegal(action) is not None:
        return (0, 0)
    plan = parse_plan(parsed.reason) if check == "plan" else None
    if plan and (plan[0].vehicle, plan[0].direction) == (action.vehicle, action.direction):
        _, legal, solves = replay(state, plan)
        if legal and solves:
            return (2, -sum(m.cells for m in plan))
    return (1, 0)


def turn_key(record: dict[str, Any]) -> tuple[str, int, int]:
    return record["task"], record["sample"], record["turn"]


def verify_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregates of the per-turn records (a turn played again after a resume counts once, its last record):
    turns, the share of turns where any sample held a solving plan, the share of samples that did, the share of
    turns that kept another sample than 0, the kept answers' levels (``plan_score``) and tokens per turn."""
    last = {turn_key(r): r for r in records}
    rows = list(last.values())
    n = len(rows)
    if n == 0:
        return {"turns_played": 0}
    k = rows[0]["k"]
    return {
        "turns_played": n,
        "with_solving_plan": sum(r["solving"] > 0 for r in rows) / n,
        "solving_share": sum(r["solving"] for r in rows) / (n * k),
        "kept_nonzero": sum(r["kept"] != 0 for r in rows) / n,
        "kept_levels": {str(level): sum(r["level"] == level for r in rows) for level in (0, 1, 2)},
        "tokens_per_turn": sum(r["tokens"] for r in rows) / n,
    }


class PlanVerifiedPolicy:
    """A model backend that samples ``k`` answers per turn and keeps the one whose plan checks out best
    (``plan_score``). The episode records the kept answer's exact ids and log-probs; ``records`` holds one line
    per turn (also appended to ``log`` when given, so a resumed run keeps what it measured)."""

    def __init__(self, backend: Any, settings: Any, k: int, log: Path | None = None, check: str = "plan") -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if check not in CHECKS:
            raise ValueError(f"unknown check {check!r} (choose from {', '.join(CHECKS)})")
        self.backend = backend
        self.settings = settings
        self.k = k
        self.check = check
        self.log = log
        self.name = f"{backend.name}+verify{k}"
        self.scripted = False
        self.records: list[dict[str, Any]] = []

    def act(self, episodes: Sequence[Any]) -> list[Any]:
        kept, new = [], []
        # Sample 0 of each turn is the plain agent's answer: k = 1 is the plain agent.
        for ep, cands in zip(episodes, sample_k(self.backend, self.settings, episodes, self.k)):
            scores = [plan_score(ep.env.state, c.text, self.check) for c in cands]
            best = max(range(self.k), key=lambda j: (scores[j], -j))
            kept.append(cands[best])
            new.append(
                {
                    "task": ep.job.task.task_id,
                    "sample": ep.job.sample,
                    "turn": len(ep.turns),
                    "k": self.k,
                    "solving": sum(1 for s in scores if s[0] == 2),
                    "kept": best,
                    "level": scores[best][0],
                    "tokens": sum(len(c.completion_ids) for c in cands),
                }
            )
        self.records += new
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in new)
        return kept


def spec_like(folder: Path, label: str, levels: str | None = None, temperature: float | None = None) -> Any:
    """The ``EvalSpec`` of an earlier eval folder (its ``run.json``) under a new policy label, optionally on other
    ``levels`` of the same dataset or at another sampling ``temperature``."""
    from milepost.agent.loop import AgentSettings
    from milepost.evaluation.runner import EvalSpec

    run = json.loads((folder / "run.json").read_text())
    keep = {"env", "data", "split", "agent", "n", "ks", "levels", "limit", "env_kwargs", "seed"}
    fields = {k: v for k, v in run.items() if k in keep} | ({"levels": levels} if levels else {})
    settings = run["settings"] | ({"temperature": temperature} if temperature is not None else {})
    return EvalSpec(**fields, policy=label, settings=AgentSettings(**settings))


def read_records(log: Path) -> list[dict[str, Any]]:
    """The per-turn records of ``log`` (none when it does not exist). A last line cut short by a killed run is
    dropped: its turn is played again on resume; a malformed line elsewhere is an error."""
    if not log.exists():
        return []
    lines = log.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise SystemExit(f"plan_verify: {log} line {i + 1} is not JSON") from None
    return out


def drop_partial_line(log: Path) -> None:
    """Cut a last line a killed run left without its newline, so the resumed run appends whole lines after it."""
    if not log.exists():
        return
    data = log.read_bytes()
    if data and not data.endswith(b"\n"):
        from milepost.io import atomic_write_text

        atomic_write_text(log, data[: data.rfind(b"\n") + 1].decode("utf-8"))


def model_digest(model: Path) -> str:
    """The sha256 of a model folder's weights: what a resumed run checks it continues with."""
    h = hashlib.sha256()
    for f in sorted(model.glob("*.safetensors")):
        h.update(f.read_bytes())
    return h.hexdigest()


def run_k(model: Path, spec: Any, k: int, out: Path, check: str = "plan") -> dict[str, Any]:
    """Evaluate ``model`` with best-of-``k`` verification under ``spec`` into ``out`` (resumable; a folder holding
    another spec is refused by ``evaluate``): its metrics, the per-turn summary and the wall time of the run that
    played the episodes (a resumed run: of its last part)."""
    from milepost.backends.base import make_backend
    from milepost.evaluation.runner import evaluate
    from milepost.io import atomic_write_json

    spec = dataclasses.replace(spec, policy=f"verify{k}" + ("" if check == "plan" else f"-{check}"))
    out.mkdir(parents=True, exist_ok=True)
    weights = model_digest(model)
    mark = out / "verify-model.json"
    if mark.exists() and json.loads(mark.read_text())["sha256"] != weights:
        raise SystemExit(f"plan_verify: {out} holds episodes of other weights than {model}; use another --work")
    atomic_write_json(mark, {"model": str(model), "sha256": weights})
    log = out / "verify-turns.jsonl"
    drop_partial_line(log)
    backend = make_backend(f"hf:{model}")
    policy = PlanVerifiedPolicy(backend, spec.settings, k, log, check)
    t0 = time.perf_counter()
    evaluate(spec, out, progress=True, policy=policy)
    wall = time.perf_counter() - t0
    records = read_records(log)
    timing = out / "verify-wall.json"  # the wall time of the run that played the episodes (a rerun plays none)
    if policy.records or not timing.exists():
        atomic_write_json(timing, {"wall_s": wall})
    return {
        "k": k,
        "check": check,
        "metrics": json.loads((out / "metrics.json").read_text()),
        "wall_s": json.loads(timing.read_text())["wall_s"],
        **verify_summary(records),
    }


def level_row(metrics: dict[str, Any]) -> dict[str, Any]:
    """The one level's metrics of a run (this script evaluates one level)."""
    levels = metrics["levels"]
    if len(levels) != 1:
        raise SystemExit(f"plan_verify: expected one evaluated level, got {len(levels)}")
    return levels[0]


def render(results: list[dict[str, Any]], n: int) -> str:
    head = (
        f"| k | episodes | avg@{n} % [95% CI] | pass@{n} % | step acc. % | turns / episode | turns with a solving plan "
        "among the k % | samples with a solving plan % | kept not sample 0 % | tokens / turn | wall min |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        lv = level_row(r["metrics"])
        read = r["check"] == "plan"  # the action check never reads the plans
        episodes = sum(lv["terminations"].values())
        avg = lv["avg"]
        lines.append(
            f"| {r['k']} | {episodes} | {pct(avg['value'])} [{pct(avg['lo'])}, {pct(avg['hi'])}] | "
            f"{pct(lv['pass_at'][str(n)]['value'])} | {pct(lv['step_accuracy'])} | "
            f"{r['turns_played'] / episodes:.1f} | {pct(r['with_solving_plan']) if read else '-'} | "
            f"{pct(r['solving_share']) if read else '-'} | "
            f"{pct(r['kept_nonzero'])} | {r['tokens_per_turn']:.0f} | {r['wall_s'] / 60:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [r["k"] for r in results]
    rows = [level_row(r["metrics"]) for r in results]
    fig, ax = plt.subplots(figsize=(6, 4))
    succ = [100 * lv["avg"]["value"] for lv in rows]
    err = [
        [100 * (lv["avg"]["value"] - lv["avg"]["lo"]) for lv in rows],
        [100 * (lv["avg"]["hi"] - lv["avg"]["value"]) for lv in rows],
    ]
    ax.errorbar(ks, succ, yerr=err, marker="o", capsize=3, label="success (avg@n, 95% CI)")
    ax.plot(ks, [100 * lv["step_accuracy"] for lv in rows], marker="s", label="step accuracy")
    ax.axhline(80, color="grey", ls=":", lw=1, label="issue 28's step-accuracy target")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("samples per turn, best kept by the rules check (k)")
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, required=True, help="the plan-target model folder (hf)")
    p.add_argument("--like", type=Path, required=True, help="an eval folder whose run.json sets tasks, seeds, settings")
    p.add_argument("--k", default="1,4,16", help="samples per turn to compare (comma list)")
    p.add_argument("--work", type=Path, required=True, help="one eval folder per k goes here (resumable)")
    p.add_argument("--out", type=Path, required=True, help="the report (.md; .json and .png beside it)")
    p.add_argument(
        "--check", choices=CHECKS, default="plan", help="plan: the plan, then the ACTION; action: the ACTION only"
    )
    p.add_argument("--levels", default=None, help="evaluate these levels of the same dataset instead (one level)")
    p.add_argument("--temperature", type=float, default=None, help="sample at this temperature instead")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    args = p.parse_args()
    try:
        ks = sorted({int(x) for x in args.k.split(",")})
    except ValueError:
        p.error(f"--k: a comma list of integers, got {args.k!r}")
    if not ks or ks[0] < 1:
        p.error(f"--k: every k must be >= 1, got {args.k!r}")
    if not (args.like / "run.json").is_file():
        p.error(f"--like: {args.like} has no run.json")
    import torch

    torch.set_num_threads(args.threads)
    from experiments.report_files import write_report

    spec = spec_like(args.like, "verify", args.levels, args.temperature)
    results = [run_k(args.model, spec, k, args.work / f"k{k}", args.check) for k in ks]
    n = spec.n
    changed = ", ".join(
        f"{name} changed to {value}"
        for name, value in (("levels", args.levels), ("T", args.temperature))
        if value is not None
    )
    intro = (
        f"Model `{args.model}`; the tasks, samples, seeds and agent settings of `{args.like}`"
        f"{f' ({changed})' if changed else ''}: level {spec.levels}, {spec.limit} tasks x {n} samples, "
        f"T {spec.settings.temperature}, H_max {spec.env_kwargs.get('max_steps')}. "
        "Each turn the policy samples k answers and keeps the best by the rules alone: "
        + (
            "a legal plan that solves the puzzle and starts with the ACTION, the shortest first; then a legal ACTION; "
            if args.check == "plan"
            else "a legal ACTION (`--check action`: the plan is not read); "
        )
        + "ties to sample 0, which draws the plain agent's own seed (k = 1 is the plain evaluation). Inference with a "
        "rules checker, not the start."
    )
    write_report(
        args.out,
        title="Rush Hour: rules-checked best-of-k at play time",
        module="experiments.plan_verify",
        intro=intro + "\n\n",
        body=render(results, n),
        data={
            "args": {k: str(v) for k, v in vars(args).items()},
            "setting": {
                "model": str(args.model),
                "check": args.check,
                "level": spec.levels,
                "temperature": spec.settings.temperature,
                "n": n,
            },
            "results": results,
        },
        plot=lambda path: plot(
            results, path, f"Rush Hour {spec.levels}, T {spec.settings.temperature}: best-of-k by the rules"
        ),
        reading=args.reading,
    )


if __name__ == "__main__":
    main()
