"""The batched episode loop: many episodes advance in lock-step, one policy call per turn for all of them.

Each turn every live episode contributes one request; the policy (a model backend or a scripted policy)
answers all of them at once; each answer goes to its environment. Finished episodes leave the batch and
waiting ones take their place, so a batch stays full while work remains. Every turn is recorded with the
exact prompt / completion token ids, behaviour log-probs, reward terms, subgoal events and state fingerprint.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from milepost.agent.memory import MemoryItem, SlidingWindowMemory
from milepost.agent.parsing import parse_answer
from milepost.agent.prompts import ANSWER_FORMAT, build_messages
from milepost.backends.base import Backend, GenerationRequest, SamplingParams
from milepost.progress import progress_bar
from milepost.types import Completion, Episode, Task, TerminationReason, Turn


@dataclass
class AgentSettings:
    """How the agent prompts and samples (DESIGN: Agent)."""

    memory_k: int = 2
    """K: turns kept in the sliding-window memory (0 = none)"""
    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    """response tokens per turn at most"""
    batch_size: int = 64
    """episodes advanced together (one backend call per turn for all of them)"""

    def __post_init__(self) -> None:
        if self.memory_k < 0:
            raise ValueError(f"agent.memory_k: must be >= 0, got {self.memory_k}")
        if self.batch_size < 1:
            raise ValueError(f"agent.batch_size: must be >= 1, got {self.batch_size}")

    def sampling(self, seed: int | None) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            seed=seed,
        )


@dataclass
class Job:
    """One episode to play: a task and the index of this sample of it (pass@k draws n samples)."""

    task: Task
    sample: int = 0


@dataclass
class LiveEpisode:
    """An episode in flight."""

    job: Job
    seed: int
    env: Any
    rng: random.Random
    memory: SlidingWindowMemory
    observation: str
    info: dict[str, Any]
    turns: list[Turn] = field(default_factory=list)
    plan: str | None = None
    answer_format: str = ANSWER_FORMAT
    agent_state: Any = None  # the agent's per-episode state (SGO: plan, tracker, events), None for plain
    # The policy's per-episode notes (best-of: the states seen); its "counts" (str -> int) go into the record.
    policy_state: dict[str, Any] = field(default_factory=dict)

    def messages(self) -> list[dict[str, str]]:
        return build_messages(
            self.env.goal_text(), self.observation, self.memory.items(), self.plan, self.answer_format
        )


class Agent(Protocol):
    """What an agent kind adds around the policy: a plan in the prompt, and bookkeeping after each turn.

    The policy answers; the agent only shapes the prompt (``ep.plan``, ``ep.answer_format``) and reads the
    outcome, so the same policy plays as a plain or an SGO agent.
    """

    name: str

    def start(self, ep: LiveEpisode) -> None:
        """Called once after the environment was reset."""
        ...

    def before_turn(self, ep: LiveEpisode) -> None:
        """Called before the policy answers each turn."""
        ...

    def after_turn(self, ep: LiveEpisode, turn: Turn, info: dict[str, Any]) -> None:
        """Called after each answer was applied (``ep.observation`` is already the new observation)."""
        ...

    def finish(self, ep: LiveEpisode) -> dict[str, Any]:
        """Called when the episode ends; the result is merged into ``Episode.meta``."""
        ...


class PlainAgent:
    """The plain agent: goal, memory and observation only; adds nothing."""

    name = "plain"

    def start(self, ep: LiveEpisode) -> None:
        pass

    def before_turn(self, ep: LiveEpisode) -> None:
        pass

    def after_turn(self, ep: LiveEpisode, turn: Turn, info: dict[str, Any]) -> None:
        pass

    def finish(self, ep: LiveEpisode) -> dict[str, Any]:
        return {}


class Policy(Protocol):
    """Answers one turn for a batch of live episodes."""

    name: str

    def act(self, episodes: Sequence[LiveEpisode]) -> list[Completion]: ...


class BackendPolicy:
    """A model backend as a policy: builds each episode's prompt and samples with per-turn seeds."""

    def __init__(self, backend: Backend, settings: AgentSettings) -> None:
        self.backend = backend
        self.settings = settings
        self.name = backend.name
        self.scripted = False

    def act(self, episodes: Sequence[LiveEpisode]) -> list[Completion]:
        requests = [
            GenerationRequest(messages=ep.messages(), params=self.settings.sampling(turn_seed(ep))) for ep in episodes
        ]
        return self.backend.generate(requests)


def turn_seed(ep: LiveEpisode) -> int:
    """The sampling seed of the episode's next turn: stable in the episode seed and the turn number."""
    return ep.seed * 1_000 + len(ep.turns)


def episode_seed(base_seed: int, job: Job) -> int:
    """A stable per-episode seed from the run seed, the task's seed/index and the sample number."""
    text = f"{base_seed}:{job.task.task_id}:{job.sample}"
    return random.Random(text).randrange(2**31)


_TERMINATIONS = {"context_overflow": TerminationReason.CONTEXT_OVERFLOW, "error": TerminationReason.BACKEND_ERROR}


