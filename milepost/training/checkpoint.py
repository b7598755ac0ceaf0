"""Checkpoints: model (safetensors), tokenizer, optimizer, scheduler, RNG states, step and resolved config.

A checkpoint is written into a temporary folder beside its target and renamed into place, so a crash
mid-write leaves the previous checkpoint intact. ``latest`` names the newest complete checkpoint.

The trainer state (optimizer, scheduler, RNG states, ``extra_state``) is stored without pickle, so that
loading a run folder someone else prepared cannot run code: its tensors go to ``trainer_state.safetensors``
and everything else to ``trainer_state.json``, where a tensor is ``{"__tensor__": [key, device]}``, a tuple
``{"__tuple__": [...]}`` and a dict with keys that are not strings ``{"__dict__": [[key, value], ...]}``.
Python floats and ints round-trip exactly through JSON, so resuming stays exact. Checkpoints of the
earlier pickle format (``trainer_state.pt``) are refused with a one-line error rather than unpickled.

A checkpoint folder is checked before anything in it is used (``latest_checkpoint``): ``latest`` must name a
``step-N`` folder of this run's ``checkpoints/`` (not a path, not a symlink); ``manifest.json`` holds each file's
sha256 at save, and a file that differs, is missing or was added is refused. milepost writes a manifest with every
checkpoint, so one without is refused too, unless the user trusts it (``--trust-checkpoint``, :func:`trusted`).
The contents are validated as well, so that a trusted checkpoint without a manifest, or one with a regenerated
manifest, is still checked: ``checkpoint.json``'s step is a non-negative int equal to the folder's N, the model's
tensors are finite floats, and the trainer state's tensors are finite floats of the parameters' shapes, its
hyperparameters finite and in range (a learning rate at most ``MAX_LR``, equal to the scheduler's), its RNG states
present and well-formed, and its optimizer's step count the one ``checkpoint.json`` recorded at save
(``load_checkpoint_state``, ``restore_state``).

A write that fails for want of space (a full disk, a quota, the process's file size limit) removes its temporary
folder and raises :class:`CheckpointWriteError`, one line naming the folder and the space a checkpoint needs; the
previous checkpoint and ``latest`` are untouched. The temporary folders and files that a killed write left
(``.step-NNNNNN.XXXXXXXX``, ``.latest.XXXXXXXX.tmp``) are removed when a run starts in the folder
(``write_run_config``) and at each save.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import math
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from milepost.errors import InputError, MilepostError
from milepost.io import atomic_write_json, atomic_write_text, umask

STATE_TREE = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
LEGACY_STATE_FILE = "trainer_state.pt"  # the pickle format of earlier versions: never loaded
META_FILE = "checkpoint.json"
MANIFEST_FILE = "manifest.json"
STEP_NAME = re.compile(r"step-(\d{6,})")
# the temporary folder of a write in progress: ``tempfile.mkdtemp(prefix=".step-NNNNNN.")`` adds 8 characters of
# ``tempfile._RandomNameSequence`` (lowercase letters, digits and "_"; CPython's Lib/tempfile.py)
TEMP_NAME = re.compile(r"\.step-\d{6,}\.[a-z0-9_]{8}")
# ``latest``'s temporary file: milepost.io.atomic_write's ``mkstemp(prefix=".latest.", suffix=".tmp")``
LATEST_TEMP = re.compile(r"\.latest\.[a-z0-9_]{8}\.tmp")
MAX_LR = 1.0  # an Adam-family step past this moves every weight by about 1 per step: no run trains with it
_TRUST: contextvars.ContextVar[bool] = contextvars.ContextVar("trust_checkpoint", default=False)


class CheckpointWriteError(MilepostError):
    """A checkpoint could not be written (no space, a quota, the file size limit); the command exits 1."""

    exit_code = 1


@contextlib.contextmanager
def trusted(trust: bool = True) -> Iterator[None]:
    """Within the block, a checkpoint without ``manifest.json`` loads (``--trust-checkpoint``); its values are
    validated all the same."""
    token = _TRUST.set(trust)
    try:
        yield
    finally:
        _TRUST.reset(token)


_TAGS = frozenset({"__tensor__", "__tuple__", "__dict__"})


def rng_state() -> dict[str, Any]:
    """The Python, NumPy and torch CPU generator states, as tensors and plain values."""
    version, internal, gauss_next = random.getstate()
    kind, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {
        "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64), "gauss": gauss_next},
        "numpy": {
            "kind": str(kind),
            "key": torch.from_numpy(np.asarray(key, dtype=np.int64)),  # uint32 words, widened for torch
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the generators from :func:`rng_state`'s output."""
    py, npy = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(w) for w in py["internal"].tolist()), py["gauss"]))
    key = npy["key"].numpy().astype(np.uint32)
    np.random.set_state((npy["kind"], key, npy["pos"], npy["has_gauss"], npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])


