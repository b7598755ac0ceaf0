"""The text-environment contract shared by every milepost environment.

Each environment is two layers (OpenSpiel style): a game state that solvers, planners and subgoal predicates
use directly, and this thin text layer that the LLM sees. The per-game knowledge enters through a ``Rules``
object built for each task (composition, not inheritance): parsing one action, legality, applying,
subgoals, distances and rendering. ``TextEnv`` owns what is common: the ACTION segment, macro counting,
reward terms, latched subgoals, the budget H_max and the terminated / truncated split.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar

import gymnasium as gym
from gymnasium import spaces

from milepost.config import RewardWeights
from milepost.envs.actions import ActionMode, action_segment, split_actions
from milepost.errors import InputError
from milepost.types import StepInfo, Subgoal, Task, TerminationReason, zero_terms

A = TypeVar("A")
S = TypeVar("S")

# Everything a renderer or a model may print; gymnasium's Text space checks membership character by character.
CHARSET = frozenset(string.printable)
MAX_OBSERVATION_CHARS = 16_384
MAX_ACTION_CHARS = 4_096


def printable(text: str) -> str:
    """``text`` with every character outside the observation charset replaced by ``?``.

    Feedback quotes model output back into the observation, which must stay inside the Text space.
    """
    return text if all(ch in CHARSET for ch in text) else "".join(ch if ch in CHARSET else "?" for ch in text)


class GameState(Protocol[A]):
    """The game-state API that solvers, planners and tests use directly.

    The observation text has one owner per game and imports run one way: Sudoku's renderers read the state
    (``sudoku/render.py`` imports ``sudoku/state.py``, never back); Rush Hour's state prints itself, as nothing
    below it prints.
    """

    def legal_actions(self) -> list[A]: ...

    def apply(self, action: A) -> None: ...

    def is_solved(self) -> bool: ...

    def clone(self) -> Self: ...


class Rules(Protocol[S, A]):
    """Per-task game knowledge that ``TextEnv`` composes. ``state`` is the live game state."""

    state: S
    subgoals: list[Subgoal]
    goal_distance: int

    def parse(self, piece: str) -> A | None:
        """One action from its text, or None when the text is not an action of this game."""
        ...

    def check(self, action: A) -> str | None:
        """Why ``action`` is illegal in the current state, or None when it is legal."""
        ...

    def apply(self, action: A) -> bool:
        """Apply a legal action; return True when it was progress (counts toward step accuracy)."""
        ...

    def is_solved(self) -> bool: ...

    def is_dead(self) -> bool:
        """True when the goal can no longer be reached (e.g. a wrong Sudoku digit that cannot be erased)."""
        ...

    def remaining_distance(self) -> int | None:
        """Optimal distance from the current state in the current mode's units, None when unknown/infinite."""
        ...

    def touched_subgoals(self, action: A) -> Iterable[int]:
        """Indices of the subgoals whose predicate ``action`` may have changed."""
        ...

    def format_action(self, action: A) -> str: ...

    def render(self, feedback: str | None) -> str:
        """The observation text of the current state, with an optional one-line feedback."""
        ...

    def goal_text(self) -> str:
        """What the agent must achieve and how to act (rules and action syntax), for the prompt."""
        ...

    # Optional (``TextEnv.state_key`` / ``answer_successor`` use them where a game defines them, for best-of's
    # revisit check): ``state_key() -> Hashable``, the current state's identity, and ``successor_key(action) ->
    # Hashable``, the identity of the state a legal ``action`` leads to, computed without changing the state.
    # And ``snapshot() -> Any`` / ``restore(snapshot)``: the live state saved and put back in place, so that
    # ``answer_error`` and ``answer_successor`` can play a several-action answer (the macro modes) and undo it.


