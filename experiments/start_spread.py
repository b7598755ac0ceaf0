"""An earlier ``seeded_arms`` report's start, evaluated again under every seed's sampling seed.

Reports made before ``seeded_arms`` evaluated the start under each seed (commit a8174bd) show the start under the
first seed only, and their readings call an arm "below the start" against that one number. One policy's score
moves with the sampling seed alone (Rush Hour 7-9, 40 tasks x 4: 8.1, 1.9 and 5.0%), so such a reading needs the
start's spread. This script takes the settings from each report's own recorded command (parsed with
``seeded_arms``' parser; ``--data`` replaced when the dataset folder is gone and was rebuilt elsewhere), evaluates
the start with ``seeded_arms.run_job`` exactly as the report did, under every seed and in every action mode the
arms use, and checks that the first seed reproduces the report's start row (avg@4, step accuracy, tasks): when it
does not, the data or the code differs and the report says so instead of comparing.

Each arm is then set against the start in its own action mode, paired by seed (an arm's seed s and the start's
seed s share the test tasks and the sampling seed): the arm's mean, the start's mean, and the paired difference
with a 95% t-interval over seeds.

Usage (resumable: finished evaluations are kept under ``--work``)::

    python experiments/start_spread.py --work runs/start-spread --data runs/sft-starts-dagger4/data \\
        rushhour_seeded_arms rushhour_macro_arms rushhour_macro_arms_46

Writes ``experiments/results/start_spread.{md,json}`` and one ``start_spread_{report}.png`` per report (the
report's arms, mean and interval over seeds, with the start's mean over seeds as the dashed line).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import seeded_arms

RESULTS = seeded_arms.RESULTS


def report_args(report: dict[str, Any], work: Path, data: str | None) -> argparse.Namespace:
    """The ``seeded_arms`` arguments of a report's recorded command, with ``--work`` (and ``--data``) replaced."""
    words = shlex.split(report["command"])
    if words[:2] != ["python", "experiments/seeded_arms.py"]:
        raise SystemExit(f"start_spread: not a seeded_arms command: {report['command'][:80]}")
    args = seeded_arms.build_parser().parse_args(words[2:])
    args.work = str(work)
    if data is not None:
        args.data = data
    if not (Path(args.data) / "test.jsonl").is_file():
        raise SystemExit(f"start_spread: {args.data}: no dataset (test.jsonl) there; pass --data")
    return args


