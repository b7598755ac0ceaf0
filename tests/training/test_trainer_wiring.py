"""What the trainer does with its pure functions: the direction of learning, the importance weights that reach
the loss, the rewards and groups behind the advantages.

`test_returns_losses.py` checks returns, advantages and importance weights by hand values. These tests check
the wiring in `trainer.py` (and MiRA's advantages): a tiny random model plays a one-turn task in which one
answer (any token of the even half of the vocabulary as the first completion token) is rewarded, and
the probability of that answer must rise within a few updates, for the plain, group, subgoal and MiRA paths.
Each update samples fresh completions from the current policy with the backend, so the behaviour log-probs are
the sampler's own, as in a real run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.backends.base import GenerationRequest, SamplingParams
from milepost.training.config import AgentConfig, MiRAConfig, RLConfig, TrainConfig
from milepost.training.trainer import batch_advantages, turn_samples, update
from milepost.types import Completion, Episode, TerminationReason, Turn, zero_terms

TEMPERATURE = 0.7  # not 1: the trainer must score at the rollout's temperature
PROMPTS = ([5, 17, 40, 9, 33], [12, 7, 21, 60, 3, 28, 14])  # two tasks (groups), raw token ids
SAMPLES = 8  # completions per task and update
UPDATES = 6
MIN_RISE = 0.25  # measured at seed 0: +0.48 to +0.51 (P 0.49 -> 0.96-1.00)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from milepost.backends.tiny import build_tiny_model

    corpus = ["value(3, r1c3) ACTION: REASON: only 3 fits", "move(A, right) Observation: 12.4 3.21"]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", size="0.5m", corpus=corpus, vocab_size=400)


def _backend(path: Path) -> Any:
    from milepost.backends.hf import HFBackend

    torch.manual_seed(0)
    return HFBackend(path, device="cpu")


def _cfg(**rl: Any) -> TrainConfig:
    return TrainConfig(
        name="wiring",
        agent=AgentConfig(temperature=TEMPERATURE, max_new_tokens=3),
        rl=RLConfig(**({"minibatches": 1, "lr": 3e-2, "grad_clip": 1e6} | rl)),
        threads=1,
    )


def _sample(backend: Any, prompt: list[int], n: int, seed: int, max_new_tokens: int = 3) -> list[Completion]:
    params = [
        SamplingParams(temperature=TEMPERATURE, max_new_tokens=max_new_tokens, seed=seed * 1000 + i) for i in range(n)
    ]
    return backend.generate([GenerationRequest(prompt_ids=prompt, params=p) for p in params])


def _rewarded(c: Completion) -> bool:
    return bool(c.completion_ids) and c.completion_ids[0] % 2 == 0


def _episode(task: int, c: Completion, subgoal: bool) -> Episode:
    """One-turn episode: success iff the answer is rewarded (as a subgoal completion under ``subgoal``)."""
    good = _rewarded(c)
    terms = zero_terms()
    if subgoal:
        terms["milestone"] = float(good)
    else:
        terms["outcome"] = float(good)
    turn = Turn(
        index=0,
        observation="",
        text=c.text,
        actions=[],
        reward=sum(terms.values()),
        reward_terms=terms,
        subgoals_completed=[0] if subgoal and good else [],
        remaining_distance=None,
        prompt_ids=list(c.prompt_ids),
        completion_ids=list(c.completion_ids),
        logprobs=list(c.logprobs or []),
        new_subgoals=[0] if subgoal and good else [],
    )
    return Episode(
        task_id=f"t{task}",
        policy="tiny",
        sample=0,
        seed=0,
        termination=TerminationReason.SOLVED if good and not subgoal else TerminationReason.BUDGET_EXHAUSTED,
        success=good and not subgoal,
        goal_distance=1,
        steps=1,
        turns=[turn],
        meta={"num_subgoals": 1} if subgoal else {},
    )


def p_rewarded(model: Any) -> float:
    """Mean over the prompts of P(first token is rewarded) at TEMPERATURE, exactly from the logits."""
    out = []
    with torch.no_grad():
        for prompt in PROMPTS:
            logits = model(torch.tensor([prompt])).logits[0, -1].float()
            probs = torch.softmax(logits / TEMPERATURE, -1)
            out.append(float(probs[0::2].sum()))
    return sum(out) / len(out)


def _play(backend: Any, it: int, subgoal: bool = False) -> list[Episode]:
    return [
        _episode(task, c, subgoal)
        for task, prompt in enumerate(PROMPTS)
        for c in _sample(backend, list(prompt), SAMPLES, seed=it * 10 + task)
    ]


def learn(tiny: Path, cfg: TrainConfig, advantages: Callable[..., Any] | None = None) -> tuple[float, float]:
    """(P(rewarded) before, after UPDATES on-policy updates with ``cfg``)."""
    import random

    backend = _backend(tiny)
    model = backend.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=0.0)
    before = p_rewarded(model)
    mira = None
    if cfg.mira.enabled:
        from milepost.training.mira import MiRA

        mira = MiRA(cfg, model, backend.pad_id, min(backend.eos_ids))
    for it in range(UPDATES):
        episodes = _play(backend, it, cfg.rl.subgoal_decomposition)
        ref = None
        if mira is not None:
            mira.refresh_reference(model)
            ref = mira.ref
            adv, _ = mira.advantages(episodes, mira.samples(model, episodes), it)
            samples = turn_samples(episodes, cfg, adv)
        else:
            samples = turn_samples(episodes, cfg)
        update(model, optimizer, samples, cfg, backend.pad_id, random.Random(it), ref)
    return before, p_rewarded(model)


@pytest.mark.parametrize("path", ["plain", "group", "subgoal", "mira"])
def test_learning_direction(tiny: Path, path: str) -> None:
    """The rewarded answer becomes more likely within a few updates, on every path of the trainer."""
    torch.set_num_threads(1)
    cfg = {
        "plain": _cfg(),
        "group": _cfg(normalisation="group"),
        "subgoal": _cfg(subgoal_decomposition=True),
        "mira": _cfg(),
    }[path]
    if path == "mira":
        cfg.mira = MiRAConfig(enabled=True, warmup_iterations=0)
    before, after = learn(tiny, cfg)
    print(f"{path}: P(rewarded) {before:.3f} -> {after:.3f}")
    assert after >= before + MIN_RISE, f"{path}: P(rewarded) {before:.3f} -> {after:.3f}"


def test_on_policy_importance_weights_are_one(tiny: Path) -> None:
    """Fresh rollouts scored by the trainer at the rollout's temperature: every weight is 1, none is masked."""
    torch.set_num_threads(1)
    backend = _backend(tiny)
    episodes = [
        _episode(task, c, False)
        for task, prompt in enumerate(PROMPTS)
        for c in _sample(backend, list(prompt), SAMPLES, seed=task, max_new_tokens=12)
    ]
    cfg = _cfg(is_low=0.995, is_high=1.01)  # the paper's tight Geo-MIS band
    samples = turn_samples(episodes, cfg)
    assert len(samples) == len(PROMPTS) * SAMPLES and max(len(s.completion_ids) for s in samples) > 3
    optimizer = torch.optim.AdamW(backend.model.parameters(), lr=1e-3)
    import random

    stats = update(backend.model, optimizer, samples, cfg, backend.pad_id, random.Random(0))
    assert stats["masked_frac"] == 0.0
    assert stats["mean_weight"] == pytest.approx(1.0, abs=1e-3)


