"""The knowledge probe (horizon paper, appendix D.2): does the model know the rules and the techniques at all?

Three generated multiple-choice sets (four options, one right), drawn from a Sudoku dataset's real puzzles:

* ``rules``: in a real puzzle state, which of four placements is legal (three break a rule), or which unit
  (row, column, box, none) a placement conflicts with; answers decided by the environment's own rules check.
* ``definitions``: which technique a definition describes (definitions of the techniques the grader
  implements; distractors are other techniques' names).
* ``identification``: the grader's solution path of a 9x9 puzzle gives real states and the step the grader
  found there; the item shows the grid with its pencil marks and the step's effect and asks which technique
  justifies it. Distractors are other techniques whose finders do *not* produce that step in that state.

Every item carries what is needed to recompute its answer (``ProbeItem.meta``); :func:`solve_item` does so
with the rules engine and the grader's finders, :func:`generate` keeps only items it confirms, and the scripted
``oracle`` answers by it (so its accuracy is a check of the generated answers, 100% when they are right).
``milepost eval --probe knowledge`` reports accuracy per set.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from milepost.agent.parsing import parse_answer
from milepost.backends.base import GenerationRequest
from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_jsonl, atomic_write_text
from milepost.tables import md_row
from milepost.types import Task

SETS = ("rules", "definitions", "identification")
LETTERS = "ABCD"
PROBE_FORMAT = "Answer as: REASON: one short sentence ACTION: the letter of the right option (A, B, C or D)"

# Definitions of techniques the grader implements (``grader.FINDERS``); the items draw on these.
DEFINITIONS: dict[str, str] = {
    "Full House": "A unit has a single empty cell left, so it takes the one digit the unit is missing.",
    "Naked Single": "A cell has only one candidate left, so that digit goes there.",
    "Hidden Single": "A digit has only one possible cell left in some row, column or box, so it goes there.",
    "Locked Candidates Type 1 (Pointing)": "Inside a box, a digit's candidates all lie in one row (or column), "
    "so the digit is removed from the rest of that row (or column) outside the box.",
    "Locked Candidates Type 2 (Claiming)": "Inside a row (or column), a digit's candidates all lie in one box, "
    "so the digit is removed from the rest of that box.",
    "Naked Pair": "Two cells of a unit hold the same two candidates and nothing else, so those two digits are "
    "removed from the other cells of the unit.",
    "Hidden Pair": "Two digits can go only in the same two cells of a unit, so every other candidate is removed "
    "from those two cells.",
    "Naked Triple": "Three cells of a unit hold, between them, only three digits, so those digits are removed "
    "from the other cells of the unit.",
    "X-Wing": "A digit's candidates in two rows lie in the same two columns, so the digit is removed from those "
    "columns in every other row (or the same with rows and columns swapped).",
    "Swordfish": "A digit's candidates in three rows lie within the same three columns, so the digit is removed "
    "from those columns in every other row.",
    "XY-Wing": "A pivot cell with candidates XY sees two pincer cells XZ and YZ, so Z is removed from every cell "
    "that sees both pincers.",
    "Skyscraper": "Two rows each hold a digit in exactly two cells, one pair aligned in a column, so the digit is "
    "removed from the cells that see both unaligned ends.",
    "2-String Kite": "A digit is a strong link in a row and in a column whose ends share a box, so it is removed "
    "from the cell that sees both other ends.",
    "W-Wing": "Two cells with the same two candidates XY are joined by a strong link on X, so Y is removed from "
    "the cells that see both of them.",
}


@dataclass
class ProbeItem:
    """One multiple-choice item; ``answer`` indexes ``options``; ``meta`` holds what recomputes the answer."""

    set: str
    item_id: str
    question: str
    options: list[str]
    answer: int
    meta: dict[str, Any] = field(default_factory=dict)

    def prompt(self) -> list[dict[str, str]]:
        lines = [self.question, ""] + [f"{LETTERS[i]}) {o}" for i, o in enumerate(self.options)]
        return [
            {"role": "system", "content": f"Answer a multiple-choice question about Sudoku.\n{PROBE_FORMAT}"},
            {"role": "user", "content": "\n".join(lines)},
        ]


# -- the rules set -----------------------------------------------------------------------------------------------


def _env_for(task: Task) -> Any:
    from milepost.envs.sudoku import SudokuEnv

    env = SudokuEnv(size=task.size, render="grid")
    env.reset(options={"task": task})
    return env


def _legal(env: Any, cell: tuple[int, int, int]) -> bool:
    from milepost.envs.sudoku.state import Fill

    return env.rules.check(Fill(*cell)) is None


def _conflict_units(n: int, grid: Sequence[int], row: int, col: int, digit: int) -> list[str]:
    from milepost.envs.sudoku.grid import geometry

    geo = geometry(n)
    i = row * n + col
    found = []
    kinds = (("row", geo.rows, geo.row_of), ("column", geo.cols, geo.col_of), ("box", geo.boxes, geo.box_of))
    for label, units, of in kinds:
        if any(grid[j] == digit for j in units[of[i]] if j != i):
            found.append(label)
    return found


def _fill_text(row: int, col: int, digit: int) -> str:
    return f"write {digit} in r{row + 1}c{col + 1}"


def rules_items(tasks: Sequence[Task], count: int, rng: random.Random) -> list[ProbeItem]:
    """``count`` rules items from the puzzles of ``tasks`` (alternating the two question kinds)."""
    from milepost.envs.sudoku.rules import task_grids

    out: list[ProbeItem] = []
    attempts = 0
    while len(out) < count and attempts < count * 20 and tasks:
        attempts += 1
        task = rng.choice(list(tasks))
        puzzle, _ = task_grids(task)
        n = task.size
        env = _env_for(task)
        board = env.rules.render(None)
        empty = [i for i, d in enumerate(puzzle) if d == 0]
        moves = [(i // n, i % n, d) for i in empty for d in range(1, n + 1)]
        legal = [m for m in moves if _legal(env, m)]
        illegal = [m for m in moves if not _legal(env, m)]
        kind = "legal" if len(out) % 2 == 0 else "conflict"
        if kind == "legal":
            if not legal or len(illegal) < 3:
                continue
            options = [rng.choice(legal), *rng.sample(illegal, 3)]
            rng.shuffle(options)
            answer = next(i for i, m in enumerate(options) if m in legal)
            question = f"In this {n}x{n} Sudoku, which move breaks no rule?\n{board}"
            texts = [_fill_text(*m) for m in options]
        else:
            labels = ["its row", "its column", "its box", "none: the move is legal"]
            single = [m for m in moves if len(_conflict_units(n, puzzle, *m)) == 1]
            # "none" is one option of four: a legal move a quarter of the time
            pick = single if single and (rng.random() < 0.75 or not legal) else legal
            if not pick:
                continue
            move = rng.choice(pick)
            units = _conflict_units(n, puzzle, *move)
            answer = 3 if not units else ("row", "column", "box").index(units[0])
            question = f"In this {n}x{n} Sudoku, the move '{_fill_text(*move)}' repeats a digit in which unit?\n{board}"
            texts, options = labels, [move]
        item = ProbeItem(
            "rules",
            f"rules-{len(out)}",
            question,
            texts,
            answer,
            {"kind": kind, "task": task.to_dict(), "moves": [list(m) for m in options]},
        )
        if solve_item(item) == item.answer:
            out.append(item)
    return out


# -- the definitions set -----------------------------------------------------------------------------------------


def definition_items(count: int, rng: random.Random) -> list[ProbeItem]:
    """``count`` definition items (definitions cycled in a shuffled order, fresh distractors each time)."""
    from milepost.envs.sudoku.grader.grader import FINDERS

    known = {t.value for t in FINDERS}
    names = [name for name in DEFINITIONS if name in known]
    out: list[ProbeItem] = []
    order: list[str] = []
    while len(out) < count and names:
        if not order:
            order = rng.sample(names, len(names))
        name = order.pop()
        options = [name, *rng.sample([n for n in names if n != name], 3)]
        rng.shuffle(options)
        question = f"Which Sudoku technique is this?\n{DEFINITIONS[name]}"
        item = ProbeItem("definitions", f"definitions-{len(out)}", question, options, options.index(name))
        if solve_item(item) == item.answer:
            out.append(item)
    return out


# -- the identification set ---------------------------------------------------------------------------------------


def _board_at(puzzle: Sequence[int], k: int) -> tuple[Any, Any]:
    """The grader's board before step ``k`` of its solution path, and that step."""
    from milepost.envs.sudoku.grader.candidates import Board
    from milepost.envs.sudoku.grader.grader import grade

    path = grade(list(puzzle)).steps
    board = Board.from_puzzle(list(puzzle))
    for step in path[:k]:
        board.apply(step)
    return board, path[k]


