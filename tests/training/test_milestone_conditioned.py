"""The milestone-conditioned policy (``agent.agent_kind: subgoal``, ``rl.reward: subgoal``): per-turn rewards
and segment ends on scripted episodes of both environments (hand-computed), the target in the prompt, the
trainer's use of both, the eval path, and the refused config combinations.

The scripted episodes are played through the real loop and environments; the answers come from
``CannedBackend`` (a labelled test double that returns fixed texts and records the prompts it was sent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.config import load_config
from milepost.envs.rushhour import RushHourEnv
from milepost.envs.rushhour import make_task as rush_task
from milepost.envs.sudoku import SudokuEnv
from milepost.envs.sudoku import make_task as sudoku_task
from milepost.errors import InputError
from milepost.planning.conditioned import SubgoalConditionedAgent
from milepost.rewards.milestone import RewardContext, segment_ends, subgoal_reward
from milepost.training.config import TrainConfig
from milepost.training.returns import discounted_returns
from milepost.types import Episode
from tests.planning.fakes import CannedBackend

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "tiny-cpu"

# 4x4 solution; the puzzle leaves r1c1 and r2c2 (box 1), r1c3 (box 2) and r4c1 (box 3) empty. The programmatic
# plan takes the one-cell boxes first: [box 2, box 3, box 1].
SOLUTION = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
EMPTY = [(1, 1), (2, 2), (1, 3), (4, 1)]
BOX2 = "Target subgoal: Complete box 2 (rows 1-2, columns 3-4)."
BOX3 = "Target subgoal: Complete box 3 (rows 3-4, columns 1-2)."
# Rush Hour: A in row 3 behind two vertical blockers, B (column 3, rows 2-3) and C (column 5, rows 3-4).
# The plan: [clear B, clear C, drive A out].
RUSH_BOARD = "oooooo" + "ooBooo" + "AABoCo" + "ooooCo" + "oooooo" + "oooooo"


def answer(action: str) -> str:
    return f"REASON: scripted. ACTION: {action}"


def play(env: Any, task: Any, texts: list[str]) -> tuple[Episode, CannedBackend]:
    backend = CannedBackend(texts)
    settings = AgentSettings(memory_k=0)
    episodes = run_episodes(
        lambda: env,
        [Job(task)],
        BackendPolicy(backend, settings),  # type: ignore[arg-type]
        settings,
        progress=False,
        agent=SubgoalConditionedAgent(),
    )
    return episodes[0], backend


def sudoku_episode() -> tuple[Episode, CannedBackend]:
    puzzle = list(SOLUTION)
    for r, c in EMPTY:
        puzzle[(r - 1) * 4 + c - 1] = 0
    task = sudoku_task(puzzle, SOLUTION, level="S1")
    texts = [
        answer("value(1, r1c1)"),  # box 1, not complete
        answer("value(4, r2c2)"),  # completes box 1: a subgoal, but not the target (box 2)
        "no action at all",  # format error
        answer("value(3, r1c3)"),  # completes box 2: the target
        answer("value(4, r4c1)"),  # completes box 3, the next target, and solves
    ]
    return play(SudokuEnv(size=4, max_steps=16), task, texts)


def rush_episode() -> tuple[Episode, CannedBackend]:
    texts = [
        answer("move(C, down)"),  # clears C: a subgoal, not the target (B)
        answer("move(B, up)"),  # clears B: the target
        "garbage",  # format error; the target is now A (C is done already)
        *[answer("move(A, right)")] * 4,  # A reaches columns 5-6 on the fourth move
    ]
    return play(RushHourEnv(), rush_task(RUSH_BOARD), texts)


def test_sudoku_rewards_and_segments_by_hand() -> None:
    ep, _ = sudoku_episode()
    record = ep.meta["target"]
    assert record["plan"][:2] == [
        BOX2.removeprefix("Target subgoal: ")[:-1],
        BOX3.removeprefix("Target subgoal: ")[:-1],
    ]
    assert record["refs"] == [1, 2, 0]  # env subgoals: box 1 = 0, box 2 = 1, box 3 = 2
    assert ep.success and len(ep.turns) == 5
    assert [t.new_subgoals for t in ep.turns] == [[], [0], [], [1], [2]]
    assert record["targets"] == [0, 0, 0, 0, 1]
    ctx = RewardContext(max_steps=16)
    # Box 1 (turn 1) was not the target: no reward, no cut. Box 2 (turn 3) and box 3 (turn 4) were.
    assert subgoal_reward(ep, ctx).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    cuts = segment_ends(ep, "subgoal", False)
    assert cuts.tolist() == [False, False, False, True, True]
    # gamma = 0.5: G4 = 1; G3 = 1 (its segment ends at turn 3); G2 = 0.5, G1 = 0.25, G0 = 0.125.
    returns = discounted_returns(subgoal_reward(ep, ctx), 0.5, cuts)
    assert returns.tolist() == [0.125, 0.25, 0.5, 1.0, 1.0]
    # Subgoal decomposition would cut at every completed subgoal, turn 1 included.
    assert segment_ends(ep, "milestone", True).tolist() == [False, True, False, True, True]
    assert segment_ends(ep, "outcome", False).tolist() == [False] * 5


def test_rush_hour_rewards_and_segments_by_hand() -> None:
    ep, _ = rush_episode()
    record = ep.meta["target"]
    assert [d.split(" out")[0] for d in record["plan"]] == [
        "Clear vehicle B",
        "Clear vehicle C",
        "Drive the red car A to the exit",
    ]
    assert ep.success and len(ep.turns) == 7
    assert record["targets"] == [0, 0, 2, 2, 2, 2, 2]
    rewards = subgoal_reward(ep, RewardContext(max_steps=30))
    assert rewards.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    cuts = segment_ends(ep, "subgoal", False)
    assert cuts.tolist() == [False, True, False, False, False, False, True]
    returns = discounted_returns(rewards, 0.5, cuts)
    assert returns.tolist() == [0.5, 1.0, 0.0625, 0.125, 0.25, 0.5, 1.0]


def test_the_prompt_carries_the_target_and_moves_on_when_it_is_reached() -> None:
    _, backend = sudoku_episode()
    systems = [req.messages[0]["content"] for req in backend.requests]
    assert len(systems) == 5
    # Turns 0-3 name box 2 (box 1, completed on turn 1, never becomes the target); turn 4 names box 3.
    assert all(BOX2 in s and BOX3 not in s for s in systems[:4])
    assert BOX3 in systems[4] and BOX2 not in systems[4]
    assert not any("box 1" in s for s in systems)
    _, backend = rush_episode()
    systems = [req.messages[0]["content"] for req in backend.requests]
    targets = [s.split("Target subgoal: ")[1].split(".")[0] for s in systems]
    assert targets[:2] == ["Clear vehicle B out of the exit row (row 3)"] * 2
    assert targets[2:] == ["Drive the red car A to the exit"] * 5


def test_an_episode_without_targets_is_refused() -> None:
    ep, _ = sudoku_episode()
    ep.meta.pop("target")
    with pytest.raises(ValueError, match=r"agent\.agent_kind subgoal"):
        subgoal_reward(ep, RewardContext(max_steps=16))
    # Other rewards do not read it.
    assert segment_ends(ep, "outcome", True).tolist() == [False, True, False, True, True]


def test_the_trainer_uses_the_subgoal_rewards_and_segments() -> None:
    """``batch_advantages`` (what ``train_rl`` feeds the loss) of the two scripted episodes, unnormalised and
    alpha = 0, are exactly the hand-computed segment returns."""
    from milepost.training.trainer import batch_advantages, episode_rewards

    cfg = load_config(
        TrainConfig,
        CONFIGS / "sudoku4_milestone_conditioned.yaml",
        ["rl.gamma=0.5", "rl.alpha=0.0", "rl.normalisation=none"],
    )
    sudoku, rush = sudoku_episode()[0], rush_episode()[0]
    rewards, steps, cuts = episode_rewards(sudoku, cfg)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0] and cuts.tolist() == [False, False, False, True, True]
    assert steps.tolist() == [0.0, 0.0, -1.0, 0.0, 0.0]  # the format error
    adv = batch_advantages([sudoku, rush], cfg)
    assert adv[0].tolist() == [0.125, 0.25, 0.5, 1.0, 1.0]
    assert adv[1].tolist() == [0.5, 1.0, 0.0625, 0.125, 0.25, 0.5, 1.0]
    # The same episodes under the outcome reward: one return over the whole episode.
    over = ["rl.gamma=0.5", "rl.alpha=0.0", "rl.normalisation=none"]
    outcome = load_config(TrainConfig, CONFIGS / "sudoku4_atomic.yaml", over)
    assert batch_advantages([sudoku], outcome)[0].tolist() == [0.0625, 0.125, 0.25, 0.5, 1.0]


def test_train_rl_plays_with_the_target_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One iteration of ``train_rl`` from the shipped checkpoint: every episode it plays carries the target record,
    every prompt that reaches the loss names a target, and the advantages are the subgoal ones."""
    import milepost.training.trainer as trainer
    from milepost.backends.hf import load_model
    from milepost.datasets import write_dataset
    from milepost.envs.sudoku.generator import generate_easy

    torch.set_num_threads(1)
    tasks = {
        split: [
            sudoku_task(*generate_easy(4, 5, 7, i + 50 * (split == "test")), level="S2", split=split, index=i)
            for i in range(3)
        ]
        for split in ("train", "test")
    }
    data = write_dataset(tmp_path / "data", tasks, {"seed": 7})
    over = [
        f"data={data}",
        "levels=S2",
        "rl.iterations=1",
        "rl.tasks_per_iter=2",
        "rl.samples_per_task=1",
        "env.max_steps=4",
        "threads=1",
    ]
    cfg = load_config(TrainConfig, CONFIGS / "sudoku4_milestone_conditioned.yaml", over)
    seen: dict[str, Any] = {}
    real_turn_samples = trainer.turn_samples

    def spy(episodes: list[Episode], cfg: TrainConfig, adv: Any = None, iteration: int = 0) -> Any:
        seen["episodes"] = episodes
        seen["samples"] = real_turn_samples(episodes, cfg, adv, iteration)
        return seen["samples"]

    monkeypatch.setattr(trainer, "turn_samples", spy)
    final = trainer.train_rl(cfg, tmp_path / "run", progress=False)
    episodes, samples = seen["episodes"], seen["samples"]
    assert len(episodes) == 2 and all(len(ep.meta["target"]["reached"]) == len(ep.turns) for ep in episodes)
    _, tokenizer = load_model(final, torch.device("cpu"), torch.float32)
    prompts = [tokenizer.decode(s.prompt_ids) for s in samples]
    assert prompts and all("Target subgoal:" in p for p in prompts)
    expected = [a for ep, adv in zip(episodes, trainer.batch_advantages(episodes, cfg)) for a in adv.tolist()]
    assert [s.advantage for s in samples] == pytest.approx(expected)
    row = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["iteration"] == 1 and "rollout/success" in row


