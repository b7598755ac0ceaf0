"""The openai backend against small local HTTP servers: retries with backoff, bounded concurrency, missing
log-probs, configuration errors and a server that is down."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from milepost.backends.base import (
    BackendError,
    GenerationRequest,
    LogprobsUnavailableError,
    SamplingParams,
)
from milepost.backends.openai_compat import OpenAIBackend
from milepost.serve.runner import BackgroundServer


class Fake:
    """Answers with the given error statuses first, then successes; records requests and concurrency."""

    def __init__(
        self,
        failures: list[int] | None = None,
        logprobs: bool = True,
        delay: float = 0.0,
        error_body: dict[str, Any] | None = None,
    ) -> None:
        self.failures = list(failures or [])
        self.logprobs, self.delay, self.error_body = logprobs, delay, error_body
        self.calls: list[dict[str, Any]] = []
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()

    def app(self) -> FastAPI:
        app = FastAPI()

        async def answer(request: Request, chat: bool) -> Any:
            import asyncio

            body = await request.json()
            with self.lock:
                self.calls.append(body)
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                status = self.failures.pop(0) if self.failures else 200
            try:
                await asyncio.sleep(self.delay)
                if status != 200:
                    error = self.error_body or {"message": f"status {status}", "type": "x", "code": None}
                    return JSONResponse({"error": error}, status_code=status, headers={"retry-after": "0"})
                return _response(body, chat, self.logprobs)
            finally:
                with self.lock:
                    self.in_flight -= 1

        @app.post("/v1/completions")
        async def completions(request: Request) -> Any:
            return await answer(request, chat=False)

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            return await answer(request, chat=True)

        return app


def _response(body: dict[str, Any], chat: bool, logprobs: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "length",
        "prompt_token_ids": [1, 2],
        "token_ids": [7, 8],
    }
    if chat:
        choice["message"] = {"role": "assistant", "content": "ab"}
        choice["logprobs"] = (
            {
                "content": [
                    {"token": "a", "logprob": -0.5, "top_logprobs": []},
                    {"token": "b", "logprob": -1.5, "top_logprobs": []},
                ]
            }
            if logprobs
            else None
        )
    else:
        choice["text"] = "ab"
        choice["logprobs"] = (
            {
                "tokens": ["a", "b"],
                "token_logprobs": [-0.5, -1.5],
                "text_offset": [0, 1],
                "top_logprobs": None,
            }
            if logprobs
            else None
        )
    return {
        "id": "x",
        "object": "chat.completion" if chat else "text_completion",
        "created": 0,
        "model": "m",
        "choices": [choice],
    }


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[BackgroundServer] = []

    def start(fake: Fake) -> str:
        server = BackgroundServer(fake.app()).__enter__()
        servers.append(server)
        return server.base_url

    yield start
    for server in servers:
        server.__exit__()


def backend(url: str, **kw: Any) -> OpenAIBackend:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_max", 0.05)
    return OpenAIBackend("m", url, timeout=10, **kw)


REQ = GenerationRequest(prompt="hi", params=SamplingParams(temperature=0.5, top_k=3, max_new_tokens=2, seed=1))


def test_retries_429_and_5xx_then_succeeds(serve: Any) -> None:
    fake = Fake(failures=[429, 500, 503])
    with backend(serve(fake), max_retries=3) as b:
        done = b.generate([REQ])[0]
    assert len(fake.calls) == 4
    assert done.finish_reason == "length" and done.completion_ids == [7, 8] and done.prompt_ids == [1, 2]
    assert done.logprobs == [-0.5, -1.5] and done.text == "ab"
    sent = fake.calls[-1]
    assert (sent["temperature"], sent["max_tokens"], sent["seed"], sent["top_k"]) == (0.5, 2, 1, 3)
    assert sent["return_token_ids"] is True and sent["logprobs"] == 1


def test_gives_up_after_bounded_retries(serve: Any) -> None:
    fake = Fake(failures=[500] * 10)
    with backend(serve(fake), max_retries=2) as b:
        done = b.generate([REQ])[0]
    assert len(fake.calls) == 3
    assert done.finish_reason == "error" and "HTTP 500" in (done.error or "") and "3 attempts" in (done.error or "")


def test_client_errors_are_not_retried(serve: Any) -> None:
    fake = Fake(failures=[400])
    with backend(serve(fake), max_retries=3) as b:
        done = b.generate([REQ])[0]
    assert len(fake.calls) == 1 and done.finish_reason == "error"


def test_context_length_error_maps_to_context_overflow(serve: Any) -> None:
    body = {
        "message": "This model's maximum context length is 64 tokens",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    fake = Fake(failures=[400], error_body=body)
    with backend(serve(fake)) as b:
        done = b.generate([REQ])[0]
    assert done.finish_reason == "context_overflow" and "maximum context length" in (done.error or "")


def test_auth_and_not_found_raise_backend_errors(serve: Any) -> None:
    for status in (401, 404):
        fake = Fake(failures=[status])
        with backend(serve(fake)) as b, pytest.raises(BackendError, match=f"HTTP {status}"):
            b.generate([REQ])
        assert len(fake.calls) == 1


def test_server_down_is_a_clear_error_after_bounded_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed as soon as the block ends: nothing listens there
    start = time.monotonic()
    with backend(f"http://127.0.0.1:{port}/v1", max_retries=2) as b:
        done = b.generate([REQ, REQ])
        with pytest.raises(BackendError, match="cannot connect"):
            b.models()
    assert time.monotonic() - start < 10
    for c in done:
        assert c.finish_reason == "error" and "cannot connect" in (c.error or "")
        assert "3 attempts" in (c.error or "") and "\n" not in (c.error or "")


def test_missing_logprobs(serve: Any) -> None:
    url = serve(Fake(logprobs=False))
    with backend(url) as b:
        assert b.generate([REQ])[0].logprobs is None
    with (
        backend(url, require_logprobs=True) as b,
        pytest.raises(LogprobsUnavailableError, match="no log-probs"),
    ):
        b.generate([REQ])
    chat = GenerationRequest(messages=[{"role": "user", "content": "x"}])
    with backend(url, require_logprobs=True) as b, pytest.raises(LogprobsUnavailableError):
        b.generate([chat])


def test_chat_endpoint_and_routing(serve: Any) -> None:
    fake = Fake()
    url = serve(fake)
    chat = GenerationRequest(messages=[{"role": "user", "content": "x"}], params=SamplingParams(stop=["\n"]))
    with backend(url) as b:
        done = b.generate([chat, REQ])
    assert [c.logprobs for c in done] == [[-0.5, -1.5], [-0.5, -1.5]]
    # The two requests run concurrently, so the server may see them in either order.
    chat_calls = [c for c in fake.calls if "messages" in c]
    assert len(chat_calls) == 1 and chat_calls[0]["logprobs"] is True and chat_calls[0]["stop"] == ["\n"]
    assert sum("prompt" in c for c in fake.calls) == 1
    with backend(url, use_chat=True) as b:
        b.generate([REQ])
    assert fake.calls[-1]["messages"] == [{"role": "user", "content": "hi"}]
    with backend(url, use_chat=False) as b:
        assert b.generate([chat])[0].finish_reason == "error"


def test_requests_in_flight_are_bounded(serve: Any) -> None:
    fake = Fake(delay=0.1)
    with backend(serve(fake), max_in_flight=3) as b:
        done = b.generate([REQ] * 9)
    assert len(done) == 9 and all(c.finish_reason == "length" for c in done)
    assert fake.peak == 3


def test_api_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "abc123")
    b = OpenAIBackend("m", "http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    assert b.client.api_key == "abc123"
    b.close()
    monkeypatch.delenv("MY_KEY")
    b = OpenAIBackend("m", "http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    assert b.client.api_key == "EMPTY"
    b.close()