def _effect(step: Any) -> tuple[frozenset[tuple[int, int]], frozenset[tuple[int, int]]]:
    return frozenset(step.placements), frozenset(step.eliminations)


def _finds(technique: str, board: Any, effect: Any, limit: int = 2000) -> bool:
    """Whether the grader's finder of ``technique`` yields a step with ``effect`` on ``board``."""
    from itertools import islice

    from milepost.envs.sudoku.grader.grader import FINDERS
    from milepost.envs.sudoku.grader.scores import Technique

    finder = FINDERS[Technique(technique)]
    return any(_effect(s) == effect for s in islice(finder(board.copy()), limit))


def _render_marks(board: Any) -> str:
    from milepost.envs.sudoku.grader.candidates import DIGITS

    rows = []
    for r in range(9):
        cells = []
        for c in range(9):
            i = r * 9 + c
            marks = "{" + "".join(map(str, DIGITS[board.cands[i]])) + "}"
            cells.append(str(board.values[i]) if board.values[i] else marks)
        rows.append(f"r{r + 1}: " + " ".join(cells))
    return "\n".join(rows)


def _describe_effect(step: Any) -> str:
    from milepost.envs.sudoku.grader.candidates import name

    if step.placements:
        return "places " + ", ".join(f"{d} in {name(c)}" for c, d in step.placements)
    return "removes " + ", ".join(f"{d} from {name(c)}" for c, d in step.eliminations)


