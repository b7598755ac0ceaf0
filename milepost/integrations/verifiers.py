"""milepost environments as verifiers ``MultiTurnEnv`` environments (``pip install 'milepost[verifiers]'``).

verifiers (PrimeIntellect; prime-rl's environment layer) loads an environment module's ``load_environment(**kwargs)``
and runs one ``MultiTurnEnv.rollout`` per dataset row (``verifiers/legacy/envs/multiturn_env.py``, verifiers
0.3.1): ``setup_state`` once, then per turn ``get_prompt_messages`` (whose default calls ``env_response`` on the
conversation so far) and a model call, until a stop condition (``final_env_response`` set, an error, max turns);
the rubric then scores the final ``state`` (``verifiers/legacy/rubrics/rubric.py``: each function gets the arguments
it names, ``state`` among them; the reward is the weighted sum, weight-0 functions are metrics).
``Environment.evaluate(client, model, sampling_args, ...)`` (``verifiers/legacy/envs/environment.py``) runs every
row against any OpenAI-compatible server and returns ``{"outputs": [...], "metadata": {...}}``.

Version: verifiers 0.4.0 removed this API (its package has only the ``verifiers.v1`` Env / Taskset / Harness stack);
0.3.1 is the last release with ``vf.MultiTurnEnv`` (served from ``verifiers.legacy`` at the historical names), and the
one milepost is tested with.

One milepost episode is one rollout, played exactly as ``milepost eval`` plays it (``milepost.agent.loop``):

* each row carries a task (``info["milepost_task"]``, from DIR's split via :func:`milepost.datasets.load_tasks`) and its
  turn-1 prompt (:func:`milepost.agent.prompts.build_messages`: goal and answer format as the system message, the
  observation as the user message);
* every later prompt is built afresh the same way from the new observation and the sliding-window memory of the
  last ``memory_k`` turns, not appended to a growing chat (``get_prompt_messages`` is overridden: milepost's agent
  never sees its whole history), so a model trained by milepost sees the prompts it was trained on;
* the model's answer goes to ``TextEnv.step`` unchanged; the episode ends when the environment terminates or
  truncates (``final_env_response``);
* the prompt settings (renderer, action mode, memory, answer length) come from a checkpoint's prompt card
  (``card=MODEL_DIR``) unless given, as ``milepost eval`` takes them.

The state carries the measurements under milepost's convention names (:mod:`milepost.integrations.conventions`):
``goal_distance``, ``remaining_distance``, ``optimal_advantage`` (of the last step), ``turn_rewards`` and
``env_state_hash``, the same in ``state["info"]`` (prime-rl's per-turn credit reads ``info["turn_rewards"]``), with
``optimal_advantages`` (every turn's A*) beside them; each trajectory step's ``reward`` is that turn's environment
reward. The rubric: ``solved`` (1 on a solved episode, weight 1), ``progress`` (the fraction of the exact distance
to the goal covered, weight ``progress_weight``) and the metrics ``milepost_return`` (the environment's summed
reward) and ``optimal_turns`` (the fraction of turns with A* = 0).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import verifiers as vf
from datasets import Dataset

from milepost.agent.memory import MemoryItem, SlidingWindowMemory
from milepost.agent.parsing import parse_answer
from milepost.agent.prompts import build_messages
from milepost.envs import ENVS, make_env
from milepost.errors import InputError
from milepost.integrations.conventions import CONVENTION_KEYS, ConventionTracker
from milepost.types import Task

__all__ = ["MilepostEnv", "load_environment", "milepost_rubric"]

_LIVE = "milepost_live"  # state key of the live episode (environment, memory, tracker); dropped at cleanup


def _text(message: Any) -> str:
    """The text of a chat message, whether verifiers holds it as a pydantic message or a dict."""
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        parts = [p.get("text", "") if isinstance(p, Mapping) else getattr(p, "text", "") for p in content]
        return "".join(str(p or "") for p in parts)
    return ""


async def solved(state: vf.State) -> float:
    """1 when the episode ended solved, else 0."""
    return 1.0 if state.get("milepost_solved") else 0.0


async def progress(state: vf.State) -> float:
    """(d(s_0) - d(s_T)) / d(s_0): the fraction of the exact distance to the goal the episode covered (0 in a dead
    end or on a task already solved at reset)."""
    start, end = state.get("milepost_start_distance"), state.get("remaining_distance")
    if not start or end is None:
        return 0.0
    return max(0.0, (start - end) / start)


async def milepost_return(state: vf.State) -> float:
    """The environment's own reward summed over the episode's turns."""
    return float(sum(state.get("turn_rewards") or []))


async def optimal_turns(state: vf.State) -> float:
    """The fraction of turns whose step was optimal (A* = 0); 0 for an episode without a turn."""
    advantages = state.get("optimal_advantages") or []
    return sum(1 for a in advantages if a == 0.0) / len(advantages) if advantages else 0.0


def milepost_rubric(progress_weight: float = 0.5) -> vf.Rubric:
    """The reward ``solved + progress_weight * progress``, with the return and optimal-turn share as metrics."""
    return vf.Rubric(funcs=[solved, progress, milepost_return, optimal_turns], weights=[1.0, progress_weight, 0.0, 0.0])


class MilepostEnv(vf.MultiTurnEnv):
    """A milepost ``TextEnv`` as a verifiers multi-turn environment (see the module docstring).

    Args:
        env: milepost environment name.
        env_kwargs: the environment's arguments (render, action_mode, max_steps, ...).
        memory_k: K, the turns of memory in each prompt (milepost's sliding window; 0: none).
        seed: the reset seed of every episode.
        **kwargs: ``vf.MultiTurnEnv`` / ``vf.Environment`` arguments (``eval_dataset``, ``rubric``,
            ``sampling_args``, ...).
    """

    def __init__(
        self, env: str, env_kwargs: Mapping[str, Any] | None = None, memory_k: int = 0, seed: int = 0, **kwargs: Any
    ) -> None:
        # max_turns stays -1: the milepost environment truncates at its own turn budget, and verifiers' check runs
        # before the last answer would be stepped (multiturn_env.py, max_turns_reached).
        super().__init__(max_turns=-1, **kwargs)
        self.milepost_env = env
        self.env_kwargs = dict(env_kwargs or {})
        self.memory_k = memory_k
        self.seed = seed

    async def setup_state(self, state: vf.State) -> vf.State:
        info = state["info"]
        task = Task.from_dict(json.loads(info["milepost_task"]))
        env = make_env(self.milepost_env, **self.env_kwargs)
        observation, step_info = env.reset(seed=self.seed, options={"task": task})
        tracker = ConventionTracker()
        conventions = tracker.reset(env, step_info)
        state[_LIVE] = {"env": env, "memory": SlidingWindowMemory(self.memory_k), "tracker": tracker}
        state["milepost_observation"] = observation
        state["milepost_start_distance"] = step_info["remaining_distance"]
        state["milepost_solved"] = bool(step_info["solved"])
        state["optimal_advantages"] = []
        self._record(state, dict(conventions))
        return state

    def _record(self, state: vf.State, conventions: dict[str, Any]) -> None:
        info = state["info"]
        for key in CONVENTION_KEYS:
            state[key] = conventions[key]
            info[key] = conventions[key]
        info["optimal_advantages"] = list(state["optimal_advantages"])

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        """Step the milepost environment with the model's last answer; the next prompt's messages (or, once the
        episode ends, the final observation as ``final_env_response``)."""
        live = state[_LIVE]
        env = live["env"]
        answer = _text(messages[-1]) if messages else ""
        before = state["milepost_observation"]
        observation, reward, terminated, truncated, info = env.step(answer)
        conventions = live["tracker"].step(env, float(reward), info)
        state["optimal_advantages"].append(conventions["optimal_advantage"])
        state["milepost_solved"] = bool(info["solved"])
        state["milepost_observation"] = observation
        state["milepost_termination"] = info["termination_reason"]
        state["trajectory"][-1]["reward"] = float(reward)  # verifiers' per-step reward slot (TrajectoryStep)
        self._record(state, dict(conventions))
        parsed = parse_answer(answer)  # what milepost.agent.loop remembers of a turn
        live["memory"].add(MemoryItem(before, parsed.reason, parsed.action or answer.strip(), info["error"]))
        if terminated or truncated:
            final = [vf.UserMessage(content=observation)]
            state["final_env_response"] = final
            return final
        return [vf.UserMessage(content=_text(m)) for m in self._prompt(state)[1:]]

    def _prompt(self, state: vf.State) -> list[dict[str, str]]:
        env = state[_LIVE]["env"]
        return build_messages(env.goal_text(), state["milepost_observation"], state[_LIVE]["memory"].items())

    async def get_prompt_messages(self, state: vf.State) -> vf.Messages:
        """Turn 1: the row's prompt. Later turns: milepost's prompt built afresh from the new observation and the
        memory, as ``milepost.agent.loop`` builds it (not the growing chat of the default)."""
        if not state["trajectory"]:
            return state["prompt"]
        last = state["trajectory"][-1]
        await self.env_response([*last["prompt"], *last["completion"]], state)
        if state.get("final_env_response") is not None:
            return [*last["prompt"], *last["completion"]]
        return [
            vf.SystemMessage(content=m["content"]) if m["role"] == "system" else vf.UserMessage(content=m["content"])
            for m in self._prompt(state)
        ]

    async def render_completion(self, state: vf.State) -> None:
        """The episode as one conversation after the first prompt: each answer, then the next observation."""
        completion: list[Any] = []
        steps = state["trajectory"]
        for i, step in enumerate(steps):
            completion.extend(step["completion"])
            if i + 1 < len(steps):
                completion.append(steps[i + 1]["prompt"][-1])
        completion.extend(state.get("final_env_response") or [])
        state["completion"] = completion

    @vf.cleanup
    async def drop_live_episode(self, state: vf.State) -> None:
        state.pop(_LIVE, None)


def load_environment(
    env: str = "sudoku",
    data: str | None = None,
    split: str = "test",
    levels: str | None = None,
    limit: int | None = None,
    card: str | None = None,
    render: str | None = None,
    action_mode: str | None = None,
    max_steps: int | None = None,
    memory_k: int | None = None,
    max_new_tokens: int | None = None,
    seed: int = 0,
    progress_weight: float = 0.5,
    **kwargs: Any,
) -> MilepostEnv:
    """verifiers' entry point: a milepost environment on the tasks of ``data``'s ``split``.

    Args:
        env: milepost environment name (sudoku, rushhour, webshop).
        data: a ``milepost data`` folder (its ``split`` JSONL).
        split: the split whose tasks are the evaluation rows.
        levels: only these levels (``milepost eval --levels``'s form, e.g. S2-S3).
        limit: at most this many tasks per level.
        card: a checkpoint folder whose prompt card (``milepost_prompt.json``) supplies the prompt settings left
            out here, as ``milepost eval`` does.
        render, action_mode, max_steps: the environment's options (default: the card's, else the environment's).
        memory_k: turns of memory in each prompt (default: the card's, else 2 as in ``milepost eval``).
        max_new_tokens: answer tokens per turn, sent as ``max_tokens`` (default: the card's, else 256).
        seed: the reset seed of every episode.
        progress_weight: the weight of ``progress`` in the reward (``solved`` has weight 1).
        **kwargs: passed to :class:`MilepostEnv` (``sampling_args``, ``rubric``, ...).

    Raises:
        InputError: an unknown environment, no data, a split with no tasks at the levels asked, or a card whose
            agent is not milepost's plain agent.
    """
    from milepost.evaluation.runner import EvalSpec, select_tasks
    from milepost.prompt_card import read_card, reconcile

    if env not in ENVS.names():
        raise InputError(f"unknown environment {env!r}; known: {', '.join(ENVS.names())}")
    if data is None:
        raise InputError("load_environment needs data=DIR (a `milepost data` folder)")
    given = {"render": render, "action_mode": action_mode, "memory_k": memory_k, "max_new_tokens": max_new_tokens}
    merged = reconcile(read_card(card) if card else None, {**given, "agent": None}, env)
    for line in merged.messages(str(card)):  # what the card supplied, and each setting given against it
        print(line, file=sys.stderr)
    settings = merged.values
    if settings.get("agent", "plain") != "plain":
        raise InputError(f"{card}: its agent is {settings['agent']}; the verifiers environment plays the plain agent")
    env_kwargs: dict[str, Any] = {k: settings[k] for k in ("render", "action_mode") if k in settings}
    if max_steps is not None:
        env_kwargs["max_steps"] = max_steps
    tasks = select_tasks(EvalSpec(env=env, data=str(data), policy="", split=split, levels=levels, limit=limit))
    env_kwargs["size"] = tasks[0].size  # the dataset's board size, as milepost.evaluation.runner sets it
    probe = make_env(env, **env_kwargs)
    rows = []
    for task in tasks:
        observation, _ = probe.reset(seed=seed, options={"task": task})
        rows.append(
            {
                "prompt": build_messages(probe.goal_text(), observation),
                "answer": "",
                # Not info["task"] nor a "task" column: verifiers reads either as a whole serialized rollout input
                # (verifiers/legacy/types.py, flatten_task_input). JSON text: Arrow would merge the rows' payload
                # and meta dicts into one struct type.
                "info": {"task_id": task.task_id, "milepost_task": json.dumps(task.to_dict())},
            }
        )
    sampling = {"max_tokens": int(settings.get("max_new_tokens", 256)), **dict(kwargs.pop("sampling_args", {}))}
    return MilepostEnv(
        env,
        env_kwargs,
        memory_k=int(settings.get("memory_k", 2)),
        seed=seed,
        eval_dataset=Dataset.from_list(rows),
        rubric=kwargs.pop("rubric", None) or milepost_rubric(progress_weight),
        sampling_args=sampling,
        env_id=f"milepost-{env}",
        **kwargs,
    )
