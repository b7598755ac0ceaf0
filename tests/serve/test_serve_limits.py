"""``milepost serve`` under bad and heavy traffic, over real HTTP: every malformed body is an OpenAI-shaped 400,
a full queue a 429, a missing ``max_tokens`` the server's default, a departed client's request is not computed,
and the token guards exactly the routes the module docstring names."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from milepost.backends.base import GenerationRequest
from milepost.backends.hf import HFBackend
from milepost.serve.app import create_app
from milepost.serve.runner import BackgroundServer
from milepost.types import Completion

KEY = "limits-key-456"
AUTH = {"Authorization": f"Bearer {KEY}"}
DEFAULT_MAX = 5


class GatedBackend(HFBackend):
    """The tiny model, with a gate the test can close to hold the worker inside ``generate``, and a record of the
    prompts each ``generate`` call computed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate, self.entered = threading.Event(), threading.Event()
        self.gate.set()
        self.computed: list[list[int]] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.computed += [list(r.prompt_ids or []) for r in requests]
        self.entered.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return super().generate(requests)


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> GatedBackend:
    return GatedBackend(tiny_model_dir, max_context=256)


@pytest.fixture(scope="module")
def server(backend: GatedBackend) -> Iterator[BackgroundServer]:
    app = create_app(
        backend, api_key=KEY, max_tokens_limit=64, max_queue=1, default_max_tokens=DEFAULT_MAX, model_name="tiny"
    )
    with BackgroundServer(app) as running:
        yield running


@pytest.fixture
def gated(backend: GatedBackend) -> Iterator[GatedBackend]:
    backend.computed.clear()
    backend.entered.clear()
    yield backend
    backend.gate.set()


def _post(server: BackgroundServer, path: str, content: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}{path}", content=content, headers=AUTH if headers is None else headers, timeout=60
    )


def _is_openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return dict(error)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/completions", b"[" * 100_000 + b"]" * 100_000, "deeper"),
        ("/completions", b'{"prompt": "x", "extra": ' + b"[" * 40 + b"]" * 40 + b"}", "deeper"),
        (
            "/chat/completions",
            b'{"messages": [{"role": "user", "content": [' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"]}]}",
            "deeper",
        ),
        ("/completions", b'{"prompt": "\xff\xfe"}', "UTF-8"),
        ("/completions", '{"prompt": "x"}'.encode("utf-16"), "UTF-8"),
        ("/completions", b"[1, 2]", "JSON object, not an array"),
        ("/completions", b'"prompt"', "JSON object, not a string"),
        ("/completions", b"null", "JSON object, not null"),
        ("/completions", b"", "JSON object, not null"),
        ("/completions", b'{"prompt": "x", "temperature": NaN}', "NaN"),
        ("/completions", b'{"prompt": "x", "max_tokens": ' + b"9" * 5000 + b"}", "not valid JSON"),
        ("/completions", b'{"prompt": 5}', "prompt"),
        ("/completions", b'{"prompt": "x", "max_tokens": "many"}', "max_tokens"),
        ("/completions", b'{"prompt": "x", "stop": 3}', "stop"),
        ("/completions", b'{"prompt": "x", "seed": 1267650600228229401496703205376}', "seed"),
        ("/completions", b'{"prompt": [-1]}', "vocabulary"),
        ("/chat/completions", b'{"messages": "hi"}', "messages"),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": 5}]}', "content"),
        ("/chat/completions", b'{"messages": [{"role": "user"}]}', "content"),
    ],
)
def test_every_bad_body_is_an_openai_shaped_400(server: BackgroundServer, path: str, body: bytes, says: str) -> None:
    error = _is_openai_error(_post(server, path, body), 400)
    assert error["type"] == "invalid_request_error" and says in error["message"]


