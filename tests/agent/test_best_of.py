"""TextEnv.answer_error and milepost.agent.best_of: best-of-k answers kept by the environment's own rules."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milepost.agent.best_of import LegalBestOf, sample_seed
from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
from milepost.backends.base import GenerationRequest
from milepost.envs.rushhour.env import RushHourEnv
from milepost.envs.rushhour.rules import oracle_move
from milepost.envs.sudoku import SudokuEnv
from milepost.types import Completion
from tests.planning.fakes import rush_tasks

ROOT = Path(__file__).resolve().parents[2]
MOVE_TEXT = st.builds(
    lambda v, d, n: f"ACTION: move({v}, {d}{n})",
    st.sampled_from("ABCDEFGHZ"),
    st.sampled_from(["up", "down", "left", "right"]),
    st.sampled_from(["", ", 1", ", 2", ", 3"]),
)
ANSWERS = st.one_of(MOVE_TEXT, st.text(max_size=30), st.builds(lambda a, b: f"ACTION: {a}; {b}", MOVE_TEXT, MOVE_TEXT))


LEGAL_RUN = st.lists(st.integers(0, 50), min_size=1, max_size=4)  # indices into each state's legal moves


def _legal_run(env: RushHourEnv, picks: list[int]) -> str:
    """An answer of len(picks) one-cell moves, each legal after the ones before it (played on a copy)."""
    state, moves = env.state.clone(), []
    for pick in picks:
        legal = state.legal_actions()
        moves.append(legal[pick % len(legal)])
        state.apply(moves[-1])
    return "ACTION: " + "; ".join(m.text() for m in moves)


@pytest.mark.parametrize("mode", ["atomic", "slide", "flexible"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ANSWERS, picks=LEGAL_RUN, bad=st.booleans())
def test_answer_error_is_the_rejection_step_gives_and_changes_nothing(
    mode: str, text: str, picks: list[int], bad: bool
) -> None:
    env = RushHourEnv(action_mode=mode)
    env.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    if mode == "flexible" and len(text) % 2:  # a run of legal moves, its last one spoiled when ``bad``
        text = _legal_run(env, picks) + ("; move(Z, up)" if bad else "")
    positions = env.state.positions
    before = (env.state.key, list(positions), env.state.occ, env.steps, env.completed)
    error = env.answer_error(text)
    successor = env.answer_successor(text)
    assert (env.state.key, list(env.state.positions), env.state.occ, env.steps, env.completed) == before
    assert env.state.positions is positions  # restored in place
    assert env.step(text)[4]["error"] == error
    # The successor is the state an accepted answer leads to (several moves in flexible mode: played and
    # undone); a rejected one has none.
    if error is None:
        assert successor == env.state_key() == env.state.key
    else:
        assert successor is None


def test_answer_error_on_sudoku_and_its_limit_in_the_macro_modes() -> None:
    env = SudokuEnv(size=4)
    env.reset(seed=3)
    texts = [f"ACTION: value({d}, r{r}c{c})" for d in (1, 2, 3, 4, 9) for r in (1, 2, 3, 4) for c in (1, 2, 3, 4)]
    errors = []
    for text in [*texts, "no action", "ACTION: x", "ACTION: value(1, r1c1); value(2, r1c2)"]:
        errors.append(env.answer_error(text))
        probe = SudokuEnv(size=4)
        probe.reset(seed=3)
        assert probe.step(text)[4]["error"] == errors[-1]
    assert None in errors and len({e for e in errors if e}) > 3  # accepted and several kinds of rejection
    # Flexible mode in a game that cannot save and restore its state (Sudoku): the second action's legality
    # depends on the first being applied, so only play shows it. Rush Hour plays such answers and undoes them.
    flex = SudokuEnv(size=4, action_mode="flexible")
    flex.reset(seed=3)
    first = next(t for t, e in zip(texts, errors) if e is None).removeprefix("ACTION: ")
    text = f"ACTION: {first}; {first}"  # the second fills the cell the first filled
    assert flex.answer_successor(text) is None
    assert flex.answer_error(text) is None and flex.step(text)[4]["error"] is not None
    rush = RushHourEnv(action_mode="flexible")
    rush.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    one = rush.state.legal_actions()[0]
    text = f"ACTION: {one.text()}; move(Z, up)"
    assert rush.answer_error(text) is not None and rush.answer_successor(text) is None
    assert rush.answer_error(text) == rush.step(text)[4]["error"]
    # An answer that solves the puzzle and then goes on: step stops at the solved board, and so does the preview.
    rush.reset(options={"task": rush_tasks(1, 3, 1)[0]})
    path = []
    probe = RushHourEnv(action_mode="flexible")
    probe.reset(options={"task": rush_tasks(1, 3, 1)[0]})
    while not probe.rules.is_solved():  # type: ignore[union-attr]
        path.append(oracle_move(probe.rules).text())  # type: ignore[arg-type, union-attr]
        probe.step(f"ACTION: {path[-1]}")
    text = "ACTION: " + "; ".join([*path, "move(Z, up)"])
    assert rush.answer_error(text) is None and rush.answer_successor(text) == probe.state_key()
    assert rush.step(text)[4]["error"] is None and rush.rules.is_solved()  # type: ignore[union-attr]
    # One legal action in a game without state keys: no successor (and nothing called that the game lacks).
    sudoku = SudokuEnv(size=4)
    sudoku.reset(seed=3)
    assert sudoku.answer_error(f"ACTION: {first}") is None and sudoku.answer_successor(f"ACTION: {first}") is None
    with pytest.raises(RuntimeError, match="reset"):
        RushHourEnv().answer_error("ACTION: move(A, right)")
    with pytest.raises(RuntimeError, match="reset"):
        RushHourEnv().answer_successor("ACTION: move(A, right)")
    with pytest.raises(RuntimeError, match="reset"):
        RushHourEnv().state_key()


class IndexBackend:
    """Unit-test fixture: answers the i-th request of each call with ``texts[i % len(texts)]`` and i + 1 tokens."""

    name = "index"

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.requests += requests
        return [
            Completion([1], [2] * (i + 1), [0.0] * (i + 1), self.texts[i % len(self.texts)], "stop")
            for i in range(len(requests))
        ]


def _live(env: Any, seed: int = 7) -> Any:
    return SimpleNamespace(
        env=env, seed=seed, turns=[], messages=lambda: [{"role": "user", "content": "x"}], policy_state={}
    )


def test_the_first_accepted_sample_is_kept_and_sample_0_has_the_plain_seed() -> None:
    env = RushHourEnv()
    env.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    good = f"REASON: r. ACTION: {oracle_move(env.rules).text()}"  # type: ignore[arg-type, union-attr]
    other = f"REASON: r. ACTION: {env.state.legal_actions()[-1].text()}"
    texts = ["I do not know.", "REASON: r. ACTION: move(Z, up)", good, other]
    backend = IndexBackend(texts)
    policy = LegalBestOf(backend, AgentSettings(), k=4)  # type: ignore[arg-type]
    eps = [_live(env), _live(env, seed=8)]
    kept = policy.act(eps)
    assert [c.text for c in kept] == [good, good]
    # Each episode's own counts (its record's meta["policy_counts"]): sample tokens 1-4, then 5-8.
    assert [ep.policy_state["counts"] for ep in eps] == [
        {"turns": 1, "kept_accepted": 1, "accepted_samples": 2, "tokens": 1 + 2 + 3 + 4},
        {"turns": 1, "kept_accepted": 1, "accepted_samples": 2, "tokens": 5 + 6 + 7 + 8},
    ]
    assert [r.params.seed for r in backend.requests[:4]] == [sample_seed(7_000, j) for j in range(4)]
    assert backend.requests[0].params.seed == 7_000  # BackendPolicy's seed for turn 0 of episode seed 7
    assert len({r.params.seed for r in backend.requests[:4]}) == 4
    assert policy.stats == {"turns": 2, "kept_accepted": 2, "accepted_samples": 4, "tokens": sum(range(1, 9))}
    # None accepted: sample 0 is played (and the environment rejects it as the plain agent's would be).
    none = LegalBestOf(IndexBackend(texts[:2]), AgentSettings(), k=2)  # type: ignore[arg-type]
    assert none.act([_live(env)])[0].text == texts[0]
    assert none.stats["kept_accepted"] == 0
    with pytest.raises(ValueError, match=">= 1"):
        LegalBestOf(backend, AgentSettings(), k=0)  # type: ignore[arg-type]


OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


def test_avoid_revisits_keeps_the_first_accepted_answer_that_leads_somewhere_new() -> None:
    env = RushHourEnv()
    env.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    ep = _live(env)
    first = env.state.legal_actions()[0]
    policy = LegalBestOf(IndexBackend([f"ACTION: {first.text()}"]), AgentSettings(), k=1, avoid_revisits=True)
    policy.act([ep])  # turn 0: the start joins the seen states
    start = env.state_key()
    assert ep.policy_state["seen_states"] == {start}
    env.step(f"ACTION: {first.text()}")
    back = f"ACTION: move({first.vehicle}, {OPPOSITE[first.direction]})"
    assert env.answer_successor(back) == start
    onward = next(m for m in env.state.legal_actions() if env.answer_successor(f"ACTION: {m.text()}") != start)
    texts = ["no action", back, f"ACTION: {onward.text()}"]
    plain = LegalBestOf(IndexBackend(texts), AgentSettings(), k=3)
    assert [c.text for c in plain.act([_live(env)])] == [back]  # without the check: the first accepted
    avoiding = LegalBestOf(IndexBackend(texts), AgentSettings(), k=3, avoid_revisits=True)
    assert [c.text for c in avoiding.act([ep])] == [f"ACTION: {onward.text()}"]  # the same episode: start seen
    assert avoiding.stats["revisits_avoided"] == 1 and avoiding.stats["revisits_kept"] == 0
    assert ep.policy_state["seen_states"] == {start, env.state_key()}
    assert "revisits_avoided" not in plain.stats
    # Every accepted answer leads back: the first accepted is played, and counted.
    stuck = LegalBestOf(IndexBackend(["no action", back, back]), AgentSettings(), k=3, avoid_revisits=True)
    assert [c.text for c in stuck.act([ep])] == [back]
    assert stuck.stats["revisits_kept"] == 1 and stuck.stats["revisits_avoided"] == 0


def test_avoid_revisits_sees_through_a_several_move_answer() -> None:
    """Flexible mode: an answer that moves a car and back ends on the board it started from; the check plays
    the answer that leads somewhere new, and best-of without the check the first accepted one."""
    env = RushHourEnv(action_mode="flexible")
    env.reset(options={"task": rush_tasks(4, 6, 1)[0]})
    first = env.state.legal_actions()[0]
    there_and_back = f"ACTION: {first.text()}; move({first.vehicle}, {OPPOSITE[first.direction]})"
    onward = f"ACTION: {first.text()}"
    assert env.answer_error(there_and_back) is None and env.answer_successor(there_and_back) == env.state_key()
    texts = [there_and_back, onward]
    assert [c.text for c in LegalBestOf(IndexBackend(texts), AgentSettings(), k=2).act([_live(env)])] == texts[:1]
    avoiding = LegalBestOf(IndexBackend(texts), AgentSettings(), k=2, avoid_revisits=True)
    assert [c.text for c in avoiding.act([_live(env)])] == [onward]
    assert avoiding.stats["revisits_avoided"] == 1


def test_a_game_without_state_keys_plays_as_plain_best_of() -> None:
    env = SudokuEnv(size=4)
    env.reset(seed=3)
    assert env.state_key() is None and env.answer_successor("ACTION: value(1, r1c1)") is None
    texts = ["no action", "ACTION: value(9, r1c1)"] + [
        f"ACTION: value({d}, r{r}c{c})" for d in (1, 2, 3, 4) for r in (1, 2) for c in (1, 2)
    ]
    plain = LegalBestOf(IndexBackend(texts), AgentSettings(), k=len(texts)).act([_live(env)])
    avoiding = LegalBestOf(IndexBackend(texts), AgentSettings(), k=len(texts), avoid_revisits=True)
    assert [c.text for c in avoiding.act([_live(env)])] == [c.text for c in plain]
    assert avoiding.stats["revisits_avoided"] == avoiding.stats["revisits_kept"] == 0


@pytest.fixture(scope="module")
def rush_model() -> Any:
    import torch

    from milepost.backends.hf import HFBackend

    torch.set_num_threads(1)
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        return HFBackend(ROOT / "checkpoints" / "rushhour-sft-d4slide3")


def test_k_1_plays_the_plain_agents_episodes_and_k_4_plays_fewer_rejected_turns(rush_model: Any) -> None:
    """With a real tiny model: best of 1 is the plain policy token for token; best of 4 is rejected less."""
    tasks = rush_tasks(4, 6, 3)
    jobs = [Job(t, s) for t in tasks for s in range(2)]
    agent_settings = AgentSettings(temperature=0.8, max_new_tokens=32)

    def play(policy: Any) -> list[Any]:
        return run_episodes(lambda: RushHourEnv(max_steps=8), jobs, policy, agent_settings, seed=1, progress=False)

    plain = play(BackendPolicy(rush_model, agent_settings))
    one = play(LegalBestOf(rush_model, agent_settings, k=1))
    assert [[t.completion_ids for t in ep.turns] for ep in one] == [
        [t.completion_ids for t in ep.turns] for ep in plain
    ]
    four = LegalBestOf(rush_model, agent_settings, k=4)
    best = play(four)

    def rejected(eps: list[Any]) -> float:
        turns = [t for ep in eps for t in ep.turns]
        return sum(t.error is not None for t in turns) / len(turns)

    assert four.stats["turns"] == sum(len(ep.turns) for ep in best)
    assert [ep.meta["policy_counts"]["turns"] for ep in best] == [len(ep.turns) for ep in best]
    for key, total in four.stats.items():
        assert sum(ep.meta["policy_counts"][key] for ep in best) == total
    assert all("policy_counts" not in ep.meta for ep in plain)
    assert rejected(best) == pytest.approx(1 - four.stats["kept_accepted"] / four.stats["turns"])
    assert rejected(best) < rejected(plain)


def test_eval_best_of_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from milepost.cli.main import main
    from milepost.datasets import write_dataset

    data = write_dataset(tmp_path / "data", {"train": [], "test": rush_tasks(4, 6, 2)}, {"seed": 0})
    model = ROOT / "checkpoints" / "rushhour-sft-d4slide3"
    out = tmp_path / "eval"
    args = ["eval", "--env", "rushhour", "--data", str(data), "--policy", f"hf:{model}", "--n", "1", "--k", "1"]
    args += ["--out", str(out), "--max-steps", "4", "--best-of", "3", "--no-progress"]
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        assert main(args) == 0
    assert json.loads((out / "run.json").read_text())["best_of"] == 3
    assert "Best of 3 (`--best-of`)" in (out / "report.md").read_text()
    played = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    counts = json.loads((out / "metrics.json").read_text())["best_of"]
    assert counts["turns"] == sum(len(ep["turns"]) for ep in played) and counts["k"] == 3
    assert counts["tokens"] >= counts["turns"] * 3 and 0 <= counts["accepted_sample_share"] <= 1
    assert f"({counts['turns']} turns of {len(played)} episodes)." in (out / "report.md").read_text()
    with contextlib.redirect_stdout(open(os.devnull, "w")):  # a resume plays nothing and sums the same records
        assert main(args) == 0
    assert json.loads((out / "metrics.json").read_text())["best_of"] == counts
    capsys.readouterr()
    assert main([*args[:-3], "--best-of", "2", "--no-progress"]) == 2  # a resume must keep K
    assert "different configuration" in capsys.readouterr().err
    assert (
        main(
            [
                "eval",
                "--env",
                "rushhour",
                "--data",
                str(data),
                "--policy",
                "oracle",
                "--best-of",
                "2",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "--best-of needs a model policy, not 'oracle'" in capsys.readouterr().err
    assert main([*args[:-3], "--best-of", "0"]) == 2
    assert "--best-of must be >= 1, got 0" in capsys.readouterr().err
    assert main([*args[:-3], "--avoid-revisits"]) == 2
    assert "--avoid-revisits chooses among sampled answers: it needs --best-of K" in capsys.readouterr().err
    again = tmp_path / "again"
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        more = ["--out", str(again), "--max-steps", "4", "--best-of", "3", "--avoid-revisits", "--no-progress"]
        assert main([*args[:-7], *more]) == 0
    assert json.loads((again / "run.json").read_text())["avoid_revisits"] is True
    assert "preferring one that leads to a state the episode had not been in" in (again / "report.md").read_text()
    looped = json.loads((again / "metrics.json").read_text())["best_of"]
    assert 0 <= looped["revisits_avoided_share"] <= 1 and "revisits_kept" in looped
    assert "the loop check changed the answer in" in (again / "report.md").read_text()


def _episode(counts: dict[str, int] | None) -> Any:
    return SimpleNamespace(meta={} if counts is None else {"policy_counts": counts})


def test_best_of_summary_sums_the_episodes_counts_and_divides_by_turns_and_samples() -> None:
    from milepost.evaluation.report import best_of_sentence
    from milepost.evaluation.runner import best_of_summary

    assert best_of_summary([_episode(None)], 4) is None  # a plain run, or one from before the counts
    assert best_of_sentence(None) == ""
    a = {"turns": 3, "kept_accepted": 2, "accepted_samples": 5, "tokens": 60, "revisits_avoided": 1, "revisits_kept": 0}
    b = {"turns": 1, "kept_accepted": 1, "accepted_samples": 4, "tokens": 20, "revisits_avoided": 0, "revisits_kept": 1}
    out = best_of_summary([_episode(a), _episode(None), _episode(b)], 4)
    assert out is not None
    assert out["episodes"] == 2 and out["turns"] == 4 and out["tokens"] == 80
    assert out["tokens_per_turn"] == 20.0
    assert out["accepted_sample_share"] == 9 / 16 and out["kept_accepted_share"] == 3 / 4
    assert out["revisits_avoided_share"] == out["revisits_kept_share"] == 1 / 4
    text = best_of_sentence(out)
    assert "20.0 tokens generated over the 4 samples" in text and "56.2% of samples acceptable" in text
    assert "changed the answer in 25.0% of turns" in text and "(4 turns of 2 episodes)" in text
    plain = best_of_summary([_episode({k: a[k] for k in ("turns", "kept_accepted", "accepted_samples", "tokens")})], 2)
    assert plain is not None and "revisits_avoided_share" not in plain
    assert "loop check" not in best_of_sentence(plain)


def test_best_of_refuses_sudokus_single_answer_proxy() -> None:
    from milepost.errors import InputError
    from milepost.evaluation.runner import EvalSpec

    with pytest.raises(InputError, match="Sudoku's --single-turn is one whole-board answer"):
        EvalSpec(env="sudoku", data="d", policy="hf:m", best_of=2, single_turn=True)
    # Rush Hour's proxy is multi-turn (slide moves), where best-of chooses each turn.
    assert EvalSpec(env="rushhour", data="d", policy="hf:m", best_of=2, single_turn=True).best_of == 2


def test_a_plain_run_folder_from_before_best_of_resumes() -> None:
    from milepost.evaluation.runner import EvalSpec

    spec = EvalSpec(env="sudoku", data="d", policy="hf:m")
    assert "best_of" not in spec.identity()
    assert EvalSpec(env="sudoku", data="d", policy="hf:m", best_of=2).identity()["best_of"] == 2
    assert "avoid_revisits" not in EvalSpec(env="sudoku", data="d", policy="hf:m", best_of=2).identity()
    spec = EvalSpec(env="sudoku", data="d", policy="hf:m", best_of=2, avoid_revisits=True)
    assert spec.identity()["avoid_revisits"] is True
