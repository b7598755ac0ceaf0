"""Subgoal-driven online planning (SGO): planners, milestone tracker, validator, reflection, stuck fallback.

``Subgoal`` is the shared record of ``milepost.types`` (re-exported here); a ``Plan`` orders subgoals over one
episode's predicate vocabulary (the environment's own subgoals). ``SGOAgent`` puts it all around a policy:
``run_episodes(..., agent=SGOAgent(planner))``.
"""

from milepost.planning.domains import DOMAINS, domain_for
from milepost.planning.domains.base import Domain, PlanRejected, Term, Vocabulary
from milepost.planning.fallback import FallbackPolicy
from milepost.planning.plan import Plan, programmatic_plan
from milepost.planning.planner import LLMPlanner, Planner, ProgrammaticPlanner, make_planner
from milepost.planning.reflection import ProgressClaim, format_progress, parse_progress, render_checklist
from milepost.planning.schema import PlanLimits, plan_from_answer
from milepost.planning.sgo import SGOAgent, SGOConfig, SGOState, summarise_sgo
from milepost.planning.stuck import StuckDetector
from milepost.planning.tracker import MilestoneTracker
from milepost.planning.validator import Judge, LLMJudge, SubgoalValidator, Verdict
from milepost.types import Subgoal

__all__ = [
    "DOMAINS",
    "Domain",
    "FallbackPolicy",
    "Judge",
    "LLMJudge",
    "LLMPlanner",
    "MilestoneTracker",
    "Plan",
    "PlanLimits",
    "PlanRejected",
    "Planner",
    "ProgrammaticPlanner",
    "ProgressClaim",
    "SGOAgent",
    "SGOConfig",
    "SGOState",
    "StuckDetector",
    "Subgoal",
    "SubgoalValidator",
    "Term",
    "Verdict",
    "Vocabulary",
    "domain_for",
    "format_progress",
    "make_planner",
    "parse_progress",
    "plan_from_answer",
    "programmatic_plan",
    "render_checklist",
    "summarise_sgo",
]
