"""Typed configuration: dataclasses loaded from YAML, with ``key=value`` overrides on top.

One dataclass per concern. Each checks its own values in ``validate()`` (called from ``__post_init__``),
raising ``ValueError`` that names the field. Components never see these objects: builders turn a config into
the flat keyword arguments a component takes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from milepost.errors import InputError
from milepost.types import record_from_dict

C = TypeVar("C")


MAX_VALUES = 10_000
"""values (mappings, lists and scalars) a config may hold once YAML's aliases are expanded. A real config holds a
few hundred; nine levels of nine aliases (a 1 KB "billion laughs" file) expand to 9^9, which any walk over the
loaded tree (``refuse_non_finite``, the dataclass builder) would take hours over."""

INT64_MAX = 2**63 - 1
"""the largest integer a config value may hold: counts become tensor indices and seeds (int64) downstream"""


class _Loader(yaml.SafeLoader):
    """YAML 1.1 as PyYAML reads it, plus YAML 1.2's floats: ``1e-4`` and ``5.0e-6`` are numbers, not strings.

    A key given twice in one mapping is refused (PyYAML keeps the last value silently; YAML 1.2 says keys are
    unique), naming the key and both lines; a merge key's (``<<: *base``) values may still be overridden.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Checked before SafeConstructor.flatten_mapping (pyyaml's yaml/constructor.py) splices merged pairs in.
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            at = key_node.start_mark
            if key in seen:
                first = seen[key]
                place = (
                    f"line {at.line + 1}, columns {first.column + 1} and {at.column + 1}"
                    if first.line == at.line
                    else f"lines {first.line + 1} and {at.line + 1}"
                )
                raise _DuplicateKey(f"key {key!r} appears twice in one mapping ({place}); give each key once")
            seen[key] = at
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    """Raised by the loader; ``_yaml`` turns it into an ``InputError`` naming the file."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml(text: str, where: str) -> Any:
    """The plain data of one YAML document (a SafeLoader subclass: no Python objects).

    Raises:
        yaml.YAMLError: not YAML.
        InputError: ``where: ...`` for a duplicated key, nesting too deep, or aliases that expand past
            :data:`MAX_VALUES` values or refer to the node holding them.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()  # what yaml.load does, with the expansion checked before construction
        if node is None:
            return None
        _check_expansion(node, where)
        return loader.construct_document(node)
    except _DuplicateKey as exc:
        raise InputError(f"{where}: {exc}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply") from None
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, where: str) -> None:
    """Count the values ``root`` holds with every alias expanded, without expanding them (each node's count is
    memoised), and refuse past :data:`MAX_VALUES` or on a cycle (``&a [*a]``: an alias inside its own anchor)."""
    counted: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            counted[key] = 1
            continue
        if children_done:
            open_nodes.discard(key)
            counted[key] = total = 1 + sum(counted[id(child)] for child in children)
            if total > MAX_VALUES:
                raise InputError(
                    f"{where}: its aliases expand to more than {MAX_VALUES} values (nested YAML aliases, as in a "
                    "'billion laughs' file); write the values out"
                )
            continue
        if key in counted:
            continue
        if key in open_nodes:
            raise InputError(f"{where}: a YAML alias refers to the node that holds it (a recursive structure)")
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise InputError(f"{where}: a YAML alias refers to the node that holds it (a recursive structure)")
            if id(child) not in counted:
                stack.append((child, False))


ACTION_MODES = ("atomic", "flexible", "fixed", "slide")


@dataclass
class RewardWeights:
    """Weights of the reward terms in the scalar reward ``step()`` returns (DESIGN: Contracts)."""

    outcome: float = 1.0
    """weight of the solve indicator"""
    format: float = 0.1
    """weight of the -1 paid for an unparsable answer"""
    valid: float = 0.1
    """weight of the -1 paid for an illegal action"""
    milestone: float = 0.0
    """weight of the +1 paid per newly completed subgoal (subgoal decomposition turns it on)"""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"reward.{f.name}: weights must be finite and >= 0, got {value}")


def renderers(env: str) -> tuple[str, ...] | None:
    """The observation renderers environment ``env`` takes (None: an environment this module does not know)."""
    # Imported here: the env packages import this module.
    from milepost.envs.rushhour.rules import RENDERERS as RUSHHOUR_RENDERERS
    from milepost.envs.sudoku.render import RENDERERS
    from milepost.envs.webshop.render import RENDER_MODES

    # The shop reads the default ``grid`` as its ``text`` mode, so a config that names no renderer still works.
    known = {"sudoku": RENDERERS, "rushhour": RUSHHOUR_RENDERERS, "webshop": ("grid", *RENDER_MODES)}
    return known.get(env)


