"""Which turns MiRA's critics blame on the web shop: the advantage MiRA gives each kind of action (search, open a
product, choose an option, ``Buy Now``, ...) when its critics, restored from a checkpoint of a MiRA run, score a
set of recorded episodes. Tests the reading of comparison 2 (``experiments/results/webshop2_interim.md``) that
the terminal potential P(s_T) = 0 makes the purchase the most blamed turn, so MiRA learns never to buy.

The run folder is copied first (restoring writes into it), and its ``latest`` pointer set to ``--step``::

    python experiments/mira_buy_credit.py --run runs/w2arms/mira-s0 --step 1 \\
        --episodes runs/w2arms/sparse-s0/eval/episodes.jsonl --limit 80 --out webshop2_mira_buy_credit

Writes ``experiments/results/{out}.{md,json,png}``: per action kind, the turns, the mean advantage the update would
use (batch-normalised, the step reward included) and the share of its turns with a negative one.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"


def action_kind(action: str | None) -> str:
    """The web shop action's kind: search, Buy Now, Add to Cart, Checkout, Back to Search, a page turn, open a
    product (an id), choose an option, or invalid (nothing applied)."""
    if not action:
        return "invalid"
    if action.startswith("search["):
        return "search"
    target = action[len("click[") : -1] if action.startswith("click[") else action
    if target in ("Buy Now", "Add to Cart", "Checkout", "Back to Search"):
        return target
    if target in ("Next >", "< Prev"):
        return "page turn"
    if len(target) == 10 and target.isalnum() and target.upper() == target:
        return "open a product"
    return "choose an option"


def credit_config(run: Path, threads: int, overrides: list[str]) -> Any:
    """The run's training config as the scoring uses it: its own ``config.yaml``, ``threads`` and ``overrides``."""
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    cfg = load_config(TrainConfig, run / "config.yaml", [f"threads={threads}", *overrides])
    if not cfg.mira.enabled:
        raise SystemExit(f"mira_buy_credit: {run} is not a MiRA run")
    return cfg


def main() -> None:
    import matplotlib

    from milepost.io import atomic_write_json, atomic_write_text, read_jsonl
    from milepost.tables import md_row, md_rule
    from milepost.training.trainer import RLRun
    from milepost.types import Episode

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a MiRA run folder (milepost train) with checkpoints")
    p.add_argument("--step", type=int, required=True, help="the checkpoint whose critics score the episodes")
    p.add_argument("--episodes", required=True, help="an episodes.jsonl with token ids (an evaluation's)")
    p.add_argument("--out", required=True, help="stem of the files in experiments/results/")
    p.add_argument("--limit", type=int, default=0, help="score only the first N episodes (0: all)")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the run's config when scoring (mira.terminal_potential=label: the same critics under the other "
        "terminal rule)",
    )
    args = p.parse_args()
    run, file = Path(args.run), Path(args.episodes)
    ckpt = run / "checkpoints" / f"step-{args.step:06d}"
    if not ckpt.is_dir():
        raise SystemExit(f"mira_buy_credit: {ckpt}: no such checkpoint")
    if not file.is_file():
        raise SystemExit(f"mira_buy_credit: {file}: no such file")
    episodes = [Episode.from_dict(r) for r in read_jsonl(file)]
    episodes = [ep for ep in episodes if ep.turns][: args.limit or None]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        copy.mkdir()
        (copy / "checkpoints").mkdir()
        shutil.copytree(ckpt, copy / "checkpoints" / ckpt.name)
        (copy / "checkpoints" / "latest").write_text(ckpt.name)
        cfg = credit_config(run, args.threads, args.set)
        rl_run = RLRun(cfg, copy, resume=True)
        assert rl_run.mira is not None
        samples = rl_run.mira.samples(rl_run.model, episodes)
        adv, _ = rl_run.mira.advantages(episodes, samples, args.step)
        rl_run.close()
    kinds: dict[str, list[float]] = {}
    for ep, a in zip(episodes, adv):
        for turn, x in zip(ep.turns, a.tolist()):
            kinds.setdefault(action_kind(turn.actions[0] if turn.actions else None), []).append(x)

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    table: dict[str, Any] = {
        k: {"turns": len(v), "advantage": mean(v), "negative": sum(x < 0 for x in v) / len(v)}
        for k, v in sorted(kinds.items(), key=lambda kv: mean(kv[1]))
    }
    lines = [md_row(["action kind", "turns", "mean advantage", "share of turns with a negative advantage"]), md_rule(4)]
    for k, v in table.items():
        lines.append(md_row([k, v["turns"], f"{v['advantage']:+.3f}", f"{100 * v['negative']:.0f}%"]))
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = list(table)
    ax.barh(
        names,
        [table[k]["advantage"] for k in names],
        color=["C3" if table[k]["advantage"] < 0 else "C2" for k in names],
    )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("mean advantage (batch-normalised, as the update uses it)")
    ax.set_title(
        f"MiRA's critics at step {args.step} of {run.name} on {file.parent.parent.name}'s episodes", fontsize=9
    )
    fig.tight_layout()
    png = RESULTS / f"{args.out}.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    sets = "".join(f" --set {o}" for o in args.set)
    md = (
        f"# MiRA's credit per action kind: critics of `{run}` at step {args.step}, on `{file}`\n\n"
        f"Command: `python experiments/mira_buy_credit.py --run {args.run} --step {args.step} --episodes "
        f"{args.episodes} --limit {args.limit}{sets} --out {args.out}`.\n\n{len(episodes)} episodes, "
        f"{sum(v['turns'] for v in table.values())} turns, scored as MiRA's update at iteration {args.step + 1} "
        f"would score them (shaping coefficient, doubly-robust estimator and batch normalisation of the run's "
        f"config; `terminal_potential: {cfg.mira.terminal_potential}`).\n\n"
        + "\n".join(lines)
        + f"\n\n![credit]({png.name})\n"
    )
    atomic_write_text(RESULTS / f"{args.out}.md", md)
    atomic_write_json(RESULTS / f"{args.out}.json", {"command": " ".join(["python", *sys.argv]), "kinds": table})
    print(md)


if __name__ == "__main__":
    main()
