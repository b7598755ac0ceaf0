"""Scripted policies: ``oracle``, ``noisy-oracle:P[:MODE]`` and ``random``.

They are baselines, SFT demonstrators and test fixtures, always labelled as such. They read the environment's
rules object directly (they are policies, not text generators) and answer in the agent's output format.
Their completions carry the tokenizer's ids for their text when a tokenizer is given; their behaviour
log-probs are undefined (None), so their episodes can serve SFT but never enter the RL loss.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from milepost.agent.parsing import format_answer
from milepost.backends.base import NOISE_MODES, PolicySpec
from milepost.errors import InputError
from milepost.registry import Registry
from milepost.types import Completion

# Per-environment move sources: modules with oracle(rules) -> (action, reason) | None,
# illegal(rules, rng) -> str, wrong(rules, rng) -> str | None, random_legal(rules, rng) -> str | None,
# malformed(rng) -> str.
MOVES: Registry[ModuleType] = Registry("scripted move source")
SCRIPTED = ("oracle", "noisy-oracle", "random")  # the policy kinds played by a script, not a model


def _register_moves() -> None:
    from milepost.envs.rushhour import moves as rushhour_moves
    from milepost.envs.sudoku import moves as sudoku_moves
    from milepost.envs.webshop import moves as webshop_moves

    MOVES.register("sudoku", sudoku_moves)
    MOVES.register("rushhour", rushhour_moves)
    MOVES.register("webshop", webshop_moves)


_register_moves()


@runtime_checkable
class Guide(Protocol):
    """An agent's per-episode state that tells demonstrators what a correct answer holds beyond the move (the
    SGO agent: the true PROGRESS line, and a move toward the current subgoal)."""

    def progress_line(self) -> str: ...

    def oracle_action(self, env: Any, **style: Any) -> tuple[str, str] | None: ...


class ScriptedEpisode(Protocol):
    """What a scripted policy needs from a live episode: its env (with ``rules``) and its random stream."""

    env: Any
    rng: random.Random

    def messages(self) -> list[dict[str, str]]: ...


class ScriptedPolicy:
    """An oracle, a noisy oracle or a uniformly random legal player.

    Args:
        kind: ``oracle`` | ``noisy-oracle`` | ``random``.
        p: noisy oracle: probability of the oracle's answer on each turn.
        mode: noisy oracle: the error made otherwise: ``format`` (malformed answer), ``illegal``
            (rule-breaking move), ``wrong`` (legal move that is no progress; when none exists, an illegal
            one), ``mixed`` (one of the three, uniformly).
        tokenizer: optional Hugging Face tokenizer used to give completions token ids.
        prompt_encoder: optional function from chat messages to the prompt token ids a model would see
            (e.g. ``HFBackend.encode``); SFT demonstrations need it so prompts match the policy's exactly.
        style: keyword options of the environment's oracle text (Sudoku: ``{"cell_first": True}`` writes
            ``value(rXcY, n)``, the order a small model learns sooner).
    """

    def __init__(
        self,
        kind: str,
        p: float = 1.0,
        mode: str = "mixed",
        tokenizer: Any = None,
        prompt_encoder: Callable[[list[dict[str, str]]], list[int]] | None = None,
        style: dict[str, Any] | None = None,
    ) -> None:
        if kind not in SCRIPTED:
            raise InputError(f"unknown scripted policy {kind!r} (known: oracle, noisy-oracle, random)")
        if not 0.0 <= p <= 1.0:
            raise InputError(f"noisy-oracle: P must be in [0, 1], got {p}")
        if mode not in NOISE_MODES:
            raise InputError(f"noisy-oracle: unknown error mode {mode!r} (known: {', '.join(NOISE_MODES)})")
        self.kind, self.p, self.mode, self.tokenizer = kind, p, mode, tokenizer
        self.prompt_encoder = prompt_encoder
        self.style = dict(style or {})
        self.name = kind if kind != "noisy-oracle" else f"noisy-oracle:{p:g}:{mode}"
        self.scripted = True

    def answer(self, env: Any, rng: random.Random, guide: Guide | None = None) -> str:
        """The answer text for the env's current state (with the guide's PROGRESS line first, when given)."""
        text = self._answer(env, rng, guide)
        return f"{guide.progress_line()} {text}" if guide is not None else text

    def _answer(self, env: Any, rng: random.Random, guide: Guide | None) -> str:
        moves = MOVES.get(_env_name(env))
        rules = env.rules
        if self.kind == "random":
            action = moves.random_legal(rules, rng)
            return format_answer("a random legal move.", action) if action else moves.malformed(rng)
        if self.kind == "oracle" or rng.random() < self.p:
            return self._oracle_answer(env, moves, rng, guide)
        mode = self.mode if self.mode != "mixed" else rng.choice(("format", "illegal", "wrong"))
        if mode == "format":
            return moves.malformed(rng)
        if mode == "wrong":
            action = moves.wrong(rules, rng, **self.style)
            if action is not None:
                return format_answer("this move looks fine.", action)
        return format_answer("this move looks fine.", moves.illegal(rules, rng, **self.style))

    def _oracle_answer(self, env: Any, moves: ModuleType, rng: random.Random, guide: Guide | None = None) -> str:
        """The oracle's answer: one move (toward the guide's current subgoal when it names one), or in macro
        modes as many as the mode allows (fixed n: exactly n)."""
        mode = env.action_mode
        rules = env.rules
        if mode.kind in ("atomic", "slide"):
            found = (guide.oracle_action(env, **self.style) if guide is not None else None) or moves.oracle(
                rules, **self.style
            )
            return format_answer(found[1], found[0]) if found is not None else moves.malformed(rng)
        steps = moves.oracle_sequence(rules, mode.max_actions, **self.style)
        if not steps:
            return moves.malformed(rng)
        actions = [a for a, _ in steps]
        if mode.kind == "fixed":
            # The episode ends at the solving action; the count must still be exactly n.
            actions += [actions[-1]] * (mode.max_actions - len(actions))
        return format_answer(steps[0][1], "; ".join(actions))

    def act(self, episodes: Sequence[ScriptedEpisode]) -> list[Completion]:
        out = []
        for ep in episodes:
            guide = getattr(ep, "agent_state", None)
            text = self.answer(ep.env, ep.rng, guide if isinstance(guide, Guide) else None)
            ids = self.tokenizer.encode(text, add_special_tokens=False) if self.tokenizer is not None else []
            prompt = self.prompt_encoder(ep.messages()) if self.prompt_encoder is not None else []
            out.append(
                Completion(prompt_ids=prompt, completion_ids=ids, logprobs=None, text=text, finish_reason="stop")
            )
        return out


def _env_name(env: Any) -> str:
    task = getattr(env, "task", None)
    if task is None:
        raise InputError("scripted policy: the environment has no task (call reset first)")
    return str(task.env)


def scripted_policy(spec: PolicySpec, tokenizer: Any = None) -> ScriptedPolicy:
    """The scripted policy a parsed ``oracle`` | ``random`` | ``noisy-oracle:P[:MODE]`` spec names."""
    if spec.kind == "noisy-oracle":
        p, mode = spec.noise
        return ScriptedPolicy(spec.kind, p, mode, tokenizer=tokenizer)
    return ScriptedPolicy(spec.kind, tokenizer=tokenizer)


class ReplayPolicy:
    """Answers each live episode with a recorded episode's texts, in order (``Job.sample`` indexes ``recorded``),
    so recorded episodes can be played again through the real environment and agent loop: SFT from a teacher's
    episodes (in the student's prompts) and the chat export (the prompts exactly as the model saw them).

    ``encode`` (messages -> prompt ids) and ``tokenizer`` (answer text -> ids) fill the completions' token ids
    when a caller trains on them; without them the ids stay empty. With ``keep_messages`` the messages each
    prompt was built from are kept per sample in ``messages``. After the recording ends it answers with a
    backend error, which ends the episode as the recorded one ended (an episode cut by a backend error or a
    context overflow has no turn for that call).
    """

    name = "replay"
    scripted = True

    def __init__(
        self,
        recorded: Sequence[Any],
        *,
        encode: Callable[[list[dict[str, str]]], list[int]] | None = None,
        tokenizer: Any = None,
        keep_messages: bool = False,
    ) -> None:
        self.recorded = recorded
        self.encode = encode
        self.tokenizer = tokenizer
        self.keep_messages = keep_messages
        self.messages: dict[int, list[list[dict[str, str]]]] = {}

    def act(self, episodes: Sequence[Any]) -> list[Completion]:
        out = []
        for ep in episodes:
            turns = self.recorded[ep.job.sample].turns
            if len(ep.turns) >= len(turns):
                out.append(Completion([], [], None, "", "error", "end of the recording"))
                continue
            text = turns[len(ep.turns)].text
            messages = ep.messages()
            if self.keep_messages:
                self.messages.setdefault(ep.job.sample, []).append(messages)
            prompt = self.encode(messages) if self.encode is not None else []
            ids = self.tokenizer.encode(text, add_special_tokens=False) if self.tokenizer is not None else []
            out.append(Completion(prompt, ids, None, text, "stop"))
        return out
