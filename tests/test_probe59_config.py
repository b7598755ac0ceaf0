"""Issue 59, items 1 and 2: config files that hung ``milepost train`` or were accepted while meaning nothing.

Before: nine levels of nine YAML aliases (a 1 KB "billion laughs" file) hung the config check, which walked
every aliased node (9^9 of them); an alias inside its own anchor was a RecursionError traceback; ``env.size: 5``
for Sudoku trained on the dataset's 4x4 boards; an empty file started a run of every default; a key given twice
silently kept its last value; ``max_steps: 99999999999999999999`` passed. Each is now one line, exit status 2,
before anything is written.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from milepost.cli.main import main
from milepost.config import load_config
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.training.config import TrainConfig

SPLITS = ("train", "test")


def laughs(levels: int = 9) -> str:
    """``lol1`` holds nine aliases of ``lol0``, ``lol2`` nine of ``lol1``, ...: 9^levels values once expanded."""
    lines = ["lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines += [f"lol{i}: &lol{i}", *[f"  - *lol{i - 1}"] * 9]
    return "\n".join(lines) + "\n"


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fail (rather than hang the suite) when the test body takes more than 10 s: the old code took hours."""

    def expire(*_: Any) -> None:
        raise TimeoutError("still loading the config after 10 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def data4(tmp_path: Path) -> Path:
    splits = {s: [make_task(*generate_easy(4, 4, 9, i), level="S1", split=s, index=i)] for i, s in enumerate(SPLITS)}
    return write_dataset(tmp_path / "ds4", splits, {"env": "sudoku", "size": 4, "seed": 9})


def base(data: Path, env: str = "{name: sudoku, size: 4, max_steps: 8}") -> str:
    return f"name: probe\nmodel: tiny:1m\ndata: {data}\nenv: {env}\nrl: {{iterations: 1}}\nthreads: 1\n"


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("milepost: error: "), err
    return err


def train(config: Path, out: Path, *sets: str) -> list[str]:
    return ["train", "--config", str(config), *(a for s in sets for a in ("--set", s)), "--out", str(out)]


def test_a_billion_laughs_config_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: None
) -> None:
    config = tmp_path / "laughs.yaml"
    config.write_text(laughs(9))
    assert 900 < config.stat().st_size < 1400  # the probe's file: about 1 KB
    start = time.perf_counter()
    with pytest.raises(InputError, match="aliases expand to more than 10000 values"):
        load_config(TrainConfig, config)
    assert time.perf_counter() - start < 0.5  # the load itself; the command's imports take seconds on their own
    err = one_line_error(train(config, tmp_path / "run"), capsys)
    assert "aliases expand to more than 10000 values" in err and "laughs.yaml" in err
    assert not (tmp_path / "run").exists()


def test_a_set_value_goes_through_the_same_budget(deadline: None) -> None:
    nested = "&a0 [x, x, x, x, x, x, x, x, x]"
    for i in range(1, 9):  # each level nine aliases of the one below: 9^9 values
        nested = f"&a{i} [{nested}, " + ", ".join([f"*a{i - 1}"] * 8) + "]"
    with pytest.raises(InputError, match=r"override 'sft.lora_targets=.*aliases expand to more than 10000"):
        load_config(TrainConfig, None, [f"sft.lora_targets={nested}"])


def test_a_recursive_alias_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], deadline: None) -> None:
    config = tmp_path / "recursive.yaml"
    config.write_text("rl: &x {lr: *x}\n")
    err = one_line_error(train(config, tmp_path / "run"), capsys)
    assert "refers to the node that holds it" in err