def run_episodes(
    make_env: Callable[[], Any],
    jobs: Iterable[Job],
    policy: Policy,
    settings: AgentSettings,
    *,
    seed: int = 0,
    on_episode: Callable[[Episode], None] | None = None,
    progress: bool = True,
    total: int | None = None,
    plan_for: Callable[[LiveEpisode], str | None] | None = None,
    agent: Agent | None = None,
) -> list[Episode]:
    """Play every job to the end and return the episodes (also passed one by one to ``on_episode``).

    Args:
        make_env: builds a fresh environment (one per concurrent episode, reused between episodes).
        jobs: tasks and sample indices to play.
        policy: a ``BackendPolicy`` or a scripted policy.
        settings: memory size, sampling and batch size.
        seed: run seed; each episode's seed derives from it, the task and the sample index.
        on_episode: called as each episode finishes (e.g. to append it to ``episodes.jsonl``).
        progress: show a progress bar of finished episodes.
        total: number of jobs, for the progress bar when ``jobs`` is an iterator.
        plan_for: optional hook giving a fixed plan text shown in the prompt.
        agent: the agent kind around the policy (default: the plain agent).
    """
    agent = agent if agent is not None else PlainAgent()
    pending: deque[Job] = deque(jobs)
    idle_envs: list[Any] = []
    live: list[LiveEpisode] = []
    finished: list[Episode] = []
    bar = progress_bar(
        total=total if total is not None else len(pending),
        desc=f"episodes [{policy.name}]",
        enabled=progress,
        unit="ep",
        leave=False,
    )

    def start(job: Job) -> LiveEpisode:
        env = idle_envs.pop() if idle_envs else make_env()
        ep_seed = episode_seed(seed, job)
        obs, info = env.reset(seed=ep_seed, options={"task": job.task})
        ep = LiveEpisode(
            job, ep_seed, env, random.Random(ep_seed), SlidingWindowMemory(settings.memory_k), obs, dict(info)
        )
        agent.start(ep)
        if plan_for is not None:
            ep.plan = plan_for(ep)
        return ep

    def finish(ep: LiveEpisode, reason: TerminationReason, error: str | None = None) -> None:
        info = ep.info
        episode = Episode(
            task_id=ep.job.task.task_id,
            policy=policy.name,
            sample=ep.job.sample,
            seed=ep.seed,
            termination=reason,
            success=reason is TerminationReason.SOLVED,
            goal_distance=ep.job.task.goal_distance,
            steps=len(ep.turns),
            level=ep.job.task.level,
            turns=ep.turns,
            meta={
                "num_subgoals": info.get("num_subgoals", 0),
                "subgoals_completed": len(info.get("subgoals_completed", [])),
                "subgoal_steps": [g.estimated_steps for g in ep.env.subgoals],
                "scripted": bool(getattr(policy, "scripted", False)),
                "env": ep.job.task.env,
            },
        )
        episode.meta.update(agent.finish(ep))
        if "counts" in ep.policy_state:  # the policy's own per-episode counts (best-of: samples, tokens, loops)
            episode.meta["policy_counts"] = dict(ep.policy_state["counts"])
        if error:  # the backend's one-line reason (server, status, attempts): kept so a report can say why
            episode.meta["error"] = error
        finished.append(episode)
        idle_envs.append(ep.env)
        if on_episode is not None:
            on_episode(episode)
        bar.update(1)

    try:
        while pending or live:
            while pending and len(live) < settings.batch_size:
                live.append(start(pending.popleft()))
            for ep in live:
                agent.before_turn(ep)
            completions = policy.act(live)
            still: list[LiveEpisode] = []
            for ep, completion in zip(live, completions, strict=True):
                reason = _TERMINATIONS.get(completion.finish_reason)
                if reason is not None:
                    finish(ep, reason, completion.error)
                    continue
                state_key = repr(ep.env.state)
                obs_before = ep.observation
                obs, reward, terminated, truncated, info = ep.env.step(completion.text)
                parsed = parse_answer(completion.text)
                turn = Turn(
                    index=len(ep.turns),
                    observation=obs_before,
                    text=completion.text,
                    actions=info["actions"],
                    reward=float(reward),
                    reward_terms=info["reward_terms"],
                    subgoals_completed=list(info["subgoals_completed"]),
                    remaining_distance=info["remaining_distance"],
                    prompt_ids=completion.prompt_ids,
                    completion_ids=completion.completion_ids,
                    logprobs=completion.logprobs,
                    correct_actions=info["correct_actions"],
                    error=info["error"],
                    n_requested=info["n_requested"],
                    new_subgoals=list(info["new_subgoals"]),
                    state_key=state_key,
                    finish_reason=completion.finish_reason,
                )
                ep.turns.append(turn)
                ep.memory.add(
                    MemoryItem(obs_before, parsed.reason, parsed.action or completion.text.strip(), info["error"])
                )
                ep.observation, ep.info = obs, dict(info)
                agent.after_turn(ep, turn, ep.info)
                if terminated or truncated:
                    finish(ep, TerminationReason(info["termination_reason"]))
                else:
                    still.append(ep)
            live = still
    finally:
        bar.close()
    return finished
