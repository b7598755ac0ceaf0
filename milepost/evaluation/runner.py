"""``milepost eval`` as a library call: play a dataset split with a policy, then measure and report.

Episodes are appended to ``episodes.jsonl`` as they finish, so an interrupted run loses at most the
episodes in flight; a rerun with the same output folder skips finished (task, sample) pairs. A folder made
by a different configuration is refused rather than silently mixed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from milepost.agent.loop import Agent, AgentSettings, BackendPolicy, Job, run_episodes
from milepost.backends.base import Backend, HTTPOptions, make_backend, parse_policy_spec, policy_forms
from milepost.backends.scripted import MOVES, SCRIPTED, scripted_policy
from milepost.datasets import load_tasks
from milepost.envs import make_env
from milepost.envs.levels import levels_for, parse_levels
from milepost.errors import InputError
from milepost.evaluation.failures import is_infra_failure
from milepost.evaluation.metrics import LevelMetrics, level_metrics, success_by_distance
from milepost.evaluation.plots import plot_success_vs_distance
from milepost.evaluation.proxy import play_single_turn, single_turn_env_kwargs
from milepost.evaluation.report import render_report
from milepost.evaluation.subgoal_quality import quality_table, subgoal_quality
from milepost.evaluation.tiers import PLOT_NAME as TIER_PLOT
from milepost.evaluation.tiers import tier_breakdown
from milepost.io import append_jsonl, atomic_write_json, atomic_write_jsonl, atomic_write_text, read_jsonl
from milepost.progress import phase
from milepost.types import Episode, Task, TerminationReason

log = logging.getLogger(__name__)

EPISODES = "episodes.jsonl"
PLOT = "success.png"
AGENTS = ("plain", "sgo", "subgoal")
# EvalSpec fields that only the SGO agent reads: left out of a plain run's identity, so that plain run folders
# written before they existed still resume.
SGO_FIELDS = ("planner", "judge", "max_replans")


@dataclass
class EvalSpec:
    """What to evaluate; stored as ``run.json`` and compared on resume."""

    env: str
    data: str
    policy: str
    split: str = "test"
    agent: str = "plain"
    n: int = 4
    ks: list[int] = field(default_factory=lambda: [1, 4])
    levels: str | None = None
    limit: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    settings: AgentSettings = field(default_factory=AgentSettings)
    seed: int = 0
    planner: str = "programmatic"
    """SGO: programmatic | llm:SPEC (SPEC = hf:PATH | openai:MODEL@URL)"""
    judge: str | None = None
    """SGO: optional LLM judge backend spec"""
    max_replans: int = 2
    """SGO: replans per episode at most"""
    judge_every: int = 0
    """SGO: every N turns the judge (``judge``) says on-track / off-track; off-track replans (0 = never)"""
    http: HTTPOptions = field(default_factory=HTTPOptions)
    """openai backends (policy, planner, judge): timeout, retries, backoff; not part of the run's identity"""
    single_turn: bool = False
    """the short-horizon proxy (``evaluation.proxy``): Sudoku in one answer, Rush Hour with slide moves"""
    best_of: int = 1
    """sample this many answers per turn and play the first the environment would accept (``agent.best_of``;
    inference with the rules in the loop, not the model alone); 1 = the plain policy"""
    avoid_revisits: bool = False
    """best-of: prefer an accepted answer that leads to a state the episode has not been in (a loop check)"""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise InputError(f"--n must be >= 1, got {self.n}")
        if not self.ks or any(k < 1 or k > self.n for k in self.ks):
            raise InputError(f"--k values must lie in 1..n={self.n}, got {self.ks}")
        if self.agent not in AGENTS:
            raise InputError(f"unknown agent {self.agent!r} (known: {', '.join(AGENTS)})")
        if self.agent != "sgo" and (self.planner != "programmatic" or self.judge is not None):
            raise InputError("--planner and --judge need --agent sgo")
        if self.max_replans < 0:
            raise InputError(f"--max-replans must be >= 0, got {self.max_replans}")
        if self.judge_every < 0:
            raise InputError(f"--judge-every must be >= 0, got {self.judge_every}")
        if self.judge_every and (self.agent != "sgo" or self.judge is None):
            raise InputError("--judge-every needs --agent sgo and a --judge backend")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be >= 1, got {self.limit}")
        if self.best_of < 1:
            raise InputError(f"--best-of must be >= 1, got {self.best_of}")
        if self.avoid_revisits and self.best_of < 2:
            raise InputError("--avoid-revisits chooses among sampled answers: it needs --best-of K with K >= 2")
        if self.best_of > 1 and parse_policy_spec(self.policy).kind in SCRIPTED:
            raise InputError(f"--best-of needs a model policy, not {self.policy!r}")
        if self.single_turn:
            if self.agent != "plain":
                raise InputError("--single-turn needs the plain agent")
            if self.best_of > 1 and self.env == "sudoku":
                # The whole board is one answer, played straight from the backend (evaluation.proxy): no turn
                # for best-of to choose in, and a report that said "best of K" would be wrong.
                raise InputError("--best-of needs turns to choose in: Sudoku's --single-turn is one whole-board answer")
            self.env_kwargs = single_turn_env_kwargs(self.env, self.env_kwargs)

    def identity(self) -> dict[str, Any]:
        """The fields that must match for a rerun to resume (batch size and progress do not matter)."""
        data = dataclasses.asdict(self)
        data["settings"].pop("batch_size", None)
        data.pop("http")
        if self.agent != "sgo":
            for key in SGO_FIELDS:
                data.pop(key)
        if not self.single_turn:
            data.pop("single_turn")  # run folders written before the proxy existed still resume
        if not self.judge_every:
            data.pop("judge_every")  # likewise SGO runs from before progress judging
        if self.best_of == 1:
            data.pop("best_of")  # and plain runs from before best-of-k
        if not self.avoid_revisits:
            data.pop("avoid_revisits")  # and best-of runs from before the revisit check
        return data


