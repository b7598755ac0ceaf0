"""``milepost serve`` start-up: a bad or busy port is one line and exit 2, and "serving on" is printed only once
the port is bound (and names the real port, also for ``--port 0``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from milepost.cli.main import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "99999"], "--port 99999"),
        (["--port", "-1"], "--port -1"),
        (["--max-queue", "0"], "--max-queue"),
        (["--default-max-tokens", "0"], "--default-max-tokens"),
    ],
)
def test_bad_settings_are_one_line_errors(
    tiny_model_dir: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", str(tiny_model_dir), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("milepost: error:") and message in err and "\n" not in err
    assert "serving" not in err


def test_a_port_in_use_is_a_one_line_error(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", str(tiny_model_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("milepost: error:") and f"127.0.0.1:{port}" in err and "\n" not in err
    assert "serving" not in err


def test_serving_is_announced_with_the_bound_port(tiny_model_dir: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "milepost", "serve", str(tiny_model_dir), "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        line = ""
        while "serving" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not announce itself"
        url = line.split(" on ", 1)[1].strip()  # http://127.0.0.1:PORT/v1
        assert url.startswith("http://127.0.0.1:") and not url.startswith("http://127.0.0.1:0/")
        # The port was bound before the announcement: a connection is accepted at once (queued in the backlog).
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=30).json() == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
