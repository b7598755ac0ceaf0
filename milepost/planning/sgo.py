"""The SGO agent: subgoal-driven online planning around any policy (DESIGN: Planning).

At the start of an episode a planner breaks the task into subgoals; before every turn the prompt carries the
checklist and the reflection questions; after every turn the agent's PROGRESS claims are checked by the
validator, the tracker takes the verified milestones (and, by default, reads the predicates itself: the
environment is the authority on what holds), and a stuck agent skips an optional subgoal or replans from the
current state. Everything is logged into ``Episode.meta["sgo"]``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from milepost.agent.loop import LiveEpisode
from milepost.agent.parsing import parse_answer
from milepost.agent.prompts import SGO_ANSWER_FORMAT
from milepost.errors import InputError
from milepost.planning.domains import domain_for
from milepost.planning.domains.base import Domain
from milepost.planning.fallback import FallbackPolicy, decide, detector_for, stuck_reason
from milepost.planning.planner import Planner, ProgrammaticPlanner
from milepost.planning.progress_judge import ProgressJudge, environment_progress
from milepost.planning.reflection import parse_progress, render_checklist, true_progress
from milepost.planning.tracker import MilestoneTracker
from milepost.planning.validator import Judge, SubgoalValidator
from milepost.types import Episode, Turn

SGO_COUNTERS = (
    "replans",
    "skips",
    "claims",
    "claims_accepted",
    "claims_rejected",
    "claims_unverifiable",
    "judge_calls",
    "judge_abstained",
    "judge_disagreements",
    "milestones_claimed",
    "milestones_observed",
    "progress_lines",
    "focus_mismatches",
    "turns",
    "progress_checks",
    "progress_off_track",
    "progress_abstained",
    "progress_known",
    "progress_agree",
    "progress_replans",
)


@dataclass(frozen=True)
class SGOConfig:
    """Settings of the SGO agent."""

    fallback: FallbackPolicy = field(default_factory=FallbackPolicy)
    observe: bool = True
    """mark items whose predicate holds even when the agent does not claim them (claims are still checked)"""
    judge_every: int = 0
    """N: every N turns the progress judge says on-track / off-track; off-track replans (0 = never)"""

    def __post_init__(self) -> None:
        if self.judge_every < 0:
            raise ValueError(f"judge_every must be >= 0, got {self.judge_every}")


class SGOState:
    """One episode's SGO state. Also the guide that scripted demonstrators follow (``progress_line``,
    ``oracle_action``), so that SFT data shows correct reflection and moves toward the current subgoal."""

    def __init__(self, env: Any, domain: Domain, tracker: MilestoneTracker, validator: SubgoalValidator) -> None:
        self.env = env
        self.domain = domain
        self.vocab = domain.vocabulary(env)
        self.tracker = tracker
        self.initial = tracker.plan.to_dict()
        self.validator = validator
        self.detector = detector_for(tracker)
        self.counts: Counter[str] = Counter()
        self.feedback: str | None = None
        self.prompt_current: int | None = None
        self.exhausted = False

    def progress_line(self) -> str:
        """The PROGRESS line a perfect reflection writes in the current state."""
        return true_progress(self.tracker, self.env.state, self.env.completed)

    def oracle_action(self, env: Any, **style: Any) -> tuple[str, str] | None:
        """A correct action toward the current subgoal (and its reason), or None to let the oracle choose.
        ``style``: the scripted policy's text options (Sudoku ``cell_first``)."""
        current = self.tracker.current
        ref = self.tracker.plan.refs[current] if current is not None else None
        return self.domain.focus_move(env, self.vocab.for_env(ref) if ref is not None else None, **style)

    def to_dict(self, planner: str) -> dict[str, Any]:
        stats = self.validator.stats
        counts = dict(self.counts)
        counts.update(
            claims=stats.claims,
            claims_accepted=stats.accepted,
            claims_rejected=stats.rejected,
            claims_unverifiable=stats.unverifiable,
            judge_calls=stats.judge_calls,
            judge_abstained=stats.judge_abstained,
            judge_disagreements=stats.disagreements,
        )
        tracker = self.tracker
        return {
            "planner": planner,
            "plan_source": self.initial["source"],
            "initial_plan": self.initial,
            "plan": tracker.plan.to_dict(),
            "z": tracker.vector(),
            "skipped": sorted(tracker.skipped),
            **{k: int(counts.get(k, 0)) for k in SGO_COUNTERS},
            "events": tracker.events,
        }


