"""The backend seam: requests in, ``Completion`` records (exact token ids and behaviour log-probs) out.

Agent code talks only to the ``Backend`` protocol, so it never knows whether a local ``transformers`` model,
an OpenAI-compatible server or a scripted policy answered (DESIGN: Backends).

Finish reasons (``Completion.finish_reason``, one of :class:`FinishReason`):

* ``stop``: the model ended its answer: it produced an end-of-sequence token (kept as the last completion
  token, since choosing to stop is part of the sampled action) or completed a stop string.
* ``length``: ``max_new_tokens`` was reached, or the model's context window filled up mid-answer.
* ``context_overflow``: the prompt alone does not fit the context window; nothing was generated.
* ``error``: the request failed (server down after all retries, bad prompt, internal error);
  ``Completion.error`` holds a one-line reason and the completion is empty.

A failed request never raises out of ``generate``: it becomes a completion with one of the last two reasons,
so one bad request cannot take down a batch of episodes. Configuration problems a caller must fix (a model
directory that does not exist, a server without the log-probs the caller requires) raise a
:class:`BackendError` instead.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from milepost.errors import InputError, MilepostError
from milepost.registry import Registry
from milepost.types import Completion


class BackendError(MilepostError):
    """A backend cannot serve requests as configured (reported as one line by the CLI)."""


class ModelLoadError(BackendError):
    """A model or tokenizer could not be loaded, or does not fit the backend's needs."""


class BackendUnavailableError(BackendError):
    """A server could not be reached or kept failing after the bounded retries."""


class LogprobsUnavailableError(BackendError):
    """The caller requires behaviour log-probs and the server does not return them."""


class FinishReason(enum.StrEnum):
    """Why a completion ended (see the module docstring); the values are what ``Completion`` stores."""

    STOP = "stop"
    LENGTH = "length"
    ERROR = "error"
    CONTEXT_OVERFLOW = "context_overflow"


def error_completion(
    reason: str, prompt_ids: Sequence[int] = (), finish_reason: FinishReason = FinishReason.ERROR
) -> Completion:
    """An empty completion that reports a failed request instead of raising."""
    one_line = " ".join(str(reason).split())[:500]
    return Completion(
        prompt_ids=list(prompt_ids),
        completion_ids=[],
        logprobs=[],
        text="",
        finish_reason=finish_reason.value,
        error=one_line,
    )


def admit(
    requests: Sequence[GenerationRequest], encode: Callable[[GenerationRequest], list[int]], max_context: int
) -> tuple[list[Completion | None], list[tuple[int, list[int]]]]:
    """Encode every request before generation; a request that cannot run is answered, never raised.

    Returns:
        ``(results, admitted)``: one slot per request, holding an error completion for a bad prompt or one that
        leaves no room in the ``max_context``-token context (None for the others), and the ``(index, prompt ids)``
        of the requests to generate for.
    """
    results: list[Completion | None] = [None] * len(requests)
    admitted: list[tuple[int, list[int]]] = []
    for i, req in enumerate(requests):
        try:
            prompt = encode(req)
        except Exception as exc:  # a bad request must not sink the batch
            results[i] = error_completion(f"bad prompt: {exc}")
            continue
        if len(prompt) >= max_context:
            results[i] = error_completion(
                f"prompt of {len(prompt)} tokens does not fit the {max_context}-token context",
                prompt,
                FinishReason.CONTEXT_OVERFLOW,
            )
            continue
        admitted.append((i, prompt))
    return results, admitted


