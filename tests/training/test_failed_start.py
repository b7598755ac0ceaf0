"""A failed start of ``milepost sft`` / ``milepost train`` leaves nothing behind, so the corrected command can use
the same ``--out``; a model folder that lost its chat template is refused instead of silently mis-prompted."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from milepost.backends.base import ModelLoadError
from milepost.backends.hf import HFBackend

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


def _milepost(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "milepost", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("d")
    proc = _milepost(
        "data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "6", "--test", "2", "--out", "d", cwd=root
    )
    assert proc.returncode == 0, proc.stderr
    return root / "d"


@pytest.mark.parametrize(
    ("command", "bad", "message"),
    [
        ("sft", ["model=/nonexistent/model"], "does not exist"),  # fails after the config would be written
        ("sft", ["model=tiny:1m", "levels=S5"], "no train tasks at levels S5"),  # a tiny model would be built
        ("train", ["levels=S5"], "no train tasks at levels S5"),
    ],
)
def test_a_failed_start_leaves_nothing_and_the_fixed_command_runs(
    command: str, bad: list[str], message: str, data: Path, tmp_path: Path
) -> None:
    base = ["--config", str(ROOT / "configs/tiny-cpu/sudoku4_sft.yaml"), "--out", "run", "--set", f"data={data}"]
    small = ["sft.tasks=2", "sft.epochs=0.2", "rl.iterations=1", "rl.tasks_per_iter=1", "rl.samples_per_task=1"]
    small += ["rl.minibatches=1", "threads=1", "eval.limit=1", "eval.n=1", "eval.ks=[1]", "env.max_steps=4"]
    if command == "train":
        small.append(f"model={SHIPPED}")
    sets = [x for s in small for x in ("--set", s)]
    failed = _milepost(command, *base, *sets, *[x for s in bad for x in ("--set", s)], cwd=tmp_path)
    assert failed.returncode == 2 and message in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists(), sorted(p.name for p in (tmp_path / "run").iterdir())
    fixed = _milepost(command, *base, *sets, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()


def test_a_failed_resume_keeps_the_run_it_was_resuming(data: Path, tmp_path: Path) -> None:
    args = ["--config", str(ROOT / "configs/tiny-cpu/sudoku4_sft.yaml"), "--out", "run", "--set", f"data={data}"]
    args += ["--set", "sft.tasks=2", "--set", "sft.epochs=0.2", "--set", "threads=1"]
    assert _milepost("sft", *args, cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / "run").iterdir())
    (data / "train.jsonl").rename(data / "train.moved")
    try:
        failed = _milepost("sft", *args, "--resume", cwd=tmp_path)
    finally:
        (data / "train.moved").rename(data / "train.jsonl")
    assert failed.returncode == 2
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before


def test_a_chat_model_without_its_template_is_refused(data: Path, tmp_path: Path) -> None:
    model = tmp_path / "m"
    shutil.copytree(SHIPPED, model)
    (model / "chat_template.jinja").unlink()
    with pytest.raises(ModelLoadError, match=r"chat-role tokens .*no chat template"):
        HFBackend(model)
    proc = _milepost(
        "eval", "--env", "sudoku", "--data", str(data), "--policy", f"hf:{model}", "--out", "ev", cwd=tmp_path
    )
    assert proc.returncode == 2 and "no chat template" in proc.stderr
    assert not (tmp_path / "ev").exists()


def _word_tokenizer(*special: str):  # a base model's tokenizer: no template, no role tokens unless given
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "<eos>": 1, "value": 2, **{tok: 3 + i for i, tok in enumerate(special)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", unk_token="[UNK]", additional_special_tokens=list(special)
    )


def test_a_plain_model_is_named_as_using_plain_prompts(caplog: pytest.LogCaptureFixture) -> None:
    model = HFBackend(SHIPPED).model
    with caplog.at_level("WARNING", logger="milepost.backends.hf"):
        backend = HFBackend(model=model, tokenizer=_word_tokenizer())
    assert "no chat template" in caplog.text and "plain 'Role: content' paragraphs" in caplog.text
    assert backend.tokenizer.chat_template is None
    with pytest.raises(ModelLoadError, match="chat-role tokens"):
        HFBackend(model=model, tokenizer=_word_tokenizer("<|im_start|>"))