class _Packer:
    """Splits a nest of dicts / lists / tuples / tensors / JSON scalars into a JSON tree and named tensors."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._views: dict[tuple[Any, ...], str] = {}  # a view already stored (tied weights): stored once
        self._storages: set[tuple[int, str]] = set()

    def pack(self, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, torch.Tensor):
            return {"__tensor__": [self._tensor(value), str(value.device)]}
        if isinstance(value, tuple):
            return {"__tuple__": [self.pack(v) for v in value]}
        if isinstance(value, list):
            return [self.pack(v) for v in value]
        if isinstance(value, dict):
            if all(isinstance(k, str) for k in value) and not (len(value) == 1 and next(iter(value)) in _TAGS):
                return {k: self.pack(v) for k, v in value.items()}
            return {"__dict__": [[self.pack(k), self.pack(v)] for k, v in value.items()]}
        raise TypeError(f"checkpoint state cannot hold a {type(value).__name__} (tensors and JSON values only)")

    def _tensor(self, tensor: torch.Tensor) -> str:
        t = tensor.detach()
        storage = (t.untyped_storage().data_ptr(), str(t.device))
        view = (*storage, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)
        if view in self._views:
            return self._views[view]
        key = f"t{len(self.tensors)}"
        cpu = t.to("cpu").contiguous()
        if storage in self._storages and storage[0] != 0:  # another view of stored memory: safetensors wants a copy
            cpu = cpu.clone()
        self._storages.add(storage)
        self._views[view], self.tensors[key] = key, cpu
        return key


def _unpack(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(node, list):
        return [_unpack(v, tensors) for v in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and (tag := next(iter(node))) in _TAGS:
        body = node[tag]
        if tag == "__tensor__":
            key, device = body
            tensor = tensors[key]
            if not (device == "cpu" or str(device).startswith("cuda")):
                raise ValueError(f"tensor {key} on an unknown device {device!r}")
            return tensor.to(device) if device != "cpu" and torch.cuda.is_available() else tensor
        if tag == "__tuple__":
            return tuple(_unpack(v, tensors) for v in body)
        return {_unpack(k, tensors): _unpack(v, tensors) for k, v in body}
    return {k: _unpack(v, tensors) for k, v in node.items()}


@dataclass
class Checkpoint:
    path: Path
    step: int
    config_yaml: str
    extra: dict[str, Any]


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer | None,
    scheduler: Any,
    config_yaml: str,
    extra: dict[str, Any] | None = None,
    keep: int = 2,
    extra_state: dict[str, Any] | None = None,
) -> Path:
    """Write ``run_dir/checkpoints/step-N`` atomically, point ``latest`` at it, and prune old ones.

    ``extra`` is JSON metadata; ``extra_state`` holds further tensors (e.g. MiRA's critics and reference
    policy) saved beside the optimizer.
    """
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"step-{step:06d}"
    clear_stale_writes(run_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        packer = _Packer()
        optimizer_state = optimizer.state_dict() if optimizer is not None else None
        tree = packer.pack(
            {
                "optimizer": optimizer_state,
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "rng": rng_state(),
                "extra_state": extra_state,
            }
        )
        save_file(packer.tensors, tmp / STATE_TENSORS)
        (tmp / STATE_TREE).write_text(json.dumps(tree), encoding="utf-8")
        (tmp / "config.yaml").write_text(config_yaml, encoding="utf-8")
        meta = {"step": step, "extra": extra or {}, "optimizer_steps": _optimizer_steps(optimizer_state)}
        (tmp / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        manifest = {"sha256": {name: _sha256(tmp / name) for name in _files(tmp)}}
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        tmp.chmod(0o777 & ~umask())  # mkdtemp makes it 0700; a checkpoint is as readable as the run's other files
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _raise_if_no_space(exc, root, target, model, optimizer)
        raise
    try:
        atomic_write_text(root / "latest", target.name + "\n")
    except OSError as exc:  # the new folder is complete, but ``latest`` still names the previous one
        _raise_if_no_space(exc, root, target, model, optimizer)
        raise
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return target


def clear_stale_writes(run_dir: str | Path) -> list[Path]:
    """Remove the temporary folders (``checkpoints/.step-NNNNNN.XXXXXXXX``) of checkpoint writes that were killed
    midway, and the temporary files of ``latest`` (``.latest.XXXXXXXX.tmp``); returns them. Only folders and files
    of exactly those names (what :func:`save_checkpoint` makes) are touched, never a symlink."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    stale = []
    for entry in sorted(root.iterdir()):
        if entry.is_symlink():
            continue
        if TEMP_NAME.fullmatch(entry.name) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
            stale.append(entry)
        elif LATEST_TEMP.fullmatch(entry.name) and entry.is_file():
            entry.unlink(missing_ok=True)
            stale.append(entry)
    return stale


