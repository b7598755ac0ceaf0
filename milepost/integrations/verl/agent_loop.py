"""milepost episodes inside verl: an agent loop that plays one episode token-in / token-out.

verl's agent-loop worker builds this loop for every dataset row whose ``agent_name`` is ``milepost_agent`` and
calls :meth:`MilepostAgentLoop.run`. The row's ``extra_info.task`` holds a milepost task (JSON, see
:mod:`milepost.integrations.verl.data`). Per turn: the prompt so far (token ids) goes to verl's server manager,
``generate`` answers with token ids and log-probs, the decoded text steps the milepost environment (which parses
the answer and scores it), and the next observation is appended as a user message through verl's
Continuous Token builder. The episode is one growing conversation, so the agent's sliding-window memory is not
used: every earlier turn stays in context, and ``rollout.response_length`` bounds the episode.

The output's ``response_mask`` is 1 on model tokens and 0 on observation tokens; ``response_logprobs`` are the
server's; ``reward_score`` is the outcome (1.0 solved, else 0.0) and the per-token rewards carry each turn's
trajectory reward r_t and step reward r_step_t, computed by milepost's own ``training.mira`` functions, in the
layout of :mod:`milepost.integrations.verl.turns` (read by the ``milepost`` advantage estimator). That per-token
layout reaches the estimator through verl's v1 trainer (``trainer.use_v1=True``, verl's default), which stores
:meth:`AgentLoopOutput.as_dict`.

Validation: verl's v1 trainer scores a validation sample as the sum of its ``rm_scores`` (here the sum of the
per-turn rewards, milestones and format penalties included) unless the sample reports ``acc``: its
``_val_metrics_update`` (verl/trainer/ppo/v1/trainer_base.py, verl 0.9.1) makes ``acc`` the ``val-core`` variable
when present, read from ``extra_fields["reward_extra_info"]``. The loop reports ``acc`` = 1.0 when solved, so
``val-core/.../acc/mean@N`` is the success rate.

Conventions (``milepost.integrations.conventions``, the keys every milepost adapter reports): the sample's
``extra_fields["turn_rewards"]`` is the environment's reward of every turn, and ``extra_fields["conventions"]``
holds T + 1 records, the start state's (as ``reset`` reports it) and then one per turn, each with
``goal_distance``, ``remaining_distance``, ``optimal_advantage`` (A* of that turn; None into a dead end),
``turn_rewards`` (so far) and ``env_state_hash`` (of the state after the turn).
"""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.trainer.ppo.v1 import AgentLoopManagerTQ

import milepost.integrations.verl.advantage  # noqa: F401 - registers the ``milepost`` estimator with verl
from milepost.agent.loop import Job, episode_seed
from milepost.agent.prompts import ANSWER_FORMAT, build_messages
from milepost.config import load_config
from milepost.envs import make_env
from milepost.integrations.conventions import ConventionTracker
from milepost.integrations.verl.turns import place_turn_rewards
from milepost.training.config import TrainConfig
from milepost.training.mira import step_rewards, trajectory_rewards
from milepost.types import Episode, Task, TerminationReason, Turn

AGENT_NAME = "milepost_agent"


class MilepostAgentLoopOutput(AgentLoopOutput):
    """verl's output plus the per-token rewards; ``as_dict`` (what the v1 trainer stores) writes them as
    ``rm_scores`` instead of the outcome alone on the last token."""

    token_rewards: list[float]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = super().as_dict()
        rewards = out.pop("token_rewards")
        out["rm_scores"] = torch.tensor(rewards[: out["responses"].shape[0]], dtype=torch.float32)
        return out


def observation_message(goal: str, observation: str, error: str | None) -> dict[str, str]:
    """The user message after a turn: the environment's rejection, if any, then the new observation."""
    content = build_messages(goal, observation)[1]["content"]
    if error:
        content = f"Rejected: {error}\n{content}"
    return {"role": "user", "content": content}


