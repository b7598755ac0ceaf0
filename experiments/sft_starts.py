"""SFT starts that know the rules: a tiny from-scratch model trained on step-level Rush Hour demonstrations.

The Rush Hour arms' start (``configs/tiny-cpu/rushhour_sft.yaml``: 240 oracle episodes, ~2,400 turns) learned the
answer format but not the rules (step accuracy 3-10%, avg@4 0%). This script changes the data, not the model:

- **states from whole clusters.** Every training puzzle's cluster is solved exactly (``solve_board``), so any of
  its states has a known distance to the goal. Examples are states drawn from the cluster at 1..``--max-dist``
  one-cell steps from the goal, not only the states on the oracle's path: the policy then also sees the states
  its own detours lead to. Training puzzles come from levels 1-3, 4-6 and 7-9 of one ``build_dataset`` call, so
  the test puzzles are other clusters (``datasets.check_disjoint``).
- **any optimal move is a target.** The target move is drawn uniformly among the moves that bring the state one
  step closer (``--label random``), instead of the oracle's tie-broken one (``--label tiebreak``): the model
  learns "a move that helps", not also the tie-break's letter order.
- **rejections.** ``--feedback`` of the examples carry a "Last answer rejected: ..." line after an illegal move
  (the state unchanged), as the environment writes it, so the model knows what to do after one.
- **slides.** ``--slide-per-cluster`` adds slide-mode examples: states at 1..``--slide-max-dist`` moves from the
  goal under the slide goal text, answered with a slide that brings the state one move closer
  (``move(X, dir, N)``). A batch holds one mode, so the shared-prefix loss runs one system message per step.
- **fine-tuning.** ``--init`` continues a trained model (``--data``: on its own dataset, whose test puzzles are
  checked against the model's listed training clusters) instead of building a fresh one.
- **the model's own states (DAgger).** ``--onpolicy N``: before training, the model plays N training puzzles at
  the agent's temperature; every turn's prompt, exactly as it saw it, becomes an example whose target is an
  optimal move of that turn's state (rebuilt by replaying the applied actions).
- **plans as reasons.** ``--answer plan-back`` writes the rest of a step-optimal plan that starts with the target
  move into the REASON, from the goal back to the move (``A right 3 < B up 2 < C up 1.``): the blocking chain, so
  that the model writes what the move is for before the move. ``plan-forward`` writes the same plan in play order
  (the move first), the control for "more supervised tokens" without "reasoning before acting".
  ``legal-plan-back`` first lists the state's legal one-cell moves (``legal: C down, F up. plan: A right 1 < F up
  1.``): can the model be taught to read which moves the board allows before it plans?

Prompts are built exactly as the agent builds them (goal, observation, chat template; ``memory_k: 0``); the
script checks this against the real agent loop's prompt ids before training. Answers are the oracle's format
(``REASON: B makes room. ACTION: move(B, up)``).

Measured along the way (every ``--eval-every`` steps): one-step accuracy on held-out states of the test
clusters (greedy; share of answers that are an optimal move, and that are legal), and at the checkpoints in
``--episode-evals`` the real evaluation (``evaluate_policy``: episodes on the 4-6 test tasks, ``--n`` samples at
the agent's temperature, avg@n with bootstrap intervals, step accuracy = distance-reducing actions per attempted
action). Writes ``experiments/results/sft_starts.{md,json,png}``.

Resumable: the dataset, the examples and the model checkpoints (every ``--eval-every`` steps) are kept under
``--work``; a rerun continues from the last checkpoint. Usage::

    nice -n 10 python -m experiments.sft_starts --work runs/sft-starts --threads 1
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from experiments.report_files import pct

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
CONFIGS = ROOT / "configs" / "tiny-cpu"
TRAIN_LEVELS = "1-3,4-6,7-9"
METRIC = {"atomic": "steps", "slide": "moves"}  # the goal distance each action mode counts in


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load() -> str:
    return os.getloadavg().__repr__()


# Measured while building this experiment (2026-12-01, the shared machine at load 13-18), kept beside the results.
NOTES = """### Also measured

- **bf16 autocast is slower here, not faster.** One step of 32 examples through the shared-prefix loss, 1 thread:
  fp32 1.3-1.5 CPU-s, bf16 autocast 9.5-10.6 CPU-s (7x slower; the CPU-NOTES speed-up was measured on the plain
  forward). A first run with `--bf16 --threads 2` did not reach 25 steps in 6 minutes and was stopped.
- **The system message is half of every prompt.** 122 of a mean 252 prompt tokens are the constant goal and answer
  format; running them once per batch and repeating their key/value cache (`shared_prefix_loss`) gives the same
  loss and gradients as the plain computation (`tests/training/test_sft_starts.py`) for half the tokens.
- **What "step accuracy" is.** The project's step accuracy counts actions that reduce the goal distance (one-cell
  steps): an optimal-move rate, not a legal-move rate. Here it is reported both ways: the probe's legal and optimal
  shares on held-out states, and the episodes' step accuracy on the states the policy itself reaches.
"""

# -- data ----------------------------------------------------------------------------------------------------


def build_data(work: Path, levels_text: str, n_train: int, n_test: int, seed: int) -> Path:
    from milepost.datasets import check_disjoint, write_dataset
    from milepost.envs.levels import parse_levels
    from milepost.envs.rushhour.dataset import build_dataset

    data = work / "data"
    if not (data / "manifest.json").exists():
        levels = parse_levels(levels_text, "rushhour", 6)
        splits, manifest = build_dataset(levels, n_train, n_test, seed, progress=True, workers=1)
        check_disjoint(splits)  # write_dataset checks it too; said here because the result depends on it
        write_dataset(data, splits, manifest, overwrite=True)
    return data


def distances(cluster: Any, metric: str) -> np.ndarray:
    """A solved cluster's distance column: one-cell ``steps`` (atomic mode) or slide ``moves`` (slide mode)."""
    return cluster.steps if metric == "steps" else cluster.moves


def optimal_moves(cluster: Any, state: Any, metric: str = "steps") -> list[Any]:
    """Every action that brings ``state`` one unit closer to the goal (empty when solved): one-cell moves in
    ``steps``, slides of any length in ``moves`` (slide mode)."""
    dist = distances(cluster, metric)
    here = int(dist[cluster.index(state.key)])
    out = []
    for move in state.legal_actions(slides=metric == "moves"):
        child = state.clone()
        child.apply(move)
        if int(dist[cluster.index(child.key)]) == here - 1:
            out.append(move)
    return out


def sample_states(cluster: Any, k: int, max_dist: int, rng: random.Random, metric: str = "steps") -> list[int]:
    """Up to ``k`` packed states of ``cluster`` at 1..max_dist units of ``metric``, spread evenly over the
    distances from the nearest up: with ``k`` below the number of distances only the ``k`` nearest are drawn
    (draw ``max_dist`` and subsample for a spread over all of them, as ``experiments/sgo_rushhour.py`` does)."""
    dist = distances(cluster, metric)
    by_dist: dict[int, np.ndarray] = {}
    for d in range(1, max_dist + 1):
        idx = np.nonzero(dist == d)[0]
        if idx.size:
            by_dist[d] = idx
    if not by_dist:
        return []
    out = []
    dists = sorted(by_dist)
    for j in range(k):
        idx = by_dist[dists[j % len(dists)]]
        out.append(int(cluster.states[idx[rng.randrange(idx.size)]]))
    return sorted(set(out))


