"""Issue 59, item 7: ``milepost serve`` over a real uvicorn server on a free loopback port. A client that trickles
its body or its headers is cut off within the read timeout; ``"2"``, booleans and floats are not coerced into
integers; a lone surrogate is a one-line 400 naming the field; an empty ``--api-key-env`` variable says so."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from milepost.backends.hf import HFBackend
from milepost.cli.main import main
from milepost.serve.app import create_app
from milepost.serve.runner import BackgroundServer

TIMEOUT_S = 1.0  # the read timeout the test server runs with


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[BackgroundServer]:
    backend = HFBackend(tiny_model_dir, max_context=256)
    app = create_app(backend, max_tokens_limit=64, model_name="tiny", read_timeout_s=TIMEOUT_S)
    with BackgroundServer(app, header_timeout_s=TIMEOUT_S) as running:
        yield running


def _trickle(server: BackgroundServer, head: bytes, drip: bytes, every_s: float, limit_s: float) -> tuple[bytes, float]:
    """Send ``head`` then one byte of ``drip`` every ``every_s`` seconds until the server closes the connection
    (or ``limit_s`` passes); what the server answered, and after how many seconds it closed."""
    start = time.monotonic()
    answer = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=every_s) as sock:
        sock.sendall(head)
        for i in range(int(limit_s / every_s)):
            try:
                chunk = sock.recv(65536)
                if not chunk:  # closed by the server
                    return answer, time.monotonic() - start
                answer += chunk
                continue
            except TimeoutError:
                pass
            try:
                sock.sendall(drip[i % len(drip) : i % len(drip) + 1])
            except (BrokenPipeError, ConnectionResetError):
                return answer, time.monotonic() - start
    return answer, float("inf")


def test_a_trickled_body_is_a_408_and_the_connection_closes_within_the_timeout(server: BackgroundServer) -> None:
    body = json.dumps({"prompt": "hello", "max_tokens": 2}).encode()
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    answer, closed_after = _trickle(server, head, body, every_s=0.2, limit_s=10 * TIMEOUT_S)
    assert closed_after < TIMEOUT_S + 1.5, f"still open after {closed_after:.1f} s"
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    error = json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] == f"request body not received within {TIMEOUT_S:g} s; the connection is closed"


def test_trickled_headers_are_cut_off_within_the_timeout(server: BackgroundServer) -> None:
    head = b"GET /health HTTP/1.1\r\n"
    _, closed_after = _trickle(server, head, b"X-Slow: aaaaaaaaaaaaaaaaaaaa", every_s=0.2, limit_s=10 * TIMEOUT_S)
    assert closed_after < TIMEOUT_S + 1.5, f"still open after {closed_after:.1f} s"


def test_a_prompt_body_sent_in_time_is_answered_and_the_connection_kept(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        for _ in range(2):  # the second request reuses the connection: the header deadline was met
            r = client.post("/completions", json={"prompt": "hi", "max_tokens": 2, "temperature": 0})
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] <= 2


def test_a_body_over_the_limit_is_a_413_without_waiting_for_it(tiny_model_dir: Path) -> None:
    app = create_app(HFBackend(tiny_model_dir, max_context=256), max_request_bytes=100, read_timeout_s=30)
    with BackgroundServer(app) as running:
        chunks = iter([b'{"prompt": "', b"a" * 200, b'"}'])  # chunked: no declared length
        r = httpx.post(f"{running.base_url}/completions", content=chunks, timeout=30)
    assert r.status_code == 413 and r.json()["error"]["message"] == "request body over the 100-byte limit"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "hi", "max_tokens": "2"}, "max_tokens"),
        ({"prompt": "hi", "max_tokens": 2.0}, "max_tokens"),
        ({"prompt": "hi", "max_tokens": True}, "max_tokens"),
        ({"prompt": [True, False]}, "prompt"),
        ({"prompt": [1.0, 2.0]}, "prompt"),
        ({"prompt": "hi", "temperature": "0"}, "temperature"),
        ({"prompt": "hi", "temperature": True}, "temperature"),
        ({"prompt": "hi", "seed": "7"}, "seed"),
        ({"prompt": "hi", "stream": "false"}, "stream"),
        ({"prompt": "hi", "n": 1.0}, "n"),
    ],
)
def test_values_of_the_wrong_json_type_are_400s_not_coerced(
    server: BackgroundServer, body: dict[str, object], param: str
) -> None:
    r = httpx.post(f"{server.base_url}/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"].startswith(param) and "\n" not in error["message"]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/completions", {"prompt": [True, 1]},
         "prompt: must be a string, a list of token ids (integers) or a list of one string"),
        ("/chat/completions", {"messages": [{"role": "user", "content": 5}]},
         "messages.0.content: must be a string or a list of content parts (objects)"),
    ],
)  # fmt: skip
def test_a_field_of_several_types_names_them_all(
    server: BackgroundServer, path: str, body: dict[str, object], message: str
) -> None:
    r = httpx.post(f"{server.base_url}{path}", json=body, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["message"] == message


def test_a_json_integer_still_fills_a_float_field(server: BackgroundServer) -> None:
    r = httpx.post(
        f"{server.base_url}/completions", json={"prompt": "hi", "max_tokens": 1, "temperature": 1}, timeout=60
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/completions", b'{"prompt": "a\\ud800b", "max_tokens": 2}', "prompt"),
        ("/completions", b'{"prompt": ["\\udfff"], "max_tokens": 2}', "prompt.0"),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "x\\udc00"}]}', "messages.0.content"),
    ],
)
def test_a_lone_surrogate_is_a_one_line_400_naming_the_field(
    server: BackgroundServer, path: str, body: bytes, param: str
) -> None:
    r = httpx.post(f"{server.base_url}{path}", content=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["message"] == f"{param}: a lone UTF-16 surrogate (\\uD800-\\uDFFF) is not text"
    assert error["param"] == param


@pytest.mark.parametrize(("value", "says"), [(None, "is not set"), ("", "is empty"), ("  ", "is empty")])
def test_an_unset_or_empty_api_key_variable_is_named_as_such(
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str | None,
    says: str,
) -> None:
    if value is None:
        monkeypatch.delenv("MILEPOST_PROBE59_KEY", raising=False)
    else:
        monkeypatch.setenv("MILEPOST_PROBE59_KEY", value)
    assert main(["serve", str(tiny_model_dir), "--api-key-env", "MILEPOST_PROBE59_KEY"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("milepost: error: --api-key-env MILEPOST_PROBE59_KEY: that environment variable " + says)
    assert "\n" not in err


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_a_read_timeout_must_be_positive(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["serve", str(tiny_model_dir), "--read-timeout", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("milepost: error: --read-timeout must be positive") and "\n" not in err