class EpisodePool(Protocol):
    """Plays an evaluation's episodes outside this process: the seam through which ``evaluate`` uses workers
    without importing them (``milepost.distributed.eval_pool.RayEvalPool`` plays them on Ray actors).

    ``play`` builds the policy and agent ``spec`` names wherever it plays, plays every job exactly once (seeded
    from ``spec.seed`` and the job, so the episodes equal the in-process ones) and calls ``on_episode`` once per
    finished episode, from this process.
    """

    def play(
        self,
        spec: EvalSpec,
        env_kwargs: dict[str, Any],
        jobs: list[Job],
        *,
        on_episode: Callable[[Episode], None],
        progress: bool,
    ) -> None: ...


def select_tasks(spec: EvalSpec) -> list[Task]:
    tasks = load_tasks(spec.data, spec.split)
    if not tasks:
        raise InputError(f"{spec.data}: the {spec.split} split is empty")
    envs = {t.env for t in tasks}
    if envs != {spec.env}:
        raise InputError(f"{spec.data} holds {', '.join(sorted(envs))} tasks, not {spec.env}")
    size = tasks[0].size
    wanted = {lv.name for lv in parse_levels(spec.levels, spec.env, size)} if spec.levels else None
    # --limit counts per level, and per (level, technique tier) when the data mixes tiers, so that a limit
    # never drops the medium and hard tasks that follow a level's easy ones.
    per_cell: dict[tuple[str, str], int] = defaultdict(int)
    chosen = []
    for task in tasks:
        if wanted is not None and task.level not in wanted:
            continue
        cell = (task.level, str(task.meta.get("tier", "")))
        if spec.limit is not None and per_cell[cell] >= spec.limit:
            continue
        per_cell[cell] += 1
        chosen.append(task)
    if not chosen:
        raise InputError(f"{spec.data}: no {spec.split} tasks at levels {spec.levels}")
    return chosen


def build_policy(spec: EvalSpec) -> Any:
    parsed = parse_policy_spec(spec.policy)
    if parsed.kind in SCRIPTED:
        return scripted_policy(parsed)
    backend = make_backend(parsed, **spec.http.options_for(parsed))
    if spec.best_of > 1:
        from milepost.agent.best_of import LegalBestOf

        return LegalBestOf(backend, spec.settings, spec.best_of, avoid_revisits=spec.avoid_revisits)
    return BackendPolicy(backend, spec.settings)


