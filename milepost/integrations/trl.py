"""Run milepost environments inside TRL's ``GRPOTrainer`` (``pip install 'milepost[trl]'``).

TRL's multi-turn hook is ``rollout_func(prompts, trainer) -> dict``: it returns ``prompt_ids``,
``completion_ids`` and ``logprobs`` per rollout, may add ``env_mask`` (1 on tokens the model wrote, 0 on tokens
the environment wrote, which the loss skips), and every other key is passed to the reward functions. Here each
dataset row is one milepost task; :class:`MilepostRollout` plays one whole episode per prompt with milepost's
batched episode loop (``milepost.agent.loop.run_episodes``), sampling from the model TRL is training through
milepost's ``hf`` backend (token ids in, token ids and behaviour log-probs out).

One episode becomes one GRPO sequence, token for token as the model saw it::

    prompt_ids     = turn-1 prompt (milepost's goal + answer format + observation, chat-templated)
    completion_ids = answer_1  obs_2  answer_2  obs_3 ... answer_T
    env_mask       =  1 ... 1  0 .. 0  1 ... 1  0 .. 0      1 ... 1
    logprobs       = behaviour log-probs on answers, 0.0 on observation tokens

so turn t is generated from exactly the tokens TRL later scores it under (a growing conversation: each later
observation is a new user message, the previous answers stay in context; the sliding-window memory of
``milepost eval`` is not used, since a memory window would rewrite earlier context between turns).

The environment's reward terms (``outcome``, ``format``, ``valid``, ``milestone``; DESIGN: Contracts) become four
TRL reward functions, each the episode's sum of that term; :func:`reward_weights` gives their weights from
milepost's ``RewardWeights``, so TRL's weighted sum is the episode return of ``env.step``'s scalar reward.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.agent.prompts import build_messages
from milepost.envs import make_env
from milepost.errors import InputError
from milepost.integrations.transcript import (
    TERMS_FIELD,
    ConversationPolicy,
    Transcript,
    episode_terms,
    observation_message,
    reward_functions,
    reward_weights,
)
from milepost.types import Episode, Task

__all__ = [
    "TERMS_FIELD",
    "ConversationPolicy",
    "MilepostRollout",
    "Transcript",
    "episode_terms",
    "observation_message",
    "reward_functions",
    "reward_weights",
]


def prompt_key(prompt: Any) -> str:
    """A hashable key of a dataset prompt (chat messages or text) to find its task again."""
    return json.dumps(prompt, sort_keys=True)


@dataclass
class MilepostRollout:
    """A TRL ``rollout_func`` that plays milepost episodes, plus the dataset whose prompts name its tasks.

    Args:
        env: milepost environment name (``sudoku``, ``rushhour``, ``webshop``).
        tasks: the training tasks (e.g. ``milepost.datasets.load_tasks(path, "train")``).
        env_kwargs: keyword arguments of the environment (``size``, ``max_steps``, ``action_mode``...).
        max_new_tokens: tokens per answer at most.
        seed: run seed; each rollout's episode seed derives from it, the trainer step (and the call within the
            step), the task and the sample number, which counts across processes (:meth:`jobs`).
        max_context: context window (prompt + all turns) in tokens; default the model's.

    Use ``dataset()`` as ``train_dataset``, the instance as ``rollout_func`` and :func:`reward_functions` /
    :func:`reward_weights` as the reward; ``episodes`` holds the last batch of played episodes.
    """

    env: str
    tasks: Sequence[Task]
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_new_tokens: int = 64
    seed: int = 0
    max_context: int | None = None
    episodes: list[Episode] = field(default_factory=list, init=False)
    _by_prompt: dict[str, Task] = field(default_factory=dict, init=False, repr=False)
    _rows: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _round: tuple[int, int] = field(default=(-1, 0), init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise InputError("MilepostRollout needs at least one task")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        for task in self.tasks:
            if task.env != self.env:
                raise InputError(f"task {task.task_id} is a {task.env} task, not {self.env}")
        env = self.make_env()
        for task in self.tasks:
            observation, _ = env.reset(options={"task": task})
            prompt = build_messages(env.goal_text(), observation)
            self._by_prompt.setdefault(prompt_key(prompt), task)
            self._rows.append({"prompt": prompt, "task_id": task.task_id})

    def make_env(self) -> Any:
        return make_env(self.env, **self.env_kwargs)

    def dataset(self) -> Any:
        """A ``datasets.Dataset`` with one row per task: ``prompt`` (turn-1 chat messages) and ``task_id``."""
        from datasets import Dataset

        return Dataset.from_list(self._rows)

    def task_for(self, prompt: Any) -> Task:
        task = self._by_prompt.get(prompt_key(prompt))
        if task is None:
            raise InputError("rollout_func got a prompt that is not one of this rollout's tasks (use .dataset())")
        return task

    def jobs(self, prompts: Sequence[Any], process_index: int) -> list[Job]:
        """One job per prompt, numbered by its place in the whole generation batch.

        Under several processes each one gets its own slice of the batch (TRL's ``GRPOTrainer`` cuts it as
        ``[process_index * len(prompts), (process_index + 1) * len(prompts))``), and a GRPO group's repeats of one
        prompt may sit on several processes. Numbering from 0 on every process would give those repeats the same
        sample number, hence the same episode seed and the same episode: a group of duplicates with no spread.
        """
        first = process_index * len(prompts)
        return [Job(self.task_for(prompt), sample=first + i) for i, prompt in enumerate(prompts)]

    def round_seed(self, step: int) -> int:
        """The base episode seed of this call: the run seed, the trainer step and the call within that step
        (TRL generates more than once per optimizer step when ``steps_per_generation`` is below the gradient
        accumulation steps; each call must draw new episodes)."""
        last, calls = self._round
        self._round = (step, calls + 1 if step == last else 0)
        return (self.seed * 1_000_003 + step) * 1_000 + self._round[1]

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt (TRL already repeats each prompt ``num_generations`` times)."""
        from milepost.backends.hf import HFBackend

        args = trainer.args
        settings = AgentSettings(
            memory_k=0,
            temperature=float(args.temperature),
            top_p=float(args.top_p),
            top_k=int(args.top_k or 0),
            max_new_tokens=self.max_new_tokens,
            batch_size=max(1, len(prompts)),
        )
        model = trainer.accelerator.unwrap_model(trainer.model)
        backend = HFBackend(model=model, tokenizer=trainer.processing_class, max_context=self.max_context, name="trl")
        policy = ConversationPolicy(backend, settings)
        jobs = self.jobs(prompts, int(trainer.accelerator.process_index))
        seed = self.round_seed(int(trainer.state.global_step))
        episodes = run_episodes(self.make_env, jobs, policy, settings, seed=seed, progress=False)
        episodes.sort(key=lambda e: e.sample)
        self.episodes = episodes
        out: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            TERMS_FIELD: [],
        }
        pad = int(backend.pad_id)
        for episode in episodes:
            script = policy.transcripts[episode.sample]
            if not script.completion_ids:  # the first request failed: one masked token keeps TRL's shapes valid
                script.add([pad], model=False)
            out["prompt_ids"].append(script.prompt_ids)
            out["completion_ids"].append(script.completion_ids)
            out["logprobs"].append(script.logprobs)
            out["env_mask"].append(script.env_mask)
            out[TERMS_FIELD].append(episode_terms(episode))
        return out
