"""The shop as a web page: the same steps, rewards and subgoal events as the text environment, through HTML forms
(FastAPI's test client) and through a real headless browser (Debian's chromium + chromedriver, via Selenium)."""

from __future__ import annotations

import html
import importlib
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from milepost.envs.webshop import WebShopEnv
from milepost.envs.webshop.moves import best_action
from milepost.types import Task

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from milepost.envs.webshop.html import create_app, element_id


def text_episode(task: Task) -> tuple[list[str], dict[str, Any]]:
    """The oracle's actions on the text environment and what the episode ended with."""
    env = WebShopEnv(size=task.size)
    env.reset(options={"task": task})
    actions, rewards, events = [], 0.0, []
    while True:
        action = best_action(env.rules)  # type: ignore[arg-type]
        assert action is not None
        _, reward, term, trunc, info = env.step(action.text())
        actions.append(action.text())
        rewards += reward
        events.append(list(info["new_subgoals"]))
        if term or trunc:
            break
    products = env.state.order.shop.catalogue.products
    purchased = [products[p].pid for p, _ in env.state.purchased or ()]
    return actions, {"reward": rewards, "events": events, "purchased": purchased, "solved": info["solved"]}


def check_same(snapshot: dict[str, Any], expected: dict[str, Any]) -> None:
    assert snapshot["solved"] == expected["solved"] is True
    assert snapshot["purchased"] == expected["purchased"]
    assert snapshot["total_reward"] == pytest.approx(expected["reward"])
    assert [e["new_subgoals"] for e in snapshot["events"]] == expected["events"]
    assert all(e["error"] is None for e in snapshot["events"])


def test_html_forms_replay_the_oracle_with_the_same_rewards_and_events(two_item_tasks: list[Task]) -> None:
    task = two_item_tasks[0]
    actions, expected = text_episode(task)
    client = TestClient(create_app(task))
    page = client.get("/").text
    assert 'id="search-input"' in page and "Instruction:" in page
    for action in actions:
        if action.startswith("search["):
            response = client.post("/search", data={"query": action[7:-1]})
        else:
            value = action[6:-1]
            assert f'id="{element_id(value)}"' in client.get("/").text  # the page shows a button for it
            response = client.post("/act", data={"action": action})
        assert response.status_code == 200  # followed the redirect back to the page
    check_same(client.get("/state.json").json(), expected)
    assert "Thank you for shopping" in client.get("/").text


def test_replay_steps_through_a_recorded_episode(one_item_tasks: list[Task]) -> None:
    task = one_item_tasks[0]
    actions, expected = text_episode(task)
    texts = [f"REASON: go. ACTION: {a}" for a in actions]
    client = TestClient(create_app(task, replay=texts))
    assert "Replay next step" in client.get("/").text
    for _ in texts:
        client.post("/replay/next")
    check_same(client.get("/state.json").json(), expected)
    client.post("/reset")
    assert client.get("/state.json").json()["steps"] == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_headless_browser_clicks_through_the_oracle_episode(two_item_tasks: list[Task], tmp_path: Path) -> None:
    """Skipped where Selenium or Debian's chromium / chromedriver are missing (``apt-get install chromium
    chromium-driver``; the web extra); nothing is downloaded at test time. In CI (``MILEPOST_CI=1``), which
    installs them (``.ci/run``, ``make test``), a missing piece fails the test instead."""
    ci = bool(os.environ.get("MILEPOST_CI"))
    webdriver = importlib.import_module("selenium.webdriver") if ci else pytest.importorskip("selenium.webdriver")
    uvicorn = importlib.import_module("uvicorn") if ci else pytest.importorskip("uvicorn")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        (pytest.fail if ci else pytest.skip)("chromium and chromedriver are not installed")
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    task = two_item_tasks[1]
    actions, expected = text_episode(task)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(task), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,900",
    ):
        options.add_argument(flag)
    driver = None
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        base = f"http://127.0.0.1:{port}"
        driver.get(base + "/")
        artefacts = Path(os.environ.get("MILEPOST_TEST_ARTIFACTS", tmp_path))
        artefacts.mkdir(parents=True, exist_ok=True)
        shot = None
        for action in actions:
            page = driver.find_element(By.TAG_NAME, "html")
            if action.startswith("search["):
                box = driver.find_element(By.ID, "search-input")
                box.clear()
                box.send_keys(action[7:-1])
                driver.find_element(By.ID, "search-button").click()
            else:
                driver.find_element(By.ID, element_id(action[6:-1])).click()
            # The next page has loaded. While the old page is being torn down, chromedriver can answer the
            # staleness probe with an inspector error ("Node with given id does not belong to the document")
            # instead of a stale-element error: that probe is retried, and a browser that really fails still
            # times out here.
            WebDriverWait(driver, 10, ignored_exceptions=(WebDriverException,)).until(
                expected_conditions.staleness_of(page)
            )
            if shot is None and driver.find_elements(By.ID, "product-title"):
                shot = artefacts / "webshop_product_page.png"
                driver.save_screenshot(str(shot))
        assert driver.find_element(By.ID, "done").text.startswith("Thank you")
        driver.get(base + "/state.json")
        import json

        snapshot = json.loads(driver.find_element(By.TAG_NAME, "body").text)
        check_same(snapshot, expected)
        assert shot is not None and shot.stat().st_size > 1000
    finally:
        if driver is not None:
            driver.quit()
        server.should_exit = True
        thread.join(timeout=10)


