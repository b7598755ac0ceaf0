"""Comparison 1 on the web shop: the plain agent against the SGO agent, each a SmolLM2-135M LoRA start trained on
oracle demonstrations in its own format (issue 28; the SGO+MiRA paper's stuck-midway share 48.4% -> 39.9% and
success 23.0 -> 32.1% on WebArena-Lite).

Each (arm, seed) is one ``experiments.webshop_smollm2`` run with equal budgets: the same 240 training orders
(drawn by the seed), one epoch of their demonstrations at batch 8, bf16 autocast on both cores, then 40 test
orders x 4 samples through the arm's own agent (SGO: the programmatic plan as a checklist in the prompt, a
PROGRESS line first in the answer, at most 2 replans when stuck). The runs are resumable and skipped when their
result file exists; one run takes about 1-1.5 h on this 2-core machine. The report reads the committed per-run
result files (``experiments/results/webshop_smollm2<tag>.json``): success and stuck-midway share per seed, the
mean over seeds with a 95% t-interval, and the paired SGO - plain difference.

Usage (the committed report: `--seeds 0,1,2 --report-only --reading experiments/results/sgo_webshop_reading.md`)::

    python -m experiments.sgo_webshop --work runs --seeds 0      # run what is missing, then the report
    python -m experiments.sgo_webshop --seeds 0,1,2 --report-only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from experiments.sgo_rushhour import _pct, summarise

RESULTS = Path(__file__).parent / "results"
ARMS = ("plain", "sgo")
TASKS = 240  # training orders per run
LIMIT = 40  # test orders (all of the split)


def tag(arm: str, seed: int) -> str:
    """The result-file suffix of one run: ``_t240`` is the plain seed-0 start that also meets the SFT target."""
    return ("_sgo" if arm == "sgo" else "") + f"_t{TASKS}" + (f"_s{seed}" if seed else "")


def run_argv(arm: str, seed: int, work: str) -> list[str]:
    argv = [sys.executable, "-m", "experiments.webshop_smollm2", "--work", work, "--tasks", str(TASKS)]
    argv += ["--threads", "2", "--bf16", "--limit", str(LIMIT), "--agent", arm, "--seed", str(seed)]
    return [*argv, f"--tag={tag(arm, seed)}"]


def numbers(result: dict[str, Any], tasks: set[str] | None = None) -> dict[str, Any]:
    """Success, stuck-midway share and failures of one run; with ``tasks``, over those orders' episodes only (two
    runs evaluated on different numbers of test orders are compared on the orders both played)."""
    ev = result["eval"]
    if tasks is None:
        failures: dict[str, int] = ev["failures"]
        success, ci, episodes = ev["avg"]["value"], [ev["avg"]["lo"], ev["avg"]["hi"]], ev["tasks"] * ev["n"]
    else:
        rows = [r for r in result["episodes"] if r[0] in tasks]
        failures = dict(Counter(r[3] for r in rows if not r[2]))
        success, ci, episodes = sum(r[2] for r in rows) / len(rows), None, len(rows)
    failed, stuck = sum(failures.values()), failures.get("stuck_midway", 0)
    return {
        "success": success,
        "success_ci": ci,
        "step_accuracy": ev["step_accuracy"] if tasks is None else None,
        "subgoal_fraction": ev["subgoal_fraction"] if tasks is None else None,
        "episodes": episodes,
        "failed": failed,
        "stuck": stuck,
        "stuck_share": stuck / failed if failed else None,
        "failures": failures,
        "sft_minutes": result["times"].get("sft", {}).get("seconds", 0) / 60,
        "eval_minutes": result["times"].get("eval", {}).get("seconds", 0) / 60,
    }


def _orders(result: dict[str, Any]) -> frozenset[str]:
    return frozenset(r[0] for r in result.get("episodes", []))


def gather(seeds: list[int]) -> dict[str, Any]:
    loaded: dict[tuple[str, int], dict[str, Any]] = {}
    for arm in ARMS:
        for seed in seeds:
            f = RESULTS / f"webshop_smollm2{tag(arm, seed)}.json"
            if f.is_file():
                loaded[arm, seed] = json.loads(f.read_text())
    # Runs that played different sets of test orders are compared on the orders every run played.
    sets = {_orders(r) for r in loaded.values()}
    common = set(frozenset.intersection(*sets)) if len(sets) > 1 and all(sets) else None
    per: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in ARMS}
    for (arm, seed), r in loaded.items():
        per[arm][seed] = numbers(r, common)
    arms, paired = summarise(per)
    by_orders = order_paired(loaded, common)
    return {"arms": arms, "paired": paired, "orders": sorted(common) if common else None, "by_orders": by_orders}


def order_paired(loaded: dict[tuple[str, int], dict[str, Any]], common: set[str] | None) -> dict[str, Any] | None:
    """SGO - plain success per test order, averaged over the seeds both arms ran, with a 95% bootstrap interval
    over the orders (both arms play the same orders). The training seeds are held fixed: this interval is about
    the test orders only, the t-interval over seeds about the training seed; with two seeds the latter is wide
    (t at 1 degree of freedom is 12.7). None when no seed has both arms' episode records."""
    from milepost.evaluation.metrics import bootstrap_interval

    seeds = sorted(s for a, s in loaded if a == "sgo" and ("plain", s) in loaded)
    seeds = [s for s in seeds if loaded["sgo", s].get("episodes") and loaded["plain", s].get("episodes")]
    if not seeds:
        return None

    def per_order(result: dict[str, Any]) -> dict[str, float]:
        hits: dict[str, list[bool]] = {}
        for task, _sample, success, _kind in result["episodes"]:
            if common is None or task in common:
                hits.setdefault(task, []).append(bool(success))
        return {t: sum(v) / len(v) for t, v in hits.items()}

    diffs: dict[str, list[float]] = {}
    for s in seeds:
        sgo, plain = per_order(loaded["sgo", s]), per_order(loaded["plain", s])
        for task in sgo.keys() & plain.keys():
            diffs.setdefault(task, []).append(sgo[task] - plain[task])
    values = [sum(d) / len(d) for _, d in sorted(diffs.items()) if len(d) == len(seeds)]
    lo, hi = bootstrap_interval(values, resamples=10000)
    return {"seeds": seeds, "orders": len(values), "mean_ci": [sum(values) / len(values), lo, hi]}