def sizes(env: str) -> tuple[int, ...] | None:
    """The ``size`` values environment ``env`` takes (None: an environment this module does not know)."""
    from milepost.envs.sudoku.grid import BOX_SHAPES
    from milepost.envs.webshop.state import MAX_ITEMS

    # Rush Hour's board is 6x6 (envs/rushhour/env.py refuses any other); the shop's size is items per order.
    known = {"sudoku": tuple(BOX_SHAPES), "rushhour": (6,), "webshop": tuple(range(1, MAX_ITEMS + 1))}
    return known.get(env)


MAX_STEPS = 10_000
"""the largest turn budget ``env.max_steps`` takes (the paper's is 50; a web-shop order of four items 60)"""


@dataclass
class EnvConfig:
    """Environment settings shared by the text environments."""

    name: str = "sudoku"
    """registered environment name: sudoku | rushhour | webshop"""
    size: int = 9
    """board side (Sudoku 4, 6 or 9; Rush Hour 6)"""
    max_steps: int = 50
    """H_max: turn budget per episode (paper: Sudoku 50, Rush Hour 30 atomic / 20 macro)"""
    action_mode: str = "atomic"
    """atomic (one action per step) | flexible (up to macro_k) | fixed (exactly macro_n) | slide (Rush Hour)"""
    macro_k: int | None = None
    """upper bound on actions per step in flexible mode; None = unbounded"""
    macro_n: int | None = None
    """exact actions per step in fixed mode"""
    render: str = "grid"
    """observation renderer. Sudoku: grid | cells | candidates (grid + candidate hints) | hints (cells + hints) |
    hints_tail (cells + the 8 cells with the fewest candidates, fewest last). Rush Hour: grid | legal (grid + the
    legal moves). Web shop: text (WebShop's text mode; grid means text) | text_rich | accessibility (numbered
    elements, WebArena style)"""
    wrong_fill: str = "dead_end"
    """Sudoku: a legal fill with a wrong digit ends the episode (dead_end) or play goes on (continue)"""
    allow_overwrite: bool = False
    """Sudoku: whether filled (non-given) cells may be rewritten"""
    subgoals: list[str] = field(default_factory=lambda: ["boxes"])
    """Sudoku subgoal kinds: boxes, rows, cols"""
    reward: RewardWeights = field(default_factory=RewardWeights)
    profile: str = "milepost"
    """web shop: milepost (default: exact-match reward, search only from the search page, rejected actions penalised
    with feedback, 15 turns per item) | webshop (princeton-nlp/WebShop's reward, rules and text); see
    milepost/envs/webshop/profile.py. Other environments have only milepost"""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not 1 <= self.max_steps <= MAX_STEPS:
            raise ValueError(f"env.max_steps: must be in 1..{MAX_STEPS}, got {self.max_steps}")
        if self.action_mode not in ACTION_MODES:
            raise ValueError(f"env.action_mode: {self.action_mode!r} is not one of {', '.join(ACTION_MODES)}")
        if self.action_mode == "fixed" and (self.macro_n is None or self.macro_n < 1):
            raise ValueError("env.macro_n: fixed action mode needs macro_n >= 1")
        if self.action_mode != "fixed" and self.macro_n is not None:
            raise ValueError(f"env.macro_n: only meaningful with action_mode=fixed, not {self.action_mode}")
        if self.macro_k is not None:
            if self.action_mode != "flexible":
                raise ValueError(f"env.macro_k: only meaningful with action_mode=flexible, not {self.action_mode}")
            if self.macro_k < 1:
                raise ValueError(f"env.macro_k: must be >= 1, got {self.macro_k}")
        known = renderers(self.name)
        if known is not None and self.render not in known:
            raise ValueError(f"env.render: {self.render!r} is not one of {', '.join(known)} for {self.name}")
        if self.wrong_fill not in ("dead_end", "continue"):
            raise ValueError(f"env.wrong_fill: {self.wrong_fill!r} is not one of dead_end, continue")
        profiles = ("milepost", "webshop") if self.name == "webshop" else ("milepost",)
        if self.profile not in profiles:
            raise ValueError(f"env.profile: {self.profile!r} is not one of {', '.join(profiles)} for {self.name}")
        bad = sorted(set(self.subgoals) - {"boxes", "rows", "cols"})
        if bad or not self.subgoals:
            raise ValueError(f"env.subgoals: must be a non-empty subset of boxes, rows, cols (got {self.subgoals})")

    def env_kwargs(self) -> dict[str, Any]:
        """The flat keyword arguments of the environment constructor."""
        kwargs = dataclasses.asdict(self)
        kwargs.pop("name")
        if self.name != "webshop":
            kwargs.pop("profile")  # a web-shop setting; the other environments have one set of rules
        kwargs["reward_weights"] = kwargs.pop("reward")
        return kwargs