class PromptMaker:
    """Prompt ids of a Rush Hour state exactly as the agent renders them (``memory_k: 0``; ``render`` the
    environment's renderer, ``slide`` its slide mode, which the ``legal`` renderer lists slides for)."""

    def __init__(self, backend: Any, goal: str, render: str = "grid", slide: bool = False) -> None:
        self.backend = backend
        self.goal = goal
        self.render = render
        self.slide = slide

    def observation(self, state: Any, feedback: str | None) -> str:
        from milepost.envs.base import printable
        from milepost.envs.rushhour.rules import render_observation

        note = None if feedback is None else printable(feedback)
        return render_observation(state, note, style=self.render, slide=self.slide)

    def ids(self, state: Any, feedback: str | None = None) -> list[int]:
        from milepost.agent.prompts import build_messages
        from milepost.backends.base import GenerationRequest

        messages = build_messages(self.goal, self.observation(state, feedback))
        return list(self.backend.encode(GenerationRequest(messages=messages)))


ANSWERS = ("move", "plan-back", "plan-forward", "legal-plan-back")
PLAN_MAX_NEW_TOKENS = 96  # a plan answer: ~5 tokens per slide; 60 at most in 719 training examples (mean 25)
LEGAL_MAX_NEW_TOKENS = 160  # legal moves, then the plan: 80 tokens at most in 720 sampled training states (mean 52)


def max_new_tokens(answer: str) -> int | None:
    """The agent's ``max_new_tokens`` an answer style needs (None: the config's own, for ``move``)."""
    return {"move": None, "legal-plan-back": LEGAL_MAX_NEW_TOKENS}.get(answer, PLAN_MAX_NEW_TOKENS)


def legal_reason(state: Any) -> str:
    """The one-cell moves legal in ``state``, in tie-break order: ``legal: A left, A right, C up.``"""
    return "legal: " + ", ".join(f"{m.vehicle} {m.direction}" for m in state.legal_actions()) + "."


def plan_reason(cluster: Any, state: Any, move: Any, order: str) -> str:
    """The rest of a step-optimal solution that starts with ``move``, as slides (consecutive one-cell moves of a
    vehicle in one direction merged): ``back`` from the goal (``A right 3 < B up 2 < C up 1.``, the blocking
    chain a person reasons along, ending with the vehicle to move now) or ``forward`` (``C up 1 > B up 2 > A right
    3.``). After ``move`` the solver's tie-broken optimal moves; ``move`` must be optimal (one-cell)."""
    from itertools import groupby

    from milepost.envs.rushhour.solver import optimal_move

    s = state.clone()
    s.apply(move)
    steps = [move]
    while (nxt := optimal_move(cluster, s, "steps")) is not None:
        steps.append(nxt)
        s.apply(nxt)
    slides = groupby(steps, key=lambda m: (m.vehicle, m.direction))
    parts = [f"{v} {d} {len(list(run))}" for (v, d), run in slides]
    return (" < ".join(reversed(parts)) if order == "back" else " > ".join(parts)) + "."


def answer_text(move: Any, cluster: Any = None, state: Any = None, answer: str = "move") -> str:
    """The target text of ``move`` in ``state``: the oracle's short reason (``answer="move"``), or the plan it
    starts (``plan-back`` / ``plan-forward``, see ``plan_reason``; needs ``cluster`` and ``state``)."""
    from milepost.agent.parsing import format_answer
    from milepost.envs.rushhour.moves import _reason

    if answer == "move":
        return format_answer(_reason(move), move.text())
    if answer not in ANSWERS:
        raise ValueError(f"unknown answer style {answer!r} (choose from {', '.join(ANSWERS)})")
    if answer == "legal-plan-back":
        return format_answer(f"{legal_reason(state)} plan: {plan_reason(cluster, state, move, 'back')}", move.text())
    return format_answer(plan_reason(cluster, state, move, answer.removeprefix("plan-")), move.text())


def make_examples(
    tasks: list[Any],
    prompts: PromptMaker,
    tokenizer: Any,
    *,
    per_cluster: int,
    max_dist: int,
    label: str,
    feedback: float,
    seed: int,
    metric: str = "steps",
    answer: str = "move",
) -> tuple[list[list[int]], list[list[int]]]:
    """Step-level (prompt ids, completion ids + EOS) examples from the clusters of ``tasks``: one-cell moves
    (``metric`` steps, atomic mode) or slides (``moves``, slide mode; ``prompts`` must carry that mode's goal).
    ``answer``: the target's style (``answer_text``; a plan needs one-cell moves)."""
    if answer != "move" and metric != "steps":
        raise ValueError(f"answer style {answer} needs one-cell moves (metric steps), not {metric}")
    from milepost.envs.rushhour.moves import illegal
    from milepost.envs.rushhour.rules import parse_move
    from milepost.envs.rushhour.solver import optimal_move, solve_board
    from milepost.envs.rushhour.state import RushHourState

    eos = tokenizer.eos_token_id
    rng = random.Random(seed)
    prompts_out: list[list[int]] = []
    completions: list[list[int]] = []
    t0 = time.perf_counter()
    for n, task in enumerate(tasks):
        cluster = solve_board(task.payload["board"])
        layout = cluster.layout
        for key in sample_states(cluster, per_cluster, max_dist, rng, metric):
            state = RushHourState(layout, layout.unpack(key))
            if label == "tiebreak":
                move = optimal_move(cluster, state, metric)
            else:
                move = rng.choice(optimal_moves(cluster, state, metric))
            fb = None
            if rng.random() < feedback:
                # The noisy oracle's illegal-move maker reads ``rules.state`` only.
                bad = parse_move(illegal(SimpleNamespace(state=state), rng))  # type: ignore[arg-type]
                fb = state.why_illegal(bad) if bad is not None else None
            prompts_out.append(prompts.ids(state, fb))
            text = answer_text(move, cluster, state, answer)
            completions.append([*tokenizer.encode(text, add_special_tokens=False), eos])
        if (n + 1) % 100 == 0:
            log(
                f"examples: {n + 1}/{len(tasks)} clusters, {len(prompts_out)} examples, {time.perf_counter() - t0:.0f}s"
            )
    return prompts_out, completions


