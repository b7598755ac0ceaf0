"""Does a Rush Hour start fail on boards it never trained on, or on every board? The greedy one-step probe of
``experiments.sft_starts`` on states of the training puzzles and of the held-out test puzzles, by distance to the
goal (issue 28's step-accuracy target).

``sft_starts`` probes held-out states only. If a model answered its training puzzles' states much better than
the test puzzles', the lever for the step-accuracy target would be more puzzles (it memorises); if it answers both
alike, the model underfits and the lever is capacity or training. The states are drawn as the training probe draws
them (``sft_starts.probe_states``: two states of each puzzle's cluster at distances drawn evenly from those the
cluster has within 1..``--max-dist`` one-cell steps, a fixed seed), so the same states are probed for every
model. A training puzzle's probe state may or may not be one of its training examples (24 of the cluster's states
were drawn for those).

Usage::

    python -m experiments.probe_split --data runs/sft-starts-1m-quiet/data \\
        legal-dagger2=checkpoints/rushhour-sft-legal-dagger2 --out experiments/results/X.md

The prompt renderer comes from each checkpoint's prompt card (``milepost_prompt.json``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.report_files import pct, write_report

BUCKETS = ((1, 5), (6, 10), (11, 15), (16, 20))


def probe_model(ckpt: Path, data: Path, n: int, max_dist: int, seed: int) -> dict[str, Any]:
    """The probe's optimal and legal shares on ``n`` states of each split, by distance bucket and overall (the
    buckets' sums: each state is answered once)."""
    import contextlib
    import os

    from experiments.sft_starts import PromptMaker, distances, probe_states, step_accuracy_probe
    from milepost.backends.hf import HFBackend, load_model, resolve_device_dtype
    from milepost.datasets import load_tasks
    from milepost.envs.rushhour.env import RushHourEnv
    from milepost.evaluation.metrics import wilson_interval
    from milepost.prompt_card import read_card

    card = read_card(ckpt) or {}
    render = card.get("render", "grid")
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        model, tok = load_model(ckpt, *resolve_device_dtype("cpu", "float32"))
    backend = HFBackend(model=model, tokenizer=tok, name=ckpt.name)
    cap = int(card.get("max_new_tokens", 32))
    out: dict[str, Any] = {"render": render}
    for split in ("train", "test"):
        tasks = load_tasks(data, split)
        env = RushHourEnv(action_mode="atomic", render=render)
        env.reset(options={"task": tasks[0]})
        maker = PromptMaker(backend, env.goal_text(), render)
        probe = probe_states(tasks, maker, max_dist, n, seed=seed)
        dist = [int(distances(c, "steps")[c.index(s.key)]) for c, s, _ in probe]
        buckets: dict[str, dict[str, Any]] = {}
        optimal = legal = 0.0  # state counts, summed over the buckets
        for lo, hi in BUCKETS:
            part = [p for p, d in zip(probe, dist) if lo <= d <= hi]
            if part:
                got = step_accuracy_probe(model, backend, part, max_new_tokens=cap)
                buckets[f"{lo}-{hi}"] = {"states": len(part), "optimal": got["probe_optimal"]}
                optimal += got["probe_optimal"] * len(part)
                legal += got["probe_legal"] * len(part)
        out[split] = {
            "states": len(probe),
            "mean_distance": sum(dist) / len(dist),
            "optimal": optimal / len(probe),
            "optimal_ci": wilson_interval(round(optimal), len(probe)),
            "legal": legal / len(probe),
            "buckets": buckets,
        }
    return out


def render_table(rows: dict[str, dict[str, Any]]) -> str:
    head = ["model", "split", "states", "mean distance", "optimal % [95% CI]", "legal %"]
    head += [f"optimal % at {lo}-{hi} steps (states)" for lo, hi in BUCKETS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, res in rows.items():
        for split in ("train", "test"):
            r = res[split]
            lo, hi = r["optimal_ci"]
            cells = [label, split, str(r["states"]), f"{r['mean_distance']:.1f}"]
            cells += [f"{pct(r['optimal'])} [{pct(lo)}, {pct(hi)}]", pct(r["legal"])]
            for a, b in BUCKETS:
                got = r["buckets"].get(f"{a}-{b}")
                cells.append("-" if got is None else f"{pct(got['optimal'])} ({got['states']})")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    names = [f"{lo}-{hi}" for lo, hi in BUCKETS]
    for label, res in rows.items():
        for split, style in (("train", "-o"), ("test", "--s")):
            ys = [res[split]["buckets"].get(b, {}).get("optimal") for b in names]
            xs = [i for i, y in enumerate(ys) if y is not None]
            ax.plot(xs, [100 * ys[i] for i in xs], style, label=f"{label} ({split} puzzles)")
    ax.set_xticks(range(len(names)), names)
    ax.set_xlabel("distance to the goal (one-cell steps)")
    ax.set_ylabel("greedy answer optimal (%)")
    ax.set_ylim(0, 100)
    ax.axhline(80, color="grey", lw=0.8, ls=":")
    ax.legend(fontsize=8)
    ax.set_title("One-step probe on training and held-out puzzles")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", help="LABEL=CHECKPOINT folder")
    p.add_argument("--data", required=True, help="the dataset the models trained on (train and test splits)")
    p.add_argument("--n", type=int, default=600, help="probe states per split at most")
    p.add_argument("--max-dist", type=int, default=20)
    p.add_argument("--seed", type=int, default=999)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    p.add_argument("--reading", help="a Markdown file appended after the table")
    args = p.parse_args()
    if not 1 <= args.max_dist <= BUCKETS[-1][1]:  # every probed state falls in one of the table's buckets
        raise SystemExit(f"probe_split: --max-dist {args.max_dist}: must lie in 1..{BUCKETS[-1][1]}")
    models = []
    for spec in args.models:
        label, sep, path = spec.partition("=")
        if not sep or not label or not Path(path).is_dir():
            raise SystemExit(f"probe_split: {spec!r}: expected LABEL=CHECKPOINT (an existing folder)")
        models.append((label, Path(path)))
    if not (Path(args.data) / "manifest.json").is_file():
        raise SystemExit(f"probe_split: {args.data}: not a dataset folder (no manifest.json)")
    import torch

    torch.set_num_threads(args.threads)
    rows = {}
    for label, ckpt in models:
        print(f"probe_split: {label} ({ckpt})", flush=True)
        rows[label] = probe_model(ckpt, Path(args.data), args.n, args.max_dist, args.seed)
    intro = (
        f"Greedy one-step answers (the answer cap from each checkpoint's card) on at most {args.n} states of each "
        f"split of `{args.data}`, drawn as `sft_starts` draws its held-out probe (two per puzzle, at distances drawn "
        f"evenly from those its cluster has within 1-{args.max_dist} one-cell steps, seed {args.seed}); optimal = "
        "the move brings the board one step closer. Intervals: Wilson 95%.\n\n"
    )
    out = Path(args.out)
    write_report(
        out,
        title="Rush Hour start: the one-step probe on training and held-out puzzles",
        module="experiments.probe_split",
        body=render_table(rows),
        data=rows,
        plot=lambda path: plot(rows, path),
        reading=args.reading,
        intro=intro,
        alt="probe by distance",
    )
    print(f"probe_split: wrote {out}")


if __name__ == "__main__":
    main()
