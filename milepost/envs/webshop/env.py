"""The web-shop text environment: ``milepost/WebShop-v0`` in Gymnasium, ``webshop`` in milepost."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

from milepost.config import RewardWeights
from milepost.envs.actions import ActionMode, action_segment, split_actions
from milepost.envs.base import Rules, TextEnv, printable
from milepost.envs.levels import DEFAULT_LEVELS, get_level
from milepost.envs.webshop.catalogue import DIFFICULTIES
from milepost.envs.webshop.profile import DEFAULT_PROFILE, UNBOUNDED_STEPS, get_profile
from milepost.envs.webshop.render import RENDER_MODES
from milepost.envs.webshop.rules import WebShopRules
from milepost.envs.webshop.state import MAX_ITEMS, Action
from milepost.envs.webshop.tasks import DEFAULT_CATALOGUE_SEED, DEFAULT_CATALOGUE_SIZE, generate_task
from milepost.errors import InputError
from milepost.types import StepInfo, Task

# Turns per item ordered under the milepost profile (WebShop's text env has no budget; its baselines use 100).
BUDGET_PER_ITEM = 15
_SAMPLE_TRIES = 2000
_ANSWER_FORMAT = re.compile(r"REASON:.*ACTION:", re.DOTALL)


class WebShopEnv(TextEnv[Any, Action]):
    """The generated web shop as a Gymnasium text environment.

    A purchase ends the episode: ``terminated`` with ``solved`` when it is exactly the order, else ``dead_end``
    with the profile's partial credit as the ``outcome`` term (a cart line no item wants is a dead end too, since
    lines cannot be removed). ``truncated`` = the budget H_max ran out.

    Args:
        size: items per order (1-4).
        level: goal-distance range used when ``reset`` gets no task (default: the first default level of size).
        max_steps: H_max (default: the profile's, 15 per item under ``milepost``, none under ``webshop``).
        profile: ``milepost`` (default) | ``webshop``: reward, rules and observation strings
            (``milepost.envs.webshop.profile``).
        action_mode: ``atomic`` | ``flexible`` (up to ``macro_k``) | ``fixed`` (``macro_n``).
        render: ``text`` (WebShop's text mode) | ``text_rich``; ``grid`` (the config default) means ``text``.
        catalogue_seed, catalogue_size: the catalogue that generated tasks use.
        difficulty: ``easy`` (default) | ``medium`` | ``hard``: the generated tasks' catalogue and instructions
            (``milepost.envs.webshop.tasks``; a task given to ``reset`` keeps its own).
        reward_weights, observe, render_mode: as for every text environment.
        wrong_fill, allow_overwrite, subgoals: Sudoku settings that ``EnvConfig.env_kwargs`` passes to every
            environment; accepted and ignored.
    """

    def __init__(
        self,
        size: int = 1,
        level: str | None = None,
        max_steps: int | None = None,
        action_mode: str = "atomic",
        macro_k: int | None = None,
        macro_n: int | None = None,
        render: str = "text",
        catalogue_seed: int = DEFAULT_CATALOGUE_SEED,
        catalogue_size: int = DEFAULT_CATALOGUE_SIZE,
        reward_weights: RewardWeights | dict[str, float] | None = None,
        observe: bool = True,
        render_mode: str | None = None,
        wrong_fill: str = "dead_end",
        allow_overwrite: bool = False,
        subgoals: Sequence[str] = ("boxes",),
        profile: str = DEFAULT_PROFILE,
        difficulty: str = "easy",
    ) -> None:
        shop_profile = get_profile(profile)
        if difficulty not in DIFFICULTIES:
            raise InputError(f"webshop: difficulty must be one of {', '.join(DIFFICULTIES)}, not {difficulty!r}")
        self.difficulty = difficulty
        if not 1 <= size <= MAX_ITEMS:
            raise InputError(f"webshop: size is the number of items per order, 1-{MAX_ITEMS}, not {size}")
        render = "text" if render == "grid" else render
        if render not in RENDER_MODES:
            raise InputError(f"webshop: unknown renderer {render!r} (known: {', '.join(RENDER_MODES)})")
        if action_mode not in ("atomic", "flexible", "fixed"):
            raise InputError(f"webshop: action_mode must be atomic, flexible or fixed, not {action_mode!r}")
        if action_mode == "fixed" and (macro_n is None or macro_n < 1):
            raise InputError("webshop: fixed action mode needs macro_n >= 1")
        if macro_k is not None and (action_mode != "flexible" or macro_k < 1):
            raise InputError("webshop: macro_k >= 1 goes with action_mode=flexible")
        for name, value in (("catalogue_seed", catalogue_seed), ("catalogue_size", catalogue_size)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InputError(f"webshop: {name} must be an integer, not {value!r}")
        self.size = size
        default = DEFAULT_LEVELS[("webshop", size)].split(",")[0]
        self.level = get_level("webshop", size, level or default)
        self.catalogue_seed = catalogue_seed
        self.catalogue_size = catalogue_size
        self.render_name = render
        self.profile = shop_profile.name
        self._original_grammar = shop_profile.original_grammar
        mode = ActionMode(action_mode, macro_k, macro_n)

        def make_rules(task: Task) -> WebShopRules:
            if task.env != "webshop":
                raise InputError(f"task {task.task_id} is a {task.env} task, not webshop")
            return WebShopRules(task, action_mode=mode, render=render, profile=shop_profile)

        if max_steps is None:
            per_item = shop_profile.budget_per_item
            max_steps = UNBOUNDED_STEPS if per_item is None else per_item * size
        super().__init__(
            make_rules,
            self.sample_task,
            max_steps=max_steps,
            action_mode=mode,
            reward_weights=reward_weights,
            observe=observe,
            render_mode=render_mode,
        )

    def sample_task(self, seed: int) -> Task:
        """A generated task of the env's level and size, deterministic in ``seed``."""
        for index in range(_SAMPLE_TRIES):
            task = generate_task(
                seed,
                index,
                self.size,
                catalogue_seed=self.catalogue_seed,
                catalogue_size=self.catalogue_size,
                difficulty=self.difficulty,
            )
            if task is not None and self.level.contains(task.goal_distance):
                task.level = self.level.name
                task.task_id = f"webshop-{self.level.name}-{seed}-{index}"
                return task
        raise InputError(f"webshop: no task of level {self.level.name} found in {_SAMPLE_TRIES} draws")

    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, StepInfo]:
        """Start ``options["task"]`` (a ``Task`` or its dict), or a sampled task of the env's level.

        Raises:
            InputError: ``options["task"]`` is something else (checked before any state changes).
        """
        task = (options or {}).get("task")
        if task is not None and not isinstance(task, Task | dict):
            raise InputError(f"webshop: options['task'] must be a Task or its dict, not {type(task).__name__}")
        return super().reset(seed=seed, options=options)

    def _parse(self, rules: Rules[Any, Action], text: str) -> tuple[list[str], list[Action], str | None]:
        """Under a profile with ``original_grammar`` the answer is WebShop's ``step`` argument: in the atomic mode
        the whole text is one action, read by ``WebShopRules.parse`` (no trimming; an empty answer is a no-op
        with reward 0, as in WebShop), except that an answer in milepost's answer format (``REASON: ...
        ACTION: a``) hands over its action ``a``. The macro modes, which WebShop has not, split on
        ``;`` and newlines and trim each piece, as milepost does. Otherwise milepost's reading (``TextEnv``)."""
        if not self._original_grammar:
            return super()._parse(rules, text)
        text = text if isinstance(text, str) else ""
        if _ANSWER_FORMAT.search(text):
            # milepost's answer format (agent/parsing.py format_answer: "REASON: ... ACTION: a", tags as written
            # there): its action part `a`, trimmed, is what goes to WebShop's step, as a WebShop harness hands
            # step() the text after ReAct's "Action:". Any other text goes as it is, so a bare "ACTION: a" does
            # nothing, as in WebShop.
            text = action_segment(text).strip(string.whitespace)
        pieces = [text] if self.action_mode.max_actions == 1 else (split_actions(text) or [text])
        error = self.action_mode.count_error(len(pieces))
        parsed: list[Action] = []
        if error is None:
            for piece in pieces:
                act = rules.parse(piece)  # the webshop rules read unparsable text as a no-op, never None
                if act is None:
                    return pieces, [], f"cannot parse action {printable(piece[:60])!r}"
                parsed.append(act)
        return pieces, parsed, error

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:  # type: ignore[override]
        obs, reward, terminated, truncated, info = super().step(action)
        rules = self.rules
        assert isinstance(rules, WebShopRules)
        if terminated and not info["solved"]:
            # A wrong purchase earns WebShop's partial credit; the composer sees it as the outcome term.
            credit = rules.state.outcome()
            info["reward_terms"]["outcome"] = credit
            reward += self.weights.outcome * credit
        return obs, reward, terminated, truncated, info