@register(AGENT_NAME)
class MilepostAgentLoop(AgentLoopBase):
    """Plays one milepost episode through verl's server manager (see the module docstring).

    Args:
        config_path: a milepost training config (YAML); its ``env``, ``agent.max_new_tokens``, ``rl.reward``
            and ``seed`` apply. Default: ``TrainConfig()``. Set it in the agent-loop config file
            (``configs/verl/agent_loop.yaml``), which verl passes to the constructor.
        *args, **kwargs: verl's ``AgentLoopBase`` arguments.
    """

    def __init__(self, *args: Any, config_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.milepost = load_config(TrainConfig, config_path)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        cfg = self.milepost
        task = Task.from_dict(_task_record(kwargs.get("extra_info")))
        env_kwargs = cfg.env.env_kwargs()
        env_kwargs["size"] = task.size
        env = make_env(task.env, **env_kwargs)
        seed = episode_seed(cfg.seed, Job(task, int(kwargs.get("session_id", 0))))
        obs, info = env.reset(seed=seed, options={"task": task})
        tracker = ConventionTracker()
        conventions: list[dict[str, Any]] = [dict(tracker.reset(env, info))]
        goal = env.goal_text()
        messages = build_messages(goal, obs, (), None, ANSWER_FORMAT)
        runtime_ids: list[int] = await self.ct_build_initial_tokens(messages)
        prompt_len = len(runtime_ids)
        mask: list[int] = []
        logprobs: list[float] = []
        turns: list[Turn] = []
        request_id = uuid4().hex
        reason = TerminationReason.CONTEXT_OVERFLOW
        metrics: dict[str, Any] = {}
        while True:
            budget = self.response_length - len(mask)
            if budget < 2:  # room for one model token and the observation token after it
                break
            params = dict(sampling_params)
            params["max_tokens"] = min(cfg.agent.max_new_tokens, budget - 1)
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=list(runtime_ids), sampling_params=params
            )
            if not out.token_ids:
                reason = TerminationReason.BACKEND_ERROR
                break
            answer_logprobs = list(out.log_probs) if out.log_probs else None
            merged, mask, merged_logprobs = await self.ct_merge_assistant_token(
                runtime_ids,
                list(out.token_ids),
                mask,
                logprobs if answer_logprobs is not None else None,
                assistant_logprobs=answer_logprobs,
            )
            runtime_ids = merged.token_ids
            logprobs = merged_logprobs if merged_logprobs is not None else [0.0] * len(mask)
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            obs_before = obs
            obs, reward, terminated, truncated, info = env.step(text)
            conventions.append(dict(tracker.step(env, float(reward), info)))
            turns.append(
                Turn(
                    index=len(turns),
                    observation=obs_before,
                    text=text,
                    actions=info["actions"],
                    reward=float(reward),
                    reward_terms=info["reward_terms"],
                    subgoals_completed=list(info["subgoals_completed"]),
                    remaining_distance=info["remaining_distance"],
                    prompt_ids=runtime_ids[: len(runtime_ids) - len(out.token_ids)],
                    completion_ids=list(out.token_ids),
                    logprobs=answer_logprobs,
                    correct_actions=info["correct_actions"],
                    error=info["error"],
                    n_requested=info["n_requested"],
                    new_subgoals=list(info["new_subgoals"]),
                )
            )
            # The observation follows every turn, the last one too: the step reward's token (turns.py).
            # The answer is already in the token stream (the model's own ids): only the user message is new.
            messages = [*messages, {"role": "assistant", "content": text}]
            previous = list(messages)
            messages.append(observation_message(goal, obs, info["error"]))
            merged, mask, merged_logprobs = await self.ct_merge_context_msg(
                previous, messages, runtime_ids, mask, logprobs
            )
            runtime_ids = merged.token_ids
            logprobs = merged_logprobs if merged_logprobs is not None else logprobs
            if terminated or truncated:
                reason = TerminationReason(info["termination_reason"])
                break
        episode = Episode(
            task_id=task.task_id,
            policy="verl",
            sample=int(kwargs.get("session_id", 0)),
            seed=seed,
            termination=reason,
            success=reason is TerminationReason.SOLVED,
            goal_distance=task.goal_distance,
            steps=len(turns),
            level=task.level,
            turns=turns,
        )
        traj = trajectory_rewards(episode, cfg).tolist() if turns else []
        step = step_rewards(episode).tolist() if turns else []
        response_ids = runtime_ids[prompt_len:][: self.response_length]
        mask = mask[: self.response_length]
        has_logprobs = bool(turns) and all(t.logprobs for t in turns)
        return MilepostAgentLoopOutput(
            prompt_ids=runtime_ids[:prompt_len],
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=logprobs[: self.response_length] if has_logprobs else None,
            reward_score=1.0 if episode.success else 0.0,
            num_turns=2 * len(turns) + 1,
            metrics=metrics,
            token_rewards=place_turn_rewards(mask, traj, step),
            extra_fields={
                # verl's validation reads its headline score from here (see the module docstring).
                "reward_extra_info": {"acc": 1.0 if episode.success else 0.0},
                "turn_scores": [t + s for t, s in zip(traj, step)],
                "tool_rewards": [],
                "turn_rewards": list(tracker.turn_rewards),
                "conventions": conventions,
                "milepost": {
                    "task_id": task.task_id,
                    "success": episode.success,
                    "termination": reason.value,
                    "steps": len(turns),
                },
            },
        )


class MilepostAgentLoopManager(AgentLoopManagerTQ):
    """verl's v1 agent-loop manager, unchanged. Naming it in
    ``actor_rollout_ref.rollout.agent.agent_loop_manager_class`` makes verl import this module in its trainer
    process, which registers the ``milepost`` advantage estimator where the trainer looks it up."""


def _task_record(extra_info: Any) -> dict[str, Any]:
    """The task of a dataset row: ``extra_info.task``, a JSON string (or an already decoded dict)."""
    if not isinstance(extra_info, dict) or "task" not in extra_info:
        raise ValueError("milepost_agent: the dataset row has no extra_info.task (milepost.integrations.verl.data)")
    task = extra_info["task"]
    return dict(json.loads(task) if isinstance(task, str) else task)