def build_agent(spec: EvalSpec, policy: Any) -> Agent | None:
    """The agent ``spec.agent`` names (None: plain). A planner or judge spec equal to the policy's reuses the
    policy's loaded backend instead of loading the model twice."""
    if spec.agent == "plain":
        return None
    if spec.agent == "subgoal":  # the milestone-conditioned agent: one target subgoal in the prompt
        from milepost.planning.conditioned import SubgoalConditionedAgent

        return SubgoalConditionedAgent()
    from milepost.planning import FallbackPolicy, LLMJudge, SGOAgent, SGOConfig, make_planner
    from milepost.planning.planner import LLM_BACKENDS

    def backend_for(backend_spec: str) -> Backend:
        own = getattr(policy, "backend", None)
        if own is not None and str(parse_policy_spec(spec.policy)) == backend_spec:
            return own
        return make_backend(backend_spec, **spec.http.options_for(backend_spec))

    planner = make_planner(spec.planner, backend_for)
    judge = None
    if spec.judge is not None:
        parsed = parse_policy_spec(spec.judge)
        if parsed.kind not in LLM_BACKENDS:
            forms = policy_forms(LLM_BACKENDS, " or ")
            raise InputError(f"--judge {spec.judge!r}: the judge needs a model backend ({forms})")
        judge = LLMJudge(backend_for(str(parsed)))
    progress_judge = None
    if spec.judge_every:
        from milepost.planning.progress_judge import LLMProgressJudge

        progress_judge = LLMProgressJudge(backend_for(str(parse_policy_spec(spec.judge or ""))))
    config = SGOConfig(fallback=FallbackPolicy(max_replans=spec.max_replans), judge_every=spec.judge_every)
    return SGOAgent(planner, judge, config, progress_judge)


def evaluate(
    spec: EvalSpec,
    out_dir: str | Path,
    *,
    progress: bool = True,
    policy: Any = None,
    agent: Agent | None = None,
    retry_failed: bool = False,
    pool: EpisodePool | None = None,
) -> dict[str, Any]:
    """Run (or resume) an evaluation and write ``metrics.json``, ``report.md`` and ``success.png``.

    ``policy`` overrides the one ``spec.policy`` names (the trainer evaluates its in-memory model this way;
    ``spec.policy`` is then only the label); ``agent`` likewise overrides the agent ``spec`` describes.
    ``retry_failed`` plays the episodes the backend failed (infrastructure failures) again, with the same
    seeds, and replaces their records, so the run ends as if they had not failed. ``pool`` plays the episodes
    elsewhere (``milepost.distributed.eval_pool.RayEvalPool``: Ray actors, each building the policy ``spec``
    names; the episodes equal the in-process ones); None, the default, plays them in this process.

    Everything is checked (data, levels, flags, policy and agent built) before the first write into
    ``out_dir``, and ``run.json`` is written with the first episode: a failed start leaves nothing behind.
    """
    out = Path(out_dir)
    if pool is not None and (policy is not None or agent is not None or spec.single_turn):
        raise InputError("--workers plays the multi-turn loop with the policy the spec names (not --single-turn)")
    tasks = select_tasks(spec)
    size = tasks[0].size
    env_kwargs = {**spec.env_kwargs, "size": size}  # the dataset's board size wins over a config's
    probe = make_env(spec.env, **env_kwargs)
    if policy is None:
        parse_policy_spec(spec.policy)
    run_file = out / "run.json"
    identity = json.loads(json.dumps(spec.identity()))
    if run_file.exists():
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise InputError(f"{run_file}: not valid JSON; use another --out (or delete the folder)") from None
        if not isinstance(previous, dict):
            raise InputError(f"{run_file}: expected a JSON object; use another --out (or delete the folder)")
        if previous != identity:
            raise InputError(
                f"{out} holds a run with a different configuration ({_differences(previous, identity)}); "
                "use the same settings to resume, or another --out"
            )
    wanted_ids = {t.task_id for t in tasks}
    rows = list(read_jsonl(out / EPISODES, finite=True)) if (out / EPISODES).exists() else []
    for lineno, row in enumerate(rows, 1):  # checked before resuming from them: a bad row is a one-line error
        try:
            Episode.from_dict(row)
        except InputError as exc:
            raise InputError(f"{out / EPISODES}:{lineno}: {exc}") from None

    def infra_failed(row: dict[str, Any]) -> bool:
        return row["task_id"] in wanted_ids and row.get("termination") == TerminationReason.BACKEND_ERROR.value

    failed = sum(map(infra_failed, rows)) if retry_failed else 0
    if failed:
        rows = [r for r in rows if not infra_failed(r)]
    done = {(row["task_id"], row["sample"]) for row in rows}
    jobs = [Job(t, s) for t in tasks for s in range(spec.n) if (t.task_id, s) not in done]
    log.debug("%s: %d tasks x %d samples, %d episodes to play, %d done", out, len(tasks), spec.n, len(jobs), len(done))
    total = len(tasks) * spec.n
    if jobs:
        if pool is None:  # a pool's workers build their own policy and agent
            policy = policy if policy is not None else build_policy(spec)
            agent = agent if agent is not None else build_agent(spec, policy)
        if progress:  # names the run before its bar (a horizon part's folder is the part's name)
            what = f"resuming, {total - len(jobs)} of {total} episodes already done; " if len(jobs) < total else ""
            print(f"{out}: {what}playing {len(jobs)} episodes ({len(tasks)} tasks x {spec.n} samples)", file=sys.stderr)
        if failed:
            # Drop the failed records before playing them again: a retry cut short leaves them missing, and
            # any later run (with or without --retry-failed) plays the missing ones.
            atomic_write_jsonl(out / EPISODES, rows)
            log.info("%s: playing %d episodes again that the backend failed", out, failed)

        def record(ep: Episode) -> None:
            if not run_file.exists():
                atomic_write_json(run_file, identity)
            append_jsonl(out / EPISODES, ep.to_dict())

        if pool is not None:
            log.info("%s: playing %d episodes on %s", out, len(jobs), pool)
            pool.play(spec, env_kwargs, jobs, on_episode=record, progress=progress)
        elif spec.single_turn and spec.env == "sudoku":
            play_single_turn(jobs, policy, spec.settings, spec.seed, record)
        else:
            run_episodes(
                lambda: make_env(spec.env, **env_kwargs),
                jobs,
                policy,
                spec.settings,
                seed=spec.seed,
                on_episode=record,
                progress=progress,
                total=len(jobs),
                agent=agent,
            )
    if not run_file.exists():
        atomic_write_json(run_file, identity)
    # Reading back thousands of episodes and bootstrapping every level's intervals takes a minute on a large run.
    with phase(f"{out}: metrics (bootstrap intervals), report and plots of {total} episodes", enabled=progress):
        rows = list(read_jsonl(out / EPISODES, finite=True)) if (out / EPISODES).exists() else []
        episodes = [Episode.from_dict(r) for r in rows]
        episodes = [e for e in episodes if e.task_id in wanted_ids and e.sample < spec.n]
        # Metrics read episodes in task order, not finishing order: bootstrap intervals resample by position, and
        # workers (or a resumed run) finish episodes in another order than one process does.
        position = {t.task_id: i for i, t in enumerate(tasks)}
        episodes.sort(key=lambda e: (position[e.task_id], e.sample))
        return summarise(spec, tasks, episodes, out, max_steps=probe.max_steps, action_mode=probe.action_mode)


