"""experiments/sft_size_compare.py: runs side by side at matched examples, from sft_starts result files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import sft_size_compare as cmp


def _point(step: int, optimal: float, episode: dict | None = None) -> dict:
    p: dict = {
        "step": step,
        "examples_seen": 32 * step,
        "loss": 0.1,
        "train_s": 60.0 * step / 20,
        "load": 1.0,
        "probe_optimal": optimal,
        "probe_legal": optimal + 0.05,
    }
    if episode is not None:
        p["episode"] = {"4-6": episode}
    return p


def _episode(acc: float, avg: float) -> dict:
    return {
        "tasks": 40,
        "avg": avg,
        "avg_lo": avg - 0.1,
        "avg_hi": avg + 0.1,
        "pass": {"1": avg, "4": avg + 0.2},
        "step_accuracy": acc,
    }


def _write(tmp: Path, name: str, size: str, curve: list[dict]) -> str:
    run = {"args": {"size": size, "threads": 1, "init": None}, "examples": 41289, "curve": curve, "timings": {}}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(run))
    return f"{name}={path}"


@pytest.fixture
def runs(tmp_path: Path) -> list[str]:
    small = [_point(500, 0.60), _point(1000, 0.75), _point(1320, 0.69, _episode(0.23, 0.28))]
    big = [
        _point(500, 0.70),
        _point(1000, 0.80),
        _point(1320, 0.85, _episode(0.40, 0.50)),
        _point(1500, 0.88),
        _point(2500, 0.90, _episode(0.45, 0.60)),
    ]
    return [_write(tmp_path, "small", "1m", small), _write(tmp_path, "big", "5m", big)]


def test_the_match_is_the_smallest_end_and_each_run_is_read_at_or_below_it(runs: list[str]) -> None:
    loaded = dict(cmp.load(s) for s in runs)
    match = cmp.default_match(loaded)
    assert match == 32 * 1320
    steps = [(p or {}).get("step") for p in (cmp.at_examples(loaded["big"], n) for n in (match, 32 * 1400))]
    assert steps == [1320, 1320]  # not its later, better checkpoints
    assert cmp.at_examples(loaded["big"], 100) is None
    text = cmp.render(loaded, match)
    assert "| big | 1320 | 42240 | 66.0 | 85.0 | 90.0 | 40.0 | 50.0 [40.0, 60.0] | 70.0 |" in text
    assert "| small | 1320 | 42240 | 66.0 | 69.0 | 74.0 | 23.0 | 28.0 [18.0, 38.0] | 48.0 |" in text
    # every episode evaluation is listed, the later one of the big run too
    assert "| big | 2500 | 80000 | 125.0 | 45.0 | 60.0 [50.0, 70.0] | 80.0 |" in text


def test_main_writes_the_report_its_json_and_plot(runs: list[str], tmp_path: Path) -> None:
    reading = tmp_path / "reading.md"
    reading.write_text("### Reading\nhand-written\n")
    out = tmp_path / "cmp.md"
    cmp.main([*runs, "--out", str(out), "--reading", str(reading)])
    text = out.read_text()
    assert text.startswith("# Rush Hour SFT starts by model size") and text.endswith("hand-written\n")
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["match_examples"] == 42240
    assert [e["step"] for e in data["runs"]["big"]["episodes"]] == [1320, 2500]
    assert data["runs"]["big"]["at_match"]["episode"]["step_accuracy"] == 0.40
    assert out.with_suffix(".png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["just-a-path.json", "b=x.json"], "expected LABEL=PATH"),
        (["a=/nonexistent/a.json", "b=/nonexistent/b.json"], "/nonexistent/a.json"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        cmp.main(argv)


def test_one_run_or_a_repeated_label_is_refused(runs: list[str]) -> None:
    with pytest.raises(SystemExit, match="two or more"):
        cmp.main(runs[:1])
    with pytest.raises(SystemExit, match="share a label"):
        cmp.main([runs[0], runs[0]])


def test_the_answer_column_appears_only_when_a_run_is_not_the_default(runs: list[str], tmp_path: Path) -> None:
    loaded = dict(cmp.load(s) for s in runs)
    assert "| answer |" not in cmp.render(loaded, 42240)  # the earlier reports' table, unchanged
    plan = json.loads(Path(runs[0].split("=", 1)[1]).read_text())
    plan["args"]["answer"] = "plan-back"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    loaded["plan"] = cmp.load(f"plan={path}")[1]
    text = cmp.render(loaded, 42240)
    assert "| run | size | answer | init |" in text
    assert "| plan | 1m | plan-back | from scratch |" in text and "| small | 1m | move | from scratch |" in text
    out = tmp_path / "titled.md"
    cmp.main([*runs, "--out", str(out), "--title", "Rush Hour SFT starts by answer style"])
    assert out.read_text().startswith("# Rush Hour SFT starts by answer style\n")