def same_row(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """One level's start numbers equal the report's (avg@4, step accuracy and task count)."""
    return (
        ours["tasks"] == theirs["tasks"]
        and abs(ours["avg"] - theirs["avg"]) < 1e-9
        and abs(ours["step_accuracy"] - theirs["step_accuracy"]) < 1e-9
    )


def spread(name: str, work: Path, data: str | None) -> dict[str, Any]:
    """Evaluate one report's start under every seed and mode; its arms against it, paired by seed."""
    report = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    args = report_args(report, work / name, data)
    warmup, modes = seeded_arms.check_arms(args)
    seeds = [int(s) for s in args.seeds.split(",")]
    Path(args.work).mkdir(parents=True, exist_ok=True)
    start: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    for mode in modes:
        for seed in seeds:
            t = time.perf_counter()
            folder, _ = seeded_arms.run_job(None, seed, vars(args), warmup, mode)
            print(f"start_spread: {name} {folder} in {time.perf_counter() - t:.0f} s", flush=True)
            start.setdefault(mode, {})[seed] = seeded_arms.level_values(
                seeded_arms.start_dir(Path(args.work), mode, seed, seeds[0])
            )
    reproduced = {
        mode: all(same_row(start[mode][seeds[0]][lv], row) for lv, row in report["start"][mode].items())
        for mode in report["start"]
    }
    levels = list(report["start"][modes[0]])
    start_mean = seeded_arms.start_means(start, levels)
    arms: dict[str, Any] = {}
    for a in args.arm:
        mode = seeded_arms.arm_mode(a, args, modes, warmup)
        for lv in levels:
            values = {s: report["per_seed"][a[0]][str(s)][lv]["avg"] for s in seeds}
            arms.setdefault(a[0], {"mode": mode, "levels": {}})["levels"][lv] = {
                "values": list(values.values()),
                "mean": sum(values.values()) / len(values),
                "minus_start": seeded_arms.minus_start(values, {s: v[lv]["avg"] for s, v in start[mode].items()}),
            }
    seeded_arms.plot(
        RESULTS / f"start_spread_{name}.png",
        report["mean_over_seeds"],
        start_mean[modes[0]],
        levels,
        f"{name}: arms over {len(seeds)} seeds; dashed: the start ({modes[0]} actions) over the same sampling seeds",
    )
    return {
        "report": name,
        "command": " ".join(shlex.quote(w) for w in shlex.split(report["command"])),
        "data": args.data,
        "seeds": seeds,
        "levels": levels,
        "start_first_seed_in_report": report["start"],
        "reproduced": reproduced,
        "start": {m: {str(s): v for s, v in by.items()} for m, by in start.items()},
        "start_mean": start_mean,
        "arms": arms,
    }


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def write(results: list[dict[str, Any]], cmd: str, wall_s: float) -> None:
    from milepost.evaluation.seeds import share_interval
    from milepost.io import atomic_write_text

    out = [
        "# Earlier reports' starts under every seed's sampling seed",
        "",
        f"Command: `{cmd}` ({wall_s / 60:.1f} min of wall time). Each start evaluated with the settings of the "
        "report's own recorded command (the `--data` folder rebuilt: same dataset seed and sizes), by "
        "`seeded_arms.run_job`, under each of the report's seeds. *Reproduced* says whether the first seed gives the "
        "report's start row exactly (avg@4, step accuracy, tasks); when it does not, the rows below are not "
        "comparable with the report. *Arm - start*: the paired difference by seed (same test tasks, same sampling "
        "seed), mean and 95% t-interval over seeds, in points of avg@4; `*` when the interval excludes 0.",
        "",
    ]
    for r in results:
        seeds = r["seeds"]
        out += [f"## {r['report']}", ""]
        out += [
            f"Reproduced ({mode} start, seed {seeds[0]}): **{'yes' if ok else 'no'}**."
            for mode, ok in r["reproduced"].items()
        ]
        out.append("")
        head = [
            "start / arm",
            "mode",
            *(f"{lv} avg@4 (%)" for lv in r["levels"]),
            *(f"{lv} - start" for lv in r["levels"]),
        ]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for mode, by in r["start_mean"].items():
            cells = [
                f"{share_interval(e['mean'], e['lo'], e['hi'])} ({', '.join(pct(v) for v in e['values'])})"
                for e in by.values()
            ]
            out.append(
                f"| the start, seeds {', '.join(map(str, seeds))} | {mode} | "
                + " | ".join(cells)
                + " |"
                + " |" * len(by)
            )
        for arm, a in r["arms"].items():
            means = [f"{pct(e['mean'])} ({', '.join(pct(v) for v in e['values'])})" for e in a["levels"].values()]
            diffs = [
                "-" if (d := e["minus_start"]) is None else seeded_arms.signed_interval(d["mean"], d["lo"], d["hi"])
                for e in a["levels"].values()
            ]
            out.append(f"| {arm} | {a['mode']} | " + " | ".join(means + diffs) + " |")
        out += ["", f"![{r['report']}](start_spread_{r['report']}.png)", ""]
    atomic_write_text(RESULTS / "start_spread.md", "\n".join(out))
    atomic_write_text(
        RESULTS / "start_spread.json",
        json.dumps({"command": cmd, "wall_s": wall_s, "reports": results}, indent=1) + "\n",
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+", help="stems of seeded_arms reports in experiments/results/")
    p.add_argument("--work", required=True, help="folder of the start evaluations (one subfolder per report)")
    p.add_argument("--data", default=None, help="the dataset folder, when the report's is gone (rebuilt the same way)")
    args = p.parse_args()
    for name in args.reports:
        if not (RESULTS / f"{name}.json").is_file():
            raise SystemExit(f"start_spread: no report experiments/results/{name}.json")
    t = time.perf_counter()
    results = [spread(name, Path(args.work), args.data) for name in args.reports]
    cmd = "python experiments/start_spread.py " + " ".join(shlex.quote(w) for w in sys.argv[1:])
    write(results, cmd, time.perf_counter() - t)
    print(f"start_spread: wrote {RESULTS / 'start_spread.md'}")


if __name__ == "__main__":
    main()
