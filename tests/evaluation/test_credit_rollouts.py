"""``credit audit --rollouts``: another framework's rollouts replayed, its advantages scored against A*.

Rollouts are played here by a noisy oracle on Rush Hour (no dead ends, so every A* is finite) and A* is computed
from the environment's own distances while playing; the file then carries advantages whose relation to A* is
known: A* itself, A* plus Gaussian noise, -A*, and independent noise.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from milepost.backends.scripted import ScriptedPolicy
from milepost.cli.main import main
from milepost.datasets import derived_manifest, write_dataset
from milepost.envs import make_env
from milepost.errors import InputError
from milepost.evaluation.rollouts_import import read_rollouts, replay

TASKS = 8
SAMPLES = 4
NOISE_SD = 1.0  # the stated noise of the A* + noise rollouts


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A Rush Hour dataset folder and noisy-oracle rollouts on it: per rollout its task, turn texts, A* per turn,
    the observations and distances seen while playing."""
    root = tmp_path_factory.mktemp("rollouts")
    env = make_env("rushhour")
    tasks = [dataclasses.replace(env.sample_task(seed), split="test") for seed in range(TASKS)]
    assert len({t.task_id for t in tasks}) == TASKS
    data = write_dataset(root / "data", {"test": tasks}, derived_manifest({"test": tasks}))
    policy, rng = ScriptedPolicy("noisy-oracle", p=0.55, mode="mixed"), random.Random(0)
    rollouts = []
    for task in tasks:
        for sample in range(SAMPLES):
            game = make_env("rushhour", max_steps=3 * task.goal_distance)
            obs, info = game.reset(options={"task": task})
            before, texts, a_star, distances, first_obs = info["remaining_distance"], [], [], [], obs
            done = False
            while not done:
                text = policy.answer(game, rng)
                obs, _, terminated, truncated, info = game.step(text)
                after = info["remaining_distance"]
                texts.append(text)
                a_star.append(float(before - after - max(1, len(info["actions"]))))
                distances.append(after)
                before, done = after, terminated or truncated
            rollouts.append(
                {"task": task, "sample": sample, "texts": texts, "a_star": a_star, "d": distances, "obs": first_obs}
            )
    return {"data": data, "rollouts": rollouts}