class SGOAgent:
    """The ``sgo`` agent kind (an ``milepost.agent.loop.Agent``).

    Args:
        planner: makes the initial plan and the replans (default: the programmatic planner).
        judge: optional LLM judge for the validator.
        config: fallback bounds, whether the tracker reads predicates by itself, how often progress is judged.
        progress_judge: the progress judge asked every ``config.judge_every`` turns.
    """

    name = "sgo"

    def __init__(
        self,
        planner: Planner | None = None,
        judge: Judge | None = None,
        config: SGOConfig | None = None,
        progress_judge: ProgressJudge | None = None,
    ) -> None:
        self.planner = planner or ProgrammaticPlanner()
        self.judge = judge
        self.config = config or SGOConfig()
        self.progress_judge = progress_judge
        if self.config.judge_every and progress_judge is None:
            raise InputError("judge_every needs a progress judge (--judge-every needs --judge)")

    def start(self, ep: LiveEpisode) -> None:
        env = ep.env
        plan = self.planner.plan(env, seed=ep.seed)
        state = SGOState(env, domain_for(env), MilestoneTracker(plan), SubgoalValidator(self.judge))
        if self.config.observe:
            state.tracker.observe(env.state, env.completed, 0)
        ep.agent_state = state
        ep.answer_format = SGO_ANSWER_FORMAT

    def before_turn(self, ep: LiveEpisode) -> None:
        state: SGOState = ep.agent_state
        state.prompt_current = state.tracker.current
        ep.plan = render_checklist(state.tracker, state.feedback)

    def after_turn(self, ep: LiveEpisode, turn: Turn, info: dict[str, Any]) -> None:
        state: SGOState = ep.agent_state
        tracker, env, counts = state.tracker, ep.env, state.counts
        t = turn.index
        counts["turns"] += 1
        feedback: list[str] = []
        claim = parse_progress(turn.text)
        if claim.present:
            counts["progress_lines"] += 1
            if claim.current is not None and claim.current - 1 != state.prompt_current:
                counts["focus_mismatches"] += 1
        new: list[int] = []
        for number in claim.done:
            i = number - 1
            if 0 <= i < len(tracker.z) and tracker.z[i]:
                continue  # already recorded: not a new claim
            if not 0 <= i < len(tracker.z):
                state.validator.stats.claims += 1
                state.validator.stats.rejected += 1
                tracker.log(t, "claim_rejected", claimed=number, reason="no such plan item")
                feedback.append(f"claim {number} rejected: no such subgoal")
                continue
            goal, ref = tracker.plan.subgoals[i], tracker.plan.refs[i]
            verdict = state.validator.validate(
                goal,
                env.state,
                env.rules.render(None),
                latched=ref is not None and ref in env.completed,
                seed=ep.seed * 1_000 + t,
            )
            if verdict.accepted:
                tracker.mark(i, t, "claim")
                counts["milestones_claimed"] += 1
                new.append(i)
            elif verdict.predicate is None and verdict.judge is None:
                tracker.log(t, "claim_unverifiable", i, reason=verdict.reason)
            else:
                tracker.log(
                    t, "claim_rejected", i, reason=verdict.reason, predicate=verdict.predicate, judge=verdict.judge
                )
                feedback.append(f"claim {number} rejected: {verdict.reason}")
        if self.config.observe:
            observed = tracker.observe(env.state, env.completed, t)
            counts["milestones_observed"] += len(observed)
            new += observed
        tracker.tick(len(new))
        action = parse_answer(turn.text).action or turn.text.strip()
        stuck = state.detector.update(turn.state_key, action, new)
        if stuck and info.get("termination_reason") is None:
            feedback.append(self._fallback(ep, state, t))
        every = self.config.judge_every
        if every and (t + 1) % every == 0 and info.get("termination_reason") is None and not stuck:
            feedback.append(self._judge_progress(ep, state, t, info))
        state.feedback = "; ".join(f for f in feedback if f) or None

    def _judge_progress(self, ep: LiveEpisode, state: SGOState, t: int, info: dict[str, Any]) -> str:
        """Ask the progress judge about the last N turns; record its verdict beside the environment's own
        progress over them; replan when it says off track (within the replan budget)."""
        assert self.progress_judge is not None
        tracker, counts, env, every = state.tracker, state.counts, ep.env, self.config.judge_every
        window = ep.turns[-every:]
        history = [parse_answer(u.text).action or u.text.strip()[:80] for u in window]
        before = ep.turns[-every - 1].remaining_distance if len(ep.turns) > every else ep.job.task.goal_distance
        truth = environment_progress(before, info.get("remaining_distance"), solved=False, dead=env.rules.is_dead())
        verdict = self.progress_judge.on_track(
            env.goal_text(), render_checklist(tracker, None), history, env.rules.render(None), seed=ep.seed * 1_000 + t
        )
        counts["progress_checks"] += 1
        if verdict is None:
            counts["progress_abstained"] += 1
        elif truth is not None:  # both answered: the agreement's denominator
            counts["progress_known"] += 1
            counts["progress_agree"] += int(verdict == truth)
        tracker.log(t, "progress_judged", verdict=verdict, environment=truth)
        if verdict is not False:
            return ""
        counts["progress_off_track"] += 1
        if counts["replans"] >= self.config.fallback.max_replans:
            return "progress judge: off track (no replan left)"
        plan = self.planner.plan(env, seed=ep.seed * 31 + counts["replans"] + 1)
        tracker.replace_plan(plan, t, "the progress judge says off track")
        if self.config.observe:
            tracker.observe(env.state, env.completed, t)
        state.detector = detector_for(tracker)
        counts["replans"] += 1
        counts["progress_replans"] += 1
        return "progress judge: off track, replanned from the current state"

    def _fallback(self, ep: LiveEpisode, state: SGOState, t: int) -> str:
        tracker, counts = state.tracker, state.counts
        reason = stuck_reason(state.detector)
        decision = decide(self.config.fallback, tracker, counts["replans"], counts["skips"], reason)
        if decision.action == "skip" and decision.item is not None:
            tracker.skip(decision.item, t, decision.reason)
            state.detector.completed.add(decision.item)
            state.detector.reset_progress()
            counts["skips"] += 1
            return f"stuck, skipped subgoal {decision.item + 1}"
        if decision.action == "replan":
            plan = self.planner.plan(ep.env, seed=ep.seed * 31 + counts["replans"] + 1)
            tracker.replace_plan(plan, t, decision.reason)
            if self.config.observe:
                tracker.observe(ep.env.state, ep.env.completed, t)
            state.detector = detector_for(tracker)
            counts["replans"] += 1
            return "stuck, replanned from the current state"
        if not state.exhausted:
            tracker.log(t, "fallback_exhausted", reason=decision.reason)
            state.exhausted = True
        return ""

    def finish(self, ep: LiveEpisode) -> dict[str, Any]:
        state: SGOState | None = ep.agent_state
        return {} if state is None else {"sgo": state.to_dict(self.planner.name)}


