"""StuckDetector counts repeats inside its window only: one just outside does not count, one just inside does."""

from __future__ import annotations

from milepost.planning.stuck import StuckDetector


def test_a_repeated_action_just_outside_the_window_is_not_counted() -> None:
    # No subgoals: W = min_window = 4 and 'stuck' means 3 equal actions within the last W turns.
    outside = StuckDetector([])
    flags = [outside.update(f"s{i}", act) for i, act in enumerate(["a", "a", "b", "c", "a"])]
    assert flags == [False] * 5  # the first "a" is 5 turns back, just outside W = 4
    inside = StuckDetector([])
    flags = [inside.update(f"s{i}", act) for i, act in enumerate(["a", "a", "b", "a"])]
    assert flags == [False, False, False, True]  # all three "a" within the last 4 turns


def test_a_repeated_state_just_outside_the_window_is_not_counted() -> None:
    states = ["x", "x", "y", "z", "x"]
    narrow = StuckDetector([], min_window=4)
    assert [narrow.update(s, f"a{i}") for i, s in enumerate(states)] == [False] * 5
    wide = StuckDetector([10])  # W = 2 * 10 = 20 while the 10-step subgoal is current
    assert [wide.update(s, f"a{i}") for i, s in enumerate(states)] == [False] * 4 + [True]


def test_nothing_recorded_is_never_stuck_and_a_reset_starts_a_fresh_window() -> None:
    det = StuckDetector([], repeats=1)  # even the strictest setting needs one recorded turn
    assert not det.is_stuck()
    assert det.update("s", "a")  # one occurrence is already a repeat at repeats=1
    det.reset_progress()
    assert not det.is_stuck() and det.since_milestone == 0
    clock = StuckDetector([2])  # W = 4
    assert [clock.update(f"s{i}", f"a{i}") for i in range(3)] == [False] * 3
    clock.reset_progress()  # a replan: the turns without a milestone start counting again
    assert [clock.update(f"t{i}", f"b{i}") for i in range(4)] == [False, False, False, True]
    rep = StuckDetector([])
    rep.update("s", "a")
    rep.update("s", "a")
    rep.reset_progress()  # the repeats before the reset are forgotten
    assert not rep.update("s", "a") and not rep.update("s", "a") and rep.update("s", "a")
