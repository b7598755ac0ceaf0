"""``milepost tiny`` and ``milepost serve``: a model directory from the command line, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from milepost.cli.main import main


def test_tiny_builds_a_loadable_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    assert main(["tiny", "--out", str(out), "--arch", "llama", "--size", "0.5m", "--seed", "2"]) == 0
    assert "parameters" in capsys.readouterr().out
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    assert main(["tiny", "--out", str(out)]) == 2  # refuses to overwrite without --overwrite
    assert "already holds a model" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "/no/such/model/dir"], "does not exist"),
        (["serve", "/no/such/model/dir", "--api-key-env", "MILEPOST_UNSET_VAR_X"], "not set"),
    ],
)
def test_serve_reports_bad_input_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MILEPOST_UNSET_VAR_X", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("milepost: error:") and message in err and "\n" not in err


def test_serve_command_answers_over_http(tiny_model_dir: Path) -> None:
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "MILEPOST_SERVE_KEY": "k1", "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "milepost",
        "serve",
        str(tiny_model_dir),
        "--port",
        str(port),
        "--api-key-env",
        "MILEPOST_SERVE_KEY",
        "--model-name",
        "tiny",
        "--max-tokens-limit",
        "8",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server exited"
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        headers = {"Authorization": "Bearer k1"}
        r = httpx.post(
            f"{base}/v1/completions",
            headers=headers,
            json={"model": "tiny", "prompt": "Solve", "max_tokens": 3, "temperature": 0},
            timeout=30,
        )
        assert r.status_code == 200 and len(r.json()["choices"][0]["token_ids"]) == 3
        assert httpx.get(f"{base}/v1/models", timeout=5).status_code == 401
        too_many = httpx.post(f"{base}/v1/completions", headers=headers, json={"prompt": "x", "max_tokens": 9})
        assert too_many.status_code == 400
    finally:
        proc.terminate()
        proc.wait(timeout=30)
