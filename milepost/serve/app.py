"""An OpenAI-compatible HTTP API over a local model (``milepost serve``), built on FastAPI.

Endpoints: ``GET /v1/models``, ``POST /v1/completions`` (prompt text or a token-id list),
``POST /v1/chat/completions`` and ``GET /health``. Responses follow the OpenAI schema
(``choices[].text`` / ``message``, ``finish_reason``, ``usage``, ``logprobs`` in the standard shape) and add
``prompt_token_ids`` and ``token_ids`` to every choice (vLLM's names), so a client can train on exact tokens.

Which routes need the token: with an API key set, every ``/v1`` route needs ``Authorization: Bearer <key>``
(anything else, a wrong scheme, an empty token or a prefix of the key included, is a 401); ``/health`` stays
open so that load balancers can probe it, and it tells nothing but ``{"status": "ok"}``; the interactive docs
(``/docs``, ``/redoc``, ``/openapi.json``) are switched off (404). Without a key every route is open, docs
included, which is why the CLI binds loopback by default.

Limits: every malformed body (not UTF-8, not JSON, NaN / Infinity, nested over 32 levels, not an object, a
lone surrogate in a string, wrong field types, checked strictly: ``"2"`` is no integer and ``true`` no number)
is a 400, bodies over ``max_request_bytes`` a 413, a body not received within ``read_timeout_s`` of its headers a
408 (``milepost.serve.limits``; the runner bounds the headers the same way), and any error is answered in OpenAI's shape
``{"error": {"message", "type", "param", "code"}}``. At most ``max_queue`` requests wait for the worker; more
get a 429 (code ``queue_full``, with ``Retry-After``). A chat request without ``max_tokens`` gets
``default_max_tokens`` new tokens at most; a completion request gets OpenAI's 16 (or ``default_max_tokens`` if
lower). A request whose client disconnects while it waits in the queue is dropped at once, freeing its queue
slot, and logged in one line (one already in a decoding batch runs to its end: the batch is decoded as one unit).

Sampling fields are range-checked, each failure a 400 naming the field: ``temperature`` 0 (greedy) or 0.01-100
(below 0.01 the tempered float32 logits overflow), ``top_p`` in (0, 1], ``top_k`` -1..2**31-1, ``max_tokens`` up
to the server's limit, ``seed`` what ``torch.Generator`` takes. A request that still fails inside a batch does
not fail its neighbours: the batch's failed requests are decoded again one by one, so only the culprit errs.

Deviations from OpenAI, all deliberate: ``n`` must be 1 and streaming is not offered; ``top_logprobs`` hold
only the sampled token (the backend computes no alternatives); a completion that ends on a stop string keeps
it in its text, because the text is the decoding of the returned token ids (vLLM's
``include_stop_str_in_output``); a prompt longer than the context window is a 400 with code
``context_length_exceeded``, and ``max_tokens`` beyond the window ends the answer with ``length``.

Requests are batched: a worker thread owns the model and decodes whatever requests arrived within a few
milliseconds of each other in one batch, so concurrent clients share the batched decoding loop.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from milepost.backends.base import FinishReason, GenerationRequest, SamplingParams, error_completion
from milepost.backends.hf import HFBackend
from milepost.serve.limits import READ_TIMEOUT_S, BodyDeadline
from milepost.types import Completion

log = logging.getLogger(__name__)

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
}
_MAX_DEPTH = 32  # JSON nesting a request body may have; OpenAI bodies need about 5
_DISCONNECT_POLL_S = 0.05  # how often a waiting request checks that its client is still connected
_MIN_TEMPERATURE = 0.01  # below it, logits / T overflow float32 for ordinary logits (NaN probabilities)
_MAX_TEMPERATURE = 100.0  # beyond it the distribution is uniform to float32 precision anyway
_MAX_TOP_K = 2**31 - 1  # any k past the vocabulary means "off"; this bound keeps it a machine integer


class ApiError(Exception):
    """An error answered as OpenAI-style JSON: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param, self.headers = status, message, code, param, headers

    def response(self) -> JSONResponse:
        kind = _ERROR_TYPES.get(self.status, "invalid_request_error")
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


