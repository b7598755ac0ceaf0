"""``milepost train``: REINFORCE with the paper's advantages and importance weights, in one readable loop.

Each iteration: sample tasks (from the current curriculum phase) -> play episodes with the rollout source
(``rollout.backend``: the trainer's own model, an in-process vLLM engine or a vLLM server, all returning
token ids and behaviour log-probs) -> per-turn returns and advantages -> M minibatch updates on the exact
rollout token ids -> push the new weights to the generator -> log -> checkpoint -> periodic evaluation. Every
random choice of an iteration derives from (seed, iteration), so a run resumed from a checkpoint replays exactly
what the uninterrupted run would have done.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from milepost.agent.loop import BackendPolicy, Job, run_episodes
from milepost.backends.base import Backend
from milepost.backends.hf import load_model, resolve_device_dtype
from milepost.backends.logprobs import base_model, sequence_logprobs
from milepost.config import to_yaml
from milepost.distributed.fsdp import FSDP
from milepost.distributed.fsdp import setup as fsdp_setup
from milepost.evaluation.plots import plot_training_log
from milepost.evaluation.runner import EvalSpec, evaluate
from milepost.io import append_jsonl
from milepost.progress import progress_bar
from milepost.prompt_card import card_from_config, write_card
from milepost.rewards.milestone import segment_ends
from milepost.rollout import RolloutSource, make_rollout_source, special_ids
from milepost.tracking import Tracker
from milepost.training.checkpoint import (
    check_learning_rate,
    latest_checkpoint,
    load_checkpoint_state,
    restore_state,
    save_checkpoint,
    start_guard,
    write_run_config,
)
from milepost.training.config import Phase, TrainConfig
from milepost.training.curriculum import EpisodeOutcome, FailureCurriculum, uniform_draw
from milepost.training.estimators import distance_advantages, gigpo_advantages, random_advantages
from milepost.training.losses import (
    ISConfig,
    importance_weights,
    kl_penalty,
    log_ratios,
    mse_policy_loss,
    reinforce_loss,
)
from milepost.training.mira import MiRA, generate_near_failures, step_rewards, trajectory_rewards
from milepost.training.returns import advantages
from milepost.training.setup import agent_settings, autocast_for, env_factory, load_policy, make_agent, select_tasks
from milepost.types import Episode


@dataclass
class TurnSample:
    """One turn as the loss sees it: exact token ids, behaviour log-probs and the advantage."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    advantage: float


def phase_at(cfg: TrainConfig, iteration: int) -> Phase:
    """The curriculum phase of an iteration (one implicit phase on ``cfg.levels`` without a curriculum)."""
    if not cfg.rl.curriculum:
        return Phase(levels=cfg.levels or "", iterations=cfg.rl.iterations)
    end = 0
    for phase in cfg.rl.curriculum:
        end += phase.iterations
        if iteration < end:
            return phase
    return cfg.rl.curriculum[-1]