def _stale(samples: list[Any], shift: float) -> list[Any]:
    """The samples with every behaviour log-prob lowered by ``shift`` (rho_geo = e^shift per token)."""
    out = copy.deepcopy(samples)
    for s in out:
        s.logprobs = [lp - shift for lp in s.logprobs]
    return out


def test_importance_weights_reach_the_loss(tiny: Path) -> None:
    """Geo-MIS: turns outside [C_low, C_high] contribute no gradient; Seq-TIS: a sequence ratio above C counts
    as C, so the gradient is C times the on-policy one."""
    import random

    torch.set_num_threads(1)
    backend = _backend(tiny)
    episodes = _play(backend, 0)
    cfg = _cfg(is_low=0.9, is_high=1.1, is_cap=3.0)
    samples = turn_samples(episodes, cfg)
    assert any(s.advantage != 0 for s in samples)

    def grad_norm(batch: list[Any], cfg: TrainConfig) -> dict[str, float]:
        model = copy.deepcopy(backend.model)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        return update(model, opt, batch, cfg, backend.pad_id, random.Random(0))

    on = grad_norm(samples, cfg)
    assert on["grad_norm"] > 0 and on["masked_frac"] == 0.0
    masked = grad_norm(_stale(samples, 0.5), cfg)  # rho_geo = e^0.5 > C_high on every turn
    assert masked["masked_frac"] == 1.0
    assert masked["grad_norm"] == 0.0
    # Without the mask, turns with rho_seq = e^(2 |y|) > C enter with weight C.
    unmasked = _cfg(is_low=0.9, is_high=1.1, is_cap=3.0, is_mask=False)
    capped = grad_norm(_stale(samples, 2.0), unmasked)
    assert capped["mean_weight"] == pytest.approx(3.0, rel=1e-5)
    assert capped["grad_norm"] == pytest.approx(3.0 * on["grad_norm"], rel=1e-3)