# -- request bodies ------------------------------------------------------------------------------------------


class _Sampling(BaseModel):
    # Unknown OpenAI / vLLM fields are accepted and ignored; known ones are strict: pydantic's lax mode would
    # read "2" or 2.0 as max_tokens 2 and [true, 1.0] as the token ids [1, 1] (JSON numbers still fill floats).
    model_config = ConfigDict(extra="ignore", strict=True)

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0.0, le=_MAX_TEMPERATURE, allow_inf_nan=False)  # OpenAI's default
    top_p: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int = Field(0, ge=-1, le=_MAX_TOP_K)  # -1 (vLLM) or 0: off
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=-(2**63), le=2**64 - 1)  # what torch.Generator accepts
    n: int = 1
    stream: bool = False

    @field_validator("temperature")
    @classmethod
    def _not_tiny(cls, value: float) -> float:
        if 0 < value < _MIN_TEMPERATURE:
            raise ValueError(f"must be 0 (greedy) or at least {_MIN_TEMPERATURE}, got {value:g}")
        return value


class CompletionBody(_Sampling):
    prompt: str | list[int] | list[str]
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    role: str
    content: str | list[dict[str, Any]]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(str(part.get("text", "")) for part in self.content if part.get("type") == "text")


class ChatBody(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)


# -- batching worker -----------------------------------------------------------------------------------------


class _Batcher:
    """Owns the backend: encodes and decodes requests on one thread, batching those that arrive together.

    The waiting requests are a deque under a condition rather than a ``queue.Queue``, so that a request
    cancelled while it waits (its client left) is removed at once and its slot counts no more.
    """

    def __init__(self, backend: HFBackend, max_batch: int, window_s: float, max_queue: int) -> None:
        self.backend, self.max_batch, self.window_s, self.max_queue = backend, max_batch, window_s, max_queue
        self._waiting: deque[tuple[GenerationRequest, Future[Completion]]] = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="milepost-serve-batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Serve what still waits, then end the worker."""
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        self._thread.join(timeout=30)

    def waiting(self) -> int:
        """Requests queued and not yet taken by the worker (cancelled ones are gone at once)."""
        with self._ready:
            return len(self._waiting)

    def submit(self, request: GenerationRequest) -> Future[Completion]:
        """Queue a request; cancelling the future before its batch starts drops it. 429 when the queue is full."""
        future: Future[Completion] = Future()
        with self._ready:
            if len(self._waiting) >= self.max_queue:
                raise ApiError(
                    429,
                    f"the server is busy: {self.max_queue} requests are already waiting; retry later",
                    code="queue_full",
                    headers={"Retry-After": "1"},
                )
            self._waiting.append((request, future))
            self._ready.notify()
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Completion]) -> None:
        if not future.cancelled():
            return
        with self._ready:
            for i, (_, waiting) in enumerate(self._waiting):
                if waiting is future:  # not yet taken by the worker
                    del self._waiting[i]
                    return

    def _take(self, timeout: float | None) -> tuple[GenerationRequest, Future[Completion]] | None:
        """The oldest waiting request; None after ``timeout`` seconds, or when stopping with nothing left."""
        with self._ready:
            self._ready.wait_for(lambda: self._waiting or self._stopping, timeout)
            return self._waiting.popleft() if self._waiting else None

    def _run(self) -> None:
        while (item := self._take(None)) is not None:
            batch = [item]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                nxt = self._take(left)
                if nxt is None:
                    break
                batch.append(nxt)
            self._serve(batch)

    def _serve(self, batch: list[tuple[GenerationRequest, Future[Completion]]]) -> None:
        ready: list[tuple[GenerationRequest, Future[Completion]]] = []
        for req, future in batch:
            if not future.set_running_or_notify_cancel():  # its client has gone
                continue
            try:  # tokenise here: the tokenizer is not shared with the event loop's threads
                ids = self.backend.encode(req)
            except Exception as exc:
                future.set_exception(ApiError(400, f"bad prompt: {exc}", param="prompt"))
                continue
            ready.append((GenerationRequest(prompt_ids=ids, params=req.params), future))
        if not ready:
            return
        requests = [req for req, _ in ready]
        results = self._generate(requests)
        failed = [i for i, done in enumerate(results) if done.finish_reason == FinishReason.ERROR]
        if failed and len(ready) > 1:
            # One request can fail the whole batch it was decoded in (the backend decodes a batch as one
            # unit); decoded alone, the others succeed and only the culprit's error is returned.
            log.warning("a batch of %d requests failed; decoding its %d failed ones alone", len(ready), len(failed))
            for i in failed:
                results[i] = self._generate([requests[i]])[0]
        for (_, future), completion in zip(ready, results):
            future.set_result(completion)

    def _generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        try:
            return self.backend.generate(requests)
        except Exception as exc:  # generate reports failures as completions; this is a last resort
            log.exception("generation raised for a batch of %d requests", len(requests))
            return [error_completion(f"generation failed: {exc}", req.prompt_ids or []) for req in requests]


