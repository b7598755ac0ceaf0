"""What did MiRA's failure-driven curriculum draw? Each run's logged tasks, phase by phase, against the start's
success on them.

A curriculum run and a uniform run of one seed draw their tasks from different random streams (the curriculum's
weighted keys, the uniform ``rng.sample``), so their puzzles differ even while the curriculum's weights are all
equal (its first phase). This script separates that from what the re-weighting did: for every run of a
``seeded_arms`` work folder it reads the tasks each iteration played (``metrics.jsonl``'s ``tasks``) and the start's
success on each of them (the start's evaluation on the run's own tasks, kept by ``experiments.trained_tasks_eval``
under ``{work}/trained-tasks/``), and reports per phase:

- the start's success on the phase's draws (the mean over the drawn tasks of the start's avg@4 on each);
- how many of a later phase's draws repeat a task of an earlier phase (the curriculum boosts a task only for its
  own failures, so a repeat is the most its re-weighting can add; the uniform arm repeats by chance);
- iterations whose task set equals the reference arm's under the same seed.

Usage::

    python -m experiments.curriculum_draws --work runs/mira-lr3e-5 --seeds 0,1,2,3,4 --uniform sparse \\
        --arms mira,mira-no-potential,mira-no-value,mira-no-curriculum,sparse \\
        --out experiments/results/rushhour_mira_lr3e-5_curriculum_draws

Writes ``{out}.md``, ``{out}.json`` and ``{out}.png``; ``--reading FILE`` keeps a hand-written reading at the
end. Runs that are missing (an arm run on fewer seeds) are skipped and named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from milepost.errors import InputError


def phase_draws(per_iteration: list[list[str]], phase_iterations: int) -> list[list[str]]:
    """The tasks of each phase of ``phase_iterations`` policy iterations, in draw order."""
    return [
        [t for it in per_iteration[i : i + phase_iterations] for t in it]
        for i in range(0, len(per_iteration), phase_iterations)
    ]


def start_success(work: Path, seed: int, tasks: set[str]) -> dict[str, float]:
    """The start's avg@4 on each task, from the start's evaluation on exactly these tasks under this seed."""
    from milepost.io import read_jsonl

    for folder in sorted((work / "trained-tasks").glob(f"start-s{seed}-*")):
        per: dict[str, list[bool]] = {}
        for ep in read_jsonl(folder / "episodes.jsonl"):
            per.setdefault(ep["task_id"], []).append(bool(ep["success"]))
        if set(per) == tasks:
            return {t: sum(v) / len(v) for t, v in per.items()}
    raise InputError(
        f"{work}/trained-tasks: no start evaluation of seed {seed} on this run's {len(tasks)} tasks "
        "(run experiments.trained_tasks_eval first)"
    )


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def measure_run(work: Path, arm: str, seed: int, phase_iterations: int) -> dict[str, Any]:
    from experiments.trained_tasks_eval import logged_tasks

    run = work / f"{arm}-s{seed}"
    per_iteration = logged_tasks(run)
    if not per_iteration:
        raise InputError(f"{run}: no logged tasks in metrics.jsonl (runs before 2026-12-05 did not log them)")
    phases = phase_draws(per_iteration, phase_iterations)
    played = {t for p in phases for t in p}
    start = start_success(work, seed, played)
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for draws in phases:
        first = [start[t] for t in draws if t not in seen]  # drawn for the first time: the weights treat them alike
        out.append({"draws": len(draws), "start_success": mean([start[t] for t in draws]),
                    "start_success_first": mean(first), "repeats": len(draws) - len(first)})  # fmt: skip
        seen |= set(draws)
    iterations = [sorted(set(it)) for it in per_iteration]
    return {"phases": out, "distinct": len(played), "iterations": iterations}


def measure(work: Path, arms: list[str], seeds: list[int], uniform: str, phase_iterations: int) -> dict[str, Any]:
    from milepost.evaluation.seeds import mean_interval

    runs: dict[str, dict[int, dict[str, Any]]] = {a: {} for a in arms}
    missing: list[str] = []
    for arm in arms:
        for seed in seeds:
            if not (work / f"{arm}-s{seed}" / "metrics.jsonl").exists():
                missing.append(f"{arm}-s{seed}")
                continue
            runs[arm][seed] = measure_run(work, arm, seed, phase_iterations)
    if not any(runs.values()):
        raise InputError(f"{work}: none of the runs {', '.join(missing)} exists")
    reference = arms[0]
    for arm in arms:
        for seed, r in runs[arm].items():
            ref = runs[reference].get(seed)
            r["same_as_reference"] = (
                sum(a == b for a, b in zip(r["iterations"], ref["iterations"])) if ref is not None else None
            )
    paired: dict[str, list[dict[str, Any]]] = {}
    for arm in arms:
        if arm == uniform:
            continue
        common = sorted(set(runs[arm]) & set(runs[uniform]))
        n = min((min(len(runs[arm][s]["phases"]), len(runs[uniform][s]["phases"])) for s in common), default=0)
        per_phase = []
        for k in range(n):
            cell: dict[str, Any] = {"seeds": common}
            for key in ("start_success", "start_success_first"):
                diffs = [runs[arm][s]["phases"][k][key] - runs[uniform][s]["phases"][k][key] for s in common]
                m, lo, hi = mean_interval(diffs)
                cell[key] = {"mean": m, "lo": lo, "hi": hi, "per_seed": diffs}
            per_phase.append(cell)
        paired[arm] = per_phase
    return {"runs": runs, "paired_minus_uniform": paired, "missing": missing, "reference": reference,
            "uniform": uniform, "phase_iterations": phase_iterations}  # fmt: skip


def report(result: dict[str, Any], command: str) -> str:
    from experiments.seeded_arms import signed_interval

    runs, uniform, reference = result["runs"], result["uniform"], result["reference"]
    n_phases = max((len(r["phases"]) for per in runs.values() for r in per.values()), default=0)
    lines = [
        "# What the failure-driven curriculum drew",
        "",
        f"Command: `{command}`.",
        "",
        f"Phases of {result['phase_iterations']} policy iterations (the curriculum re-weights at each phase end; "
        "the first phase draws with equal weights). Start success: the start's avg@4 on each drawn task (its "
        "evaluation on the run's own tasks by `experiments.trained_tasks_eval`), averaged over the draws. "
        "Repeats: draws of a phase that were drawn in an earlier phase; the first draws (in brackets) are the "
        "others, which the curriculum's weights treat alike (only a task's own failures raise its weight above "
        "its level's). A run without MiRA plays one more policy "
        "iteration (in place of the critics' warm-up), which makes a short last phase of its own.",
        "",
        "| arm | seeds | distinct tasks | "
        + " | ".join(f"phase {k + 1}: start success % (first draws) / repeats" for k in range(n_phases))
        + f" | iterations with {reference}'s task set |",
        "|---|---|---|" + "---|" * n_phases + "---|",
    ]
    for arm, per in runs.items():
        if not per:
            continue
        cells = []
        for k in range(n_phases):
            ph = [r["phases"][k] for r in per.values() if k < len(r["phases"])]
            if not ph:
                cells.append("-")
                continue
            cells.append(
                f"{100 * mean([p['start_success'] for p in ph]):.1f} "
                f"({100 * mean([p['start_success_first'] for p in ph]):.1f}) / "
                f"{sum(p['repeats'] for p in ph)} of {sum(p['draws'] for p in ph)}"
            )
        same = [r["same_as_reference"] for r in per.values()]
        total = sum(len(r["iterations"]) for r in per.values())
        lines.append(
            f"| {arm} | {len(per)} | {mean([r['distinct'] for r in per.values()]):.1f} | "
            + " | ".join(cells)
            + f" | {sum(x or 0 for x in same)} of {total} |"
        )
    lines += ["", f"Start success of each arm's draws minus {uniform}'s, paired by seed (points, 95% t-interval):", ""]
    for arm, per_phase in result["paired_minus_uniform"].items():
        parts = []
        for k, cell in enumerate(per_phase):
            a, f = cell["start_success"], cell["start_success_first"]
            parts.append(
                f"phase {k + 1} {signed_interval(a['mean'], a['lo'], a['hi'])} "
                f"({', '.join(f'{100 * x:+.1f}' for x in a['per_seed'])}), first draws "
                f"{signed_interval(f['mean'], f['lo'], f['hi'])}"
            )
        lines.append(f"- {arm}: " + "; ".join(parts))
    if result["missing"]:
        lines += ["", f"Not run, skipped: {', '.join(result['missing'])}."]
    return "\n".join(lines) + "\n"


def plot(path: Path, result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from milepost.io import atomic_write

    fig, ax = plt.subplots(figsize=(7, 3.8))
    arms = [a for a, per in result["runs"].items() if per]
    n_phases = max(len(r["phases"]) for a in arms for r in result["runs"][a].values())
    width = 0.8 / n_phases
    labelled: set[int] = set()
    for k in range(n_phases):
        for i, arm in enumerate(arms):
            vals = [100 * r["phases"][k]["start_success"] for r in result["runs"][arm].values() if k < len(r["phases"])]
            if not vals:
                continue
            x = i + (k - (n_phases - 1) / 2) * width
            label = f"phase {k + 1}" if k not in labelled else None
            labelled.add(k)
            ax.bar(x, mean(vals), width, color=f"C{k}", label=label, alpha=0.7)
            ax.scatter([x] * len(vals), vals, color="k", s=8, zorder=3)
    ax.set_xticks(range(len(arms)), arms, rotation=20, fontsize=8)
    ax.set_ylabel("start's avg@4 on the drawn tasks (%)")
    ax.set_title("How hard were the drawn puzzles for the start? (dots: seeds)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, dpi=120, format="png"))
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from milepost.io import atomic_write_json, atomic_write_text

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--arms", required=True, help="comma-separated; the first is the reference for equal draws")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--uniform", required=True, help="the arm without a curriculum that the others are paired with")
    ap.add_argument("--phase-iterations", type=int, default=0, help="0: the first arm's mira.phase_iterations")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--reading", type=Path, help="a Markdown file of hand-written reading, kept at the end")
    args = ap.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    try:
        if args.reading is not None and not args.reading.is_file():
            raise InputError(f"--reading {args.reading}: no such file")
        if args.uniform not in arms:
            raise InputError(f"--uniform {args.uniform} is not one of --arms")
        phase = args.phase_iterations
        if phase <= 0:
            from experiments.trained_tasks_eval import run_config

            phase = run_config(args.work / f"{arms[0]}-s{seeds[0]}").mira.phase_iterations
        result = measure(args.work, arms, seeds, args.uniform, phase)
    except (InputError, FileNotFoundError) as e:
        print(f"curriculum_draws: {e}", file=sys.stderr)
        return 2
    command = "python -m experiments.curriculum_draws " + " ".join(argv if argv is not None else sys.argv[1:])
    atomic_write_json(args.out.with_suffix(".json"), {"command": command, **result})
    text = report(result, command) + f"\n![draws]({args.out.name}.png)\n"
    if args.reading is not None:
        text += "\n" + args.reading.read_text()
    atomic_write_text(args.out.with_suffix(".md"), text)
    plot(args.out.with_suffix(".png"), result)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