def onpolicy_examples(
    cfg: Any, backend: Any, tasks: list[Any], *, samples: int, seed: int, answer: str = "move"
) -> tuple[list[list[int]], list[list[int]], dict[str, Any]]:
    """Examples on the states the model itself reaches (DAgger, Ross et al. 2011): the model plays ``tasks``
    (``samples`` episodes each, at the agent's temperature, in ``cfg``'s action mode) and every turn's prompt,
    exactly as it saw it (a rejection line included), gets an optimal move of its state as the target: a
    one-cell move in atomic mode, a slide that brings the state one move closer in slide mode.

    Each turn's state is rebuilt by replaying the actions the environment applied from the puzzle's start, and
    checked against the board the prompt showed. ``answer``: the target's style (``answer_text``; atomic mode
    only for a plan). Returns prompts, completions and rollout statistics.
    """
    from milepost.agent.loop import BackendPolicy, Job, run_episodes
    from milepost.envs.rushhour.rules import parse_move, render_observation
    from milepost.envs.rushhour.solver import solve_board
    from milepost.envs.rushhour.state import RushHourState
    from milepost.training.setup import agent_settings, env_factory

    settings = agent_settings(cfg)
    metric = METRIC[cfg.env.action_mode]
    if answer != "move" and metric != "steps":
        raise ValueError(f"answer style {answer} needs atomic mode, not {cfg.env.action_mode}")
    jobs = [Job(t, k) for t in tasks for k in range(samples)]
    t0 = time.perf_counter()
    episodes = run_episodes(env_factory(cfg, 6), jobs, BackendPolicy(backend, settings), settings, seed=seed)
    rng = random.Random(seed)
    eos = backend.tokenizer.eos_token_id
    by_id = {t.task_id: t for t in tasks}
    prompts_out: list[list[int]] = []
    completions: list[list[int]] = []
    rejected = solved = 0
    for ep in episodes:
        cluster = solve_board(by_id[ep.task_id].payload["board"])
        state = RushHourState(cluster.layout, cluster.layout.unpack(cluster.start))
        solved += ep.success
        for turn in ep.turns:
            shown = turn.observation.split("\nLast answer rejected:")[0]
            if shown != render_observation(state, None, style=cfg.env.render, slide=metric == "moves"):
                raise SystemExit(
                    f"sft_starts: replayed state of {ep.task_id} turn {turn.index} differs from its prompt"
                )
            rejected += "\nLast answer rejected:" in turn.observation
            moves = optimal_moves(cluster, state, metric)
            if moves:
                move = rng.choice(moves)
                prompts_out.append(list(turn.prompt_ids))
                text = answer_text(move, cluster, state, answer)
                completions.append([*backend.tokenizer.encode(text, add_special_tokens=False), eos])
            for action in turn.actions:
                applied = parse_move(action)
                assert applied is not None  # the environment applied it
                state.apply(applied)
    stats = {
        "episodes": len(episodes),
        "solved": solved,
        "turns": len(prompts_out),
        "after_rejection": rejected,
        "rollout_s": time.perf_counter() - t0,
    }
    return prompts_out, completions, stats


def mode_config(cfg: Any, mode: str) -> Any:
    """``cfg`` in action mode ``mode`` (atomic, or slide with the paper's 20-turn budget)."""
    from milepost.envs.rushhour.env import ATOMIC_BUDGET, MACRO_BUDGET

    if cfg.env.action_mode == mode:
        return cfg
    steps = ATOMIC_BUDGET if mode == "atomic" else MACRO_BUDGET
    return dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, action_mode=mode, max_steps=steps))


def check_prompts(cfg: Any, backend: Any, prompts: PromptMaker, tasks: list[Any]) -> None:
    """The hand-built prompts equal the agent loop's in ``cfg``'s action mode: the start prompts of oracle
    demonstrations, and the environment's own observation after a rejected move."""
    from milepost.agent.prompts import build_messages
    from milepost.backends.base import GenerationRequest
    from milepost.envs.rushhour.env import RushHourEnv
    from milepost.envs.rushhour.moves import illegal
    from milepost.envs.rushhour.rules import parse_move
    from milepost.envs.rushhour.solver import solve_board
    from milepost.envs.rushhour.state import RushHourState
    from milepost.training.sft import demonstrations

    plain = dataclasses.replace(cfg, sft=dataclasses.replace(cfg.sft, noise=0.0, macro_share=0.0))
    agent_prompts = {tuple(e.prompt_ids) for e in demonstrations(plain, tasks, backend, progress=False)}
    env = RushHourEnv(action_mode=cfg.env.action_mode, render=cfg.env.render)
    rng = random.Random(0)
    for task in tasks:
        c = solve_board(task.payload["board"])
        state = RushHourState(c.layout, c.layout.unpack(c.start))
        if tuple(prompts.ids(state)) not in agent_prompts:
            raise SystemExit(f"sft_starts: the start prompt of {task.task_id} differs from the agent loop's")
        env.reset(options={"task": task})
        bad = illegal(env.rules, rng)  # type: ignore[arg-type]  # reset made the env's RushHourRules
        obs = env.step(f"REASON: x. ACTION: {bad}")[0]
        real = backend.encode(GenerationRequest(messages=build_messages(env.goal_text(), obs)))
        move = parse_move(bad)
        assert move is not None  # illegal() writes a well-formed move
        if list(real) != prompts.ids(state, state.why_illegal(move)):
            raise SystemExit(f"sft_starts: the rejection prompt of {task.task_id} differs from the environment's")
    log(
        f"prompt check ({cfg.env.action_mode}, render {cfg.env.render}): {len(tasks)} start and {len(tasks)} "
        "rejection prompts equal the agent loop's"
    )


# -- training ------------------------------------------------------------------------------------------------


def probe_states(
    tasks: list[Any], maker: PromptMaker, far: int, n: int, metric: str = "steps", seed: int = 12345
) -> list[tuple[Any, Any, list[int]]]:
    """The held-out one-step probe: two states of each task's cluster at distances drawn uniformly from those it
    has (1..``far`` units of ``metric``), shuffled, the first ``n``; each as ``(cluster, state, prompt ids)``.
    Fixed by ``seed``, so two models with their own tokenizers are probed on the same states."""
    from milepost.envs.rushhour.solver import solve_board
    from milepost.envs.rushhour.state import RushHourState

    prng = random.Random(seed)
    picks = []
    for task in tasks:
        c = solve_board(task.payload["board"])
        keys = sample_states(c, far, far, prng, metric)
        picks += [(c, key) for key in prng.sample(keys, min(2, len(keys)))]
    prng.shuffle(picks)
    out = []
    for c, key in picks[:n]:
        s = RushHourState(c.layout, c.layout.unpack(key))
        out.append((c, s, maker.ids(s)))
    return out


def step_accuracy_probe(
    model: Any,
    backend: Any,
    probe: list[tuple[Any, Any, list[int]]],
    batch: int = 64,
    metric: str = "steps",
    max_new_tokens: int = 32,
) -> dict:
    """Greedy one-step answers on held-out states: share optimal, share legal, share parsed. In ``moves``
    (slide mode) a slide of any length is legal and optimal when it brings the state one move closer.
    ``max_new_tokens``: the agent's cap (32 in the rushhour configs, where a slide answer takes up to 27)."""
    import torch

    from milepost.envs.actions import action_segment
    from milepost.envs.rushhour.rules import parse_move

    tok = backend.tokenizer
    model.eval()
    opt = legal = parsed = 0
    with torch.no_grad():
        for lo in range(0, len(probe), batch):
            part = probe[lo : lo + batch]
            ids = [p[2] for p in part]
            width = max(map(len, ids))
            inp = torch.tensor([[tok.pad_token_id] * (width - len(x)) + x for x in ids])
            # The mask from the lengths, not from ``inp != pad``: a chat model's pad token can be its end-of-turn
            # token (SmolLM2: <|im_end|>), which every chat prompt also holds between its messages.
            att = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                out = model.generate(
                    input_ids=inp,
                    attention_mask=att,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=tok.eos_token_id,
                )
            for (cluster, state, _), row in zip(part, out[:, width:].tolist()):
                text = tok.decode(row, skip_special_tokens=True)
                move = parse_move(action_segment(text).strip())
                if move is None:
                    continue
                parsed += 1
                if (move.cells != 1 and metric == "steps") or state.why_illegal(move) is not None:
                    continue
                legal += 1
                child = state.clone()
                child.apply(move)
                dist = distances(cluster, metric)
                opt += int(dist[cluster.index(child.key)]) == int(dist[cluster.index(state.key)]) - 1
    model.train()
    n = len(probe)
    return {"probe_optimal": opt / n, "probe_legal": legal / n, "probe_parsed": parsed / n}