def _differences(previous: dict[str, Any], current: dict[str, Any], prefix: str = "") -> str:
    """The settings two run identities disagree on, nested keys spelled out: ``settings.max_new_tokens 256 in
    the folder, 32 now``."""
    parts = []
    for key in sorted(set(previous) | set(current)):
        old, new = previous.get(key), current.get(key)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            parts.append(_differences(old, new, f"{prefix}{key}."))
        else:
            parts.append(f"{prefix}{key} {json.dumps(old)} in the folder, {json.dumps(new)} now")
    return "; ".join(parts)


def infra_summary(episodes: list[Episode], metrics: list[LevelMetrics]) -> dict[str, Any]:
    """The infrastructure failures of a run: their count, per level, tasks left out, and the first reasons."""
    errors: list[str] = []
    for ep in episodes:
        text = str(ep.meta.get("error") or "")
        if is_infra_failure(ep) and text and text not in errors and len(errors) < 3:
            errors.append(text)
    return {
        "episodes": sum(m.infra_failures for m in metrics),
        "by_level": {m.level: m.infra_failures for m in metrics if m.infra_failures},
        "tasks_left_out": sum(m.tasks_left_out for m in metrics),
        "errors": errors,
    }


def best_of_summary(episodes: list[Episode], k: int) -> dict[str, Any] | None:
    """What best-of-``k`` generated and kept over ``episodes`` (their ``meta["policy_counts"]``, written by
    ``agent.best_of.LegalBestOf``): the summed counts, and per turn the tokens generated, the share of samples the
    environment would accept, of turns that kept an accepted answer and, with the loop check, of turns where it
    changed the answer (``revisits_avoided``) or found every accepted answer leading back (``revisits_kept``).
    None when no episode has counts (a plain policy, or a run from before they were recorded)."""
    counted = [ep.meta["policy_counts"] for ep in episodes if ep.meta.get("policy_counts")]
    if not counted:
        return None
    totals: dict[str, int] = defaultdict(int)
    for counts in counted:
        for key, n in counts.items():
            totals[key] += int(n)
    turns = max(1, totals["turns"])
    out: dict[str, Any] = {"episodes": len(counted), "k": k, **totals}
    out["tokens_per_turn"] = totals["tokens"] / turns
    out["accepted_sample_share"] = totals["accepted_samples"] / (turns * k)
    out["kept_accepted_share"] = totals["kept_accepted"] / turns
    for key in ("revisits_avoided", "revisits_kept"):
        if key in totals:
            out[f"{key}_share"] = totals[key] / turns
    return out


