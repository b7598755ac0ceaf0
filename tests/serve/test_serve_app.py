"""``milepost serve``: a real uvicorn server on a free loopback port, queried with the official openai client
and through the openai backend, which must reproduce the in-process model's tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend
from milepost.backends.openai_compat import OpenAIBackend
from milepost.serve.app import create_app
from milepost.serve.runner import BackgroundServer

KEY = "test-key-123"
NAME = "tiny"


@pytest.fixture(scope="module")
def local(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(tiny_model_dir, max_context=256)


@pytest.fixture(scope="module")
def server(local: HFBackend) -> Iterator[BackgroundServer]:
    app = create_app(local, api_key=KEY, max_tokens_limit=64, max_request_bytes=4096, model_name=NAME)
    with BackgroundServer(app) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as c:
        yield c


@pytest.fixture(scope="module")
def remote(server: BackgroundServer) -> Iterator[OpenAIBackend]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MILEPOST_TEST_KEY", KEY)
        with OpenAIBackend(NAME, server.base_url, api_key_env="MILEPOST_TEST_KEY", max_retries=0) as backend:
            yield backend


def test_binds_loopback_on_a_free_port(server: BackgroundServer) -> None:
    assert server.host == "127.0.0.1" and server.port > 0
    assert httpx.get(f"http://127.0.0.1:{server.port}/health").json() == {"status": "ok"}


def test_models_lists_the_served_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == [NAME]


def test_completions_with_logprobs_and_token_ids(client: openai.OpenAI, local: HFBackend) -> None:
    r = client.completions.create(model=NAME, prompt="Solve this", max_tokens=6, temperature=0, logprobs=1)
    choice = r.choices[0]
    extra = choice.model_extra or {}
    assert choice.finish_reason == "length" and r.usage is not None and r.usage.completion_tokens == 6
    assert extra["prompt_token_ids"] == local.tokenizer("Solve this")["input_ids"]
    assert len(extra["token_ids"]) == 6 and choice.text == local.decode(extra["token_ids"])
    assert choice.logprobs is not None and len(choice.logprobs.token_logprobs or []) == 6
    assert choice.logprobs.tokens == [local.tokenizer.decode([i]) for i in extra["token_ids"]]


def test_token_id_prompts(client: openai.OpenAI, local: HFBackend) -> None:
    ids = local.tokenizer("value(1, r1c1)")["input_ids"]
    a = client.completions.create(model=NAME, prompt=ids, max_tokens=4, temperature=0)
    b = client.completions.create(model=NAME, prompt="value(1, r1c1)", max_tokens=4, temperature=0)
    assert (a.choices[0].model_extra or {})["token_ids"] == (b.choices[0].model_extra or {})["token_ids"]


def test_chat_completions(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=NAME,
        messages=[{"role": "user", "content": "go"}],
        max_tokens=5,
        temperature=0.7,
        seed=3,
        logprobs=True,
        top_logprobs=1,
    )
    choice = r.choices[0]
    assert choice.message.role == "assistant" and choice.message.content is not None
    assert choice.logprobs is not None and len(choice.logprobs.content or []) == 5
    assert len((choice.model_extra or {})["token_ids"]) == 5


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.0, max_new_tokens=12),
        SamplingParams(temperature=1.0, top_p=0.9, top_k=30, max_new_tokens=12, seed=7),
    ],
    ids=["greedy", "seeded"],
)
def test_http_generation_equals_in_process(remote: OpenAIBackend, local: HFBackend, params: SamplingParams) -> None:
    for req in (
        GenerationRequest(prompt="Solve this 4x4 Sudoku", params=params),
        GenerationRequest(messages=[{"role": "user", "content": "value(2, r1c1)"}], params=params),
    ):
        over_http = remote.generate([req])[0]
        in_process = local.generate([req])[0]
        assert over_http.completion_ids == in_process.completion_ids
        assert over_http.prompt_ids == in_process.prompt_ids
        assert over_http.text == in_process.text
        assert over_http.logprobs == pytest.approx(in_process.logprobs, abs=1e-6)


def test_auth_is_required(server: BackgroundServer) -> None:
    with (
        openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0) as c,
        pytest.raises(openai.AuthenticationError),
    ):
        c.models.list()
    r = httpx.post(f"{server.base_url}/completions", json={"prompt": "x"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    refused = {
        "empty key": "Bearer",  # h11 will not send the trailing space of "Bearer "
        "prefix of the key": f"Bearer {KEY[:-1]}",
        "first character": f"Bearer {KEY[0]}",
        "key plus a suffix": f"Bearer {KEY}4",
        "wrong scheme": f"Basic {KEY}",
        "no scheme": KEY,
        "empty header": "",
    }
    for case, header in refused.items():
        r = httpx.get(f"{server.base_url}/models", headers={"Authorization": header})
        assert r.status_code == 401, case
        assert r.json()["error"]["code"] == "invalid_api_key", case
    for header in (f"Bearer {KEY}", f"bearer {KEY}"):  # the scheme is case-insensitive (RFC 7235)
        assert httpx.get(f"{server.base_url}/models", headers={"Authorization": header}).status_code == 200


def test_limits_and_bad_params(client: openai.OpenAI, server: BackgroundServer) -> None:
    with pytest.raises(openai.BadRequestError, match="limit of 64"):
        client.completions.create(model=NAME, prompt="x", max_tokens=65)
    with pytest.raises(openai.BadRequestError, match="top_p"):
        client.completions.create(model=NAME, prompt="x", top_p=1.5)
    with pytest.raises(openai.BadRequestError, match="n=1"):
        client.completions.create(model=NAME, prompt="x", n=2)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="other", prompt="x")
    headers = {"Authorization": f"Bearer {KEY}"}
    big = httpx.post(f"{server.base_url}/completions", headers=headers, json={"prompt": "x" * 5000})
    assert big.status_code == 413 and "limit" in big.json()["error"]["message"]
    bad = httpx.post(f"{server.base_url}/completions", headers=headers, content=b"{not json")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    bad_ids = httpx.post(f"{server.base_url}/completions", headers=headers, json={"prompt": [10**7]})
    assert bad_ids.status_code == 400 and "vocabulary" in bad_ids.json()["error"]["message"]


def test_context_overflow_is_a_400_and_a_context_overflow_completion(
    client: openai.OpenAI, remote: OpenAIBackend
) -> None:
    prompt = "value(1, r1c1); " * 60  # well over the 256-token window, under the 4096-byte body limit
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=NAME, prompt=prompt, max_tokens=4)
    assert info.value.code == "context_length_exceeded"
    done = remote.generate([GenerationRequest(prompt=prompt, params=SamplingParams(max_new_tokens=4))])[0]
    assert done.finish_reason == "context_overflow" and done.completion_ids == []


def test_concurrent_requests_are_batched_and_all_answered(remote: OpenAIBackend, local: HFBackend) -> None:
    prompts = [f"value({d}, r1c{d})" for d in range(1, 9)]
    params = SamplingParams(temperature=0.0, max_new_tokens=6)
    over_http = remote.generate([GenerationRequest(prompt=p, params=params) for p in prompts])
    in_process = local.generate([GenerationRequest(prompt=p, params=params) for p in prompts])
    assert [c.completion_ids for c in over_http] == [c.completion_ids for c in in_process]