def is_eval_step(done: int, eval_every: int, episode_at: set[int]) -> bool:
    """Whether step ``done`` is probed (and checkpointed): every ``eval_every`` steps, and at each step of
    ``episode_at`` (the ``--episode-evals`` steps and the last one), whether or not a multiple of ``eval_every``."""
    return done % eval_every == 0 or done in episode_at


def shared_prefix_loss(
    model: Any, prefix: list[int], suffixes: list[list[int]], completions: list[list[int]], pad: int
) -> Any:
    """Mean completion-token NLL of a batch whose prompts all start with ``prefix`` (the system message).

    The prefix is run once (batch 1) and its key/value cache repeated over the batch, so each step pays for
    the ~120 system tokens once instead of 64 times; gradients flow through the cache into the prefix pass, so
    the loss and its gradient equal the plain full-sequence computation (``check_shared_prefix``).
    """
    import torch
    import torch.nn.functional as F

    from milepost.backends.logprobs import model_forward

    n = len(suffixes)
    out = model(input_ids=torch.tensor([prefix]), use_cache=True)
    # "cache" from transformers 5.x on; .get(k, out.past_key_values) would read the deprecated property eagerly
    cache = out["cache"] if "cache" in out else out.past_key_values  # noqa: SIM401
    cache.batch_repeat_interleave(n)
    seqs = [s + c for s, c in zip(suffixes, completions)]
    width = max(map(len, seqs))
    inp = torch.full((n, width), pad, dtype=torch.long)
    target = torch.full((n, width), -100, dtype=torch.long)
    for row, (s, c) in enumerate(zip(suffixes, completions)):
        inp[row, : len(s) + len(c)] = torch.tensor(s + c)
        # logits at position t predict token t + 1: the completion's tokens from the suffix's last token on
        target[row, len(s) - 1 : len(s) + len(c) - 1] = torch.tensor(c)
    P = len(prefix)
    attn = torch.ones((n, P + width), dtype=torch.long)  # right padding: no real token attends to a pad
    pos = torch.arange(P, P + width).unsqueeze(0).expand(n, -1)
    logits = model_forward(model, inp, attn, pos, cache)  # the cache keyword of this transformers version
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)


def check_shared_prefix(
    model: Any, prefix: list[int], prompts: list[list[int]], completions: list[list[int]], pad: int
) -> float:
    """|shared-prefix loss - plain loss| on a few examples (they must agree to float precision)."""
    import torch

    from milepost.backends.logprobs import sequence_logprobs
    from milepost.training.losses import sft_loss

    with torch.no_grad():
        a = shared_prefix_loss(model, prefix, [p[len(prefix) :] for p in prompts], completions, pad)
        logp = sequence_logprobs(model, prompts, completions, 1.0, pad_id=pad)
        lengths = torch.tensor([len(c) for c in completions])
        mask = torch.arange(logp.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        b = sft_loss(logp.float(), mask)
    return abs(float(a) - float(b))


def save_atomic(model: Any, tokenizer: Any, target: Path, extra: dict[str, Any]) -> None:
    import torch

    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    torch.save(extra, tmp / "trainer_state.pt")
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)