def _optimizer_steps(state: dict[str, Any] | None) -> int:
    """The optimizer's step count: the largest ``step`` of its state entries (0 before its first step)."""
    steps = [entry.get("step") for entry in (state or {}).get("state", {}).values() if isinstance(entry, dict)]
    return max((int(float(s)) for s in steps if s is not None), default=0)


_NO_SPACE = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "a file would pass this process's file size limit (ulimit -f)",
}


def _raise_if_no_space(exc: BaseException, root: Path, target: Path, model: Any, optimizer: Any) -> None:
    """Raise :class:`CheckpointWriteError` when ``exc`` is a write refused for want of space."""
    code = exc.errno if isinstance(exc, OSError) else None
    if isinstance(exc, SafetensorError):  # safetensors (Rust) reports the OS error in its message only
        found = re.search(r"os error (\d+)|code: (\d+)", str(exc))
        code = int(found.group(1) or found.group(2)) if found else None
    if code not in _NO_SPACE:
        return
    previous = sorted(p for p in root.glob("step-*") if p.is_dir() and p != target)
    if previous:  # a checkpoint of the same run holds the same tensors: its size is what the next one takes
        need = sum(f.stat().st_size for f in previous[-1].rglob("*") if f.is_file())
    else:
        need = _tensor_bytes(model, optimizer)
    free = shutil.disk_usage(root).free
    kept = f"the last checkpoint {previous[-1].name} is intact" if previous else "no earlier checkpoint"
    raise CheckpointWriteError(
        f"{root}: checkpoint {target.name} not written: {_NO_SPACE[code]}; a checkpoint needs about "
        f"{_size(need)} ({_size(free)} free there); {kept}"
    ) from None


