"""A horizon that cannot be swapped (issue 25 items 4-5, issue 23 item 7): a cached suite is re-hashed at every
run, ``horizon compare`` refuses differing task sets in one line (or compares their intersection on request),
and every edited ``horizon.json`` gives a one-line error with exit 2 or a stated harmless acceptance."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.errors import InputError
from milepost.horizon import suites as horizon_suite
from milepost.horizon.suites import Suite, SuitePart, build_suite

# Test fixture: a micro suite (4x4 Sudoku, 3 tasks per level, H_max 10, 2 samples) so the CLI runs in seconds.
MICRO = Suite("micro", 1, (SuitePart("sudoku4", "sudoku", 4, "S1-S5", 3, 0, 10, 2),), content_hash="")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("horizon-tamper")
    a, b = root / "a", root / "b"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(horizon_suite.SUITES, "micro", MICRO)
        for out, policy in ((a, "noisy-oracle:0.9:format"), (b, "noisy-oracle:0.5:format")):
            argv = ["horizon", "--policy", policy, "--suite", "micro", "--out", str(out), "--boot", "50"]
            assert main([*argv, "--no-progress"]) == 0
        yield a, b


# -- item 4: the cached suite is re-hashed, not trusted ---------------------------------------------------------


def _copy_suite(runs: tuple[Path, Path], tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    shutil.copytree(runs[0] / "suite", root)
    return root


def test_a_cached_suite_with_deleted_tasks_is_refused(runs: tuple[Path, Path], tmp_path: Path) -> None:
    root = _copy_suite(runs, tmp_path)
    test = root / "sudoku4" / "test.jsonl"
    lines = test.read_text().splitlines()
    test.write_text("\n".join(lines[:-4]) + "\n")
    part = json.loads((root / "sudoku4" / "manifest.json").read_text())
    part["counts"]["test"] -= 4  # the count edited to match, as a careful tamperer would
    (root / "sudoku4" / "manifest.json").write_text(json.dumps(part))
    with pytest.raises(InputError, match=r"sudoku4/test.jsonl holds \d+ tasks that are not the suite's"):
        build_suite(MICRO, root)


def test_a_cached_suite_with_an_edited_task_list_is_refused(runs: tuple[Path, Path], tmp_path: Path) -> None:
    root = _copy_suite(runs, tmp_path)
    tasks = json.loads((root / "tasks.json").read_text())
    tasks["sudoku4"] = tasks["sudoku4"][:-1]
    (root / "tasks.json").write_text(json.dumps(tasks))
    with pytest.raises(InputError, match=r"tasks\.json hashes to"):
        build_suite(MICRO, root)
    (root / "tasks.json").write_text("{not json")
    with pytest.raises(InputError, match=r"tasks\.json is unreadable"):
        build_suite(MICRO, root)


def test_a_pinned_suite_is_checked_against_its_pin_not_its_manifest(runs: tuple[Path, Path], tmp_path: Path) -> None:
    root = _copy_suite(runs, tmp_path)
    built = json.loads((root / "manifest.json").read_text())
    pinned = Suite("micro", 1, MICRO.parts, content_hash=built["hash"])
    assert build_suite(pinned, root)["pinned"] is True
    other = Suite("micro", 1, MICRO.parts, content_hash="e" * 64)
    with pytest.raises(InputError, match="not eeeeeeeeeeee"):
        build_suite(other, root)


def test_an_edited_manifest_is_rewritten_from_the_tasks(runs: tuple[Path, Path], tmp_path: Path) -> None:
    root = _copy_suite(runs, tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    honest = manifest["played"]
    manifest["played"] = 999
    manifest["parts"][0]["played"] = 999
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert build_suite(MICRO, root)["played"] == honest


def test_the_tampered_run_is_refused_in_one_line(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(horizon_suite.SUITES, "micro", MICRO)
    out = tmp_path / "run"
    shutil.copytree(runs[0] / "suite", out / "suite")
    test = out / "suite" / "sudoku4" / "test.jsonl"
    test.write_text("\n".join(test.read_text().splitlines()[:-3]) + "\n")
    capsys.readouterr()
    argv = ["horizon", "--policy", "oracle", "--suite", "micro", "--out", str(out), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not the tasks of micro v1" in err[0]
    assert not (out / "horizon.json").exists()


# -- item 5: compare with differing task sets -------------------------------------------------------------------


def _drop_task(run: Path, into: Path) -> Path:
    shutil.copytree(run, into)
    result = json.loads((into / "horizon.json").read_text())
    result["tasks"] = result["tasks"][1:]  # as when every sample of that task failed for infrastructure reasons
    (into / "horizon.json").write_text(json.dumps(result))
    return into


def test_compare_refuses_differing_task_sets_in_one_line(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    short = _drop_task(runs[1], tmp_path / "short")
    capsys.readouterr()
    assert main(["horizon", "compare", str(runs[0]), str(short), "--out", str(tmp_path / "c"), "--boot", "50"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 1 task(s) the others do not" in err[0] and "--intersect" in err[0]


def test_compare_intersect_uses_the_shared_tasks_and_says_so(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    short = _drop_task(runs[1], tmp_path / "short")
    argv = ["horizon", "compare", str(runs[0]), str(short), "--intersect", "--out", str(tmp_path / "c")]
    assert main([*argv, "--boot", "50"]) == 0
    text = capsys.readouterr().out
    assert "tasks all runs hold (--intersect)" in text and "1 task(s) left out" in text


# -- issue 23 item 7: 26 edits of horizon.json -------------------------------------------------------------------


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return data

    return edit


def _delete(path: tuple[Any, ...]) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        return data

    return edit


# (name, edit of the parsed JSON or None for raw text, raw text, expected: "error" or "harmless")
EDITS: list[tuple[str, Callable[[Any], Any] | None, str, str]] = [
    ("truncated", None, '{"suite": {"name": "micro"', "error"),
    ("not utf-8", None, "\udcff", "error"),
    ("empty file", None, "", "error"),
    ("a list", lambda d: [d], "", "error"),
    ("null", lambda d: None, "", "error"),
    ("no suite", _delete(("suite",)), "", "error"),
    ("suite a string", _set(("suite",), "micro"), "", "error"),
    ("no suite name", _delete(("suite", "name")), "", "error"),
    ("version a string", _set(("suite", "version"), "1"), "", "error"),
    ("hash a number", _set(("suite", "hash"), 7), "", "error"),
    ("meta a list", _set(("meta",), []), "", "error"),
    ("confidence 2", _set(("meta", "confidence"), 2), "", "error"),
    ("confidence text", _set(("meta", "confidence"), "high"), "", "error"),
    ("no tasks", _delete(("tasks",)), "", "error"),
    ("tasks empty", _set(("tasks",), []), "", "error"),
    ("tasks a dict", _set(("tasks",), {}), "", "error"),
    ("task a number", _set(("tasks", 0), 5), "", "error"),
    ("task without id", _delete(("tasks", 0, "task_id")), "", "error"),
    ("task env null", _set(("tasks", 0, "env"), None), "", "error"),
    ("distance 0", _set(("tasks", 0, "distance"), 0), "", "error"),
    ("distance 2.5", _set(("tasks", 0, "distance"), 2.5), "", "error"),
    ("successes > trials", _set(("tasks", 0, "successes"), 99), "", "error"),
    ("trials missing", _delete(("tasks", 0, "trials")), "", "error"),
    ("duplicate task", lambda d: {**d, "tasks": [d["tasks"][0], *d["tasks"]]}, "", "error"),
    # compare refits from the task counts: an edited fit or failure table cannot change its verdict
    ("fits removed", _delete(("fits",)), "", "harmless"),
    ("failure table garbage", _set(("failures_by_band",), "x"), "", "harmless"),
]


def test_the_matrix_has_26_cases() -> None:
    assert len(EDITS) == 26


@pytest.mark.parametrize(("name", "edit", "raw", "expected"), EDITS, ids=[e[0] for e in EDITS])
def test_an_edited_report_is_a_one_line_error_or_harmless(
    runs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    edit: Callable[[Any], Any] | None,
    raw: str,
    expected: str,
) -> None:
    edited = tmp_path / "edited"
    shutil.copytree(runs[1], edited, ignore=shutil.ignore_patterns("runs", "suite"))
    file = edited / "horizon.json"
    if edit is None:
        file.write_bytes(raw.encode("utf-8", "surrogateescape"))
    else:
        file.write_text(json.dumps(edit(json.loads(file.read_text()))))
    capsys.readouterr()
    code = main(["horizon", "compare", str(runs[0]), str(edited), "--out", str(tmp_path / "c"), "--boot", "20"])
    err = capsys.readouterr().err.strip().splitlines()
    if expected == "harmless":
        assert code == 0 and err == []
    else:
        assert code == 2, name
        assert len(err) == 1 and err[0].startswith("milepost: error:") and "horizon.json" in err[0], err
