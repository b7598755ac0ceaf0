"""experiments/plan_verify.py: scoring a Rush Hour answer's plan by the rules, and keeping the best of k samples."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.backends.base import GenerationRequest
from milepost.envs.rushhour.env import RushHourEnv
from milepost.envs.rushhour.solver import solve_board
from milepost.envs.rushhour.state import Move, RushHourState
from milepost.types import Completion
from tests.planning.fakes import rush_tasks


@pytest.fixture(scope="module")
def puzzle():  # type: ignore[no-untyped-def]
    """A 4-6 puzzle and a state of it at least 3 cells from the goal with a legal move that is not optimal."""
    from experiments.sft_starts import optimal_moves

    task = rush_tasks(4, 6, 1)[0]
    cluster = solve_board(task.payload["board"])
    states = (RushHourState(cluster.layout, cluster.layout.unpack(k)) for k in cluster.states.tolist())
    start = next(
        s
        for s in states
        if int(cluster.steps[cluster.index(s.key)]) >= 3
        and any(m not in optimal_moves(cluster, s) for m in s.legal_actions())
    )
    return task, cluster, start


def _answers(cluster: Any, start: Any) -> dict[str, str]:
    """Answers in ``start``: the solver's plan, a legal detour then the solver's plan, a plan stopping one cell
    short, a plan whose first slide is not the ACTION, an illegal ACTION, and no answer at all."""
    from experiments.sft_starts import answer_text, optimal_moves, plan_reason

    move = optimal_moves(cluster, start)[0]
    good = answer_text(move, cluster, start, "plan-forward")
    detour = next(m for m in start.legal_actions() if m not in optimal_moves(cluster, start))
    after = start.clone()
    after.apply(detour)
    rest = plan_reason(cluster, after, optimal_moves(cluster, after)[0], "forward")
    step = f"{detour.vehicle} {detour.direction} 1"
    from milepost.agent.parsing import format_answer

    illegal = next(
        Move(v, d, 1)
        for v in "ABCDEFGH"
        for d in ("up", "down", "left", "right")
        if start.why_illegal(Move(v, d, 1)) is not None
    )
    reason = plan_reason(cluster, start, move, "forward")
    return {
        "optimal": good,
        "detour": format_answer(f"{step} > {rest}", detour.text()),
        "short": format_answer(reason.rsplit(" > ", 1)[0] + ".", move.text()) if " > " in reason else "",
        "disagrees": format_answer(reason, detour.text()),
        "illegal": format_answer(reason, illegal.text()),
        "garbage": "I am not sure.",
    }


def test_plan_score_ranks_answers_by_the_rules(puzzle) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import plan_score

    _, cluster, start = puzzle
    a = _answers(cluster, start)
    distance = int(cluster.steps[cluster.index(start.key)])
    assert plan_score(start, a["optimal"]) == (2, -distance)
    detour = plan_score(start, a["detour"])
    assert detour[0] == 2 and detour[1] < -distance  # solves, longer
    if a["short"]:
        assert plan_score(start, a["short"]) == (1, 0)  # legal, does not reach the goal
    assert plan_score(start, a["disagrees"]) == (1, 0)  # the plan solves but the ACTION is another move
    assert plan_score(start, a["illegal"]) == (0, 0)
    assert plan_score(start, a["garbage"]) == (0, 0)
    assert sorted(a, key=lambda k: plan_score(start, a[k]), reverse=True)[:2] == ["optimal", "detour"]


class SeedBackend:
    """Unit-test fixture: answers each request with the text its seed maps to, and records the requests."""

    name = "seeds"

    def __init__(self, by_seed: dict[int, str]) -> None:
        self.by_seed = by_seed
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.requests += requests
        return [Completion([1], [2, 3], [0.0, 0.0], self.by_seed[r.params.seed], "stop") for r in requests]


def test_the_policy_keeps_the_shortest_solving_plan_and_sample_0_draws_the_plain_seed(puzzle, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import PlanVerifiedPolicy, verify_summary
    from milepost.agent.best_of import sample_seed

    _, cluster, start = puzzle
    a = _answers(cluster, start)
    job = SimpleNamespace(task=SimpleNamespace(task_id="t"), sample=1)
    ep = SimpleNamespace(seed=7, turns=[None, None], env=SimpleNamespace(state=start), messages=lambda: [], job=job)
    turn_seed = 7 * 1_000 + 2
    seeds = [sample_seed(turn_seed, j) for j in range(4)]
    assert seeds[0] == turn_seed and len(set(seeds)) == 4
    texts = [a["disagrees"], a["detour"], a["optimal"], a["garbage"]]
    backend = SeedBackend(dict(zip(seeds, texts, strict=True)))
    log = tmp_path / "turns.jsonl"
    policy = PlanVerifiedPolicy(backend, AgentSettings(), 4, log)
    (kept,) = policy.act([ep])
    assert kept.text == a["optimal"]
    assert [r.params.seed for r in backend.requests] == seeds
    record = {"task": "t", "sample": 1, "turn": 2, "k": 4, "solving": 2, "kept": 2, "level": 2, "tokens": 8}
    assert policy.records == [record]
    # Nothing solves: the first sample with a legal ACTION is kept, ties to the lower index.
    backend = SeedBackend(dict(zip(seeds, [a["garbage"], a["disagrees"], a["illegal"], a["disagrees"]], strict=True)))
    policy = PlanVerifiedPolicy(backend, AgentSettings(), 4, log)
    (kept,) = policy.act([ep])
    assert kept.text == a["disagrees"]
    # The log holds both; the summary counts the turn once, as last played (a resumed run replays a turn).
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows[0] == record and rows[1]["level"] == 1 and rows[1]["kept"] == 1
    assert verify_summary(rows) == {
        "turns_played": 1,
        "with_solving_plan": 0.0,
        "solving_share": 0.0,
        "kept_nonzero": 1.0,
        "kept_levels": {"0": 0, "1": 1, "2": 0},
        "tokens_per_turn": 8.0,
    }
    assert verify_summary(rows[:1])["with_solving_plan"] == 1.0 and verify_summary(rows[:1])["solving_share"] == 0.5
    with pytest.raises(ValueError, match="k must be >= 1"):
        PlanVerifiedPolicy(backend, AgentSettings(), 0)


def test_k_1_plays_exactly_the_plain_agent_with_a_real_model(tiny_model_dir) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import PlanVerifiedPolicy
    from milepost.backends.hf import HFBackend

    backend = HFBackend(tiny_model_dir)
    settings = AgentSettings(memory_k=0, max_new_tokens=12, batch_size=4)
    jobs = [Job(t, s) for t in rush_tasks(4, 6, 2) for s in range(2)]

    def play(policy: Any) -> list[Any]:
        eps = run_episodes(lambda: RushHourEnv(max_steps=3), jobs, policy, settings, seed=3, progress=False)
        return [[(t.completion_ids, t.text) for t in e.turns] for e in sorted(eps, key=lambda e: (e.task_id, e.sample))]

    verified = PlanVerifiedPolicy(backend, settings, 1)
    assert play(verified) == play(BackendPolicy(backend, settings))
    assert verified.records and all(r["kept"] == 0 and r["k"] == 1 for r in verified.records)


def test_a_work_folder_of_other_weights_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import model_digest, run_k
    from milepost.evaluation.runner import EvalSpec

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    out = tmp_path / "k4"
    out.mkdir()
    (out / "verify-model.json").write_text(json.dumps({"model": "elsewhere", "sha256": "0" * 64}))
    with pytest.raises(SystemExit, match="other weights"):
        run_k(model, EvalSpec(env="rushhour", data="d", policy="p"), 4, out)
    assert model_digest(model) != model_digest(tmp_path)  # no weights hash differently from these


def test_the_action_check_ignores_the_plan(puzzle) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import PlanVerifiedPolicy, plan_score

    _, cluster, start = puzzle
    a = _answers(cluster, start)
    assert plan_score(start, a["optimal"], "action") == plan_score(start, a["detour"], "action") == (1, 0)
    assert plan_score(start, a["illegal"], "action") == plan_score(start, a["garbage"], "action") == (0, 0)
    with pytest.raises(ValueError, match="unknown check"):
        PlanVerifiedPolicy(SeedBackend({}), AgentSettings(), 2, check="vibes")


def test_the_spec_follows_the_like_folder_and_the_report_hides_unread_plans(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import render, spec_like

    run = {
        "env": "rushhour",
        "data": "d",
        "policy": "sft",
        "n": 4,
        "ks": [1, 4],
        "levels": "4-6",
        "limit": 40,
        "env_kwargs": {"max_steps": 30},
        "settings": {"memory_k": 0, "temperature": 0.8, "top_p": 1.0, "top_k": 0, "max_new_tokens": 96},
        "seed": 4,
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    same = spec_like(tmp_path, "verify")
    assert (same.levels, same.seed, same.settings.temperature, same.settings.max_new_tokens) == ("4-6", 4, 0.8, 96)
    other = spec_like(tmp_path, "verify", "7-9", 0.0)
    assert (other.levels, other.settings.temperature, other.limit) == ("7-9", 0.0, 40)
    level = {
        "terminations": {"solved": 3, "budget_exhausted": 1},
        "avg": {"value": 0.75, "lo": 0.5, "hi": 1.0},
        "pass_at": {"4": {"value": 1.0}},
        "step_accuracy": 0.5,
    }
    row = {"metrics": {"levels": [level]}, "turns_played": 10, "with_solving_plan": 0.3, "solving_share": 0.2}
    row |= {"kept_nonzero": 0.1, "tokens_per_turn": 40.0, "wall_s": 60.0}
    plan, action = render([row | {"k": 4, "check": "plan"}, row | {"k": 4, "check": "action"}], 4).splitlines()[2:]
    assert plan == "| 4 | 4 | 75.0 [50.0, 100.0] | 100.0 | 50.0 | 2.5 | 30.0 | 20.0 | 10.0 | 40 | 1.0 |"
    assert action == "| 4 | 4 | 75.0 [50.0, 100.0] | 100.0 | 50.0 | 2.5 | - | - | 10.0 | 40 | 1.0 |"


def test_the_comparison_reads_each_reports_setting_and_refuses_other_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify_compare import load, render, rows

    level = {"avg": {"value": 0.5, "lo": 0.25, "hi": 0.75}, "pass_at": {"4": {"value": 0.75}}, "step_accuracy": 0.4}
    report = {
        "setting": {"model": "ckpt/start-a", "check": "action", "level": "7-9", "temperature": 0.8, "n": 4},
        "results": [{"k": k, "metrics": {"levels": [level]}, "tokens_per_turn": 30.0 * k} for k in (1, 16)],
    }
    good = tmp_path / "a.json"
    good.write_text(json.dumps(report))
    table = rows([load(f"legal only={good}")])
    assert [(r["run"], r["model"], r["check"], r["level"], r["k"]) for r in table] == [
        ("legal only", "start-a", "action", "7-9", 1),
        ("legal only", "start-a", "action", "7-9", 16),
    ]
    assert (
        render(table).splitlines()[3]
        == "| legal only | `start-a` | action | 7-9 | 0.8 | 16 | 50.0 [25.0, 75.0] | 75.0 | 40.0 | 480 |"
    )
    other = tmp_path / "b.json"
    other.write_text(json.dumps({"rows": []}))
    for spec, match in (
        (f"x={other}", "not a plan_verify report"),
        (str(good), "LABEL=PATH"),
        ("x=/no/file", "/no/file"),
    ):
        with pytest.raises(SystemExit, match=match):
            load(spec)


def test_a_turn_log_cut_short_by_a_kill_keeps_its_whole_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from experiments.plan_verify import drop_partial_line, read_records

    log = tmp_path / "verify-turns.jsonl"
    assert read_records(log) == []
    log.write_text('{"turn": 0}\n{"turn": 1}\n{"tur')
    assert read_records(log) == [{"turn": 0}, {"turn": 1}]
    drop_partial_line(log)  # what a resumed run does before it appends
    assert log.read_text() == '{"turn": 0}\n{"turn": 1}\n'
    drop_partial_line(log)
    assert log.read_text() == '{"turn": 0}\n{"turn": 1}\n'
    log.write_text('{"turn": 0}\nnot json\n{"turn": 2}\n')
    with pytest.raises(SystemExit, match="line 2 is not JSON"):
        read_records(log)
