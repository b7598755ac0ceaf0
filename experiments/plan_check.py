"""Are the plans a Rush Hour model writes correct? Issue 28's Rush Hour start, trained on plan targets.

``experiments.sft_starts --answer plan-back`` trains the REASON to be the rest of a step-optimal plan, from the goal
back to the move (``A right 3 < B up 2 < C up 1.``). The episode metrics grade only the ACTION. This script grades
the plan too: it reads the ``episodes.jsonl`` of one or more ``milepost eval`` runs, finds each turn's state in
its puzzle's solved cluster (the board text of the observation), replays the written plan in play order cell by
cell and reports, per run:

* parsed: the REASON is a plan (``V dir N`` slides joined by ``<``; ``>`` for ``plan-forward``);
* agrees: the plan's first slide is the ACTION's vehicle and direction (does the move follow the plan?);
* legal: every cell of the plan can be played; the share of the plan's cells played before the first illegal one;
* reaches the goal: legal, and A is at the exit at its end; step-optimal: also as long as the state's distance;
* the written length against the state's distance (cells);
* the ACTION's optimal share among turns whose plan is step-optimal, and among the others.

Each over every turn, over the first turn of each episode (the puzzle's start: the state nearest the training
distribution) and split by solved and failed episodes.

Usage (each RUN is ``LABEL=EVAL_FOLDER``; DATA the dataset the eval's tasks came from)::

    python -m experiments.plan_check plan-back=runs/sft-starts-plan-back/eval-3589 \\
        --data runs/sft-starts-1m-quiet/data --out experiments/results/rushhour_plan_check.md
"""

from __future__ import annotations

import argparse
import itertools
import re
from pathlib import Path
from typing import Any

from experiments.report_files import pct

_SLIDE = re.compile(r"([A-Z])\s+(up|down|left|right)\s+(\d+)")
_GROUPS = ("all turns", "first turns", "solved episodes", "failed episodes")
_BINS = ((1, 3), (4, 6), (7, 9), (10, 12), (13, 99))  # the state's distance, one-cell steps


def parse_plan(reason: str) -> list[Any] | None:
    """The slides of a written plan in play order (``Move`` with cells), or None when the REASON is not a plan.

    ``A right 3 < B up 2 < C up 1.`` is written from the goal back (read right to left); ``C up 1 > B up 2 > A
    right 3.`` in play order. A plan of one slide reads the same both ways."""
    from milepost.envs.rushhour.state import Move

    if "plan:" in reason:  # ``--answer legal-plan-back``: ``legal: A left, C up. plan: A right 3 < C up 1.``
        reason = reason.split("plan:", 1)[1]
    text = reason.strip().rstrip(".").strip()
    back, forward = " < " in text, " > " in text
    if back and forward:
        return None
    parts = text.split(" < " if back else " > ")
    out = []
    for part in parts:
        m = _SLIDE.fullmatch(part.strip())
        if m is None or int(m[3]) < 1:
            return None
        out.append(Move(m[1], m[2], int(m[3])))
    return out[::-1] if back else out


def parse_legal(reason: str) -> list[str] | None:
    """The moves a ``legal-plan-back`` REASON lists as legal (``legal: A left, C up. plan: ...`` -> ``["A left",
    "C up"]``), None when it lists none."""
    if not reason.startswith("legal:") or "plan:" not in reason:
        return None
    listed = reason.removeprefix("legal:").split("plan:", 1)[0].strip().rstrip(".").strip()
    return [m.strip() for m in listed.split(",") if m.strip()]


def grade_legal(state: Any, listed: list[str], action: Any) -> dict[str, Any]:
    """A listed set of legal moves against ``state``'s one-cell legal moves: exact, true / false positives, misses,
    and whether the ACTION is among the listed."""
    truth = {f"{m.vehicle} {m.direction}" for m in state.legal_actions()}
    said = set(listed)
    return {
        "exact": said == truth,
        "tp": len(said & truth),
        "fp": len(said - truth),
        "fn": len(truth - said),
        "action_listed": action is not None and f"{action.vehicle} {action.direction}" in said,
    }