@dataclass
class SamplingParams:
    """How to sample one completion.

    Tokens are drawn from logits / ``temperature``, then top-k, then top-p truncation, renormalised over the
    kept tokens. Log-probs are scored under the tempered, *untruncated* distribution, as the trainer scores them
    (``milepost.backends.logprobs`` says why). At ``temperature`` 0 decoding is greedy and the log-probs are those
    of the untempered distribution.
    """

    temperature: float = 0.8
    """softmax temperature; 0 = greedy"""
    top_p: float = 1.0
    """nucleus truncation: keep the smallest set of tokens whose probability reaches top_p (1 = off)"""
    top_k: int = 0
    """keep the k most likely tokens (ties at the k-th value are kept); 0 = off"""
    max_new_tokens: int = 256
    """generated tokens at most (the end-of-sequence token counts)"""
    stop: list[str] = field(default_factory=list)
    """stop strings: generation ends at the first token that completes one of them"""
    seed: int | None = None
    """seed of this request's own random generator; None draws from torch's global generator"""
    logprobs: bool = True
    """return the behaviour log-prob of every generated token"""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check the values.

        Raises:
            InputError: naming the first bad field.
        """
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InputError(f"sampling.temperature: must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise InputError(f"sampling.top_p: must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise InputError(f"sampling.top_k: must be >= 0, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise InputError(f"sampling.max_new_tokens: must be >= 1, got {self.max_new_tokens}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise InputError("sampling.stop: stop strings must be non-empty strings")


@dataclass
class GenerationRequest:
    """One prompt to complete: exactly one of ``prompt`` (raw text), ``messages`` (chat) or ``prompt_ids``.

    ``messages`` are rendered with the tokenizer's chat template when it has one (see
    ``milepost.backends.hf.render_prompt``); ``prompt`` is used verbatim; ``prompt_ids`` skip tokenisation.
    """

    prompt: str | None = None
    messages: list[dict[str, str]] | None = None
    prompt_ids: list[int] | None = None
    params: SamplingParams = field(default_factory=SamplingParams)

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.prompt, self.messages, self.prompt_ids)]
        if sum(given) != 1:
            raise InputError("a generation request needs exactly one of prompt, messages or prompt_ids")
        if self.messages is not None:
            for i, msg in enumerate(self.messages):
                if not isinstance(msg, dict) or not isinstance(msg.get("content"), str) or "role" not in msg:
                    raise InputError(f"messages[{i}]: expected {{'role': ..., 'content': str}}")


@runtime_checkable
class Backend(Protocol):
    """Anything that turns generation requests into completions (DESIGN: Backends).

    Attributes:
        name: a short label for logs and reports (e.g. ``hf:runs/tiny``).
        tokenizer: the Hugging Face tokenizer whose ids ``Completion`` carries, or None when the backend
            has none locally (a remote server).
    """

    name: str
    tokenizer: Any | None

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request; the result has one ``Completion`` per request, in order."""
        ...


# -- policy specs (DESIGN: Contracts, Backend specs) ---------------------------------------------------------

POLICY_FORMS = {
    "hf": "hf:PATH",
    "vllm": "vllm:PATH",
    "openai": "openai:MODEL@BASE_URL",
    "oracle": "oracle",
    "noisy-oracle": "noisy-oracle:P[:MODE]",
    "random": "random",
}
"""How each policy kind is written; ``parse_policy_spec``'s errors and the command-line help list these."""
POLICY_KINDS = tuple(POLICY_FORMS)


def policy_forms(kinds: Sequence[str] = POLICY_KINDS, sep: str = " | ") -> str:
    """The written forms of ``kinds`` joined by ``sep`` (``hf:PATH | vllm:PATH | ...``)."""
    return sep.join(POLICY_FORMS[kind] for kind in kinds)


NOISE_MODES = ("format", "illegal", "wrong", "mixed")


