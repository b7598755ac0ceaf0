"""Two SFT starts over several training seeds, from their episode evaluations: is a gap between them the
training seed's luck? (One arm alone gives its seeds' spread and mean.)

``experiments.sft_starts`` writes one evaluation folder per episode evaluation (``eval-STEP/episodes.jsonl``); a
single run compares two answer styles on one training seed, with intervals over the test tasks only. This script
reads one folder per arm and seed (the same test tasks in every folder) and reports, per arm, each seed's avg@n
(each test task's success rate over its samples, averaged over the tasks), episode step accuracy and the share of
turns whose answer the environment rejected (an illegal action or an unparsable answer), their mean
with a 95% t-interval across seeds (``milepost.evaluation.seeds.mean_interval``); and the difference of each arm
from the first: over seeds (a t-interval of the paired per-seed differences) and by test task (a bootstrap over
the tasks of the per-task difference averaged over the seeds, the training seeds held fixed). A plot draws every
seed and the means.

Usage (ARM:SEED=EVAL_FOLDER; the first arm is the baseline)::

    python -m experiments.sft_seed_compare move:0=runs/a/eval-1250 move:1=runs/b/eval-1250 \\
        plan-back:0=runs/c/eval-1250 plan-back:1=runs/d/eval-1250 --out experiments/results/X.md
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Any


def per_task_success(episodes: list[Any]) -> dict[str, float]:
    """Each task's success rate over its samples (infrastructure failures left out, as the metrics do)."""
    from milepost.evaluation.failures import is_infra_failure

    hits: dict[str, list[bool]] = defaultdict(list)
    for ep in episodes:
        if not is_infra_failure(ep):
            hits[ep.task_id].append(bool(ep.success))
    return {t: sum(h) / len(h) for t, h in hits.items() if h}


def step_accuracy(episodes: list[Any]) -> float:
    """The project's pooled episode step accuracy (``evaluation.metrics.step_counts``)."""
    from milepost.evaluation.failures import is_infra_failure
    from milepost.evaluation.metrics import step_counts

    correct = attempted = 0
    for ep in episodes:
        if not is_infra_failure(ep):
            c, a = step_counts(ep)
            correct += c
            attempted += a
    return correct / attempted if attempted else 0.0


def rejected_share(episodes: list[Any]) -> float:
    """The share of turns whose answer the environment rejected (an illegal action or an unparsable answer)."""
    from milepost.evaluation.failures import is_infra_failure

    turns = [t for ep in episodes if not is_infra_failure(ep) for t in ep.turns]
    return sum(t.error is not None for t in turns) / len(turns) if turns else 0.0


def compare(runs: dict[str, dict[int, list[Any]]]) -> dict[str, Any]:
    """``runs[arm][seed]`` = that seed's episodes. Per arm and seed: avg@n and step accuracy; per arm: means with
    t-intervals; per arm after the first: the paired difference over the seeds both arms have, and by test task.

    Raises:
        ValueError: the arms' folders do not hold the same test tasks.
    """
    from milepost.evaluation.metrics import bootstrap_interval
    from milepost.evaluation.seeds import mean_interval

    arms = list(runs)
    tasks: dict[str, dict[int, dict[str, float]]] = {
        arm: {seed: per_task_success(eps) for seed, eps in seeds.items()} for arm, seeds in runs.items()
    }
    ids = None
    for arm in arms:
        for seed, by_task in tasks[arm].items():
            if ids is None:
                ids = sorted(by_task)
            elif sorted(by_task) != ids:
                raise ValueError(f"{arm} seed {seed}: its test tasks differ from the first folder's")
    assert ids is not None
    out: dict[str, Any] = {"tasks": len(ids), "arms": {}, "differences": {}}
    for arm in arms:
        seeds = {}
        for seed, eps in sorted(runs[arm].items()):
            by_task = tasks[arm][seed]
            seeds[seed] = {
                "avg": sum(by_task.values()) / len(by_task),
                "step_accuracy": step_accuracy(eps),
                "rejected": rejected_share(eps),
                "episodes": len(eps),
            }
        out["arms"][arm] = {
            "seeds": seeds,
            "avg": mean_interval([s["avg"] for s in seeds.values()]),
            "step_accuracy": mean_interval([s["step_accuracy"] for s in seeds.values()]),
        }
    base = arms[0]
    for arm in arms[1:]:
        shared = sorted(set(runs[arm]) & set(runs[base]))
        if not shared:
            raise ValueError(f"{arm} and {base} share no training seed")
        diffs = [out["arms"][arm]["seeds"][s]["avg"] - out["arms"][base]["seeds"][s]["avg"] for s in shared]
        step_diffs = [
            out["arms"][arm]["seeds"][s]["step_accuracy"] - out["arms"][base]["seeds"][s]["step_accuracy"]
            for s in shared
        ]
        per_task = [sum(tasks[arm][s][t] - tasks[base][s][t] for s in shared) / len(shared) for t in ids]
        out["differences"][arm] = {
            "seeds": shared,
            "avg_over_seeds": mean_interval(diffs),
            "step_accuracy_over_seeds": mean_interval(step_diffs),
            "avg_by_task": (sum(per_task) / len(per_task), *bootstrap_interval(per_task)),
        }
    return out


