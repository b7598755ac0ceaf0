"""experiments/sgo_rushhour.py: its episode starts, the two arms' demonstrations, and its report."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

import pytest

from milepost.agent.parsing import parse_answer
from milepost.envs.rushhour.solver import solve_board
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "checkpoints" / "rushhour-sft-dagger"  # the experiment's start and its tokenizer


@pytest.fixture(scope="module")
def backend():  # type: ignore[no-untyped-def]
    import torch

    from milepost.backends.hf import HFBackend

    torch.set_num_threads(1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        return HFBackend(CHECKPOINT)


def _args(**kw: object) -> argparse.Namespace:
    base = {"noise": 0.0, "n": 1, "eval_limit": 1, "eval_levels": "4-6"}
    return argparse.Namespace(**{**base, **kw})


def test_starts_are_states_of_the_cluster_with_their_own_goal_distance() -> None:
    from experiments.sgo_rushhour import start_tasks

    train = rush_tasks(7, 9, 2)
    starts = start_tasks(train, 5, 6, seed=0)
    assert 2 <= len(starts) <= 10
    clusters = {solve_board(t.payload["board"]).cluster_id for t in train}
    for task in starts:
        cluster = solve_board(task.payload["board"])
        assert cluster.cluster_id in clusters  # a state of a training puzzle's cluster, not a new puzzle
        assert 1 <= task.goal_distance <= 6  # solved again from the state, not the puzzle's distance
        assert task.goal_distance == int(cluster.steps[cluster.index(cluster.start)])
    assert len({t.goal_distance for t in starts}) > 1
    # Spread over 1..max_dist, not only the per_cluster nearest distances (a first version drew 1..k only).
    assert max(t.goal_distance for t in start_tasks(rush_tasks(7, 9, 6), 2, 12, seed=0)) > 4
    assert {t.payload["board"] for t in starts}.isdisjoint({t.payload["board"] for t in train})


def test_the_arms_are_taught_the_same_moves_in_their_own_format(backend) -> None:  # type: ignore[no-untyped-def]
    from experiments.sgo_rushhour import arm_config, arm_examples, start_tasks
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    base = load_config(TrainConfig, ROOT / "configs" / "tiny-cpu" / "rushhour_sft.yaml", [])
    starts = start_tasks(rush_tasks(7, 9, 2), 3, 12, seed=1)
    tok = backend.tokenizer
    out = {}
    for arm in ("plain", "sgo"):
        prompts, completions = arm_examples(arm_config(base, arm, _args(), seed=1), starts, backend, turns=3)
        texts = [tok.decode(c[:-1]) for c in completions]
        assert all(c[-1] == tok.eos_token_id for c in completions)
        out[arm] = (prompts, texts)
    (p_plain, t_plain), (p_sgo, t_sgo) = out["plain"], out["sgo"]
    assert len(t_plain) == len(t_sgo) > len(starts)  # several turns per start, one example per oracle turn
    assert [parse_answer(t).action for t in t_plain] == [parse_answer(t).action for t in t_sgo]
    assert all(t.startswith("PROGRESS: done=") for t in t_sgo)
    assert not any("PROGRESS" in t for t in t_plain)
    plan = tok.encode("Plan:", add_special_tokens=False)
    assert all(_contains(p, plan) for p in p_sgo) and not any(_contains(p, plan) for p in p_plain)
    # A later turn shows a ticked item: the checklist moves on within an episode.
    assert any("done=none" not in t for t in t_sgo)


def _contains(seq: list[int], part: list[int]) -> bool:
    return any(seq[i : i + len(part)] == part for i in range(len(seq) - len(part) + 1))


def _result(arm: str, seed: int, solved: int, stuck: int, spiral: int) -> dict:
    return {
        "arm": arm,
        "seed": seed,
        "levels": [
            {
                "tasks": 5,
                "samples": 2,
                "avg": {"value": solved / 10},
                "step_accuracy": 0.5,
                "failures": {"stuck_midway": stuck, "invalid_spiral": spiral},
            }
        ],
        "sgo": None,
        "train": {},
        "timing": {},
    }


def test_the_report_pairs_seeds_and_counts_stuck_shares(tmp_path: Path) -> None:
    import json

    from experiments.sgo_rushhour import gather

    for arm, seed, solved, stuck, spiral in (
        ("plain", 0, 4, 6, 0),
        ("plain", 1, 5, 3, 2),
        ("sgo", 0, 6, 1, 3),
        ("sgo", 1, 5, 0, 5),
        ("plain", 2, 10, 0, 0),  # no failures: no stuck share, left out of that paired difference
        ("sgo", 2, 9, 1, 0),
    ):
        run = tmp_path / f"{arm}-s{seed}"
        run.mkdir()
        (run / "result.json").write_text(json.dumps(_result(arm, seed, solved, stuck, spiral)))
    g = gather(tmp_path, [0, 1, 2])
    assert g["arms"]["plain"]["per_seed"][0]["stuck_share"] == 1.0
    assert g["arms"]["plain"]["per_seed"][1]["stuck_share"] == 0.6
    assert g["arms"]["plain"]["per_seed"][2]["stuck_share"] is None
    assert g["arms"]["sgo"]["success"][0] == pytest.approx((0.6 + 0.5 + 0.9) / 3)
    assert g["paired"]["success"]["per_seed"] == pytest.approx([0.2, 0.0, -0.1])
    assert g["paired"]["stuck_share"]["per_seed"] == pytest.approx([0.25 - 1.0, 0.0 - 0.6])
    assert g["arms"]["sgo"]["failures"] == {"stuck_midway": 2, "invalid_spiral": 8}


def test_the_report_names_the_start_s_own_sft_report() -> None:
    from experiments.sgo_rushhour import start_source

    assert start_source("checkpoints/rushhour-sft-dagger") == " (the Rush Hour SFT start of `sft_starts_dagger2.md`)"
    assert start_source("checkpoints/rushhour-sft-d4slide3") == " (the Rush Hour SFT start of `sft_starts_d4slide3.md`)"
    assert start_source("runs/elsewhere/model") == ""
    assert start_source("checkpoints/rushhour-sft-nothing-built") == ""
