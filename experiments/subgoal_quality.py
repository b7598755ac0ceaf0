"""Do a planner's subgoals track success? Subgoal-quality statistics of three plan sources on one evaluation each.

The same 4x4 Sudoku test tasks, the same policy (``noisy-oracle:P:mixed``: a scripted policy that errs, so that
both outcomes occur) and the SGO agent with three planners:

* ``programmatic``: the environment's boxes in the order the solver completes them;
* ``llm (scripted client)``: the LLM planner over a scripted planner client that always answers the same JSON
  plan, every box in index order plus one item no predicate checks (so it never completes: a plan with a
  useless step);
* ``llm (tiny model)``: the LLM planner over the shipped tiny model (``checkpoints/sudoku4-sft``, loaded with
  the hf backend), which was never trained to plan: its answers are rejected and the programmatic planner
  takes over (``plan: fallback``), which the statistics then describe.

For each run the report's subgoal-quality rows (Kendall tau-b between subgoals completed and success, AUROC of
the completion fraction for success) are collected into ``experiments/results/subgoal_quality.{md,json}``.

Usage (one CPU thread; about a minute on the shared 2-core machine)::

    python experiments/subgoal_quality.py --work /tmp/sq
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from milepost.backends.base import GenerationRequest
from milepost.datasets import write_dataset
from milepost.envs.levels import levels_for
from milepost.envs.sudoku.dataset import build_dataset
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.planning import LLMPlanner, SGOAgent
from milepost.types import Completion

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SCRIPTED_PLAN = json.dumps(
    {"subgoals": ["box 1", "box 2", "box 3", "box 4", {"description": "double-check every row and column"}]}
)


class ScriptedPlannerClient:
    """A planner ``Backend`` that answers every request with one fixed JSON plan."""

    name = "scripted-planner"
    tokenizer = None

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        return [Completion([], [], None, SCRIPTED_PLAN, "stop") for _ in requests]


def main() -> None:
    import torch

    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/subgoal_quality")
    p.add_argument("--policy", default="noisy-oracle:0.8:mixed")
    p.add_argument("--limit", type=int, default=10, help="test tasks per level (S2-S5)")
    p.add_argument("--n", type=int, default=4, help="samples per task")
    p.add_argument("--tiny-limit", type=int, default=3, help="test tasks per level for the tiny-model planner")
    p.add_argument("--max-steps", type=int, default=16)
    args = p.parse_args()
    work = Path(args.work)
    data = work / "data"
    if not (data / "manifest.json").exists():
        splits, manifest = build_dataset(4, list(levels_for("sudoku", 4))[1:], 0, args.limit, seed=0, progress=False)
        write_dataset(data, splits, manifest, overwrite=True)

    def spec(planner: str, limit: int) -> EvalSpec:
        return EvalSpec(
            env="sudoku",
            data=str(data),
            policy=args.policy,
            agent="sgo",
            planner=planner,
            n=args.n,
            ks=[1, args.n],
            limit=limit,
            env_kwargs={"max_steps": args.max_steps},
        )

    from milepost.backends.hf import HFBackend

    tiny = HFBackend(ROOT / "checkpoints" / "sudoku4-sft")
    runs: list[tuple[str, EvalSpec, Any]] = [
        ("programmatic", spec("programmatic", args.limit), None),
        (
            "llm (scripted client)",
            spec("llm:hf:scripted-planner", args.limit),
            SGOAgent(LLMPlanner(ScriptedPlannerClient(), retries=0)),
        ),
        (
            "llm (tiny model)",
            spec("llm:hf:checkpoints/sudoku4-sft", args.tiny_limit),
            SGOAgent(LLMPlanner(tiny, retries=1, max_new_tokens=96)),
        ),
    ]
    rows: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    for label, s, agent in runs:
        start = time.perf_counter()
        out = work / label.replace(" ", "_").replace("(", "").replace(")", "")
        result = evaluate(s, out, progress=False, agent=agent)
        timings[label] = time.perf_counter() - start
        for q in result["subgoal_quality"]:
            rows.append({"planner": label, **q})

    def num(x: float | None, pct: bool = False) -> str:
        return "-" if x is None else (f"{100 * x:.1f}" if pct else f"{x:.3f}")

    lines = [
        "# Subgoal quality of three plan sources (4x4 Sudoku, SGO agent)",
        "",
        f"Policy `{args.policy}`, levels S2-S5, {args.limit} test tasks per level x n = {args.n} "
        f"({args.tiny_limit} per level for the tiny-model planner), H_max = {args.max_steps}. "
        "Command: `python experiments/subgoal_quality.py`. Wall time per run: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
        + ".",
        "",
        "| planner | statistics over | episodes | successes | tau-b | AUROC | completion on successes (%) | "
        "on failures (%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            r["planner"],
            r["source"],
            str(r["episodes"]),
            str(r["successes"]),
            num(r["tau_b"]),
            num(r["auroc"]),
            num(r["completion_success"], True),
            num(r["completion_failure"], True),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Reading: a plan whose items are the environment's own subgoals is complete on every success, so its "
        "completion separates successes from failures (AUROC near 1) by construction; what the statistics test "
        "is a planner whose items are not that: the scripted client's unchecked item keeps its plans at 4/5 at "
        "best, and a planner whose items do not track success would give AUROC near 0.5 and tau near 0. "
        "The SGO paper reports AUROC 0.84 and tau 0.46 for its LLM-generated subgoals on WebArena-Lite.",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "subgoal_quality.md").write_text("\n".join(lines), encoding="utf-8")
    (RESULTS / "subgoal_quality.json").write_text(json.dumps({"rows": rows, "timings_s": timings}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
