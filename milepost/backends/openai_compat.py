"""The ``openai`` backend: any OpenAI-compatible server (vLLM, SGLang, Ollama, hosted APIs,
``milepost serve``) through the official ``openai`` client, on the chat or the completions endpoint.

Token ids: the standard OpenAI schema has none. ``milepost serve`` adds ``prompt_token_ids`` and ``token_ids``
to every choice, the field names vLLM uses when a request sets ``return_token_ids`` (which this backend sends
unless told not to: some hosted APIs reject unknown parameters). Without them, ``prompt_ids`` and
``completion_ids`` are empty: such completions can be evaluated but not trained on, and a backend built with
``require_token_ids=True`` (the trainer's) stops with one line instead. Given the served model's ``tokenizer``
and ``use_chat=False``, chat messages are rendered and tokenised here exactly as the ``hf`` backend renders
them, and go to ``/v1/completions`` as token ids: rollouts from a server then carry the same tokens as local
ones.

Against a vLLM server, log-probs mean what the trainer needs (the tempered, untruncated distribution) only when
the server runs with ``--logprobs-mode processed_logprobs`` and the requests do not truncate (top_p 1, top_k 0);
vLLM's default mode returns untempered log-probs (``milepost.backends.vllm`` has the table).

Log-probs come from the standard ``logprobs`` field (``token_logprobs`` on completions, ``content[].logprob``
on chat). A server that returns none yields ``logprobs=None``, or a :class:`LogprobsUnavailableError` when the
backend was built with ``require_logprobs=True``.

Retries are this module's, not the client's (the client is built with ``max_retries=0``): the client's own
schedule is fixed and silent, while here the delay is exponential with jitter (base and cap configurable, so
tests run in milliseconds), ``Retry-After`` is honoured up to the cap, each retry is logged, and the final
failure names the server and the number of attempts in one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from milepost.backends.base import (
    BackendError,
    FinishReason,
    GenerationRequest,
    LogprobsUnavailableError,
    error_completion,
)
from milepost.errors import InputError
from milepost.types import Completion

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx
CONFIG_STATUS = frozenset({401, 403, 404})  # the caller's setup is wrong: retrying or carrying on cannot help
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context length", "too many tokens")


class OpenAIBackend:
    """Generation through an OpenAI-compatible HTTP API (the ``openai:MODEL@BASE_URL`` policy).

    Args:
        model: model name the server knows.
        base_url: e.g. ``http://127.0.0.1:8000/v1``; None uses the client's default (``OPENAI_BASE_URL`` or
            api.openai.com).
        api_key_env: environment variable holding the API key; local servers that need none get ``EMPTY``.
        timeout: seconds per HTTP request.
        max_retries: retries after the first attempt, on 408 / 409 / 429 / 5xx and connection errors.
        backoff_base: first retry delay in seconds; doubles per attempt, with jitter (half fixed, half
            random).
        backoff_max: cap on one delay (also on a server's ``Retry-After``).
        max_in_flight: requests sent concurrently at most.
        use_chat: True: chat endpoint for every request (a raw prompt becomes one user message); False:
            completions endpoint (messages are refused); None: chat for ``messages``, completions otherwise.
        require_logprobs: raise :class:`LogprobsUnavailableError` when a request asks for log-probs and the
            server returns none.
        return_token_ids: send vLLM's ``return_token_ids`` flag (turn off for APIs that reject it).
        require_token_ids: raise :class:`BackendError` when the server returns no token ids (needed to train).
        tokenizer: the served model's tokenizer, when the caller has it locally (exposed as ``tokenizer``); with
            ``use_chat=False`` it renders chat messages into token-id prompts.

    Failures: a request that still fails after the retries, or that the server rejects, becomes a
    ``Completion`` with finish reason ``error`` (``context_overflow`` when the server says the prompt is too
    long). A 401 / 403 / 404 (bad key, unknown model or URL) raises :class:`BackendError` instead.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_in_flight: int = 8,
        use_chat: bool | None = None,
        require_logprobs: bool = False,
        return_token_ids: bool = True,
        require_token_ids: bool = False,
        tokenizer: Any = None,
    ) -> None:
        import openai

        if max_retries < 0 or max_in_flight < 1 or timeout <= 0 or backoff_base < 0:
            raise InputError("openai backend: need max_retries >= 0, max_in_flight >= 1, timeout > 0")
        self.model = model
        self.base_url = base_url
        self.name = f"openai:{model}@{base_url or ''}"
        self.tokenizer = tokenizer
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.use_chat = use_chat
        self.require_logprobs = require_logprobs
        self.return_token_ids = return_token_ids
        self.require_token_ids = require_token_ids
        self.max_in_flight = max_in_flight
        self.client = openai.OpenAI(
            api_key=os.environ.get(api_key_env) or "EMPTY",
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
        )
        self._pool: ThreadPoolExecutor | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the worker threads and close the HTTP connections."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.client.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API ----------------------------------------------------------------------------------------

    def models(self) -> list[str]:
        """Model ids the server lists (a cheap health check).

        Raises:
            BackendError: the server cannot be reached after the retries or rejects the request.
        """
        try:
            page = self._with_retries(self.client.models.list)
        except Exception as exc:
            raise BackendError(self._describe(exc)) from exc
        return [m.id for m in page.data]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Send every request (at most ``max_in_flight`` at a time); one ``Completion`` per request, in order.

        Raises:
            LogprobsUnavailableError: with ``require_logprobs``, when the server returns no log-probs.
            BackendError: on a 401 / 403 / 404 (authentication, model name or URL).
        """
        if not requests:
            return []
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="milepost-openai")
        return list(self._pool.map(self._one, requests))

    # -- one request ---------------------------------------------------------------------------------------

    def _one(self, req: GenerationRequest) -> Completion:
        import openai

        chat = self.use_chat if self.use_chat is not None else req.messages is not None
        if not chat and req.messages is not None and self.tokenizer is not None:
            from milepost.backends.vllm import encode_prompt

            req = GenerationRequest(prompt_ids=encode_prompt(self.tokenizer, req), params=req.params)
        if chat and req.prompt_ids is not None:
            return error_completion("the chat endpoint takes text, not token ids", req.prompt_ids)
        if not chat and req.messages is not None:
            return error_completion("use_chat=False: the completions endpoint needs a prompt, not messages")
        try:
            if chat:
                messages = req.messages if req.messages is not None else [{"role": "user", "content": req.prompt}]
                response = self._with_retries(self.client.chat.completions.create, **self._chat_args(req, messages))
            else:
                response = self._with_retries(self.client.completions.create, **self._completion_args(req))
        except openai.APIStatusError as exc:
            if exc.status_code in CONFIG_STATUS:
                raise BackendError(self._describe(exc)) from exc
            body = str(exc.body or "") + str(exc)
            if exc.status_code in (400, 413) and any(m in body.lower() for m in _CONTEXT_MARKERS):
                return error_completion(self._describe(exc), req.prompt_ids or [], FinishReason.CONTEXT_OVERFLOW)
            return error_completion(self._describe(exc), req.prompt_ids or [])
        except openai.OpenAIError as exc:
            return error_completion(self._describe(exc), req.prompt_ids or [])
        return self._parse(req, response, chat)

    def _sampling_args(self, req: GenerationRequest) -> dict[str, Any]:
        p = req.params
        extra: dict[str, Any] = {}
        if p.top_k > 0:
            extra["top_k"] = p.top_k  # vLLM / SGLang / milepost serve extension
        if self.return_token_ids:
            extra["return_token_ids"] = True
        args: dict[str, Any] = {
            "model": self.model,
            "max_tokens": p.max_new_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.stop:
            args["stop"] = list(p.stop)
        if p.seed is not None:
            args["seed"] = p.seed
        if extra:
            args["extra_body"] = extra
        return args

    def _completion_args(self, req: GenerationRequest) -> dict[str, Any]:
        args = self._sampling_args(req)
        args["prompt"] = req.prompt_ids if req.prompt_ids is not None else req.prompt
        if req.params.logprobs:
            args["logprobs"] = 1  # the sampled token's log-prob (1 rather than 0: some servers treat 0 as off)
        return args

    def _chat_args(self, req: GenerationRequest, messages: list[dict[str, Any]]) -> dict[str, Any]:
        args = self._sampling_args(req)
        args["messages"] = messages
        if req.params.logprobs:
            args["logprobs"] = True
        return args

    def _parse(self, req: GenerationRequest, response: Any, chat: bool) -> Completion:
        if not response.choices:
            return error_completion("server returned no choices", req.prompt_ids or [])
        choice = response.choices[0]
        extra = {**(getattr(response, "model_extra", None) or {}), **(choice.model_extra or {})}
        logprobs: list[float] | None = None
        if choice.logprobs is not None:
            if chat:
                logprobs = [float(t.logprob) for t in (choice.logprobs.content or [])]
            elif choice.logprobs.token_logprobs is not None:
                logprobs = [float(x) for x in choice.logprobs.token_logprobs]
        if req.params.logprobs and logprobs is None and self.require_logprobs:
            raise LogprobsUnavailableError(
                f"{self.name}: the server returned no log-probs, which this run needs (behaviour log-probs "
                "for training); use a server that returns them (vLLM, SGLang, milepost serve)"
            )
        text = choice.message.content if chat else choice.text
        finish = choice.finish_reason
        if self.require_token_ids and not extra.get("token_ids") and finish in ("stop", "length"):
            raise BackendError(
                f"{self.name}: the server returned no token ids, which this run needs (training consumes the "
                "exact tokens); use a server that returns them on return_token_ids (vLLM, milepost serve)"
            )
        reason = FinishReason.LENGTH if finish == "length" else FinishReason.STOP
        if finish not in ("stop", "length", None):
            return error_completion(f"server finished with {finish!r}", extra.get("prompt_token_ids") or [])
        return Completion(
            prompt_ids=[int(i) for i in extra.get("prompt_token_ids") or req.prompt_ids or []],
            completion_ids=[int(i) for i in extra.get("token_ids") or []],
            logprobs=logprobs if req.params.logprobs else None,
            text=text or "",
            finish_reason=reason.value,
        )

    # -- retries -------------------------------------------------------------------------------------------

    def _with_retries(self, call: Callable[..., Any], **kwargs: Any) -> Any:
        """``call(**kwargs)``, retried on 408 / 409 / 429 / 5xx and connection errors (backoff + jitter)."""
        import openai

        attempt = 0
        while True:
            try:
                return call(**kwargs)
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                retryable = status is None or status in RETRY_STATUS or status >= 500
                if not retryable or attempt >= self.max_retries:
                    if attempt:
                        exc.add_note(f"(gave up after {attempt + 1} attempts)")
                    raise
                delay = self._delay(attempt, exc)
                log.warning(
                    "%s: %s; retry %d/%d in %.2fs",
                    self.name,
                    self._describe(exc),
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                time.sleep(delay)
                attempt += 1

    def _delay(self, attempt: int, exc: Exception) -> float:
        """Exponential backoff with jitter: half the nominal delay fixed, half uniform (no herd)."""
        nominal = min(self.backoff_max, self.backoff_base * 2**attempt)
        delay = nominal / 2 + random.uniform(0, nominal / 2)
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after:
            with contextlib.suppress(ValueError):  # an HTTP date: rare enough to ignore
                delay = max(delay, min(float(retry_after), self.backoff_max))
        return delay

    def _describe(self, exc: BaseException) -> str:
        """One line: server, HTTP status or error kind, the server's message, attempts."""
        import openai

        where = self.base_url or "the OpenAI API"
        notes = " ".join(getattr(exc, "__notes__", []))
        if isinstance(exc, openai.APIStatusError):
            message = exc.message
            if isinstance(exc.body, dict):
                message = str(exc.body.get("message") or exc.body.get("error", {}).get("message") or message)
            text = f"{where}: HTTP {exc.status_code}: {message}"
        elif isinstance(exc, openai.APITimeoutError):
            text = f"{where}: request timed out"
        elif isinstance(exc, openai.APIConnectionError):
            text = f"{where}: cannot connect ({exc.__cause__ or exc})"
        else:
            text = f"{where}: {type(exc).__name__}: {exc}"
        return " ".join(f"{text} {notes}".split())
