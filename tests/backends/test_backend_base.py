"""Policy specs, sampling parameters and requests: the backend seam's input checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milepost.backends import BACKENDS, make_backend
from milepost.backends.base import (
    Backend,
    FinishReason,
    GenerationRequest,
    PolicySpec,
    SamplingParams,
    error_completion,
    parse_policy_spec,
)
from milepost.errors import InputError


@pytest.mark.parametrize(
    ("spec", "kind", "arg"),
    [
        ("hf:runs/tiny", "hf", "runs/tiny"),
        ("hf:Qwen/Qwen3-1.7B", "hf", "Qwen/Qwen3-1.7B"),
        ("openai:qwen3@http://127.0.0.1:8000/v1", "openai", "qwen3@http://127.0.0.1:8000/v1"),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini@"),
        ("oracle", "oracle", None),
        ("random", "random", None),
        ("noisy-oracle:0.2", "noisy-oracle", "0.2:mixed"),
        ("noisy-oracle:1:illegal", "noisy-oracle", "1:illegal"),
    ],
)
def test_valid_specs_parse(spec: str, kind: str, arg: str | None) -> None:
    parsed = parse_policy_spec(spec)
    assert parsed == PolicySpec(kind, arg)
    kind2, arg2 = parsed  # a plain (kind, arg) pair
    assert (kind2, arg2) == (kind, arg)


def test_spec_accessors() -> None:
    spec = parse_policy_spec("openai:qwen3@http://h:1/v1")
    assert (spec.model, spec.base_url) == ("qwen3", "http://h:1/v1")
    assert parse_policy_spec("openai:m").base_url is None
    assert parse_policy_spec("noisy-oracle:0.25:wrong").noise == (0.25, "wrong")
    assert parse_policy_spec("hf:/a/b").model == "/a/b"
    assert str(parse_policy_spec("noisy-oracle:0.5")) == "noisy-oracle:0.5:mixed"


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "hf",
        "hf:",
        "gpt:foo",
        "oracle:1",
        "random:x",
        "noisy-oracle",
        "noisy-oracle:1.5",
        "noisy-oracle:-0.1",
        "noisy-oracle:abc",
        "noisy-oracle:0.1:bogus",
        "openai:@http://x",
        "openai:m@ftp://x",
    ],
)
def test_bad_specs_are_one_line_input_errors(spec: str) -> None:
    with pytest.raises(InputError) as info:
        parse_policy_spec(spec)
    assert "\n" not in str(info.value)


# Spec-shaped strings (a kind, a separator, an argument of each kind's grammar, near misses) mixed with plain text,
# so that the fuzzing reaches every valid branch of the parser and not only its first rejection.
_ARGS = st.one_of(
    st.just(""),
    st.text(max_size=12),
    st.from_regex(r"[A-Za-z0-9_./-]{1,10}(@(https?|ftp)://[a-z0-9.:/]{0,12})?", fullmatch=True),
    st.from_regex(r" ?-?[0-9]{1,2}(\.[0-9]{1,3})?(:(format|illegal|wrong|mixed|loud)?)? ?", fullmatch=True),
)
SPECS = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda kind, sep, arg: f"{kind}{sep}{arg}",
        st.sampled_from(["hf", "openai", "oracle", "noisy-oracle", "random", "HF", "", "noisy"]),
        st.sampled_from([":", "", "::", " : "]),
        _ARGS,
    ),
)


@given(SPECS)
def test_parse_never_crashes(spec: str) -> None:
    """Any text parses or is a one-line InputError; a parsed spec keeps its kind and re-parses to itself."""
    try:
        parsed = parse_policy_spec(spec)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert parsed.kind == spec.strip().partition(":")[0]
    assert parse_policy_spec(str(parsed)) == parsed
    if parsed.kind == "noisy-oracle":
        p, mode = parsed.noise
        assert 0.0 <= p <= 1.0 and mode in ("format", "illegal", "wrong", "mixed")
    elif parsed.kind == "openai":
        assert parsed.model and (parsed.base_url is None or parsed.base_url.startswith(("http://", "https://")))


@pytest.mark.parametrize("kind", ["hf", "openai", "oracle", "noisy-oracle", "random"])
def test_spec_strategy_reaches_every_valid_kind(kind: str) -> None:
    """The fuzzing strategy above is not vacuous: it draws valid specs of every kind."""
    from hypothesis import find

    def valid(spec: str) -> bool:
        try:
            return parse_policy_spec(spec).kind == kind
        except InputError:
            return False

    assert valid(find(SPECS, valid))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"top_k": -1},
        {"max_new_tokens": 0},
        {"stop": [""]},
    ],
)
def test_sampling_params_reject_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        SamplingParams(**kwargs)  # type: ignore[arg-type]


def test_sampling_defaults_and_single_stop_string() -> None:
    params = SamplingParams()
    assert (params.temperature, params.top_p, params.top_k, params.logprobs) == (0.8, 1.0, 0, True)
    assert SamplingParams(stop="END").stop == ["END"]  # type: ignore[arg-type]


def test_request_needs_exactly_one_prompt_form() -> None:
    with pytest.raises(InputError):
        GenerationRequest()
    with pytest.raises(InputError):
        GenerationRequest(prompt="a", prompt_ids=[1])
    with pytest.raises(InputError):
        GenerationRequest(messages=[{"role": "user"}])
    assert GenerationRequest(messages=[{"role": "user", "content": "hi"}]).prompt is None


def test_registry_and_unknown_kind() -> None:
    assert {"hf", "openai"} <= set(BACKENDS.names())
    with pytest.raises(InputError, match="unknown backend"):
        make_backend(PolicySpec("nonexistent", None))


def test_error_completion_is_one_line_and_empty() -> None:
    done = error_completion("boom\n  second line", [1, 2], FinishReason.CONTEXT_OVERFLOW)
    assert done.finish_reason == "context_overflow" and done.error == "boom second line"
    assert done.completion_ids == [] and done.prompt_ids == [1, 2] and done.text == ""
    assert {r.value for r in FinishReason} == {"stop", "length", "error", "context_overflow"}


def test_backends_satisfy_the_protocol(tiny_model_dir: Path) -> None:
    """Both backends keep the seam's contract: one Completion per request, in request order, a known finish
    reason, and one behaviour log-prob per generated token; a failure becomes error completions, not an
    exception."""
    from milepost.backends.hf import HFBackend
    from milepost.backends.openai_compat import OpenAIBackend

    def requests(n: int) -> list[GenerationRequest]:
        params = [SamplingParams(temperature=0.8, max_new_tokens=3 + i, seed=i) for i in range(n)]
        return [GenerationRequest(prompt="12.4" * (1 + i), params=p) for i, p in enumerate(params)]

    local = HFBackend(tiny_model_dir, device="cpu")
    assert isinstance(local, Backend) and local.name and local.tokenizer is not None
    out = local.generate(requests(3))
    assert len(out) == 3
    for i, c in enumerate(out):
        assert c.finish_reason in {r.value for r in FinishReason} - {"error", "context_overflow"}
        assert 1 <= len(c.completion_ids) <= 3 + i and c.logprobs is not None
        assert len(c.logprobs) == len(c.completion_ids) and all(lp <= 0.0 for lp in c.logprobs)
        assert c.prompt_ids == local.encode(requests(3)[i])  # in request order
    assert [c.completion_ids for c in local.generate(requests(3))] == [c.completion_ids for c in out]

    remote = OpenAIBackend("m", "http://127.0.0.1:9/v1", max_retries=0, timeout=2.0)
    try:
        assert isinstance(remote, Backend) and remote.name
        failed = remote.generate(requests(2))
        assert [c.finish_reason for c in failed] == ["error", "error"]
        assert all(c.error and "\n" not in c.error and c.completion_ids == [] for c in failed)
    finally:
        remote.close()
