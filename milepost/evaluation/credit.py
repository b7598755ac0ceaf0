"""The credit audit: every advantage estimator scored against the truth that exact goal distance gives.

On one set of episodes, each estimator (``ESTIMATORS``) assigns every turn an advantage. The truth is the turn's
exact progress, delta d_t = d(s_t) - d(s_t+1) (``training.estimators.turn_distances``), and the optimal advantage
under unit action cost, A*(s_t, a_t) = delta d_t - c_t, with c_t the actions the turn applied (at least 1): an
optimal action has A* = 0, anything else less; a turn into a dead end has A* = -inf. Per estimator:

- ``spearman`` and ``kendall`` (tau-b) rank correlation of its advantages with A*, with a bootstrap interval
  over tasks (each drawn task copy a new group, so group estimators never meet a copy of themselves);
- sign agreement: the share of turns that make progress with a positive advantage, of turns that regress (or
  enter a dead end) with a negative one, and of turns that stay (a wasted step) with a negative one;
- the variable-length bias: Spearman correlation between episode length and the advantage of progress turns
  (0 = a turn that removes distance earns the same whatever the episode's length), and the mean advantage by turn
  index and by episode length;
- calibration: the mean advantage, standardised per estimator, at each value of delta d (``credit.png``).

Critic-based estimators (``mira``, ``gae``, ``dr``) train MiRA's critics (``training.critics.Critic``, the
``separate`` encoder) by cross-fitting: the tasks are split into two folds, critics trained on one fold score
the other, so no episode is scored by a critic that saw it. Critics read the observation text as bytes, which
every episode has (model runs and scripted policies alike).

No other framework can compute this table: it needs the exact distance to the goal of every visited state.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from milepost.errors import InputError
from milepost.io import atomic_write_json, atomic_write_text
from milepost.rewards.milestone import segment_ends
from milepost.rewards.shaping import progress_labels, shaped_rewards
from milepost.training.config import TrainConfig
from milepost.training.critics import kendall_tau_b
from milepost.training.estimators import (
    distance_advantages,
    gigpo_advantages,
    grpo_advantages,
    random_advantages,
    turn_distances,
)
from milepost.training.mira import step_rewards, trajectory_rewards
from milepost.training.returns import (
    advantages,
    combine_with_steps,
    discounted_returns,
    doubly_robust_advantages,
    gae_advantages,
)
from milepost.types import Episode

ESTIMATORS = ("paper", "paper-segmented", "grpo", "mira", "gae", "dr", "gigpo", "distance", "random")
CRITIC_ESTIMATORS = ("mira", "gae", "dr")
DESCRIPTIONS = {
    "paper": "batch-normalised trajectory + alpha * step advantages (the horizon paper)",
    "paper-segmented": "the same with subgoal-segmented returns and the milestone reward",
    "grpo": "GRPO-style outcome normalised within each task, every turn the same",
    "mira": "MiRA's potential shaping (learned potential P), returns batch-normalised",
    "gae": "value critic V with GAE(lambda)",
    "dr": "MiRA's doubly-robust advantage (potential shaping + value critic)",
    "gigpo": "GiGPO: episode group + anchor-state step groups",
    "distance": "the solver's exact distance removed (oracle upper bound)",
    "random": "independent N(0, 1) per turn (no-information floor)",
}
MAX_OBS_BYTES = 512  # critics read the last bytes of an observation: the state, not the fixed preamble
# The audit's critic encoder: two layers of width 64 over bytes. MiRA's default (the 0.5m preset) costs ~4x the CPU
# (48 CPU-s per pass over 800 states here) for a per-state regression this small.
CRITIC_SIZE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "intermediate_size": 128,
}


@dataclass
class AuditSettings:
    """How the audit runs: which estimators, the bootstrap, and the critics' training budget."""

    estimators: tuple[str, ...] = ESTIMATORS
    boot: int = 200
    confidence: float = 0.95
    seed: int = 0
    critic_epochs: float = 4.0
    config: TrainConfig | None = None  # gamma, alpha, rewards, MiRA settings; defaults when None

    def __post_init__(self) -> None:
        unknown = [e for e in self.estimators if e not in ESTIMATORS]
        if unknown:
            raise InputError(f"unknown estimator {unknown[0]!r} (known: {', '.join(ESTIMATORS)})")
        if not self.estimators:
            raise InputError("--estimators: name at least one")
        if self.boot < 0:
            raise InputError(f"--boot must be >= 0, got {self.boot}")
        if not 0.0 < self.confidence < 1.0:
            raise InputError(f"--confidence must be in (0, 1), got {self.confidence}")
        if self.critic_epochs <= 0:
            raise InputError(f"--critic-epochs must be > 0, got {self.critic_epochs}")


