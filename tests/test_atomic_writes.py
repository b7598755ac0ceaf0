"""``milepost.io.atomic_write``: every atomic write gets the mode an ordinary ``open`` gives (0666 less the umask,
not ``mkstemp``'s 0600), and never replaces a symlink, a folder or a device file (issue 23 item 4); and
``milepost.io.RunLock``, which keeps two processes from writing one run folder at once."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_jsonl, atomic_write_text, umask


def _parquet(path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="the hf extra (pyarrow) is not installed")
    from milepost.tables import write_parquet

    write_parquet(path, pa.table({"a": [1, 2]}))


WRITERS: dict[str, Callable[[Path], Any]] = {
    "text": lambda p: atomic_write_text(p, "x\n"),
    "json": lambda p: atomic_write_json(p, {"a": 1}),
    "jsonl": lambda p: atomic_write_jsonl(p, [{"a": 1}]),
    "parquet": _parquet,
}


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_atomic_write_honours_the_umask(tmp_path: Path, writer: str, mask: int) -> None:
    old = os.umask(mask)
    try:
        assert umask() == mask
        WRITERS[writer](tmp_path / "f")
        (tmp_path / "plain").write_text("x")  # what an ordinary open gives
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == (tmp_path / "plain").stat().st_mode & 0o777 == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("kind", ["symlink", "folder"])
def test_an_atomic_write_never_replaces_what_is_not_a_regular_file(tmp_path: Path, writer: str, kind: str) -> None:
    kept = tmp_path / "kept"
    kept.write_text("kept", encoding="utf-8")
    target = tmp_path / "target"
    target.symlink_to(kept) if kind == "symlink" else target.mkdir()
    with pytest.raises(InputError, match="refusing to replace it"):
        WRITERS[writer](target)
    assert target.is_symlink() if kind == "symlink" else target.is_dir()
    assert kept.read_text(encoding="utf-8") == "kept"


def test_an_atomic_write_never_replaces_a_device_file() -> None:
    with pytest.raises(InputError, match="not a regular file"):
        atomic_write_text("/dev/null", "x")
    assert Path("/dev/null").is_char_device()


def test_a_dataset_folder_and_its_files_honour_the_umask(tmp_path: Path) -> None:
    from milepost.datasets import write_dataset
    from milepost.envs.sudoku import make_task
    from milepost.envs.sudoku.generator import generate_easy

    task = make_task(*generate_easy(4, 3, 5, 0), level="S1", split="train", index=0)
    old = os.umask(0o022)
    try:
        out = write_dataset(tmp_path / "d", {"train": [task], "test": []}, {})
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o755
    assert {p.stat().st_mode & 0o777 for p in out.iterdir()} == {0o644}


def test_a_run_lock_is_exclusive_and_a_dead_owner_loses_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    from milepost.io import RunLock

    a, b = RunLock(tmp_path / "run"), RunLock(tmp_path / "run")
    assert a.acquire()
    assert not b.acquire()  # held by this live process
    a.release()
    assert b.acquire()
    b.release()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "run" / "lock").write_text(dead.stdout.strip())
    assert a.acquire()  # the owner is gone: the stale lock is taken over
    assert (tmp_path / "run" / "lock").read_text() == str(os.getpid())
    a.release()
    assert not (tmp_path / "run" / "lock").exists()
    a.release()  # releasing a lock not held is a no-op


def test_a_run_lock_held_by_another_live_process_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    from milepost.io import RunLock

    code = (
        "import sys, time; from milepost.io import RunLock; "
        "assert RunLock(sys.argv[1]).acquire(); print(1, flush=True); time.sleep(30)"
    )
    other = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "1"
        assert not RunLock(tmp_path / "run").acquire()
    finally:
        other.kill()
        other.wait()
    assert RunLock(tmp_path / "run").acquire()  # its owner was killed without releasing it
