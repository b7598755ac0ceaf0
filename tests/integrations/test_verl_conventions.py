"""The verl agent loop's conventions (``extra_fields["conventions"]`` and ``["turn_rewards"]``); runs in
.venv-verl (``make test-verl``), skipped where verl is not installed."""

from __future__ import annotations

import itertools
from pathlib import Path

from milepost.integrations.conventions import CONVENTION_KEYS
from tests.integrations.test_verl import _play, _task, needs_verl


@needs_verl
def test_the_agent_loop_reports_the_conventions_per_turn(tiny_model_dir: Path) -> None:
    from milepost.backends.scripted import ScriptedPolicy

    task = _task()
    out, _ = _play(tiny_model_dir, ScriptedPolicy("noisy-oracle", p=0.6, mode="mixed"), task)
    records = out.extra_fields["conventions"]
    steps = out.extra_fields["milepost"]["steps"]
    assert len(records) == steps + 1 and all(set(CONVENTION_KEYS) <= set(r) for r in records)
    assert records[0]["goal_distance"] == task.goal_distance and records[0]["turn_rewards"] == []
    assert out.extra_fields["turn_rewards"] == records[-1]["turn_rewards"] and len(records[-1]["turn_rewards"]) == steps
    # Sudoku's atomic mode applies at most one action a turn (c_t = 1): A* = d(s_t) - d(s_t+1) - 1 exactly.
    for before, after in itertools.pairwise(records):
        a, b = before["remaining_distance"], after["remaining_distance"]
        want = None if b is None and a is not None else (-1.0 if a is None else float(a - b - 1))
        assert after["optimal_advantage"] == want
    assert len({r["env_state_hash"] for r in records}) >= 2