def _turn(outcome: float = 0.0, milestone: float = 0.0, fmt: float = 0.0) -> Turn:
    terms = zero_terms()
    terms["outcome"], terms["milestone"], terms["format"] = outcome, milestone, fmt
    return Turn(
        index=0,
        observation="",
        text="",
        actions=[],
        reward=outcome + milestone + fmt,
        reward_terms=terms,
        subgoals_completed=[0] if milestone else [],
        remaining_distance=None,
        new_subgoals=[0] if milestone else [],
    )


def _ep(task: str, turns: list[Turn], success: bool = False) -> Episode:
    return Episode(
        task_id=task,
        policy="p",
        sample=0,
        seed=0,
        termination=TerminationReason.SOLVED if success else TerminationReason.BUDGET_EXHAUSTED,
        success=success,
        goal_distance=len(turns),
        steps=len(turns),
        turns=turns,
        meta={"num_subgoals": 2},
    )


def test_subgoal_decomposition_advantages_are_segmented_returns() -> None:
    """A subgoal completed at turn 1 ends a segment: turn 0's return stops there, turn 2's starts after it."""
    g = 0.9
    ep = _ep("a", [_turn(), _turn(milestone=1.0), _turn(), _turn(outcome=1.0, milestone=1.0)], success=True)
    cfg = _cfg(subgoal_decomposition=True, normalisation="none", alpha=0.0, gamma=g, milestone_weight=0.5)
    (adv,) = batch_advantages([ep], cfg)
    # rewards r = (0, 0.5, 0, 1.5); segments [0, 1] and [2, 3]
    expected = [g * 0.5, 0.5, g * 1.5, 1.5]
    assert adv.tolist() == pytest.approx(expected)
    plain = _cfg(normalisation="none", alpha=0.0, gamma=g)
    (adv_plain,) = batch_advantages([ep], plain)  # outcome only, one segment
    assert adv_plain.tolist() == pytest.approx([g**3, g**2, g, 1.0])


def test_group_normalisation_takes_statistics_per_task() -> None:
    """Under group normalisation each task's turns are normalised by that task's own mean and std."""
    eps = [
        _ep("a", [_turn(outcome=1.0)], True),
        _ep("a", [_turn()]),
        _ep("b", [_turn(outcome=1.0)], True),
        _ep("b", [_turn(outcome=1.0)], True),
        _ep("b", [_turn()]),
        _ep("c", [_turn(outcome=1.0)], True),
        _ep("c", [_turn(outcome=1.0)], True),
    ]
    cfg = _cfg(normalisation="group", alpha=0.0)
    adv = [float(a) for a in torch.cat(batch_advantages(eps, cfg))]
    # task a: (1, 0) -> (1, -1); task b: (1, 1, 0), mean 2/3, std sqrt(2)/3; task c: constant -> 0
    sb = (2**0.5) / 3
    expected = [1.0, -1.0, (1 / 3) / sb, (1 / 3) / sb, -(2 / 3) / sb, 0.0, 0.0]
    assert adv == pytest.approx(expected, abs=1e-4)
    # the same episodes in another order: each keeps its own group's statistics
    order = [6, 2, 0, 4, 1, 5, 3]
    adv2 = [float(a) for a in torch.cat(batch_advantages([eps[i] for i in order], cfg))]
    assert adv2 == pytest.approx([expected[i] for i in order], abs=1e-4)


