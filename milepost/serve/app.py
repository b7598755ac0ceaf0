"""An OpenAI-compatible HTTP API over a local model (``milepost serve``), built on FastAPI.

Endpoints: ``GET /v1/models``, ``POST /v1/completions`` (prompt text or a token-id list),
``POST /v1/chat/completions`` and an unauthenticated ``GET /health``. Responses follow the OpenAI schema
(``choices[].text`` / ``message``, ``finish_reason``, ``usage``, ``logprobs`` in the standard shape) and add
``prompt_token_ids`` and ``token_ids`` to every choice (vLLM's names), so a client can train on exact tokens.

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
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from milepost.backends.base import FinishReason, GenerationRequest, SamplingParams
from milepost.backends.hf import HFBackend
from milepost.types import Completion

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "invalid_request_error",
    500: "server_error",
}


class ApiError(Exception):
    """An error answered as OpenAI-style JSON: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    def response(self) -> JSONResponse:
        kind = _ERROR_TYPES.get(self.status, "invalid_request_error")
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


# -- request bodies ------------------------------------------------------------------------------------------


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")  # unknown OpenAI / vLLM fields are accepted and ignored

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0.0)  # OpenAI's default
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=-1)  # -1 (vLLM) or 0: off
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = 1
    stream: bool = False


class CompletionBody(_Sampling):
    prompt: str | list[int] | list[str]
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

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
    """Owns the backend: encodes and decodes requests on one thread, batching those that arrive together."""

    def __init__(self, backend: HFBackend, max_batch: int, window_s: float) -> None:
        self.backend, self.max_batch, self.window_s = backend, max_batch, window_s
        self._queue: queue.Queue[tuple[GenerationRequest, Future[Completion]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="milepost-serve-batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def submit(self, request: GenerationRequest) -> Future[Completion]:
        future: Future[Completion] = Future()
        self._queue.put((request, future))
        return future

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                try:
                    nxt = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                batch.append(nxt)
            self._serve(batch)

    def _serve(self, batch: list[tuple[GenerationRequest, Future[Completion]]]) -> None:
        ready: list[tuple[GenerationRequest, Future[Completion]]] = []
        for req, future in batch:
            try:  # tokenise here: the tokenizer is not shared with the event loop's threads
                ids = self.backend.encode(req)
            except Exception as exc:
                future.set_exception(ApiError(400, f"bad prompt: {exc}", param="prompt"))
                continue
            ready.append((GenerationRequest(prompt_ids=ids, params=req.params), future))
        if not ready:
            return
        try:
            results = self.backend.generate([req for req, _ in ready])
        except Exception as exc:  # generate reports failures as completions; this is a last resort
            for _, future in ready:
                future.set_exception(ApiError(500, f"generation failed: {exc}"))
            return
        for (_, future), completion in zip(ready, results):
            future.set_result(completion)


# -- app -----------------------------------------------------------------------------------------------------


def create_app(
    backend: HFBackend,
    api_key: str | None = None,
    max_tokens_limit: int = 4096,
    max_request_bytes: int = 1 << 20,
    model_name: str | None = None,
    batch_window_s: float = 0.005,
) -> FastAPI:
    """Build the FastAPI app serving ``backend``.

    Args:
        backend: the local model.
        api_key: when set, every ``/v1`` request needs ``Authorization: Bearer <api_key>`` (else 401).
        max_tokens_limit: requests asking for more new tokens get a 400.
        max_request_bytes: larger request bodies get a 413.
        model_name: the id ``/v1/models`` lists (default: the backend's name without ``hf:``).
        batch_window_s: how long the worker waits for more requests to batch with the first one.
    """
    name = model_name or backend.name.removeprefix("hf:").rstrip("/").rsplit("/", 1)[-1] or "model"
    batcher = _Batcher(backend, backend.max_batch_size, batch_window_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            batcher.stop()

    app = FastAPI(title="milepost serve", lifespan=lifespan)
    app.state.batcher = batcher

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return ApiError(400, _first_error(exc.errors())).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return ApiError(exc.status_code, str(exc.detail)).response()

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
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > max_request_bytes:
                raise ApiError(413, f"request body over the {max_request_bytes}-byte limit")
        try:
            return schema.model_validate(json.loads(raw or b"null"))
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"request body is not JSON: {exc}") from None
        except ValidationError as exc:
            raise ApiError(400, _first_error(exc.errors())) from None

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

    async def run(request: GenerationRequest) -> Completion:
        completion = await asyncio.wrap_future(batcher.submit(request))
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
        params = sampling(body, body.max_tokens, 16)  # 16: OpenAI's default for this endpoint
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
        done = await run(req)
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
        params = sampling(body, max_tokens, max_tokens_limit)
        messages = [{"role": m.role, "content": m.text()} for m in body.messages]
        done = await run(GenerationRequest(messages=messages, params=params))
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


def _first_error(errors: Any) -> str:
    """One line from a pydantic error list: the field path and the complaint."""
    if not errors:
        return "invalid request"
    err = errors[0]
    where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
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
