"""milepost's Sudoku as a verifiers environment (``vf.load_environment("milepost-sudoku", data=DIR, card=MODEL)``).

A thin hub entry point over :func:`milepost.integrations.verifiers.load_environment`, which documents every
argument: ``data`` is a ``milepost data sudoku`` folder, ``card`` a checkpoint folder whose prompt card sets the
prompt (renderer, memory, answer length) the model was trained with.
"""

from __future__ import annotations

from typing import Any

from milepost.integrations.verifiers import MilepostEnv
from milepost.integrations.verifiers import load_environment as _load_environment


def load_environment(data: str | None = None, card: str | None = None, **kwargs: Any) -> MilepostEnv:
    """A ``vf.MultiTurnEnv`` over the tasks of ``data`` (its test split unless ``split=`` says otherwise)."""
    return _load_environment(env="sudoku", data=data, card=card, **kwargs)
