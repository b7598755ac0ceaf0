"""``milepost models export-adapter`` / ``models merge``: a committed LoRA adapter rebuilds the model it was
evaluated as (the same logits as the peft model it came from), and bad folders are one-line refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from milepost.backends.adapters import MERGE_FILE, check_adapter, merge_adapter
from milepost.cli.main import main
from milepost.errors import InputError


@pytest.fixture(scope="module")
def trained_checkpoint(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA checkpoint folder as ``milepost sft`` writes it: the adapter (random, non-zero B so the merge
    changes the weights), the tokenizer, and optimizer state that is not worth committing."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "up_proj"], init_lora_weights=False)
    model = get_peft_model(base, lora)
    ckpt = tmp_path_factory.mktemp("run") / "checkpoints" / "step-000010"
    model.save_pretrained(ckpt)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(ckpt)
    (ckpt / "trainer_state.safetensors").write_bytes(b"optimizer state")
    return ckpt


def _logits(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.tensor([[1, 5, 9, 3, 7, 2]])
    with torch.no_grad():
        out: torch.Tensor = model(input_ids=ids).logits
    return out


def test_an_exported_adapter_merges_into_the_model_it_was_trained_as(
    trained_checkpoint: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    adapter = tmp_path / "adapter"
    assert main(["models", "export-adapter", str(trained_checkpoint), "--out", str(adapter)]) == 0
    assert "adapter of" in capsys.readouterr().out
    names = {p.name for p in adapter.iterdir()}
    assert names == {"adapter_config.json", "adapter_model.safetensors"}  # no optimizer state, no tokenizer

    out = tmp_path / "merged"
    assert main(["models", "merge", str(adapter), "--base", str(tiny_model_dir), "--out", str(out)]) == 0
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    reference = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), str(adapter)).eval()
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    assert torch.allclose(_logits(merged), _logits(reference), atol=1e-5)
    assert not torch.allclose(_logits(merged), _logits(plain), atol=1e-3)  # the adapter did change the model
    base_sd, merged_sd = load_file(tiny_model_dir / "model.safetensors"), load_file(out / "model.safetensors")
    assert set(merged_sd) == set(base_sd)  # an ordinary model: no lora_A / lora_B names
    changed = {k for k in base_sd if not torch.equal(base_sd[k], merged_sd[k])}
    assert changed and all("q_proj" in k or "up_proj" in k for k in changed)
    record = json.loads((out / MERGE_FILE).read_text())
    assert record["rank"] == 4 and record["command"].startswith("milepost models merge")
    assert len(record["adapter_sha256"]) == 64


def test_a_run_whose_tokenizer_is_not_its_bases_is_not_exported(trained_checkpoint: Path, tmp_path: Path) -> None:
    from milepost.backends.adapters import export_adapter

    changed = shutil.copytree(trained_checkpoint, tmp_path / "changed")
    tokenizer = json.loads((changed / "tokenizer.json").read_text())
    tokenizer["added_tokens"] = [*tokenizer.get("added_tokens", []), {"id": 10**6, "content": "<new>"}]
    (changed / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(InputError, match="tokenizer differs"):
        export_adapter(changed, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_adapter_folders_are_one_line_refusals(
    trained_checkpoint: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError, match="not a peft adapter folder"):
        check_adapter(tiny_model_dir)
    with pytest.raises(InputError, match="does not exist"):
        check_adapter(tmp_path / "nowhere")
    wrong = shutil.copytree(trained_checkpoint, tmp_path / "wrong")
    config = json.loads((wrong / "adapter_config.json").read_text())
    (wrong / "adapter_config.json").write_text(json.dumps({**config, "peft_type": "IA3"}))
    with pytest.raises(InputError, match="only LORA"):
        check_adapter(wrong)

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("keep me")
    code = main(["models", "merge", str(trained_checkpoint), "--base", str(tiny_model_dir), "--out", str(taken)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not empty" in err[0]
    assert (taken / "x").read_text() == "keep me"

    foreign = shutil.copytree(trained_checkpoint, tmp_path / "foreign")
    (foreign / "adapter_config.json").write_text(json.dumps({**config, "target_modules": ["no_such_proj"]}))
    with pytest.raises(InputError, match="does not fit base"):
        merge_adapter(foreign, tiny_model_dir, tmp_path / "never")
    assert not (tmp_path / "never").exists()

    code = main(["models", "merge", str(tiny_model_dir), "--base", str(tiny_model_dir), "--out", str(tmp_path / "m")])
    assert code == 2 and "not a peft adapter folder" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
