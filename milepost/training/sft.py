"""Supervised fine-tuning on solver demonstrations (``milepost sft``).

Demonstrations are oracle episodes played through the real environment and agent loop, so every prompt is
exactly what the policy sees later (goal, sliding-window memory, observation, chat template). With
``sft.noise`` > 0 some turns are answered with an error instead (a malformed answer or an illegal move) and
only the oracle's own turns become targets: the model then learns to act after a rejected answer, which
oracle-only data never shows it. The loss covers the response tokens only (prompt tokens are masked).
With ``agent.agent_kind: sgo`` the episodes run through the SGO agent (programmatic planner): prompts carry
the plan and progress exactly as at evaluation, and the oracle's answers begin with a correct PROGRESS line
and move toward the current subgoal (a milestone-conditioned policy).

``sft.episodes`` adds a teacher's trajectories (``episodes.jsonl`` of ``milepost eval --split train`` with any
model backend): each episode is replayed through the same loop with the teacher's texts, so its prompts are the
student's; ``sft.keep`` keeps the turns of solved episodes or the turns the environment counts as correct moves,
think blocks included; ``sft.solver: false`` trains on them alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from milepost.agent.loop import Job, run_episodes
from milepost.backends.base import GenerationRequest
from milepost.backends.hf import HFBackend, load_model, resolve_device_dtype
from milepost.backends.logprobs import sequence_logprobs
from milepost.backends.scripted import ReplayPolicy, ScriptedPolicy
from milepost.config import to_yaml
from milepost.datasets import load_tasks
from milepost.errors import InputError
from milepost.evaluation.plots import plot_training_log
from milepost.io import atomic_write_json, read_jsonl
from milepost.progress import progress_bar
from milepost.prompt_card import card_from_config, write_card
from milepost.tracking import Tracker
from milepost.training.checkpoint import (
    latest_checkpoint,
    load_checkpoint_state,
    restore_state,
    save_checkpoint,
    set_rng_state,
    start_guard,
    write_run_config,
)
from milepost.training.config import TrainConfig
from milepost.training.losses import sft_loss
from milepost.training.setup import (
    agent_settings,
    autocast_for,
    env_factory,
    load_policy,
    make_agent,
    select_tasks,
)
from milepost.types import Episode, Task, Turn


@dataclass
class Example:
    prompt_ids: list[int]
    completion_ids: list[int]  # the answer's tokens and the end-of-sequence token


def is_oracle_move(turn: Turn) -> bool:
    """Whether a demonstration turn is the oracle's own move (a target): an error turn of the noisy oracle has a
    format or validity penalty, or an action that does not reduce the goal distance."""
    return not (turn.reward_terms["format"] or turn.reward_terms["valid"] or turn.correct_actions != turn.n_requested)


def demonstrations(
    cfg: TrainConfig, tasks: Sequence[Task], backend: HFBackend, *, progress: bool = True
) -> list[Example]:
    """SFT examples from oracle (or lightly noisy) episodes of ``tasks``, prompts rendered by ``backend``."""
    eos = min(backend.eos_ids)

    def encode(messages: list[dict[str, str]]) -> list[int]:
        return backend.encode(GenerationRequest(messages=messages))

    style = {"cell_first": True} if cfg.sft.cell_first and cfg.env.name == "sudoku" else {}
    if cfg.sft.noise > 0:
        policy = ScriptedPolicy(
            "noisy-oracle",
            1.0 - cfg.sft.noise,
            "illegal",
            tokenizer=backend.tokenizer,
            prompt_encoder=encode,
            style=style,
        )
    else:
        policy = ScriptedPolicy("oracle", tokenizer=backend.tokenizer, prompt_encoder=encode, style=style)
    n_macro = round(cfg.sft.macro_share * len(tasks))
    episodes = []
    for part, macro in ((tasks[n_macro:], False), (tasks[:n_macro], True)):
        if not part:
            continue
        env_cfg = cfg.env
        if macro:
            mode = cfg.sft.macro_mode
            k = cfg.sft.macro_k if mode == "flexible" else None
            env_cfg = dataclasses.replace(cfg.env, action_mode=mode, macro_k=k, macro_n=None)
        make = env_factory(dataclasses.replace(cfg, env=env_cfg), part[0].size)
        episodes += run_episodes(
            make,
            [Job(t) for t in part],
            policy,
            agent_settings(cfg),
            seed=cfg.seed,
            progress=progress,
            agent=make_agent(cfg),
        )
    examples = []
    for ep in episodes:
        for turn in ep.turns:
            if not is_oracle_move(turn):
                continue
            examples.append(Example(list(turn.prompt_ids), [*turn.completion_ids, eos]))
    if not examples:
        raise InputError("no SFT demonstrations: every demonstration turn was an error")
    return examples


def read_episodes(paths: Sequence[str]) -> list[Episode]:
    """Every episode of the ``episodes.jsonl`` files, in order.

    Raises:
        InputError: a missing file or a record that is not an episode (named by file and line).
    """
    out = []
    for path in paths:
        file = Path(path)
        if not file.is_file():
            raise InputError(f"sft.episodes: {file}: no such file")
        for lineno, row in enumerate(read_jsonl(file, finite=True), start=1):
            try:
                out.append(Episode.from_dict(row))
            except InputError as exc:
                raise InputError(f"sft.episodes: {file}:{lineno}: {exc}") from None
    return out


def _kept(turn: Turn, keep: str, solved: bool) -> bool:
    """Whether a replayed teacher turn becomes an example: never an error turn; under ``solved`` every other
    turn of a solved episode, under ``correct`` a turn whose every action the environment counts as correct."""
    if turn.reward_terms["format"] or turn.reward_terms["valid"] or turn.n_requested == 0:
        return False
    if keep == "solved":
        return solved
    return turn.correct_actions == turn.n_requested


def trajectory_examples(
    cfg: TrainConfig, backend: HFBackend, *, progress: bool = True
) -> tuple[list[Example], dict[str, int]]:
    """SFT examples from a teacher's episodes (``sft.episodes``), kept as ``sft.keep`` says.

    Each episode is replayed through the real environment and agent loop of this config with the teacher's
    answer texts, so prompts are exactly what the student sees (its renderer, memory, chat template); the
    targets are the teacher's texts, think blocks included. A replay stops at the first turn whose applied
    actions differ from the recording (a different action mode or renderer can change what a text does).

    Returns:
        The examples and counts: episodes read, solved, replayed turns, mismatched episodes, examples.

    Raises:
        InputError: an episode of a task that is not in the training split (a test task: leakage).
    """
    recorded = read_episodes(cfg.sft.episodes)
    train = {t.task_id: t for t in load_tasks(cfg.data, "train")}
    for ep in recorded:
        if ep.task_id not in train:
            raise InputError(
                f"sft.episodes: task {ep.task_id} is not in the training split of {cfg.data} (play the teacher "
                "with `milepost eval --split train` on the same dataset)"
            )
    eos = min(backend.eos_ids)

    def encode(messages: list[dict[str, str]]) -> list[int]:
        return backend.encode(GenerationRequest(messages=messages))

    use = [ep for ep in recorded if ep.turns and (cfg.sft.keep == "correct" or ep.success)]
    counts = {"episodes": len(recorded), "solved": sum(ep.success for ep in recorded), "used": len(use)}
    counts.update(turns=0, mismatched=0, examples=0)
    examples: list[Example] = []
    if not use:
        return examples, counts
    by_size: dict[int, list[int]] = {}
    for i, ep in enumerate(use):
        by_size.setdefault(train[ep.task_id].size, []).append(i)
    policy = ReplayPolicy(use, encode=encode, tokenizer=backend.tokenizer)
    settings = agent_settings(cfg)
    for size, indices in by_size.items():
        replayed = run_episodes(
            env_factory(cfg, size),
            [Job(train[use[i].task_id], i) for i in indices],
            policy,
            settings,
            seed=cfg.seed,
            progress=progress,
            agent=make_agent(cfg),
        )
        for ep in replayed:
            teacher = use[ep.sample]
            for turn, original in zip(ep.turns, teacher.turns):
                if turn.actions != original.actions or turn.text != original.text:
                    counts["mismatched"] += 1
                    break
                counts["turns"] += 1
                if _kept(turn, cfg.sft.keep, teacher.success):
                    examples.append(Example(list(turn.prompt_ids), [*turn.completion_ids, eos]))
    counts["examples"] = len(examples)
    return examples, counts


GROUP_CHUNK = 50
"""Batches per length-sorted chunk with ``sft.group_by_length`` (HF's ``group_by_length`` uses 50 too)."""


def sft_batches(
    lengths: Sequence[int], passes: int, batch_size: int, group: bool, rng: random.Random
) -> list[list[int]]:
    """Batches of example indices for ``passes`` passes over the data, each pass a fresh shuffle.

    Plain: the passes' shuffles concatenated and cut every ``batch_size``. With ``group`` each pass is cut into
    chunks of ``GROUP_CHUNK`` batches, each chunk sorted by length (longest first) and cut into batches, and the
    pass's full batches shuffled (its one short batch last): a padded batch then wastes little, while every
    example still appears once per pass and the batch order stays random.
    """
    if not group:
        flat = []
        for _ in range(passes):
            perm = list(range(len(lengths)))
            rng.shuffle(perm)
            flat += perm
        return [flat[i : i + batch_size] for i in range(0, len(flat), batch_size)]
    out: list[list[int]] = []
    chunk = batch_size * GROUP_CHUNK
    for _ in range(passes):
        perm = list(range(len(lengths)))
        rng.shuffle(perm)
        batches = []
        for lo in range(0, len(perm), chunk):
            part = sorted(perm[lo : lo + chunk], key=lambda i: -lengths[i])
            batches += [part[b : b + batch_size] for b in range(0, len(part), batch_size)]
        full = [b for b in batches if len(b) == batch_size]
        rng.shuffle(full)
        out += full + [b for b in batches if len(b) < batch_size]
    return out


def lora_adapter(cfg: TrainConfig, model: Any, ckpt: Path | None) -> Any:
    """``model`` with a trainable peft LoRA adapter (``sft.lora_*``); the adapter of ``ckpt`` when resuming.

    peft rather than hand-written low-rank layers: its adapters are what the field saves, loads and merges.
    """
    from peft import LoraConfig, PeftModel, get_peft_model

    if ckpt is not None:
        return PeftModel.from_pretrained(model, str(ckpt), is_trainable=True)
    rank = cfg.sft.lora_rank
    lora = LoraConfig(
        r=rank,
        lora_alpha=cfg.sft.lora_alpha or 2 * rank,
        lora_dropout=0.0,
        target_modules=list(cfg.sft.lora_targets),
    )
    try:
        return get_peft_model(model, lora)
    except ValueError as exc:  # peft: "Target modules {...} not found in the base model"
        raise InputError(f"sft.lora_targets: {str(exc).splitlines()[0]}") from exc


def train_sft(cfg: TrainConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True) -> Path:
    """Run SFT and return the final model directory (``out_dir/final``)."""
    run_dir = Path(out_dir)
    config_yaml = to_yaml(cfg)
    torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    with start_guard(run_dir):  # a start that fails here leaves no files behind
        tasks = select_tasks(cfg, "train")
        run_dir.mkdir(parents=True, exist_ok=True)
        write_run_config(run_dir, config_yaml, resume=resume)
        tracker = Tracker(cfg, run_dir)  # metrics.jsonl + logging.backends; checked before training
        ckpt = latest_checkpoint(run_dir) if resume else None
        lora = cfg.sft.lora_rank > 0
        model, tokenizer = (
            load_model(ckpt, *resolve_device_dtype(cfg.device, "float32"))
            if ckpt and not lora
            else load_policy(cfg, run_dir)
        )
        if lora:
            model = lora_adapter(cfg, model, ckpt)
        backend = HFBackend(model=model, tokenizer=tokenizer, name="sft")
        rng = random.Random(cfg.seed)
        tasks = rng.sample(tasks, min(cfg.sft.tasks, len(tasks)))
        examples = demonstrations(cfg, tasks, backend, progress=progress) if cfg.sft.solver else []
        if cfg.sft.episodes:
            teacher, counts = trajectory_examples(cfg, backend, progress=progress)
            counts["solver_examples"] = len(examples)
            atomic_write_json(run_dir / "sft_data.json", counts)
            examples += teacher
            if not examples:
                raise InputError(
                    f"sft.episodes: no teacher turn kept ({counts['episodes']} episodes, {counts['solved']} "
                    f"solved, keep {cfg.sft.keep}) and no solver demonstrations"
                )
    steps_per_epoch = math.ceil(len(examples) / cfg.sft.batch_size)
    total_steps = max(1, int(cfg.sft.epochs * steps_per_epoch))
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=cfg.sft.lr, weight_decay=cfg.sft.weight_decay)
    warmup = max(1, min(cfg.sft.warmup_steps, total_steps // 4))

    def schedule(step: int) -> float:  # linear warm-up, cosine decay to 10%
        if step < warmup:
            return (step + 1) / warmup
        progress_frac = (step - warmup) / max(1, total_steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress_frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    start = 0
    if ckpt is not None:
        state, meta = load_checkpoint_state(ckpt, last_step=total_steps)
        restore_state("optimizer", optimizer.load_state_dict, state["optimizer"], ckpt)
        restore_state("scheduler", scheduler.load_state_dict, state["scheduler"], ckpt)
        set_rng_state(state["rng"])
        start = meta.step
    batches = sft_batches(
        [len(e.prompt_ids) + len(e.completion_ids) for e in examples],
        math.ceil(cfg.sft.epochs) + 1,
        cfg.sft.batch_size,
        cfg.sft.group_by_length,
        random.Random(cfg.seed + 1),
    )
    model.train()
    bar = progress_bar(range(start, total_steps), desc="sft", enabled=progress, initial=start, total=total_steps)
    tokens = 0
    t0 = time.perf_counter()
    for step in bar:
        batch = [examples[i] for i in batches[step]]
        with autocast_for(cfg, backend.device):
            logp = sequence_logprobs(
                model, [e.prompt_ids for e in batch], [e.completion_ids for e in batch], 1.0, pad_id=backend.pad_id
            )  # (B, C)
        lengths = torch.tensor([len(e.completion_ids) for e in batch])
        mask = torch.arange(logp.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)  # (B, C)
        loss = sft_loss(logp.float(), mask.to(logp.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(trained, cfg.sft.grad_clip)
        optimizer.step()
        scheduler.step()
        tokens += sum(len(e.prompt_ids) + len(e.completion_ids) for e in batch)
        elapsed = time.perf_counter() - t0
        bar.set_postfix(loss=f"{loss.item():.3f}")
        tracker.log(
            {
                "step": step + 1,
                "loss/sft": loss.item(),
                "train/lr": scheduler.get_last_lr()[0],
                "train/grad_norm": float(grad_norm),
                "perf/tokens_per_s": tokens / max(elapsed, 1e-9),
                "train/examples": len(examples),
            },
        )
        if (step + 1) % cfg.checkpoint_every == 0 and step + 1 < total_steps:
            save_checkpoint(run_dir, step + 1, model, tokenizer, optimizer, scheduler, config_yaml)
    bar.close()
    tracker.close()
    plot_training_log(run_dir)  # RUN/training.png from metrics.jsonl
    model.eval()
    final = run_dir / "final"
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        save_checkpoint(run_dir, total_steps, model, tokenizer, optimizer, scheduler, config_yaml)
        if lora:  # the adapter folded into the weights: ``final`` is an ordinary model directory
            model = model.merge_and_unload()
        model.save_pretrained(final)
        tokenizer.save_pretrained(final)
    write_card(final, card_from_config(cfg), made_by="milepost sft")
    return final
