"""MiRA inside the RL loop: critics, shaped rewards, doubly-robust advantages, reference policy, curriculum.

Per iteration (``trainer.train_rl`` with ``mira.enabled``):

1. the batch's states (each turn's prompt) get trunk features (``trunk`` critics) and their targets: the
   progress label y_t and the outcome R;
2. the critics, as they were *before* seeing this batch, score it: P(s_t), V(s_t) (an honest out-of-sample
   check, logged as the value critic's AUROC and the potential's MSE);
3. r~_t = r_t + c (gamma P(s_t+1) - P(s_t)) and the advantage (doubly-robust by default) per turn, then the
   batch normalisation and the alpha-weighted step reward of the plain trainer;
4. the critics train on their replay buffer, now holding this batch too.

The reference policy pi_ref of the MSE objective (or the KL term) is the policy at the start of each phase
of ``mira.phase_iterations``; the failure-driven curriculum re-weights the task mix at the end of each phase.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from milepost.rewards.milestone import TRAJECTORY_REWARDS, RewardContext
from milepost.rewards.shaping import progress_labels, shaped_rewards
from milepost.training.config import TrainConfig
from milepost.training.critics import (
    Critic,
    CriticSample,
    ReplayBuffer,
    auroc,
    kendall_tau_b,
    trunk_features,
)
from milepost.training.returns import (
    baseline_advantages,
    combine_with_steps,
    doubly_robust_advantages,
    gae_advantages,
)
from milepost.types import Episode


def trajectory_rewards(ep: Episode, cfg: TrainConfig) -> torch.Tensor:
    """r_t of ``rl.reward`` for one episode, ``(T,)``."""
    name = cfg.rl.reward
    if cfg.rl.subgoal_decomposition and name == "outcome":
        name = "milestone"
    ctx = RewardContext(cfg.env.max_steps, cfg.rl.milestone_weight, cfg.rl.milestone_reward)
    return TRAJECTORY_REWARDS.get(name)(ep, ctx)


def step_rewards(ep: Episode) -> torch.Tensor:
    """r_step_t = r_format_t + r_valid_t, ``(T,)``."""
    return torch.tensor([t.reward_terms["format"] + t.reward_terms["valid"] for t in ep.turns], dtype=torch.float32)


def shaping_coef(cfg: TrainConfig, iteration: int) -> float:
    """c at ``iteration``: 0 without the potential critic, else ``shaping_coef`` annealed linearly."""
    m = cfg.mira
    if not m.potential:
        return 0.0
    if m.shaping_anneal <= 0:
        return m.shaping_coef
    return m.shaping_coef * max(0.0, 1.0 - iteration / m.shaping_anneal)


def episode_potentials(predicted: torch.Tensor, final_progress: float, terminal: str) -> torch.Tensor:
    """P(s_0) .. P(s_T), ``(T + 1,)``: the critic's ``predicted`` potentials of the T states an episode acted in,
    then the potential of the state after its last turn by the ``mira.terminal_potential`` rule.

    ``zero``: P(s_T) = 0, so the discounted shaping terms sum to -P(s_0) whatever the policy did (policy-invariant
    shaping). ``label``: P(s_T) = ``final_progress`` (the true k / K of the final state), so they sum to
    gamma^T k / K - P(s_0), a bonus for the subgoals reached.
    """
    end = final_progress if terminal == "label" else 0.0
    return torch.cat([predicted.float(), torch.tensor([end])])


def episode_advantages(
    rewards: torch.Tensor,
    potentials: torch.Tensor,
    values: torch.Tensor,
    outcome: float,
    cfg: TrainConfig,
    coef: float,
) -> torch.Tensor:
    """MiRA's per-turn advantage of one episode before batch normalisation.

    Args:
        rewards: ``(T,)`` r_t.
        potentials: ``(T + 1,)`` P(s_0) .. P(s_T) (P(s_T) already set by the terminal rule).
        values: ``(T + 1,)`` V(s_0) .. V(s_T) with V(s_T) = 0.
        outcome: R in {0, 1}.
        cfg: the run's config (``mira.estimator``, ``lam``, ``gae_lambda``; ``rl.gamma``).
        coef: the shaping coefficient c of this iteration.
    """
    gamma = cfg.rl.gamma
    shaped = shaped_rewards(rewards, potentials, gamma, coef)
    m = cfg.mira
    if m.estimator == "mc":
        return baseline_advantages(shaped, values, gamma=gamma)
    if m.estimator == "gae":
        return gae_advantages(shaped, values, gamma=gamma, lam=m.gae_lambda)
    lam = 1.0 if m.estimator == "td" else m.lam
    return doubly_robust_advantages(shaped, values, outcome, gamma=gamma, lam=lam)


class MiRA:
    """Critics, replay buffer and reference policy of one MiRA run."""

    def __init__(self, cfg: TrainConfig, policy: Any, pad_id: int, eos_id: int) -> None:
        self.cfg = cfg
        m = cfg.mira
        common = {
            "hidden": policy.config.hidden_size,
            "vocab_size": policy.config.vocab_size,
            "pad_id": pad_id,
            "eos_id": eos_id,
            "size": m.critic_size,
        }
        self.potential = Critic(m.critic, "mse", lr=m.potential_lr, seed=cfg.seed + 1, **common)
        self.value = Critic(m.critic, "bce", lr=m.value_lr, seed=cfg.seed + 2, **common)
        self.buffer = ReplayBuffer(m.buffer)
        self.pad_id = pad_id
        self.ref: Any = None
        self.first_prompts: dict[str, list[int]] = {}

    # -- states -----------------------------------------------------------------------------------------
    def samples(self, policy: Any, episodes: Sequence[Episode]) -> list[list[CriticSample]]:
        """Per episode, the critic samples of its states s_0 .. s_T-1 (features computed now)."""
        prompts = [list(t.prompt_ids) for ep in episodes for t in ep.turns]
        feats = trunk_features(policy, prompts, self.pad_id) if self.cfg.mira.critic == "trunk" and prompts else None
        out, i = [], 0
        for ep in episodes:
            y = progress_labels(ep)
            rows = []
            for t, turn in enumerate(ep.turns):
                f = feats[i] if feats is not None else None
                rows.append(CriticSample(list(turn.prompt_ids), f, float(y[t]), float(ep.success)))
                i += 1
            out.append(rows)
            if ep.turns:
                self.first_prompts.setdefault(ep.task_id, list(ep.turns[0].prompt_ids))
        return out

    # -- advantages ---------------------------------------------------------------------------------------
    def advantages(
        self, episodes: Sequence[Episode], samples: Sequence[list[CriticSample]], iteration: int
    ) -> tuple[list[torch.Tensor], dict[str, float]]:
        """Per-turn advantages of the batch (normalised as ``rl.normalisation`` says) and critic statistics."""
        cfg, m = self.cfg, self.cfg.mira
        flat = [s for rows in samples for s in rows]
        p_all, v_all = self.predict(flat)
        coef = shaping_coef(cfg, iteration)
        raw, steps, i = [], [], 0
        for ep, rows in zip(episodes, samples):
            n = len(rows)
            y = progress_labels(ep)
            potentials = episode_potentials(p_all[i : i + n], float(y[-1]), m.terminal_potential)
            values = torch.cat([v_all[i : i + n], torch.zeros(1)])
            i += n
            rewards = trajectory_rewards(ep, cfg)
            raw.append(episode_advantages(rewards, potentials, values, float(ep.success), cfg, coef))
            steps.append(step_rewards(ep))
        if not any(a.numel() for a in raw):
            return [torch.zeros(a.shape[0]) for a in raw], {}
        ids = sorted({ep.task_id for ep in episodes})
        groups = [ids.index(ep.task_id) for ep in episodes]
        rl = cfg.rl
        out = combine_with_steps(raw, steps, rl.alpha, rl.normalisation, groups, rl.std_floor)
        adv = torch.cat(raw)
        stats = self._stats(episodes, flat, p_all, v_all)
        stats["mira/shaping_coef"] = coef
        stats["mira/raw_adv_mean"] = float(adv.mean())
        stats["mira/raw_adv_std"] = float(adv.std(unbiased=False))
        return out, stats

    def predict(self, flat: list[CriticSample]) -> tuple[torch.Tensor, torch.Tensor]:
        """(P(s), V(s)) of every sample, ``(N,)`` each."""
        if not flat:
            return torch.zeros(0), torch.zeros(0)
        values = self.value.predict(flat) if self.cfg.mira.value_critic else torch.zeros(len(flat))
        return self.potential.predict(flat), values

    def quality(self, episodes: Sequence[Episode], samples: Sequence[list[CriticSample]]) -> dict[str, float]:
        """The critics' statistics on a batch they have not trained on (see :meth:`critic_stats`)."""
        flat = [s for rows in samples for s in rows]
        return self._stats(episodes, flat, *self.predict(flat))

    def _stats(
        self, episodes: Sequence[Episode], flat: list[CriticSample], p_all: torch.Tensor, v_all: torch.Tensor
    ) -> dict[str, float]:
        """:meth:`critic_stats`, without the value critic's when ``mira.value_critic`` is off (V = 0 says nothing)."""
        stats = self.critic_stats(episodes, flat, p_all, v_all)
        return stats if self.cfg.mira.value_critic else {k: v for k, v in stats.items() if "value" not in k}

    @staticmethod
    def critic_stats(
        episodes: Sequence[Episode], flat: list[CriticSample], p_all: torch.Tensor, v_all: torch.Tensor
    ) -> dict[str, float]:
        """Out-of-sample quality of the critics on a batch they have not trained on."""
        if not flat:
            return {}
        outcome = torch.tensor([s.outcome for s in flat])
        progress = torch.tensor([s.progress for s in flat])
        first = [i for i, is_first in enumerate(_first_flags(episodes)) if is_first]
        completion = torch.tensor(
            [ep.meta.get("subgoals_completed", 0) / max(ep.meta.get("num_subgoals", 0), 1) for ep in episodes]
        )
        success = torch.tensor([float(ep.success) for ep in episodes])
        stats = {
            "critic/value_auroc": auroc(v_all, outcome),
            "critic/value_auroc_s0": auroc(v_all[first], outcome[first]) if first else float("nan"),
            "critic/potential_mse": float(((p_all - progress) ** 2).mean()),
            "critic/completion_tau": kendall_tau_b(completion, success),
        }
        # Undefined statistics (one outcome class only) are left out: metrics.jsonl stays strict JSON.
        return {k: v for k, v in stats.items() if not math.isnan(v)}

    # -- critic training ----------------------------------------------------------------------------------
    def fit(self, samples: Sequence[list[CriticSample]], rng: random.Random) -> dict[str, float]:
        """Add the batch to the replay buffer and train both critics on it; returns their mean losses."""
        self.buffer.add([s for rows in samples for s in rows])
        m = self.cfg.mira
        losses: dict[str, list[float]] = {"potential": [], "value": []}
        if len(self.buffer) == 0:
            return {}
        for batch in self.buffer.batches(m.critic_batch, m.critic_epochs, rng):
            losses["potential"].append(self.potential.step(batch))
            if m.value_critic:
                losses["value"].append(self.value.step(batch))
        return {f"critic/{k}_loss": sum(v) / len(v) for k, v in losses.items() if v}

    # -- reference policy ----------------------------------------------------------------------------------
    def needs_reference(self) -> bool:
        return self.cfg.mira.objective == "mse" or self.cfg.mira.kl_coef > 0

    def refresh_reference(self, policy: Any) -> None:
        """pi_ref := the current policy (a frozen copy)."""
        self.ref = copy.deepcopy(policy).eval()
        for p in self.ref.parameters():
            p.requires_grad_(False)

    # -- value filter --------------------------------------------------------------------------------------
    def initial_values(self, policy: Any, task_ids: Sequence[str]) -> dict[str, float]:
        """V(s_0, g) of the tasks whose first prompt has been seen."""
        known = [tid for tid in task_ids if tid in self.first_prompts]
        if not known:
            return {}
        prompts = [self.first_prompts[tid] for tid in known]
        feats = trunk_features(policy, prompts, self.pad_id) if self.cfg.mira.critic == "trunk" else None
        samples = [CriticSample(p, None if feats is None else feats[i], 0.0, 0.0) for i, p in enumerate(prompts)]
        return dict(zip(known, self.value.predict(samples).tolist()))

    # -- checkpoint ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "potential": self.potential.state_dict(),
            "value": self.value.state_dict(),
            "buffer": self.buffer.state_dict(),
            "ref": None if self.ref is None else self.ref.state_dict(),
            "first_prompts": self.first_prompts,
        }

    def load_state_dict(self, state: dict[str, Any], policy: Any) -> None:
        self.potential.load_state_dict(state["potential"])
        self.value.load_state_dict(state["value"])
        self.buffer.load_state_dict(state["buffer"])
        self.first_prompts = dict(state["first_prompts"])
        if state["ref"] is not None:
            self.refresh_reference(policy)
            self.ref.load_state_dict(state["ref"])


def _first_flags(episodes: Sequence[Episode]) -> list[bool]:
    return [t == 0 for ep in episodes for t in range(len(ep.turns))]


_TEST_KEYS: dict[str, set[str]] = {}


def generate_near_failures(cfg: TrainConfig, curriculum: Any, outcomes: Sequence[Any]) -> dict[str, float]:
    """``mira.generate`` new tasks near a phase's failures, added to ``curriculum``'s pool (none equal to a test
    task of ``cfg.data``); returns the counts to log."""
    from milepost.datasets import load_tasks
    from milepost.training.curriculum import task_key

    if cfg.data not in _TEST_KEYS:
        _TEST_KEYS[cfg.data] = {task_key(t) for t in load_tasks(cfg.data, "test")}
    made = curriculum.generate(outcomes, cfg.mira.generate, cfg.seed, _TEST_KEYS[cfg.data])
    return {"curriculum/generated": float(len(made)), "curriculum/pool": float(len(curriculum.pool))}