def summarise(
    spec: EvalSpec, tasks: list[Task], episodes: list[Episode], out: Path, *, max_steps: int, action_mode: Any
) -> dict[str, Any]:
    """Metrics, ``metrics.json`` and ``report.md`` first, then the plots: a plot that fails loses nothing."""
    moves = MOVES.get(spec.env)
    fits = {t.task_id: moves.optimal_turns(t, action_mode) <= max_steps for t in tasks}
    by_level: dict[str, list[Episode]] = defaultdict(list)
    for ep in episodes:
        by_level[ep.level].append(ep)
    table = levels_for(spec.env, tasks[0].size)
    order = [lv.name for lv in table if lv.name in by_level] + sorted(set(by_level) - {lv.name for lv in table})
    ranges = {lv.name: f"{lv.lo}-{lv.hi}" for lv in table}
    metrics: list[LevelMetrics] = [
        level_metrics(name, by_level[name], spec.ks, ceiling=fits.__getitem__, seed=spec.seed) for name in order
    ]
    valid = [ep for ep in episodes if not is_infra_failure(ep)]
    scripted = any(ep.meta.get("scripted") for ep in episodes)
    meta = {
        **spec.identity(),
        "size": tasks[0].size,
        "max_steps": max_steps,
        "scripted": scripted,
        "episodes": len(episodes),
        "infra_failures": infra_summary(episodes, metrics),
    }
    if not scripted:  # scripted policies do not sample: a temperature would be noise
        meta["temperature"] = spec.settings.temperature
    by_distance = {str(d): v for d, v in success_by_distance(episodes).items()}
    result: dict[str, Any] = {
        "meta": meta,
        "levels": [m.to_dict() for m in metrics],
        "success_by_distance": by_distance,
    }
    best_of = best_of_summary(valid, spec.best_of) if spec.best_of > 1 else None
    if best_of is not None:
        result["best_of"] = best_of
    sgo = None
    if spec.agent == "sgo":
        from milepost.planning import summarise_sgo

        sgo = summarise_sgo(valid)
        result["sgo"] = sgo
    # Do the subgoals (the SGO plan's, the environment's) track success? (SGO paper, section 3)
    quality = subgoal_quality(valid)
    if quality:
        result["subgoal_quality"] = [q.to_dict() for q in quality]
    # Success per (level, technique tier) when the tasks mix tiers (the paper's Figure 12); else nothing.
    tiers = tier_breakdown(tasks, episodes, order, spec.ks, ceiling=fits.__getitem__, seed=spec.seed)
    if tiers is not None:
        result["tiers"] = tiers.to_dict()
    atomic_write_json(out / "metrics.json", result)

    def report(plots: bool, note: str = "") -> str:
        text = render_report(
            meta, metrics, spec.ks, ranges, PLOT if plots else None, sgo=sgo, note=note, best_of=best_of
        )
        if tiers is not None:
            text += "\n" + tiers.markdown(spec.ks, ranges, TIER_PLOT if plots else None)
        if quality:
            text += "\n" + quality_table(quality)
        return text

    atomic_write_text(out / "report.md", report(plots=True))
    label = spec.policy + (" (scripted baseline)" if scripted else "")
    try:
        plot_success_vs_distance(
            out / PLOT, {label: (metrics, success_by_distance(episodes))}, f"{spec.env}: success against goal distance"
        )
        if tiers is not None:
            tiers.plot(out / TIER_PLOT, f"{spec.env}: success against goal distance by tier")
    except ImportError as exc:  # matplotlib is a core dependency; a broken install still keeps the results
        log.warning("%s: plots not written (%s); metrics.json and report.md are", out, exc)
        atomic_write_text(out / "report.md", report(plots=False, note=f"Plots not written: {exc}."))
        result["plots"] = []
    else:
        result["plots"] = [PLOT] + ([TIER_PLOT] if tiers is not None else [])
    result["table"] = metrics
    return result
