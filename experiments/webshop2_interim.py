"""Comparison 2 on the web shop's 2-item orders, while it runs: each (arm, seed)'s training iterations so far and
every evaluation that has episodes, from the run folders ``experiments/seeded_arms.py`` is filling.

The final report is ``seeded_arms.py``'s (3 seeds per arm); this one says what the unfinished runs measured so far
and what each iteration cost, for sizing the rest. An evaluation still running is summarised over the test orders
whose samples have all finished, and marked as partial::

    python experiments/webshop2_interim.py --work runs/w2arms --arms sparse,mira --seeds 0,1,2 --out webshop2_interim \\
        --reading experiments/results/webshop2_interim_reading.md

Writes ``experiments/results/{out}.{md,json,png}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
COLUMNS = {  # metrics.jsonl key -> column
    "rollout/success": "success",
    "rollout/subgoals": "subgoals / episode",
    "rollout/turns": "turns / episode",
    "rollout/invalid_actions": "invalid / turn",
    "train/turns": "turns trained",
    "perf/rollout_s": "rollout s",
    "perf/update_s": "update s",
}


def iterations(run: Path) -> list[dict[str, Any]]:
    """The run's logged iterations (the MiRA warm-up as iteration 0), the columns of ``COLUMNS``."""
    from milepost.tracking import read_metrics

    log = run / "metrics.jsonl"
    if not log.is_file():
        return []
    rows = []
    for r in read_metrics(log):
        if isinstance(r.get("iteration"), int):
            rows.append({"iteration": r["iteration"], "phase": r.get("phase", "")} | {k: r.get(k) for k in COLUMNS})
    return rows


def evaluation(folder: Path, samples: int = 4) -> dict[str, Any] | None:
    """Success, subgoal share, outcome score (WebShop's graded reward), turns and endings over the test orders
    whose ``samples`` episodes have all finished; None without episodes."""
    from seeded_arms import episode_values  # a sibling in experiments/

    from milepost.io import read_jsonl

    file = folder / "episodes.jsonl"
    if not file.is_file():
        return None
    by_task: dict[str, list[dict[str, Any]]] = {}
    for ep in read_jsonl(file):
        by_task.setdefault(ep["task_id"], []).append(ep)
    done = [eps for eps in by_task.values() if len(eps) >= samples]
    episodes = [ep for eps in done for ep in eps]
    if not episodes:
        return None
    n = len(episodes)
    values = [episode_values(ep) for ep in episodes]
    endings: dict[str, int] = {}
    for ep in episodes:
        endings[ep["termination"]] = endings.get(ep["termination"], 0) + 1
    return {
        "orders": len(done),
        "episodes": n,
        "complete": (folder / "metrics.json").is_file(),
        **{key: sum(v[i] for v in values) / n for i, key in enumerate(("success", "subgoals", "score"))},
        "turns": sum(len(ep["turns"]) for ep in episodes) / n,
        "endings": endings,
        "order_ids": sorted(t for t, eps in by_task.items() if len(eps) >= samples),
    }


def plot(path: Path, runs: dict[str, list[dict[str, Any]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("rollout/turns", "rollout/invalid_actions", "rollout/subgoals")
    fig, axes = plt.subplots(1, len(keys), figsize=(12, 3.6))
    for ax, key in zip(axes, keys):
        for i, (name, rows) in enumerate(runs.items()):
            pts = [(r["iteration"], r[key]) for r in rows if r[key] is not None]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o", color=f"C{i}", label=name)
        ax.set_xlabel("iteration (0 = MiRA's critic warm-up)")
        ax.set_title(COLUMNS[key])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Web shop 2-item orders: rollouts per training iteration (16 episodes each)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    from milepost.io import atomic_write_json, atomic_write_text
    from milepost.tables import md_row, md_rule

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, help="the runs folder of experiments/seeded_arms.py")
    p.add_argument("--arms", default="sparse,mira")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--out", default="webshop2_interim", help="stem of the files in experiments/results/")
    p.add_argument("--reading", default=None, help="a Markdown file of hand-written reading, kept at the end")
    args = p.parse_args()
    work = Path(args.work)
    if not work.is_dir():
        raise SystemExit(f"webshop2_interim: --work {work}: no such folder")
    names = [f"{a}-s{s}" for s in args.seeds.split(",") for a in args.arms.split(",")]
    runs = {n: rows for n in names if (rows := iterations(work / n))}
    evals = {
        n: e
        for n in ["start-atomic", *names]
        if (e := evaluation(work / n if n == "start-atomic" else work / n / "eval"))
    }
    lines = [md_row(["run", "iteration", "phase", *COLUMNS.values()]), md_rule(3 + len(COLUMNS))]
    for name, rows in runs.items():
        for r in rows:
            cells = []
            for key in COLUMNS:
                v = r[key]
                cells.append("-" if v is None else f"{v:.0f}" if key.startswith(("perf", "train")) else f"{v:.2f}")
            lines.append(md_row([name, r["iteration"], r["phase"], *cells]))
    ev = [md_row(["evaluation", "orders x 4", "success", "subgoals", "outcome score", "turns", "endings"]), md_rule(7)]
    for name, e in evals.items():
        label = name + ("" if e["complete"] else " (partial: the orders finished so far)")
        ends = ", ".join(f"{k} {v}" for k, v in sorted(e["endings"].items()))
        ev.append(
            md_row(
                [label, e["orders"], f"{100 * e['success']:.1f}%", f"{100 * e['subgoals']:.1f}%",
                 f"{e['score']:.3f}", f"{e['turns']:.1f}", ends]
            )
        )  # fmt: skip
    png = RESULTS / f"{args.out}.png"
    plot(png, runs)
    md = (
        f"# Web shop 2-item orders, comparison 2 while it runs (`{work}`)\n\n"
        f"Command: `python experiments/webshop2_interim.py --work {args.work} --arms {args.arms} --seeds {args.seeds} "
        f"--out {args.out}"
        + (f" --reading {args.reading}" if args.reading else "")
        + "`.\n\n## Training iterations so far\n\n"
        + "\n".join(lines)
        + "\n\n## Evaluations so far\n\n"
        "Test split, 2-item orders at goal distance 6-8, 4 samples per order, H_max 30. The outcome score is the mean "
        "of WebShop's graded reward of the purchase (0 without one).\n\n"
        + "\n".join(ev)
        + f"\n\n![iterations]({png.name})\n"
    )
    if args.reading:
        md += "\n## Reading (written by hand)\n\n" + Path(args.reading).read_text(encoding="utf-8").strip() + "\n"
    atomic_write_text(RESULTS / f"{args.out}.md", md)
    atomic_write_json(RESULTS / f"{args.out}.json", {"iterations": runs, "evaluations": evals})
    print(md)


if __name__ == "__main__":
    main()