# ---------------------------------------------------------------------------------------------------------------
# The truth


@dataclass
class Truth:
    """Per turn of the batch (flattened in episode order): the exact progress and what it implies."""

    delta: np.ndarray  # (N,) d(s_t) - d(s_t+1); -inf into a dead end, 0 inside one
    a_star: np.ndarray  # (N,) delta - cost; -inf into a dead end
    turn_index: np.ndarray  # (N,) t
    length: np.ndarray  # (N,) the episode's number of turns
    episode: np.ndarray  # (N,) index of the episode in the batch


def truth(episodes: Sequence[Episode]) -> Truth:
    """The exact per-turn progress of every turn (see the module docstring)."""
    delta, a_star, index, length, owner = [], [], [], [], []
    for i, ep in enumerate(episodes):
        for t, ((before, after), turn) in enumerate(zip(turn_distances(ep), ep.turns)):
            if math.isinf(before):
                d = 0.0
            elif math.isinf(after):
                d = -math.inf
            else:
                d = before - after
            cost = max(1, len(turn.actions))
            delta.append(d)
            a_star.append(d - cost)
            index.append(t)
            length.append(len(ep.turns))
            owner.append(i)
    return Truth(np.array(delta), np.array(a_star), np.array(index), np.array(length), np.array(owner))


def check_has_distance(episodes: Sequence[Episode], where: str) -> None:
    """Refuse episodes that carry no goal distance to score against (one line)."""
    if not any(ep.turns for ep in episodes):
        raise InputError(f"{where}: no turns to audit")
    if not any(t.remaining_distance is not None for ep in episodes for t in ep.turns):
        envs = sorted({str(ep.meta.get("env", "?")) for ep in episodes})
        raise InputError(
            f"{where}: no turn records a goal distance (environment {', '.join(envs)}): "
            "the credit audit needs an environment with an exact distance to the goal"
        )


# ---------------------------------------------------------------------------------------------------------------
# Statistics (hand-written: numpy has no rank correlations and scipy is not a dependency for two functions)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (-inf sorts first)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson correlation of average ranks); NaN when either side is constant."""
    if len(x) < 2:
        return math.nan
    rx, ry = _ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64))
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return math.nan
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def sign_agreement(adv: np.ndarray, delta: np.ndarray) -> dict[str, float]:
    """Share of progress turns with A > 0, of regressing turns with A < 0, of staying turns with A < 0, and
    their unweighted mean over the kinds present (NaN where a kind has no turn)."""
    out = {}
    for name, sel, good in (
        ("progress", delta > 0, adv > 0),
        ("regress", delta < 0, adv < 0),
        ("stay", delta == 0, adv < 0),
    ):
        out[name] = float(good[sel].mean()) if sel.any() else math.nan
    present = [v for v in out.values() if not math.isnan(v)]
    out["balanced"] = float(np.mean(present)) if present else math.nan
    return out


# ---------------------------------------------------------------------------------------------------------------
# Critics (cross-fitted)


def _obs_ids(text: str) -> list[int]:
    data = text.encode("utf-8", errors="replace")[-MAX_OBS_BYTES:]
    return list(data)  # byte values 0..255; 256 pads, 257 ends


@dataclass
class CriticScores:
    """Per episode, out-of-fold predictions of the critics for the states s_0 .. s_T-1."""

    potential: list[torch.Tensor]
    value: list[torch.Tensor]