def save_trainer(
    model: Any, tokenizer: Any, target: Path, optimizer: Any, scheduler: Any, step: int, curve: list, train_s: float
) -> None:
    """A resumable checkpoint: the model, and beside it the optimizer, schedule, curve and training seconds."""
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "curve": curve,
        "train_s": train_s,
    }
    save_atomic(model, tokenizer, target, state)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``main`` (also read by the tests: a report's command must parse back to its run)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/sft-starts")
    p.add_argument("--size", default="1m", help="tiny preset (0.5m, 1m, 5m, 20m)")
    p.add_argument("--train", type=int, default=300, help="training puzzles (clusters) per level 1-3, 4-6, 7-9")
    p.add_argument("--test", type=int, default=40, help="test puzzles per level")
    p.add_argument("--per-cluster", type=int, default=24, help="states drawn per training cluster")
    p.add_argument("--max-dist", type=int, default=20, help="farthest state drawn, in one-cell steps")
    p.add_argument("--label", choices=("random", "tiebreak"), default="random")
    p.add_argument("--feedback", type=float, default=0.1, help="share of examples after a rejected move")
    p.add_argument(
        "--answer",
        choices=ANSWERS,
        default="move",
        help="the target's REASON: the oracle's short one (move), or the rest of a step-optimal plan from the goal "
        "back to the move (plan-back: 'A right 3 < B up 2 < C up 1.') or forward (plan-forward), or the state's legal "
        "one-cell moves then plan-back (legal-plan-back: 'legal: A right, C up. plan: A right 3 < C up 1.'); a plan "
        f"raises the agent's max_new_tokens to {PLAN_MAX_NEW_TOKENS} ({LEGAL_MAX_NEW_TOKENS} with the legal moves) "
        "and needs atomic mode only",
    )
    p.add_argument(
        "--render",
        choices=("grid", "legal"),
        default="grid",
        help="the environment's observation renderer (env.render) in the examples, the on-policy play and the "
        "evals: grid, or legal (the board then a 'Legal moves:' line, like ALFWorld's admissible commands)",
    )
    p.add_argument("--levels", default=TRAIN_LEVELS, help="levels of the training puzzles (the test puzzles too)")
    p.add_argument(
        "--slide-per-cluster",
        type=int,
        default=0,
        help="states drawn per training cluster for slide-mode examples (the slide goal text; target: a slide "
        "that brings the state one move closer; 0 = atomic examples only)",
    )
    p.add_argument("--slide-max-dist", type=int, default=12, help="farthest slide-mode state drawn, in moves")
    p.add_argument(
        "--init",
        default=None,
        help="fine-tune this model directory instead of a fresh tiny model (e.g. checkpoints/rushhour-sft-steps)",
    )
    p.add_argument(
        "--data",
        default=None,
        help="use this Rush Hour dataset (copied into --work) instead of building one; with --init, its test "
        "puzzles must not be training clusters of the init model",
    )
    p.add_argument("--eval-modes", default="atomic", help="action modes of the episode eval (atomic, slide)")
    p.add_argument(
        "--onpolicy",
        type=int,
        default=0,
        help="training puzzles the start model plays (in each of --onpolicy-modes, --onpolicy-samples each) "
        "before training; every turn's prompt, labelled with an optimal move of its state, joins the examples "
        "(DAgger)",
    )
    p.add_argument("--onpolicy-samples", type=int, default=2)
    p.add_argument(
        "--onpolicy-modes",
        default="atomic",
        help="action modes the start model plays in for --onpolicy (atomic, slide; slide needs "
        "--slide-per-cluster): one pool of on-policy examples per mode",
    )
    p.add_argument(
        "--data-seed",
        type=int,
        default=1,
        help="dataset seed (1: not the seed-0 datasets of the Rush Hour arms, whose test puzzles must not be "
        "training clusters here)",
    )
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument(
        "--minutes",
        type=float,
        default=0.0,
        help="training-time budget: the cosine runs over these minutes of training and training stops there "
        "(for a shared machine whose speed varies; 0 = by --steps)",
    )
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument(
        "--episode-evals", default="", help="steps at which to run the episode eval (comma list; the end always)"
    )
    p.add_argument("--n", type=int, default=4, help="samples per test task in the episode eval")
    p.add_argument("--eval-limit", type=int, default=40, help="test tasks per level in the episode eval")
    p.add_argument("--eval-levels", default="4-6", help="levels of the episode eval")
    p.add_argument("--probe", type=int, default=256, help="held-out states in the one-step probe")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tag", default="", help="suffix of the results files")
    p.add_argument(
        "--export",
        default=None,
        help="only copy the trained model of --work to this directory (e.g. checkpoints/rushhour-sft) with the "
        "cluster ids of its training puzzles (milepost_train_clusters.json), then exit",
    )
    return p


def main() -> None:
    p = build_parser()
    args = p.parse_args()
    if args.onpolicy and not set(args.onpolicy_modes.split(",")) <= {"atomic"} | (
        {"slide"} if args.slide_per_cluster else set()
    ):
        p.error(f"--onpolicy-modes {args.onpolicy_modes}: atomic and slide only; slide needs --slide-per-cluster")
    if args.answer != "move" and (
        args.slide_per_cluster or set(args.eval_modes.split(",")) != {"atomic"} or "slide" in args.onpolicy_modes
    ):
        p.error(f"--answer {args.answer}: atomic mode only (no --slide-per-cluster, slide eval or on-policy modes)")
    if args.export:
        export(Path(args.work), Path(args.export))
        return

    import torch

    torch.set_num_threads(args.threads)
    from milepost.backends.hf import HFBackend
    from milepost.config import load_config
    from milepost.datasets import load_tasks
    from milepost.training.config import TrainConfig
    from milepost.training.setup import load_policy
    from milepost.training.trainer import evaluate_policy

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    wall0 = time.perf_counter()
    timings: dict[str, float] = {}
    log(f"start; load {load()}")
    if args.data and not (work / "data" / "manifest.json").exists():
        shutil.copytree(args.data, work / "data", dirs_exist_ok=True)
    data = build_data(work, args.levels, args.train, args.test, args.data_seed)
    if args.init:
        from experiments.rushhour_arms import check_start_disjoint

        # After the build: without --data the dataset is built here, and the check reads its test split.
        check_start_disjoint(Path(args.init), data)
        (work / "init.json").write_text(json.dumps({"init": str(args.init)}) + "\n", encoding="utf-8")
    timings["data_s"] = time.perf_counter() - wall0
    train_tasks = load_tasks(data, "train")
    test_tasks = load_tasks(data, "test")
    log(f"data: {len(train_tasks)} train / {len(test_tasks)} test puzzles ({timings['data_s']:.0f}s)")

    over = [f"data={data}", "levels=4-6", f"threads={args.threads}", f"model=tiny:{args.size}", f"seed={args.seed}"]
    over.append(f"env.render={args.render}")
    if (cap := max_new_tokens(args.answer)) is not None:
        over.append(f"agent.max_new_tokens={cap}")
    cfg = load_config(TrainConfig, CONFIGS / "rushhour_sft.yaml", over)
    cfg = dataclasses.replace(
        cfg,
        bf16=args.bf16,
        eval=dataclasses.replace(cfg.eval, n=args.n, ks=[1, args.n], limit=args.eval_limit, levels=args.eval_levels),
    )
    from milepost.prompt_card import card_from_config, write_card

    # The prompt settings the model trains on, copied at --export; trained on slide pools too, it has no one
    # action mode.
    card = card_from_config(cfg)
    if args.slide_per_cluster:
        del card["action_mode"]
    write_card(work, card, made_by="experiments/sft_starts.py")
    ckpt = work / "model"
    state: dict[str, Any]
    if (ckpt / "trainer_state.pt").exists() or args.init:
        from milepost.backends.hf import load_model, resolve_device_dtype

        resumed = (ckpt / "trainer_state.pt").exists()
        model, tokenizer = load_model(ckpt if resumed else Path(args.init), *resolve_device_dtype("cpu", "float32"))
        state = torch.load(ckpt / "trainer_state.pt", weights_only=False) if resumed else {"step": 0}
    else:
        model, tokenizer = load_policy(cfg, work)
        state = {"step": 0}
    backend = HFBackend(model=model, tokenizer=tokenizer, name="sft")
    from milepost.envs.rushhour.env import RushHourEnv

    # One pool of examples per action mode: each has its own goal text (system message), and a batch is
    # drawn from one pool so that the shared-prefix loss runs one system message per step.
    modes = ["atomic"] + (["slide"] if args.slide_per_cluster else [])
    # The answer style and a renderer other than the grid are in the example files' names.
    style = ("" if args.answer == "move" else f"-{args.answer}") + ("" if args.render == "grid" else f"-{args.render}")
    onpolicy_modes = args.onpolicy_modes.split(",") if args.onpolicy else []
    onpolicy: dict[str, dict[str, Any]] = {}  # rollout statistics of each mode's on-policy examples
    makers: dict[str, PromptMaker] = {}
    pools: dict[str, dict[str, Any]] = {}
    for mode in modes:
        env = RushHourEnv(action_mode=mode, render=args.render)
        env.reset(options={"task": train_tasks[0]})
        makers[mode] = PromptMaker(backend, env.goal_text(), args.render, slide=mode == "slide")
        metric = METRIC[mode]
        k, far = (
            (args.per_cluster, args.max_dist) if mode == "atomic" else (args.slide_per_cluster, args.slide_max_dist)
        )
        name = f"examples-{args.label}-{k}-{far}-{args.feedback}" + ("" if mode == "atomic" else "-slide") + style
        ex_file = work / f"{name}.pt"
        if ex_file.exists():
            ex = torch.load(ex_file, weights_only=False)
        else:
            check_prompts(mode_config(cfg, mode), backend, makers[mode], train_tasks[:6])
            t = time.perf_counter()
            pr, co = make_examples(
                train_tasks,
                makers[mode],
                tokenizer,
                per_cluster=k,
                max_dist=far,
                label=args.label,
                feedback=args.feedback,
                seed=args.seed + (0 if mode == "atomic" else 1),
                metric=metric,
                answer=args.answer,
            )
            ex = {"prompts": pr, "completions": co, "build_s": time.perf_counter() - t}
            torch.save(ex, ex_file.with_suffix(".tmp"))
            os.replace(ex_file.with_suffix(".tmp"), ex_file)
        pools[mode] = ex
    for mode in onpolicy_modes:
        suffix = "" if mode == "atomic" else f"-{mode}"  # the atomic pool keeps its earlier file and pool name
        on_file = work / f"onpolicy-{args.onpolicy}-{args.onpolicy_samples}{suffix}{style}.pt"
        if on_file.exists():
            ex = torch.load(on_file, weights_only=False)
        else:
            picked = random.Random(args.seed).sample(train_tasks, min(args.onpolicy, len(train_tasks)))
            model.eval()
            pr, co, stats = onpolicy_examples(
                mode_config(cfg, mode),
                backend,
                picked,
                samples=args.onpolicy_samples,
                seed=args.seed,
                answer=args.answer,
            )
            model.train()
            ex = {"prompts": pr, "completions": co, "build_s": stats["rollout_s"], "stats": stats}
            torch.save(ex, on_file.with_suffix(".tmp"))
            os.replace(on_file.with_suffix(".tmp"), on_file)
        log(f"on-policy examples ({mode}): {json.dumps(ex['stats'])}")
        pools[f"onpolicy{suffix}"] = ex
        onpolicy[mode] = ex["stats"]
    n_ex = sum(len(ex["prompts"]) for ex in pools.values())
    mean_len = sum(len(a) + len(b) for ex in pools.values() for a, b in zip(ex["prompts"], ex["completions"])) / n_ex
    build_s = sum(ex.get("build_s", 0.0) for ex in pools.values())
    per_mode = ", ".join(f"{m} {len(ex['prompts'])}" for m, ex in pools.items())
    log(f"examples: {n_ex} from {len(train_tasks)} clusters ({per_mode}), mean {mean_len:.0f} tokens")

    # Held-out one-step probes (one per mode): states of the test clusters (4-6 level puzzles and others),
    # fixed. Two states per cluster at distances drawn uniformly from those the cluster has (1..the mode's max).
    probes: dict[str, list[tuple[Any, Any, list[int]]]] = {}
    for mode in modes:
        metric = METRIC[mode]
        far = args.max_dist if mode == "atomic" else args.slide_max_dist
        probes[mode] = probe_states(test_tasks, makers[mode], far, args.probe, metric)
        d = [int(distances(c, metric)[c.index(s.key)]) for c, s, _ in probes[mode]]
        log(f"probe ({mode}): {len(d)} held-out states, mean distance {sum(d) / len(d):.1f} {metric}")

    def run_probes() -> dict[str, float]:
        out = step_accuracy_probe(model, backend, probes["atomic"], max_new_tokens=cfg.agent.max_new_tokens)
        if "slide" in probes:
            sl = step_accuracy_probe(model, backend, probes["slide"], metric=METRIC["slide"])
            out.update({f"slide_{k}": v for k, v in sl.items()})
        return out

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    total = args.steps

    clock = {"train_s": 0.0}  # training seconds so far (for --minutes)

    def schedule(step: int) -> float:
        if step < args.warmup:
            return (step + 1) / args.warmup
        if args.minutes:
            frac = min(1.0, clock["train_s"] / (60 * args.minutes))
        else:
            frac = (step - args.warmup) / max(1, total - args.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    if "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
    curve: list[dict[str, Any]] = state.get("curve", [])
    if curve and curve[-1].get("probe_version") != 2:
        # A first version of the probe drew only states one step from the goal (always "A drives out"): its
        # points are dropped and the loaded checkpoint's point measured again with the probe above.
        last = curve[-1]
        last.update(run_probes(), probe_version=2)
        curve = [last]
    start = state["step"]
    spent = state.get("train_s", 0.0)
    clock["train_s"] = spent
    episode_at = {int(s) for s in args.episode_evals.split(",") if s} | {total}
    order_rng = np.random.default_rng(args.seed)
    batches = batch_order({m: len(ex["prompts"]) for m, ex in pools.items()}, args.batch, total, order_rng)
    pad = tokenizer.pad_token_id
    user = tokenizer.convert_tokens_to_ids("<|user|>")
    prefixes = {}
    for mode, ex in pools.items():
        first = ex["prompts"][0]
        prefixes[mode] = prefix = first[: first.index(user) + 1]
        if any(p[: len(prefix)] != prefix for p in ex["prompts"]):
            raise SystemExit(f"sft_starts: the {mode} prompts do not share their system message")
        diff = check_shared_prefix(model, prefix, ex["prompts"][:4], ex["completions"][:4], pad)
        log(f"shared-prefix loss vs plain loss ({mode}): |diff| = {diff:.2e} ({len(prefix)} prefix tokens)")
        if diff > 1e-3:
            raise SystemExit("sft_starts: the shared-prefix loss differs from the plain loss")
    model.train()
    t_chunk = time.perf_counter()
    tokens = 0
    loss_sum = 0.0
    loss_n = 0
    autocast = torch.autocast(device_type="cpu", dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    for step in range(start, total):
        mode, idx = batches[step]
        prefix = prefixes[mode]
        ps = [pools[mode]["prompts"][i][len(prefix) :] for i in idx]
        cs = [pools[mode]["completions"][i] for i in idx]
        with autocast:
            loss = shared_prefix_loss(model, prefix, ps, cs, pad)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        tokens += len(prefix) + sum(len(a) + len(b) for a, b in zip(ps, cs))
        loss_sum += loss.item()
        loss_n += 1
        done = step + 1
        clock["train_s"] = spent + time.perf_counter() - t_chunk
        out_of_time = bool(args.minutes) and clock["train_s"] >= 60 * args.minutes
        if out_of_time:
            total = done
            episode_at.add(done)
        if done % 25 == 0:
            el = time.perf_counter() - t_chunk
            log(f"step {done}/{total} loss {loss_sum / loss_n:.3f} {tokens / max(el, 1e-9):.0f} tok/s")
        if is_eval_step(done, args.eval_every, episode_at):
            spent += time.perf_counter() - t_chunk
            point: dict[str, Any] = {
                "step": done,
                "examples_seen": done * args.batch,
                "loss": loss_sum / max(loss_n, 1),
                "train_s": spent,
                "load": os.getloadavg()[0],
            }
            te = time.perf_counter()
            point.update(run_probes(), probe_version=2)
            point["probe_s"] = time.perf_counter() - te
            if done in episode_at:
                te = time.perf_counter()
                model.eval()
                for mode in args.eval_modes.split(","):
                    out = work / (f"eval-{done}" if mode == "atomic" else f"eval-{done}-{mode}")
                    if out.exists():
                        shutil.rmtree(out)
                    backend_now = HFBackend(model=model, tokenizer=tokenizer, name="sft")
                    evaluate_policy(mode_config(cfg, mode), backend_now, out, "sft", False)
                    lv = json.loads((out / "metrics.json").read_text())
                    point["episode" if mode == "atomic" else f"episode_{mode}"] = _level_numbers(lv)
                model.train()
                point["episode_eval_s"] = time.perf_counter() - te
            curve.append(point)
            log(f"eval {json.dumps(point)}")
            save_trainer(model, tokenizer, ckpt, optimizer, scheduler, done, curve, spent)
            t_chunk = time.perf_counter()
            tokens = 0
            loss_sum, loss_n = 0.0, 0
            if out_of_time:
                break
    timings["wall_s"] = time.perf_counter() - wall0
    n_probe = len(probes["atomic"])  # --probe is a cap: two states per test cluster, 240 for 120 test puzzles
    report(args, curve, n_ex, mean_len, len(train_tasks), len(test_tasks), build_s, timings, n_probe, onpolicy or None)


def batch_order(sizes: dict[str, int], batch: int, steps: int, rng: Any) -> list[tuple[str, Any]]:
    """``steps`` batches of (mode, example indices): each pass over the examples cuts every mode's shuffled
    pool into batches and shuffles the batches of all modes together, so the modes mix in proportion to
    their sizes while each batch holds one mode (one system message)."""
    out: list[tuple[str, Any]] = []
    while len(out) < steps:
        one_pass = []
        for mode, n in sizes.items():
            perm = rng.permutation(n)
            one_pass += [(mode, perm[lo : lo + batch]) for lo in range(0, n - batch + 1, batch)]
        if not one_pass:
            raise SystemExit(f"sft_starts: fewer examples than one batch of {batch}")
        out += [one_pass[i] for i in rng.permutation(len(one_pass))]
    return out[:steps]


def export(work: Path, target: Path) -> None:
    """The trained model as a plain model directory, with what a later experiment needs to keep its test
    puzzles out of the training clusters."""
    from milepost.datasets import load_tasks

    model = work / "model"
    if not (model / "config.json").is_file():
        raise SystemExit(f"sft_starts: {model}: no trained model to export")
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(model, tmp, ignore=shutil.ignore_patterns("trainer_state.pt"))
    train = load_tasks(work / "data", "train")
    clusters = {t.meta["cluster_id"] for t in train}
    init = work / "init.json"
    if init.is_file():  # a fine-tuned model also saw its init model's training clusters
        listed = Path(json.loads(init.read_text())["init"]) / "milepost_train_clusters.json"
        if listed.is_file():
            clusters |= set(json.loads(listed.read_text())["train_cluster_ids"])
    info = {
        "made_by": "experiments/sft_starts.py (see experiments/results/sft_starts*.md)",
        "data_manifest": json.loads((work / "data" / "manifest.json").read_text()),
        "train_cluster_ids": sorted(clusters),
    }
    (tmp / "milepost_train_clusters.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    from milepost.prompt_card import CARD

    if (work / CARD).is_file():  # the prompt settings it was trained with, for `milepost eval`
        shutil.copyfile(work / CARD, tmp / CARD)
    else:
        log(f"{work}: no {CARD} (trained before the card existed): the export has none")
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    log(f"exported {model} to {target} ({len(info['train_cluster_ids'])} training clusters listed)")


def _level_numbers(metrics: dict[str, Any]) -> dict[str, Any]:
    """The per-level figures of a metrics.json (avg@n with its interval, pass@k, step accuracy)."""
    out = {}
    for lv in metrics.get("levels", []):
        out[lv["level"]] = {
            "tasks": lv["tasks"],
            "avg": lv["avg"]["value"],
            "avg_lo": lv["avg"]["lo"],
            "avg_hi": lv["avg"]["hi"],
            "pass": {k: v["value"] for k, v in lv["pass_at"].items()},
            "step_accuracy": lv["step_accuracy"],
        }
    return out


def command_line(args: Any) -> str:
    """The command that reruns this invocation (without ``--threads`` and ``nice``, which the report adds): every
    setting that shapes the data, the model or the evaluation, the training seed included when it is not 0."""
    slide = bool(args.slide_per_cluster)
    return (
        f"python -m experiments.sft_starts --work {args.work} --size {args.size} --train {args.train} "
        f"--test {args.test} --levels {args.levels} --data-seed {args.data_seed} --per-cluster {args.per_cluster} "
        f"--max-dist {args.max_dist} --label {args.label} "
        + (f"--answer {args.answer} " if args.answer != "move" else "")
        + (f"--render {args.render} " if args.render != "grid" else "")
        + f"--feedback {args.feedback} --steps {args.steps} --batch {args.batch} --lr {args.lr} --warmup {args.warmup}"
        + (" --bf16" if args.bf16 else "")
        + (f" --minutes {args.minutes:g}" if args.minutes else "")
        + (f" --episode-evals {args.episode_evals}" if args.episode_evals else "")
        + (f" --slide-per-cluster {args.slide_per_cluster} --slide-max-dist {args.slide_max_dist}" if slide else "")
        + (f" --init {args.init}" if args.init else "")
        + (f" --data {args.data}" if args.data else "")
        + (f" --eval-modes {args.eval_modes}" if args.eval_modes != "atomic" else "")
        + (f" --eval-limit {args.eval_limit}" if args.eval_limit != 40 else "")
        + (f" --onpolicy {args.onpolicy} --onpolicy-samples {args.onpolicy_samples}" if args.onpolicy else "")
        + (f" --onpolicy-modes {args.onpolicy_modes}" if args.onpolicy and args.onpolicy_modes != "atomic" else "")
        + (f" --eval-levels {args.eval_levels}" if args.eval_levels != "4-6" else "")
        + (f" --n {args.n}" if args.n != 4 else "")
        + (f" --probe {args.probe}" if args.probe != 256 else "")
        + (f" --eval-every {args.eval_every}" if args.eval_every != 250 else "")
        + (f" --seed {args.seed}" if args.seed else "")
        + (f" --tag {args.tag}" if args.tag else "")
    )


def report(
    args: Any,
    curve: list[dict[str, Any]],
    n_ex: int,
    mean_len: float,
    n_train: int,
    n_test: int,
    build_s: float,
    timings: dict[str, float],
    n_probe: int,
    onpolicy: dict[str, Any] | None = None,
) -> None:
    """``experiments/results/sft_starts{tag}.{md,json,png}``: settings, the curve and the final numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tag = args.tag
    RESULTS.mkdir(exist_ok=True)
    last = curve[-1]
    ep = last.get("episode", {})
    slide = bool(args.slide_per_cluster)

    def episode_cells(e: dict[str, Any] | None) -> str:
        if not e:
            return "- | -"
        return f"{pct(e['step_accuracy'])} | {pct(e['avg'])} [{pct(e['avg_lo'])}, {pct(e['avg_hi'])}]"

    rows = []
    for pt in curve:
        row = (
            f"| {pt['step']} | {pt['examples_seen']} | {pt['loss']:.3f} | {pct(pt['probe_optimal'])} | "
            f"{pct(pt['probe_legal'])} | {episode_cells(pt.get('episode', {}).get('4-6'))} | "
        )
        if slide:
            row += (
                f"{pct(pt.get('slide_probe_optimal'))} | {pct(pt.get('slide_probe_legal'))} | "
                f"{episode_cells(pt.get('episode_slide', {}).get('4-6'))} | "
            )
        rows.append(row + f"{pt['train_s'] / 60:.1f} | {pt['load']:.1f} |")
    final = []
    for key, mode in (("episode", "atomic"), ("episode_slide", "slide")):
        for level, e in last.get(key, {}).items():
            final.append(
                f"| {mode} | {level} | {e['tasks']} | {pct(e['step_accuracy'])} | {pct(e['avg'])} "
                f"[{pct(e['avg_lo'])}, {pct(e['avg_hi'])}] | "
                + " | ".join(f"{pct(e['pass'].get(str(k)))}" for k in (1, args.n))
                + " |"
            )
    e46 = ep.get("4-6")
    met = (
        "not measured"
        if e46 is None
        else (
            f"step accuracy {pct(e46['step_accuracy'])}% (target >= 80: "
            f"{'met' if (e46['step_accuracy'] or 0) >= 0.8 else 'not met'}), avg@{args.n} {pct(e46['avg'])}% "
            f"(target >= 30: {'met' if e46['avg'] >= 0.3 else 'not met'})"
        )
    )
    cmd = command_line(args)
    target = "any optimal move, drawn uniformly" if args.label == "random" else "the oracle's tie-broken optimal move"
    if args.answer != "move":
        way = "from the move to the goal" if args.answer == "plan-forward" else "from the goal back to the move"
        first = "the state's legal one-cell moves, then " if args.answer == "legal-plan-back" else ""
        target += (
            f"; its REASON {first}the rest of a step-optimal plan that starts with it, as slides {way} "
            f"(`--answer {args.answer}`; max_new_tokens {max_new_tokens(args.answer)})"
        )
    precision = "bf16 autocast" if args.bf16 else "fp32"
    if args.minutes:
        precision += "; the cosine over a wall-clock budget, the machine's speed varying with its load"
    head = (
        f"| SFT step | examples seen | loss | probe optimal (%) | probe legal (%) | episode step acc. 4-6 (%) | "
        f"avg@{args.n} 4-6 (%) [95% CI] | "
        + (
            f"slide probe optimal (%) | slide probe legal (%) | slide episode step acc. 4-6 (%) | "
            f"slide avg@{args.n} 4-6 (%) [95% CI] | "
            if slide
            else ""
        )
        + "train min | load |"
    )
    rule = "|" + "---|" * (head.count("|") - 1)
    model_line = (
        f"tiny {args.size} fine-tuned from `{args.init}`"
        if args.init
        else f"tiny {args.size} from scratch (Qwen3 architecture, rotary positions, the project's BPE tokenizer)"
    )
    slide_line = (
        f"\nand {args.slide_per_cluster} states per cluster at 1-{args.slide_max_dist} slide moves from the goal in "
        "slide mode (the slide goal text; target: a slide that brings the state one move closer)"
        if slide
        else ""
    )
    steps_text = "one-cell steps from the goal"
    if args.render != "grid":
        steps_text += (
            "; every prompt, in training and in play, shows the board then its legal moves "
            f"(`--render {args.render}`, `env.render: {args.render}`)"
        )
    onpolicy_line = "".join(
        f"; and {st['turns']} on-policy examples (DAgger){'' if mode == 'atomic' else ' in ' + mode + ' mode'}: "
        f"every turn of {st['episodes']} episodes the start model played on {args.onpolicy} training puzzles at "
        f"temperature 0.8 ({st['solved']} solved, {st['after_rejection']} turns after a rejection), each prompt as "
        "the model saw it with an optimal move of its state as the target"
        for mode, st in (onpolicy or {}).items()
    )
    text = (
        f"""# Rush Hour SFT start{f" ({tag})" if tag else ""}

Command: `nice -n {os.nice(0)} {cmd} --threads {args.threads}`.

Model: {model_line}.
Demonstrations: {n_ex} step-level examples (states drawn from the solved clusters of {n_train} training puzzles,
levels {args.levels}; {args.per_cluster} states per cluster at 1-{args.max_dist} {steps_text}{slide_line};
target move: {target};
{100 * args.feedback:.0f}% after a rejected move{onpolicy_line}), mean {mean_len:.0f} tokens,
built in {build_s / 60:.1f} min.
Training: {curve[-1]["step"]} steps of batch {args.batch} (lr {args.lr}, {args.warmup} warm-up steps, cosine to 10%,
{precision}), {curve[-1]["train_s"] / 60:.1f} min of training on the shared 2-core machine
({args.threads} thread(s), nice {os.nice(0)}; load average at each point in the table). Test: {n_test} held-out
puzzles (other clusters than every training puzzle: `datasets.check_disjoint`), the 4-6 level's {args.eval_limit}
in the episode evaluation (`evaluate_policy`, {args.n} samples per task at the agent's temperature 0.8, H_max 30;
in slide mode H_max 20 and the distances in slide moves).

Probe: greedy one-step answers on {n_probe} held-out states of the test clusters: share that is an optimal move
(brings the state one step closer) and share that is legal. Episode step accuracy: the project's metric, actions
that reduce the goal distance per attempted action (an unparsable answer is one failed attempt), over the
evaluation's episodes: an optimal-move rate on the states the policy reaches.

**Result at the end, level 4-6: {met}.**

{head}
{rule}
"""
        + "\n".join(rows)
        + f"""

Final episode evaluation by level:

| mode | level | tasks | step accuracy (%) | avg@{args.n} (%) [95% CI] | pass@1 (%) | pass@{args.n} (%) |
|---|---|---|---|---|---|---|
"""
        + "\n".join(final)
        + f"""

Wall time of this invocation: {timings.get("wall_s", 0) / 60:.1f} min (data {timings.get("data_s", 0) / 60:.1f} min).

{NOTES}

![curve](sft_starts{tag}.png)
"""
    )
    (RESULTS / f"sft_starts{tag}.md").write_text(text, encoding="utf-8")
    (RESULTS / f"sft_starts{tag}.json").write_text(
        json.dumps({"args": vars(args), "examples": n_ex, "curve": curve, "timings": timings}, indent=2) + "\n"
    )
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [pt["step"] for pt in curve]
    ax.plot(steps, [100 * pt["probe_optimal"] for pt in curve], "o-", label="probe: optimal move (held-out states)")
    ax.plot(steps, [100 * pt["probe_legal"] for pt in curve], "s--", label="probe: legal move")
    eps = [(pt["step"], pt["episode"]["4-6"]) for pt in curve if "4-6" in pt.get("episode", {})]
    if eps:
        ax.plot(
            [s for s, _ in eps],
            [100 * (e["step_accuracy"] or 0) for _, e in eps],
            "^-",
            label="episodes 4-6: step accuracy",
        )
        ax.errorbar(
            [s for s, _ in eps],
            [100 * e["avg"] for _, e in eps],
            yerr=[[100 * (e["avg"] - e["avg_lo"]) for _, e in eps], [100 * (e["avg_hi"] - e["avg"]) for _, e in eps]],
            fmt="D-",
            capsize=3,
            label=f"episodes 4-6: avg@{args.n} (95% CI)",
        )
    if slide:
        ax.plot(
            steps, [100 * pt.get("slide_probe_optimal", 0) for pt in curve], "o:", label="slide probe: optimal move"
        )
        sl = [(pt["step"], pt["episode_slide"]["4-6"]) for pt in curve if "4-6" in pt.get("episode_slide", {})]
        if sl:
            ax.plot(
                [s for s, _ in sl], [100 * e["avg"] for _, e in sl], "v:", label=f"slide episodes 4-6: avg@{args.n}"
            )
    ax.axhline(80, color="grey", lw=0.5, ls=":")
    ax.axhline(30, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("SFT steps")
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.set_title(f"Rush Hour SFT start (tiny {args.size}, {n_ex} step examples)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / f"sft_starts{tag}.png", dpi=120)
    plt.close(fig)
    log(f"wrote {RESULTS / f'sft_starts{tag}.md'}")


if __name__ == "__main__":
    main()
