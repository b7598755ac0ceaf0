"""Planners behind one protocol: programmatic (per environment, from the solver) and LLM (any backend).

``plan(env)`` plans from the environment's current state (at the start of an episode, or on a replan) and
never raises on model output: the LLM planner retries a bounded number of times, each time telling the model
why its last answer was rejected, and then falls back to the programmatic planner, recording every reason
in ``Plan.notes``.
"""

from __future__ import annotations

from typing import Any, Protocol

from milepost.backends.base import Backend, GenerationRequest, SamplingParams, policy_forms
from milepost.errors import InputError
from milepost.planning.domains import domain_for
from milepost.planning.domains.base import PlanRejected
from milepost.planning.plan import Plan, programmatic_plan
from milepost.planning.schema import PlanLimits, plan_from_answer, planner_prompt


class Planner(Protocol):
    """Breaks the rest of a task into ordered subgoals, from the environment's current state."""

    name: str

    def plan(self, env: Any, *, seed: int = 0) -> Plan:
        """A plan for the reset environment ``env`` (``seed`` makes sampled planners reproducible)."""
        ...


class ProgrammaticPlanner:
    """The environment's subgoals in the order its solver reaches them (see ``Domain.order``)."""

    name = "programmatic"

    def plan(self, env: Any, *, seed: int = 0) -> Plan:
        domain = domain_for(env)
        return programmatic_plan(env, domain, domain.vocabulary(env))


class LLMPlanner:
    """Asks a backend for a JSON list of subgoals, checks it, and falls back to the programmatic planner.

    Args:
        backend: any ``Backend`` (a local model, an OpenAI-compatible server, a scripted test double).
        retries: further attempts after the first one (each sees the previous rejection).
        limits: size and field limits of an answer.
        temperature: sampling temperature of the planner calls.
        max_new_tokens: tokens per planner answer at most.
        fallback: the planner used when every attempt failed.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        retries: int = 2,
        limits: PlanLimits | None = None,
        temperature: float = 0.7,
        max_new_tokens: int = 512,
        fallback: Planner | None = None,
    ) -> None:
        if retries < 0:
            raise InputError(f"planner retries must be >= 0, got {retries}")
        self.backend = backend
        self.retries = retries
        self.limits = limits or PlanLimits()
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.fallback = fallback or ProgrammaticPlanner()
        self.name = f"llm:{backend.name}"

    def plan(self, env: Any, *, seed: int = 0) -> Plan:
        domain = domain_for(env)
        vocab = domain.vocabulary(env)
        reasons: list[str] = []
        rejected: str | None = None
        for attempt in range(self.retries + 1):
            params = SamplingParams(
                temperature=self.temperature,
                max_new_tokens=self.max_new_tokens,
                seed=seed * 97 + attempt,
                logprobs=False,
            )
            messages = planner_prompt(env, vocab, self.limits, rejected)
            request = GenerationRequest(messages=messages, params=params)
            try:
                completion = self.backend.generate([request])[0]
            except Exception as exc:  # an unreachable or misconfigured planner must not end the episode
                rejected = f"backend raised {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                reasons.append(f"attempt {attempt + 1}: {rejected}")
                continue
            if completion.finish_reason in ("error", "context_overflow"):
                rejected = f"backend {completion.finish_reason}: {completion.error or 'no reason given'}"
                reasons.append(f"attempt {attempt + 1}: {rejected}")
                continue
            try:
                plan = plan_from_answer(completion.text, env, domain, vocab, self.limits)
            except PlanRejected as exc:
                rejected = exc.reason
                reasons.append(f"attempt {attempt + 1}: {exc.reason}")
                continue
            plan.notes = reasons + plan.notes
            return plan
        plan = self.fallback.plan(env, seed=seed)
        plan.source = "fallback"
        plan.notes = [*reasons, f"fell back to the {self.fallback.name} planner"]
        return plan


LLM_BACKENDS = ("hf", "openai")
"""The backends an LLM planner or judge can use (``llm:SPEC``, ``--judge SPEC``)."""
PLANNER_FORMS = f"programmatic | llm:SPEC (SPEC = {policy_forms(LLM_BACKENDS)})"
"""How a ``--planner`` value is written."""


def make_planner(spec: str, backend_for: Any = None, **options: Any) -> Planner:
    """The planner a ``--planner`` value names: ``programmatic`` or ``llm:SPEC`` (SPEC a backend spec such as
    ``hf:PATH`` or ``openai:MODEL@URL``).

    Args:
        spec: the planner spec.
        backend_for: function from a backend spec to a ``Backend`` (default: ``make_backend``), so a caller
            can share a backend it already loaded.
        options: passed to ``LLMPlanner``.

    Raises:
        InputError: an unknown planner kind or a bad backend spec.
    """
    kind, _, arg = spec.strip().partition(":")
    if kind == "programmatic" and not arg:
        return ProgrammaticPlanner()
    if kind == "llm" and arg:
        from milepost.backends.base import make_backend, parse_policy_spec

        parsed = parse_policy_spec(arg)
        if parsed.kind not in LLM_BACKENDS:
            raise InputError(
                f"planner {spec!r}: the LLM planner needs a model backend ({policy_forms(LLM_BACKENDS, ' or ')})"
            )
        backend = (backend_for or make_backend)(str(parsed))
        return LLMPlanner(backend, **options)
    raise InputError(f"planner {spec!r}: expected {PLANNER_FORMS}")