def test_plain_advantages_rank_successes_above_failures() -> None:
    """Batch normalisation: a solved episode's turns get positive advantages, a failed one's negative."""
    eps = [_ep("a", [_turn(), _turn(outcome=1.0)], True), _ep("b", [_turn(), _turn()])]
    cfg = _cfg(alpha=0.0)
    good, bad = batch_advantages(eps, cfg)
    assert (good > 0).all() and (bad < 0).all()
    steps = [_ep("a", [_turn(fmt=-1.0)]), _ep("a", [_turn()])]
    pen, clean = batch_advantages(steps, _cfg(alpha=0.2))
    assert float(pen[0]) < 0 < float(clean[0])  # a format penalty lowers the advantage


def _seq_logp(model: Any, sample: Any) -> torch.Tensor:
    """sum_i log pi(y_i | x, y_<i) at TEMPERATURE, straight from the logits (with gradient)."""
    ids = list(sample.prompt_ids) + list(sample.completion_ids)
    logits = model(torch.tensor([ids])).logits[0].float()
    start = len(sample.prompt_ids) - 1
    logp = torch.log_softmax(logits[start : len(ids) - 1] / TEMPERATURE, -1)
    return logp.gather(1, torch.tensor(sample.completion_ids).unsqueeze(1)).sum()


def test_update_reports_the_loss_it_stepped_on(tiny: Path) -> None:
    """The statistics of an update are those of its objective: loss, gradient norm, turns, tokens, weights;
    the MiRA objectives (MSE regression, REINFORCE + KL) enter exactly when configured."""
    import random

    torch.set_num_threads(1)
    backend = _backend(tiny)
    model = backend.model
    (sample,) = turn_samples(_play(backend, 0)[:1], _cfg(normalisation="none"))
    sample.advantage = 0.75

    def run(samples: list[Any], cfg: TrainConfig, ref: Any = None) -> dict[str, float]:
        net = copy.deepcopy(model)
        opt = torch.optim.SGD(net.parameters(), lr=0.0)  # the model stays put: every minibatch sees it
        return update(net, opt, samples, cfg, backend.pad_id, random.Random(0), ref)

    def expected(objective: Callable[[Any], torch.Tensor]) -> tuple[float, float]:
        net = copy.deepcopy(model)
        loss = objective(net)
        loss.backward()
        norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in net.parameters() if p.grad is not None))
        return loss.item(), float(norm)

    n_tokens = len(sample.completion_ids)
    loss, norm = expected(lambda net: -sample.advantage * _seq_logp(net, sample))
    # the same turn twice in two minibatches of one: per-minibatch means, averaged
    twice = run([sample, copy.deepcopy(sample)], _cfg(minibatches=2))
    assert twice["loss"] == pytest.approx(loss, rel=1e-4)
    assert twice["grad_norm"] == pytest.approx(norm, rel=1e-3)
    assert twice["turns"] == 2 and twice["tokens"] == 2 * n_tokens
    assert twice["mean_weight"] == pytest.approx(1.0, abs=1e-4) and twice["masked_frac"] == 0.0
    assert twice["onpolicy_rho"] == pytest.approx(1.0, abs=1e-4)

    # MiRA, MSE regression against a reference policy: (beta log(pi / pi_ref) - A)^2
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    ref_logp = float(_seq_logp(ref, sample).detach())
    mse = _cfg()
    mse.mira = MiRAConfig(enabled=True, objective="mse", beta=0.5)
    got = run([sample], mse, ref)
    loss, norm = expected(lambda net: (0.5 * (_seq_logp(net, sample) - ref_logp) - sample.advantage) ** 2)
    assert got["loss"] == pytest.approx(loss, rel=1e-4) and got["grad_norm"] == pytest.approx(norm, rel=1e-3)

    # MiRA, REINFORCE + kl_coef x KL(pi || pi_ref) (k3 estimate per token), and without the KL term
    kl = _cfg()
    kl.mira = MiRAConfig(enabled=True, objective="reinforce", kl_coef=0.3)

    def reinforce_kl(net: Any, coef: float) -> torch.Tensor:
        ids = list(sample.prompt_ids) + list(sample.completion_ids)
        start, toks = len(sample.prompt_ids) - 1, torch.tensor(sample.completion_ids).unsqueeze(1)

        def per_token(m: Any) -> torch.Tensor:
            logits = m(torch.tensor([ids])).logits[0].float()
            return torch.log_softmax(logits[start : len(ids) - 1] / TEMPERATURE, -1).gather(1, toks).squeeze(1)

        new, old = per_token(net), per_token(ref).detach()
        d = old - new
        return -sample.advantage * new.sum() + coef * (torch.exp(d) - d - 1).mean()

    ref_samples = [copy.deepcopy(sample)]
    got = run(ref_samples, kl, ref)
    loss, norm = expected(lambda net: reinforce_kl(net, 0.3))
    assert got["loss"] == pytest.approx(loss, rel=1e-4) and got["grad_norm"] == pytest.approx(norm, rel=1e-3)
    kl.mira = MiRAConfig(enabled=True, objective="reinforce", kl_coef=0.0)
    got = run(ref_samples, kl, ref)
    loss, _ = expected(lambda net: reinforce_kl(net, 0.0))
    assert got["loss"] == pytest.approx(loss, rel=1e-4)


