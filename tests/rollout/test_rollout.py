"""The trainer's rollout seam without vLLM: ``rollout.backend: hf`` goes through the same source as vllm and a
server (policy versions, staleness, weight pushes), weights are written once as safetensors that load back
exactly, a server's reload route is called as documented, and specs that cannot train are refused."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi import FastAPI, Request

from milepost.backends.base import BackendError, GenerationRequest, SamplingParams
from milepost.backends.openai_compat import OpenAIBackend
from milepost.config import EnvConfig
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.io import read_jsonl
from milepost.rollout import ServerReload, make_rollout_source, merged_state_dict, write_weights
from milepost.rollout.vllm_worker import RELOAD_METHOD
from milepost.serve.runner import BackgroundServer
from milepost.training.config import AgentConfig, RLConfig, RolloutConfig, TrainConfig
from milepost.training.trainer import train_rl

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    splits: dict[str, list] = {"train": [], "test": []}
    for split, count in (("train", 6), ("test", 2)):
        for i in range(count):
            splits[split].append(
                make_task(*generate_easy(4, 5, 31, i + 100 * (split == "test")), level="S2", split=split, index=i)
            )
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 31})


def _cfg(data: Path, **rollout: Any) -> TrainConfig:
    return TrainConfig(
        name="seam",
        model=str(SHIPPED),
        data=str(data),
        env=EnvConfig(size=4, max_steps=6, render="hints"),
        agent=AgentConfig(memory_k=0, max_new_tokens=32, temperature=0.8),
        rl=RLConfig(iterations=3, tasks_per_iter=2, samples_per_task=2, minibatches=1, lr=1e-3),
        rollout=RolloutConfig(**rollout),
        threads=1,
        checkpoint_every=10,
    )


def test_hf_rollouts_go_through_the_seam_with_versions_and_staleness(data4: Path, tmp_path: Path) -> None:
    train_rl(_cfg(data4), tmp_path / "every", progress=False)
    rows = [r for r in read_jsonl(tmp_path / "every" / "metrics.jsonl") if "loss/policy" in r]
    assert [r["rollout/policy_version"] for r in rows] == [0, 1, 2]
    assert [r["train/staleness"] for r in rows] == [0, 0, 0]
    for r in rows:  # the shared-weights source samples from exactly the weights the loss scores
        assert r["is/onpolicy_rho"] == pytest.approx(1.0, abs=1e-4)
        assert math.isfinite(r["perf/sync_s"])
    # Pushing every second update: the middle rollout comes from a policy one update old, and says so.
    train_rl(_cfg(data4, sync_every=2), tmp_path / "stale", progress=False)
    rows = [r for r in read_jsonl(tmp_path / "stale" / "metrics.jsonl") if "loss/policy" in r]
    assert [r["rollout/policy_version"] for r in rows] == [0, 0, 2]
    assert [r["train/staleness"] for r in rows] == [0, 1, 0]


def test_written_weights_load_back_exactly_with_tied_weights_once(tmp_path: Path) -> None:
    from milepost.backends.hf import load_model

    model, tokenizer = load_model(SHIPPED, torch.device("cpu"), torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    state = merged_state_dict(model)
    assert "lm_head.weight" not in state and "model.embed_tokens.weight" in state  # tied: written once
    folder = write_weights(model, tokenizer, tmp_path / "w")
    again, _ = load_model(folder, torch.device("cpu"), torch.float32)
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), name


class FakeVLLM:
    """A server with vLLM's dev-mode routes; records what it was asked."""

    def __init__(self, routes: bool = True, unloaded: list[str] | None = None, reset: bool = True) -> None:
        self.routes = routes
        self.unloaded = unloaded or []  # what milepost's worker extension reports it did not load
        self.reset = reset
        self.calls: list[tuple[str, Any]] = []

    def app(self) -> FastAPI:
        app = FastAPI()
        if self.routes:

            @app.post("/collective_rpc")
            async def rpc(request: Request) -> Any:
                self.calls.append(("rpc", await request.json()))
                return {"results": [self.unloaded]}

            @app.post("/reset_prefix_cache")
            async def reset() -> Any:
                self.calls.append(("reset", None))
                return {"success": self.reset}

        @app.post("/v1/completions")
        async def completions(request: Request) -> Any:
            body = await request.json()
            self.calls.append(("completions", body))
            choice = {"index": 0, "finish_reason": "length", "text": "ab", "logprobs": None}
            choice["logprobs"] = {"tokens": ["a"], "token_logprobs": [-0.5], "text_offset": [0], "top_logprobs": None}
            if self.routes:  # the "vLLM" returns token ids, the other one does not
                choice |= {"prompt_token_ids": body["prompt"], "token_ids": [7]}
            return {"id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}

        return app


def test_server_reload_calls_the_rpc_route_then_resets_the_prefix_cache(tmp_path: Path) -> None:
    fake = FakeVLLM()
    with BackgroundServer(fake.app()) as server:
        ServerReload(server.base_url)(tmp_path)
    assert fake.calls == [
        ("rpc", {"method": RELOAD_METHOD, "kwargs": {"weights_path": str(tmp_path.resolve())}}),
        ("reset", None),
    ]
    with BackgroundServer(FakeVLLM(routes=False).app()) as server, pytest.raises(BackendError) as err:
        ServerReload(server.base_url)(tmp_path)
    assert "VLLM_SERVER_DEV_MODE=1" in str(err.value) and "\n" not in str(err.value)


def test_a_reload_that_left_old_weights_or_kept_the_prefix_cache_fails_loudly(tmp_path: Path) -> None:
    """vLLM's in-place reload only logs the parameters it did not load; the worker extension reports them and
    the push fails, naming them, as it does when the prefix cache (the old weights' keys and values) stays."""
    from milepost.rollout.vllm_worker import check_reload

    with BackgroundServer(FakeVLLM(unloaded=["model.norm.weight"]).app()) as server, pytest.raises(BackendError) as err:
        ServerReload(server.base_url)(tmp_path)
    assert "model.norm.weight" in str(err.value) and "\n" not in str(err.value)
    fake = FakeVLLM(reset=False)
    with BackgroundServer(fake.app()) as server, pytest.raises(BackendError, match="reset_prefix_cache"):
        ServerReload(server.base_url)(tmp_path)
    assert [c[0] for c in fake.calls] == ["rpc", "reset"]
    # The in-process engine's collective_rpc results, one per worker: every worker must report an empty list.
    check_reload([[], []], "vllm:x")
    for results in ([], [None], [[], ["lm_head.weight"]]):
        with pytest.raises(BackendError):
            check_reload(results, "vllm:x")


def test_server_rollouts_send_token_ids_and_refuse_a_server_without_them() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(SHIPPED)
    messages = [{"role": "user", "content": "fill r1c1"}]
    expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    request = GenerationRequest(messages=messages, params=SamplingParams(temperature=0.8, max_new_tokens=1))
    fake = FakeVLLM()
    with BackgroundServer(fake.app()) as server:
        kw = {"use_chat": False, "require_logprobs": True, "require_token_ids": True, "tokenizer": tokenizer}
        with OpenAIBackend("m", server.base_url, **kw) as backend:
            out = backend.generate([request])[0]
    sent = fake.calls[0][1]
    assert sent["prompt"] == tokenizer(expected, add_special_tokens=False)["input_ids"]
    assert sent["return_token_ids"] is True and sent["logprobs"] == 1
    assert out.prompt_ids == sent["prompt"] and out.completion_ids == [7] and out.logprobs == [-0.5]
    with (
        BackgroundServer(FakeVLLM(routes=False).app()) as server,
        OpenAIBackend("m", server.base_url, **kw) as backend,
        pytest.raises(BackendError) as err,
    ):
        backend.generate([request])
    assert "no token ids" in str(err.value)


@pytest.mark.parametrize(
    ("rollout", "message"),
    [
        ({"backend": "oracle"}, "not hf, vllm or openai"),
        ({"backend": "openai:m"}, "needs the server"),
        ({"backend": "openai:m@"}, "needs the server"),
        ({"sync_every": 0}, "sync_every"),
    ],
)
def test_bad_rollout_configs(rollout: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RolloutConfig(**rollout)


def test_a_server_cannot_give_untruncated_log_probs_of_a_truncated_sampler(data4: Path, tmp_path: Path) -> None:
    cfg = _cfg(data4, backend="openai:m@http://127.0.0.1:9/v1")
    cfg.agent.top_p = 0.9
    with pytest.raises(InputError, match="top_p"):
        make_rollout_source(cfg, None, None, tmp_path)


def test_lora_adapters_are_merged_before_a_push() -> None:
    import copy

    from peft import LoraConfig, get_peft_model

    from milepost.backends.hf import load_model

    base, _ = load_model(SHIPPED, torch.device("cpu"), torch.float32)
    original = merged_state_dict(base)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)  # B starts at zero: make the adapter change the weights
    expected = copy.deepcopy(model).merge_and_unload().state_dict()
    state = merged_state_dict(model)
    assert set(state) == set(original)  # the plain model's names: no lora_ tensors, no base_layer infix
    for name, tensor in state.items():
        assert torch.allclose(tensor, expected[name], atol=1e-6), name
        changed = not torch.equal(tensor, original[name])
        assert changed == ("q_proj" in name or "v_proj" in name), name  # exactly the adapted weights moved
    # The adapter is unmerged again afterwards: the trainer keeps training A and B, not the merged weights.
    assert any("lora_A" in n for n, _ in model.named_parameters())
    assert not any(getattr(m, "merged", False) for m in model.modules())


def test_lora_pushes_in_bf16_leave_the_base_weights_bit_identical() -> None:
    """50 pushes of a bf16 LoRA model (the adapter moving between pushes, as in training): the base weights never
    change by a single bit, and every push equals peft's own merge (``merge_and_unload`` of a copy) exactly. The
    old merge_adapter() / unmerge_adapter() round trip rounded the base weights in place at every push."""
    import copy

    from peft import LoraConfig, get_peft_model

    from milepost.backends.hf import load_model

    torch.manual_seed(0)
    base, _ = load_model(SHIPPED, torch.device("cpu"), torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"]))
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    assert frozen and all(t.dtype == torch.bfloat16 for t in frozen.values())
    for push in range(50):
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name or "lora_A" in name:
                    p.add_(0.05 * torch.randn_like(p))  # a training step moved the adapter
        state = merged_state_dict(model)
        if push in (0, 49):
            expected = copy.deepcopy(model).merge_and_unload().state_dict()
            for name, tensor in state.items():
                assert torch.equal(tensor, expected[name]), (push, name)
    changed = {n: int((p.detach() != frozen[n]).sum()) for n, p in model.named_parameters() if n in frozen}
    assert sum(changed.values()) == 0, {n: c for n, c in changed.items() if c}
    # The pushed weights did move where the adapters sit, and only there.
    original = {k.replace(".base_layer.", "."): v for k, v in model.get_base_model().state_dict().items()}
    moved = {name for name, tensor in state.items() if not torch.equal(tensor, original[name])}
    assert moved and all(any(k in name for k in ("q_proj", "v_proj", "up_proj")) for name in moved)


def test_lora_variants_are_refused_before_a_push() -> None:
    from peft import LoraConfig, get_peft_model

    from milepost.backends.hf import load_model

    base, _ = load_model(SHIPPED, torch.device("cpu"), torch.float32)
    model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj"], use_dora=True))
    with pytest.raises(InputError, match="LoRA variant"):
        merged_state_dict(model)


class FakeLogprobsServer:
    """``/v1/completions`` returning the top log-probs of fixed logits, as vLLM does in ``processed_logprobs``
    mode (log_softmax(logits / T)) or in its default ``raw_logprobs`` mode (log_softmax(logits), any T)."""

    def __init__(self, mode: str) -> None:
        self.logits = {"a": 2.0, "b": 0.5, "c": -1.0, "d": -3.0}
        self.mode = mode
        self.temperatures: list[float] = []

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/completions")
        async def completions(request: Request) -> Any:
            body = await request.json()
            t = float(body["temperature"])
            self.temperatures.append(t)
            scale = t if self.mode == "processed" else 1.0
            z = {k: v / scale for k, v in self.logits.items()}
            norm = math.log(sum(math.exp(v) for v in z.values()))
            top = {k: v - norm for k, v in z.items()}
            logprobs = {"tokens": ["a"], "token_logprobs": [top["a"]], "text_offset": [0], "top_logprobs": [top]}
            choice = {"index": 0, "finish_reason": "length", "text": "a", "logprobs": logprobs}
            return {"id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}

        return app


def test_a_server_returning_untempered_log_probs_is_refused(data4: Path, tmp_path: Path) -> None:
    """vLLM's default ``raw_logprobs`` ignores the temperature, and every behaviour log-prob would be off; the
    source probes the server at two temperatures and refuses, naming the setting."""
    from transformers import AutoTokenizer

    from milepost.rollout.source import LogprobsModeProbe, tempering_applied

    tokenizer = AutoTokenizer.from_pretrained(SHIPPED)
    raw = FakeLogprobsServer("raw")
    with BackgroundServer(raw.app()) as server:
        cfg = _cfg(data4, backend=f"openai:m@{server.base_url}")
        with pytest.raises(InputError, match="--logprobs-mode processed_logprobs") as err:
            make_rollout_source(cfg, None, tokenizer, tmp_path)
    assert "\n" not in str(err.value) and sorted(raw.temperatures) == [0.5, 1.0]
    processed = FakeLogprobsServer("processed")
    with BackgroundServer(processed.app()) as server:
        LogprobsModeProbe(server.base_url, "m").check([1, 2, 3])  # passes
        source = make_rollout_source(_cfg(data4, backend=f"openai:m@{server.base_url}"), None, tokenizer, tmp_path)
        source.close()
    # The decision itself: the gap between two tokens scales by 1 / T only when tempered; no gap, no verdict.
    assert tempering_applied({"a": -0.1, "b": -2.5}, {"a": -0.01, "b": -4.9}, 0.5) is True
    assert tempering_applied({"a": -0.1, "b": -2.5}, {"a": -0.1, "b": -2.5}, 0.5) is False
    assert tempering_applied({"a": -0.69, "b": -0.69}, {"a": -0.69, "b": -0.69}, 0.5) is None
    assert tempering_applied({"a": -0.1}, {"b": -0.1}, 0.5) is None
