"""Atomic file writes and JSONL reading: nothing half-written is ever left where a reader expects data."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from milepost.errors import InputError


def umask() -> int:
    """The process's umask, read without changing it (``os.umask`` can only be read by setting it, which would
    let another thread create a file with the wrong mode meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:  # Linux 4.7+
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_replaceable(target: Path) -> None:
    """Raise ``InputError`` when ``target`` exists and is not a regular file: a rename would replace a device
    file, a symlink (not what it points to) or fail on a folder."""
    if target.is_symlink():
        raise InputError(f"{target}: a symlink; refusing to replace it (give the path of a regular file)")
    if target.exists() and not target.is_file():
        kind = "a folder" if target.is_dir() else "not a regular file"
        raise InputError(f"{target}: {kind}; refusing to replace it (give the path of a regular file)")


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], None]) -> None:
    """``write(tmp)`` a temporary file in ``path``'s folder, then rename it onto ``path`` in one step.

    The file gets the mode an ordinary ``open`` would give it (0666 less the umask), not ``mkstemp``'s 0600.

    Raises:
        InputError: ``path`` exists and is not a regular file (``check_replaceable``).
    """
    target = Path(path)
    check_replaceable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
        os.close(fd)
        write(Path(tmp))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_write(path, write)


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def atomic_write_jsonl(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows))


def append_jsonl(path: str | os.PathLike[str], row: dict[str, Any]) -> None:
    """Append one record and flush it, so a crash loses at most the line being written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, separators=(",", ":")) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


class NonFinite(ValueError):
    """A JSON text held ``NaN``, ``Infinity`` or ``-Infinity`` (or a number too large for a float, ``1e999``)."""


def _refuse_constant(name: str) -> float:
    raise NonFinite(f"holds {name}, a non-finite number, which JSON does not allow; refusing it")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFinite(f"holds {text}, a number past the float range (read as infinity); refusing it")
    return value


def loads_finite(text: str | bytes, where: str) -> Any:
    """``json.loads`` that refuses non-finite numbers, which Python's ``json`` accepts by default.

    ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259, section 6): strict readers (``jq``, JavaScript,
    Rust's serde) refuse a file holding them, and a NaN reward or log-prob poisons every mean and bootstrap it
    enters. ``parse_constant`` sees those three words, ``parse_float`` the numbers that overflow a float
    (CPython's ``Lib/json/decoder.py`` and ``scanner.py``).

    Raises:
        InputError: ``where: ...`` for a non-finite number, text that is not JSON, or nesting too deep.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except NonFinite as exc:
        raise InputError(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None


def read_jsonl(path: str | os.PathLike[str], *, finite: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSONL file; a bad line raises ``InputError`` naming the file and line.

    A final line without its newline (a write cut short) is reported, not silently used. ``finite=True`` (every
    reader of episodes) also refuses ``NaN`` / ``Infinity`` anywhere in a line (:func:`loads_finite`); the default
    keeps them, for logs that record a diverged loss as NaN (``metrics.jsonl``).
    """
    source = Path(path)
    if not source.is_file():
        raise InputError(f"{source}: no such file")
    with source.open("rb") as handle:  # bytes, so that a line that is not UTF-8 is named by its number
        for lineno, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{source}:{lineno}: not UTF-8 text (a binary file?)") from None
            if not line.strip():
                continue
            if finite:
                obj = loads_finite(line, f"{source}:{lineno}")
            else:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
                except RecursionError:
                    raise InputError(f"{source}:{lineno}: JSON nested too deeply") from None
            if not isinstance(obj, dict):
                raise InputError(f"{source}:{lineno}: expected a JSON object")
            yield obj


class RunLock:
    """An exclusive claim on one run folder across processes (``<folder>/lock`` holds the owner's pid), so that
    several invocations sharing a work folder never train the same run at once. A lock whose process is gone is
    stale and taken over: a killed worker's run is resumed by the next one. Same-host only (pids)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.path = Path(folder) / "lock"
        self.held = False

    def acquire(self) -> bool:
        """Take the lock; False when a live process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self.owner_alive():
                    return False
                self.path.unlink(missing_ok=True)  # stale: its owner is gone
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self.held = True
            return True
        return False

    def owner_alive(self) -> bool:
        """Whether the pid in the lock file is a live process (an unreadable or half-written file counts as
        live: its writer is between open and write)."""
        try:
            pid = int(self.path.read_text(encoding="ascii").strip())
        except FileNotFoundError:
            return False
        except (OSError, ValueError):
            return True
        if pid <= 0:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
