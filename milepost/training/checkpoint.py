"""Checkpoints: model (safetensors), tokenizer, optimizer, scheduler, RNG states, step and resolved config.

A checkpoint is written into a temporary folder beside its target and renamed into place, so a crash
mid-write leaves the previous checkpoint intact. ``latest`` names the newest complete checkpoint.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_text

STATE_FILE = "trainer_state.pt"
META_FILE = "checkpoint.json"


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


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
        torch.save(
            {
                "optimizer": optimizer.state_dict() if optimizer is not None else None,
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "rng": rng_state(),
                "extra_state": extra_state,
            },
            tmp / STATE_FILE,
        )
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
    """The trainer state (optimizer, scheduler, RNG) and metadata of a checkpoint folder."""
    folder = Path(path)
    if not (folder / META_FILE).is_file():
        raise InputError(f"{folder}: not a milepost checkpoint (no {META_FILE})")
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    state = torch.load(folder / STATE_FILE, weights_only=False)
    config_yaml = (folder / "config.yaml").read_text(encoding="utf-8") if (folder / "config.yaml").exists() else ""
    return state, Checkpoint(folder, int(meta["step"]), config_yaml, meta.get("extra", {}))


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