def replay(state: Any, plan: list[Any]) -> tuple[list[Any], bool, bool]:
    """Play ``plan`` (slides in play order) on a copy of ``state`` one cell at a time, by the game's rules alone:
    the keys of the states reached in order (up to the first illegal cell), whether every cell was legal, and
    whether the last state is solved."""
    from milepost.envs.rushhour.state import Move

    s = state.clone()
    keys: list[Any] = []
    for m in plan:
        for _ in range(m.cells):
            cell = Move(m.vehicle, m.direction, 1)
            if s.why_illegal(cell) is not None:
                return keys, False, False
            s.apply(cell)
            keys.append(s.key)
    return keys, True, s.is_solved()


def grade_plan(cluster: Any, state: Any, plan: list[Any]) -> dict[str, Any]:
    """Replay ``plan`` (slides in play order) from ``state`` one cell at a time: cells legal before the first
    illegal one, whether all are legal, whether the end is solved, and whether it is step-optimal (every cell one
    step closer in ``cluster``'s one-cell distances)."""
    keys, legal, solves = replay(state, plan)
    cells = sum(m.cells for m in plan)
    if not legal:
        return {"cells": cells, "legal_cells": len(keys), "legal": False, "solves": False, "optimal": False}
    dist = [int(cluster.steps[cluster.index(k)]) for k in [state.key, *keys]]
    optimal = all(b == a - 1 for a, b in itertools.pairwise(dist))
    return {"cells": cells, "legal_cells": len(keys), "legal": True, "solves": solves, "optimal": solves and optimal}


def states_by_text(cluster: Any) -> dict[str, Any]:
    """Every state of a solved ``cluster`` by its board text (``render_text``): how a prompt's board is read back."""
    from milepost.envs.rushhour.state import RushHourState

    out = {}
    for key in cluster.states.tolist():
        s = RushHourState(cluster.layout, cluster.layout.unpack(key))
        out[s.render_text()] = s
    return out