# -- app -----------------------------------------------------------------------------------------------------


def create_app(
    backend: HFBackend,
    api_key: str | None = None,
    max_tokens_limit: int = 4096,
    max_request_bytes: int = 1 << 20,
    model_name: str | None = None,
    batch_window_s: float = 0.005,
    max_queue: int = 256,
    default_max_tokens: int = 256,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> FastAPI:
    """Build the FastAPI app serving ``backend``.

    Args:
        backend: the local model.
        api_key: when set, every ``/v1`` request needs ``Authorization: Bearer <api_key>`` (else 401) and the
            docs routes are off; ``/health`` stays open.
        max_tokens_limit: requests asking for more new tokens get a 400.
        max_request_bytes: larger request bodies get a 413.
        model_name: the id ``/v1/models`` lists (default: the backend's name without ``hf:``).
        batch_window_s: how long the worker waits for more requests to batch with the first one.
        max_queue: requests that may wait for the worker; more get a 429.
        default_max_tokens: new tokens at most for a chat request without ``max_tokens`` (capped by
            ``max_tokens_limit``; completions default to OpenAI's 16 or this, whichever is lower).
        read_timeout_s: seconds a client has to send a request's body after its headers (else a 408).

    Raises:
        ValueError: when a limit is not positive.
    """
    for label, value in (
        ("max_tokens_limit", max_tokens_limit),
        ("max_request_bytes", max_request_bytes),
        ("max_queue", max_queue),
        ("default_max_tokens", default_max_tokens),
    ):
        if value < 1:
            raise ValueError(f"{label} must be >= 1, got {value}")
    if not read_timeout_s > 0:
        raise ValueError(f"read_timeout_s must be > 0, got {read_timeout_s}")
    if api_key is not None and not api_key.strip():
        raise ValueError("api_key must not be empty (an empty key would let a bare 'Bearer' header through)")
    name = model_name or backend.name.removeprefix("hf:").rstrip("/").rsplit("/", 1)[-1] or "model"
    batcher = _Batcher(backend, backend.max_batch_size, batch_window_s, max_queue)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            batcher.stop()

    docs = {"docs_url": None, "redoc_url": None, "openapi_url": None} if api_key is not None else {}
    app = FastAPI(title="milepost serve", lifespan=lifespan, **docs)  # type: ignore[arg-type]
    app.state.batcher = batcher
    app.add_middleware(
        BodyDeadline,
        timeout_s=read_timeout_s,
        max_bytes=max_request_bytes,
        refuse=lambda status, message: ApiError(status, message).response(),
    )

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return ApiError(400, _first_error(exc.errors())).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return ApiError(exc.status_code, str(exc.detail)).response()

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:  # still logged by the server
        return ApiError(500, f"internal error: {type(exc).__name__}").response()

    def authorise(request: Request) -> None:
        if api_key is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
            raise ApiError(
                401, "missing or invalid API key (send 'Authorization: Bearer <key>')", code="invalid_api_key"
            )

    async def read_body(request: Request, schema: type[BaseModel]) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_request_bytes:
            raise ApiError(413, f"request body over the {max_request_bytes}-byte limit")
        raw = bytearray()
        try:
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > max_request_bytes:
                    raise ApiError(413, f"request body over the {max_request_bytes}-byte limit")
        except ClientDisconnect:  # the client left while sending: nobody reads the answer
            raise gone(request) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ApiError(400, f"request body is not UTF-8 (byte {exc.start}: {exc.reason})") from None
        try:
            data = json.loads(text or "null", parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"request body is not JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, f"request body nests deeper than {_MAX_DEPTH} levels") from None
        except ValueError as exc:  # NaN / Infinity, an integer past Python's digit limit
            raise ApiError(400, f"request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(400, f"request body must be a JSON object, not {_json_kind(data)}")
        if _nesting(data) > _MAX_DEPTH:
            raise ApiError(400, f"request body nests deeper than {_MAX_DEPTH} levels")
        if (where := _lone_surrogate(data)) is not None:  # JSON's "\ud800" escape; no tokenizer can encode it
            raise ApiError(
                400, f"{where or 'a key'}: a lone UTF-16 surrogate (\\uD800-\\uDFFF) is not text", param=where or None
            )
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            field = str(errors[0]["loc"][0]) if errors and errors[0].get("loc") else None
            raise ApiError(400, _first_error(errors), param=field) from None

    def sampling(body: _Sampling, max_tokens: int | None, default_max: int) -> SamplingParams:
        if body.n != 1:
            raise ApiError(400, "only n=1 is supported", param="n")
        if body.stream:
            raise ApiError(400, "streaming is not supported", param="stream")
        if body.model is not None and body.model != name:
            raise ApiError(
                404,
                f"the model '{body.model}' does not exist (this server has '{name}')",
                code="model_not_found",
                param="model",
            )
        wanted = max_tokens if max_tokens is not None else min(default_max, max_tokens_limit)
        if wanted > max_tokens_limit:
            raise ApiError(
                400,
                f"max_tokens {wanted} is over this server's limit of {max_tokens_limit}",
                param="max_tokens",
            )
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        try:
            return SamplingParams(
                temperature=body.temperature,
                top_p=body.top_p,
                top_k=max(body.top_k, 0),
                max_new_tokens=wanted,
                stop=stop,
                seed=body.seed,
            )
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None

    def gone(http: Request) -> ApiError:
        client = f"{http.client.host}:{http.client.port}" if http.client else "a client"
        log.info("%s closed its %s request before the answer", client, http.url.path)
        return ApiError(400, "the client closed the request", code="client_disconnected")

    async def run(http: Request, request: GenerationRequest) -> Completion:
        waiter = asyncio.wrap_future(batcher.submit(request))
        while not waiter.done():
            await asyncio.wait([waiter], timeout=_DISCONNECT_POLL_S)
            if not waiter.done() and await http.is_disconnected():
                waiter.cancel()  # cancels the queued request too: it leaves the queue at once
                raise gone(http)
        completion = waiter.result()
        if completion.finish_reason == FinishReason.CONTEXT_OVERFLOW:
            raise ApiError(
                400,
                f"This model's maximum context length is {backend.max_context} tokens: {completion.error}",
                code="context_length_exceeded",
                param="prompt",
            )
        if completion.finish_reason == FinishReason.ERROR:
            raise ApiError(500, completion.error or "generation failed")
        return completion

    router = APIRouter(prefix="/v1", dependencies=[Depends(authorise)])

    @router.get("/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "milepost",
            "max_model_len": backend.max_context,
        }
        return {"object": "list", "data": [card]}

    @router.post("/completions")
    async def completions(request: Request) -> dict[str, Any]:
        body = await read_body(request, CompletionBody)
        if body.echo:
            raise ApiError(400, "echo is not supported", param="echo")
        params = sampling(body, body.max_tokens, min(16, default_max_tokens))  # 16: OpenAI's default here
        prompt = body.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            if len(prompt) != 1:
                raise ApiError(400, "a list of prompts is not supported; send one prompt", param="prompt")
            prompt = prompt[0]
        req = (
            GenerationRequest(prompt=prompt, params=params)
            if isinstance(prompt, str)
            else GenerationRequest(prompt_ids=[int(i) for i in prompt], params=params)
        )
        done = await run(request, req)
        choice: dict[str, Any] = {
            "index": 0,
            "text": done.text,
            "finish_reason": done.finish_reason,
            "logprobs": None,
            **_token_fields(done),
        }
        if body.logprobs is not None:
            pieces = _pieces(backend, done.completion_ids)
            offsets, at = [], 0
            for piece in pieces:
                offsets.append(at)
                at += len(piece)
            lps = done.logprobs or []
            choice["logprobs"] = {
                "tokens": pieces,
                "token_logprobs": lps,
                "text_offset": offsets,
                "top_logprobs": [{p: lp} for p, lp in zip(pieces, lps)] if body.logprobs else None,
            }
        return _envelope("text_completion", name, choice, done)

    @router.post("/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        body = await read_body(request, ChatBody)
        max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        params = sampling(body, max_tokens, default_max_tokens)
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        done = await run(request, GenerationRequest(messages=messages, params=params))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": done.text},
            "finish_reason": done.finish_reason,
            "logprobs": None,
            **_token_fields(done),
        }
        if body.logprobs:
            content = []
            for piece, lp in zip(_pieces(backend, done.completion_ids), done.logprobs or []):
                entry = {"token": piece, "logprob": lp, "bytes": list(piece.encode())}
                top = [dict(entry)] if body.top_logprobs else []
                content.append({**entry, "top_logprobs": top})
            choice["logprobs"] = {"content": content, "refusal": None}
        return _envelope("chat.completion", name, choice, done)

    app.include_router(router)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON value")


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _nesting(value: Any) -> int:
    """Depth of a parsed JSON value (a scalar is 0), walked without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            if depth > _MAX_DEPTH:
                return depth
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _lone_surrogate(value: Any) -> str | None:
    """The dotted path of a string (for a key: of its object) holding a lone surrogate, else None."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if any("\ud800" <= ch <= "\udfff" for ch in node):
                return path
        elif isinstance(node, dict):
            for key, child in node.items():
                if any("\ud800" <= ch <= "\udfff" for ch in key):
                    return path
                stack.append((child, f"{path}.{key}" if path else key))
        elif isinstance(node, list):
            stack.extend((child, f"{path}.{i}" if path else str(i)) for i, child in enumerate(node))
    return None


_UNION_FIELDS = {  # fields of several types: pydantic's first error names one member ("prompt.str: ...")
    "prompt": "must be a string, a list of token ids (integers) or a list of one string",
    "content": "must be a string or a list of content parts (objects)",
}


def _first_error(errors: Any) -> str:
    """One line from a pydantic error list: the field path and the complaint."""
    if not errors:
        return "invalid request"
    err = errors[0]
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    for i, part in enumerate(loc[:-1]):
        if part in _UNION_FIELDS and not loc[i + 1].isdigit():  # the next part names a union member
            return f"{'.'.join(loc[: i + 1])}: {_UNION_FIELDS[part]}"
    where = ".".join(loc)
    return f"{where}: {err.get('msg', 'invalid value')}" if where else str(err.get("msg", "invalid request"))


def _pieces(backend: HFBackend, ids: list[int]) -> list[str]:
    """The text of each token (special tokens included, so the list lines up with the ids)."""
    return [backend.tokenizer.decode([i], skip_special_tokens=False) for i in ids]


def _token_fields(done: Completion) -> dict[str, Any]:
    return {"prompt_token_ids": done.prompt_ids, "token_ids": done.completion_ids}


def _envelope(kind: str, model: str, choice: dict[str, Any], done: Completion) -> dict[str, Any]:
    prefix = "chatcmpl" if kind == "chat.completion" else "cmpl"
    usage = {
        "prompt_tokens": len(done.prompt_ids),
        "completion_tokens": len(done.completion_ids),
        "total_tokens": len(done.prompt_ids) + len(done.completion_ids),
    }
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage,
    }