def _fold(task_id: str) -> int:
    return hashlib.sha256(task_id.encode("utf-8")).digest()[0] % 2


def cross_fit_critics(
    episodes: Sequence[Episode], cfg: TrainConfig, epochs: float, seed: int, on_fold: Callable[[], None] | None = None
) -> CriticScores:
    """Train the potential and value critics on each fold of tasks and score the other fold with them.

    When every task falls in one fold (a batch of one task), the tasks are split by episode instead.
    """
    from milepost.training.critics import Critic, CriticSample, ReplayBuffer

    folds = [_fold(ep.task_id) for ep in episodes]
    if len(set(folds)) < 2:
        folds = [i % 2 for i in range(len(episodes))]
    rows: list[list[Any]] = []
    for ep in episodes:
        y = progress_labels(ep)
        rows.append(
            [
                CriticSample(_obs_ids(t.observation), None, float(y[k]), float(ep.success))
                for k, t in enumerate(ep.turns)
            ]
        )
    potential: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
    value: list[torch.Tensor] = [torch.zeros(0)] * len(episodes)
    m = cfg.mira
    for fold in (0, 1):
        train = [s for f, r in zip(folds, rows) for s in r if f != fold]
        critics = {}
        for kind, loss, lr, offset in (("potential", "mse", m.potential_lr, 1), ("value", "bce", m.value_lr, 2)):
            critic = Critic(
                "separate",
                loss,
                hidden=0,
                vocab_size=258,
                pad_id=256,
                eos_id=257,
                size=CRITIC_SIZE,  # type: ignore[arg-type]
                lr=lr,
                seed=seed + offset + 10 * fold,
            )
            buffer = ReplayBuffer(max(1, len(train)))
            buffer.add(train)
            for batch in buffer.batches(m.critic_batch, epochs, random.Random(seed + fold)):
                critic.step(batch)
            critics[kind] = critic
        for i, (f, r) in enumerate(zip(folds, rows)):
            if f == fold:
                potential[i] = critics["potential"].predict(r) if r else torch.zeros(0)
                value[i] = critics["value"].predict(r) if r else torch.zeros(0)
        if on_fold is not None:
            on_fold()
    return CriticScores(potential, value)


# ---------------------------------------------------------------------------------------------------------------
# The estimators, on one batch


def estimator_advantages(
    name: str, episodes: Sequence[Episode], cfg: TrainConfig, critics: CriticScores | None, seed: int = 0
) -> list[torch.Tensor]:
    """Per episode, the ``(T_i,)`` advantages estimator ``name`` gives the batch ``episodes``."""
    rl = cfg.rl
    ids = sorted({ep.task_id for ep in episodes})
    groups = [ids.index(ep.task_id) for ep in episodes]
    if name in ("paper", "paper-segmented"):
        seg_cfg = cfg
        if name == "paper-segmented":
            seg_cfg = replace(cfg, rl=replace(rl, subgoal_decomposition=True))
        return advantages(
            [trajectory_rewards(ep, seg_cfg) for ep in episodes],
            [step_rewards(ep) for ep in episodes],
            gamma=rl.gamma,
            alpha=rl.alpha,
            cuts=[segment_ends(ep, rl.reward, name == "paper-segmented") for ep in episodes],
            normalisation=rl.normalisation,
            groups=groups,
            std_floor=rl.std_floor,
        )
    if name == "grpo":
        return grpo_advantages(episodes, [float(ep.success) for ep in episodes])
    if name == "gigpo":
        return gigpo_advantages(episodes, [float(ep.success) for ep in episodes])
    if name == "distance":
        return distance_advantages(episodes)
    if name == "random":
        return random_advantages(episodes, seed)
    if critics is None:
        raise ValueError(f"estimator {name!r} needs critic scores")
    raw = []
    for i, ep in enumerate(episodes):
        rewards = trajectory_rewards(ep, cfg)
        potentials = torch.cat([critics.potential[i].float(), torch.zeros(1)])  # terminal potential 0
        values = torch.cat([critics.value[i].float(), torch.zeros(1)])  # V(s_T) = 0 for a finished episode
        shaped = shaped_rewards(rewards, potentials, rl.gamma, cfg.mira.shaping_coef)
        if name == "mira":
            raw.append(discounted_returns(shaped, rl.gamma))
        elif name == "gae":
            raw.append(gae_advantages(rewards, values, gamma=rl.gamma, lam=cfg.mira.gae_lambda))
        else:  # dr
            raw.append(doubly_robust_advantages(shaped, values, float(ep.success), gamma=rl.gamma, lam=cfg.mira.lam))
    return combine_with_steps(
        raw, [step_rewards(ep) for ep in episodes], rl.alpha, rl.normalisation, groups, rl.std_floor
    )