def identification_items(tasks: Sequence[Task], count: int, rng: random.Random) -> list[ProbeItem]:
    """``count`` identification items from the grader's solution paths of the 9x9 puzzles of ``tasks``, balanced
    over the techniques met (round robin), distractors checked not to produce the step."""
    from milepost.envs.sudoku.grader.grader import FINDERS, grade
    from milepost.envs.sudoku.rules import task_grids

    pool: dict[str, list[tuple[Task, int]]] = {}
    for task in tasks:
        if task.size != 9:
            continue
        puzzle, solution = task_grids(task)
        for k, step in enumerate(grade(puzzle, solution).steps):
            pool.setdefault(step.technique.value, []).append((task, k))
    techniques = sorted(pool)
    names = [t.value for t in FINDERS]
    out: list[ProbeItem] = []
    tries = 0
    while len(out) < count and techniques and tries < count * 10:
        tries += 1
        technique = techniques[len(out) % len(techniques)] if tries <= count else rng.choice(techniques)
        task, k = rng.choice(pool[technique])
        puzzle, _ = task_grids(task)
        board, step = _board_at(puzzle, k)
        effect = _effect(step)
        candidates = [t for t in rng.sample(names, len(names)) if t != technique]
        distractors = []
        for other in candidates:
            if not _finds(other, board, effect):
                distractors.append(other)
            if len(distractors) == 3:
                break
        if len(distractors) < 3:
            continue
        options = [technique, *distractors]
        rng.shuffle(options)
        question = (
            "In this 9x9 Sudoku (placed digits, and each empty cell's remaining candidates in braces), the next "
            f"step {_describe_effect(step)}. Which technique justifies it?\n{_render_marks(board)}"
        )
        item = ProbeItem(
            "identification",
            f"identification-{len(out)}",
            question,
            options,
            options.index(technique),
            {"task": task.to_dict(), "step": k},
        )
        if solve_item(item) == item.answer:
            out.append(item)
    return out


# -- checking and answering -------------------------------------------------------------------------------------


def solve_item(item: ProbeItem) -> int | None:
    """The option index the rules engine / the grader confirm, or None when not exactly one option is right.

    rules: the environment's rules check on each move (``legal``) or the unit that repeats the digit
    (``conflict``); definitions: the definition table; identification: each option's finder, run on the
    grader's board at that step, must (only for one option) produce the step's effect.
    """
    if item.set == "definitions":
        text = item.question.split("\n", 1)[1]
        right = [i for i, o in enumerate(item.options) if DEFINITIONS.get(o) == text]
    elif item.set == "rules":
        task = Task.from_dict(item.meta["task"])
        env = _env_for(task)
        moves = [tuple(m) for m in item.meta["moves"]]
        if item.meta["kind"] == "legal":
            right = [i for i, m in enumerate(moves) if _legal(env, m)]
        else:
            from milepost.envs.sudoku.rules import task_grids

            puzzle, _ = task_grids(task)
            units = _conflict_units(task.size, puzzle, *moves[0])
            if len(units) > 1:
                return None
            right = [3 if not units else ("row", "column", "box").index(units[0])]
            if (not units) != _legal(env, moves[0]):
                return None  # the geometry and the environment's check disagree
    elif item.set == "identification":
        from milepost.envs.sudoku.rules import task_grids

        puzzle, _ = task_grids(Task.from_dict(item.meta["task"]))
        board, step = _board_at(puzzle, int(item.meta["step"]))
        effect = _effect(step)
        right = [i for i, o in enumerate(item.options) if _finds(o, board, effect)]
    else:
        raise InputError(f"probe: unknown set {item.set!r}")
    return right[0] if len(right) == 1 else None


