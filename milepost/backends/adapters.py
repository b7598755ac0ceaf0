"""A peft LoRA adapter folded into its base model: an ordinary model folder that every backend loads.

A LoRA SFT of the imported SmolLM2-135M writes a 517 MB merged model, too big to commit; its adapter is ~20 MB.
``milepost models merge ADAPTER --base BASE --out DIR`` rebuilds the merged model from the committed adapter and
a base that ``milepost models import`` makes on any machine. The merge is peft's own ``merge_and_unload`` (the
weights the trainer's ``final`` folder holds), not a second implementation of W + scale * B @ A.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from milepost.errors import InputError

MERGE_FILE = "milepost_merge.json"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def check_adapter(path: Path) -> dict[str, Any]:
    """The adapter folder's ``adapter_config.json``; an :class:`InputError` naming what is missing."""
    if not path.is_dir():
        raise InputError(f"adapter folder {path} does not exist")
    config = path / ADAPTER_CONFIG
    if not config.is_file() or not (path / ADAPTER_WEIGHTS).is_file():
        raise InputError(f"{path}: not a peft adapter folder (needs {ADAPTER_CONFIG} and {ADAPTER_WEIGHTS})")
    try:
        data: dict[str, Any] = json.loads(config.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{config}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if data.get("peft_type") != "LORA":
        raise InputError(f"{config}: peft_type {data.get('peft_type')!r}, only LORA adapters are merged")
    return data


def merge_adapter(
    adapter: str | os.PathLike[str],
    base: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    command: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Write ``base`` with the LoRA ``adapter`` merged in to the new folder ``out`` (tokenizer from the adapter
    folder when it has one, else the base's; the base's licence and import record copied beside it).

    Raises:
        InputError: a missing or foreign adapter folder, an adapter whose modules the base lacks, ``out`` not new
            or empty.
        ModelLoadError: the base does not load.
    """
    import torch
    from peft import PeftModel

    from milepost.backends.gguf import LICENSE_FILE, PROVENANCE_FILE, check_out, sha256_of, staged_folder
    from milepost.backends.hf import load_model

    tell = say or (lambda line: print(line, file=sys.stderr, flush=True))
    adapter_dir, base_dir, target = Path(adapter).expanduser(), Path(base).expanduser(), Path(out).expanduser()
    config = check_adapter(adapter_dir)
    check_out(target)
    model, tokenizer = load_model(base_dir, torch.device("cpu"), torch.float32)
    try:
        peft_model = PeftModel.from_pretrained(model, str(adapter_dir))
    except (ValueError, KeyError, RuntimeError) as exc:  # modules the base lacks, shapes that differ
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"adapter {adapter_dir} does not fit base {base_dir}: {first}") from None
    merged = peft_model.merge_and_unload()
    if (adapter_dir / "tokenizer_config.json").is_file():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir))
    with staged_folder(target) as (_, staging):
        merged.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        base_record = base_dir / PROVENANCE_FILE
        for name in (LICENSE_FILE, PROVENANCE_FILE):
            if (base_dir / name).is_file():
                shutil.copyfile(base_dir / name, staging / name)
        from milepost import __version__

        record = {
            "adapter": str(adapter_dir),
            "adapter_sha256": sha256_of(adapter_dir / ADAPTER_WEIGHTS),
            "rank": config.get("r"),
            "alpha": config.get("lora_alpha"),
            "target_modules": config.get("target_modules"),
            "base": str(base_dir),
            "base_import": json.loads(base_record.read_text(encoding="utf-8")) if base_record.is_file() else None,
            "command": command or f"milepost models merge {adapter_dir} --base {base_dir} --out {target}",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "milepost": __version__,
        }
        (staging / MERGE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tell(f"merged {adapter_dir} into {base_dir}: {target}")
    return target


def export_adapter(checkpoint: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Copy the adapter (config and weights) of a LoRA SFT checkpoint to ``out``: what a repository commits
    instead of the merged model. The optimizer state and the run's metadata stay behind, and so does the
    tokenizer: LoRA SFT does not change it, and :func:`merge_adapter` takes the base's. A checkpoint whose
    tokenizer differs from its recorded base's (when that base is on this machine) is refused, since the
    exported adapter would then be merged under the wrong tokenizer."""
    from milepost.backends.gguf import sha256_of

    src, target = Path(checkpoint).expanduser(), Path(out).expanduser()
    config = check_adapter(src)
    base = Path(str(config.get("base_model_name_or_path") or "")).expanduser()
    ours, theirs = src / "tokenizer.json", base / "tokenizer.json"
    if ours.is_file() and theirs.is_file() and sha256_of(ours) != sha256_of(theirs):
        raise InputError(f"{src}: its tokenizer differs from its base's ({base}); export the run's final model")
    target.mkdir(parents=True, exist_ok=True)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        shutil.copyfile(src / name, target / name)
    return target
