"""The prompt card: the prompt settings a checkpoint was trained with, kept in its folder.

A model trained by milepost sees one prompt format: an environment's renderer (Rush Hour's grid or its legal-move
list), a number of past turns in memory, an action mode, an agent kind (plain, SGO, subgoal) and an answer length.
Evaluated with another format it can fail silently: the Rush Hour starts, trained with no memory, solve 0 of 160
episodes under ``milepost eval``'s default of two remembered turns
(experiments/results/rushhour_step_accuracy_split_legal.md). So every trainer writes ``milepost_prompt.json``
beside the weights, and ``milepost eval`` / ``milepost horizon`` take its values for the options the command line
leaves out and warn about those it sets otherwise.

Hugging Face's model card (README.md) is prose for people and its ``generation_config.json`` holds sampling
settings only; neither has a field for an agent's observation format, hence this small file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from milepost.errors import InputError
from milepost.io import atomic_write_json

CARD = "milepost_prompt.json"
_TYPES: dict[str, type] = {
    "env": str,
    "render": str,
    "action_mode": str,
    "memory_k": int,
    "agent": str,
    "max_new_tokens": int,
}
FIELDS = tuple(_TYPES)
"""what a card holds: the environment's name, its renderer and action mode, K, the agent kind, the answer cap"""


def card_from_config(cfg: Any) -> dict[str, Any]:
    """The card of a :class:`~milepost.training.config.TrainConfig` (its ``env`` and ``agent`` sections)."""
    return {
        "env": cfg.env.name,
        "render": cfg.env.render,
        "action_mode": cfg.env.action_mode,
        "memory_k": cfg.agent.memory_k,
        "agent": cfg.agent.agent_kind,
        "max_new_tokens": cfg.agent.max_new_tokens,
    }


def write_card(folder: str | Path, card: dict[str, Any], *, made_by: str) -> None:
    """Write ``folder/milepost_prompt.json`` atomically (``made_by``: the program that trained the model)."""
    _check(card, Path(folder) / CARD)
    atomic_write_json(Path(folder) / CARD, {**{k: card[k] for k in FIELDS if k in card}, "made_by": made_by})


def read_card(folder: str | Path) -> dict[str, Any] | None:
    """The card in ``folder`` (None when it has none).

    Raises:
        InputError: the file is not a JSON object of the known fields with their types.
    """
    path = Path(folder) / CARD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    _check(data, path)
    return data


def _check(card: dict[str, Any], path: Path) -> None:
    for key, value in card.items():
        if key == "made_by":
            continue
        want = _TYPES.get(key)
        if want is None:
            raise InputError(f"{path}: unknown field {key!r} (known: {', '.join(FIELDS)}, made_by)")
        if not isinstance(value, want) or isinstance(value, bool):
            raise InputError(f"{path}: {key} must be {want.__name__}, got {value!r}")
    if card.get("memory_k", 0) < 0 or card.get("max_new_tokens", 1) < 1:
        raise InputError(f"{path}: memory_k must be >= 0 and max_new_tokens >= 1")


def card_folder(policy: str) -> Path | None:
    """The local model folder an ``hf:`` / ``vllm:`` policy spec names (None for other kinds and hub names)."""
    kind, sep, arg = policy.strip().partition(":")
    if kind not in ("hf", "vllm") or not sep:
        return None
    folder = Path(arg.strip())
    return folder if folder.is_dir() else None


def policy_card(policy: str) -> dict[str, Any] | None:
    """The card of the local checkpoint a policy spec names (None: no local folder, or a folder without one)."""
    folder = card_folder(policy)
    return read_card(folder) if folder is not None else None


@dataclass
class Reconciled:
    """The settings an evaluation uses, with what the card supplied and where the command line differs."""

    values: dict[str, Any]
    """field -> value: the command line's, else the card's, else absent (the tool's default applies)"""
    from_card: list[str] = field(default_factory=list)
    """fields the command line left out and the card filled"""
    mismatches: list[str] = field(default_factory=list)
    """one line per field the command line sets to another value than the card's"""

    def messages(self, policy: str) -> list[str]:
        """The lines to show the user (stderr): what was taken from the card, then each mismatch."""
        out = []
        if self.from_card:
            taken = ", ".join(f"{k} {self.values[k]}" for k in self.from_card)
            out.append(f"milepost: {policy}: the prompt settings it was trained with ({CARD}): {taken}")
        out += [f"milepost: warning: {policy}: {m}" for m in self.mismatches]
        return out


def reconcile(card: dict[str, Any] | None, given: dict[str, Any], env: str) -> Reconciled:
    """Merge a checkpoint's card into the command line's settings.

    ``given`` maps each field the command has an option for to the command line's value (None: left out;
    ``env`` is not in it, it is the ``env`` argument); card fields outside it are ignored. A card for another
    environment supplies nothing and is one mismatch; otherwise a field left out takes the card's value, and a
    field set to another value than the card's is a mismatch (kept: a researcher may mean it, e.g. to measure what
    memory does to a model trained without it).
    """
    values = {k: v for k, v in given.items() if v is not None}
    if card is None:
        return Reconciled(values)
    if card.get("env", env) != env:
        return Reconciled(values, mismatches=[f"it was trained on {card['env']}, evaluated on {env}"])
    out = Reconciled(values)
    for key in given:
        if key not in card:
            continue
        if given[key] is None:
            out.values[key] = card[key]
            out.from_card.append(key)
        elif given[key] != card[key]:
            flag = "--" + key.replace("_", "-")
            out.mismatches.append(
                f"{flag} {given[key]} differs from its training prompts' {card[key]} ({CARD}): "
                "it sees prompts it was not trained on"
            )
    return out


def apply_card(
    args: Any, card: dict[str, Any] | None, defaults: dict[str, Any], env: str | None, keys: tuple[str, ...]
) -> None:
    """Fill the options ``keys`` of a command's parsed ``args`` that it left out (None) from ``card``, then from
    ``defaults``; print on stderr what the card supplied and each option set against it.

    ``env``: the environment played (a card for another one supplies nothing); None: the card's own (a suite of
    several environments)."""
    merged = reconcile(card, {k: getattr(args, k) for k in keys}, env or (card or {}).get("env", ""))
    for line in merged.messages(args.policy):
        print(line, file=sys.stderr)
    for key in keys:
        setattr(args, key, merged.values.get(key, defaults.get(key)))
