"""The command line: help on every subcommand, one-line errors, and a scripted game of `milepost play`."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from milepost.cli.main import build_parser, main


def _subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)  # type: ignore[arg-type]


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    names = _subcommands()
    assert {"data", "play", "demo"} <= set(names)
    for name in names:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        assert "usage: milepost" in capsys.readouterr().out


def test_play_scripted_game(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from milepost.envs.sudoku import SudokuEnv
    from milepost.envs.sudoku.rules import oracle_fill

    env = SudokuEnv(size=4, level="S1")
    env.reset(seed=7)
    moves = []
    while (fill := oracle_fill(env.state)) is not None:
        moves.append(fill.text())
        env.step(fill.text())
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n" + "\n".join(moves) + "\n"))
    assert main(["play", "sudoku", "--size", "4", "--level", "S1", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "Last answer rejected: cannot parse action 'hello'" in out
    assert "Episode over: solved" in out


def test_play_stops_at_end_of_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["play", "sudoku", "--size", "4"]) == 0
    assert "(end of input)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play", "chess"], "unknown environment 'chess'"),
        (["play", "sudoku", "--size", "5"], "unsupported size 5"),
        (["play", "sudoku", "--level", "L9"], "unknown level 'L9'"),
        (["play", "sudoku", "--action-mode", "zigzag"], "env.action_mode"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("milepost: error:")


def test_console_script_reports_errors_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "milepost", "play", "sudoku", "--level", "L0"],
        capture_output=True,
        text=True,
        input="",
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown level 'L0'" in proc.stderr
