"""Help texts read from the registries they describe, so ``--help`` never drifts from what exists.

Environments come from ``milepost.envs.ENVS``, their sizes from the level table (``envs.levels``) and each
environment's ``size=`` default, policy kinds from ``backends.base.POLICY_FORMS`` and model backends from
``milepost.backends.BACKENDS`` (Gymnasium's ``pprint_registry`` does the same for its environments).
``tests/cli/test_help_registries.py`` checks that every registered name appears in the commands' help.
"""

from __future__ import annotations

import inspect

from milepost.backends import BACKENDS
from milepost.backends.base import POLICY_KINDS, policy_forms
from milepost.envs import ENVS
from milepost.envs.levels import SIZE_MEANING, sizes_of


def env_names(sep: str = " | ") -> str:
    """The registered environments: ``rushhour | sudoku | webshop``."""
    return sep.join(ENVS.names())


def policy_help() -> str:
    """Every ``--policy`` form: the model backends and the scripted baselines."""
    return policy_forms(POLICY_KINDS)


def backend_help(kinds: tuple[str, ...] | None = None) -> str:
    """The model backends' forms (``hf:PATH | openai:MODEL@BASE_URL | vllm:PATH``); ``kinds`` narrows them to
    the ones a caller accepts (the LLM planner and judges)."""
    return policy_forms(kinds if kinds is not None else tuple(BACKENDS.names()))


def size_help() -> str:
    """What ``--size`` means per environment, its values and default:
    ``sudoku: board side 4 | 6 | 9 (default 9); ...``."""
    parts = []
    for name in ENVS.names():
        sizes = sizes_of(name)
        default = inspect.signature(ENVS.get(name)).parameters["size"].default
        values = " | ".join(map(str, sizes))
        parts.append(f"{name}: {SIZE_MEANING[name]} {values}" + (f" (default {default})" if len(sizes) > 1 else ""))
    return "; ".join(parts)
