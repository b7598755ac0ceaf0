"""Checkpoint state without pickle: exact round trip of optimizer, RNG and extra state; planted pickles and
truncated files are one-line errors that run nothing, in process and through ``milepost train --resume``."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from milepost.backends.hf import load_model
from milepost.cli.main import main
from milepost.config import EnvConfig, to_yaml
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.training.checkpoint import (
    LEGACY_STATE_FILE,
    STATE_TENSORS,
    STATE_TREE,
    latest_checkpoint,
    load_checkpoint_state,
    save_checkpoint,
    set_rng_state,
)
from milepost.training.config import AgentConfig, EvalConfig, RLConfig, SFTConfig, TrainConfig


class Payload:
    """Unpickling this creates ``marker``: what a crafted trainer_state.pt would do on resume."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def _draws() -> tuple[list[float], list[float], list[float]]:
    return (
        [random.random(), random.gauss(0, 1)],
        [*np.random.standard_normal(3).tolist(), float(np.random.rand())],
        torch.rand(4).tolist(),
    )


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> tuple[Any, Any]:
    return load_model(tiny_model_dir, torch.device("cpu"), torch.float32)


@pytest.fixture
def checkpoint(model: tuple[Any, Any], tmp_path: Path) -> Path:
    net, tokenizer = model
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    net(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return save_checkpoint(tmp_path / "run", 3, net, tokenizer, optimizer, None, "name: x\n")


def test_state_round_trips_exactly_without_a_pickle(model: tuple[Any, Any], tmp_path: Path) -> None:
    net, tokenizer = model
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.8, 0.95))
    net(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    base = torch.arange(12.0)
    extra = {
        "tied": {"a": base, "b": base.view(12), "half": base[6:], "grid": base.view(3, 4)},
        "outcomes": [("t1", "S1", True), ("t2", "S2", False)],
        "by_int": {0: 1.5, 7: [1, 2]},
        "tricky": {"__tuple__": "a str-keyed dict whose only key is a tag"},
        "floats": [0.1, 1e-300, float("inf")],
        "samples": [{"prompt": [1, 2], "features": None, "progress": 0.25, "outcome": 1.0}],
    }
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1), np.random.standard_normal()  # leave a cached Gaussian in both generators
    path = save_checkpoint(tmp_path, 5, net, tokenizer, optimizer, None, "name: x\n", extra_state=extra)
    after_save = _draws()
    assert not (path / LEGACY_STATE_FILE).exists()

    state, meta = load_checkpoint_state(path)
    set_rng_state(state["rng"])
    assert _draws() == after_save
    assert meta.step == 5 and state["scheduler"] is None
    saved, loaded = optimizer.state_dict(), state["optimizer"]
    assert loaded["param_groups"] == saved["param_groups"]
    assert loaded["state"].keys() == saved["state"].keys()
    for i, entry in saved["state"].items():
        assert all(torch.equal(loaded["state"][i][k], v) for k, v in entry.items())
    fresh = torch.optim.AdamW(net.parameters(), lr=1e-3)
    fresh.load_state_dict(loaded)
    got = state["extra_state"]
    assert {k: v for k, v in got.items() if k != "tied"} == {k: v for k, v in extra.items() if k != "tied"}
    assert all(torch.equal(got["tied"][k], v) for k, v in extra["tied"].items())


def test_a_planted_pickle_is_refused_and_runs_nothing(checkpoint: Path, tmp_path: Path) -> None:
    armed = tmp_path / "armed"
    torch.save({"rng": Payload(armed)}, tmp_path / "probe.pt")
    torch.load(tmp_path / "probe.pt", weights_only=False)
    assert armed.exists(), "the payload must be live for this test to mean anything"

    marker = tmp_path / "marker"
    torch.save({"optimizer": Payload(marker)}, checkpoint / LEGACY_STATE_FILE)
    (checkpoint / STATE_TREE).unlink()
    (checkpoint / STATE_TENSORS).unlink()
    with pytest.raises(InputError) as info:
        load_checkpoint_state(checkpoint)
    message = str(info.value)
    assert str(checkpoint / LEGACY_STATE_FILE) in message and "pickle" in message and "\n" not in message
    assert not marker.exists()


@pytest.mark.parametrize("name", [STATE_TREE, STATE_TENSORS])
def test_pickle_bytes_in_the_state_files_are_refused(checkpoint: Path, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "marker"
    torch.save({"optimizer": Payload(marker)}, checkpoint / name)
    with pytest.raises(InputError, match="unreadable checkpoint") as info:
        load_checkpoint_state(checkpoint)
    assert str(checkpoint / name) in str(info.value) and "\n" not in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("name", [STATE_TREE, STATE_TENSORS])
def test_a_truncated_state_file_is_a_one_line_error(checkpoint: Path, name: str) -> None:
    data = (checkpoint / name).read_bytes()
    (checkpoint / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="unreadable checkpoint") as info:
        load_checkpoint_state(checkpoint)
    assert str(checkpoint / name) in str(info.value) and "\n" not in str(info.value)


def test_a_wellformed_file_of_the_wrong_shape_is_a_one_line_error(checkpoint: Path) -> None:
    (checkpoint / STATE_TREE).write_text('{"optimizer": {"__tensor__": ["nope", "cpu"]}}', encoding="utf-8")
    with pytest.raises(InputError, match="unreadable checkpoint"):
        load_checkpoint_state(checkpoint)
    (checkpoint / STATE_TREE).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputError, match="not a trainer state"):
        load_checkpoint_state(checkpoint)
    before = random.getstate()
    for rng in ('{"python": 1}', '{"python": {"version": 3, "internal": [1], "gauss": null}, "numpy": {}}'):
        tree = f'{{"optimizer": null, "scheduler": null, "extra_state": null, "rng": {rng}}}'
        (checkpoint / STATE_TREE).write_text(tree, encoding="utf-8")
        with pytest.raises(InputError, match="unreadable checkpoint"):
            load_checkpoint_state(checkpoint)
    assert random.getstate() == before  # a failed check leaves the generators as they were
    (checkpoint / STATE_TREE).write_text('{"__tensor__": ["t0", "mps:7"]}', encoding="utf-8")
    with pytest.raises(InputError, match="unknown device"):
        load_checkpoint_state(checkpoint)


# -- through the command line ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_folder(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished one-iteration RL run (checkpoint at step 1) and the config file that made it."""
    rng = random.Random(0)
    tasks = [
        make_task(*generate_easy(4, rng.randint(3, 5), 5, i), level="S1", split="train", index=i) for i in range(4)
    ]
    root = tmp_path_factory.mktemp("cli")
    data = write_dataset(root / "sudoku4", {"train": tasks, "test": []}, {"seed": 5})
    cfg = TrainConfig(
        name="t",
        model=str(tiny_model_dir),
        data=str(data),
        env=EnvConfig(size=4, max_steps=2, render="cells"),
        agent=AgentConfig(memory_k=1, max_new_tokens=8),
        sft=SFTConfig(tasks=4, epochs=1.0, batch_size=4),
        rl=RLConfig(iterations=1, tasks_per_iter=1, samples_per_task=2, minibatches=1),
        eval=EvalConfig(n=1, ks=[1], limit=1),
        threads=1,
        checkpoint_every=1,
    )
    config = root / "rl.yaml"
    config.write_text(to_yaml(cfg), encoding="utf-8")
    out = root / "run"
    assert main(["train", "--config", str(config), "--out", str(out), "--no-progress"]) == 0
    return config, out


@pytest.mark.parametrize("damage", ["planted", "truncated"])
def test_train_resume_on_a_damaged_state_exits_2_in_one_line(
    run_folder: tuple[Path, Path], damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, out = run_folder
    ckpt = latest_checkpoint(out)
    assert ckpt is not None
    marker = tmp_path / "marker"
    kept = {name: (ckpt / name).read_bytes() for name in (STATE_TREE, STATE_TENSORS)}
    try:
        if damage == "planted":
            torch.save({"optimizer": Payload(marker)}, ckpt / LEGACY_STATE_FILE)
            for name in kept:
                (ckpt / name).unlink()
            named = ckpt / LEGACY_STATE_FILE
        else:
            (ckpt / STATE_TENSORS).write_bytes(kept[STATE_TENSORS][:100])
            named = ckpt / STATE_TENSORS
        capsys.readouterr()
        assert main(["train", "--config", str(config), "--out", str(out), "--resume", "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("milepost: error:") and str(named) in err and "\n" not in err
        assert not marker.exists()
    finally:
        (ckpt / LEGACY_STATE_FILE).unlink(missing_ok=True)
        for name, data in kept.items():
            (ckpt / name).write_bytes(data)
