"""Run an ASGI app with uvicorn, in the foreground (the CLI) or on a background thread (tests, notebooks)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

import uvicorn

from milepost.errors import InputError, MilepostError
from milepost.serve.limits import READ_TIMEOUT_S, header_deadline_protocol


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address to bind) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port), bound before anything says it is serving.

    Raises:
        InputError: one line, for a port outside 0..65535, a busy port, an address this machine does not have.
    """
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port}: a TCP port is 0..65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: restart over TIME_WAIT
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise InputError(f"cannot listen on {host}:{port}: {reason}") from None
    return sock


def serve_forever(
    app: Any, sock: socket.socket, log_level: str = "info", header_timeout_s: float = READ_TIMEOUT_S
) -> None:
    """Serve ``app`` with uvicorn on an already bound socket until interrupted; a connection whose request
    headers take over ``header_timeout_s`` seconds is closed (``milepost.serve.limits``)."""
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", http=header_deadline_protocol(header_timeout_s))
    uvicorn.Server(config).run(sockets=[sock])


class BackgroundServer:
    """``with BackgroundServer(app) as server:`` serves ``app`` on a thread until the block ends.

    Args:
        app: the ASGI app.
        host: interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (read it from ``server.port``).
        startup_timeout: seconds to wait for the server to accept connections.
        header_timeout_s: a connection whose request headers take longer is closed.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 30.0,
        header_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        protocol = header_deadline_protocol(header_timeout_s)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", http=protocol)
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