def _write(path: Path, rollouts: list[dict[str, Any]], advantage: Any) -> Path:
    lines = []
    for r in rollouts:
        advs = advantage(np.array(r["a_star"]))
        turns = [{"text": t, "advantage": float(a)} for t, a in zip(r["texts"], advs)]
        lines.append(json.dumps({"task_id": r["task"].task_id, "sample": r["sample"], "turns": turns}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _audit(tmp_path: Path, data: Path, file: Path, fmt: str = "milepost") -> dict[str, Any]:
    out = tmp_path / "audit"
    args = ["credit", "audit", "--rollouts", str(file), "--format", fmt, "--env", "rushhour", "--data", str(data)]
    args += ["--out", str(out), "--estimators", "distance,grpo,random", "--boot", "30", "--no-progress"]
    assert main(args) == 0
    return dict(json.loads((out / "credit.json").read_text()))


def test_the_replay_recovers_every_distance(played: dict[str, Any], tmp_path: Path) -> None:
    file = _write(tmp_path / "r.jsonl", played["rollouts"], lambda a: a)
    episodes, advs = replay(read_rollouts(file), "rushhour", played["data"])
    assert len(episodes) == len(played["rollouts"])
    for ep, adv, r in zip(episodes, advs, played["rollouts"]):
        assert [t.remaining_distance for t in ep.turns] == r["d"]
        assert adv.tolist() == r["a_star"] and ep.sample == r["sample"]
        assert ep.turns[0].observation == r["obs"]
    kinds = {a for r in played["rollouts"] for a in r["a_star"]}
    assert {0.0, -1.0, -2.0} <= kinds  # optimal, wasted (rejected or sideways) and regressing turns are all there


def test_known_advantages_give_the_expected_correlations(played: dict[str, Any], tmp_path: Path) -> None:
    """A* itself: 1; -A*: -1; N(0, 1) noise alone: ~0; A* + N(0, NOISE_SD^2): the Spearman correlation that
    simulation gives for these same A* values (2000 fresh noise draws, ranked by pandas)."""
    a_star = np.concatenate([r["a_star"] for r in played["rollouts"]])
    n = len(a_star)
    measured = {}
    g1, g2 = np.random.default_rng(1), np.random.default_rng(2)
    for name, advantage in (
        ("exact", lambda a: a),
        ("flipped", lambda a: -a),
        ("noisy", lambda a: a + g1.normal(0.0, NOISE_SD, len(a))),
        ("random", lambda a: g2.normal(0.0, 1.0, len(a))),
    ):
        folder = tmp_path / name
        folder.mkdir()
        result = _audit(folder, played["data"], _write(folder / "r.jsonl", played["rollouts"], advantage))
        assert result["turns"] == n and "imported" in result["ranking"]
        assert {"distance", "grpo", "random"} <= set(result["estimators"])  # beside milepost's estimators
        measured[name] = result["estimators"]["imported"]
    assert measured["exact"]["spearman"] == pytest.approx(1.0)
    assert measured["exact"]["kendall"] == pytest.approx(1.0)
    assert measured["flipped"]["spearman"] == pytest.approx(-1.0)
    assert abs(measured["random"]["spearman"]) < 4 / math.sqrt(n)
    g = np.random.default_rng(7)
    ranks = pd.Series(a_star).rank()  # Spearman: Pearson correlation of average ranks (pandas' own ranking)
    sims = [ranks.corr(pd.Series(a_star + g.normal(0.0, NOISE_SD, n)).rank()) for _ in range(2000)]
    expected, sd = float(np.mean(sims)), float(np.std(sims))
    got = measured["noisy"]["spearman"]
    assert abs(got - expected) < 4 * sd, (got, expected, sd)
    lo, hi = measured["noisy"]["spearman_interval"]
    assert lo < expected < hi
    print(
        f"turns {n}; Spearman with A*: exact {measured['exact']['spearman']:.3f}, flipped "
        f"{measured['flipped']['spearman']:.3f}, random {measured['random']['spearman']:.3f}, A*+N(0,{NOISE_SD:g}) "
        f"{got:.3f} (expected {expected:.3f} +- {sd:.3f}, interval [{lo:.3f}, {hi:.3f}])"
    )


def test_bad_lines_are_one_line_errors_naming_file_and_line(
    played: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "good.jsonl", played["rollouts"][:2], lambda a: a).read_text().splitlines()
    tid = played["rollouts"][0]["task"].task_id
    cases = {
        "nan": '{"task_id": "' + tid + '", "turns": [{"text": "x", "advantage": NaN}]}',
        "inf": '{"task_id": "' + tid + '", "turns": [{"text": "x", "advantage": Infinity}]}',
        "json": '{"task_id": ',
        "unknown": '{"task_id": "no-such-task", "turns": [{"text": "x", "advantage": 0}]}',
        "empty": json.dumps({"task_id": tid, "turns": []}),
        "string": json.dumps({"task_id": tid, "turns": [{"text": "x", "advantage": "1"}]}),
    }
    solved = next(x for x in played["rollouts"] if x["d"][-1] == 0)
    turns = [{"text": t, "advantage": 0.0} for t in [*solved["texts"], solved["texts"][-1]]]
    cases["past_the_end"] = json.dumps({"task_id": solved["task"].task_id, "turns": turns})
    for name, bad in cases.items():
        file = tmp_path / f"{name}.jsonl"
        file.write_text("\n".join([*good, bad]) + "\n", encoding="utf-8")
        args = ["credit", "audit", "--rollouts", str(file), "--env", "rushhour", "--data", str(played["data"])]
        assert main([*args, "--out", str(tmp_path / "o"), "--boot", "0", "--no-progress"]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{file}:3:" in err[0], (name, err)
    with pytest.raises(InputError, match="--rollouts needs --env and --data"):
        from milepost.cli.credit import run
        from milepost.cli.main import build_parser

        run(build_parser().parse_args(["credit", "audit", "--rollouts", str(file), "--out", str(tmp_path / "o")]))


# ---------------------------------------------------------------------------------------------------------------
# Converters: a small file in each framework's own shape


@pytest.mark.parametrize("template", ["shipped", "chatml"])
def test_verl_rollout_dump(played: dict[str, Any], tmp_path: Path, template: str) -> None:
    """verl's ``_dump_generations`` line: ``output`` is the response tokens decoded with special tokens skipped
    (``RayPPOTrainer._log_rollout_data``), the answers and milepost's observation messages in one string; built
    here with a shipped checkpoint's own tokenizer and chat template, and in ChatML, whose role words survive
    decoding."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(Path(__file__).parents[2] / "checkpoints" / "rushhour-sft-d4slide")
    file = tmp_path / "3.jsonl"
    lines = []
    rows = played["rollouts"][:6]
    for r in rows:
        game = make_env("rushhour", max_steps=len(r["texts"]))
        game.reset(options={"task": r["task"]})
        messages = [
            {"role": "system", "content": "goal"},
            {"role": "user", "content": f"Current observation:\n{r['obs']}"},
        ]
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        for text in r["texts"]:
            obs, _, _, _, info = game.step(text)
            rejected = f"Rejected: {info['error']}\n" if info["error"] else ""
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"{rejected}Current observation:\n{obs}"},
            ]
        if template == "shipped":
            full = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            output = tok.decode(tok(full[len(prompt) :])["input_ids"], skip_special_tokens=True)
        else:
            output = "".join(
                f"{m['content']}\nuser\n" if m["role"] == "assistant" else f"{m['content']}\nassistant\n"
                for m in messages[2:]
            )
        score = float(r["d"][-1] == 0)
        lines.append(
            json.dumps({"input": prompt, "output": output, "gts": None, "score": score, "step": 3, "acc": score})
        )
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rollouts = read_rollouts(file, "verl")
    assert all(x.task_id is None and x.texts == [] for x in rollouts)  # turns are cut out during the replay
    episodes, advs = replay(rollouts, "rushhour", played["data"])  # tasks found by the prompt's observation
    assert [ep.task_id for ep in episodes] == [r["task"].task_id for r in rows]
    assert [[t.text for t in ep.turns] for ep in episodes] == [r["texts"] for r in rows]
    assert [[t.remaining_distance for t in ep.turns] for ep in episodes] == [r["d"] for r in rows]
    # verl dumps no advantage: the sample's score on every turn
    assert [a.tolist() for a in advs] == [[float(r["d"][-1] == 0)] * len(r["texts"]) for r in rows]
    wrong = file.read_text().splitlines()
    wrong[1] = wrong[1].replace("Current observation:", "Current observation:X", 2)
    file.write_text("\n".join(wrong) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"3.jsonl:2: turn 1's observation in the dump is not the replay's"):
        replay(read_rollouts(file, "verl"), "rushhour", played["data"])


def test_trl_completions_log(played: dict[str, Any], tmp_path: Path) -> None:
    """TRL's ``completions/completions_NNNNN.parquet`` (pandas ``to_parquet`` of step, prompt, completion, one
    column per reward function, log_extra columns, advantage), conversational completions."""
    folder = tmp_path / "completions"
    folder.mkdir()
    rows = played["rollouts"][:5]
    table = {
        "step": [2] * len(rows),
        "prompt": [[{"role": "user", "content": f"Current observation:\n{r['obs']}"}] for r in rows],
        "completion": [
            [m for t in r["texts"] for m in ({"role": "assistant", "content": t}, {"role": "user", "content": "obs"})]
            for r in rows
        ],
        "milepost_reward": [float(r["d"][-1] == 0) for r in rows],
        "task_id": [r["task"].task_id if i % 2 else None for i, r in enumerate(rows)],
        "advantage": [0.5 - i for i in range(len(rows))],
    }
    pd.DataFrame(table).to_parquet(folder / "completions_00002.parquet")
    rollouts = read_rollouts(folder, "trl")
    assert [x.texts for x in rollouts] == [r["texts"] for r in rows]
    assert [x.advantages for x in rollouts] == [[0.5 - i] * len(r["texts"]) for i, r in enumerate(rows)]
    episodes, _ = replay(rollouts, "rushhour", played["data"])  # odd rows by task_id, even rows by prompt
    assert [ep.task_id for ep in episodes] == [r["task"].task_id for r in rows]
    assert [[t.remaining_distance for t in ep.turns] for ep in episodes] == [r["d"] for r in rows]
    result = _audit(tmp_path, played["data"], folder, "trl")  # the command line, --format trl
    assert result["turns"] == sum(len(r["texts"]) for r in rows) and "imported" in result["estimators"]


def test_verifiers_results_and_traces(played: dict[str, Any], tmp_path: Path) -> None:
    """verifiers 0.3's results.jsonl (``state_to_output`` rows) and 0.4's traces.jsonl (message-graph nodes with
    per-token advantages)."""
    rows = played["rollouts"][:4]
    results = tmp_path / "v03"
    try:  # verifiers' own writer when the extra is installed (pip install 'milepost[verifiers]'), else its shape
        from verifiers.legacy.types import RolloutTiming
        from verifiers.legacy.utils.save_utils import save_outputs, state_to_output
    except ImportError:
        save_outputs = None
    results.mkdir()
    lines = []
    states = []
    for i, r in enumerate(rows):
        pairs = [({"role": "assistant", "content": t}, {"role": "user", "content": "o"}) for t in r["texts"]]
        state = {
            "example_id": i,
            "prompt": [{"role": "system", "content": "goal"}, {"role": "user", "content": r["obs"]}],
            "completion": [m for pair in pairs for m in pair],
            "answer": "",
            "info": {"task_id": r["task"].task_id},
            "reward": float(r["d"][-1] == 0),
            "metrics": {},
        }
        states.append(state)
        lines.append(json.dumps(state))
    if save_outputs is not None:
        save_outputs([state_to_output({**st, "timing": RolloutTiming()}) for st in states], results, "w")
    else:
        (results / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = read_rollouts(results, "verifiers")
    assert [x.texts for x in got] == [r["texts"] for r in rows]
    assert [x.advantages[0] for x in got] == [float(r["d"][-1] == 0) for r in rows]

    traces = tmp_path / "v04"
    traces.mkdir()
    lines = []
    for r in rows:
        nodes: list[dict[str, Any]] = [{"message": {"role": "user", "content": r["obs"]}, "sampled": False}]
        for t, a in zip(r["texts"], r["a_star"]):
            nodes.append({"message": {"role": "assistant", "content": t}, "sampled": True, "advantages": [a, a, a]})
            nodes.append({"message": {"role": "user", "content": "obs"}, "sampled": False})
        lines.append(json.dumps({"id": "x", "task": {"type": "milepost", "data": {}}, "traces": [{"nodes": nodes}]}))
    (traces / "traces.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = read_rollouts(traces, "verifiers")
    assert [x.advantages for x in got] == [r["a_star"] for r in rows]
    episodes, _ = replay(got, "rushhour", played["data"])
    assert [[t.remaining_distance for t in ep.turns] for ep in episodes] == [r["d"] for r in rows]
    lines[0] = lines[0].replace('"advantages": [', '"advantages": null, "x": [')
    (traces / "traces.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"traces.jsonl:1: an assistant node has no advantages"):
        read_rollouts(traces, "verifiers")
