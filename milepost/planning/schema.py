"""The LLM planner's answer: JSON extraction, schema checks and mapping onto the predicate vocabulary.

Every check raises ``PlanRejected`` with one line saying what is wrong, and nothing else escapes: a planner
answer is untrusted text (it may be prose, truncated, enormous, deeply nested, or written to mislead), so
the functions here are total over strings. The accepted shape is::

    {"subgoals": [{"description": "complete box 3", "target": "box 3", "success_criteria": "...",
                   "preconditions": [0], "estimated_steps": 3, "required": true}, ...]}

or the bare list. Only ``description`` or ``target`` is needed; ``target`` names a vocabulary term (``box 3``,
``{"kind": "box", "index": 3}``, ``vehicle C``, ``exit``) and, when absent, the description is read instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from milepost.planning.domains.base import Domain, PlanRejected, Vocabulary
from milepost.planning.plan import Plan, env_item, pending_subgoals
from milepost.types import Subgoal

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
# Answer-format tags inside plan text would put a second "ACTION:" into every prompt: defuse them.
_TAGS = re.compile(r"\b(ACTION|REASON|PROGRESS)\s*:", re.IGNORECASE)


@dataclass(frozen=True)
class PlanLimits:
    """Bounds on a planner answer (anything beyond them is rejected, not truncated)."""

    max_subgoals: int = 16
    """items in one plan at most"""
    max_answer_chars: int = 20_000
    """characters of the raw answer at most"""
    max_text_chars: int = 300
    """characters of one description or success criterion at most"""
    max_item_steps: int = 100
    """estimated steps of one item at most"""

    def __post_init__(self) -> None:
        sizes = (self.max_subgoals, self.max_answer_chars, self.max_text_chars, self.max_item_steps)
        if min(sizes) < 1:
            raise ValueError("plan limits must be positive")


def clean_text(text: str, limit: int) -> str:
    """Printable ASCII, one line, at most ``limit`` characters, answer-format tags defused."""
    flat = "".join(ch if 32 <= ord(ch) < 127 else " " for ch in text)
    flat = " ".join(_TAGS.sub(lambda m: f"{m[1]} -", flat).split())
    return flat[:limit]


def _reject_constant(name: str) -> Any:
    raise PlanRejected(f"not JSON: {name} is not a number")


def extract_json(text: str, limits: PlanLimits) -> Any:
    """The first JSON value in ``text`` (inside a code fence if there is one).

    Raises:
        PlanRejected: the answer is too long, holds no JSON value, or is nested too deeply to parse.
    """
    if not isinstance(text, str) or not text.strip():
        raise PlanRejected("empty answer")
    if len(text) > limits.max_answer_chars:
        raise PlanRejected(f"answer too long ({len(text)} characters, limit {limits.max_answer_chars})")
    fenced = _FENCE.search(text)
    body = fenced[1] if fenced else text
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    starts = [m.start() for m in re.finditer(r"[\[{]", body)][:8]
    if not starts:
        raise PlanRejected("not JSON: no '[' or '{' in the answer")
    error = ""
    for start in starts:
        try:
            value, _ = decoder.raw_decode(body, start)
            return value
        except json.JSONDecodeError as exc:
            error = error or f"{exc.msg} at character {exc.pos}"
        except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
            error = error or " ".join(str(exc).split())[:120]
        except RecursionError:
            raise PlanRejected("not JSON: nested too deeply") from None
    raise PlanRejected(f"not JSON: {error}")


def _text_field(item: Mapping[str, Any], key: str, where: str, limits: PlanLimits, required: bool) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise PlanRejected(f"{where}: '{key}' must be a non-empty string")
    if len(value) > limits.max_text_chars:
        raise PlanRejected(f"{where}: '{key}' is {len(value)} characters (limit {limits.max_text_chars})")
    return clean_text(value, limits.max_text_chars)


def check_items(data: Any, limits: PlanLimits) -> list[dict[str, Any]]:
    """Schema-check a decoded answer; returns one normalised dict per item.

    Normalised items hold ``description``, ``target`` (str, dict or None), ``success_criteria``,
    ``preconditions`` (0-based positions of earlier items), ``estimated_steps`` (int or None), ``required``.

    Raises:
        PlanRejected: naming the first problem (wrong shape, size, field type or range).
    """
    if isinstance(data, Mapping):
        data = data.get("subgoals", data.get("plan"))
    if not isinstance(data, list):
        raise PlanRejected('expected a list of subgoals (or {"subgoals": [...]})')
    if not data:
        raise PlanRejected("the plan lists no subgoals")
    if len(data) > limits.max_subgoals:
        raise PlanRejected(f"the plan lists {len(data)} subgoals (limit {limits.max_subgoals})")
    raw = [{"description": x} if isinstance(x, str) else x for x in data]
    for k, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise PlanRejected(f"item {k}: expected an object or a string, got {type(item).__name__}")
    # Preconditions may use the items' own "index" numbers (often 1-based) when every item has a distinct one.
    ids = [item.get("index") for item in raw]
    numbered = all(isinstance(i, int) and not isinstance(i, bool) for i in ids) and len(set(ids)) == len(ids)
    position = {i: k for k, i in enumerate(ids)} if numbered else {k: k for k in range(len(raw))}
    out = []
    for k, item in enumerate(raw):
        where = f"item {k}"
        target = item.get("target")
        if target is not None and not isinstance(target, str | Mapping):
            raise PlanRejected(f"{where}: 'target' must be a name or an object")
        if isinstance(target, str) and len(target) > limits.max_text_chars:
            raise PlanRejected(f"{where}: 'target' is too long")
        if isinstance(target, Mapping) and any(
            not isinstance(v, str | int) or isinstance(v, bool) for v in target.values()
        ):
            raise PlanRejected(f"{where}: 'target' values must be strings or integers")
        steps = item.get("estimated_steps")
        if steps is not None and (
            not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= limits.max_item_steps
        ):
            raise PlanRejected(f"{where}: 'estimated_steps' must be an integer in 1..{limits.max_item_steps}")
        required = item.get("required", True)
        if not isinstance(required, bool):
            raise PlanRejected(f"{where}: 'required' must be true or false")
        listed: Any = item.get("preconditions", [])
        if not isinstance(listed, list):
            raise PlanRejected(f"{where}: 'preconditions' must be a list of earlier item numbers")
        pre_positions = []
        for p in listed:
            q = position.get(p) if isinstance(p, int) and not isinstance(p, bool) else None
            if q is None or q >= k:
                raise PlanRejected(f"{where}: precondition {str(p)[:20]!r} is not an earlier item")
            pre_positions.append(q)
        out.append(
            {
                "description": _text_field(item, "description", where, limits, required=target is None),
                "target": target,
                "success_criteria": _text_field(item, "success_criteria", where, limits, required=False),
                "preconditions": sorted(set(pre_positions)),
                "estimated_steps": steps,
                "required": required,
            }
        )
    return out


def plan_from_answer(text: str, env: Any, domain: Domain, vocab: Vocabulary, limits: PlanLimits) -> Plan:
    """Turn an LLM planner answer into a plan over the current state, or raise ``PlanRejected``.

    Items are mapped onto the vocabulary (``Domain.resolve``): an item naming a cell, unit or vehicle that
    does not exist, or contradicting the state, rejects the whole answer; an item that is already done is
    dropped; an item that maps to nothing stays as a judge-only item and is never required. Mapped items are
    required (the environment needs every one of its subgoals) and take the domain's step estimate. A plan
    that puts a subgoal before one it depends on (Rush Hour: the exit before a blocker) contradicts the
    environment and is rejected. Pending environment subgoals the answer leaves out are appended in
    programmatic order, so following the plan always finishes the task.
    """
    items = check_items(extract_json(text, limits), limits)
    pending = pending_subgoals(env)
    order = domain.order(env, vocab, pending)
    estimates = dict(order)
    notes: list[str] = []
    kept: list[tuple[int, dict[str, Any], int | None]] = []  # (answer position, item, env index)
    seen: set[int] = set()
    for k, item in enumerate(items):
        try:
            res = domain.resolve(item, env, vocab)
        except PlanRejected as exc:
            raise PlanRejected(f"item {k}: {exc.reason}") from None
        ref = res.term.env_index if res.term is not None else None
        if res.note:
            notes.append(f"item {k}: {res.note}")
        if res.drop:
            continue
        if ref is not None and ref in seen:
            notes.append(f"item {k}: repeats {res.term.label if res.term else ref}; dropped")
            continue
        if ref is not None:
            seen.add(ref)
        kept.append((k, item, ref))
    if not any(ref is not None for _, _, ref in kept) and not pending:
        raise PlanRejected("nothing left to plan: every subgoal is done")
    place = {ref: pos for pos, (_, _, ref) in enumerate(kept) if ref is not None}
    for pos, (k, _, ref) in enumerate(kept):
        if ref is None:
            continue
        for needed in env.subgoals[ref].preconditions:
            if needed in place and place[needed] > pos:
                later = vocab.for_env(needed)
                raise PlanRejected(
                    f"item {k} contradicts the environment: it comes before "
                    f"{later.label if later else needed}, which must be done first"
                )
    new_position = {k: pos for pos, (k, _, _) in enumerate(kept)}
    subgoals: list[Subgoal] = []
    refs: list[int | None] = []
    for pos, (_, item, ref) in enumerate(kept):
        pre = [new_position[p] for p in item["preconditions"] if p in new_position]
        if ref is not None:
            pre += [place[p] for p in env.subgoals[ref].preconditions if p in place]
            goal = env_item(env, ref, pos, estimates.get(ref, 1), sorted(set(pre)))
            goal.description = item["description"] or goal.description
        else:
            what = item["description"] or clean_text(json.dumps(item["target"]), limits.max_text_chars)
            goal = Subgoal(
                index=pos,
                description=what,
                success_criteria=item["success_criteria"] or what,
                preconditions=sorted(set(pre)),
                estimated_steps=item["estimated_steps"] or 1,
                required=False,
                predicate=None,
            )
        subgoals.append(goal)
        refs.append(ref)
    missing = [(ref, steps) for ref, steps in order if ref not in seen]
    if missing:
        labels = [t.label for ref, _ in missing if (t := vocab.for_env(ref)) is not None]
        notes.append(f"appended the environment subgoals the plan left out: {', '.join(labels)}")
        for ref, steps in missing:
            pos = len(subgoals)
            subgoals.append(env_item(env, ref, pos, steps))
            refs.append(ref)
    if not subgoals:
        raise PlanRejected("no usable subgoal in the answer")
    return Plan(subgoals, refs, "llm", notes)


def planner_prompt(
    env: Any, vocab: Vocabulary, limits: PlanLimits, rejected: str | None = None
) -> list[dict[str, str]]:
    """Chat messages asking for a JSON plan from the current state (with the last rejection, on a retry)."""
    done = [t.label for t in vocab.terms if t.env_index in set(env.completed)]
    names = ", ".join(vocab.labels()) or "none"
    system = (
        "You plan subgoals for an agent that solves a puzzle step by step. Reply with JSON only: "
        '{"subgoals": [{"description": str, "target": name or null, "success_criteria": str, '
        '"preconditions": [earlier item indices], "estimated_steps": int, "required": bool}]}, '
        f"at most {limits.max_subgoals} items, in the order to achieve them."
    )
    user = (
        f"Task: {env.goal_text()}\n\nCurrent state:\n{env.rules.render(None)}\n\n"
        f"Already done: {', '.join(done) or 'nothing'}\n"
        f"Checkable targets (use these names in 'target'): {names}"
    )
    if rejected:
        user += f"\n\nYour previous answer was rejected: {rejected}. Answer again with valid JSON only."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
