"""experiments/sft_starts.py: its step-level Rush Hour examples, its shared-prefix loss and the arms' start check."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
from pathlib import Path

import pytest

from experiments.plan_check import states_by_text
from milepost.envs.rushhour.rules import parse_move
from milepost.envs.rushhour.solver import solve_board
from milepost.envs.rushhour.state import RushHourState
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "checkpoints" / "sudoku4-sft"  # any small model with the project's tokenizer will do


@pytest.fixture(scope="module")
def backend():  # type: ignore[no-untyped-def]
    import torch

    from milepost.backends.hf import HFBackend

    torch.set_num_threads(1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        return HFBackend(CHECKPOINT)


def _prompts(backend):  # type: ignore[no-untyped-def]
    from experiments.sft_starts import PromptMaker
    from milepost.envs.rushhour.env import RushHourEnv

    env = RushHourEnv()
    env.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    return PromptMaker(backend, env.goal_text())


def test_sampled_states_and_their_targets_are_optimal_moves(backend) -> None:  # type: ignore[no-untyped-def]
    from experiments.sft_starts import make_examples, optimal_moves, sample_states

    task = rush_tasks(4, 6, 1)[0]
    cluster = solve_board(task.payload["board"])
    keys = sample_states(cluster, 40, 6, random.Random(0))
    dists = [int(cluster.steps[cluster.index(k)]) for k in keys]
    assert keys and all(1 <= d <= 6 for d in dists) and len(set(dists)) > 1
    for key in keys:
        state = RushHourState(cluster.layout, cluster.layout.unpack(key))
        here = int(cluster.steps[cluster.index(key)])
        moves = optimal_moves(cluster, state)
        assert moves  # a state at distance >= 1 has an optimal move
        for move in state.legal_actions():
            child = state.clone()
            child.apply(move)
            assert (move in moves) == (int(cluster.steps[cluster.index(child.key)]) == here - 1)

    tok = backend.tokenizer
    prompts, completions = make_examples(
        [task], _prompts(backend), tok, per_cluster=12, max_dist=8, label="random", feedback=0.5, seed=0
    )
    assert len(prompts) == len(completions) > 5
    rejected = 0
    by_text = states_by_text(cluster)
    for p, c in zip(prompts, completions):
        assert c[-1] == tok.eos_token_id
        text = tok.decode(c[:-1])
        assert text.startswith("REASON: ") and " ACTION: move(" in text
        board_text = tok.decode(p)
        rejected += "Last answer rejected:" in board_text
        # the target is an optimal move of the state the prompt shows
        move = parse_move(text.split("ACTION: ")[1])
        assert move is not None
        shown = board_text.split("Current observation:\n")[1].split("<|end|>")[0].split("\nLast answer")[0]
        assert move in optimal_moves(cluster, by_text[shown])
    assert 0 < rejected < len(prompts)


def test_slide_examples_target_slides_one_move_closer_under_the_slide_goal(backend) -> None:  # type: ignore[no-untyped-def]
    from experiments.sft_starts import PromptMaker, make_examples, optimal_moves, sample_states
    from milepost.envs.rushhour.env import RushHourEnv

    task = rush_tasks(7, 9, 1)[0]
    cluster = solve_board(task.payload["board"])
    keys = sample_states(cluster, 30, 5, random.Random(0), "moves")
    dists = [int(cluster.moves[cluster.index(k)]) for k in keys]
    assert keys and all(1 <= d <= 5 for d in dists) and len(set(dists)) > 1
    longer = 0
    for key in keys:
        state = RushHourState(cluster.layout, cluster.layout.unpack(key))
        here = int(cluster.moves[cluster.index(key)])
        moves = optimal_moves(cluster, state, "moves")
        assert moves
        for move in state.legal_actions(slides=True):
            child = state.clone()
            child.apply(move)
            assert (move in moves) == (int(cluster.moves[cluster.index(child.key)]) == here - 1)
        longer += any(m.cells > 1 for m in moves)
    assert longer  # some optimal moves are slides of two or more cells

    env = RushHourEnv(action_mode="slide")
    env.reset(options={"task": task})
    assert "slides X by N cells" in env.goal_text()
    tok = backend.tokenizer
    prompts, completions = make_examples(
        [task],
        PromptMaker(backend, env.goal_text()),
        tok,
        per_cluster=20,
        max_dist=6,
        label="random",
        feedback=0.0,
        seed=0,
        metric="moves",
    )
    by_text = states_by_text(cluster)
    cells = []
    for p, c in zip(prompts, completions):
        shown = tok.decode(p)
        assert "slides X by N cells" in shown
        move = parse_move(tok.decode(c[:-1]).split("ACTION: ")[1])
        assert move is not None
        state = by_text[shown.split("Current observation:\n")[1].split("<|end|>")[0]]
        assert move in optimal_moves(cluster, state, "moves")
        cells.append(move.cells)
    assert max(cells) > 1  # the answers carry slide lengths: move(X, dir, N)


@pytest.mark.parametrize("answer", ["plan-back", "plan-forward", "legal-plan-back"])
def test_a_plan_answer_is_a_step_optimal_solution_from_the_target_move(backend, answer: str) -> None:  # type: ignore[no-untyped-def]
    from experiments.sft_starts import make_examples, optimal_moves

    task = rush_tasks(4, 6, 1)[0]
    cluster = solve_board(task.payload["board"])
    by_text = states_by_text(cluster)
    tok = backend.tokenizer
    prompts, completions = make_examples(
        [task],
        _prompts(backend),
        tok,
        per_cluster=12,
        max_dist=10,
        label="random",
        feedback=0.0,
        seed=0,
        answer=answer,
    )
    merged = 0
    for p, c in zip(prompts, completions):
        text = tok.decode(c[:-1])
        reason, action = text.removeprefix("REASON: ").split(" ACTION: ")
        state = by_text[tok.decode(p).split("Current observation:\n")[1].split("<|end|>")[0]]
        move = parse_move(action)
        assert move in optimal_moves(cluster, state)
        if answer == "legal-plan-back":  # first every legal one-cell move, in tie-break order, then the plan
            legal, reason = reason.removeprefix("legal: ").split(". plan: ")
            assert legal.split(", ") == [f"{m.vehicle} {m.direction}" for m in state.legal_actions()]
            assert legal and all(m.cells == 1 for m in state.legal_actions())
        back = answer != "plan-forward"
        slides = [part.split(" ") for part in reason.removesuffix(".").split(" < " if back else " > ")]
        if back:
            slides.reverse()
        assert (slides[0][0], slides[0][1]) == (move.vehicle, move.direction)  # the plan starts with the move
        assert slides[-1][:2] == ["A", "right"]  # and ends with A driving out
        # Replaying the slides cell by cell, each cell one step closer, reaches the goal: a step-optimal plan.
        s = state.clone()
        for vehicle, direction, cells in slides:
            merged += int(cells) > 1
            for _ in range(int(cells)):
                here = int(cluster.steps[cluster.index(s.key)])
                one = parse_move(f"move({vehicle}, {direction})")
                assert one is not None and s.why_illegal(one) is None
                s.apply(one)
                assert int(cluster.steps[cluster.index(s.key)]) == here - 1
        assert int(cluster.steps[cluster.index(s.key)]) == 0
        # consecutive slides are of different vehicles or directions (merged)
        assert all(a[:2] != b[:2] for a, b in itertools.pairwise(slides))
    assert merged  # some slides are longer than one cell


def test_a_plan_answer_needs_one_cell_moves(backend) -> None:  # type: ignore[no-untyped-def]
    from experiments.sft_starts import make_examples

    with pytest.raises(ValueError, match="one-cell"):
        make_examples(
            rush_tasks(4, 6, 1),
            _prompts(backend),
            backend.tokenizer,
            per_cluster=2,
            max_dist=4,
            label="random",
            feedback=0.0,
            seed=0,
            metric="moves",
            answer="plan-back",
        )


def test_batches_hold_one_mode_and_mix_the_modes_by_size() -> None:
    import numpy as np

    from experiments.sft_starts import batch_order

    batches = batch_order({"atomic": 100, "slide": 50}, 10, 40, np.random.default_rng(0))
    assert len(batches) == 40
    first_pass = batches[:15]  # 10 atomic + 5 slide batches: every example once
    for mode, n in (("atomic", 100), ("slide", 50)):
        idx = np.concatenate([i for m, i in first_pass if m == mode])
        assert sorted(idx.tolist()) == list(range(n))
    assert all(len(i) == 10 for _, i in batches)
    modes = [m for m, _ in first_pass]
    assert modes != sorted(modes)  # shuffled together, not one mode after the other
    with pytest.raises(SystemExit, match="fewer examples"):
        batch_order({"atomic": 5}, 10, 3, np.random.default_rng(0))


def test_hand_built_prompts_are_the_agent_loops(backend) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from experiments.sft_starts import CONFIGS, check_prompts
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    cfg = load_config(TrainConfig, CONFIGS / "rushhour_sft.yaml", ["levels=4-6"])
    check_prompts(cfg, backend, _prompts(backend), rush_tasks(4, 6, 3))  # raises SystemExit on a difference

    from experiments.sft_starts import PromptMaker, mode_config
    from milepost.envs.rushhour.env import RushHourEnv

    slide = mode_config(cfg, "slide")
    assert (slide.env.action_mode, slide.env.max_steps) == ("slide", 20)
    env = RushHourEnv(action_mode="slide")
    env.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    check_prompts(slide, backend, PromptMaker(backend, env.goal_text()), rush_tasks(4, 6, 3))
    with pytest.raises(SystemExit, match="differs"):  # atomic prompts are not the slide agent's
        check_prompts(slide, backend, _prompts(backend), rush_tasks(4, 6, 1))

    # The legal renderer: the board then its legal moves, in the hand-built prompts as in the agent loop's.
    legal = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, render="legal"))
    maker = PromptMaker(backend, _prompts(backend).goal, "legal")
    check_prompts(legal, backend, maker, rush_tasks(4, 6, 3))
    with pytest.raises(SystemExit, match="differs"):  # grid prompts are not the legal renderer's
        check_prompts(legal, backend, _prompts(backend), rush_tasks(4, 6, 1))
    with pytest.raises(SystemExit, match="differs"):
        check_prompts(cfg, backend, maker, rush_tasks(4, 6, 1))


def test_shared_prefix_loss_equals_the_plain_loss_and_gradient(backend) -> None:  # type: ignore[no-untyped-def]
    import torch

    from experiments.sft_starts import shared_prefix_loss
    from milepost.backends.logprobs import sequence_logprobs
    from milepost.training.losses import sft_loss

    tok, model = backend.tokenizer, backend.model
    pm = _prompts(backend)
    cluster = solve_board(rush_tasks(4, 6, 1)[0].payload["board"])
    states = [RushHourState(cluster.layout, cluster.layout.unpack(int(k))) for k in cluster.states[:3]]
    prompts = [pm.ids(states[0]), pm.ids(states[1], "B cannot move up"), pm.ids(states[2])]
    answers = ["REASON: A drives to the exit. ACTION: move(A, right)", "REASON: x. ACTION: move(B, up)", "ok"]
    completions = [[*tok.encode(a, add_special_tokens=False), tok.eos_token_id] for a in answers]
    user = tok.convert_tokens_to_ids("<|user|>")
    prefix = prompts[0][: prompts[0].index(user) + 1]
    assert all(p[: len(prefix)] == prefix for p in prompts) and len(prefix) > 50

    model.zero_grad()
    a = shared_prefix_loss(model, prefix, [p[len(prefix) :] for p in prompts], completions, tok.pad_token_id)
    a.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logp = sequence_logprobs(model, prompts, completions, 1.0, pad_id=tok.pad_token_id)
    lengths = torch.tensor([len(c) for c in completions])
    b = sft_loss(logp.float(), torch.arange(logp.shape[1]).unsqueeze(0) < lengths.unsqueeze(1))
    b.backward()
    assert abs(a.item() - b.item()) < 1e-4
    assert any(g.abs().max() > 1e-3 for g in grads)
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-5)
    model.zero_grad()


def test_the_arms_refuse_a_start_trained_on_their_test_clusters(tmp_path: Path) -> None:
    from experiments.rushhour_arms import check_start_disjoint
    from milepost.datasets import write_dataset

    tasks = rush_tasks(4, 6, 3)
    for t in tasks[:2]:
        t.split = "train"
    tasks[2].split = "test"
    data = tmp_path / "data"
    write_dataset(data, {"train": tasks[:2], "test": tasks[2:]}, {"env": "rushhour", "size": 6}, overwrite=True)
    start = tmp_path / "start"
    start.mkdir()
    check_start_disjoint(start, data)  # no list: nothing to check (says so)
    (start / "milepost_train_clusters.json").write_text(json.dumps({"train_cluster_ids": ["other"]}))
    check_start_disjoint(start, data)
    clusters = [tasks[2].meta["cluster_id"]]
    (start / "milepost_train_clusters.json").write_text(json.dumps({"train_cluster_ids": clusters}))
    with pytest.raises(SystemExit, match="test puzzles"):
        check_start_disjoint(start, data)


def test_export_of_a_fine_tuned_model_lists_its_init_models_clusters_too(tmp_path: Path) -> None:
    from experiments.sft_starts import export
    from milepost.datasets import write_dataset

    tasks = rush_tasks(4, 6, 3)
    for t in tasks:
        t.split = "train"
    work = tmp_path / "work"
    write_dataset(work / "data", {"train": tasks[:1], "test": []}, {"env": "rushhour", "size": 6}, overwrite=True)
    (work / "model").mkdir()
    (work / "model" / "config.json").write_text("{}")
    (work / "model" / "trainer_state.pt").write_text("not exported")
    init = tmp_path / "init"
    init.mkdir()
    (init / "milepost_train_clusters.json").write_text(json.dumps({"train_cluster_ids": ["from-init"]}))
    (work / "init.json").write_text(json.dumps({"init": str(init)}))
    export(work, tmp_path / "out")
    listed = json.loads((tmp_path / "out" / "milepost_train_clusters.json").read_text())["train_cluster_ids"]
    assert sorted(listed) == sorted(["from-init", tasks[0].meta["cluster_id"]])
    assert (tmp_path / "out" / "config.json").is_file() and not (tmp_path / "out" / "trainer_state.pt").exists()


@pytest.mark.parametrize(
    ("mode", "model", "render"),
    [  # models that play legal moves
        ("atomic", "rushhour-sft-steps", "grid"),
        ("slide", "rushhour-sft-d4slide", "grid"),
        ("atomic", "rushhour-sft-plan-back-dagger5", "legal"),
    ],
)
def test_onpolicy_examples_label_the_states_the_model_reached(mode: str, model: str, render: str) -> None:
    import dataclasses

    import torch

    from experiments.sft_starts import (
        CONFIGS,
        METRIC,
        PLAN_MAX_NEW_TOKENS,
        mode_config,
        onpolicy_examples,
        optimal_moves,
    )
    from milepost.backends.hf import HFBackend
    from milepost.config import load_config
    from milepost.training.config import TrainConfig

    torch.set_num_threads(1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        rush = HFBackend(ROOT / "checkpoints" / model)
    cfg = mode_config(load_config(TrainConfig, CONFIGS / "rushhour_sft.yaml", ["levels=4-6"]), mode)
    cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, max_steps=6, render=render))
    if "plan" in model:  # a model that writes plans needs their token budget to reach its ACTION
        cfg = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, max_new_tokens=PLAN_MAX_NEW_TOKENS))
    tasks = rush_tasks(4, 6, 2)
    prompts, completions, stats = onpolicy_examples(cfg, rush, tasks, samples=2, seed=0)
    assert stats["episodes"] == 4 and stats["turns"] == len(prompts) == len(completions) > 4
    tok = rush.tokenizer
    clusters = [solve_board(t.payload["board"]) for t in tasks]
    states = {}
    for c in clusters:
        for key in c.states.tolist():
            s = RushHourState(c.layout, c.layout.unpack(key))
            states[s.render_text()] = (c, s)
    moved = 0
    for p, c in zip(prompts, completions):
        shown = tok.decode(p).split("Current observation:\n")[1].split("<|end|>")[0]
        board, *listed = shown.split("\nLast answer rejected:")[0].split("\nLegal moves: ")
        cluster, state = states[board]
        assert listed == ([", ".join(m.text() for m in state.legal_actions())] if render == "legal" else [])
        move = parse_move(tok.decode(c[:-1]).split("ACTION: ")[1])
        assert move is not None and move in optimal_moves(cluster, state, METRIC[mode])
        moved += state.key != cluster.start
        # the prompt is the agent's in this mode: the slide goal asks for move(X, dir, N)
        assert ("move(X, dir, N)" in tok.decode(p)) == (mode == "slide")
    if mode == "slide":
        assert any(parse_move(tok.decode(c[:-1]).split("ACTION: ")[1]).cells > 1 for c in completions)  # type: ignore[union-attr]
    assert moved  # some turns are on states the model's own moves reached, not only the start


def test_the_probe_attends_to_a_prompt_token_that_is_also_the_pad_token() -> None:
    """A chat model's pad token can be its end-of-turn token (SmolLM2: ``<|im_end|>``), which every chat prompt
    holds between its messages: the probe's attention mask comes from the prompt lengths, so its answers stay
    those of the model with a pad token that no prompt holds."""
    from experiments.sft_starts import probe_states, step_accuracy_probe
    from milepost.backends.hf import HFBackend

    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        backend = HFBackend(ROOT / "checkpoints" / "rushhour-sft-d4slide3")  # a Rush Hour start: its answers parse
    tok = backend.tokenizer
    states = probe_states(rush_tasks(4, 6, 12), _prompts(backend), 12, 24)
    in_prompt = tok.eos_token_id  # this tokenizer's end of a message (<|end|>), as <|im_end|> is SmolLM2's
    assert all(in_prompt in ids for *_, ids in states) and tok.pad_token_id != in_prompt
    plain = step_accuracy_probe(backend.model, backend, states, batch=8)
    old = tok.pad_token
    try:
        tok.pad_token = tok.eos_token
        shared = step_accuracy_probe(backend.model, backend, states, batch=8)
    finally:
        tok.pad_token = old
    assert plain["probe_parsed"] > 0.5 and shared == plain


def test_an_episode_eval_step_off_the_probe_grid_is_still_evaluated() -> None:
    from experiments.sft_starts import is_eval_step

    # --episode-evals 1320 with --eval-every 250 was silently skipped before (only multiples of 250 were evaluated)
    at = {1320, 2000}
    assert [s for s in range(1, 2001) if is_eval_step(s, 250, at)] == [
        250,
        500,
        750,
        1000,
        1250,
        1320,
        1500,
        1750,
        2000,
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--work", "runs/x", "--answer", "plan-back", "--minutes", "12", "--seed", "2", "--tag", "_d3"],
        ["--init", "m", "--data", "d", "--onpolicy", "600", "--onpolicy-samples", "3", "--steps", "1250"],
        ["--slide-per-cluster", "8", "--slide-max-dist", "9", "--eval-modes", "atomic,slide", "--bf16"],
        ["--n", "8", "--eval-levels", "4-6,7-9", "--probe", "64", "--eval-every", "100", "--eval-limit", "10"],
        ["--render", "legal", "--answer", "plan-back", "--onpolicy", "10"],
    ],
)
def test_the_reports_command_parses_back_to_the_run(argv: list[str]) -> None:
    """A report's command line must rerun the same experiment: every setting but ``--threads`` round-trips."""
    import shlex

    from experiments.sft_starts import build_parser, command_line

    p = build_parser()
    args = p.parse_args(argv)
    again = p.parse_args(shlex.split(command_line(args))[3:])  # drop "python -m experiments.sft_starts"
    assert {k: v for k, v in vars(again).items() if k != "threads"} == {
        k: v for k, v in vars(args).items() if k != "threads"
    }