def summarise_sgo(episodes: Iterable[Episode]) -> dict[str, Any]:
    """SGO statistics over episodes (overall and per level): counters, plan sources and the z coverage.

    Episodes without ``meta["sgo"]`` (plain agents) are ignored; the result is empty when there are none.
    """
    per_level: dict[str, Counter[str]] = defaultdict(Counter)
    for ep in episodes:
        sgo = ep.meta.get("sgo")
        if not isinstance(sgo, dict):
            continue
        for key in ("all", ep.level):
            c = per_level[key]
            c["episodes"] += 1
            for name in SGO_COUNTERS:
                c[name] += int(sgo.get(name, 0))
            c[f"plan_{sgo.get('plan_source', '?')}"] += 1
            z = sgo.get("z", [])
            c["items"] += len(z)
            c["items_done"] += sum(z)
    return {level: dict(counts) for level, counts in per_level.items()}


def corpus_texts(envs: Iterable[Any]) -> list[str]:
    """SGO prompt texts (checklists, feedback, PROGRESS lines) of freshly reset environments, for fitting a
    tiny model's tokenizer to the words the SGO agent adds."""
    out = [SGO_ANSWER_FORMAT]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        tracker = MilestoneTracker(ProgrammaticPlanner().plan(env))
        out.append(render_checklist(tracker, "claim 2 rejected: the state does not satisfy it"))
        out.append(true_progress(tracker, env.state, env.completed))
        if len(tracker.z) > 1:
            tracker.mark(0, 1, "env")
            out.append(render_checklist(tracker, "stuck, replanned from the current state"))
            out.append(true_progress(tracker, env.state, env.completed))
    return out