def render(g: dict[str, Any], seeds: list[int]) -> str:
    lines = [
        "# Plain agent vs SGO agent on the web shop (SmolLM2-135M + LoRA SFT starts, 1-item orders)",
        "",
        f"Command: `python -m experiments.sgo_webshop --seeds {','.join(map(str, seeds))}`; each run is "
        f"`python {' '.join(run_argv('ARM', 0, 'runs')[1:-2])} SEED --tag=TAG` (TAG `_t240` for plain, "
        "`_sgo_t240` for SGO, then `_sSEED` for seeds above 0; per-run reports: `webshop_smollm2TAG.md`).",
        "",
        f"Both arms: {TASKS} training orders drawn by the seed, one epoch of oracle demonstrations in the arm's own "
        "format (10% of turns an error the oracle recovers from), batch 8, lr 5e-4, LoRA rank 16. Evaluation: the "
        f"{LIMIT} test orders x 4 samples at temperature 0.8, 16 turns, memory K = 0, through the arm's agent "
        "(SGO: plan checklist in the prompt, PROGRESS line in the answer, at most 2 replans). Success is avg@4; "
        "the interval of a single run is the bootstrap over orders, of a mean the 95% t-interval over seeds.",
        "",
        "| arm | seed | success % [95% CI] | stuck-midway share of failures % | step accuracy % | subgoals % "
        "| failures | SFT / eval min |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, row in g["arms"].items():
        for s in row["seeds"]:
            r = row["per_seed"][s]
            fails = ", ".join(f"{k} {v}" for k, v in sorted(r["failures"].items(), key=lambda kv: -kv[1]))
            ci = _pct(r["success"])
            if r["success_ci"]:
                ci += f" [{_pct(r['success_ci'][0])}, {_pct(r['success_ci'][1])}]"
            lines.append(
                f"| {arm} | {s} | {ci} | {_pct(r['stuck_share'])} ({r['stuck']} of {r['failed']}) | "
                f"{_pct(r['step_accuracy'])} | {_pct(r['subgoal_fraction'])} | {fails} | "
                f"{r['sft_minutes']:.0f} / {r['eval_minutes']:.0f} |"
            )
    if g["orders"]:
        lines += [
            "",
            f"The runs played different numbers of test orders: every figure above and below is over the "
            f"{len(g['orders'])} orders all of them played (the first of the test file; no interval for a single "
            "run, and step accuracy and subgoals are only in the per-run reports).",
        ]
    lines += ["", "| arm | seeds | success, mean [95% CI over seeds] | stuck-midway share | step accuracy |"]
    lines += ["|---|---|---|---|---|"]
    for arm, row in g["arms"].items():
        one = len(row["seeds"]) == 1  # one seed: the value, no interval over seeds
        cells = [_pct(row[k][0] if one and row[k] else row[k]) for k in ("success", "stuck_share", "step_accuracy")]
        lines.append(f"| {arm} | {len(row['seeds'])} | {' | '.join(cells)} |")
    lines.append("")
    for key, what in (("success", "success"), ("stuck_share", "stuck-midway share")):
        p = g["paired"].get(key)
        if p:
            per = ", ".join(f"{100 * d:+.1f}" for d in p["per_seed"])
            m, lo, hi = p["mean_ci"]
            ci = f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if len(p["per_seed"]) > 1 else " (one seed: no interval)"
            lines.append(f"- Paired SGO - plain {what}: {100 * m:+.1f} points{ci}; per seed {per}.")
    o = g.get("by_orders")
    if o:
        m, lo, hi = o["mean_ci"]
        lines.append(
            f"- The same difference paired by test order (seeds {', '.join(map(str, o['seeds']))} held fixed, "
            f"{o['orders']} orders, 95% bootstrap over orders): {100 * m:+.1f} points [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}]. It is about the test orders only, not about another training seed."
        )
    missing = [f"{arm} seed {s}" for arm in ARMS for s in seeds if s not in g["arms"].get(arm, {}).get("seeds", [])]
    if missing:
        lines.append(f"- Not run yet: {', '.join(missing)} (the issue asks for 3 seeds per arm).")
    lines += ["", "![plain vs SGO on the web shop](sgo_webshop.png)", ""]
    return "\n".join(lines)


def plot(g: dict[str, Any], path: Path) -> None:
    from experiments.sgo_rushhour import plot_arms

    title = "Web shop, 1-item orders: plain vs SGO start (mean over seeds, 95% t-interval; dots: seeds)"
    plot_arms(path, g["arms"], title, label="{arm}\n({seeds} seed(s))")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs", help="folder of the models, data and runs")
    p.add_argument("--seeds", default="0", help="comma-separated training seeds")
    p.add_argument("--arms", default="plain,sgo", help="arms to run (the report covers both)")
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from the result files")
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if not args.report_only:
        for seed in seeds:
            for arm in args.arms.split(","):
                if arm not in ARMS:
                    raise SystemExit(f"sgo_webshop: --arms: {arm!r} is not one of {', '.join(ARMS)}")
                if (RESULTS / f"webshop_smollm2{tag(arm, seed)}.json").is_file():
                    continue
                subprocess.run(run_argv(arm, seed, args.work), check=True)
    from milepost.io import atomic_write_json, atomic_write_text

    g = gather(seeds)
    atomic_write_json(RESULTS / "sgo_webshop.json", {"seeds": seeds, **g})
    plot(g, RESULTS / "sgo_webshop.png")
    text = render(g, seeds)
    if args.reading:
        text += "\n" + Path(args.reading).read_text(encoding="utf-8")
    atomic_write_text(RESULTS / "sgo_webshop.md", text)
    print(text)


if __name__ == "__main__":
    main()