def test_shop_command_checks_its_task_and_replay_arguments(tmp_path: Path) -> None:
    from milepost.cli.main import main
    from milepost.cli.shop import pick_task, replay_texts

    data = tmp_path / "shop"
    assert main(["data", "webshop", "--train", "2", "--test", "2", "--catalogue-size", "300", "--out", str(data)]) == 0
    assert main(["shop", "--data", str(data), "--index", "9"]) == 2
    assert main(["shop", "--data", str(data), "--task-id", "nope"]) == 2
    assert main(["shop", "--data", str(data), "--replay", str(tmp_path / "missing.jsonl")]) == 2
    import argparse
    import json

    args = argparse.Namespace(data=str(data), split="test", task_id=None, index=1)
    task = pick_task(args)
    episodes = tmp_path / "episodes.jsonl"
    row = {"task_id": task.task_id, "turns": [{"text": "ACTION: click[Back to Search]"}]}
    episodes.write_text(json.dumps(row) + "\n")
    assert replay_texts(str(episodes), task, None) == ["ACTION: click[Back to Search]"]


def test_show_web_replays_an_evaluated_episode_in_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from milepost.cli.main import main
    from milepost.serve import runner

    data, run = tmp_path / "shop", tmp_path / "eval"
    assert main(["data", "webshop", "--items", "2", "--train", "1", "--test", "2", "--catalogue-size", "300",
                 "--out", str(data)]) == 0  # fmt: skip
    assert main(["eval", "--env", "webshop", "--data", str(data), "--policy", "noisy-oracle:0.6:mixed", "--n", "2",
                 "--k", "1", "--out", str(run), "--no-progress"]) == 0  # fmt: skip
    rows = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    served: dict[str, Any] = {}
    monkeypatch.setattr(runner, "serve_forever", lambda app, sock, **kw: served.update(app=app, at=sock.getsockname()))
    for index, row in enumerate(rows):
        # The dataset comes from the eval's metrics.json: no --data needed.
        assert main(["show", str(run / "episodes.jsonl"), "--index", str(index), "--web", "--port", "0"]) == 0
        host, port = served["at"]
        assert host == "127.0.0.1" and port > 0
        client = TestClient(served["app"], base_url=f"http://{host}:{port}")
        assert f"{len(row['turns'])}" in client.get("/").text  # "Replay next step (N left)"
        for _ in row["turns"]:
            client.post("/replay/next")
        snapshot = client.get("/state.json").json()
        assert snapshot["task_id"] == row["task_id"]
        assert snapshot["solved"] == row["success"]
        assert snapshot["total_reward"] == pytest.approx(sum(t["reward"] for t in row["turns"]))
        assert [e["new_subgoals"] for e in snapshot["events"]] == [t["new_subgoals"] for t in row["turns"]]
        # The page lists each replayed step: the action applied and the agent's REASON beside it.
        steps = html.unescape(client.get("/").text.split('id="steps"')[1].split("</ol>")[0])
        for turn in row["turns"]:
            reason = turn["text"].split("REASON:")[1].split("ACTION:")[0].strip() if "REASON:" in turn["text"] else ""
            applied = ", ".join(turn["actions"]) or "nothing"
            assert f"<code>{applied}</code>" + (f' <span class="reasoning">- {reason}' if reason else "") in steps
    assert any(any(t["error"] for t in row["turns"]) for row in rows)  # errors were replayed too


def test_show_web_needs_a_shop_episode_and_its_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shutil as sh

    from milepost.cli.main import main

    data, run = tmp_path / "shop", tmp_path / "eval"
    assert main(["data", "webshop", "--train", "1", "--test", "1", "--catalogue-size", "300", "--out", str(data)]) == 0
    assert main(["eval", "--env", "webshop", "--data", str(data), "--policy", "oracle", "--n", "1", "--k", "1",
                 "--out", str(run), "--no-progress"]) == 0  # fmt: skip
    lone = tmp_path / "lone"
    lone.mkdir()
    sh.copy(run / "episodes.jsonl", lone / "episodes.jsonl")
    assert main(["show", str(lone / "episodes.jsonl"), "--web"]) == 2  # no metrics.json beside it, no --data
    other = tmp_path / "other"
    assert main(["data", "webshop", "--train", "1", "--test", "1", "--seed", "5", "--catalogue-size", "300",
                 "--out", str(other)]) == 0  # fmt: skip
    assert main(["show", str(lone / "episodes.jsonl"), "--web", "--data", str(other)]) == 2  # not its task
    (lone / "metrics.json").write_text(json.dumps({"meta": {}}))
    assert main(["show", str(lone / "episodes.jsonl"), "--web"]) == 2  # metrics.json names no dataset
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("milepost: error: --web") for line in err), err
