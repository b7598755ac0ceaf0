"""MiRA: hand-computed advantages and losses, critics that overfit, the curriculum, and seeded runs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from milepost.config import EnvConfig, load_config
from milepost.datasets import write_dataset
from milepost.envs.sudoku import make_task
from milepost.envs.sudoku.generator import generate_easy
from milepost.errors import InputError
from milepost.io import read_jsonl
from milepost.training.config import AgentConfig, MiRAConfig, RLConfig, TrainConfig
from milepost.training.critics import Critic, CriticSample, ReplayBuffer, auroc, kendall_tau_b
from milepost.training.curriculum import EpisodeOutcome, FailureCurriculum, uniform_draw, weighted_draw
from milepost.training.losses import kl_penalty, mse_policy_loss
from milepost.training.mira import episode_advantages, shaping_coef
from milepost.training.returns import baseline_advantages, doubly_robust_advantages
from milepost.training.trainer import train_rl

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"


def test_doubly_robust_advantage_by_hand() -> None:
    r = torch.tensor([0.25, 0.04, 1.3])  # shaped rewards
    v = torch.tensor([0.5, 0.6, 0.8, 0.0])  # V(s_T) = 0 after the last turn
    # TD: 0.25 + 0.54 - 0.5, 0.04 + 0.72 - 0.6, 1.3 - 0.8; MC: 1 - V(s_t)
    a = doubly_robust_advantages(r, v, 1.0, gamma=0.9, lam=0.5)
    assert a.tolist() == pytest.approx([0.5 * 0.29 + 0.5 * 0.5, 0.5 * 0.16 + 0.5 * 0.4, 0.5 * 0.5 + 0.5 * 0.2])
    assert doubly_robust_advantages(r, v, 1.0, gamma=0.9, lam=1.0).tolist() == pytest.approx([0.29, 0.16, 0.5])
    assert doubly_robust_advantages(r, v, 0.0, gamma=0.9, lam=0.0).tolist() == pytest.approx([-0.5, -0.6, -0.8])
    # G~: 0.25 + 0.9 * 1.21, 0.04 + 0.9 * 1.3, 1.3
    assert baseline_advantages(r, v, gamma=0.9).tolist() == pytest.approx([1.339 - 0.5, 1.21 - 0.6, 1.3 - 0.8])
    with pytest.raises(ValueError, match="lambda"):
        doubly_robust_advantages(r, v, 1.0, gamma=0.9, lam=1.5)


def test_episode_advantages_follow_the_configured_estimator() -> None:
    r, p = torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.2, 0.5, 0.6, 1.0])
    v = torch.tensor([0.5, 0.6, 0.8, 0.0])
    cfg = TrainConfig(rl=RLConfig(gamma=0.9), mira=MiRAConfig(enabled=True))
    # shaped [0.25, 0.04, 1.3] as above
    assert episode_advantages(r, p, v, 1.0, cfg, 1.0).tolist() == pytest.approx([0.395, 0.28, 0.35])
    cfg.mira.estimator = "mc"
    assert episode_advantages(r, p, v, 1.0, cfg, 1.0).tolist() == pytest.approx([0.839, 0.61, 0.5])
    cfg.mira.estimator = "td"
    assert episode_advantages(r, p, v, 1.0, cfg, 0.0).tolist() == pytest.approx([0.04, 0.12, 0.2])


def test_shaping_coefficient_anneals_and_switches_off() -> None:
    cfg = TrainConfig(mira=MiRAConfig(enabled=True, shaping_coef=2.0, shaping_anneal=4))
    assert [shaping_coef(cfg, i) for i in (0, 2, 4, 9)] == [2.0, 1.0, 0.0, 0.0]
    cfg.mira.potential = False
    assert shaping_coef(cfg, 0) == 0.0


def test_mse_policy_loss_and_kl_by_hand() -> None:
    new = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0], [-0.5, -9.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    adv = torch.tensor([1.0, -1.0])
    # log-ratios 0.5 and 0 (the padded token is ignored); beta 2 -> (1 - 1)^2, (0 + 1)^2
    loss = mse_policy_loss(new, ref, mask, adv, beta=2.0)
    assert loss.item() == pytest.approx(0.5)
    loss.backward()
    assert new.grad is not None and new.grad[1, 1] == 0.0
    assert float(kl_penalty(ref, ref, mask)) == pytest.approx(0.0)
    d = torch.tensor([-0.5, 0.0, 0.0])  # log ref - log new on the three real tokens
    expected = float((torch.exp(d) - d - 1).sum() / 3)
    assert float(kl_penalty(new.detach(), ref, mask)) == pytest.approx(expected)


def test_auroc_and_kendall_tau_by_hand() -> None:
    assert auroc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])) == pytest.approx(0.75)
    assert auroc(torch.tensor([0.5, 0.5]), torch.tensor([0, 1])) == pytest.approx(0.5)
    assert math.isnan(auroc(torch.tensor([0.5, 0.7]), torch.tensor([1, 1])))  # one class only
    assert kendall_tau_b(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 2.0])) == pytest.approx(1 / 3)
    # tau-b with ties: x = [1, 1, 2], y = [0, 1, 1]: one concordant pair, no discordant; 2 x-pairs, 2 y-pairs untied
    assert kendall_tau_b(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([0.0, 1.0, 1.0])) == pytest.approx(0.5)


def test_trunk_critics_overfit_a_fixed_set() -> None:
    gen = torch.Generator().manual_seed(0)
    feats = torch.randn(12, 16, generator=gen)
    samples = [CriticSample([1], feats[i], progress=i / 11, outcome=float(i % 3 == 0)) for i in range(12)]
    potential = Critic("trunk", "mse", hidden=16, vocab_size=0, pad_id=0, eos_id=0, size="0.5m", lr=1e-2, seed=0)
    value = Critic("trunk", "bce", hidden=16, vocab_size=0, pad_id=0, eos_id=0, size="0.5m", lr=1e-2, seed=0)
    first = potential.step(samples), value.step(samples)
    for _ in range(300):
        last = potential.step(samples), value.step(samples)
    assert last[0] < 1e-3 < first[0] and last[1] < 0.05 < first[1]
    pred = value.predict(samples)
    assert auroc(pred, torch.tensor([s.outcome for s in samples])) == 1.0


def test_separate_critic_overfits_a_fixed_set() -> None:
    prompts = [[5, 6, 7, 8], [5, 6, 9], [10, 11, 12, 13, 14], [7, 7, 7]]
    samples = [CriticSample(p, None, progress=i / 3, outcome=float(i % 2)) for i, p in enumerate(prompts)]
    critic = Critic("separate", "mse", hidden=0, vocab_size=32, pad_id=0, eos_id=1, size="0.5m", lr=3e-3, seed=0)
    first = critic.step(samples)
    for _ in range(150):
        last = critic.step(samples)
    assert last < 2e-3 < first
    assert critic.predict(samples).tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1], abs=0.08)


def test_replay_buffer_keeps_the_newest_and_covers_it() -> None:
    buf = ReplayBuffer(5)
    buf.add([CriticSample([i], None, 0.0, 0.0) for i in range(8)])
    assert [s.prompt[0] for s in buf.items] == [3, 4, 5, 6, 7]
    batches = buf.batches(2, 2.0, random.Random(0))
    seen = [s.prompt[0] for b in batches for s in b]
    assert len(seen) == 10 and sorted(seen) == sorted([3, 4, 5, 6, 7] * 2)


def _task(level: str, index: int, empties: int) -> object:
    return make_task(*generate_easy(4, empties, 1, index), level=level, split="train", index=index)


def test_failure_curriculum_weights_failures_and_their_neighbours() -> None:
    pool = [_task("S1", 0, 3), _task("S1", 1, 4), _task("S2", 2, 6), _task("S3", 3, 8)]
    cur = FailureCurriculum(pool, fail_boost=2.0, similar_boost=1.0)  # type: ignore[arg-type]
    ids = [t.task_id for t in pool]  # type: ignore[attr-defined]
    assert cur.levels == ["S1", "S2", "S3"]
    outcomes = [
        EpisodeOutcome(ids[0], "S1", False),
        EpisodeOutcome(ids[0], "S1", True),
        EpisodeOutcome(ids[1], "S1", True),
        EpisodeOutcome(ids[1], "S1", True),
    ]
    fail = cur.update(outcomes)
    assert fail == {"S1": 0.25}
    # task 0: 1 + 2 * 0.5 + 0.25 (its level); task 1: 1 + 0.25; S2 (next level up): 1 + 0.25; S3 untouched
    assert [cur.weights[i] for i in ids] == pytest.approx([2.25, 1.25, 1.25, 1.0])
    rng = random.Random(0)
    firsts = [cur.sample(rng, 1)[0].task_id for _ in range(4000)]
    assert firsts.count(ids[0]) / 4000 == pytest.approx(2.25 / 5.75, abs=0.03)
    assert cur.filter({ids[0]: 0.001, ids[3]: 0.999}, 0.05, 0.95, min_keep=2) == 2
    assert {t.task_id for t in cur.sample(rng, 4)} == {ids[1], ids[2]}
    assert cur.filter({ids[0]: 0.0, ids[1]: 0.0, ids[2]: 0.0}, 0.05, 0.95, min_keep=2) == 0


def test_the_curriculum_reports_how_far_its_draws_lean_on_failures() -> None:
    pool = [_task("S1", i, 3 + i % 2) for i in range(8)]
    cur = FailureCurriculum(pool, fail_boost=2.0, similar_boost=1.0)  # type: ignore[arg-type]
    ids = [t.task_id for t in pool]  # type: ignore[attr-defined]
    keys = ["curriculum/targeted_pool", "curriculum/targeted_weight", "curriculum/targeted_drawn"]
    assert cur.draw_stats(pool[:2]) == dict.fromkeys(keys, 0.0)  # type: ignore[arg-type]  # before a phase end
    cur.update([EpisodeOutcome(ids[0], "S1", False)] * 2 + [EpisodeOutcome(ids[1], "S1", True)])
    # level failure 2/3: every task 1 + 2/3, task 0 (failed twice) 2 more; task 1 succeeded: not targeted
    stats = cur.draw_stats([pool[0], pool[5]])  # type: ignore[list-item]
    assert [stats[k] for k in keys] == pytest.approx([1 / 8, (11 / 3) / (8 * 5 / 3 + 2), 0.5])
    assert cur.filter({ids[0]: 0.0}, 0.05, 0.95, min_keep=2) == 1  # a task left out is no candidate
    assert cur.draw_stats(pool[1:3])["curriculum/targeted_pool"] == 0.0  # type: ignore[arg-type]
    # the targeted set survives a checkpoint; one written before it was kept is read from the weights
    state = cur.state_dict()
    for kept in (True, False):
        if not kept:
            del state["targeted"]
        again = FailureCurriculum(pool, fail_boost=2.0, similar_boost=1.0)  # type: ignore[arg-type]
        again.load_state_dict(state)
        assert again.targeted == {ids[0]}


def test_weighted_keys_agree_where_the_weights_agree() -> None:
    """Two draws from equal streams over one pool: with equal weights they are one draw; raising some weights
    changes the draw only by those tasks entering it."""
    pool = list(range(300))
    uniform = weighted_draw(random.Random("7:3"), pool, 6)
    assert weighted_draw(random.Random("7:3"), pool, 6, [2.5] * 300) == uniform  # a common factor changes nothing
    assert uniform_draw("keys", random.Random("7:3"), pool, 6) == uniform
    assert uniform_draw("sample", random.Random("7:3"), pool, 6) == random.Random("7:3").sample(pool, 6)
    boosted = set(range(0, 300, 12))  # 25 failed tasks at 2.1 times the weight of the others
    tilted = weighted_draw(random.Random("7:3"), pool, 6, [2.1 if i in boosted else 1.0 for i in pool])
    assert set(tilted) - set(uniform) <= boosted  # only boosted tasks can push others out
    counts = [0] * 4  # first draw over 4 weights 1:1:2:4
    for k in range(8000):
        counts[weighted_draw(random.Random(k), range(4), 1, [1, 1, 2, 4])[0]] += 1
    assert [c / 8000 for c in counts] == pytest.approx([1 / 8, 1 / 8, 2 / 8, 4 / 8], abs=0.02)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["mira.estimator=vtrace"], "mira.estimator"),
        (["mira.lam=2"], "mira.lam"),
        (["mira.enabled=true", "rl.subgoal_decomposition=true"], "subgoal_decomposition"),
        (["mira.filter_low=0.9", "mira.filter_high=0.5"], "filter_low"),
        (["rl.reward=dense"], "rl.reward"),
        (["rl.task_draw=shuffle"], "rl.task_draw"),
        (["mira.critics=2"], "unknown field"),
        (["mira.value_critic=false"], "mira.estimator: mc"),
        (["mira.value_critic=false", "mira.estimator=mc", "mira.filter_low=0.02"], "filter_low 0"),
    ],
)
def test_bad_mira_configs(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_config(TrainConfig, None, overrides)


@pytest.fixture(scope="module")
def data4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    splits: dict[str, list] = {"train": [], "test": []}
    for split, count in (("train", 12), ("test", 2)):
        for i in range(count):
            empties = 5 + i % 4
            splits[split].append(
                make_task(
                    *generate_easy(4, empties, 9, i + 100 * (split == "test")),
                    level="S2" if empties <= 6 else "S3",  # 4x4 S2 holds 5-6 empty cells, S3 7-8
                    split=split,
                    index=i,
                )
            )
    return write_dataset(tmp_path_factory.mktemp("data") / "sudoku4", splits, {"seed": 9})


def _mira_cfg(data: Path, **mira: object) -> TrainConfig:
    return TrainConfig(
        name="m",
        model=str(SHIPPED),
        data=str(data),
        env=EnvConfig(size=4, max_steps=10, render="hints"),
        agent=AgentConfig(memory_k=0, max_new_tokens=32, temperature=1.0),
        rl=RLConfig(
            iterations=2, tasks_per_iter=3, samples_per_task=2, minibatches=2, lr=1e-4, is_low=0.5, is_high=2.0
        ),
        mira=MiRAConfig(
            **({"enabled": True, "warmup_iterations": 1, "phase_iterations": 1, "critic_epochs": 1.0} | mira)
        ),  # type: ignore[arg-type]
        threads=1,
        checkpoint_every=1,
    )


# First policy losses and critic losses of the seeded MiRA run below (shipped checkpoint, seed 0). A change
# to the checkpoint, the environment's text, the critics or the advantage moves them. (The policy loss was
# 1.1062 with ``terminal_potential: label``, the default until the review; the critics' losses did not move.
# [0.9343, 0.0878, 0.3407] before data4's tasks carried the levels their empty cells belong to: datasets are
# checked on load now, and the curriculum reads the levels.)
# loss/policy 0.9592 -> 0.1161 with rl.std_floor 0.1 (issue 59.14): this batch's advantages have a std under the floor
PINNED_MIRA: list[float] = [0.1161, 0.0843, 0.4365]


def _rows(path: Path) -> list[str]:
    return [
        json.dumps({k: v for k, v in r.items() if not k.startswith("perf/")}, sort_keys=True)
        for r in read_jsonl(path / "metrics.jsonl")
    ]


def test_mira_run_pins_its_first_losses_and_resumes_exactly(data4: Path, tmp_path: Path) -> None:
    cfg = _mira_cfg(data4)
    full = train_rl(cfg, tmp_path / "full", progress=False)
    rows = [json.loads(r) for r in _rows(tmp_path / "full")]
    assert rows[0]["phase"] == "warmup" and len(rows) == 3
    assert "NaN" not in (tmp_path / "full" / "metrics.jsonl").read_text()  # strict JSON
    first = [rows[1]["loss/policy"], rows[1]["critic/potential_loss"], rows[1]["critic/value_loss"]]
    if PINNED_MIRA:
        assert first == pytest.approx(PINNED_MIRA, abs=2e-3)
    else:  # pragma: no cover - printed once to fill the constant
        print("PINNED", first)
    for r in rows[1:]:
        assert 0.0 <= r["critic/potential_mse"] <= 1.0
        assert r["train/turns"] > 0
    assert any(k.startswith("curriculum/fail_") for k in rows[1])  # one-iteration phases
    assert rows[1]["curriculum/targeted_pool"] == 0.0  # no phase has ended before the first draw
    assert 0.0 <= rows[2]["curriculum/targeted_drawn"] <= 1.0
    train_rl(cfg, tmp_path / "cut", progress=False, stop_after=1)
    resumed = train_rl(cfg, tmp_path / "cut", resume=True, progress=False)
    from safetensors.torch import load_file

    a, b = load_file(full / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _rows(tmp_path / "full") == _rows(tmp_path / "cut")


def test_mira_ablations_run(data4: Path, tmp_path: Path) -> None:
    for name, over in {
        "no_potential": {"potential": False, "estimator": "dr"},
        "reinforce_kl": {"objective": "reinforce", "kl_coef": 0.1},
        "no_dr": {"estimator": "mc", "critic": "separate", "curriculum": False},
        "no_value": {"estimator": "mc", "value_critic": False},
    }.items():
        cfg = _mira_cfg(data4, warmup_iterations=0, **over)
        cfg.rl.iterations = 1
        cfg.rl.tasks_per_iter = 2
        train_rl(cfg, tmp_path / name, progress=False)
        row = json.loads(_rows(tmp_path / name)[-1])
        assert row["train/turns"] > 0
        if name == "no_value":  # the value critic is neither trained nor read, nor reported
            assert not any("value" in k for k in row) and row["critic/potential_loss"] > 0
        else:
            assert row["critic/value_loss"] > 0
        assert row["mira/shaping_coef"] == (0.0 if name == "no_potential" else 1.0)