def test_a_full_queue_is_a_429_and_the_queued_requests_still_finish(
    server: BackgroundServer, gated: GatedBackend
) -> None:
    gated.gate.clear()
    answers: dict[str, httpx.Response] = {}

    def send(tag: str) -> None:
        answers[tag] = _post(server, "/completions", json.dumps({"prompt": tag, "max_tokens": 2}).encode())

    first = threading.Thread(target=send, args=("first",))
    first.start()
    _wait_for(gated.entered.is_set, "the worker to take the first request")
    second = threading.Thread(target=send, args=("second",))
    second.start()
    _wait_for(lambda: batcher(server).waiting() == 1, "the second request to wait in the queue")
    full = _post(server, "/completions", b'{"prompt": "third", "max_tokens": 2}')
    error = _is_openai_error(full, 429)
    assert error["code"] == "queue_full" and error["type"] == "rate_limit_error" and full.headers["retry-after"]
    gated.gate.set()
    first.join(60)
    second.join(60)
    assert answers["first"].status_code == 200 and answers["second"].status_code == 200
    assert len(gated.computed) == 2  # the refused request was never computed


def batcher(server: BackgroundServer) -> Any:
    return server._server.config.app.state.batcher  # the worker, to know when a request waits


def _send_and_hang_up(server: BackgroundServer, body: bytes, sent: int | None = None) -> None:
    """POST ``body`` (only its first ``sent`` bytes, when given) and close the connection without reading."""
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port)) as hung_up:
        hung_up.sendall(head.encode() + body[:sent])
        if sent is None:
            _wait_for(lambda: batcher(server).waiting() == 1, "the request to wait in the queue")


def test_a_request_whose_client_hung_up_frees_its_slot_at_once_and_is_not_computed(
    server: BackgroundServer, gated: GatedBackend, caplog: pytest.LogCaptureFixture
) -> None:
    gated.gate.clear()
    first = threading.Thread(target=_post, args=(server, "/completions", b'{"prompt": "first", "max_tokens": 2}'))
    first.start()
    _wait_for(gated.entered.is_set, "the worker to take the first request")
    with caplog.at_level(logging.INFO, logger="milepost.serve.app"):
        _send_and_hang_up(server, b'{"prompt": "gone away", "max_tokens": 2}')
        # The worker is still held: the slot (max_queue=1) is free before the worker could reach the request.
        _wait_for(lambda: batcher(server).waiting() == 0, "the departed request to leave the queue")
        answers: list[httpx.Response] = []
        second = threading.Thread(
            target=lambda: answers.append(_post(server, "/completions", b'{"prompt": "after", "max_tokens": 2}'))
        )
        second.start()
        _wait_for(lambda: batcher(server).waiting() == 1 or bool(answers), "the next request to be queued")
        gated.gate.set()
        first.join(60)
        second.join(60)
    assert answers[0].status_code == 200, answers[0].text  # not a 429: the departed request held no slot
    texts = [gated.tokenizer.decode(ids) for ids in gated.computed]
    assert texts == ["first", "after"], texts
    lines = [r.getMessage() for r in caplog.records if r.name == "milepost.serve.app"]
    assert len(lines) == 1 and "closed its /v1/completions request" in lines[0], lines