def episode_rewards(ep: Episode, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(trajectory rewards r_t, step rewards r_step_t, segment cuts) of one episode, shape (T,) each.

    r_t is ``rl.reward`` (the outcome by default), plus the weighted milestone term under subgoal
    decomposition (whose cuts end a segment at each turn that completed a subgoal; with ``rl.reward: subgoal``
    at each turn that reached its target); r_step_t = r_format_t + r_valid_t.
    """
    cuts = segment_ends(ep, cfg.rl.reward, cfg.rl.subgoal_decomposition)
    return trajectory_rewards(ep, cfg), step_rewards(ep), cuts


def batch_advantages(episodes: list[Episode], cfg: TrainConfig, iteration: int = 0) -> list[torch.Tensor]:
    """Per-turn advantages A_t of every episode by ``rl.estimator`` (``training.estimators``), the paper's by
    default (returns.advantages over ``rl``'s settings); ``iteration`` seeds the random control's draws."""
    rl = cfg.rl
    if rl.estimator == "random":
        return random_advantages(episodes, seed=cfg.seed * 1_000_003 + iteration)
    if rl.estimator == "gigpo":
        outcomes = [float(ep.success) for ep in episodes]
        return gigpo_advantages(episodes, outcomes, gamma=rl.gigpo_gamma, omega=rl.gigpo_omega)
    if rl.estimator == "distance":
        return distance_advantages(episodes, rl.normalisation)
    rewards = [episode_rewards(ep, cfg) for ep in episodes]
    task_ids = sorted({ep.task_id for ep in episodes})
    groups = [task_ids.index(ep.task_id) for ep in episodes]
    return advantages(
        [r[0] for r in rewards],
        [r[1] for r in rewards],
        gamma=cfg.rl.gamma,
        alpha=cfg.rl.alpha,
        cuts=[r[2] for r in rewards],
        normalisation=cfg.rl.normalisation,
        std_floor=cfg.rl.std_floor,
        groups=groups,
    )


def turn_samples(
    episodes: list[Episode], cfg: TrainConfig, adv: list[torch.Tensor] | None = None, iteration: int = 0
) -> list[TurnSample]:
    """The turns that can enter the loss, with their advantages (``adv`` per usable episode, else
    ``rl.estimator``'s of iteration ``iteration``)."""
    usable = [ep for ep in episodes if ep.turns]
    if adv is None:
        adv = batch_advantages(usable, cfg, iteration)
    out = []
    for ep, a in zip(usable, adv):
        for turn, value in zip(ep.turns, a.tolist()):
            # Scripted or failed turns have no behaviour log-probs; they never enter the RL loss.
            if turn.logprobs and turn.completion_ids and len(turn.logprobs) == len(turn.completion_ids):
                out.append(TurnSample(turn.prompt_ids, turn.completion_ids, turn.logprobs, value))
    return out


def _pad(rows: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


def padded_tokens(batch: list[TurnSample]) -> int:
    """Positions one forward over ``batch`` runs: rows x (longest prompt + longest answer)."""
    if not batch:
        return 0
    return len(batch) * (max(len(s.prompt_ids) for s in batch) + max(len(s.completion_ids) for s in batch))


def micro_batches(batch: list[TurnSample], budget: int) -> list[list[TurnSample]]:
    """``batch`` as micro-batches of at most ``budget`` padded tokens (:func:`padded_tokens`; a row longer than
    the budget runs alone); 0 or a batch within the budget: one micro-batch, in the batch's order.

    Rows are taken longest first, so each micro-batch holds rows of similar length and padding to its longest
    row costs little (length bucketing).
    """
    if budget <= 0 or padded_tokens(batch) <= budget:
        return [batch] if batch else []
    order = sorted(batch, key=lambda s: len(s.prompt_ids) + len(s.completion_ids), reverse=True)
    out: list[list[TurnSample]] = [[]]
    for sample in order:
        if out[-1] and padded_tokens([*out[-1], sample]) > budget:
            out.append([])
        out[-1].append(sample)
    return out


def enable_activation_checkpointing(model: Any) -> None:
    """Recompute each decoder layer in backward (``rl.activation_checkpointing``), with transformers'
    ``gradient_checkpointing_enable`` in its non-reentrant form (torch.utils.checkpoint, which FSDP2 supports)."""
    base = base_model(model)
    if hasattr(base, "activation_checkpointing_enable"):  # transformers >= 5.x; the older name warns there
        base.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    samples: list[TurnSample],
    cfg: TrainConfig,
    pad_id: int,
    rng: random.Random,
    ref: Any = None,
    fsdp: FSDP | None = None,
) -> dict[str, float]:
    """M minibatch steps over the iteration's turns; returns the loss and importance-weight statistics.

    The objective is the REINFORCE loss with importance weights, or with MiRA's ``objective: mse`` the
    regression (beta log(pi / pi_ref) - A)^2 against ``ref``; ``mira.kl_coef`` adds KL(pi || pi_ref). The
    importance-weight statistics (``masked_frac``, ``mean_weight``) are reported only by the objective that
    uses the weights; ``onpolicy_rho*`` (the geometric-mean ratio rho_geo of the first minibatch, scored before
    any step of this iteration, so 1 unless sampler and trainer disagree) are reported by both. Under ``fsdp``
    each rank takes its share of every minibatch (``FSDP.split``) and the statistics are summed over ranks
    (``onpolicy_rho*`` stay this rank's).

    Each minibatch (each rank's share) runs as micro-batches of at most ``rl.micro_batch_tokens`` padded tokens
    (:func:`micro_batches`) whose gradients accumulate into the one optimizer step: a micro-batch's loss is
    weighted by its share of the minibatch's rows (of its answer tokens for the KL term), so the accumulated
    gradient is the whole minibatch's. Under FSDP every rank runs as many micro-steps as the rank with the most
    (:meth:`FSDP.micro_steps`), the short ones padding with zero-weight steps: each forward and backward is a
    collective.
    """
    order = list(range(len(samples)))
    rng.shuffle(order)
    m = min(cfg.rl.minibatches, len(order))
    chunks = [order[i::m] for i in range(m)]
    is_cfg = ISConfig(cfg.rl.is_cap, cfg.rl.is_low, cfg.rl.is_high, cfg.rl.is_truncate, cfg.rl.is_mask)
    mira = cfg.mira if cfg.mira.enabled else None
    regression = mira is not None and mira.objective == "mse" and ref is not None
    beta, kl_coef = (mira.beta, mira.kl_coef) if mira is not None else (0.0, 0.0)
    budget = cfg.rl.micro_batch_tokens
    stats = {"loss": 0.0, "kept": 0.0, "weight": 0.0, "grad_norm": 0.0, "turns": 0.0, "tokens": 0.0}
    stats |= {"micro": 0.0, "padding": 0.0}
    onpolicy: dict[str, float] = {}
    device = next(model.parameters()).device
    model.train()

    def logprobs_of(net: Any, batch: list[TurnSample]) -> torch.Tensor:
        """(B, C) log-probs of the batch's response tokens under ``net``, scored as the rollout scored them."""
        with autocast_for(cfg, device):
            out = sequence_logprobs(
                net,
                [s.prompt_ids for s in batch],
                [s.completion_ids for s in batch],
                cfg.agent.temperature,
                pad_id=pad_id,
                # FSDP2 frees a layer's gathered weights after each forward: a prefix prefilled in a forward of
                # its own would leave backward reading freed storage, so sharded models score whole rows.
                share_prefix=fsdp is None,
            )
        return out.float()

    def micro_loss(
        batch: list[TurnSample], rows: int, tokens: int, rho: list[torch.Tensor], live: float
    ) -> torch.Tensor:
        """The micro-batch's part of the minibatch loss (of ``rows`` turns and ``tokens`` answer tokens)."""
        logp = logprobs_of(model, batch)  # (b, C)
        width = logp.shape[1]
        lengths = torch.tensor([len(s.completion_ids) for s in batch])
        mask = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).to(device)  # (b, C)
        old = _pad([s.logprobs for s in batch], width).to(device)
        adv = torch.tensor([s.advantage for s in batch], device=device)
        rho.append(log_ratios(logp, old, mask)[1].exp())  # (b,)
        ref_logp = None
        if ref is not None:
            with torch.no_grad():
                ref_logp = logprobs_of(ref, batch)
        # The losses are means over the micro-batch's rows (tokens for the KL): weighted by its share of the
        # minibatch, the micro-batches' sum is the minibatch's mean.
        if regression and ref_logp is not None:
            loss = mse_policy_loss(logp, ref_logp, mask, adv, beta) * (len(batch) / rows)
        else:
            weights, kept = importance_weights(logp, old, mask, is_cfg)
            loss = reinforce_loss(logp, mask, adv, weights) * (len(batch) / rows)
            stats["kept"] += kept.float().sum().item() * live
            stats["weight"] += weights.sum().item() * live
        if kl_coef > 0 and ref_logp is not None:
            loss = loss + kl_coef * kl_penalty(logp, ref_logp, mask) * (int(lengths.sum()) / max(tokens, 1))
        return loss

    for j, chunk in enumerate(chunks):
        batch = [samples[i] for i in chunk]
        scale = 1.0
        if fsdp is not None:  # FSDP hook: this rank's share of the minibatch, its loss scaled to the whole's
            batch, scale = fsdp.split(batch)
        live = float(scale > 0)  # a rank left without turns runs one at scale 0 and counts none
        parts = micro_batches(batch, budget)
        steps = len(parts)
        if fsdp is not None:  # FSDP hook: as many micro-steps as the busiest rank (each one is a collective)
            steps = fsdp.micro_steps([samples[i] for i in chunk], lambda share: len(micro_batches(share, budget)))
        tokens = sum(len(s.completion_ids) for s in batch)
        rho: list[torch.Tensor] = []
        optimizer.zero_grad(set_to_none=True)
        for k in range(steps):
            if k < len(parts):
                loss = micro_loss(parts[k], len(batch), tokens, rho, live) * scale
                stats["loss"] += loss.item() / m
            else:  # zero-weight step: joins the collectives of the busier ranks' micro-steps
                shortest = min(batch, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
                loss = logprobs_of(model, [shortest]).sum() * 0.0
            loss.backward()
        stats["micro"] += steps
        stats["padding"] += steps - len(parts)
        if j == 0:
            rho_geo = torch.cat(rho)  # (B,)
            onpolicy = {
                "onpolicy_rho": float(rho_geo.mean()),
                "onpolicy_rho_min": float(rho_geo.min()),
                "onpolicy_rho_max": float(rho_geo.max()),
            }
        grad = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.rl.grad_clip)
        if hasattr(grad, "full_tensor"):  # FSDP: the total norm is a replicated DTensor
            grad = grad.full_tensor()
        optimizer.step()
        stats["grad_norm"] += float(grad) / m
        stats["turns"] += len(batch) * live
        stats["tokens"] += tokens * live
    model.eval()
    if fsdp is not None:  # FSDP hook: the whole minibatches' statistics
        stats = fsdp.reduce_stats(stats, ("loss", "kept", "weight", "turns", "tokens", "padding"))
    n = max(stats["turns"], 1.0)
    out = {
        "loss": stats["loss"],
        "grad_norm": stats["grad_norm"],
        "turns": stats["turns"],
        "tokens": stats["tokens"],
        "micro_steps": stats["micro"],
        "padding_micro_steps": stats["padding"],
        **onpolicy,
    }
    if not regression:
        out |= {"masked_frac": 1.0 - stats["kept"] / n, "mean_weight": stats["weight"] / n}
    return out


UPDATE_METRICS = {
    "loss": "loss/policy",
    "masked_frac": "is/masked_frac",
    "mean_weight": "is/mean_weight",
    "onpolicy_rho": "is/onpolicy_rho",
    "onpolicy_rho_min": "is/onpolicy_rho_min",
    "onpolicy_rho_max": "is/onpolicy_rho_max",
    "grad_norm": "train/grad_norm",
    "turns": "train/turns",
    "tokens": "train/tokens",
    "micro_steps": "train/micro_steps",
    "padding_micro_steps": "train/padding_micro_steps",
}
"""The metric name of each statistic :func:`update` returns (the namespaces: ``milepost.tracking``)."""


def rollout_stats(episodes: list[Episode]) -> dict[str, float]:
    n = max(len(episodes), 1)
    turns = [t for ep in episodes for t in ep.turns]
    nt = max(len(turns), 1)
    return {
        "rollout/success": sum(ep.success for ep in episodes) / n,
        "rollout/reward": sum(t.reward for t in turns) / n,  # the environment's reward per episode
        "rollout/turns": len(turns) / n,
        "rollout/format_errors": sum(t.reward_terms["format"] < 0 for t in turns) / nt,
        "rollout/invalid_actions": sum(t.reward_terms["valid"] < 0 for t in turns) / nt,
        "rollout/correct_actions": sum(t.correct_actions for t in turns) / nt,
        "rollout/subgoals": sum(len(t.new_subgoals) for t in turns) / n,
        "rollout/completion_tokens": sum(len(t.completion_ids) for t in turns) / nt,
        "rollout/max_length": sum(t.finish_reason == "length" for t in turns) / nt,
    }


def played_tasks(episodes: list[Episode]) -> list[str]:
    """The distinct task ids of a batch of episodes, in the order first played (a ``metrics.jsonl`` row's
    ``tasks``: not a metric, so no tracker backend receives it)."""
    return list(dict.fromkeys(str(ep.task_id) for ep in episodes))


def evaluate_policy(cfg: TrainConfig, backend: Backend, out: Path, label: str, progress: bool) -> dict[str, Any]:
    """Evaluate the in-memory policy on the dataset's test split (``cfg.eval``)."""
    settings = agent_settings(cfg)
    spec = EvalSpec(
        env=cfg.env.name,
        data=cfg.data,
        policy=label,
        n=cfg.eval.n,
        ks=cfg.eval.ks,
        levels=cfg.eval.levels,
        limit=cfg.eval.limit,
        env_kwargs=cfg.env.env_kwargs(),
        settings=settings,
        seed=cfg.seed,
        agent=cfg.agent.agent_kind,
    )
    return evaluate(spec, out, progress=progress, policy=BackendPolicy(backend, settings), agent=make_agent(cfg))


def _curriculum(cfg: TrainConfig, pool: list[Any]) -> FailureCurriculum:
    return FailureCurriculum(pool, cfg.mira.fail_boost, cfg.mira.similar_boost)


def _end_phase(
    cfg: TrainConfig,
    mira: MiRA,
    curriculum: FailureCurriculum | None,
    outcomes: list[EpisodeOutcome],
    model: Any,
    pool: list[Any],
) -> dict[str, float]:
    """End of a MiRA phase: re-weight the curriculum from its failures, then filter it with V(s_0, g)."""
    if curriculum is None:
        return {}
    level_fail = curriculum.update(outcomes)
    stats = {f"curriculum/fail_{lv}": f for lv, f in sorted(level_fail.items())}
    m = cfg.mira
    if m.filter_low > 0 or m.filter_high < 1:
        v0 = mira.initial_values(model, [t.task_id for t in pool])
        stats["curriculum/filtered"] = float(curriculum.filter(v0, m.filter_low, m.filter_high, cfg.rl.tasks_per_iter))
    if m.generate > 0:  # new tasks near the failures join the pool
        stats |= generate_near_failures(cfg, curriculum, outcomes)
    return stats


@dataclass
class Iteration:
    """One iteration's rollouts and timings, as :meth:`RLRun.collect` hands them to the later phases."""

    index: int  # 0-based; the checkpoint and the logged row say ``index + 1`` iterations done
    phase: Phase
    pool: list[Any]
    rng: random.Random  # every random choice of the iteration: tasks, minibatch order, critic fit
    episodes: list[Episode]
    sync_s: float
    started: float  # perf_counter stamps: rollout start and end, update end, critic-fit end
    played: float
    updated: float = 0.0
    fitted: float = 0.0
    critic: Any = None  # MiRA's critic samples of the usable episodes (scored, then fitted)
    draw: dict[str, float] = field(default_factory=dict)  # the curriculum's lean on its targeted tasks


class RLRun:
    """One session of ``milepost train``: the run's model, optimizer, rollout source, tracker and MiRA state,
    built (or restored from ``RUN``'s last checkpoint) before anything is written, and the phases of an
    iteration as methods that :func:`train_rl` calls in order.

    Under ``torchrun`` with several processes the model is trained with FSDP2 (``milepost.distributed.fsdp``):
    rank 0 generates and writes, every rank trains on its share of each minibatch.
    """

    def __init__(self, cfg: TrainConfig, out_dir: str | Path, *, resume: bool = False) -> None:
        self.cfg = cfg
        self.fsdp = fsdp = fsdp_setup(cfg)  # FSDP hook: None unless torchrun started several processes
        self.main = fsdp is None or fsdp.is_main
        self.run_dir = run_dir = Path(out_dir)
        self.config_yaml = to_yaml(cfg)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.pools: dict[str, list[Any]] = {}
        with start_guard(run_dir):  # a start that fails here leaves no files behind
            for phase in cfg.rl.curriculum or [phase_at(cfg, 0)]:
                self.pool_of(phase)  # every phase's tasks exist before anything is written
            run_dir.mkdir(parents=True, exist_ok=True)
            write_run_config(run_dir, self.config_yaml, resume=resume)
            # metrics.jsonl + logging.backends; checked before training
            self.tracker = Tracker(cfg, run_dir, enabled=self.main)
            ckpt = latest_checkpoint(run_dir) if resume else None

            def load() -> tuple[Any, Any]:
                if ckpt is not None:
                    return load_model(ckpt, *resolve_device_dtype(cfg.device, "float32"))
                return load_policy(cfg, run_dir)

            # FSDP hook: rank 0 alone loads (and builds tiny:); the others build the architecture on the meta device
            model, self.tokenizer = load() if fsdp is None else fsdp.load(load)
            self.pad_id, eos_ids = special_ids(model, self.tokenizer)
            if cfg.rl.activation_checkpointing:
                enable_activation_checkpointing(model)
            if fsdp is not None:  # FSDP hook: shard rank 0's weights; rank 0 keeps an unsharded copy for hf rollouts
                model = fsdp.shard(model)
            self.model = model
            self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=cfg.rl.weight_decay)
            self.mira = MiRA(cfg, model, self.pad_id, min(eos_ids)) if cfg.mira.enabled else None
            self.curricula: dict[str, FailureCurriculum] = {}
            self.phase_outcomes: list[EpisodeOutcome] = []
            self.start = 0
            if ckpt is not None:
                self._restore(ckpt)
            if fsdp is None:
                source: RolloutSource = make_rollout_source(cfg, model, self.tokenizer, run_dir)
            else:  # FSDP hook: rank 0's generator; pushes gather the shards
                source = fsdp.rollout_source(cfg, model, self.tokenizer, run_dir)
            if cfg.rollout.workers:  # Ray actors play the rollouts; each sync also pushes the weights to them
                from milepost.distributed.rollout import WorkerSource

                source = WorkerSource(cfg, source, self.tokenizer, run_dir)
            self.source = source
            source.sync(model, self.tokenizer, self.start)  # the generator starts on the weights training starts from
        # Rows a killed session wrote after its last checkpoint are dropped by the tracker when this session logs
        # its first row (Tracker._begin), for SFT and RL alike.
        self.settings = agent_settings(cfg, batch_size=cfg.rl.tasks_per_iter * cfg.rl.samples_per_task)
        # FSDP: rank 0 alone generates
        self.policy: Any = BackendPolicy(source.backend, self.settings) if self.main else None
        self._make: Any = None

    def pool_of(self, phase: Phase) -> list[Any]:
        """The training tasks of a curriculum phase's levels (selected once per level set)."""
        if phase.levels not in self.pools:
            self.pools[phase.levels] = select_tasks(self.cfg, "train", phase.levels or None)
        return self.pools[phase.levels]

    def _restore(self, ckpt: Path) -> None:
        """The optimizer, the iteration and MiRA's critics, curricula and phase outcomes of ``ckpt``."""
        cfg, fsdp, optimizer = self.cfg, self.fsdp, self.optimizer
        state, meta = load_checkpoint_state(ckpt, last_step=cfg.rl.iterations)
        check_learning_rate(state, ckpt, cfg.rl.lr, cfg.rl.weight_decay)  # a constant rate: the config's
        load_optimizer = optimizer.load_state_dict if fsdp is None else fsdp.optimizer_loader(self.model, optimizer)
        restore_state("optimizer", load_optimizer, state["optimizer"], ckpt)
        self.start = meta.step
        extra = state.get("extra_state") or {}
        if self.mira is not None and "mira" in extra:
            self.mira.load_state_dict(extra["mira"], self.model)
            self.phase_outcomes = [EpisodeOutcome(*o) for o in extra["phase_outcomes"]]
            for levels, cur_state in extra["curricula"].items():
                self.curricula[levels] = _curriculum(cfg, self.pool_of(Phase(levels=levels, iterations=1)))
                self.curricula[levels].load_state_dict(cur_state)

    def play(self, tasks: list[Any], seed: int) -> list[Episode]:
        """``rl.samples_per_task`` episodes of each task with the rollout source's policy (or its Ray actors)."""
        cfg = self.cfg
        if self._make is None:
            self._make = env_factory(cfg, tasks[0].size)
        jobs = [Job(t, s) for t in tasks for s in range(cfg.rl.samples_per_task)]
        remote = getattr(self.source, "play", None)  # rollout.workers: the Ray actors play them
        if remote is not None:
            return remote(jobs, seed)
        return run_episodes(
            self._make, jobs, self.policy, self.settings, seed=seed, progress=False, agent=make_agent(cfg)
        )

    def warm_up_critics(self) -> None:
        """MiRA, first session only: rollouts of the initial policy train the critics before any policy update."""
        cfg, mira = self.cfg, self.mira
        if mira is None or self.start != 0:
            return
        for w in range(cfg.mira.warmup_iterations):
            rng = random.Random(f"{cfg.seed}:warmup:{w}")
            pool = self.pool_of(phase_at(cfg, 0))
            episodes = self.play(rng.sample(pool, min(cfg.rl.tasks_per_iter, len(pool))), cfg.seed * 1_000_003 - 1 - w)
            usable = [ep for ep in episodes if ep.turns]
            crit = mira.samples(self.model, usable)
            warm = mira.quality(usable, crit)
            warm |= mira.fit(crit, rng)
            row = {"iteration": 0, "phase": "warmup", "warmup": w + 1, **rollout_stats(episodes), **warm}
            self.tracker.log(row | {"tasks": played_tasks(episodes)})

    def collect(self, it: int) -> Iteration:
        """Sample the phase's tasks (MiRA's curriculum or uniformly), push the weights to the generator when it
        is ``rollout.sync_every`` iterations behind, and play the episodes (under FSDP rank 0 plays)."""
        cfg, mira, source = self.cfg, self.mira, self.source
        phase = phase_at(cfg, it)
        pool = self.pool_of(phase)
        rng = random.Random(f"{cfg.seed}:{it}")
        n_tasks = min(cfg.rl.tasks_per_iter, len(pool))
        draw: dict[str, float] = {}
        if mira is not None and cfg.mira.curriculum:
            if phase.levels not in self.curricula:
                self.curricula[phase.levels] = _curriculum(cfg, pool)
            tasks = self.curricula[phase.levels].sample(rng, n_tasks)
            draw = self.curricula[phase.levels].draw_stats(tasks)
        else:
            tasks = uniform_draw(cfg.rl.task_draw, rng, pool, n_tasks)
        if mira is not None and mira.needs_reference() and (it % cfg.mira.phase_iterations == 0 or mira.ref is None):
            mira.refresh_reference(self.model)
        sync_s = source.sync(self.model, self.tokenizer, it) if it - source.version >= cfg.rollout.sync_every else 0.0
        started = time.perf_counter()
        if self.fsdp is None:
            episodes = self.play(tasks, cfg.seed * 1_000_003 + it)
        else:  # FSDP hook: rank 0 plays, every rank gets the episodes
            episodes = self.fsdp.on_main(self.play, tasks, cfg.seed * 1_000_003 + it)
        played = time.perf_counter()
        for ep in episodes:
            ep.meta["policy_version"] = source.version
        return Iteration(it, phase, pool, rng, episodes, sync_s, started, played, draw=draw)

    def score(self, batch: Iteration) -> tuple[list[TurnSample], dict[str, float]]:
        """The turns that enter the loss with their advantages: MiRA's critics', else ``rl.estimator``'s; and
        MiRA's statistics of them."""
        if self.mira is None:
            return turn_samples(batch.episodes, self.cfg, iteration=batch.index), {}
        usable = [ep for ep in batch.episodes if ep.turns]
        batch.critic = self.mira.samples(self.model, usable)
        adv, stats = self.mira.advantages(usable, batch.critic, batch.index)
        return turn_samples(batch.episodes, self.cfg, adv), stats

    def update_policy(self, batch: Iteration, samples: list[TurnSample]) -> tuple[dict[str, float], dict[str, float]]:
        """M minibatch steps on the turns (:func:`update`); then MiRA fits its critics and, at the end of a MiRA
        phase, re-weights and filters the curriculum. Returns (update statistics, MiRA statistics)."""
        cfg, mira = self.cfg, self.mira
        ref = mira.ref if mira is not None else None
        upd = (
            update(self.model, self.optimizer, samples, cfg, self.pad_id, batch.rng, ref, self.fsdp) if samples else {}
        )
        batch.updated = time.perf_counter()
        mstats: dict[str, float] = {}
        if mira is not None:
            mstats |= mira.fit(batch.critic, batch.rng)
            self.phase_outcomes += [EpisodeOutcome(ep.task_id, ep.level, ep.success) for ep in batch.episodes]
        batch.fitted = time.perf_counter()
        if mira is not None and (batch.index + 1) % cfg.mira.phase_iterations == 0:
            curriculum = self.curricula.get(batch.phase.levels)
            mstats |= _end_phase(cfg, mira, curriculum, self.phase_outcomes, self.model, batch.pool)
            self.phase_outcomes = []
        return upd, mstats

    def log(self, batch: Iteration, upd: dict[str, float], mstats: dict[str, float]) -> dict[str, Any]:
        """The iteration's row of ``metrics.jsonl`` (rollout, update, staleness, MiRA and timing metrics), sent to
        the tracker by rank 0; returned for the progress bar."""
        source, it = self.source, batch.index
        row: dict[str, Any] = {"iteration": it + 1, "phase": batch.phase.levels, **rollout_stats(batch.episodes)}
        row |= {UPDATE_METRICS[k]: v for k, v in upd.items()}
        # Policy it's behaviour came from, and how many updates behind the trainer's weights it was.
        row |= {"rollout/policy_version": source.version, "train/staleness": it - source.version}
        row |= batch.draw | mstats
        # the tasks played, in play order: a curriculum's draws cannot be recomputed from the seed afterwards, and
        # experiments/trained_tasks_eval.py evaluates a run on exactly the tasks it trained on
        row["tasks"] = played_tasks(batch.episodes)
        t0, t1, t2, t3 = batch.started, batch.played, batch.updated, batch.fitted
        row |= {
            "perf/rollout_s": t1 - t0,
            "perf/update_s": t2 - t1,
            "perf/critic_s": t3 - t2,
            "perf/rollout_share": (t1 - t0) / max(t3 - t0, 1e-9),
            "perf/sync_s": batch.sync_s,
        }
        if self.main:
            self.tracker.log(row)
        return row

    def checkpoint(self, done: int) -> None:
        """``RUN/checkpoint-DONE``: weights, optimizer and MiRA's state (under FSDP gathered to rank 0)."""
        mira = self.mira
        extra_state = None
        if mira is not None:
            extra_state = {
                "mira": mira.state_dict(),
                "curricula": {lv: c.state_dict() for lv, c in self.curricula.items()},
                "phase_outcomes": [tuple(o) for o in self.phase_outcomes],
            }
        args = (self.run_dir, done, self.model, self.tokenizer, self.optimizer)
        if self.fsdp is not None:  # FSDP hook: gathered to rank 0, written as an ordinary checkpoint
            self.fsdp.save_checkpoint(*args, self.config_yaml)
        else:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                save_checkpoint(*args, None, self.config_yaml, extra_state=extra_state)

    def evaluate(self, folder: Path, done: int, *, progress: bool, final: bool = False) -> None:
        """Evaluate the current weights into ``folder`` (every rank syncs; rank 0 plays), then record the result in
        ``eval.jsonl`` and the logging backends at iteration ``done``."""
        self.source.sync(self.model, self.tokenizer, done)
        if self.main:
            result = evaluate_policy(self.cfg, self.source.backend, folder, self.cfg.name, progress=progress)
            append_jsonl(
                self.run_dir / "eval.jsonl",
                {"iteration": done, "levels": result["levels"], **({"final": True} if final else {})},
            )
            self.tracker.log_eval(done, result["levels"])
        if self.fsdp is not None:  # FSDP hook: the other ranks wait on the gloo group, not in the next NCCL collective
            self.fsdp.wait_for_main()

    def close(self) -> None:
        """Close the trackers, draw ``RUN/training.png`` from ``metrics.jsonl`` (rank 0), stop the generator."""
        self.tracker.close()
        if self.main:
            plot_training_log(self.run_dir)
        self.source.close()

    def save_final(self) -> Path:
        """``RUN/final``: the trained model and tokenizer (under FSDP gathered and written by rank 0)."""
        final = self.run_dir / "final"
        if self.fsdp is not None:  # FSDP hook: the gathered model, written by rank 0
            self.fsdp.save_final(self.model, self.tokenizer, final)
        else:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                self.model.save_pretrained(final)
                self.tokenizer.save_pretrained(final)
        if self.main:
            write_card(final, card_from_config(self.cfg), made_by="milepost train")
        return final


def train_rl(
    cfg: TrainConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
    final_eval: bool = False,
    on_episodes: Callable[[int, list[Episode]], None] | None = None,
) -> Path:
    """Run REINFORCE from ``cfg.model`` (or resume ``out_dir``) and return the final model directory.

    Each iteration is collect -> score -> update -> log -> checkpoint -> evaluate (:class:`RLRun`'s phases).
    ``final_eval`` evaluates the final policy into ``RUN/eval`` before the trackers close, so its results reach
    ``eval.jsonl`` and every logging backend like the periodic evaluations'.
    ``stop_after`` ends the run after that many iterations as if it had been killed (for resume tests).
    ``on_episodes(it, episodes)`` sees each iteration's rollout episodes (``it`` from 0) before the update, on
    the process that plays them (e.g. to keep some iterations' episodes for ``milepost credit audit``).
    """
    run = RLRun(cfg, out_dir, resume=resume)
    run.warm_up_critics()
    bar = progress_bar(
        range(run.start, cfg.rl.iterations),
        desc=f"train [{cfg.name}]",
        enabled=progress and run.main,
        initial=run.start,
        total=cfg.rl.iterations,
    )
    for it in bar:
        batch = run.collect(it)
        if on_episodes is not None and run.main:
            on_episodes(it, batch.episodes)
        samples, mstats = run.score(batch)
        upd, fitted = run.update_policy(batch, samples)
        row = run.log(batch, upd, mstats | fitted)
        bar.set_postfix(success=f"{row['rollout/success']:.2f}", masked=f"{upd.get('masked_frac', 0):.2f}")
        done = it + 1
        if done % cfg.checkpoint_every == 0 or done == cfg.rl.iterations or done == stop_after:
            run.checkpoint(done)
        if cfg.eval.every and done % cfg.eval.every == 0 and done < cfg.rl.iterations:
            run.evaluate(run.run_dir / f"eval-{done:06d}", done, progress=False)
        if stop_after is not None and done >= stop_after:
            bar.close()
            run.close()
            return run.run_dir
    bar.close()
    if final_eval:
        run.evaluate(run.run_dir / "eval", cfg.rl.iterations, progress=progress, final=True)
    run.close()
    return run.save_final()