def _ci(x: tuple[float, float, float], signed: bool = False, seeds: int = 2) -> str:
    """A mean and its interval in %; with one seed there is no interval over seeds, and the cell says so."""
    f = "{:+.1f}" if signed else "{:.1f}"
    if seeds < 2:
        return f"{f.format(100 * x[0])} (one seed)"
    return f"{f.format(100 * x[0])} [{f.format(100 * x[1])}, {f.format(100 * x[2])}]"


def render(res: dict[str, Any]) -> str:
    from milepost.tables import md_row, md_rule

    head = [
        "arm",
        "seeds",
        "avg@n per seed (%)",
        "avg@n mean [95% t]",
        "step acc. per seed (%)",
        "step acc. mean [95% t]",
        "rejected turns per seed (%)",
    ]
    lines = [md_row(head), md_rule(len(head))]
    for arm, a in res["arms"].items():
        seeds = a["seeds"]
        lines.append(
            md_row(
                [
                    arm,
                    ", ".join(str(s) for s in seeds),
                    " / ".join(f"{100 * s['avg']:.1f}" for s in seeds.values()),
                    _ci(a["avg"], seeds=len(seeds)),
                    " / ".join(f"{100 * s['step_accuracy']:.1f}" for s in seeds.values()),
                    _ci(a["step_accuracy"], seeds=len(seeds)),
                    " / ".join(f"{100 * s['rejected']:.1f}" for s in seeds.values()),
                ]
            )
        )
    if not res["differences"]:  # one arm: its seeds and their mean, nothing to compare it with
        return "\n".join(lines) + "\n"
    base = next(iter(res["arms"]))
    head = [f"arm - {base}", "paired seeds", "avg@n over seeds", "avg@n by test task", "step acc. over seeds"]
    lines += ["", md_row(head), md_rule(len(head))]
    for arm, d in res["differences"].items():
        lines.append(
            md_row(
                [
                    arm,
                    ", ".join(str(s) for s in d["seeds"]),
                    _ci(d["avg_over_seeds"], True, len(d["seeds"])),
                    _ci(d["avg_by_task"], True),
                    _ci(d["step_accuracy_over_seeds"], True, len(d["seeds"])),
                ]
            )
        )
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any], path: Path) -> None:
    """Each seed's avg@n and step accuracy as dots, the arm's mean as a bar with its t-interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(res["arms"])
    fig, axes = plt.subplots(1, 2, figsize=(3 + 1.8 * len(arms), 4), sharey=True)
    for ax, key, title in zip(axes, ("avg", "step_accuracy"), ("avg@n (success)", "episode step accuracy")):
        for i, arm in enumerate(arms):
            a = res["arms"][arm]
            mean, lo, hi = a[key]
            ax.bar(i, 100 * mean, 0.6, color=f"C{i}", alpha=0.5)
            ax.errorbar(i, 100 * mean, yerr=[[100 * (mean - lo)], [100 * (hi - mean)]], color="k", capsize=4)
            vals = [100 * s[key] for s in a["seeds"].values()]
            ax.plot([i] * len(vals), vals, "o", color=f"C{i}", markeredgecolor="k")
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("% (dots: seeds; bars: mean, 95% t-interval)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="ARM:SEED=EVAL_FOLDER (a folder with episodes.jsonl)")
    p.add_argument("--title", default="SFT starts over training seeds")
    p.add_argument("--out", default=None, help="also write the tables (Markdown), their JSON and a PNG beside them")
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    args = p.parse_args()
    from milepost.training.sft import read_episodes

    runs: dict[str, dict[int, list[Any]]] = defaultdict(dict)
    for spec in args.runs:
        head, sep, folder = spec.partition("=")
        arm, colon, seed = head.rpartition(":")
        if not sep or not colon or not arm or not seed.isdigit():
            p.error(f"{spec!r}: expected ARM:SEED=EVAL_FOLDER")
        f = Path(folder) / "episodes.jsonl"
        if not f.is_file():
            p.error(f"{folder}: no episodes.jsonl")
        if int(seed) in runs[arm]:
            p.error(f"{arm} seed {seed} given twice")
        runs[arm][int(seed)] = read_episodes([str(f)])
    try:
        res = compare(dict(runs))
    except ValueError as e:
        p.error(str(e))
    text = render(res)
    print(text, end="")
    if args.out:
        from experiments.report_files import write_report

        write_report(
            Path(args.out),
            title=args.title,
            module="experiments.sft_seed_compare",
            body=text,
            data=res,
            plot=lambda path: plot(res, path),
            reading=args.reading,
            intro=f"Test tasks: {res['tasks']} in every folder.\n\n",
            alt="seeds",
        )


if __name__ == "__main__":
    main()
