"""Issue 59, item 6: ``milepost shop`` over a real uvicorn server on a free loopback port. Requests without a
cookie never evict an episode in play (when every episode is in play a new client gets a one-line 503), an idle
episode makes room, every answer forbids framing, and a trickled body is cut off within the read timeout."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

import httpx

from milepost.envs.webshop.html import create_app
from milepost.serve.runner import BackgroundServer
from milepost.types import Task

MAX_SESSIONS = 3
TIMEOUT_S = 1.0


@pytest.fixture
def shop(one_item_tasks: list[Task]) -> Iterator[BackgroundServer]:
    app = create_app(one_item_tasks[0], max_sessions=MAX_SESSIONS, read_timeout_s=TIMEOUT_S)
    with BackgroundServer(app, header_timeout_s=TIMEOUT_S) as server:
        yield server


def _client(shop: BackgroundServer) -> httpx.Client:
    return httpx.Client(base_url=f"http://127.0.0.1:{shop.port}", timeout=30)


def _steps(client: Any) -> int:
    return int(client.get("/state.json").json()["steps"])


def test_requests_without_a_cookie_never_evict_an_episode_in_play(shop: BackgroundServer) -> None:
    with _client(shop) as user:
        user.post("/act", data={"action": "click[nothing]"})
        user.post("/act", data={"action": "click[nothing]"})
        for _ in range(64):  # the probe's attack: cookie-less requests, each a new client
            assert httpx.get(f"http://127.0.0.1:{shop.port}/", timeout=30).status_code == 200
        assert _steps(user) == 2


def test_when_every_episode_is_in_play_a_new_client_gets_a_503(shop: BackgroundServer) -> None:
    users = [_client(shop) for _ in range(MAX_SESSIONS)]
    try:
        for user in users:
            assert user.post("/act", data={"action": "click[nothing]"}).status_code == 303
        late = httpx.post(f"http://127.0.0.1:{shop.port}/act", data={"action": "click[nothing]"}, timeout=30)
        assert late.status_code == 503 and late.headers["retry-after"] == "60"
        assert late.json() == {"error": f"the shop is full: all {MAX_SESSIONS} episodes are in play; retry later"}
        assert [_steps(user) for user in users] == [1] * MAX_SESSIONS
    finally:
        for user in users:
            user.close()


def test_an_idle_episode_makes_room(one_item_tasks: list[Task]) -> None:
    app = create_app(one_item_tasks[0], max_sessions=1, session_idle_s=0.5)
    with BackgroundServer(app) as server, _client(server) as user, _client(server) as newcomer:
        user.post("/act", data={"action": "click[nothing]"})
        assert newcomer.get("/state.json").status_code == 503
        old = user.cookies["milepost_shop"]
        time.sleep(0.6)
        assert _steps(newcomer) == 0  # the idle episode made room
        assert list(app.state.sessions) == [newcomer.cookies["milepost_shop"]] and old not in app.state.sessions


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/state.json"), ("POST", "/act"), ("POST", "/reset"), ("GET", "/nowhere")],
)
def test_every_answer_forbids_framing(shop: BackgroundServer, method: str, path: str) -> None:
    with _client(shop) as client:
        r = client.request(method, path, data={"action": "click[nothing]"} if method == "POST" else None)
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["content-security-policy"] == "frame-ancestors 'none'"


def test_a_refused_request_forbids_framing_too(shop: BackgroundServer) -> None:
    r = httpx.get(f"http://127.0.0.1:{shop.port}/", headers={"Host": "evil.example"}, timeout=30)
    assert r.status_code == 400
    assert r.headers["x-frame-options"] == "DENY"


def test_a_trickled_body_is_a_408_and_closed_within_the_timeout(shop: BackgroundServer) -> None:
    body = b"action=click%5Bnothing%5D"
    head = (
        b"POST /act HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: %d\r\n\r\n" % (shop.port, len(body))
    )
    start, answer = time.monotonic(), b""
    with socket.create_connection(("127.0.0.1", shop.port), timeout=0.2) as sock:
        sock.sendall(head)
        for i in range(50):  # a byte every 0.2 s, for 10 s at most
            try:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
                continue
            except TimeoutError:
                pass
            try:
                sock.sendall(body[i % len(body) : i % len(body) + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
    closed_after = time.monotonic() - start
    assert closed_after < TIMEOUT_S + 1.5, f"still open after {closed_after:.1f} s"
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"request body not received within 1 s" in answer


def test_a_client_leaving_mid_body_leaves_no_traceback(
    shop: BackgroundServer, caplog: pytest.LogCaptureFixture
) -> None:
    server_log = logging.getLogger("uvicorn.error")  # where uvicorn logs an exception escaping the app
    server_log.addHandler(caplog.handler)
    try:
        head = b"POST /act HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 40\r\n\r\naction=cl" % shop.port
        with socket.create_connection(("127.0.0.1", shop.port)) as sock:
            sock.sendall(head)
            time.sleep(0.3)  # the app is reading the body when the client leaves
        time.sleep(0.3)
        with _client(shop) as client:  # the server has seen the hang-up once it answers the next request
            assert client.post("/act", data={"action": "click[nothing]"}).status_code == 303
    finally:
        server_log.removeHandler(caplog.handler)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text


@pytest.mark.parametrize("value", ["0", "-2", "nan"])
def test_a_read_timeout_must_be_positive(capsys: pytest.CaptureFixture[str], value: str) -> None:
    from milepost.cli.main import main

    assert main(["shop", "--port", "0", "--read-timeout", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("milepost: error: --read-timeout must be positive") and "\n" not in err


def test_the_clis_default_read_timeout_is_the_servers() -> None:
    from milepost.cli import serve as serve_cli
    from milepost.cli import shop as shop_cli
    from milepost.serve.limits import READ_TIMEOUT_S

    assert shop_cli.READ_TIMEOUT_S == serve_cli.READ_TIMEOUT_S == READ_TIMEOUT_S