def test_a_client_leaving_mid_body_is_one_log_line_not_a_traceback(
    server: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    server_log = logging.getLogger("uvicorn.error")  # where uvicorn logs an exception escaping the app
    server_log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="milepost.serve.app"):
            _send_and_hang_up(server, b'{"prompt": "half a body", "max_tokens": 2}', sent=10)
            _wait_for(lambda: any(r.name == "milepost.serve.app" for r in caplog.records), "the log line")
            assert _post(server, "/completions", b'{"prompt": "next", "max_tokens": 2}').status_code == 200
    finally:
        server_log.removeHandler(caplog.handler)
    assert not [r for r in caplog.records if r.exc_info or r.name.startswith("uvicorn")], caplog.text
    assert [r.getMessage().split()[-4:] for r in caplog.records] == [["request", "before", "the", "answer"]]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("top_k", "9223372036854775808"),  # 2**63: "Overflow when unpacking long long" in the decoding loop
        ("top_k", "-2"),
        ("temperature", "1e309"),  # parses as infinity
        ("temperature", "1e-40"),  # a float32 denormal: logits / T overflow
        ("temperature", "1000"),
        ("top_p", "0"),
        ("top_p", "1e-400"),  # parses as 0.0
        ("max_tokens", "9223372036854775808"),
        ("max_tokens", "0"),
        ("seed", "-9223372036854775809"),
        ("logprobs", "21"),
    ],
)
def test_every_sampling_field_is_range_checked_naming_it(server: BackgroundServer, field: str, value: str) -> None:
    default = "" if field == "max_tokens" else '"max_tokens": 2, '
    body = f'{{"prompt": "x", {default}"{field}": {value}}}'  # raw JSON text: 1e309 is no Python float
    error = _is_openai_error(_post(server, "/completions", body.encode()), 400)
    assert error["message"].startswith(field) or error["param"] == field, error
    assert "\n" not in error["message"]


def test_missing_max_tokens_gets_the_server_default(server: BackgroundServer) -> None:
    chat = _post(server, "/chat/completions", b'{"messages": [{"role": "user", "content": "go"}], "temperature": 0}')
    assert chat.status_code == 200, chat.text
    assert chat.json()["usage"]["completion_tokens"] == DEFAULT_MAX  # not the 64-token limit
    assert chat.json()["choices"][0]["finish_reason"] == "length"
    plain = _post(server, "/completions", b'{"prompt": "Solve", "temperature": 0}')
    assert plain.status_code == 200 and plain.json()["usage"]["completion_tokens"] <= DEFAULT_MAX


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Bearer {KEY[:-1]}", f"Bearer {KEY}x", f"Basic {KEY}", "Bearer ", "Bearer", KEY],
    ids=["none", "wrong", "prefix", "longer", "basic-scheme", "empty-bearer", "bare-scheme", "no-scheme"],
)
def test_the_token_guards_every_v1_route(server: BackgroundServer, authorization: str | None) -> None:
    # Raw HTTP: httpx refuses to send a header value with trailing space ("Bearer ").
    auth = "" if authorization is None else f"Authorization: {authorization}\r\n"
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/completions"), ("POST", "/v1/chat/completions")):
        body = b"" if method == "GET" else b'{"prompt": "x"}'
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
            conn.sendall(head.encode() + body)
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
        status_line, _, rest = reply.partition(b"\r\n")
        assert status_line.split()[1] == b"401", reply
        assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"]["code"] == "invalid_api_key"


def test_the_right_key_passes_health_is_open_and_docs_are_off(server: BackgroundServer) -> None:
    root = f"http://127.0.0.1:{server.port}"
    assert httpx.get(f"{server.base_url}/models", headers=AUTH, timeout=30).status_code == 200
    assert httpx.get(f"{root}/health", timeout=30).json() == {"status": "ok"}
    for path in ("/docs", "/redoc", "/openapi.json"):
        for headers in ({}, AUTH):
            _is_openai_error(httpx.get(f"{root}{path}", headers=headers, timeout=30), 404)


def test_without_a_key_docs_are_served(backend: GatedBackend) -> None:
    with BackgroundServer(create_app(backend)) as open_server:
        root = f"http://127.0.0.1:{open_server.port}"
        assert httpx.get(f"{root}/openapi.json", timeout=30).json()["info"]["title"] == "milepost serve"
        assert httpx.get(f"{root}/v1/models", timeout=30).status_code == 200


@pytest.mark.parametrize("setting", ["max_queue", "default_max_tokens"])
def test_limits_must_be_positive(backend: GatedBackend, setting: str) -> None:
    with pytest.raises(ValueError, match=setting):
        create_app(backend, **{setting: 0})
