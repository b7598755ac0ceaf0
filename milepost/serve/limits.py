"""Time and size bounds on what a client sends, for the apps ``milepost serve`` and ``milepost shop`` run.

uvicorn bounds neither a request's headers nor its body in time: ``timeout_keep_alive`` runs only between
requests, and any byte received cancels it (``uvicorn/protocols/http/h11_impl.py``: ``data_received`` calls
``_unset_keepalive_if_required``; ``connection_made`` arms no timer), so a client sending a byte every few
seconds holds its connection, and the app's coroutine, for ever. Two bounds close that:

- ``BodyDeadline`` (ASGI middleware) reads the whole body before the app sees it, within ``timeout_s`` of the
  request's headers and at most ``max_bytes`` long; a slower body gets a 408, a longer one a 413, each with
  ``Connection: close`` (h11 then closes the connection once the answer is written). The app gets the body
  back as one message.
- ``header_deadline_protocol`` is uvicorn's h11 protocol with a deadline on each request's headers: a
  connection whose next request's headers are not complete ``timeout_s`` after it opened (or after the last
  answer) is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

READ_TIMEOUT_S = 30.0  # seconds for a request's headers, and again for its body: ample on any real link

Refuse = Callable[[int, str], Response]  # (status, one-line message) -> the app's own error answer


class BodyDeadline:
    """ASGI middleware: the body of each HTTP request within ``timeout_s`` seconds and ``max_bytes`` bytes.

    Args:
        app: the wrapped ASGI app.
        timeout_s: seconds a client has, from its headers' end, to send the whole body (else a 408).
        max_bytes: largest body (else a 413, as soon as the declared length or the bytes received pass it).
        refuse: builds the error answer in the app's own shape.
    """

    def __init__(self, app: ASGIApp, timeout_s: float, max_bytes: int, refuse: Refuse) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.app, self.timeout_s, self.max_bytes, self.refuse = app, timeout_s, max_bytes, refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(413, f"request body over the {self.max_bytes}-byte limit", scope, receive, send)
            return
        body = bytearray()
        last: Message = {"type": "http.request", "body": b"", "more_body": False}
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # http.disconnect: the app learns it on its read
                        last = message
                        break
                    body += message.get("body", b"")
                    if len(body) > self.max_bytes:
                        await self._refuse(
                            413, f"request body over the {self.max_bytes}-byte limit", scope, receive, send
                        )
                        return
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await self._refuse(
                408, f"request body not received within {self.timeout_s:g} s; the connection is closed", scope,
                receive, send,
            )  # fmt: skip
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            if last["type"] != "http.request":
                return last
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, status: int, message: str, scope: Scope, receive: Receive, send: Send) -> None:
        response = self.refuse(status, message)
        response.headers["connection"] = "close"
        await response(scope, receive, send)


def header_deadline_protocol(timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers take over ``timeout_s`` seconds.

    The deadline starts when the connection opens and again after each answer; it is met once a request's
    headers are parsed (uvicorn then makes a new ``RequestResponseCycle``). Pass the class as
    ``uvicorn.Config(http=...)``.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")

    class HeaderDeadlineProtocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_header_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            handle: asyncio.TimerHandle | None = getattr(self, "_header_deadline", None)
            if handle is not None:
                handle.cancel()
            super().connection_lost(exc)

        def _arm_header_deadline(self) -> None:
            handle: asyncio.TimerHandle | None = getattr(self, "_header_deadline", None)
            if handle is not None:
                handle.cancel()
            waiting_on: Any = self.cycle  # the cycle of the last request; a new one means new headers arrived
            self._header_deadline = self.loop.call_later(timeout_s, self._headers_late, waiting_on)

        def _headers_late(self, waiting_on: Any) -> None:
            if self.cycle is waiting_on and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol
