"""Progress judging (--judge-every N): on-track / off-track verdicts, replans on off-track, and the judge's
agreement with the environment's own progress."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.backends.scripted import ScriptedPolicy
from milepost.cli.main import main
from milepost.datasets import write_dataset
from milepost.envs.sudoku import SudokuEnv
from milepost.errors import InputError
from milepost.planning import FallbackPolicy, SGOAgent, SGOConfig
from milepost.planning.progress_judge import LLMProgressJudge, environment_progress, parse_track
from tests.planning.fakes import CannedBackend, sudoku_tasks

ROOT = Path(__file__).resolve().parents[2]


def test_verdicts_and_the_environment_truth() -> None:
    assert parse_track("ON-TRACK") is True and parse_track("off track.") is False
    assert parse_track("The agent is OFF_TRACK") is False and parse_track("maybe") is None
    assert parse_track("x" * 300 + "ON-TRACK") is None  # only the start of an answer counts
    assert environment_progress(6, 4, solved=False, dead=False) is True
    assert environment_progress(6, 6, solved=False, dead=False) is False
    assert environment_progress(6, None, solved=False, dead=True) is False
    assert environment_progress(6, None, solved=False, dead=False) is None
    assert environment_progress(None, None, solved=True, dead=False) is True


def _run(answer: str, every: int, policy: ScriptedPolicy, empties: int = 10) -> list[Any]:
    tasks = sudoku_tasks(3, empties, seed=7)
    judge = CannedBackend([answer], name="judge")
    agent = SGOAgent(
        config=SGOConfig(fallback=FallbackPolicy(max_replans=2), judge_every=every),
        progress_judge=LLMProgressJudge(judge),
    )
    settings = AgentSettings(memory_k=0, batch_size=8)
    episodes = run_episodes(
        lambda: SudokuEnv(size=4, max_steps=16), [Job(t) for t in tasks], policy, settings, seed=0,
        progress=False, agent=agent,
    )  # fmt: skip
    assert judge.requests and "ON-TRACK or OFF-TRACK" in judge.requests[0].messages[-1]["content"]
    return episodes


def test_an_off_track_judge_replans_within_the_budget() -> None:
    episodes = _run("OFF-TRACK", 2, ScriptedPolicy("oracle"))
    for ep in episodes:
        sgo = ep.meta["sgo"]
        # 10 fills, one per turn: checks after turns 2, 4, 6, 8 (the 10th turn ends the episode)
        assert ep.success and ep.steps == 10 and sgo["progress_checks"] == 4
        assert sgo["progress_off_track"] == 4 and sgo["progress_replans"] == 2 and sgo["replans"] == 2
        # the oracle always makes progress: an off-track judge never agrees
        assert sgo["progress_known"] == 4 and sgo["progress_agree"] == 0
        events = [e for e in sgo["events"] if e["kind"] == "progress_judged"]
        assert [e["turn"] for e in events] == [1, 3, 5, 7] and all(e["environment"] is True for e in events)


def test_an_on_track_judge_agrees_with_progress_and_never_replans() -> None:
    episodes = _run("ON-TRACK", 3, ScriptedPolicy("oracle"))
    for ep in episodes:
        sgo = ep.meta["sgo"]
        assert sgo["progress_checks"] == 3 and sgo["progress_agree"] == 3 and sgo["replans"] == 0
    # a policy that only fails: the environment says off track (no progress, or a dead end)
    stuck = _run("ON-TRACK", 2, ScriptedPolicy("noisy-oracle", 0.0, "format"), empties=6)
    for ep in stuck:
        sgo = ep.meta["sgo"]
        assert sgo["progress_checks"] > 0 and sgo["progress_agree"] == 0
    # an answer that is neither abstains: no agreement counted either way
    for ep in _run("I think so", 2, ScriptedPolicy("oracle")):
        assert ep.meta["sgo"]["progress_abstained"] == ep.meta["sgo"]["progress_checks"] > 0
        assert ep.meta["sgo"]["progress_known"] == 0


def test_judge_every_needs_a_judge() -> None:
    with pytest.raises(InputError, match="needs a progress judge"):
        SGOAgent(config=SGOConfig(judge_every=2))
    with pytest.raises(ValueError, match="judge_every"):
        SGOConfig(judge_every=-1)


def test_eval_judge_every_reports_the_agreement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    torch.set_num_threads(1)
    data = write_dataset(tmp_path / "ds", {"train": [], "test": sudoku_tasks(2, 8, seed=2)}, {"seed": 2})
    judge = f"hf:{ROOT / 'checkpoints' / 'sudoku4-sft'}"
    out = tmp_path / "run"
    argv = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "noisy-oracle:0.7", "--agent", "sgo"]
    argv += ["--judge", judge, "--judge-every", "2", "--n", "1", "--k", "1", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    sgo = json.loads((out / "metrics.json").read_text())["sgo"]["all"]
    assert sgo["progress_checks"] > 0
    assert sgo["progress_known"] + sgo["progress_abstained"] <= sgo["progress_checks"]
    report = (out / "report.md").read_text()
    assert "| progress checks (judge every N turns) |" in report
    assert "| judge agrees with the environment's progress |" in report
    capsys.readouterr()
    for extra, message in ((["--agent", "sgo"], "needs --agent sgo and a --judge"), ([], "needs --agent sgo")):
        bad = ["eval", "--env", "sudoku", "--data", str(data), "--policy", "oracle", "--judge-every", "2", *extra]
        assert main([*bad, "--out", str(tmp_path / "bad")]) == 2
        assert message in capsys.readouterr().err
