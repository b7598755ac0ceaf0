"""Rollouts written by another framework, replayed in milepost's environments for the credit audit.

``milepost credit audit --rollouts FILE --env E --data D --out DIR`` reads a file of rollouts, replays every
turn's text in the environment on its task (which recovers the exact goal distance before and after each turn),
builds milepost ``Episode`` records of the replay, and scores the framework's own advantages against
A* = d(s_t) - d(s_t+1) - c_t as one more row of the audit table (``imported``), beside milepost's estimators on
the same turns.

The documented format (``--format milepost``, the default): JSONL, one rollout per line::

    {"task_id": "sudoku-4-easy-test-0003", "sample": 0,
     "turns": [{"text": "REASON: ... ACTION: place(r1c2, 3)", "advantage": 0.41}, ...]}

``task_id`` names a task of ``--data`` (any split); ``turns`` holds each turn's answer text, passed to the
environment unchanged (it parses the ``ACTION:`` part), and the framework's advantage for that turn (a finite
number); ``sample`` (optional, default: the count of earlier lines of the same task) tells the group's copies
apart. A turn that the environment rejects (a malformed or illegal answer) is a turn like any other, with
A* < 0. Refused, as one line naming FILE:LINE: malformed JSON, NaN or infinite numbers, an unknown task, a
line with no turns, and a line whose episode ends (solved) before its last turn.

Converters (``--format``) map what three frameworks actually write onto the same records:

- ``verl``: the trainer's rollout dump (``trainer.rollout_data_dir``): ``RayPPOTrainer._dump_generations``
  (verl/trainer/ppo/ray_trainer.py, commit b178a3c) writes ``{step}.jsonl`` lines with ``input`` (decoded
  prompt), ``output`` (decoded response), ``gts``, ``score`` (the sum of ``token_level_scores``), ``step`` and
  the reward's extra infos. It writes no advantage and no turn boundary: milepost's agent loop appends each
  observation as a user message (``[Rejected: ERROR\\n]Current observation:\\nOBS``), so the replay cuts each
  answer off where the observation it produces begins, whatever the chat template left around it once decoded
  with special tokens skipped; the imported advantage is the sample's ``score``, the same on every turn (an
  outcome score, not an advantage: say so when you read it).
- ``trl``: GRPOTrainer's completions log (``log_completions=True``): ``GRPOTrainer.log``
  (trl/trainer/grpo_trainer.py, TRL 1.16.0) writes ``OUTPUT_DIR/completions/completions_NNNNN.parquet`` with
  columns ``step``, ``prompt``, ``completion``, one per reward function, the ``log_extra`` columns and
  ``advantage``. The advantage is one number per completion (GRPO's group-normalised outcome): it is repeated
  on every turn. Turns: a string completion is one turn; a conversational one (a list of messages) has one
  turn per assistant message. With ``environment_factory`` the logged prompt carries what ``reset`` returned
  (``_generate_and_score_completions`` appends it to the last message before logging), which is how a row
  without a ``task_id`` column finds its task.
- ``verifiers``: two layouts. verifiers 0.3's ``Environment.evaluate(save_results=True)`` writes
  ``results.jsonl`` (and ``metadata.json``) rows made by ``state_to_output``
  (verifiers/legacy/utils/save_utils.py, verifiers 0.3.1): ``example_id``, ``prompt``, ``completion`` (the
  messages), ``answer``, ``info``, ``reward``, ``metrics``. There is no advantage: turns are the completion's
  assistant messages and the imported advantage is the row's ``reward`` on every turn (or an ``advantage``
  field, when a state column adds one). verifiers 0.4.0 saves ``traces.jsonl`` instead
  (verifiers/v1/utils/trace_store.py: one ``Episode`` per line, ``traces[].nodes[]`` the message graph).
  Turns are the ``sampled`` assistant nodes; a node's ``advantages`` are per-token credit
  (verifiers/v1/graph.py), averaged over the node's tokens for its turn's advantage. An evaluation run assigns
  none (``advantages`` null): the converter refuses such a line (nothing to score). Task id: ``info.task_id``
  (0.3) or ``task.data.task_id`` / ``task.key`` (0.4), else the task whose start the prompt shows.

In the verl and TRL formats the task id is a ``task_id`` field (a TRL ``log_extra`` column, a verl reward extra
info), else the task whose turn-1 observation the prompt contains.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from milepost.datasets import SPLITS, load_tasks, split_file
from milepost.envs import make_env
from milepost.errors import InputError
from milepost.types import Episode, Task, TerminationReason, Turn

FORMATS = ("milepost", "verl", "trl", "verifiers")
IMPORTED = "imported"


@dataclass
class Rollout:
    """One imported rollout: where it came from, its task (an id, or a prompt to find it by) and its turns."""

    where: str  # FILE:LINE (or FILE:ROW)
    task_id: str | None
    prompt: str | None
    texts: list[str]
    advantages: list[float]
    sample: int | None = None
    output: str | None = None  # verl: the decoded response, cut into turns by the replay
    score: float = 0.0  # verl: the sample's score, every turn's imported advantage


def _refuse_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}")


def _loads(line: str, where: str) -> Any:
    """Strict JSON: NaN and +-Infinity are refused (Python's json accepts them by default)."""
    try:
        return json.loads(line, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:
        raise InputError(f"{where}: {exc} (JSON has no NaN or Infinity)") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None


def _lines(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, 1):
            where = f"{path}:{n}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{where}: not UTF-8 text") from None
            if not line.strip():
                continue
            obj = _loads(line, where)
            if not isinstance(obj, dict):
                raise InputError(f"{where}: expected a JSON object")
            yield where, obj


def _finite(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {what} must be a number, got {type(value).__name__}")
    x = float(value)
    if not math.isfinite(x):
        raise InputError(f"{where}: {what} is not finite")
    return x


def read_milepost(path: Path) -> list[Rollout]:
    """The documented format (module docstring)."""
    out = []
    for where, obj in _lines(path):
        task_id = obj.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise InputError(f"{where}: task_id must be a non-empty string")
        turns = obj.get("turns")
        if not isinstance(turns, list) or not turns:
            raise InputError(f"{where}: turns must be a non-empty list")
        texts, advs = [], []
        for k, turn in enumerate(turns):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                raise InputError(f"{where}: turns[{k}] must be an object with a string text")
            texts.append(turn["text"])
            advs.append(_finite(turn.get("advantage"), where, f"turns[{k}].advantage"))
        sample = obj.get("sample")
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int)):
            raise InputError(f"{where}: sample must be an integer")
        out.append(Rollout(where, task_id, None, texts, advs, sample))
    return out


