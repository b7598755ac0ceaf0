"""Knowledge probe (horizon paper, appendix D.2): accuracy per set of the scripted oracle, a random guesser and
the shipped tiny model (``checkpoints/sudoku4-sft``), on 9x9 puzzles (rules, definitions, identification) and
on 4x4 puzzles (rules, definitions: the grader, and so identification, is 9x9 only).

The oracle answers by recomputing each item with the rules engine and the grader, so its 100% is the check
that every generated answer key is right. Usage (about a minute)::

    python experiments/knowledge_probe.py --work /tmp/probe
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
POLICIES = {"scripted oracle": "oracle", "random guesser": "random", "shipped tiny model": "hf:checkpoints/sudoku4-sft"}


def milepost(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "milepost.cli.main", *argv], check=True, cwd=ROOT, capture_output=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/knowledge_probe")
    p.add_argument("--items", type=int, default=50, help="items per set")
    args = p.parse_args()
    work = Path(args.work)
    data = {
        "9x9": work / "sudoku9.jsonl",
        "4x4": work / "sudoku4",
    }
    if not data["9x9"].exists():
        milepost("data", "sudoku", "--size", "9", "--levels", "L4-L6", "--train", "0", "--test", "10",
                 "--out", str(work / "easy9"), "--overwrite", "--no-progress")  # fmt: skip
        milepost("data", "sudoku", "--size", "9", "--levels", "L5-L6", "--grade", "medium", "--train", "0",
                 "--test", "6", "--out", str(work / "medium9"), "--overwrite", "--no-progress")  # fmt: skip
        text = (work / "easy9" / "test.jsonl").read_text() + (work / "medium9" / "test.jsonl").read_text()
        data["9x9"].write_text(text)
    if not (data["4x4"] / "manifest.json").exists():
        milepost("data", "sudoku", "--size", "4", "--levels", "S1-S5", "--train", "0", "--test", "10",
                 "--out", str(data["4x4"]), "--overwrite", "--no-progress")  # fmt: skip
    rows = []
    for board, path in data.items():
        for label, policy in POLICIES.items():
            out = work / f"{board}-{policy.split(':')[0]}"
            start = time.perf_counter()
            milepost("eval", "--env", "sudoku", "--data", str(path), "--policy", policy, "--probe", "knowledge",
                     "--probe-items", str(args.items), "--max-new-tokens", "32", "--out", str(out))  # fmt: skip
            seconds = time.perf_counter() - start
            sets = json.loads((out / "metrics.json").read_text())["sets"]
            rows.append({"board": board, "policy": label, "sets": sets, "seconds": round(seconds, 1)})
    lines = [
        "# Knowledge probe (generated multiple-choice sets, 4 options: chance 25%)",
        "",
        f"Command: `python experiments/knowledge_probe.py` ({args.items} items per set at most; 9x9: 30 easy-tier "
        "puzzles of L4-L6 and 12 medium-tier of L5-L6; 4x4: 50 puzzles of S1-S5). Unparsed: answers without an "
        "option letter after ACTION (counted wrong).",
        "",
        "| board | policy | rules (%) | definitions (%) | identification (%) | unparsed | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sets = r["sets"]

        def acc(name: str, sets: dict = sets) -> str:
            return f"{100 * sets[name]['accuracy']:.1f} (n={sets[name]['items']})" if name in sets else "-"

        unparsed = sum(s["unparsed"] for s in sets.values())
        lines.append(
            f"| {r['board']} | {r['policy']} | {acc('rules')} | {acc('definitions')} | {acc('identification')} "
            f"| {unparsed} | {r['seconds']} |"
        )
    lines += [
        "",
        "The shipped model was trained only to play 4x4 Sudoku moves: it answers every question with a move, so "
        "it never names an option (0%, every answer unparsed). The probe separates that lack of knowledge-in-words "
        "from the ability to act, which the playing evaluations measure.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "knowledge_probe.md").write_text("\n".join(lines), encoding="utf-8")
    (RESULTS / "knowledge_probe.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
