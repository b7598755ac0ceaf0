"""One episode as one GRPO sequence: the token transcript, its environment-token mask and the episode's reward terms.

Plain milepost code (no TRL import): :mod:`milepost.integrations.trl` plugs it into TRL's ``GRPOTrainer``, and the
default test suite checks it whether or not the ``trl`` extra is installed. The layout, token for token as the
model saw it::

    prompt_ids     = turn-1 prompt (milepost's goal + answer format + observation, chat-templated)
    completion_ids = answer_1  obs_2  answer_2  obs_3 ... answer_T
    env_mask       =  1 ... 1  0 .. 0  1 ... 1  0 .. 0      1 ... 1
    logprobs       = behaviour log-probs on answers, 0.0 on observation tokens

The environment's reward terms (``outcome``, ``format``, ``valid``, ``milestone``; DESIGN: Contracts) become one
reward function each, the episode's sum of that term; :func:`reward_weights` gives their weights from milepost's
``RewardWeights``, so the weighted sum is the episode return of ``env.step``'s scalar reward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import AgentSettings, LiveEpisode, turn_seed
from milepost.agent.prompts import build_messages
from milepost.backends.base import GenerationRequest
from milepost.config import RewardWeights
from milepost.errors import InputError
from milepost.types import REWARD_TERM_NAMES, Completion, Episode

__all__ = [
    "TERMS_FIELD",
    "ConversationPolicy",
    "Transcript",
    "episode_terms",
    "observation_message",
    "reward_functions",
    "reward_weights",
]

_MARK = "\x00milepost-answer\x00"  # stands in for an answer when cutting the chat template around it
TERMS_FIELD = "milepost_terms"  # the rollout's extra field the reward functions read


def observation_message(observation: str) -> dict[str, str]:
    """The user message of a later turn: the observation as milepost's prompt words it (no memory block)."""
    return build_messages("", observation)[1]


@dataclass
class Transcript:
    """One episode's tokens as GRPO sees them (see the module docstring for the layout)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def add(self, ids: Sequence[int], *, model: bool, logprobs: Sequence[float] | None = None) -> None:
        ids = list(ids)
        if model and logprobs is not None:
            if len(logprobs) != len(ids):  # checked first: a refused add leaves the three lists aligned
                raise ValueError(f"{len(logprobs)} log-probs for {len(ids)} completion tokens")
            values = [float(x) for x in logprobs]
        else:
            values = [0.0] * len(ids)
        self.completion_ids += ids
        self.env_mask += [1 if model else 0] * len(ids)
        self.logprobs += values

    def context(self) -> list[int]:
        """Everything the model has seen so far: the prompt of its next turn."""
        return self.prompt_ids + self.completion_ids


class ConversationPolicy:
    """A milepost ``Policy`` that keeps each episode as one growing token transcript.

    Turn 1 is milepost's own prompt (``LiveEpisode.messages()``); on each later turn the new observation is
    appended as a user message after the previous answer, tokenised on its own, so the answer tokens the model
    sampled are never re-tokenised and earlier turns are never re-rendered: a template that rewrites past turns
    (Qwen3's drops the think blocks of earlier answers) would otherwise train turn k+1 on a context turn k was
    not sampled from. A template that drops or replaces earlier answers altogether is refused (``InputError``).
    Episodes are keyed by their job's sample number, which the rollout makes unique per prompt.

    Args:
        backend: an ``HFBackend`` (``encode`` and ``generate`` with ``prompt_ids`` requests).
        settings: sampling settings (temperature, top-p/k, tokens per turn).
    """

    def __init__(self, backend: Any, settings: AgentSettings) -> None:
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.settings = settings
        self.name = backend.name
        self.scripted = False
        self.transcripts: dict[int, Transcript] = {}
        self._eos_ids = frozenset(int(i) for i in backend.eos_ids)

    def act(self, episodes: Sequence[LiveEpisode]) -> list[Completion]:
        requests = []
        for ep in episodes:
            key = ep.job.sample
            script = self.transcripts.get(key)
            if script is None:
                script = Transcript(self.backend.encode(GenerationRequest(messages=ep.messages())))
                self.transcripts[key] = script
            else:
                script.add(self._observation_ids(script, ep.observation), model=False)
            params = self.settings.sampling(turn_seed(ep))  # BackendPolicy's seeds
            requests.append(GenerationRequest(prompt_ids=script.context(), params=params))
        completions = self.backend.generate(requests)
        for ep, completion in zip(episodes, completions, strict=True):
            self.transcripts[ep.job.sample].add(completion.completion_ids, model=True, logprobs=completion.logprobs)
        return completions

    def _observation_ids(self, script: Transcript, observation: str) -> list[int]:
        """Tokens between the last answer and the next one: end of the answer turn, the observation message
        and the generation prompt, cut out of the chat template around a placeholder answer."""
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": _MARK},
            observation_message(observation),
        ]
        # The backend's template arguments too (Qwen3's enable_thinking=False pre-fills an empty think block in
        # the generation prompt): every turn must end with the generation prompt turn 1 ended with.
        kwargs = getattr(self.backend, "chat_template_kwargs", None) or {}
        text = str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs))
        if text.count(_MARK) != 1:
            # Only the tokens after the answer are cut from the template; a template that rewrites or drops
            # earlier answers leaves nothing to cut at, and re-rendering the conversation would change tokens the
            # model already sampled.
            raise InputError(
                "the chat template rewrites earlier assistant turns (a placeholder answer does not survive its "
                "rendering once a user message follows), so an append-only multi-turn transcript cannot be built"
            )
        text = text[text.index(_MARK) + len(_MARK) :]
        last = script.completion_ids[-1] if script.completion_ids else None
        if last is not None and last in self._eos_ids:
            # The sampled answer already ends with the token that closes an assistant turn.
            eos_text = str(self.tokenizer.decode([last]))
            if eos_text and text.startswith(eos_text):
                text = text[len(eos_text) :]
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def episode_terms(episode: Episode) -> dict[str, float]:
    """The episode's sum of each reward term, plus ``success`` (1.0 when solved)."""
    terms: dict[str, float] = {}
    for name in REWARD_TERM_NAMES:
        terms[name] = sum((float(turn.reward_terms[name]) for turn in episode.turns), 0.0)  # type: ignore[literal-required]
    terms["success"] = 1.0 if episode.success else 0.0
    return terms


def _term_reward(name: str) -> Callable[..., list[float]]:
    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
        return [float(t[name]) for t in kwargs[TERMS_FIELD]]

    reward.__name__ = f"milepost_{name}"
    reward.__doc__ = f"The episode's total ``{name}`` reward term (milepost environment)."
    return reward


def reward_functions() -> list[Callable[..., list[float]]]:
    """TRL reward functions, one per milepost reward term, in ``REWARD_TERM_NAMES`` order."""
    return [_term_reward(name) for name in REWARD_TERM_NAMES]


def reward_weights(weights: RewardWeights | None = None) -> list[float]:
    """``GRPOConfig.reward_weights`` matching :func:`reward_functions`: milepost's weights of each term."""
    w = weights or RewardWeights()
    return [float(getattr(w, name)) for name in REWARD_TERM_NAMES]