def read_verl(path: Path) -> list[Rollout]:
    """verl's rollout dump, ``{step}.jsonl`` (module docstring). The turns are cut out of ``output`` during the
    replay (:func:`_split_turns`), which knows the observation that follows each answer."""
    out = []
    for where, obj in _lines(path):
        output, prompt = obj.get("output"), obj.get("input")
        if not isinstance(output, str) or not isinstance(prompt, str):
            raise InputError(f"{where}: a verl dump line needs string input and output")
        score = _finite(obj.get("score"), where, "score")
        task_id = obj.get("task_id")
        tid = task_id if isinstance(task_id, str) else None
        out.append(Rollout(where, tid, prompt, [], [], output=output, score=score))
    return out


OBSERVATION = "Current observation:\n"  # milepost.agent.prompts.build_messages: the user message's observation
REJECTED = "Rejected: "  # milepost.integrations.verl.agent_loop.observation_message: the rejection before it
_ROLE_LINE = re.compile(r"^\s*(assistant|user)\s*$")


def _next_message(rest: str) -> int:
    """Where the next observation message begins in a decoded verl response (-1: none)."""
    found = [i for i in (rest.find(REJECTED), rest.find(OBSERVATION)) if i >= 0]
    return min(found) if found else -1


def _strip_scaffold(answer: str) -> str:
    """An answer without the template's leftovers around it (blank lines, ChatML role words on their own line)."""
    lines = answer.split("\n")
    while lines and (not lines[0].strip() or _ROLE_LINE.match(lines[0])):
        lines.pop(0)
    while lines and (not lines[-1].strip() or _ROLE_LINE.match(lines[-1])):
        lines.pop()
    return "\n".join(lines)


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def read_trl(path: Path) -> list[Rollout]:
    """TRL's completions log: one ``completions_NNNNN.parquet`` or the ``completions`` folder of them."""
    from milepost.tables import read_parquet

    files = sorted(path.glob("completions_*.parquet")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise InputError(f"{path}: no TRL completions parquet (completions_NNNNN.parquet)")
    out = []
    for file in files:
        table = read_parquet(file)
        missing = [c for c in ("prompt", "completion", "advantage") if c not in table.column_names]
        if missing:
            raise InputError(f"{file}: not a TRL completions log (no {', '.join(missing)} column)")
        for n, row in enumerate(table.to_pylist(), 1):
            where = f"{file}:{n}"
            adv = _finite(row["advantage"], where, "advantage")
            completion, prompt = row["completion"], row["prompt"]
            if isinstance(completion, str):
                texts = [completion]
            elif isinstance(completion, list):
                texts = [_content(m) for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
            else:
                raise InputError(f"{where}: completion must be text or a list of messages")
            if not texts:
                raise InputError(f"{where}: the completion has no assistant turn")
            if isinstance(prompt, list):
                prompt = "\n".join(_content(m) for m in prompt)
            task_id = row.get("task_id")
            out.append(
                Rollout(
                    where,
                    task_id if isinstance(task_id, str) else None,
                    prompt if isinstance(prompt, str) else None,
                    texts,
                    [adv] * len(texts),
                )
            )
    return out


def _read_verifiers_results(file: Path) -> list[Rollout]:
    """verifiers 0.3's ``results.jsonl`` rows (``state_to_output``): turns are the completion's assistant
    messages, the advantage the row's ``advantage`` when a state column carries one, else its ``reward``."""
    out = []
    for where, obj in _lines(file):
        completion = obj.get("completion")
        if not isinstance(completion, list):
            raise InputError(f"{where}: a verifiers result needs a completion (a list of messages)")
        texts = [_content(m) for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
        if not texts:
            raise InputError(f"{where}: the completion has no assistant turn")
        adv = _finite(obj.get("advantage", obj.get("reward")), where, "reward")
        info = obj.get("info")
        task_id = info.get("task_id") if isinstance(info, dict) else None
        prompt = obj.get("prompt")
        text = "\n".join(_content(m) for m in prompt) if isinstance(prompt, list) else prompt
        tid = task_id if isinstance(task_id, str) else None
        out.append(Rollout(where, tid, text if isinstance(text, str) else None, texts, [adv] * len(texts)))
    return out


def read_verifiers(path: Path) -> list[Rollout]:
    """verifiers' saved rollouts: 0.4's ``traces.jsonl`` or 0.3's ``results.jsonl`` (a results folder or
    either file)."""
    file = path
    if path.is_dir():
        file = path / "traces.jsonl" if (path / "traces.jsonl").is_file() else path / "results.jsonl"
    if file.name == "results.jsonl":
        return _read_verifiers_results(file)
    out = []
    for where, obj in _lines(file):
        task = obj.get("task")
        task = task if isinstance(task, dict) else {}
        data = task.get("data")
        task_id = data.get("task_id", task.get("key")) if isinstance(data, dict) else task.get("key")
        for trace in obj.get("traces") or []:
            nodes = trace.get("nodes") if isinstance(trace, dict) else None
            if not isinstance(nodes, list):
                raise InputError(f"{where}: a trace without nodes")
            texts, advs, prompt = [], [], []
            for node in nodes:
                message = node.get("message") if isinstance(node, dict) else None
                if not isinstance(message, dict):
                    continue
                if node.get("sampled") and message.get("role") == "assistant":
                    credit = node.get("advantages")
                    if credit is None:
                        raise InputError(
                            f"{where}: an assistant node has no advantages (an evaluation run assigns none; "
                            "only a training run's traces carry credit)"
                        )
                    values = [_finite(v, where, "advantages[]") for v in credit] or [0.0]
                    texts.append(_content(message))
                    advs.append(sum(values) / len(values))
                elif not texts and message.get("role") == "user":
                    prompt.append(_content(message))
            if not texts:
                raise InputError(f"{where}: a trace with no sampled assistant turn")
            tid = task_id if isinstance(task_id, str) else None
            out.append(Rollout(where, tid, "\n".join(prompt), texts, advs))
    return out


READERS = {"milepost": read_milepost, "verl": read_verl, "trl": read_trl, "verifiers": read_verifiers}


def read_rollouts(path: str | Path, fmt: str = "milepost") -> list[Rollout]:
    """The rollouts of ``path`` in format ``fmt`` (``FORMATS``)."""
    if fmt not in READERS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    rollouts = READERS[fmt](Path(path))
    if not rollouts:
        raise InputError(f"{path}: no rollouts")
    return rollouts


def _all_tasks(data: str | Path) -> dict[str, Task]:
    source = Path(data)
    if source.is_dir():
        splits = [s for s in SPLITS if split_file(source, s) is not None]
        if not splits:
            raise InputError(f"{source}: no split (train or test) to find the rollouts' tasks in")
        tasks = [t for s in splits for t in load_tasks(source, s)]
    else:
        tasks = load_tasks(source)
    return {t.task_id: t for t in tasks}


def _resolve(rollouts: Sequence[Rollout], tasks: dict[str, Task], env: str, kwargs: dict[str, Any]) -> list[Task]:
    """Each rollout's task: by id, else the task whose turn-1 observation its prompt contains."""
    by_obs: dict[str, Task] | None = None
    out = []
    for r in rollouts:
        if r.task_id is not None:
            if r.task_id not in tasks:
                raise InputError(f"{r.where}: unknown task {r.task_id!r} (not in --data)")
            out.append(tasks[r.task_id])
            continue
        if by_obs is None:
            by_obs = {}
            for task in tasks.values():
                probe = make_env(env, **{**kwargs, "size": task.size})
                obs, _ = probe.reset(options={"task": task})
                by_obs[obs] = task
        found = [t for obs, t in by_obs.items() if r.prompt and obs in r.prompt]
        if len(found) != 1:
            why = "no task of --data" if not found else f"{len(found)} tasks"
            raise InputError(f"{r.where}: no task_id, and the prompt shows the start of {why}")
        out.append(found[0])
    return out


def replay(
    rollouts: Sequence[Rollout], env: str, data: str | Path, env_kwargs: dict[str, Any] | None = None
) -> tuple[list[Episode], list[torch.Tensor]]:
    """Play every rollout's turns in ``env`` on its task: milepost episodes of the replay, and per episode the
    ``(T,)`` imported advantages."""
    kwargs = dict(env_kwargs or {})
    tasks = _all_tasks(data)
    chosen = _resolve(rollouts, tasks, env, kwargs)
    episodes, advs = [], []
    seen: dict[str, int] = {}
    for r, task in zip(rollouts, chosen):
        if task.env != env:
            raise InputError(f"{r.where}: task {task.task_id} is a {task.env} task, not {env}")
        budget = len(r.texts) if r.output is None else r.output.count(OBSERVATION) + 1
        game = make_env(env, **{**kwargs, "size": task.size, "max_steps": max(1, budget)})
        obs, info = game.reset(options={"task": task})
        turns: list[Turn] = []
        terminated = truncated = False
        rest = r.output
        texts = list(r.texts)
        k = 0
        while k < len(texts) or rest is not None:
            if rest is not None:  # verl: the answer runs up to the observation message that follows it
                cut = _next_message(rest)
                texts.append(_strip_scaffold(rest if cut < 0 else rest[:cut]))
            if terminated or truncated:
                raise InputError(
                    f"{r.where}: the episode ended at turn {k} of {len(texts)} (the actions do not replay)"
                )
            key = game.state_key()
            before = obs
            obs, reward, terminated, truncated, info = game.step(texts[k])
            turns.append(
                Turn(
                    index=k,
                    observation=before,
                    text=texts[k],
                    actions=list(info["actions"]),
                    reward=float(reward),
                    reward_terms=info["reward_terms"],
                    subgoals_completed=list(info["subgoals_completed"]),
                    remaining_distance=info["remaining_distance"],
                    correct_actions=info["correct_actions"],
                    error=info["error"],
                    n_requested=info["n_requested"],
                    new_subgoals=list(info["new_subgoals"]),
                    state_key="" if key is None else repr(key),
                )
            )
            k += 1
            if rest is not None:
                message = (f"{REJECTED}{info['error']}\n" if info["error"] else "") + OBSERVATION + obs
                if cut < 0 or terminated or truncated:
                    rest = None  # the response ends here (the last observation, or cut at the length budget)
                elif not rest[cut:].startswith(message):
                    raise InputError(
                        f"{r.where}: turn {k}'s observation in the dump is not the replay's (another task, or "
                        "the turns do not replay)"
                    )
                else:
                    rest = rest[cut + len(message) :]
                    if not rest.strip():
                        rest = None
        if r.output is not None:
            r.texts, r.advantages = texts, [r.score] * len(texts)
        solved = bool(info["solved"])
        reason = TerminationReason.SOLVED if solved else TerminationReason.BUDGET_EXHAUSTED
        sample = r.sample if r.sample is not None else seen.get(task.task_id, 0)
        seen[task.task_id] = seen.get(task.task_id, 0) + 1
        episodes.append(
            Episode(
                task_id=task.task_id,
                policy="imported",
                sample=sample,
                seed=0,
                termination=reason,
                success=solved,
                goal_distance=int(info["goal_distance"]),
                steps=len(turns),
                level=task.level,
                turns=turns,
                meta={"env": env, "source": r.where},
            )
        )
        advs.append(torch.tensor(r.advantages, dtype=torch.float64))
    return episodes, advs