def load_config(cls: type[C], path: str | Path | None = None, overrides: list[str] | None = None) -> C:
    """Build config ``cls`` from an optional YAML file plus ``key=value`` overrides (dotted keys nest).

    Raises:
        InputError: for an unreadable file, an unknown key, a value of the wrong type or a failed check.
    """
    data: dict[str, Any] = {}
    if path is not None:
        source = Path(path)
        if not source.is_file():
            raise InputError(f"config {source}: no such file")
        try:
            loaded = _yaml(source.read_text(encoding="utf-8"), f"config {source}")
        except UnicodeDecodeError:
            raise InputError(f"config {source}: not a UTF-8 text file") from None
        except yaml.YAMLError as exc:
            raise InputError(f"config {source}: not valid YAML ({' '.join(str(exc).split())})") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise InputError(f"config {source}: the top level must be a mapping")
        if not loaded:
            # An empty file used to start a run of every default (data runs/data/sudoku4, a 9x9 env on it).
            names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
            needed = [key for key in ("data", "env") if key in names]
            say = (
                f"; a config names at least {' and '.join(needed)} (e.g. env: {{name: sudoku, size: 4}})"
                if needed
                else ""
            )
            raise InputError(f"config {source}: empty (no settings){say}, as the files in configs/ do")
        data = loaded
    for item in overrides or []:
        apply_override(data, item)
    refuse_non_finite(data, "config")
    try:
        config = record_from_dict(cls, data, where="config")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    given = data.get("env")
    env = getattr(config, "env", None)
    if isinstance(given, dict) and "size" in given and isinstance(env, EnvConfig):
        check_size(env, getattr(config, "data", None))
    return config


def check_size(env: EnvConfig, data: Any) -> None:
    """Refuse an ``env.size`` a config gives that the environment does not have, or that is not the size of the
    dataset (``data``'s ``manifest.json``, when it has one): training plays the dataset's boards whatever
    ``env.size`` says, so a differing value would be a setting that means nothing.

    Raises:
        InputError: ``config.env.size: ...``.
    """
    known = sizes(env.name)
    if known is not None and env.size not in known:
        listed = ", ".join(map(str, known))
        raise InputError(f"config.env.size: {env.name} has sizes {listed}, not {env.size}")
    if not isinstance(data, str) or not data:
        return
    manifest = Path(data) / "manifest.json"
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("size")
    except (OSError, ValueError, AttributeError):
        return  # no readable manifest: the dataset's own checks report it where it is loaded
    if isinstance(recorded, int) and recorded != env.size:
        raise InputError(
            f"config.env.size: {env.size}, but {data} holds size-{recorded} {env.name} tasks (its manifest.json); "
            f"set env.size: {recorded} or use a size-{env.size} dataset"
        )


def refuse_non_finite(node: Any, where: str) -> None:
    """Raise on the first NaN or infinity in a loaded config tree (YAML's ``.nan``, ``.inf``, ``1.0e+999``), and
    on the first integer past the 64-bit range (``max_steps: 99999999999999999999``).

    No config value is meant to be non-finite, and a check such as ``lr > 0`` lets NaN through (every comparison
    with NaN is false), so they are refused here, for every float field of every config, before any check runs.
    Likewise no count, size or seed fits past int64 where it ends up (torch, numpy), while ``>= 1`` checks pass it.

    Raises:
        InputError: naming the field, e.g. ``config.rl.lr: must be a finite number, got nan``.
    """
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError(f"{where}: must be a finite number, got {node}")
    if isinstance(node, int) and not isinstance(node, bool) and abs(node) > INT64_MAX:
        raise InputError(f"{where}: {node} is past the 64-bit integer range (at most {INT64_MAX})")
    if isinstance(node, dict):
        for key, value in node.items():
            refuse_non_finite(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            refuse_non_finite(value, f"{where}[{i}]")


def apply_override(data: dict[str, Any], item: str) -> None:
    """Apply one ``a.b.c=value`` override to nested ``data``; the value is parsed as YAML."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise InputError(f"override {item!r}: expected key=value")
    try:
        value = _yaml(raw, f"override {item!r}") if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    node = data
    parts = key.strip().split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise InputError(f"override {item!r}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def to_yaml(config: Any) -> str:
    """Serialise a resolved config (what checkpoints and run folders store)."""
    return yaml.safe_dump(dataclasses.asdict(config), sort_keys=False)
