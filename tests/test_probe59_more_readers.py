"""The episode readers outside the first pass of issue 59 item 5: SFT's ``sft.episodes`` and the shop's
``--replay`` refuse NaN / Infinity naming FILE:LINE, like every other reader (``milepost.io.loads_finite``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milepost.errors import InputError
from milepost.training.sft import read_episodes


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_sft_episodes_refuse_a_non_finite_reward(tmp_path: Path, word: str) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"task_id": "b", "reward": ' + word + "}\n")
    with pytest.raises(InputError, match=rf"{path}:1: .*non-finite"):
        read_episodes([str(path)])


@pytest.mark.parametrize("word", ["NaN", "Infinity"])
def test_shop_replay_refuses_a_non_finite_number(tmp_path: Path, word: str) -> None:
    from milepost.cli.shop import replay_texts
    from milepost.envs import make_env

    task = make_env("webshop").sample_task(0)
    path = tmp_path / "episodes.jsonl"
    row = json.dumps({"task_id": task.task_id, "turns": [{"text": "ACTION: search[x]"}]})
    path.write_text(row + "\n" + row[:-1] + ', "reward": ' + word + "}\n")
    with pytest.raises(InputError, match=r"--replay .*:2: .*non-finite"):
        replay_texts(str(path), task, None)
    path.write_text(row + "\n")
    assert replay_texts(str(path), task, None) == ["ACTION: search[x]"]


def test_find_runs_refuses_a_non_finite_number(tmp_path: Path) -> None:
    """export, show and the credit audit read run folders through ``find_runs``."""
    from milepost.export import find_runs

    (tmp_path / "episodes.jsonl").write_text('{"task_id": "a", "reward": NaN}\n')
    with pytest.raises(InputError, match=r"episodes.jsonl:1: .*non-finite"):
        find_runs(tmp_path)