def test_eval_with_the_subgoal_agent(tmp_path: Path) -> None:
    """``milepost eval --agent subgoal``: the oracle's episodes carry the target record."""
    from milepost.cli.main import main
    from milepost.datasets import write_dataset
    from milepost.envs.sudoku.generator import generate_easy
    from milepost.io import read_jsonl

    tasks = {
        split: [sudoku_task(*generate_easy(4, 6, 3, i + 10 * k), level="S2", split=split, index=i) for i in range(2)]
        for k, split in enumerate(("train", "test"))
    }
    data = write_dataset(tmp_path / "data", tasks, {"seed": 3})
    out = tmp_path / "eval"
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "oracle", "--agent", "subgoal"]
    assert main([*argv, "--n", "1", "--k", "1", "--max-steps", "16", "--out", str(out)]) == 0
    rows = list(read_jsonl(out / "episodes.jsonl"))
    assert len(rows) == 2 and all(r["success"] for r in rows)
    for r in rows:
        record = r["meta"]["target"]
        # Solving reaches every subgoal, so the last turn always reached its target.
        assert len(record["reached"]) == len(r["turns"]) and record["reached"][-1]


def test_the_configs() -> None:
    sudoku = load_config(TrainConfig, CONFIGS / "sudoku4_milestone_conditioned.yaml")
    rush = load_config(TrainConfig, CONFIGS / "rushhour_milestone_conditioned.yaml")
    for cfg in (sudoku, rush):
        assert (cfg.rl.reward, cfg.agent.agent_kind) == ("subgoal", "subgoal")
        assert not cfg.rl.subgoal_decomposition and not cfg.mira.enabled
    assert (sudoku.model, sudoku.env.name, sudoku.env.size) == ("checkpoints/sudoku4-sft", "sudoku", 4)
    # Rush Hour starts where the other Rush Hour arms start, with their budget.
    arm = load_config(TrainConfig, CONFIGS / "rushhour_subgoal.yaml")
    assert (rush.model, rush.data, rush.levels, rush.env) == (arm.model, arm.data, arm.levels, arm.env)
    assert (rush.rl.iterations, rush.rl.tasks_per_iter, rush.rl.samples_per_task) == (
        arm.rl.iterations,
        arm.rl.tasks_per_iter,
        arm.rl.samples_per_task,
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rl.reward=subgoal"], r"rl.reward subgoal: .*set agent.agent_kind subgoal"),
        (["rl.reward=subgoal", "agent.agent_kind=sgo"], r"set agent.agent_kind subgoal"),
        (["rl.reward=subgoal", "agent.agent_kind=subgoal", "rl.subgoal_decomposition=true"], r"rl.subgoal_decomp"),
        (["rl.reward=subgoal", "agent.agent_kind=subgoal", "mira.enabled=true", "mira.estimator=mc"], r"mira.enabled"),
        (["rl.reward=subgoal", "agent.agent_kind=subgoal", "mira.enabled=true"], r"mira.enabled"),
        (["agent.agent_kind=target"], r"agent.agent_kind: 'target' is not one of plain, sgo, subgoal"),
    ],
)
def test_refused_combinations(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_config(TrainConfig, None, overrides)


def test_refusal_is_one_line_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from milepost.cli.main import main

    config = CONFIGS / "sudoku4_milestone_conditioned.yaml"
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--set", "agent.agent_kind=plain", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("milepost: error: ") and err.count("\n") == 1 and "agent.agent_kind subgoal" in err
    assert not out.exists()
    # The subgoal agent with the outcome reward is allowed (e.g. to train on outcomes with the target prompt).
    cfg = load_config(TrainConfig, config, ["rl.reward=outcome"])
    assert cfg.agent.agent_kind == "subgoal"