# ---------------------------------------------------------------------------------------------------------------
# The audit


def _score(adv: np.ndarray, t: Truth) -> dict[str, Any]:
    finite = np.isfinite(adv)
    if not finite.all():
        raise ValueError("an estimator returned a non-finite advantage")
    progress = t.delta > 0
    return {
        "spearman": spearman(adv, t.a_star),
        "kendall": kendall_tau_b(adv, t.a_star),
        "sign": sign_agreement(adv, t.delta),
        "length_bias": spearman(t.length[progress], adv[progress]) if progress.sum() > 2 else math.nan,
    }


def _resample(episodes: Sequence[Episode], rng: random.Random) -> tuple[list[Episode], list[int]]:
    """Tasks drawn with replacement, all episodes of each; every drawn copy is its own task (renamed)."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        by_task[ep.task_id].append(i)
    tasks = sorted(by_task)
    out, index = [], []
    for copy in range(len(tasks)):
        task = tasks[rng.randrange(len(tasks))]
        for i in by_task[task]:
            out.append(replace(episodes[i], task_id=f"{task}#{copy}"))
            index.append(i)
    return out, index


def _percentile_interval(values: list[float], confidence: float) -> list[float]:
    finite = np.array([v for v in values if not math.isnan(v)])
    if len(finite) == 0:
        return [math.nan, math.nan]
    lo = (1.0 - confidence) / 2.0 * 100.0
    return [float(np.percentile(finite, lo)), float(np.percentile(finite, 100.0 - lo))]


def _by_bucket(keys: np.ndarray, adv: np.ndarray, sel: np.ndarray) -> dict[str, float]:
    out = {}
    for k in sorted(set(keys[sel].tolist())):
        pick = sel & (keys == k)
        out[str(int(k))] = float(adv[pick].mean())
    return out


def audit(
    episodes: Sequence[Episode],
    settings: AuditSettings,
    *,
    where: str = "episodes",
    progress: Callable[[str], None] | None = None,
    imported: Mapping[str, tuple[Sequence[torch.Tensor], str]] | None = None,
) -> dict[str, Any]:
    """Score every estimator of ``settings`` against the exact per-turn progress of ``episodes``.

    ``imported``: more rows, name -> (per episode the ``(T_i,)`` advantages another framework gave, a
    description), scored and bootstrapped on the same turns as the estimators (``rollouts_import``).
    """
    extra = dict(imported or {})
    for name, (advs, _) in extra.items():
        if name in ESTIMATORS:
            raise InputError(f"imported advantages named {name!r} would hide the estimator of that name")
        if len(advs) != len(episodes) or any(len(a) != len(ep.turns) for a, ep in zip(advs, episodes)):
            raise ValueError(f"imported advantages {name!r} do not match the episodes' turns")
    keep = [i for i, ep in enumerate(episodes) if ep.turns]
    extra = {n: ([advs[i] for i in keep], d) for n, (advs, d) in extra.items()}
    episodes = [episodes[i] for i in keep]
    check_has_distance(episodes, where)
    say = progress or (lambda _msg: None)
    cfg = settings.config or TrainConfig()
    if settings.config is None:
        steps = max(len(ep.turns) for ep in episodes)
        cfg = replace(cfg, env=replace(cfg.env, name=str(episodes[0].meta.get("env", cfg.env.name)), max_steps=steps))
    t = truth(episodes)
    critics = None
    if any(e in CRITIC_ESTIMATORS for e in settings.estimators):
        say("training the critics on each half of the tasks (cross-fitting)")
        critics = cross_fit_critics(episodes, cfg, settings.critic_epochs, settings.seed)
    results: dict[str, Any] = {}
    flat: dict[str, np.ndarray] = {}
    for name in settings.estimators:
        adv = torch.cat(estimator_advantages(name, episodes, cfg, critics, settings.seed)).double().numpy()
        flat[name] = adv
        results[name] = _score(adv, t)
        results[name]["description"] = DESCRIPTIONS[name]
        progress_turns = t.delta > 0
        results[name]["mean_by_turn"] = _by_bucket(t.turn_index, adv, np.ones_like(progress_turns))
        results[name]["mean_progress_by_length"] = _by_bucket(t.length, adv, progress_turns)
    for name, (advs, description) in extra.items():
        adv = torch.cat([torch.as_tensor(a) for a in advs]).double().numpy()
        flat[name] = adv
        results[name] = _score(adv, t)
        results[name]["description"] = description
        results[name]["mean_by_turn"] = _by_bucket(t.turn_index, adv, np.ones_like(t.delta > 0))
        results[name]["mean_progress_by_length"] = _by_bucket(t.length, adv, t.delta > 0)
    names = (*settings.estimators, *extra)
    if settings.boot:
        say(f"bootstrap over tasks ({settings.boot} resamples)")
        rng = random.Random(settings.seed)
        draws: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(settings.boot):
            sample, index = _resample(episodes, rng)
            st = truth(sample)
            sub = None
            if critics is not None:
                sub = CriticScores([critics.potential[i] for i in index], [critics.value[i] for i in index])
            for name in settings.estimators:
                adv = torch.cat(estimator_advantages(name, sample, cfg, sub, settings.seed)).double().numpy()
                draws[name].append(spearman(adv, st.a_star))
            for name, (advs, _) in extra.items():
                adv = torch.cat([torch.as_tensor(advs[i]) for i in index]).double().numpy()
                draws[name].append(spearman(adv, st.a_star))
        for name in names:
            vals = [v for v in draws[name] if not math.isnan(v)]
            results[name]["spearman_interval"] = _percentile_interval(draws[name], settings.confidence)
            results[name]["spearman_boot_std"] = float(np.std(vals)) if vals else math.nan
    ranking = sorted(names, key=lambda n: -_nan_low(results[n]["spearman"]))
    deltas = t.delta
    return {
        "where": where,
        "episodes": len(episodes),
        "turns": len(deltas),
        "tasks": len({ep.task_id for ep in episodes}),
        "success_rate": float(np.mean([ep.success for ep in episodes])),
        "turn_kinds": {
            "progress": int((deltas > 0).sum()),
            "stay": int((deltas == 0).sum()),
            "regress": int(((deltas < 0) & np.isfinite(deltas)).sum()),
            "dead_end": int(np.isinf(deltas).sum()),
        },
        "boot": settings.boot,
        "confidence": settings.confidence,
        "ranking": ranking,
        "estimators": results,
        "calibration": _calibration(flat, deltas),
    }


def _nan_low(x: float) -> float:
    return -math.inf if math.isnan(x) else x


def _delta_label(d: float) -> str:
    if math.isinf(d):
        return "dead"
    return str(int(max(-3, min(3, round(d)))))


def _calibration(flat: dict[str, np.ndarray], deltas: np.ndarray) -> dict[str, dict[str, float]]:
    """Mean standardised advantage at each delta d (clipped to -3..3; ``dead`` into a dead end)."""
    labels = np.array([_delta_label(d) for d in deltas])
    out: dict[str, dict[str, float]] = {}
    for name, adv in flat.items():
        sd = adv.std()
        z = (adv - adv.mean()) / sd if sd > 0 else np.zeros_like(adv)
        out[name] = {lab: float(z[labels == lab].mean()) for lab in _order(set(labels.tolist()))}
    return out


def _order(labels: set[str]) -> list[str]:
    return sorted(labels, key=lambda s: -99 if s == "dead" else int(s))


# ---------------------------------------------------------------------------------------------------------------
# Report


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def report_markdown(result: dict[str, Any], title: str) -> str:
    """``credit.md``: the estimators ranked by Spearman correlation with A*, with intervals."""
    conf = round(result["confidence"] * 100)
    kinds = result["turn_kinds"]
    lines = [
        f"# Credit audit: {title}",
        "",
        f"{result['episodes']} episodes of {result['tasks']} tasks ({result['turns']} turns; "
        f"{kinds['progress']} progress, {kinds['stay']} stay, {kinds['regress']} regress, {kinds['dead_end']} into a "
        f"dead end); success {100 * result['success_rate']:.1f}%.",
        "",
        "Truth: A*(s_t, a_t) = d(s_t) - d(s_t+1) - c_t from the environment's exact goal distance (c_t the actions the "
        "turn applied). Sign columns: share of progress turns with A > 0, of regressing turns with A < 0, of "
        "staying turns with A < 0. Length bias: Spearman correlation of episode length with the advantage of "
        "progress turns (0 is unbiased)."
        + (
            f" Intervals: {conf}% percentile bootstrap over tasks, {result['boot']} resamples."
            if result["boot"]
            else ""
        ),
        "",
        "| rank | estimator | Spearman | interval | Kendall | sign +/-/0 | length bias | what it is |",
        "| ---: | --- | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for rank, name in enumerate(result["ranking"], 1):
        r = result["estimators"][name]
        interval = r.get("spearman_interval")
        iv = f"[{_fmt(interval[0], 2)}, {_fmt(interval[1], 2)}]" if interval else "not computed"
        s = r["sign"]
        sign = f"{_fmt(s['progress'], 2)} / {_fmt(s['regress'], 2)} / {_fmt(s['stay'], 2)}"
        lines.append(
            f"| {rank} | {name} | {_fmt(r['spearman'])} | {iv} | {_fmt(r['kendall'])} | {sign} | "
            f"{_fmt(r['length_bias'], 2)} | {r['description']} |"
        )
    lines += ["", "![calibration and correlation](credit.png)", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """``credit.png``: Spearman with intervals per estimator, and the calibration of each against delta d."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = result["ranking"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    rho = [result["estimators"][n]["spearman"] for n in names]
    ys = np.arange(len(names))[::-1]
    ax1.barh(ys, [0 if math.isnan(r) else r for r in rho], color="tab:blue", alpha=0.7)
    for y, n in zip(ys, names):
        iv = result["estimators"][n].get("spearman_interval")
        if iv and not math.isnan(iv[0]):
            ax1.plot(iv, [y, y], color="black", lw=1.5)
    ax1.set_yticks(ys, names)
    ax1.axvline(0, color="grey", lw=0.8)
    ax1.set_xlim(-1, 1)
    ax1.set_xlabel("Spearman correlation with A* (bars: bootstrap interval)")
    ax1.set_title("how well each estimator ranks turns")
    labels = _order({lab for cal in result["calibration"].values() for lab in cal})
    xs = np.arange(len(labels))
    for n in names:
        cal = result["calibration"][n]
        ax2.plot(xs, [cal.get(lab, math.nan) for lab in labels], marker="o", label=n)
    ax2.set_xticks(xs, labels)
    ax2.set_xlabel("true progress of the turn, delta d (dead: into a dead end)")
    ax2.set_ylabel("mean advantage (standardised per estimator)")
    ax2.axhline(0, color="grey", lw=0.8)
    ax2.set_title("calibration")
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def write_report(result: dict[str, Any], out: Path, title: str) -> list[str]:
    """Write ``credit.json``, ``credit.md`` and ``credit.png`` into ``out``; return their names."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "credit.json", _json_safe(result))
    atomic_write_text(out / "credit.md", report_markdown(result, title))
    plot(result, out / "credit.png")
    return ["credit.md", "credit.png", "credit.json"]


def _json_safe(obj: Any) -> Any:
    """NaN and infinities as null: ``credit.json`` stays strict JSON."""
    if isinstance(obj, float):
        return None if not math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj
