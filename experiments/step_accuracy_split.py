"""Where a policy's episode step accuracy comes from: solved against failed episodes (issue 28's Rush Hour target).

The project's step accuracy pools every attempted action of a level's episodes (``evaluation.metrics.step_counts``:
distance-reducing actions per attempted action, an unparsable answer one failed attempt). A solved 4-6 puzzle
takes a handful of turns; a failed one runs to H_max (30) or spirals to a dead end, so the pooled value weighs
failures by their length. This script reads the ``episodes.jsonl`` of one or more ``milepost eval`` runs and
splits the pooled value: its share of actions and its step accuracy in solved and in failed episodes, the
per-episode mean, and the accuracy of the first turns (the states nearest the puzzle's start), next to avg@n;
for Rush Hour also the share of moves that return to a board the episode had been on (``revisits``: loops).

Usage (each RUN is an eval folder; the label is the folder name)::

    python -m experiments.step_accuracy_split runs/rh-eval-t08 runs/rh-eval-t03 --out experiments/results/X.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from experiments.report_files import pct

FIRST_TURNS = 5


def split(episodes: list[Any], first_turns: int = FIRST_TURNS) -> dict[str, Any]:
    """Pooled, solved-only, failed-only and per-episode step accuracy of ``episodes`` (``types.Episode``)."""
    from milepost.evaluation.failures import is_infra_failure
    from milepost.evaluation.metrics import step_counts

    episodes = [ep for ep in episodes if not is_infra_failure(ep)]
    if not episodes:
        raise SystemExit("step_accuracy_split: no episodes (every one an infrastructure failure, or none played)")
    out: dict[str, Any] = {"episodes": len(episodes), "successes": sum(ep.success for ep in episodes)}
    for name, group in (("all", episodes), ("solved", [e for e in episodes if e.success])):
        out[name] = _pooled(group)
    out["failed"] = _pooled([e for e in episodes if not e.success])
    total = out["all"]["attempted"]
    for name in ("solved", "failed"):
        out[name]["action_share"] = out[name]["attempted"] / total if total else None
    per = [c / a for c, a in (step_counts(ep) for ep in episodes) if a]
    out["per_episode_mean"] = sum(per) / len(per) if per else None
    # the first turns of every episode: the states nearest the start, before any spiral
    correct = attempted = 0
    for ep in episodes:
        for turn in ep.turns[:first_turns]:
            correct += turn.correct_actions
            attempted += max(turn.n_requested, 1)
    out["first_turns"] = {"turns": first_turns, "accuracy": correct / attempted if attempted else None}
    out["success"] = out["successes"] / out["episodes"]
    out["mean_turns_solved"] = _mean([len(e.turns) for e in episodes if e.success])
    out["mean_turns_failed"] = _mean([len(e.turns) for e in episodes if not e.success])
    return out


def revisits(episodes: list[Any], run: dict[str, Any]) -> dict[str, Any] | None:
    """Accepted moves into a board the episode had already been on (a loop), found by replaying each episode's
    answers through the environment of ``run`` (an eval folder's ``run.json``); None for a game other than Rush
    Hour. The replay must end as the episode did, else the run's data or settings are not the ones played."""
    if run.get("env") != "rushhour":
        return None
    from milepost.datasets import load_tasks
    from milepost.envs.rushhour.env import RushHourEnv

    tasks = {t.task_id: t for t in load_tasks(run["data"], run.get("split", "test"))}
    moves = into_seen = 0
    for ep in episodes:
        if ep.task_id not in tasks:
            raise SystemExit(f"step_accuracy_split: task {ep.task_id} is not in {run['data']}")
        env = RushHourEnv(**run.get("env_kwargs", {}))
        env.reset(options={"task": tasks[ep.task_id]})
        seen = {env.state_key()}
        for turn in ep.turns:
            before = env.state_key()
            env.step(turn.text)
            after = env.state_key()
            if after != before:
                moves += 1
                into_seen += after in seen
                seen.add(after)
        if env.state.is_solved() != ep.success:
            raise SystemExit(
                f"step_accuracy_split: the replay of {ep.task_id} sample {ep.sample} does not end as played"
            )
    return {"moves": moves, "into_seen": into_seen, "share": into_seen / moves if moves else None}


def _mean(xs: list[int]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pooled(episodes: list[Any]) -> dict[str, Any]:
    from milepost.evaluation.metrics import step_counts

    correct = attempted = 0
    for ep in episodes:
        c, a = step_counts(ep)
        correct += c
        attempted += a
    return {"correct": correct, "attempted": attempted, "accuracy": correct / attempted if attempted else None}


def render(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| run | episodes | success % | step acc. pooled % | solved: share of actions % / acc. % | "
        f"failed: share of actions % / acc. % | per-episode mean % | first {FIRST_TURNS} turns % | "
        "turns solved / failed | moves into a seen board % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['episodes']} | {pct(r['success'])} | {pct(r['all']['accuracy'])} | "
            f"{pct(r['solved']['action_share'])} / {pct(r['solved']['accuracy'])} | "
            f"{pct(r['failed']['action_share'])} / {pct(r['failed']['accuracy'])} | "
            f"{pct(r['per_episode_mean'])} | {pct(r['first_turns']['accuracy'])} | "
            f"{r['mean_turns_solved'] or 0:.1f} / {r['mean_turns_failed'] or 0:.1f} | "
            f"{pct((r.get('revisits') or {}).get('share'))} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: dict[str, dict[str, Any]], path: Path) -> None:
    """Grouped bars per run: success, pooled step accuracy, and the accuracy in solved, failed and first turns."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [
        ("success", lambda r: r["success"]),
        ("step acc. pooled", lambda r: r["all"]["accuracy"]),
        ("solved episodes", lambda r: r["solved"]["accuracy"]),
        ("failed episodes", lambda r: r["failed"]["accuracy"]),
        (f"first {FIRST_TURNS} turns", lambda r: r["first_turns"]["accuracy"]),
    ]
    if any(r.get("revisits") for r in rows.values()):  # Rush Hour runs: the loops
        keys.append(("moves into a seen board", lambda r: (r.get("revisits") or {}).get("share")))
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(rows), 4))
    width = 0.8 / len(keys)
    for j, (label, get) in enumerate(keys):
        xs = [i + (j - (len(keys) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, [100 * (get(r) or 0) for r in rows.values()], width, label=label, color=f"C{j}")
    ax.axhline(80, color="grey", linestyle="--", linewidth=1, label="target 80%")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(list(rows), fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Where the episode step accuracy comes from", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="milepost eval folders (each with episodes.jsonl)")
    p.add_argument("--out", default=None, help="also write the table (Markdown), its JSON and a PNG beside it")
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    args = p.parse_args()
    from milepost.evaluation.failures import is_infra_failure
    from milepost.training.sft import read_episodes

    rows = {}
    for run in args.runs:
        f = Path(run) / "episodes.jsonl"
        if not f.is_file():
            raise SystemExit(f"step_accuracy_split: {run}: no episodes.jsonl")
        episodes = read_episodes([str(f)])
        rows[Path(run).name] = split(episodes)
        run_file = Path(run) / "run.json"
        if run_file.is_file():
            kept = [ep for ep in episodes if not is_infra_failure(ep)]
            rows[Path(run).name]["revisits"] = revisits(kept, json.loads(run_file.read_text(encoding="utf-8")))
    text = render(rows)
    print(text, end="")
    if args.out:
        from experiments.report_files import write_report

        write_report(
            Path(args.out),
            title="Episode step accuracy, split",
            module="experiments.step_accuracy_split",
            body=text,
            data=rows,
            plot=lambda path: plot(rows, path),
            reading=args.reading,
            alt="split",
        )


if __name__ == "__main__":
    main()
