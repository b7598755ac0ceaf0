"""Progress judging (``--judge-every``): how often does the judge agree with the environment's own progress?

One evaluation each (4x4 Sudoku S3-S5, the SGO agent, policy ``noisy-oracle:0.7:mixed`` so that some windows make
no progress, the judge asked every 2 turns): the shipped tiny model as the judge (``hf:checkpoints/sudoku4-sft``,
served in process), and two constant scripted judge clients as baselines (always ON-TRACK, always OFF-TRACK).
Agreement counts the checks where the judge answered and the environment's progress over the window is known
(distance to the goal shrank: on track; no change or a dead end: off track).

Usage (a few minutes)::

    python experiments/progress_judge.py --work /tmp/pj
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
from milepost.planning import FallbackPolicy, SGOAgent, SGOConfig
from milepost.planning.progress_judge import LLMProgressJudge
from milepost.types import Completion

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


class ConstantJudgeClient:
    """A judge ``Backend`` that always gives the same answer."""

    tokenizer = None

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.name = f"always-{answer.lower()}"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        return [Completion([], [], None, self.answer, "stop") for _ in requests]


def main() -> None:
    import torch

    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/progress_judge")
    p.add_argument("--limit", type=int, default=8, help="test tasks per level")
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--policy", default="noisy-oracle:0.7:mixed")
    args = p.parse_args()
    work = Path(args.work)
    data = work / "data"
    if not (data / "manifest.json").exists():
        splits, manifest = build_dataset(4, list(levels_for("sudoku", 4))[2:], 0, args.limit, seed=0, progress=False)
        write_dataset(data, splits, manifest, overwrite=True)
    from milepost.backends.hf import HFBackend

    judges: dict[str, Any] = {
        "shipped tiny model": HFBackend(ROOT / "checkpoints" / "sudoku4-sft"),
        "always ON-TRACK (scripted)": ConstantJudgeClient("ON-TRACK"),
        "always OFF-TRACK (scripted)": ConstantJudgeClient("OFF-TRACK"),
    }
    rows = []
    for i, (label, backend) in enumerate(judges.items()):
        spec = EvalSpec(
            env="sudoku",
            data=str(data),
            policy=args.policy,
            agent="sgo",
            judge=f"hf:{backend.name}",  # a label: the agent below carries the judge
            judge_every=args.every,
            n=2,
            ks=[1, 2],
            env_kwargs={"max_steps": 16},
        )
        agent = SGOAgent(
            config=SGOConfig(fallback=FallbackPolicy(max_replans=2), judge_every=args.every),
            progress_judge=LLMProgressJudge(backend),
        )
        start = time.perf_counter()
        out = work / f"judge{i}"
        result = evaluate(spec, out, progress=False, agent=agent)
        seconds = time.perf_counter() - start
        s = result["sgo"]["all"]
        counts = {k: v for k, v in s.items() if k.startswith("progress") or k in ("episodes", "replans")}
        rows.append({"judge": label, "seconds": round(seconds, 1), **counts})
    lines = [
        "# Progress judge agreement with the environment's progress",
        "",
        f"4x4 Sudoku S3-S5, {args.limit} test tasks per level x 2 samples, SGO agent, policy `{args.policy}`, judge "
        f"asked every {args.every} turns, H_max 16. Command: `python experiments/progress_judge.py`.",
        "",
        "| judge | episodes | checks | abstained | judged off track | replans from it | agrees / both known | "
        "agreement (%) | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        known, agree = r.get("progress_known", 0), r.get("progress_agree", 0)
        rate = f"{100 * agree / known:.1f}" if known else "-"
        lines.append(
            f"| {r['judge']} | {r['episodes']} | {r.get('progress_checks', 0)} | {r.get('progress_abstained', 0)} | "
            f"{r.get('progress_off_track', 0)} | {r.get('progress_replans', 0)} | {agree} / {known} | {rate} | "
            f"{r['seconds']} |"
        )
    lines += [
        "",
        "The constant judges bracket the agreement: always ON-TRACK agrees on the share of windows that made "
        "progress, always OFF-TRACK on the rest. The shipped tiny model was never trained to judge: it answers "
        "with Sudoku moves, never ON-TRACK / OFF-TRACK, so it abstains on every check (no agreement to report).",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "progress_judge.md").write_text("\n".join(lines), encoding="utf-8")
    (RESULTS / "progress_judge.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