def test_deep_nesting_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "deep.yaml"
    config.write_text("rl: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in one_line_error(train(config, tmp_path / "run"), capsys)


def test_aliases_a_config_really_uses_still_load(tmp_path: Path) -> None:
    config = tmp_path / "anchors.yaml"
    config.write_text(
        "agent: {max_new_tokens: &tokens 48}\n"
        "rollout: {max_prompt_tokens: *tokens}\n"
        "eval: {n: &n 2, ks: [1, *n]}\n"
        "rl: {<<: &steps {iterations: 2, tasks_per_iter: 2}, lr: 0.25}\n"
    )
    cfg = load_config(TrainConfig, config)
    assert (cfg.agent.max_new_tokens, cfg.rollout.max_prompt_tokens, cfg.eval.ks) == (48, 48, [1, 2])
    assert (cfg.rl.iterations, cfg.rl.tasks_per_iter, cfg.rl.lr) == (2, 2, 0.25)


@pytest.mark.parametrize(
    ("env", "sets", "message"),
    [
        ("{name: sudoku, size: 5, max_steps: 8}", [], "config.env.size: sudoku has sizes 4, 6, 9, not 5"),
        ("{name: sudoku, size: 4, max_steps: 8}", ["env.size=5"], "config.env.size: sudoku has sizes 4, 6, 9, not 5"),
        ("{name: sudoku, size: 9, max_steps: 8}", [], "config.env.size: 9, but "),
        ("{name: sudoku, size: 4, max_steps: 8}", ["env.size=6"], "holds size-4 sudoku tasks"),
        ("{name: rushhour, size: 7}", [], "config.env.size: rushhour has sizes 6, not 7"),
    ],
)
def test_an_env_size_the_env_or_the_data_lacks_is_refused(
    env: str, sets: list[str], message: str, data4: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(base(data4, env))
    assert message in one_line_error(train(config, tmp_path / "run", *sets), capsys)
    assert not (tmp_path / "run").exists()


def test_the_matching_size_and_a_config_without_one_still_load(data4: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(base(data4))
    assert load_config(TrainConfig, config).env.size == 4
    config.write_text(base(data4, "{name: sudoku, max_steps: 8}"))  # no size: the dataset's boards, as before
    assert load_config(TrainConfig, config).env.name == "sudoku"
    config.write_text(base(tmp_path / "not-yet-written", "{name: sudoku, size: 9}"))  # no manifest to compare
    assert load_config(TrainConfig, config).env.size == 9


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_an_empty_config_says_which_keys_it_needs(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "empty.yaml"
    config.write_text(text)
    err = one_line_error(train(config, tmp_path / "run"), capsys)
    assert "empty (no settings)" in err and "at least data and env" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("text", "key", "place"),
    [
        ("threads: 1\nseed: 0\nthreads: 2\n", "'threads'", "lines 1 and 3"),
        ("rl:\n  lr: 0.1\n  iterations: 1\n  lr: 0.2\n", "'lr'", "lines 2 and 4"),
        ("rl: {iterations: 1, iterations: 3}\n", "'iterations'", "line 1, columns 6 and 21"),
        ("env: {name: sudoku}\nenv: {name: rushhour}\n", "'env'", "lines 1 and 2"),
    ],
)
def test_a_duplicated_key_is_refused_naming_it_and_its_lines(
    text: str, key: str, place: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "dup.yaml"
    config.write_text(text)
    err = one_line_error(train(config, tmp_path / "run"), capsys)
    assert f"key {key} appears twice" in err and place in err, err


def test_a_merge_key_may_still_be_overridden(tmp_path: Path) -> None:
    config = tmp_path / "merge.yaml"
    config.write_text("rl: {<<: {iterations: 2, lr: 0.5}, lr: 0.25}\n")  # a merged value, then the mapping's own
    cfg = load_config(TrainConfig, config)
    assert (cfg.rl.iterations, cfg.rl.lr) == (2, 0.25)


@pytest.mark.parametrize(
    ("sets", "text", "message"),
    [
        ([], "env: {name: sudoku, size: 4, max_steps: 99999999999999999999}\n", "past the 64-bit integer range"),
        (["env.max_steps=99999999999999999999"], "seed: 0\n", "config.env.max_steps: 99999999999999999999 is past"),
        (["seed=-99999999999999999999"], "seed: 0\n", "config.seed: -99999999999999999999 is past"),
        (["rl.iterations=9223372036854775808"], "seed: 0\n", "config.rl.iterations: 9223372036854775808 is past"),
        ([], "env: {name: sudoku, size: 4, max_steps: 1000000000000}\n", "env.max_steps: must be in 1..10000"),
    ],
)
def test_integers_past_any_sane_bound_are_refused(
    sets: list[str], text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert message in one_line_error(train(config, tmp_path / "run", *sets), capsys)
    assert not (tmp_path / "run").exists()