def generate(tasks: Sequence[Task], per_set: int, seed: int) -> list[ProbeItem]:
    """Every set's items (``per_set`` each at most; fewer when the data cannot supply them: identification
    needs 9x9 puzzles), each confirmed by :func:`solve_item`."""
    rng = random.Random(seed)
    return [
        *rules_items(tasks, per_set, random.Random(rng.random())),
        *definition_items(per_set, random.Random(rng.random())),
        *identification_items(tasks, per_set, random.Random(rng.random())),
    ]


def parse_choice(text: str) -> int | None:
    """The option letter of an answer's ACTION (A-D, any case, surrounding punctuation ignored)."""
    action = parse_answer(text).action.strip().strip(".)(:").strip().upper()
    return LETTERS.index(action) if len(action) == 1 and action in LETTERS else None


def answer_items(items: Sequence[ProbeItem], policy: Any, settings: Any, seed: int) -> list[str]:
    """Each item's answer text: a scripted policy answers by :func:`solve_item` (the noisy oracle with
    probability p, else a random letter; random: a random letter); a model backend is asked the prompt."""
    from milepost.agent.parsing import format_answer

    if getattr(policy, "scripted", False):
        texts = []
        for item in items:
            rng = random.Random(f"{seed}:{item.item_id}")
            if policy.kind == "oracle" or (policy.kind == "noisy-oracle" and rng.random() < policy.p):
                choice = solve_item(item)
                texts.append(format_answer("checked.", LETTERS[choice]) if choice is not None else "")
            else:
                texts.append(format_answer("a guess.", rng.choice(LETTERS)))
        return texts
    backend = getattr(policy, "backend", None)
    if backend is None:
        raise InputError(f"--probe: policy {getattr(policy, 'name', policy)!r} has no model backend")
    out: list[str] = []
    batch = max(1, int(settings.batch_size))
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        requests = [
            GenerationRequest(messages=item.prompt(), params=settings.sampling(seed * 100_003 + start + i))
            for i, item in enumerate(chunk)
        ]
        out += [c.text for c in backend.generate(requests)]
    return out


def run_probe(
    tasks: Sequence[Task],
    policy: Any,
    settings: Any,
    out: str | Path,
    *,
    per_set: int = 50,
    seed: int = 0,
    label: str = "",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Generate the items, answer them, and write ``probe.jsonl``, ``metrics.json`` and ``report.md``."""
    items = generate(tasks, per_set, seed)
    if not items:
        raise InputError("--probe knowledge: no items could be generated from this data")
    texts = answer_items(items, policy, settings, seed)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    per: dict[str, dict[str, int]] = {}
    for item, text in zip(items, texts):
        choice = parse_choice(text)
        row = {**asdict(item), "response": text, "choice": choice, "correct": choice == item.answer}
        rows.append(row)
        stats = per.setdefault(item.set, {"items": 0, "correct": 0, "unparsed": 0})
        stats["items"] += 1
        stats["correct"] += int(choice == item.answer)
        stats["unparsed"] += int(choice is None)
    accuracy = {name: s["correct"] / s["items"] for name, s in per.items()}
    sets: dict[str, dict[str, Any]] = {name: {**per[name], "accuracy": accuracy[name]} for name in SETS if name in per}
    result = {"meta": {"policy": label, "per_set": per_set, "seed": seed, "tasks": len(tasks)}, "sets": sets}
    atomic_write_jsonl(folder / "probe.jsonl", rows)
    atomic_write_json(folder / "metrics.json", result)
    lines = [
        f"# Knowledge probe: {label}",
        "",
        f"Generated multiple-choice items (4 options, chance 25%) from {len(tasks)} puzzles, seed {seed}; every "
        "answer key confirmed by the rules engine or the technique grader.",
        "",
        "| set | items | correct | accuracy (%) | unparsed answers |",
        "|---|---|---|---|---|",
    ]
    for name, s in sets.items():
        lines.append(md_row([name, s["items"], s["correct"], f"{100 * s['accuracy']:.1f}", s["unparsed"]]))
    missing = [name for name in SETS if name not in per]
    if missing:
        lines += ["", f"No items for: {', '.join(missing)} (identification needs 9x9 puzzles)."]
    atomic_write_text(folder / "report.md", "\n".join(lines) + "\n")
    return result