class TextEnv(gym.Env[str, str], Generic[S, A]):
    """A Gymnasium text environment over a game's ``Rules``.

    ``reset(seed=..., options={"task": Task | dict})`` starts a task; without a task one is sampled from the
    environment's generator using the seeded ``np_random``. ``step(text)`` never raises on model output: a
    parse failure or wrong action count is a format error, an illegal action an invalid one; both are
    penalties that leave the state unchanged (for macro steps, the actions before the first invalid one
    stay applied, as in the paper).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 - gymnasium reads this class attribute

    def __init__(
        self,
        make_rules: Callable[[Task], Rules[S, A]],
        sample_task: Callable[[int], Task],
        *,
        max_steps: int,
        action_mode: ActionMode,
        reward_weights: RewardWeights | dict[str, float] | None = None,
        observe: bool = True,
        render_mode: str | None = None,
    ) -> None:
        if max_steps < 1:
            raise InputError(f"max_steps must be >= 1, got {max_steps}")
        self._make_rules = make_rules
        self._sample_task = sample_task
        self.max_steps = max_steps
        self.action_mode = action_mode
        if isinstance(reward_weights, dict):
            reward_weights = RewardWeights(**reward_weights)
        self.weights = reward_weights or RewardWeights()
        self.observe = observe
        self.render_mode = render_mode
        self.observation_space = spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self.task: Task | None = None
        self.rules: Rules[S, A] | None = None
        self.steps = 0
        self.completed: list[int] = []
        self._latched: set[int] = set()
        self._done = False
        self._reason: TerminationReason | None = None
        self._last_obs = ""

    # -- gymnasium API -------------------------------------------------------------------------------------

    # StepInfo is a TypedDict (a dict at run time); mypy does not accept it where gymnasium says dict[str, Any].
    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, StepInfo]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            task = self._sample_task(int(self.np_random.integers(0, 2**31 - 1)))
        elif isinstance(task, dict):
            task = Task.from_dict(task)
        self.task = task
        self.rules = self._make_rules(task)
        self.steps = 0
        self.completed = []
        self._latched = set()
        self._done = False
        self._reason = None
        # Subgoals already satisfied by the start state are latched without reward.
        for goal in self.rules.subgoals:
            if goal.predicate is not None and goal.predicate(self.rules.state):
                self._latch(goal.index)
        obs = self.rules.render(None) if self.observe else ""
        self._last_obs = obs
        info = self._info(zero_terms(), [], 0, None, 0, [])
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:  # type: ignore[override]
        rules = self.rules
        if rules is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("episode is over; call reset()")
        self.steps += 1
        terms = zero_terms()
        applied: list[str] = []
        new: list[int] = []
        correct = 0
        error: str | None = None
        pieces, parsed, error = self._parse(rules, action)
        if error is not None:
            terms["format"] = -1.0
        else:
            for act in parsed:
                why = rules.check(act)
                if why is not None:
                    terms["valid"] = -1.0
                    error = why
                    break
                if rules.apply(act):
                    correct += 1
                applied.append(rules.format_action(act))
                for index in rules.touched_subgoals(act):
                    if index not in self._latched:
                        pred = rules.subgoals[index].predicate
                        if pred is not None and pred(rules.state):
                            self._latch(index)
                            new.append(index)
                if rules.is_dead() or rules.is_solved():
                    break
        terms["milestone"] = float(len(new))
        terminated = truncated = False
        if rules.is_solved():
            terms["outcome"] = 1.0
            terminated, self._reason = True, TerminationReason.SOLVED
        elif rules.is_dead():
            terminated, self._reason = True, TerminationReason.DEAD_END
        elif self.steps >= self.max_steps:
            truncated, self._reason = True, TerminationReason.BUDGET_EXHAUSTED
        self._done = terminated or truncated
        w = self.weights
        reward = (
            w.outcome * terms["outcome"]
            + w.format * terms["format"]
            + w.valid * terms["valid"]
            + w.milestone * terms["milestone"]
        )
        if error is not None:
            # Rules may quote parts of the answer (a vehicle letter, a number) back: keep the text in the space.
            error = printable(error)
        obs = rules.render(error) if self.observe else ""
        self._last_obs = obs
        info = self._info(terms, applied, len(pieces) if terms["format"] == 0 else 0, error, correct, new)
        return obs, reward, terminated, truncated, info

    def answer_error(self, text: str) -> str | None:
        """The rejection ``step(text)`` would give now, or None; nothing changes. It checks the answer's format,
        its action count and its actions' legality: exact in every mode of a game that can save and restore its
        state (``Rules.snapshot`` / ``restore``: each action is checked after the ones before it are played, and
        undone); otherwise an action after the first is checked only when it is played (its legality depends on
        the first being applied)."""
        rules = self.rules
        if rules is None:
            raise RuntimeError("call reset() first")
        _, parsed, error = self._parse(rules, text)
        if error is None:
            error = self._preview(rules, parsed)[0] if len(parsed) > 1 else rules.check(parsed[0])
        return None if error is None else printable(error)

    def state_key(self) -> Hashable | None:
        """The current state's identity, or None when the game does not define one (``Rules.state_key``)."""
        if self.rules is None:
            raise RuntimeError("call reset() first")
        key = getattr(self.rules, "state_key", None)
        return key() if key is not None else None

    def answer_successor(self, text: str) -> Hashable | None:
        """The identity of the state ``step(text)`` would lead to, or None: the answer would be rejected, or the
        game cannot tell (no ``successor_key`` for one action; for several, no ``snapshot`` / ``restore`` and
        ``state_key`` to play them and undo them). Nothing changes."""
        rules = self.rules
        if rules is None:
            raise RuntimeError("call reset() first")
        _, parsed, error = self._parse(rules, text)
        if error is not None:
            return None
        successor = getattr(rules, "successor_key", None)
        if len(parsed) == 1 and successor is not None:
            return successor(parsed[0]) if rules.check(parsed[0]) is None else None
        why, key = self._preview(rules, parsed)
        return key if why is None else None

    def _preview(self, rules: Rules[S, A], parsed: list[A]) -> tuple[str | None, Hashable | None]:
        """``step``'s checks and moves for ``parsed`` (stopping at a solved or dead state, as ``step`` does),
        played on the live state and undone: the first rejection or None, and the state key they lead to. Without
        ``Rules.snapshot`` / ``restore`` only the first action is checked and the key is None; without
        ``state_key`` the key is None."""
        snapshot, restore = getattr(rules, "snapshot", None), getattr(rules, "restore", None)
        if snapshot is None or restore is None:
            return rules.check(parsed[0]), None
        saved = snapshot()
        try:
            for act in parsed:
                why = rules.check(act)
                if why is not None:
                    return why, None
                rules.apply(act)
                if rules.is_dead() or rules.is_solved():
                    break
            key = getattr(rules, "state_key", None)
            return None, key() if key is not None else None
        finally:
            restore(saved)

    def _parse(self, rules: Rules[S, A], text: str) -> tuple[list[str], list[A], str | None]:
        """The answer's action pieces, their parsed actions and the format error (a wrong action count or an
        unparsable piece), or None."""
        pieces = split_actions(action_segment(text if isinstance(text, str) else ""))
        error = self.action_mode.count_error(len(pieces))
        parsed: list[A] = []
        if error is None:
            for piece in pieces:
                act = rules.parse(piece)
                if act is None:
                    error = f"cannot parse action {printable(piece[:60])!r}"
                    break
                parsed.append(act)
        return pieces, parsed, error

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_obs or (self.rules.render(None) if self.rules else "")
        return None

    # -- helpers -------------------------------------------------------------------------------------------

    @property
    def state(self) -> S:
        """The live game state (for scripted policies, planners and tests)."""
        if self.rules is None:
            raise RuntimeError("call reset() first")
        return self.rules.state

    @property
    def subgoals(self) -> Sequence[Subgoal]:
        return self.rules.subgoals if self.rules is not None else []

    def goal_text(self) -> str:
        if self.rules is None:
            raise RuntimeError("call reset() first")
        return self.rules.goal_text()

    def _latch(self, index: int) -> None:
        self._latched.add(index)
        self.completed.append(index)

    def _info(
        self,
        terms: Any,
        applied: list[str],
        requested: int,
        error: str | None,
        correct: int,
        new: list[int],
    ) -> StepInfo:
        rules = self.rules
        assert rules is not None
        return StepInfo(
            reward_terms=terms,
            actions=applied,
            n_requested=requested,
            error=error,
            correct_actions=correct,
            subgoals_completed=list(self.completed),
            new_subgoals=new,
            num_subgoals=len(rules.subgoals),
            goal_distance=rules.goal_distance,
            remaining_distance=rules.remaining_distance(),
            steps=self.steps,
            solved=rules.is_solved(),
            termination_reason=self._reason.value if self._reason is not None else None,
        )
