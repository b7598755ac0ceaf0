"""Run an ASGI app with uvicorn, in the foreground (the CLI) or on a background thread (tests, notebooks)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from milepost.errors import MilepostError


class BackgroundServer:
    """``with BackgroundServer(app) as server:`` serves ``app`` on a thread until the block ends.

    Args:
        app: the ASGI app.
        host: interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (read it from ``server.port``).
        startup_timeout: seconds to wait for the server to accept connections.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0) -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="milepost-uvicorn", daemon=True)
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of the running server (``http://HOST:PORT/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                raise MilepostError(f"server on {self.host}:{self.port} did not start")
            time.sleep(0.01)
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
