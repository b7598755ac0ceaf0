"""Test doubles for the planner and judge paths: a backend that returns canned texts, and task builders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from milepost.backends.base import GenerationRequest
from milepost.envs.levels import level_of
from milepost.envs.rushhour import RushHourEnv
from milepost.envs.rushhour import make_task as rush_task
from milepost.envs.sudoku import SudokuEnv
from milepost.envs.sudoku import make_task as sudoku_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.types import Completion, Task

RUSH_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "rushhour" / "rush_sample.txt"


class CannedBackend:
    """A ``Backend`` that answers request i with ``texts[i]`` (the last text repeats); records the prompts.

    ``error`` answers become error completions (a failed request), as a real backend reports them.
    """

    def __init__(self, texts: Sequence[str], name: str = "canned") -> None:
        self.texts = list(texts)
        self.name = name
        self.tokenizer = None
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        out = []
        for req in requests:
            text = self.texts[min(len(self.requests), len(self.texts) - 1)]
            self.requests.append(req)
            if text == "error":
                out.append(Completion([], [], [], "", "error", error="HTTP 503 after 3 attempts"))
            else:
                out.append(Completion([], [], None, text, "stop"))
        return out


def sudoku_tasks(count: int, empties: int, seed: int = 3, level: str | None = None) -> list[Task]:
    """4x4 tasks with ``empties`` empty cells, labelled with the level holding that many unless ``level`` says."""
    held = level_of("sudoku", 4, empties)
    name = level or (held.name if held else "")
    return [sudoku_task(*generate_easy(4, empties, seed, i), level=name, index=i) for i in range(count)]


def sudoku_env(task: Task | None = None, **kwargs: object) -> SudokuEnv:
    env = SudokuEnv(size=4, max_steps=20, **kwargs)  # type: ignore[arg-type]
    env.reset(options={"task": task or sudoku_tasks(1, 10)[0]})
    return env


def rush_boards(lo: int, hi: int) -> list[str]:
    """Boards of the checked-in Fogleman sample with ``lo <= min_moves <= hi``, in file order."""
    rows = [line.split() for line in RUSH_SAMPLE.read_text().splitlines() if line and not line.startswith("#")]
    return [board for moves, board, _ in rows if lo <= int(moves) <= hi]


def rush_tasks(lo: int, hi: int, count: int) -> list[Task]:
    return [rush_task(b, index=i, level=f"{lo}-{hi}") for i, b in enumerate(rush_boards(lo, hi)[:count])]


def rush_env(task: Task | None = None) -> RushHourEnv:
    env = RushHourEnv()
    env.reset(options={"task": task or rush_tasks(7, 9, 1)[0]})
    return env
