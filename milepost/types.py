"""Shared record types: the contracts every module agrees on (see DESIGN.md, section Contracts).

Records are plain dataclasses; ``to_dict`` / ``from_dict`` are derived from the field list once, in
``record_from_dict``, instead of being written out per class.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar

from milepost.errors import InputError


class TerminationReason(enum.StrEnum):
    """Why an episode ended. One Enum for the whole project; values are the strings stored in JSONL."""

    SOLVED = "solved"
    DEAD_END = "dead_end"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CONTEXT_OVERFLOW = "context_overflow"
    BACKEND_ERROR = "backend_error"


REWARD_TERM_NAMES: tuple[str, ...] = ("outcome", "format", "valid", "milestone")


class RewardTerms(TypedDict):
    """The separate reward terms of one step; only the reward composer combines them."""

    outcome: float  # 1 on solve (final turn), else 0
    format: float  # -1 on an unparsable answer or a wrong action count
    valid: float  # -1 on an illegal action
    milestone: float  # +1 per subgoal completed for the first time on this step


def zero_terms() -> RewardTerms:
    return RewardTerms(outcome=0.0, format=0.0, valid=0.0, milestone=0.0)


class StepInfo(TypedDict):
    """The ``info`` dict returned by every milepost environment's ``reset`` and ``step``."""

    reward_terms: RewardTerms
    actions: list[str]  # canonical text of the actions applied this step, in order
    n_requested: int  # actions the answer asked for (0 on a format error)
    error: str | None  # why the answer (or its first failing action) was rejected
    correct_actions: int  # applied actions that were progress (Sudoku: solution digit; Rush Hour: closer)
    subgoals_completed: list[int]  # latched subgoal indices, in completion order
    new_subgoals: list[int]  # subgoals completed for the first time on this step
    num_subgoals: int
    goal_distance: int  # d(s0, g) in atomic units
    remaining_distance: int | None  # optimal distance from the current state, current mode's units
    steps: int  # turns used so far (the budget counts these)
    solved: bool
    termination_reason: str | None  # a TerminationReason value once the episode ended


@dataclass
class Task:
    """One puzzle instance. Serialised as one JSON object per line (``train.jsonl`` / ``test.jsonl``)."""

    task_id: str
    env: str  # "sudoku" | "rushhour" | ...
    size: int  # board side
    level: str  # level name from envs/levels.py
    goal_distance: int  # atomic action units
    split: str  # "train" | "test" | "" (ad hoc)
    seed: int
    index: int
    payload: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        return record_from_dict(cls, data)


@dataclass
class Subgoal:
    """One verifiable step toward the goal. ``predicate`` checks it on a game state where the env gives one."""

    index: int
    description: str
    success_criteria: str = ""
    preconditions: list[int] = field(default_factory=list)  # indices that should be done first
    estimated_steps: int = 1  # atomic actions the subgoal needs from the start state
    required: bool = True
    predicate: Callable[[Any], bool] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "predicate"}
        data["checkable"] = self.predicate is not None
        return data


@dataclass
class Completion:
    """One backend answer: exact token ids in and out, behaviour log-probs of the sampled distribution."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None  # one per completion token; None for scripted policies
    text: str
    finish_reason: str  # a FinishReason value: "stop" | "length" | "error" | "context_overflow"
    error: str | None = None  # one-line reason when finish_reason is "error" or "context_overflow"


@dataclass
class Turn:
    """One agent turn of an episode, as stored in ``episodes.jsonl``."""

    index: int
    observation: str
    text: str  # full model answer (think block included)
    actions: list[str]  # actions the environment applied
    reward: float
    reward_terms: RewardTerms
    subgoals_completed: list[int]
    remaining_distance: int | None
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    correct_actions: int = 0
    error: str | None = None
    n_requested: int = 0  # actions the answer asked for (0 on a format error)
    new_subgoals: list[int] = field(default_factory=list)
    state_key: str = ""  # fingerprint of the state the answer was given in (repetition detection)
    finish_reason: str = "stop"  # the backend's FinishReason; "length": cut at max_new_tokens (collapse signal)


@dataclass
class Episode:
    """A finished (or aborted) episode: the unit that SFT, RL, evaluation and reports all read."""

    task_id: str
    policy: str
    sample: int
    seed: int
    termination: TerminationReason
    success: bool
    goal_distance: int
    steps: int
    level: str = ""
    turns: list[Turn] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["termination"] = self.termination.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        return record_from_dict(cls, data)


R = TypeVar("R")


def record_from_dict(cls: type[R], data: dict[str, Any], where: str = "") -> R:
    """Build dataclass ``cls`` from a JSON-like dict, checking keys and converting nested records.

    Raises:
        InputError: on a missing or unknown key, or a value of the wrong kind, naming the field.
    """
    name = where or cls.__name__
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected an object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise InputError(f"{name}: unknown field(s) {', '.join(unknown)}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for fname, f in fields.items():
        if fname not in data:
            no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if no_default:
                raise InputError(f"{name}: missing field '{fname}'")
            continue
        kwargs[fname] = _convert(hints[fname], data[fname], f"{name}.{fname}")
    return cls(**kwargs)


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value, where) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return record_from_dict(hint, value, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            allowed = ", ".join(str(m.value) for m in hint)
            raise InputError(f"{where}: {value!r} is not one of {allowed}") from None
    if origin is list:
        if not isinstance(value, list):
            raise InputError(f"{where}: expected a list, got {type(value).__name__}")
        return [_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)] if args else value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str and not isinstance(value, str):
        raise InputError(f"{where}: expected a string, got {value!r}")
    if hint is bool and not isinstance(value, bool):
        raise InputError(f"{where}: expected true/false, got {value!r}")
    return value
