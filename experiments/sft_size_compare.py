"""Rush Hour SFT starts side by side by examples seen: does the model's size (or the answer's style) move the
rules it learns?

Issue 28 asks for a Rush Hour start with episode step accuracy >= 80% at 4-6 moves. The 1M model's rounds of
DAgger and slide data plateaued near 40-45% (``sft_starts_dagger5.md``, ``sft_starts_d4slide3.md``); the notes
named a larger model as the lever not yet tried. This script reads the JSON files ``experiments.sft_starts``
writes (one per run) and sets the runs beside each other on the axis they share, examples seen, because the runs
differ in wall-clock speed (model size, threads, the machine's load):

* the runs' settings: model size, the target answer's style when a run is not the default (``sft_starts
  --answer``), data, threads, load, training minutes, steps and examples;
* at matched examples (``--match``; default the smallest of the runs' last checkpoints): each run's last probe at
  or below that count, and its episode evaluation there if it had one;
* every episode evaluation of every run (step accuracy, avg@4 with its interval, pass@4, the minutes it took);
* a plot: the held-out probe (optimal share) against examples seen, the episode evaluations marked.

Usage::

    python -m experiments.sft_size_compare 1m=experiments/results/sft_starts.json \\
        5m=experiments/results/sft_starts_5m.json --out experiments/results/sft_size_compare.md --reading R.md
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.report_files import pct

LEVEL = "4-6"


def load(spec: str) -> tuple[str, dict[str, Any]]:
    """``LABEL=PATH`` -> (label, the run's JSON); a one-line error for a missing or malformed file."""
    from experiments.report_files import labelled_json

    label, run = labelled_json(spec, "sft_size_compare")
    if not run.get("curve"):
        raise SystemExit(f"sft_size_compare: {spec}: no curve (not an sft_starts result)")
    return label, run


def episode(point: dict[str, Any]) -> dict[str, Any] | None:
    """The 4-6 episode evaluation recorded at a curve point, if any."""
    return (point.get("episode") or {}).get(LEVEL)


def at_examples(run: dict[str, Any], examples: int) -> dict[str, Any] | None:
    """The run's last curve point with at most ``examples`` examples seen (None when its first is past it)."""
    points = [p for p in run["curve"] if p["examples_seen"] <= examples]
    return points[-1] if points else None


def default_match(runs: dict[str, dict[str, Any]]) -> int:
    return min(run["curve"][-1]["examples_seen"] for run in runs.values())


def _mean_load(run: dict[str, Any]) -> str:
    loads = [p["load"] for p in run["curve"] if p.get("load") is not None]
    return f"{sum(loads) / len(loads):.1f}" if loads else "-"


def _episode_cells(ep: dict[str, Any] | None) -> list[str]:
    if ep is None:
        return ["-", "-", "-"]
    avg = f"{pct(ep['avg'])} [{pct(ep['avg_lo'])}, {pct(ep['avg_hi'])}]"
    return [pct(ep["step_accuracy"]), avg, pct(ep["pass"].get("4"))]


def render(runs: dict[str, dict[str, Any]], match: int) -> str:
    """The three tables; every row through ``md_row``, so a run label holding ``|`` stays one cell."""
    from milepost.tables import md_row, md_rule

    # The answer column only where a run's target is not the default (the earlier reports keep their table).
    styled = any(run["args"].get("answer", "move") != "move" for run in runs.values())
    head = ["run", "size", *(["answer"] if styled else []), "init", "examples in the data", "threads", "mean load"]
    head += ["training min", "steps", "examples seen"]
    out = [md_row(head), md_rule(len(head))]
    for label, run in runs.items():
        a, last = run["args"], run["curve"][-1]
        out.append(
            md_row(
                [
                    label,
                    a["size"],
                    *([a.get("answer", "move")] if styled else []),
                    a.get("init") or "from scratch",
                    run["examples"],
                    a["threads"],
                    _mean_load(run),
                    f"{last['train_s'] / 60:.1f}",
                    last["step"],
                    last["examples_seen"],
                ]
            )
        )
    ep_head = ["episode step acc. (%)", "avg@4 (%) [95% CI]", "pass@4 (%)"]
    match_head = ["run", "step", "examples seen", "training min", "probe optimal (%)", "probe legal (%)", *ep_head]
    out += [
        "",
        f"At matched examples ({match} seen; each run's last checkpoint at or below it):",
        "",
        md_row(match_head),
        md_rule(len(match_head)),
    ]
    for label, run in runs.items():
        p = at_examples(run, match)
        if p is None:
            out.append(md_row([label, *["-"] * (len(match_head) - 1)]))
            continue
        probe = [pct(p["probe_optimal"]), pct(p["probe_legal"])]
        out.append(
            md_row(
                [label, p["step"], p["examples_seen"], f"{p['train_s'] / 60:.1f}", *probe, *_episode_cells(episode(p))]
            )
        )
    every_head = ["run", "step", "examples seen", "training min", *ep_head]
    out += [
        "",
        f"Every episode evaluation (level {LEVEL}, the SFT script's settings):",
        "",
        md_row(every_head),
        md_rule(len(every_head)),
    ]
    for label, run in runs.items():
        for p in run["curve"]:
            if (ep := episode(p)) is not None:
                out.append(
                    md_row([label, p["step"], p["examples_seen"], f"{p['train_s'] / 60:.1f}", *_episode_cells(ep)])
                )
    return "\n".join(out) + "\n"


def summary(runs: dict[str, dict[str, Any]], match: int) -> dict[str, Any]:
    """The JSON beside the table: each run's settings, its point at the match and its episode evaluations."""
    out: dict[str, Any] = {"match_examples": match, "level": LEVEL, "runs": {}}
    for label, run in runs.items():
        p = at_examples(run, match)
        out["runs"][label] = {
            "args": run["args"],
            "examples": run["examples"],
            "at_match": None if p is None else {k: v for k, v in p.items() if k != "episode"} | {"episode": episode(p)},
            "episodes": [
                {"step": q["step"], "examples_seen": q["examples_seen"], **ep}
                for q in run["curve"]
                if (ep := episode(q)) is not None
            ],
        }
    return out


def plot(runs: dict[str, dict[str, Any]], match: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for i, (label, run) in enumerate(runs.items()):
        xs = [p["examples_seen"] / 1000 for p in run["curve"]]
        left.plot(xs, [100 * p["probe_optimal"] for p in run["curve"]], "o-", color=f"C{i}", label=label, ms=3)
        evals = [(p["examples_seen"] / 1000, ep) for p in run["curve"] if (ep := episode(p)) is not None]
        ex = [x for x, _ in evals]
        acc = [100 * ep["step_accuracy"] for _, ep in evals]
        right.plot(ex, acc, "s-", color=f"C{i}", label=f"{label}: step accuracy")
        avg = [100 * ep["avg"] for _, ep in evals]
        err = [
            [100 * (ep["avg"] - ep["avg_lo"]) for _, ep in evals],
            [100 * (ep["avg_hi"] - ep["avg"]) for _, ep in evals],
        ]
        right.errorbar(ex, avg, yerr=err, fmt="^--", color=f"C{i}", capsize=3, label=f"{label}: avg@4")
    for ax in (left, right):
        ax.axvline(match / 1000, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("examples seen (thousands)")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    right.axhline(80, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("held-out probe: optimal move (%)")
    right.set_ylabel(f"episodes at {LEVEL} (%)")
    left.set_title("Greedy one-step probe", fontsize=10)
    right.set_title("Episodes (target step accuracy 80%, dashed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="LABEL=PATH of an sft_starts result JSON (two or more)")
    p.add_argument("--match", type=int, default=None, help="examples seen to compare at (default: the smallest end)")
    p.add_argument("--out", default=None, help="also write the report to this .md path, with its .json and .png")
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    p.add_argument("--title", default="Rush Hour SFT starts by model size", help="the report's heading")
    args = p.parse_args(argv)
    if len(args.runs) < 2:
        raise SystemExit("sft_size_compare: give two or more LABEL=PATH runs")
    runs = dict(load(spec) for spec in args.runs)
    if len(runs) < len(args.runs):
        raise SystemExit("sft_size_compare: two runs share a label")
    match = args.match if args.match is not None else default_match(runs)
    text = render(runs, match)
    print(text, end="")
    if args.out:
        import shlex
        import sys

        from milepost.io import atomic_write_json, atomic_write_text

        out = Path(args.out).with_suffix(".md")
        command = shlex.join(["python", "-m", "experiments.sft_size_compare", *(argv or sys.argv[1:])])
        head = f"# {args.title}\n\nCommand: `{command}`.\n\n"
        tail = f"\n![probe and episodes against examples seen]({out.with_suffix('.png').name})\n"
        if args.reading:
            tail += "\n" + Path(args.reading).read_text(encoding="utf-8")
        atomic_write_text(out, head + text + tail)
        atomic_write_json(out.with_suffix(".json"), summary(runs, match))
        plot(runs, match, out.with_suffix(".png"))


if __name__ == "__main__":
    main()