class PolicySpec(NamedTuple):
    """A parsed ``--policy`` value: ``kind`` and its argument (None for ``oracle`` and ``random``).

    ``arg`` is normalised: ``hf`` and ``vllm`` the path or hub name; ``openai`` ``MODEL@BASE_URL`` (base URL may
    be empty); ``noisy-oracle`` ``P:MODE`` with the mode filled in.
    """

    kind: str
    arg: str | None

    @property
    def model(self) -> str:
        """``openai``: the model name; ``hf`` and ``vllm``: the path or hub name."""
        if self.kind == "openai":
            return (self.arg or "").partition("@")[0]
        return self.arg or ""

    @property
    def base_url(self) -> str | None:
        """``openai``: the server's base URL, None to use the client's default (``OPENAI_BASE_URL``)."""
        return (self.arg or "").partition("@")[2] or None

    @property
    def noise(self) -> tuple[float, str]:
        """``noisy-oracle``: (accuracy P, the probability of the oracle's move each turn; error mode)."""
        p, _, mode = (self.arg or "0:mixed").partition(":")
        return float(p), mode

    def __str__(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


def parse_policy_spec(spec: str) -> PolicySpec:
    """Parse a backend spec: ``hf:PATH_OR_NAME``, ``vllm:PATH_OR_NAME`` (the optional ``vllm`` extra),
    ``openai:MODEL@BASE_URL``, ``oracle``,
    ``noisy-oracle:P[:MODE]`` (P in [0, 1] the accuracy: the share of turns answered by the oracle, the rest are
    errors of MODE, one of format | illegal | wrong | mixed, default mixed)
    or ``random``.

    Raises:
        InputError: one line saying what is wrong with the spec.
    """
    text = spec.strip() if isinstance(spec, str) else ""
    kind, sep, arg = text.partition(":")
    usage = f"expected {policy_forms(POLICY_KINDS[:-1], ', ')} or {POLICY_FORMS[POLICY_KINDS[-1]]}"
    if kind not in POLICY_KINDS:
        raise InputError(f"policy {spec!r}: unknown kind {kind!r} ({usage})")
    if kind in ("oracle", "random"):
        if sep:
            raise InputError(f"policy {spec!r}: {kind} takes no argument")
        return PolicySpec(kind, None)
    if not arg.strip():
        raise InputError(f"policy {spec!r}: {kind} needs an argument ({usage})")
    arg = arg.strip()
    if kind in ("hf", "vllm"):
        return PolicySpec(kind, arg)
    if kind == "openai":
        model, _, base_url = arg.partition("@")
        if not model:
            raise InputError(f"policy {spec!r}: missing model name before '@'")
        if base_url and not base_url.startswith(("http://", "https://")):
            raise InputError(f"policy {spec!r}: base URL {base_url!r} must start with http:// or https://")
        return PolicySpec(kind, f"{model}@{base_url}")
    p_text, _, mode = arg.partition(":")
    try:
        p = float(p_text)
    except ValueError:
        raise InputError(f"policy {spec!r}: accuracy P {p_text!r} is not a number") from None
    if not 0.0 <= p <= 1.0:
        raise InputError(
            f"policy {spec!r}: accuracy P (the share of turns the oracle answers) must be in [0, 1], got {p}"
        )
    mode = mode or "mixed"
    if mode not in NOISE_MODES:
        raise InputError(f"policy {spec!r}: error mode {mode!r} is not one of {', '.join(NOISE_MODES)}")
    return PolicySpec(kind, f"{p_text}:{mode}")


@dataclass
class HTTPOptions:
    """Resilience settings of the ``openai`` backend (``milepost eval --timeout --max-retries --backoff-*``).

    They change how hard a run tries to reach its server, never what the policy answers, so they are not part
    of a run's identity: a run can be resumed with other values.
    """

    timeout: float = 120.0
    """seconds per HTTP request"""
    max_retries: int = 4
    """retries after the first attempt (on 408 / 409 / 429 / 5xx, timeouts and connection errors)"""
    backoff_base: float = 0.5
    """first retry delay in seconds; doubles per retry, with jitter"""
    backoff_max: float = 30.0
    """cap on one retry delay in seconds (also on a server's Retry-After)"""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raises:
        InputError: naming the first bad value (as its command-line flag).
        """
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise InputError(f"--timeout must be a number of seconds > 0, got {self.timeout}")
        if self.max_retries < 0:
            raise InputError(f"--max-retries must be >= 0, got {self.max_retries}")
        if not (math.isfinite(self.backoff_base) and self.backoff_base >= 0):
            raise InputError(f"--backoff-base must be >= 0 seconds, got {self.backoff_base}")
        if not (math.isfinite(self.backoff_max) and self.backoff_max >= self.backoff_base):
            raise InputError(f"--backoff-max must be >= --backoff-base ({self.backoff_base}), got {self.backoff_max}")

    def options_for(self, spec: str | PolicySpec) -> dict[str, Any]:
        """Keyword options for ``make_backend(spec, ...)``: these settings for ``openai``, nothing for others."""
        parsed = spec if isinstance(spec, PolicySpec) else parse_policy_spec(spec)
        if parsed.kind != "openai":
            return {}
        return {
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "backoff_base": self.backoff_base,
            "backoff_max": self.backoff_max,
        }


# Factories take the parsed spec plus keyword options and return a Backend. Scripted policies (oracle,
# noisy-oracle, random) are registered by the agent layer, which owns the episode runner that drives them.
BACKENDS: Registry[Callable[..., Backend]] = Registry("backend")


def make_backend(spec: str | PolicySpec, **options: Any) -> Backend:
    """Build the backend a policy spec names, passing ``options`` to its factory.

    Raises:
        InputError: on a malformed spec or a kind with no registered backend.
    """
    parsed = spec if isinstance(spec, PolicySpec) else parse_policy_spec(spec)
    return BACKENDS.get(parsed.kind)(parsed, **options)