def _tensor_bytes(model: Any, optimizer: Any) -> int:
    """The bytes of the model's tensors and the optimizer's state (what dominates a checkpoint)."""
    seen: set[int] = set()
    total = 0
    tensors = list(model.state_dict().values())
    if optimizer is not None:
        for entry in optimizer.state_dict().get("state", {}).values():
            tensors += [v for v in entry.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        key = t.untyped_storage().data_ptr()
        if key == 0 or key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _files(folder: Path) -> list[str]:
    """The files of a checkpoint folder (relative names, sorted), the manifest itself excluded."""
    names = (p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    return sorted(n for n in names if n != MANIFEST_FILE)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def has_checkpoints(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds any checkpoint or a ``latest`` pointer (complete or not)."""
    root = Path(run_dir) / "checkpoints"
    return os.path.lexists(root / "latest") or any(root.glob("step-*"))


def latest_checkpoint(run_dir: str | Path, *, trust: bool | None = None) -> Path | None:
    """The newest checkpoint of a run, checked (``verify_checkpoint``); None when the run has none at all.

    ``trust`` loads a checkpoint without a manifest (default: whether the caller is inside :func:`trusted`).

    Raises:
        InputError: one line, when ``checkpoints/latest`` is missing beside step folders, empty, unreadable, names
            anything but a ``step-N`` folder of this run, or names a checkpoint that fails ``verify_checkpoint``.
    """
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if not os.path.lexists(pointer):
        if any(root.glob("step-*")):
            raise InputError(
                f"{pointer}: missing, though {root} holds step folders; write the name of the step folder to "
                "resume from into it"
            )
        return None
    if pointer.is_symlink() or not pointer.is_file():
        raise InputError(f"{pointer}: not a regular file")
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{pointer}: unreadable ({type(exc).__name__})") from None
    if not name:
        raise InputError(f"{pointer}: empty; write the name of the step folder to resume from into it")
    if not STEP_NAME.fullmatch(name):
        raise InputError(f"{pointer}: names {name[:80]!r}, not a step-NNNNNN folder of {root}")
    path = root / name
    if path.is_symlink() or not path.is_dir():
        raise InputError(f"{path}: {'a symlink' if path.is_symlink() else 'missing'}; {pointer} must name a folder")
    verify_checkpoint(path, trust=trust)
    return path


def verify_checkpoint(path: str | Path, *, trust: bool | None = None) -> int:
    """Check a checkpoint folder before anything in it is loaded; returns its step.

    The manifest's hashes (a checkpoint without a manifest is refused unless ``trust``, by default whether the
    caller is inside :func:`trusted`); ``checkpoint.json`` (a step that is a non-negative int, the folder's own N);
    the model's tensors (finite floating point).

    Raises:
        InputError: one line naming the file at fault.
    """
    folder = Path(path)
    if not (folder / STATE_TREE).exists() and (folder / LEGACY_STATE_FILE).exists():
        _refuse_pickle(folder)
    for inner in folder.rglob("*"):
        if inner.is_symlink():
            raise InputError(f"{inner}: a symlink inside a checkpoint (its files are written, never linked)")
    if os.path.lexists(folder / MANIFEST_FILE):
        _check_manifest(folder)
    elif not (_TRUST.get() if trust is None else trust):
        raise InputError(
            f"{folder / MANIFEST_FILE}: missing, so the checkpoint's files cannot be checked against what was saved "
            "(milepost writes one with every checkpoint); pass --trust-checkpoint to load it anyway"
        )
    step = _read_meta(folder)[0]
    _check_model(folder)
    return step


def _check_manifest(folder: Path) -> None:
    at = folder / MANIFEST_FILE
    try:
        listed = json.loads(at.read_text(encoding="utf-8"))["sha256"]
        if not isinstance(listed, dict) or not all(isinstance(v, str) for v in listed.values()):
            raise ValueError("sha256 is not a table of file names to hex digests")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{at}: unreadable manifest ({' '.join(str(exc).split())[:120]})") from None
    present = _files(folder)
    for name in present:
        if name not in listed:
            raise InputError(
                f"{folder / name}: not in the checkpoint's manifest (added after the checkpoint was saved)"
            )
    for name, digest in listed.items():
        if name not in present:
            raise InputError(f"{folder / name}: listed in the checkpoint's manifest but missing")
        if _sha256(folder / name) != digest:
            raise InputError(f"{folder / name}: sha256 differs from the checkpoint's manifest (changed since saved)")


def _read_meta(folder: Path) -> tuple[int, dict[str, Any], int | None]:
    """``checkpoint.json``'s step, extra metadata and ``optimizer_steps`` (None before it was recorded), validated;
    the optimizer's step count is checked against the trainer state by :func:`load_checkpoint_state`."""
    at = folder / META_FILE
    if not at.is_file():
        raise InputError(f"{folder}: not a milepost checkpoint (no {META_FILE})")
    try:
        meta = json.loads(at.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"{at}: unreadable ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(meta, dict) or set(meta) - {"step", "extra", "optimizer_steps"} or "step" not in meta:
        raise InputError(f"{at}: expected an object with a step and optional extra metadata")
    counted = meta.get("optimizer_steps")
    if counted is not None and (type(counted) is not int or counted < 0):
        raise InputError(f"{at}: optimizer_steps must be a non-negative integer, not {json.dumps(counted)[:40]}")
    step, extra = meta["step"], meta.get("extra", {})
    if type(step) is not int or step < 0:  # bool is an int subclass: true is not a step
        raise InputError(f"{at}: step must be a non-negative integer, not {json.dumps(step)[:40]}")
    named = STEP_NAME.fullmatch(folder.name)
    if named is not None and int(named.group(1)) != step:
        raise InputError(f"{at}: step {step} in the folder of step {int(named.group(1))}")
    if not isinstance(extra, dict):
        raise InputError(f"{at}: extra must be an object")
    return step, extra, counted


def _check_model(folder: Path) -> None:
    """Every tensor of the model's safetensors files is floating point and finite (read one at a time)."""
    from safetensors import safe_open

    files = sorted(p for p in folder.glob("*.safetensors") if p.name != STATE_TENSORS)
    if not files:
        raise InputError(f"{folder}: no model weights (*.safetensors)")
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    _check_tensor(handle.get_tensor(key), f"{file}: tensor {key}")
        except InputError:
            raise
        except (OSError, SafetensorError, RuntimeError, ValueError) as exc:
            raise InputError(f"{file}: unreadable weights ({' '.join(str(exc).split())[:120]})") from None


def _check_tensor(tensor: torch.Tensor, where: str) -> None:
    if not tensor.is_floating_point():
        raise InputError(f"{where}: dtype {str(tensor.dtype).removeprefix('torch.')}, expected floating point")
    if not bool(torch.isfinite(tensor).all()):
        raise InputError(f"{where}: holds NaN or infinite values")


def _refuse_pickle(folder: Path) -> None:
    raise InputError(
        f"{folder / LEGACY_STATE_FILE}: trainer state in the old pickle format, which is not loaded because "
        "unpickling can run code; start the run again, or from this checkpoint's model as a new run"
    )


def load_checkpoint_state(path: str | Path, last_step: int | None = None) -> tuple[dict[str, Any], Checkpoint]:
    """The trainer state (optimizer, scheduler, RNG, extra state) and metadata of a checkpoint folder.

    Nothing here unpickles: the state is read from safetensors and JSON only. Its values are validated
    (``_check_state``); the manifest and the model are checked by ``latest_checkpoint`` before the model loads.
    ``last_step`` is the run's length: a checkpoint past it would end a resumed run at once, as if trained.

    Raises:
        InputError: one line naming the file, when the checkpoint is missing, truncated, malformed, out of range or
            in the earlier pickle format.
    """
    folder = Path(path)
    tree_file, tensor_file = folder / STATE_TREE, folder / STATE_TENSORS
    if not tree_file.is_file() and (folder / LEGACY_STATE_FILE).exists():
        _refuse_pickle(folder)
    step, extra, counted = _read_meta(folder)
    if last_step is not None and step > last_step:
        raise InputError(f"{folder / META_FILE}: step {step}, past the run's last step {last_step}")
    for file in (tree_file, tensor_file):
        if not file.is_file():
            raise InputError(f"{file}: missing; the checkpoint is incomplete")
    at = tensor_file
    try:
        tensors = load_file(tensor_file)
        at = tree_file
        state = _unpack(json.loads(tree_file.read_text(encoding="utf-8")), tensors)
        if not isinstance(state, dict) or not {"optimizer", "scheduler", "rng", "extra_state"} <= state.keys():
            raise ValueError("not a trainer state")
        if set(state) - {"optimizer", "scheduler", "rng", "extra_state"}:
            raise ValueError(f"unknown entries {sorted(set(state) - {'optimizer', 'scheduler', 'rng', 'extra_state'})}")
        _check_state(state)
        _check_steps(state, step, counted)
        _check_rng(state["rng"])
        config_yaml = (folder / "config.yaml").read_text(encoding="utf-8") if (folder / "config.yaml").exists() else ""
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RuntimeError, SafetensorError) as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(f"{at}: unreadable checkpoint ({reason})") from None
    return state, Checkpoint(folder, step, config_yaml, extra)


# Optimizer and scheduler hyperparameters: (lowest, highest, whether the lowest is allowed).
_RANGES: dict[str, tuple[float, float, bool]] = {
    "lr": (0.0, MAX_LR, True),
    "initial_lr": (0.0, MAX_LR, True),
    "eps": (0.0, 1.0, False),
    "weight_decay": (0.0, math.inf, True),
    "momentum": (0.0, 1.0, True),
    "dampening": (0.0, 1.0, True),
}


def _check_state(state: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless every floating-point tensor of the state is finite, the optimizer's and
    scheduler's tensors are floating point (step counters aside), the optimizer's hyperparameters are finite and
    in range, and its state entries are tensors. ``extra_state`` may hold integer tensors (counts, token ids)."""

    def tensors(node: Any, where: str) -> None:
        if isinstance(node, torch.Tensor):
            integral_ok = where.startswith("extra_state") or (where.endswith("step") and node.dtype != torch.bool)
            if not node.is_floating_point() and not integral_ok:
                raise ValueError(f"{where}: dtype {str(node.dtype).removeprefix('torch.')}, expected floating point")
            if node.is_floating_point() and not bool(torch.isfinite(node).all()):
                raise ValueError(f"{where}: holds NaN or infinite values")
        elif isinstance(node, dict):
            for key, value in node.items():
                tensors(value, f"{where}.{key}")
        elif isinstance(node, list | tuple):
            for i, value in enumerate(node):
                tensors(value, f"{where}[{i}]")

    for part in ("optimizer", "scheduler", "extra_state"):
        tensors(state[part], part)
    for part in ("optimizer", "scheduler"):
        _check_numbers(state[part], part)
    optimizer = state["optimizer"]
    if optimizer is None:
        return
    if not isinstance(optimizer, dict) or not isinstance(optimizer.get("param_groups"), list):
        raise ValueError("optimizer: expected a state dict with param_groups")
    if not isinstance(optimizer.get("state"), dict):
        raise ValueError("optimizer: expected a state dict with a state table")
    for i, group in enumerate(optimizer["param_groups"]):
        if not isinstance(group, dict) or not isinstance(group.get("params"), list):
            raise ValueError(f"optimizer.param_groups[{i}]: expected a group with params")
        for name, (low, high, closed) in _RANGES.items():
            value = group.get(name)
            if value is not None and (
                type(value) not in (int, float) or not (low <= value <= high and (closed or value > low))
            ):
                raise ValueError(f"optimizer.param_groups[{i}].{name} = {value!r} is out of range")
        betas = group.get("betas")
        if betas is not None and not (
            isinstance(betas, list | tuple) and len(betas) == 2 and all(0.0 <= b < 1.0 for b in betas)
        ):
            raise ValueError(f"optimizer.param_groups[{i}].betas = {betas!r}, expected two numbers in [0, 1)")
    for key, entry in optimizer["state"].items():
        if not isinstance(entry, dict):
            raise ValueError(f"optimizer.state.{key}: expected a table of tensors")
        for name, value in entry.items():
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"optimizer.state.{key}.{name}: expected a tensor")
            if name == "step" and not (value.numel() == 1 and float(value) >= 0):
                raise ValueError(f"optimizer.state.{key}.step: expected one non-negative count")


def _check_numbers(node: Any, where: str) -> None:
    """Every number of an optimizer or scheduler state is finite (bools and strings aside)."""
    if isinstance(node, float) and not math.isfinite(node):
        raise ValueError(f"{where} = {node!r}, expected a finite number")
    if isinstance(node, dict):
        for key, value in node.items():
            _check_numbers(value, f"{where}.{key}")
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _check_numbers(value, f"{where}[{i}]")


def _check_steps(state: dict[str, Any], step: int, counted: int | None) -> None:
    """Raise ``ValueError`` unless the optimizer's step count is the one ``checkpoint.json`` recorded at save
    (``counted``), and a scheduler is at the checkpoint's step with the learning rates it sets (milepost steps its
    scheduler once per optimizer step): another checkpoint's state, or a learning rate edited apart from its
    schedule, is refused."""
    optimizer, scheduler = state["optimizer"], state["scheduler"]
    taken = _optimizer_steps(optimizer)
    if counted is not None and taken != counted:
        raise ValueError(
            f"optimizer: the state has taken {taken} steps, but {META_FILE} recorded {counted} at step {step} "
            "(the state of another checkpoint?)"
        )
    if scheduler is None:
        return
    if not isinstance(scheduler, dict):
        raise ValueError("scheduler: expected a state dict")
    last = scheduler.get("last_epoch")
    if type(last) is not int or last != step:
        raise ValueError(f"scheduler.last_epoch = {last!r}, expected the checkpoint's step {step}")
    if optimizer is None:
        return
    if taken != step:
        raise ValueError(f"optimizer: the state has taken {taken} steps at step {step} (one per scheduler step)")
    groups = optimizer["param_groups"]
    rates, bases = scheduler.get("_last_lr"), scheduler.get("base_lrs")
    for name, values, key in (("_last_lr", rates, "lr"), ("base_lrs", bases, "initial_lr")):
        if values is None:
            continue
        if not isinstance(values, list) or len(values) != len(groups):
            raise ValueError(f"scheduler.{name} = {str(values)[:60]}, expected one rate per optimizer group")
        for i, (rate, group) in enumerate(zip(values, groups, strict=True)):
            if key in group and group[key] != rate:
                raise ValueError(f"optimizer.param_groups[{i}].{key} = {group[key]!r}, but the scheduler's is {rate!r}")


def check_learning_rate(state: dict[str, Any], checkpoint: Path, lr: float, weight_decay: float) -> None:
    """Raise ``InputError`` unless every optimizer group of ``state`` has the run's constant ``lr`` and
    ``weight_decay`` (RL's optimizer has no scheduler: the config sets both, and a resumed run keeps its config)."""
    for i, group in enumerate((state.get("optimizer") or {}).get("param_groups", [])):
        for name, want in (("lr", lr), ("weight_decay", weight_decay)):
            if group.get(name) != want:
                raise InputError(
                    f"{checkpoint / STATE_TREE}: optimizer.param_groups[{i}].{name} = {group.get(name)!r}, but the "
                    f"run's config sets {want!r}"
                )


def _check_rng(rng: Any) -> None:
    """Raise unless ``rng`` is the shape :func:`rng_state` writes and restores (tried, then the current states
    put back), so resuming fails before training."""
    if not isinstance(rng, dict) or set(rng) != {"python", "numpy", "torch"}:
        got = sorted(rng) if isinstance(rng, dict) else "null" if rng is None else type(rng).__name__
        raise ValueError(f"rng: expected the python, numpy and torch generator states, got {got}")
    py, npy, gen = rng["python"], rng["numpy"], rng["torch"]
    if not isinstance(py, dict) or set(py) != {"version", "internal", "gauss"}:
        raise ValueError("rng.python: expected version, internal and gauss")
    internal = py["internal"]
    if not (isinstance(internal, torch.Tensor) and internal.dtype == torch.int64 and tuple(internal.shape) == (625,)):
        raise ValueError("rng.python.internal: expected 625 int64 words (Mersenne Twister state and position)")
    if py["gauss"] is not None and type(py["gauss"]) is not float:
        raise ValueError(f"rng.python.gauss = {py['gauss']!r}, expected a float or null")
    if not isinstance(npy, dict) or set(npy) != {"kind", "key", "pos", "has_gauss", "cached_gaussian"}:
        raise ValueError("rng.numpy: expected kind, key, pos, has_gauss and cached_gaussian")
    key = npy["key"]
    if npy["kind"] != "MT19937" or not (isinstance(key, torch.Tensor) and tuple(key.shape) == (624,)):
        raise ValueError("rng.numpy: expected an MT19937 state of 624 words")
    if not bool(((key >= 0) & (key < 2**32)).all()) or type(npy["pos"]) is not int or not 0 <= npy["pos"] <= 624:
        raise ValueError("rng.numpy: key words must be 32-bit and pos in [0, 624]")
    if not (isinstance(gen, torch.Tensor) and gen.dtype == torch.uint8 and gen.shape == torch.get_rng_state().shape):
        raise ValueError("rng.torch: expected the CPU generator's uint8 state")
    current = rng_state()
    try:
        set_rng_state(rng)
    finally:
        set_rng_state(current)


def write_run_config(run_dir: str | Path, config_yaml: str, *, resume: bool) -> None:
    """Record the run's resolved config; refuse to resume a run directory made by another config. A start that
    is not refused removes what killed checkpoint writes left (:func:`clear_stale_writes`)."""
    path = Path(run_dir) / "config.yaml"
    if path.exists():
        previous = path.read_text(encoding="utf-8")
        if previous != config_yaml:
            raise InputError(f"{run_dir} was made by a different config; use a new --out or the same config")
        if not resume and has_checkpoints(run_dir):
            raise InputError(f"{run_dir} already holds a run; pass --resume to continue it or use a new --out")
    if resume and latest_checkpoint(run_dir) is None:  # checked before anything is written: a refusal touches nothing
        raise InputError(f"{run_dir}: no checkpoint to resume (no checkpoints/latest); drop --resume to start the run")
    atomic_write_text(path, config_yaml)
    atomic_write_json(Path(run_dir) / "run.json", {"config": "config.yaml"})
    clear_stale_writes(run_dir)  # the temporary folders of checkpoint writes a killed session left


@contextlib.contextmanager
def start_guard(run_dir: str | Path) -> Iterator[None]:
    """Undo what a failed start wrote into ``run_dir``, so the corrected command can use the same ``--out``.

    Entries of ``run_dir`` created inside the block (``config.yaml``, ``run.json``, ``initial/``...) are removed
    when the block raises, and ``run_dir`` itself when the block created it; what was there before (an earlier
    run being resumed) is left alone. Wrap only the set-up: once training has written results, they stay.
    """
    folder = Path(run_dir)
    existed = folder.exists()
    before = set(os.listdir(folder)) if existed else set()
    try:
        yield
    except BaseException:
        if not existed:
            shutil.rmtree(folder, ignore_errors=True)
        elif folder.is_dir():
            for name in set(os.listdir(folder)) - before:
                target = folder / name
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
        raise


def restore_state(name: str, load: Callable[[Any], Any], state: Any, checkpoint: Path) -> None:
    """``load(state)`` (an optimizer's or scheduler's ``load_state_dict``), any failure a one-line error.

    An optimizer's state tensors must also have their parameters' shapes: torch's ``Optimizer.load_state_dict``
    (torch/optim/optimizer.py) casts them to the parameter's dtype and device but never compares shapes, so a
    wrong-shaped ``exp_avg`` would fail, or broadcast, only at the first step.
    """
    try:
        load(state)
    except Exception as exc:  # torch raises ValueError, KeyError, RuntimeError... for a mismatched state
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{checkpoint}: the {name} state does not fit this run ({first})") from exc
    optimizer = getattr(load, "__self__", None)
    if isinstance(optimizer, torch.optim.Optimizer):
        for param, entry in optimizer.state.items():
            for key, value in entry.items():
                if isinstance(value, torch.Tensor) and key != "step" and value.shape != param.shape:
                    raise InputError(
                        f"{checkpoint}: the {name} state does not fit this run ({key} of shape "
                        f"{tuple(value.shape)} for a parameter of shape {tuple(param.shape)})"
                    )