def test_on_policy_weights_with_turns_of_different_lengths(tiny: Path) -> None:
    """Padding never enters the weights: on-policy turns of different lengths all weigh 1."""
    import random

    torch.set_num_threads(1)
    backend = _backend(tiny)
    episodes = [
        _episode(task, c, False)
        for task, prompt in enumerate(PROMPTS)
        for c in _sample(backend, list(prompt), 4, seed=task, max_new_tokens=8)
    ]
    samples = turn_samples(episodes, _cfg())
    for i, s in enumerate(samples):  # prefixes of an on-policy answer are on-policy answers
        keep = 1 + i % len(s.completion_ids)
        s.completion_ids, s.logprobs = s.completion_ids[:keep], s.logprobs[:keep]
    assert len({len(s.completion_ids) for s in samples}) > 2
    opt = torch.optim.SGD(backend.model.parameters(), lr=0.0)
    stats = update(backend.model, opt, samples, _cfg(is_low=0.995, is_high=1.01), backend.pad_id, random.Random(0))
    assert stats["masked_frac"] == 0.0 and stats["mean_weight"] == pytest.approx(1.0, abs=1e-4)
    assert stats["tokens"] == sum(len(s.completion_ids) for s in samples)


def test_a_batch_in_which_every_episode_failed_gives_no_gradient(tiny: Path) -> None:
    """Sparse RL (``rl.alpha`` 0) where every episode earned the same reward: every advantage is 0 and the update's
    gradient norm is exactly 0 (what ``experiments/seeded_arms.py`` counts as an update with a zero gradient), so a
    fresh AdamW leaves the weights as they were; one rewarded episode in the batch gives a gradient."""
    import random

    torch.set_num_threads(1)
    backend = _backend(tiny)
    played = _play(backend, 0)
    assert any(ep.success for ep in played) and not all(ep.success for ep in played)
    failed = copy.deepcopy(played)
    for ep in failed:
        ep.success, ep.termination = False, TerminationReason.BUDGET_EXHAUSTED
        for turn in ep.turns:
            turn.reward_terms, turn.reward = zero_terms(), 0.0
    cfg = _cfg(alpha=0.0)
    samples = turn_samples(failed, cfg)
    assert samples and all(s.advantage == 0 for s in samples)
    model = copy.deepcopy(backend.model)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=0.0)
    assert update(model, optimizer, samples, cfg, backend.pad_id, random.Random(0))["grad_norm"] == 0.0
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    model = copy.deepcopy(backend.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=0.0)
    assert update(model, optimizer, turn_samples(played, cfg), cfg, backend.pad_id, random.Random(0))["grad_norm"] > 0
