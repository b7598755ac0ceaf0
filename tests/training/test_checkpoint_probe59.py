"""Issue 59 items 3 and 4: a checkpoint that cannot be written for want of space is one line (exit 1) and keeps the
last one; killed writes leave no temporary folder for good; a checkpoint without its manifest is refused unless
trusted, and the trainer state's learning rate, RNG states and optimizer step are checked with or without one."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from milepost.backends.hf import load_model
from milepost.cli.main import main
from milepost.errors import InputError
from milepost.training.checkpoint import (
    MANIFEST_FILE,
    STATE_TENSORS,
    STATE_TREE,
    latest_checkpoint,
    load_checkpoint_state,
    save_checkpoint,
)
from milepost.training.trainer import train_rl
from tests.training.test_checkpoint_security import tiny_rl_config

S1, S2 = "step-000001", "step-000002"


@pytest.fixture(scope="module")
def run_folder(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An RL run of 3 iterations stopped after 2 (checkpoints at steps 1 and 2) and the config file that made it."""
    root = tmp_path_factory.mktemp("probe59")
    cfg, config = tiny_rl_config(tiny_model_dir, root, iterations=3)
    out = root / "run"
    train_rl(cfg, out, progress=False, stop_after=2)
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == [S1, S2]
    return config, out


def _copy(run_folder: tuple[Path, Path], tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(run_folder[1], run, symlinks=True)
    return run


def _resume(config: Path, run: Path, *extra: str) -> list[str]:
    return ["train", "--config", str(config), "--out", str(run), "--resume", "--no-progress", *extra]


def _regenerate_manifest(ckpt: Path) -> None:
    """What a user (or an attacker) who edits a checkpoint can do: list the files as they now are."""
    from milepost.training import checkpoint as module

    digests = {n: module._sha256(ckpt / n) for n in module._files(ckpt)}
    (ckpt / MANIFEST_FILE).write_text(json.dumps({"sha256": digests}), encoding="utf-8")


def _one_line(err: str) -> str:
    err = err.strip()
    assert err.startswith("milepost: error:") and "\n" not in err, err
    return err


# -- item 4: no manifest ---------------------------------------------------------------------------------------


def test_a_checkpoint_without_a_manifest_is_refused_unless_trusted(
    run_folder: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: with the manifest deleted, step 1's model swapped into step 2 resumed silently."""
    config, _ = run_folder
    run = _copy(run_folder, tmp_path)
    ckpt = run / "checkpoints" / S2
    (ckpt / MANIFEST_FILE).unlink()
    shutil.copyfile(run / "checkpoints" / S1 / "model.safetensors", ckpt / "model.safetensors")
    capsys.readouterr()
    assert main(_resume(config, run)) == 2
    err = _one_line(capsys.readouterr().err)
    assert str(ckpt / MANIFEST_FILE) in err and "--trust-checkpoint" in err
    assert not (run / "final").exists()
    assert main(["sft", "--config", str(config), "--out", str(run), "--resume", "--no-progress"]) == 2
    assert str(ckpt / MANIFEST_FILE) in _one_line(capsys.readouterr().err)

    # the user vouches for it: it resumes, and trains the last iteration
    assert main(_resume(config, run, "--trust-checkpoint")) == 0, capsys.readouterr().err
    assert (run / "final" / "model.safetensors").is_file()
    assert latest_checkpoint(run) == run / "checkpoints" / "step-000003"  # the new checkpoint has its manifest


# -- item 4: the trainer state's values, with a regenerated manifest or none (trusted) ---------------------------


def _edit_tree(ckpt: Path, change: Any) -> None:
    tree = json.loads((ckpt / STATE_TREE).read_text(encoding="utf-8"))
    change(tree)
    (ckpt / STATE_TREE).write_text(json.dumps(tree), encoding="utf-8")


def _group(field: str, value: Any) -> Any:
    return lambda ckpt: _edit_tree(ckpt, lambda t: t["optimizer"]["param_groups"][0].__setitem__(field, value))


def _rng(change: Any) -> Any:
    return lambda ckpt: _edit_tree(ckpt, change)


def _other_steps_state(ckpt: Path) -> None:
    """Step 1's optimizer tensors (and state tree) in step 2's folder."""
    for name in (STATE_TENSORS, STATE_TREE):
        shutil.copyfile(ckpt.parent / S1 / name, ckpt / name)


def _other_steps_tensors(ckpt: Path) -> None:
    shutil.copyfile(ckpt.parent / S1 / STATE_TENSORS, ckpt / STATE_TENSORS)


def _torch_rng_cut(ckpt: Path) -> None:
    tree = json.loads((ckpt / STATE_TREE).read_text(encoding="utf-8"))
    key = tree["rng"]["torch"]["__tensor__"][0]
    tensors = load_file(ckpt / STATE_TENSORS)
    tensors[key] = tensors[key][:100].clone()
    save_file(tensors, ckpt / STATE_TENSORS)


STATE_CASES: dict[str, tuple[Any, str]] = {
    "lr 1e30": (_group("lr", 1e30), "lr = 1e+30"),
    "lr 1e-3 (in range, not the config's 1e-6)": (_group("lr", 1e-3), "the run's config sets 1e-06"),
    "weight_decay 0.5 (not the config's)": (_group("weight_decay", 0.5), "weight_decay"),
    "rng null": (_rng(lambda t: t.__setitem__("rng", None)), "generator states, got null"),
    "rng numpy pos 9999": (_rng(lambda t: t["rng"]["numpy"].__setitem__("pos", 9999)), "rng.numpy"),
    "rng numpy missing": (_rng(lambda t: t["rng"].pop("numpy")), "got ['python', 'torch']"),
    "rng torch state cut": (_torch_rng_cut, "rng.torch"),
    "step 1's optimizer tensors": (_other_steps_tensors, "the state has taken 1 steps, but checkpoint.json recorded 2"),
    "step 1's whole trainer state": (_other_steps_state, "the state has taken 1 steps, but checkpoint.json recorded 2"),
}


@pytest.mark.parametrize("manifest", ["regenerated", "deleted, --trust-checkpoint"])
@pytest.mark.parametrize("case", sorted(STATE_CASES))
def test_a_tampered_trainer_state_is_refused_in_one_line(
    run_folder: tuple[Path, Path], tmp_path: Path, case: str, manifest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: each of these resumed (lr 1e30 trained with it; rng null and step 1's tensors loaded silently)."""
    config, _ = run_folder
    run = _copy(run_folder, tmp_path)
    ckpt = run / "checkpoints" / S2
    change, named = STATE_CASES[case]
    change(ckpt)
    if manifest == "regenerated":
        _regenerate_manifest(ckpt)
    else:
        (ckpt / MANIFEST_FILE).unlink()
    capsys.readouterr()
    code = main(_resume(config, run, *([] if manifest == "regenerated" else ["--trust-checkpoint"])))
    err = _one_line(capsys.readouterr().err)
    assert code == 2 and str(ckpt) in err and named in err, err
    assert not (run / "final").exists() and not (run / "checkpoints" / "step-000003").exists()


def test_the_untampered_run_resumes_with_a_regenerated_manifest(
    run_folder: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checks above refuse what was changed, not every regenerated manifest."""
    config, _ = run_folder
    run = _copy(run_folder, tmp_path)
    _regenerate_manifest(run / "checkpoints" / S2)
    assert main(_resume(config, run)) == 0, capsys.readouterr().err
    assert (run / "final" / "model.safetensors").is_file()


@pytest.fixture(scope="module")
def sft_parts(tiny_model_dir: Path) -> tuple[Any, Any]:
    return load_model(tiny_model_dir, torch.device("cpu"), torch.float32)


def _scheduled_checkpoint(parts: tuple[Any, Any], run: Path, steps: int = 3) -> Path:
    """A checkpoint as SFT writes one: AdamW with a LambdaLR stepped once per optimizer step."""
    net, tokenizer = parts
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (s + 1))
    for _ in range(steps):
        net(torch.tensor([[1, 2, 3]])).logits.sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return save_checkpoint(run, steps, net, tokenizer, optimizer, scheduler, "name: x\n")


@pytest.mark.parametrize(
    "case",
    ["lr off its schedule", "initial_lr off its base", "scheduler at another step", "no step counts recorded"],
)
def test_a_scheduled_state_must_agree_with_its_scheduler(sft_parts: tuple[Any, Any], tmp_path: Path, case: str) -> None:
    ckpt = _scheduled_checkpoint(sft_parts, tmp_path / "run")
    state, meta = load_checkpoint_state(ckpt)  # as saved: loads
    assert meta.step == 3 and state["scheduler"]["last_epoch"] == 3
    if case == "lr off its schedule":
        _group("lr", 0.5)(ckpt)
        message = "but the scheduler's is"
    elif case == "initial_lr off its base":
        _group("initial_lr", 0.5)(ckpt)
        message = "initial_lr"
    elif case == "scheduler at another step":
        _edit_tree(ckpt, lambda t: t["scheduler"].__setitem__("last_epoch", 1))
        message = "last_epoch"
    else:  # a checkpoint of before optimizer_steps was recorded: the scheduler's count still binds
        meta_file = ckpt / "checkpoint.json"
        meta_file.write_text(json.dumps({"step": 3, "extra": {}}), encoding="utf-8")
        shutil.copyfile(_scheduled_checkpoint(sft_parts, tmp_path / "other", 2) / STATE_TENSORS, ckpt / STATE_TENSORS)
        message = "has taken 2 steps at step 3"
    with pytest.raises(InputError, match=message) as info:
        load_checkpoint_state(ckpt)
    assert "\n" not in str(info.value)


# -- item 3: a full disk, and killed writes -----------------------------------------------------------------------


def _limited(limit: int) -> Any:
    def apply() -> None:  # in the child, before exec: writes past `limit` bytes fail with EFBIG, not SIGXFSZ
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_during_a_checkpoint_is_one_line_and_keeps_the_last(
    run_folder: tuple[Path, Path], tmp_path: Path
) -> None:
    """Before: ``SafetensorError ... File too large`` as a traceback (exit 1)."""
    config, _ = run_folder
    run = _copy(run_folder, tmp_path)
    model_bytes = (run / "checkpoints" / S2 / "model.safetensors").stat().st_size
    before = {p.name: p.read_bytes() for p in (run / "checkpoints" / S2).iterdir()}
    limit = model_bytes // 2  # every small file of the run fits; the model's weights do not
    command = [sys.executable, "-m", "milepost.cli.main", *_resume(config, run)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=_limited(limit))
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert len(err) == 1 and err[0].startswith("milepost: error:"), done.stderr
    line = err[0]
    assert str(run / "checkpoints") in line and "step-000003 not written" in line and "file size limit" in line
    assert "needs about" in line and f"the last checkpoint {S2} is intact" in line
    assert "Traceback" not in done.stderr
    root = run / "checkpoints"
    assert not [p for p in root.iterdir() if p.name.startswith(".")], "the temporary folder was left"
    assert not (root / "step-000003").exists()
    assert latest_checkpoint(root.parent) == root / S2  # manifest and contents still check
    assert {p.name: p.read_bytes() for p in (root / S2).iterdir()} == before


def test_save_checkpoint_under_a_size_limit_names_the_space_a_checkpoint_needs(
    run_folder: tuple[Path, Path], tmp_path: Path
) -> None:
    """The real save function in a process whose file size limit is below the model's size, with no earlier
    checkpoint: the size it states is the tensors' bytes, at least the model file the unlimited save wrote."""
    _, out = run_folder
    model_dir = out / "checkpoints" / S2
    script = (
        "import sys, torch\n"
        "from milepost.backends.hf import load_model\n"
        "from milepost.training.checkpoint import save_checkpoint, CheckpointWriteError\n"
        f"net, tok = load_model({str(model_dir)!r}, torch.device('cpu'), torch.float32)\n"
        "try:\n"
        f"    save_checkpoint({str(tmp_path / 'run')!r}, 1, net, tok, None, None, 'name: x\\n')\n"
        "except CheckpointWriteError as exc:\n"
        "    print(exc); sys.exit(1)\n"
    )
    limit = (model_dir / "model.safetensors").stat().st_size // 2
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, preexec_fn=_limited(limit)
    )
    assert done.returncode == 1, done.stderr
    line = done.stdout.strip()
    assert "no earlier checkpoint" in line and "step-000001 not written" in line, line
    stated = (
        float(line.split("needs about ")[1].split(" ")[0])
        * {"MB": 1e6, "kB": 1e3}[line.split("needs about ")[1].split(" ")[1]]
    )
    assert stated >= 0.9 * (model_dir / "model.safetensors").stat().st_size
    assert list((tmp_path / "run" / "checkpoints").iterdir()) == []


def test_stale_temporary_folders_are_cleared_when_a_run_starts(
    run_folder: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a write killed midway left ``.step-NNNNNN.XXXXXXXX`` (or ``latest``'s ``.latest.XXXXXXXX.tmp``) in
    checkpoints/ for good. Only those exact patterns are removed; a look-alike file, a differently named folder or
    file and a symlink stay."""
    config, _ = run_folder
    run = _copy(run_folder, tmp_path)
    root = run / "checkpoints"
    stale = Path(tempfile.mkdtemp(prefix=".step-000003.", dir=root))  # as save_checkpoint names it
    shutil.copyfile(root / S2 / "config.json", stale / "config.json")  # a write cut off after the first file
    keep_dir = root / ".step-000003.my-notes"
    keep_dir.mkdir()
    keep_file = root / ".step-000004.abcdefgh"
    keep_file.write_text("not a folder", encoding="utf-8")
    keep_link = root / ".step-000005.zzzzzzzz"
    keep_link.symlink_to(tmp_path, target_is_directory=True)
    fd, name = tempfile.mkstemp(prefix=".latest.", suffix=".tmp", dir=root)  # as milepost.io.atomic_write names it
    os.close(fd)
    stale_latest = Path(name)
    keep_other = root / ".latest.abcdefgh.bak"
    keep_other.write_text("a user's file", encoding="utf-8")
    capsys.readouterr()
    assert main(_resume(config, run)) == 0, capsys.readouterr().err
    assert not stale.exists() and not stale_latest.exists()
    assert keep_dir.is_dir() and keep_file.is_file() and keep_link.is_symlink() and tmp_path.is_dir()
    assert keep_other.is_file()