def grade_turns(
    episodes: list[Any], clusters: dict[str, Any], boards: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One row per turn of ``episodes``: its group flags, the state's distance, the ACTION's correctness and the
    plan's grade (``plan`` None when the REASON is not a plan). ``clusters`` maps task ids to solved clusters;
    ``boards`` caches each task's ``states_by_text`` (pass one dict to grade several runs of the same tasks)."""
    from milepost.agent.parsing import parse_answer
    from milepost.envs.rushhour.rules import parse_move

    boards = {} if boards is None else boards
    rows = []
    for ep in episodes:
        cluster = clusters.get(ep.task_id)
        if cluster is None:
            raise SystemExit(f"plan_check: task {ep.task_id} is not in the dataset given with --data")
        if ep.task_id not in boards:
            boards[ep.task_id] = states_by_text(cluster)
        by_text = boards[ep.task_id]
        for turn in ep.turns:
            board = "\n".join(turn.observation.split("\n")[:8])
            state = by_text.get(board)
            if state is None:
                raise SystemExit(f"plan_check: {ep.task_id} turn {turn.index}: the observation's board is not a state")
            parsed = parse_answer(turn.text)
            plan = parse_plan(parsed.reason)
            action = parse_move(parsed.action)
            row: dict[str, Any] = {
                "first": turn.index == 0,
                "solved": bool(ep.success),
                "distance": int(cluster.steps[cluster.index(state.key)]),
                "action_optimal": turn.correct_actions > 0,
                "plan": None,
                "legal_list": None,
            }
            if (listed := parse_legal(parsed.reason)) is not None:
                row["legal_list"] = grade_legal(state, listed, action)
            if plan:
                grade = grade_plan(cluster, state, plan)
                grade["agrees"] = action is not None and (action.vehicle, action.direction) == (
                    plan[0].vehicle,
                    plan[0].direction,
                )
                row["plan"] = grade
            rows.append(row)
    return rows


def _share(xs: list[Any], cond: Any) -> float | None:
    return sum(1 for x in xs if cond(x)) / len(xs) if xs else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per group of turns: counts, the plan shares, the length error and the ACTION's optimal share by plan."""
    out: dict[str, Any] = {}
    pick = {
        "all turns": lambda r: True,
        "first turns": lambda r: r["first"],
        "solved episodes": lambda r: r["solved"],
        "failed episodes": lambda r: not r["solved"],
    }
    for name in _GROUPS:
        group = [r for r in rows if pick[name](r)]
        plans = [r for r in group if r["plan"]]
        n, k = len(group), len(plans)
        good = [r for r in plans if r["plan"]["optimal"]]
        bad = [r for r in group if not (r["plan"] and r["plan"]["optimal"])]
        out[name] = {
            "turns": n,
            "parsed": k / n if n else None,
            "agrees": _share(plans, lambda r: r["plan"]["agrees"]),
            "legal": _share(plans, lambda r: r["plan"]["legal"]),
            "legal_cells": (
                sum(r["plan"]["legal_cells"] for r in plans) / sum(r["plan"]["cells"] for r in plans) if plans else None
            ),
            "solves": _share(plans, lambda r: r["plan"]["solves"]),
            "optimal": _share(plans, lambda r: r["plan"]["optimal"]),
            "length_error": (sum(abs(r["plan"]["cells"] - r["distance"]) for r in plans) / k if k else None),
            "mean_distance": sum(r["distance"] for r in group) / n if n else None,
            "action_optimal": _share(group, lambda r: r["action_optimal"]),
            "action_optimal_plan_optimal": _share(good, lambda r: r["action_optimal"]),
            "action_optimal_plan_not": _share(bad, lambda r: r["action_optimal"]),
            "plan_optimal_turns": len(good),
        }
    lists = [r["legal_list"] for r in rows if r["legal_list"]]
    if lists:
        tp, fp, fn = (sum(g[key] for g in lists) for key in ("tp", "fp", "fn"))
        out["legal list"] = {
            "turns": len(lists),
            "exact": _share(lists, lambda g: g["exact"]),
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
            "action_listed": _share(lists, lambda g: g["action_listed"]),
        }
    return out


def by_distance(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per bin of the state's distance (``_BINS``): turns, the share with a step-optimal plan and the ACTION's
    optimal share: how far ahead the written plans stay right."""
    out = {}
    for lo, hi in _BINS:
        group = [r for r in rows if lo <= r["distance"] <= hi]
        n = len(group)
        out[f"{lo}-{hi}" if hi < 99 else f"{lo}+"] = {
            "turns": n,
            "plan_optimal": sum(1 for r in group if r["plan"] and r["plan"]["optimal"]) / n if n else None,
            "action_optimal": sum(1 for r in group if r["action_optimal"]) / n if n else None,
        }
    return out


def render(results: dict[str, dict[str, Any]]) -> str:
    from milepost.tables import md_rule

    head = (
        "| run | turns | mean distance | plan parsed % | first slide = ACTION % | plan legal % | cells legal % | "
        "reaches goal % | step-optimal % | length error (cells) | ACTION optimal % | ... if plan optimal % | "
        "... if not % |"
    )
    lines = []
    for group in _GROUPS:
        lines += [f"\n**{group}**\n", head, md_rule(head.count("|") - 1)]
        for name, res in results.items():
            g = res[group]
            err = "-" if g["length_error"] is None else f"{g['length_error']:.2f}"
            mean_d = "-" if g["mean_distance"] is None else f"{g['mean_distance']:.1f}"
            lines.append(
                f"| {name} | {g['turns']} | {mean_d} | {pct(g['parsed'])} | {pct(g['agrees'])} | "
                f"{pct(g['legal'])} | {pct(g['legal_cells'])} | {pct(g['solves'])} | {pct(g['optimal'])} | "
                f"{err} | {pct(g['action_optimal'])} | {pct(g['action_optimal_plan_optimal'])} | "
                f"{pct(g['action_optimal_plan_not'])} |"
            )
    bins = list(next(iter(results.values()))["by distance"])
    lines += [
        "\n**by the state's distance (one-cell steps): turns with a step-optimal plan % / ACTION optimal % (turns)**\n",
        "| run | " + " | ".join(bins) + " |",
        md_rule(len(bins) + 1),
    ]
    for name, res in results.items():
        cells = [
            f"{pct(b['plan_optimal'])} / {pct(b['action_optimal'])} ({b['turns']})" for b in res["by distance"].values()
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    listed = {name: res["legal list"] for name, res in results.items() if "legal list" in res}
    if listed:
        head = "| run | turns | list exact % | precision % | recall % | ACTION among the listed % |"
        lines += ["\n**the legal moves listed first (`--answer legal-plan-back`), every turn**\n", head, md_rule(6)]
        for name, g in listed.items():
            lines.append(
                f"| {name} | {g['turns']} | {pct(g['exact'])} | {pct(g['precision'])} | {pct(g['recall'])} | "
                f"{pct(g['action_listed'])} |"
            )
    return "\n".join(lines).lstrip("\n") + "\n"


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Per run, bars for every turn and for first turns: plan legal, reaches goal, step-optimal, ACTION optimal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [
        ("plan legal", "legal"),
        ("reaches goal", "solves"),
        ("step-optimal", "optimal"),
        ("ACTION optimal", "action_optimal"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(7 + 2.4 * len(results), 4), sharey=True)
    for ax, group in zip(axes, ("all turns", "first turns")):
        width = 0.8 / len(keys)
        for j, (label, key) in enumerate(keys):
            xs = [i + (j - (len(keys) - 1) / 2) * width for i in range(len(results))]
            ax.bar(xs, [100 * (r[group][key] or 0) for r in results.values()], width, label=label, color=f"C{j}")
        ax.set_xticks(range(len(results)))
        ax.set_xticklabels(list(results), fontsize=8)
        ax.set_title(group, fontsize=10)
        ax.set_ylim(0, 100)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("% of turns (plan shares: of turns with a parsed plan)")
    axes[0].legend(fontsize=7)
    ax = axes[2]
    for i, (name, res) in enumerate(results.items()):
        bins = res["by distance"]
        ax.plot(list(bins), [100 * (b["plan_optimal"] or 0) for b in bins.values()], "o-", color=f"C{i}", label=name)
    ax.set_xlabel("the state's distance (one-cell steps)")
    ax.set_title("turns with a step-optimal plan", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle("Rush Hour 4-6: are the written plans correct?", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="LABEL=EVAL_FOLDER (a milepost eval folder with episodes.jsonl)")
    p.add_argument("--data", required=True, help="the Rush Hour dataset folder the evaluations' tasks came from")
    p.add_argument("--out", default=None, help="also write the tables (Markdown), their JSON and a PNG beside them")
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    args = p.parse_args()
    runs = {}
    for spec in args.runs:
        label, sep, folder = spec.partition("=")
        if not sep or not label:
            p.error(f"{spec!r}: expected LABEL=EVAL_FOLDER")
        if not (Path(folder) / "episodes.jsonl").is_file():
            p.error(f"{folder}: no episodes.jsonl")
        runs[label] = Path(folder) / "episodes.jsonl"
    from milepost.datasets import load_tasks
    from milepost.envs.rushhour.solver import solve_board
    from milepost.training.sft import read_episodes

    tasks = {t.task_id: t for split in ("train", "test") for t in load_tasks(args.data, split)}
    results = {}
    clusters: dict[str, Any] = {}  # solved once for every run of the same tasks
    boards: dict[str, dict[str, Any]] = {}
    for label, path in runs.items():
        episodes = read_episodes([str(path)])
        for tid in {ep.task_id for ep in episodes} - set(clusters):
            if tid not in tasks:
                p.error(f"{path}: task {tid} is not in {args.data}")
            clusters[tid] = solve_board(tasks[tid].payload["board"])
        rows = grade_turns(episodes, clusters, boards)
        results[label] = {**summarise(rows), "by distance": by_distance(rows)}
    text = render(results)
    print(text, end="")
    if args.out:
        from experiments.report_files import write_report

        write_report(
            Path(args.out),
            title="Rush Hour: are the written plans correct?",
            module="experiments.plan_check",
            body=text,
            data=results,
            plot=lambda path: plot(results, path),
            reading=args.reading,
            alt="plans",
        )


if __name__ == "__main__":
    main()
