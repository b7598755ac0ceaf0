"""Checkpoints: model (safetensors), tokenizer, optimizer, scheduler, RNG states, step and resolved config.

A checkpoint is written into a temporary folder beside its target and renamed into place, so a crash
mid-write leaves the previous checkpoint intact. ``latest`` names the newest complete checkpoint.

The trainer state (optimizer, scheduler, RNG states, ``extra_state``) is stored without pickle, so that
loading a run folder someone else prepared cannot run code: its tensors go to ``trainer_state.safetensors``
and everything else to ``trainer_state.json``, where a tensor is ``{"__tensor__": [key, device]}``, a tuple
``{"__tuple__": [...]}`` and a dict with keys that are not strings ``{"__dict__": [[key, value], ...]}``.
Python floats and ints round-trip exactly through JSON, so resuming stays exact. Checkpoints of the
earlier pickle format (``trainer_state.pt``) are refused with a one-line error rather than unpickled.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
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

from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_text

STATE_TREE = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
LEGACY_STATE_FILE = "trainer_state.pt"  # the pickle format of earlier versions: never loaded
META_FILE = "checkpoint.json"
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
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        packer = _Packer()
        tree = packer.pack(
            {
                "optimizer": optimizer.state_dict() if optimizer is not None else None,
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "rng": rng_state(),
                "extra_state": extra_state,
            }
        )
        save_file(packer.tensors, tmp / STATE_TENSORS)
        (tmp / STATE_TREE).write_text(json.dumps(tree), encoding="utf-8")
        (tmp / "config.yaml").write_text(config_yaml, encoding="utf-8")
        (tmp / META_FILE).write_text(json.dumps({"step": step, "extra": extra or {}}), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(root / "latest", target.name + "\n")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return target


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if not pointer.is_file():
        return None
    path = root / pointer.read_text(encoding="utf-8").strip()
    return path if (path / META_FILE).is_file() else None


def load_checkpoint_state(path: str | Path) -> tuple[dict[str, Any], Checkpoint]:
    """The trainer state (optimizer, scheduler, RNG, extra state) and metadata of a checkpoint folder.

    Nothing here unpickles: the state is read from safetensors and JSON only.

    Raises:
        InputError: one line naming the file, when the checkpoint is missing, truncated, malformed or in the
            earlier pickle format.
    """
    folder = Path(path)
    if not (folder / META_FILE).is_file():
        raise InputError(f"{folder}: not a milepost checkpoint (no {META_FILE})")
    tree_file, tensor_file = folder / STATE_TREE, folder / STATE_TENSORS
    if not tree_file.is_file() and (folder / LEGACY_STATE_FILE).exists():
        raise InputError(
            f"{folder / LEGACY_STATE_FILE}: trainer state in the old pickle format, which is not loaded because "
            "unpickling can run code; start the run again, or from this checkpoint's model as a new run"
        )
    for file in (tree_file, tensor_file):
        if not file.is_file():
            raise InputError(f"{file}: missing; the checkpoint is incomplete")
    at = folder / META_FILE
    try:
        meta = json.loads(at.read_text(encoding="utf-8"))
        step, extra = int(meta["step"]), dict(meta.get("extra", {}))
        at = tensor_file
        tensors = load_file(tensor_file)
        at = tree_file
        state = _unpack(json.loads(tree_file.read_text(encoding="utf-8")), tensors)
        if not isinstance(state, dict) or not {"optimizer", "scheduler", "rng", "extra_state"} <= state.keys():
            raise ValueError("not a trainer state")
        if state["rng"] is not None:
            _check_rng(state["rng"])
        config_yaml = (folder / "config.yaml").read_text(encoding="utf-8") if (folder / "config.yaml").exists() else ""
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RuntimeError, SafetensorError) as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputError(f"{at}: unreadable checkpoint ({reason})") from None
    return state, Checkpoint(folder, step, config_yaml, extra)


def _check_rng(rng: Any) -> None:
    """Raise unless ``rng`` restores (tried, then the current states put back), so resuming fails before training."""
    current = rng_state()
    try:
        set_rng_state(rng)
    finally:
        set_rng_state(current)


def write_run_config(run_dir: str | Path, config_yaml: str, *, resume: bool) -> None:
    """Record the run's resolved config; refuse to resume a run directory made by another config."""
    path = Path(run_dir) / "config.yaml"
    if path.exists():
        previous = path.read_text(encoding="utf-8")
        if previous != config_yaml:
            raise InputError(f"{run_dir} was made by a different config; use a new --out or the same config")
        if not resume and latest_checkpoint(run_dir) is not None:
            raise InputError(f"{run_dir} already holds a run; pass --resume to continue it or use a new --out")
    atomic_write_text(path, config_yaml)
    atomic_write_json(Path(run_dir) / "run.json", {"config": "config.yaml"})


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
    """``load(state)`` (an optimizer's or scheduler's ``load_state_dict``), any failure a one-line error."""
    try:
        load(state)
    except Exception as exc:  # torch raises ValueError, KeyError, RuntimeError... for a mismatched state
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{checkpoint}: the {name} state does not fit this run ({first})") from exc
