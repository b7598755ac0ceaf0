"""``milepost shop`` against hostile traffic, over a real uvicorn server on a free loopback port: body and action
limits, Host and Origin checks (DNS rebinding, cross-site posts), one episode per client, and the warning when
bound beyond loopback."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

import httpx

from milepost.envs.webshop.html import create_app
from milepost.serve.runner import BackgroundServer
from milepost.types import Task


@pytest.fixture  # each test its own shop: a full shop answers 503 (test_shop_sessions_probe59.py)
def shop(one_item_tasks: list[Task]) -> Iterator[BackgroundServer]:
    app = create_app(one_item_tasks[0], max_body_bytes=8192, max_action_chars=200, max_sessions=3, max_history=2)
    with BackgroundServer(app) as server:
        yield server


@pytest.fixture
def client(shop: BackgroundServer) -> Iterator[Any]:
    """A browser of its own: its own cookie jar, so its own episode."""
    with httpx.Client(base_url=f"http://127.0.0.1:{shop.port}", timeout=30) as c:
        yield c


def _steps(client: Any) -> int:
    return int(client.get("/state.json").json()["steps"])


def test_bodies_and_actions_over_the_limits_are_refused_and_not_stored(client: Any) -> None:
    huge = client.post("/act", content=b"action=" + b"a" * 100_000, headers={"Content-Type": "text/plain"})
    assert huge.status_code == 413 and "8192-byte limit" in huge.json()["error"]
    chunked = client.post("/act", content=iter([b"action=", b"a" * 9000]))  # no Content-Length: counted
    assert chunked.status_code == 413
    long = client.post("/act", data={"action": "click[" + "a" * 300 + "]"})
    assert long.status_code == 400 and "longer than 200" in long.json()["error"]
    assert client.post("/search", data={"query": "b" * 201}).status_code == 400
    state = client.get("/state.json")
    assert state.json()["events"] == [] and len(state.content) < 2000


def test_an_episode_keeps_its_last_events_only(client: Any) -> None:
    for n in range(3):
        client.post("/act", data={"action": f"click[nothing {n}]"})
    state = client.get("/state.json").json()
    assert state["steps"] == 3 and [e["action"] for e in state["events"]] == ["click[nothing 1]", "click[nothing 2]"]


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "evil.example", "127.0.0.1:1", "localhost.evil.example:{port}", "127.0.0.1:{port}x", ""],
)
def test_a_foreign_host_header_is_refused(shop: BackgroundServer, host: str) -> None:
    """DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    head = f"GET /state.json HTTP/1.1\r\nHost: {host.format(port=shop.port)}\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", shop.port), timeout=30) as conn:
        conn.sendall(head.encode())
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.split()[1] == b"400", reply
    assert b"task_id" not in reply


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_the_loopback_names_with_the_port_are_served(shop: BackgroundServer, name: str) -> None:
    with httpx.Client(timeout=30) as c:
        r = c.get(f"http://127.0.0.1:{shop.port}/state.json", headers={"Host": f"{name}:{shop.port}"})
    assert r.status_code == 200 and "task_id" in r.json()


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},  # sandboxed frames, file:// pages
        {"Origin": "http://127.0.0.1:1"},  # another local service's page
        {"Origin": "https://127.0.0.1:{port}"},
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
    ],
)
def test_a_cross_site_post_neither_resets_nor_drives_the_shop(
    shop: BackgroundServer, client: Any, headers: dict[str, str]
) -> None:
    headers = {k: v.format(port=shop.port) for k, v in headers.items()}
    client.post("/act", data={"action": "click[nothing]"})
    for path, form in (("/reset", {}), ("/act", {"action": "click[nothing]"}), ("/search", {"query": "lamp"})):
        refused = client.post(path, data=form, headers=headers)
        assert refused.status_code == 403, (path, refused.text)
    assert _steps(client) == 1


def test_same_origin_posts_and_cross_site_links_are_served(shop: BackgroundServer, client: Any) -> None:
    ok = client.post("/act", data={"action": "click[x]"}, headers={"Origin": f"http://localhost:{shop.port}"})
    assert ok.status_code == 303
    link = client.get("/", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert link.status_code == 200 and "Instruction:" in link.text


def test_each_client_has_its_own_episode(shop: BackgroundServer) -> None:
    base = f"http://127.0.0.1:{shop.port}"
    with httpx.Client(base_url=base, timeout=30) as alice, httpx.Client(base_url=base, timeout=30) as bob:
        alice.post("/act", data={"action": "click[nothing]"})
        alice.post("/act", data={"action": "click[nothing]"})
        assert _steps(bob) == 0
        bob.post("/act", data={"action": "click[nothing]"})
        bob.post("/reset")
        assert (_steps(alice), _steps(bob)) == (2, 0)
        cookie = alice.cookies.get("milepost_shop")
        assert cookie and cookie != bob.cookies.get("milepost_shop")
    with httpx.Client(base_url=base, timeout=30) as stranger:  # no cookie: a fresh episode
        assert _steps(stranger) == 0


def _serve_args(**kw: Any) -> argparse.Namespace:
    defaults = dict(data=None, split="test", task_id=None, index=0, items=1, level=None, seed=0, replay=None,
                    episode=None, host="127.0.0.1", port=0, allow_host=[], difficulty="easy",
                    profile="milepost")  # fmt: skip
    return argparse.Namespace(**{**defaults, **kw})


@pytest.mark.parametrize(("host", "warned"), [("127.0.0.1", False), ("localhost", False), ("0.0.0.0", True)])
def test_serving_beyond_loopback_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: str, warned: bool
) -> None:
    from milepost.cli import shop as shop_cli
    from milepost.serve import runner

    real_bind = runner.bind_socket
    bound: list[str] = []

    def bind_loopback(host: str, port: int) -> socket.socket:  # tests bind loopback only, whatever is asked
        bound.append(host)
        return real_bind("127.0.0.1", port)

    monkeypatch.setattr(runner, "bind_socket", bind_loopback)
    monkeypatch.setattr(runner, "serve_forever", lambda app, sock, **kw: None)
    assert shop_cli.run(_serve_args(host=host)) == 0
    err = capsys.readouterr().err
    assert bound == [host]
    assert ("warning: serving the shop on 0.0.0.0" in err) is warned, err


def test_bad_port_and_replay_lines_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_item_tasks: list[Task]
) -> None:
    from milepost.cli.main import main

    assert main(["shop", "--port", "70000"]) == 2
    assert main(["shop", "--port", "-1"]) == 2
    replay = tmp_path / "episodes.jsonl"
    for text in ("{not json", "[1, 2]", '{"task_id": "webshop-3-5-0-0", "turns": 5}', '"a string"'):
        replay.write_text("\n" + text + "\n")
        assert main(["shop", "--replay", str(replay)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 6 and all(line.startswith("milepost: error: ") for line in lines), lines
    assert "70000" in lines[0] and "episodes.jsonl:2" in lines[2], lines
