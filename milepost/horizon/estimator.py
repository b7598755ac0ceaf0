"""The horizon score: how long a task (in atomic steps of goal distance) a policy finishes, with an interval.

Two models of success against a task's goal distance ``d`` (the optimal number of atomic actions):

- METR's form (Kwa et al. 2025, arXiv 2503.14499, section 4): logistic regression of success on ``log d``,
  ``p(d) = sigmoid(a + b log d)``; the horizon at success rate ``s`` is ``d_s = exp((logit(s) - a) / b)``.
- Per-step reliability: every atomic step succeeds with probability ``q``, independently, so ``p(d) = q^d`` and
  ``d_s = log s / log q`` (``d_50 = log 0.5 / log q``).

Both are fitted by maximum likelihood on the episodes (one Bernoulli outcome each) and compared by
log-likelihood, AIC and BIC. Intervals come from a bootstrap with one of two resampling schemes (``RESAMPLING``):
``two-level`` (the default; METR's hierarchical scheme, one level shorter) draws tasks with replacement within
each environment and then redraws each drawn task's samples; ``tasks`` keeps each drawn task's observed counts.
Redrawing the samples counts the within-task noise twice (the task draw already carries it), so two-level
intervals are wider. Measured in simulation (``docs/results/horizon/README.md``, 200 suites of 40 tasks x 4
samples): 95% two-level intervals held the truth 98.0% (logistic with task effects) and 99.0% (binomial law) of
the time, task-only ones 91.0% and 86.5%. Two-level is the default because an interval that is too wide is the
safer error for a published number. Percentile intervals.

Where METR's form departs from METR: METR fits with scikit-learn's default L2 penalty (C = 1, i.e. 0.1 on a mean
loss weighted by task); here the penalty on the slope is ``SLOPE_PENALTY`` = 1e-5 per episode on the summed
likelihood. A penalty of METR's size pulls the slope toward 0, and our success curves fall steeply with distance
(a 20-step Sudoku is solved, a 40-step one is not): the penalised fit would flatten them and move the horizon by
tens of steps. 1e-5 only keeps perfectly separated data finite.

Curves the logistic cannot read are said in words (``HorizonEstimate.status``): no failures (then a one-sided
exact binomial bound: the horizon is at least X with confidence c), no successes (at most X), every task at one
distance (no slope), and success that does not fall with distance (no horizon).

scipy is not a dependency of milepost (and not installed), so the two fits are written out here: Newton's
method / IRLS for the two-parameter logistic (vectorised over bootstrap resamples, one 2x2 solve per resample
and iteration) and a bisection on the concave one-parameter likelihood of ``q``. Both are short, exact
maximum-likelihood fits; scikit-learn would add a large dependency for a two-parameter model.

Data enter as per-task counts: ``TaskOutcomes(distance, successes, trials)``; ``outcomes`` per environment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LEVELS = (0.5, 0.8)
RESAMPLING = ("two-level", "tasks")
"""Bootstrap schemes: tasks within each environment and then each task's samples (default), or tasks only."""
"""Success rates whose horizons are reported: the 50% and 80% horizons."""
SLOPE_PENALTY = 1e-5
"""L2 penalty on the logistic slope ``b`` (per episode): keeps the fit finite when success is perfectly separated
by distance, where the maximum-likelihood slope is infinite; small enough to leave ordinary fits unchanged."""
MAX_NEWTON = 100
TOL = 1e-9


@dataclass(frozen=True)
class TaskOutcomes:
    """One task's outcomes: its goal distance (atomic steps), successes and samples played."""

    distance: int
    successes: int
    trials: int
    env: str = ""
    task_id: str = ""

    def __post_init__(self) -> None:
        for name in ("distance", "successes", "trials"):
            value = getattr(self, name)
            # bool is an int subclass; NaN and 2.5 are not counts
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if self.distance < 1:
            raise ValueError(f"goal distance must be >= 1, got {self.distance}")
        if not 0 <= self.successes <= self.trials or self.trials < 1:
            raise ValueError(f"need 0 <= successes <= trials, trials >= 1; got {self.successes}/{self.trials}")


@dataclass(frozen=True)
class LogisticFit:
    """``p(d) = sigmoid(a + b log d)`` and its log-likelihood over ``n`` episodes."""

    a: float
    b: float
    loglik: float
    n: int

    def prob(self, d: np.ndarray | float) -> np.ndarray:
        return _sigmoid(self.a + self.b * np.log(d))

    def horizon(self, level: float = 0.5) -> float:
        return float(logistic_horizon(np.array([self.a]), np.array([self.b]), level)[0])


@dataclass(frozen=True)
class ReliabilityFit:
    """``p(d) = q^d`` and its log-likelihood over ``n`` episodes."""

    q: float
    loglik: float
    n: int

    def prob(self, d: np.ndarray | float) -> np.ndarray:
        return np.power(self.q, np.asarray(d, dtype=float))

    def horizon(self, level: float = 0.5) -> float:
        return reliability_horizon(self.q, level)


@dataclass
class HorizonEstimate:
    """Both fits on one set of tasks, with bootstrap intervals of the horizons."""

    logistic: LogisticFit
    reliability: ReliabilityFit
    tasks: int
    episodes: int
    successes: int
    distance_range: tuple[int, int]
    confidence: float
    boot: int
    intervals: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    """model ("logistic" | "reliability") -> "h50" | "h80" -> (lo, hi)"""
    band: dict[str, list[float]] = field(default_factory=dict)
    """the logistic curve's pointwise interval: "d", "lo", "hi" (for plots)"""
    boot_params: np.ndarray | None = None
    """(B, 4) bootstrap logistic parameters (a, b) and the resample's successes and episodes; in memory only"""
    resampling: str = "two-level"
    status: str = "ok"
    """"ok" | "no_failures" | "no_successes" | "one_distance" | "not_declining" (``curve_status``)"""
    note: str = ""
    """the status in words, for the report"""
    bound: dict[str, Any] = field(default_factory=dict)
    """the exact one-sided bound where the fit cannot give a horizon: {"kind": "at_least" | "at_most",
    "h50": d | None, "h80": d | None, "confidence": c}"""

    @property
    def identified(self) -> bool:
        """Whether the fitted horizons mean anything (the curve falls across more than one distance)."""
        return self.status == "ok"

    def horizons(self, model: str = "logistic") -> dict[str, float]:
        fit = self.logistic if model == "logistic" else self.reliability
        return {_key(level): fit.horizon(level) for level in LEVELS}

    def boot_horizons(self, level: float = 0.5) -> np.ndarray:
        """(B,) the logistic horizon of every bootstrap resample."""
        if self.boot_params is None:
            raise ValueError("no bootstrap parameters kept")
        a, b, wins, plays = self.boot_params.T
        return resample_horizons(a, b, wins, plays, level)

    def comparison(self) -> dict[str, Any]:
        """Log-likelihood, AIC and BIC of both models; the preferred one by AIC."""
        n = max(self.episodes, 1)
        rows: dict[str, Any] = {}
        for name, fit, k in (("logistic", self.logistic, 2), ("reliability", self.reliability, 1)):
            rows[name] = {
                "params": k,
                "loglik": fit.loglik,
                "aic": 2 * k - 2 * fit.loglik,
                "bic": k * math.log(n) - 2 * fit.loglik,
            }
        rows["preferred_by_aic"] = min(("logistic", "reliability"), key=lambda m: rows[m]["aic"])
        rows["preferred_by_bic"] = min(("logistic", "reliability"), key=lambda m: rows[m]["bic"])
        return rows

    def _published(self, values: Any) -> Any:
        """The fitted numbers where the fit identifies a horizon; None where it does not (the rising curve's
        "horizon" is a sign of rounding; read ``status``, ``note`` and ``bound`` instead)."""
        if self.identified:
            return values
        return dict.fromkeys(values) if isinstance(values, dict) else [None for _ in values]

    def to_dict(self) -> dict[str, Any]:
        """The fit for ``horizon.json``; horizons and intervals are None where ``status`` is not "ok"."""
        return {
            "status": self.status,
            "note": self.note,
            "bound": _json_floats(self.bound) if self.bound else {},
            "resampling": self.resampling,
            "tasks": self.tasks,
            "episodes": self.episodes,
            "successes": self.successes,
            "distance_range": list(self.distance_range),
            "logistic": {
                "a": self.logistic.a,
                "b": self.logistic.b,
                "horizons": self._published(_json_floats(self.horizons("logistic"))),
                "intervals": {
                    k: self._published(_json_floats(list(v))) for k, v in self.intervals.get("logistic", {}).items()
                },
            },
            "reliability": {
                "q": self.reliability.q,
                "horizons": self._published(_json_floats(self.horizons("reliability"))),
                "intervals": {
                    k: self._published(_json_floats(list(v))) for k, v in self.intervals.get("reliability", {}).items()
                },
            },
            "comparison": self.comparison(),
            "confidence": self.confidence,
            "boot": self.boot,
            "band": {k: _json_floats(v) for k, v in self.band.items()},
        }


def _percentile(values: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Percentiles without interpolation (horizons may be infinite, and inf - inf is no number)."""
    return np.percentile(values, qs, method="inverted_cdf")


def interval_percentiles(confidence: float) -> tuple[float, float]:
    """The two percentiles of a two-sided ``confidence`` interval, rounded so that float noise does not move
    the index: (1 - 0.95) / 2 * 100 is 2.500000000000002, which "inverted_cdf" reads as the 26th of 1000
    sorted values instead of the 25th."""
    alpha = round((1.0 - confidence) / 2.0 * 100.0, 9)
    return alpha, round(100.0 - alpha, 9)


def _key(level: float) -> str:
    return f"h{round(level * 100)}"


def _json_floats(values: Any) -> Any:
    """inf / nan as None (JSON has neither); the report says "beyond the suite" for them."""
    if isinstance(values, str | bool | int | None):
        return values
    if isinstance(values, dict):
        return {k: _json_floats(v) for k, v in values.items()}
    if isinstance(values, list | tuple):
        return [_json_floats(v) for v in values]
    value = float(values)
    return value if math.isfinite(value) else None


def _sigmoid(z: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -500, 500)))


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def logistic_horizon(a: np.ndarray, b: np.ndarray, level: float = 0.5) -> np.ndarray:
    """``d`` where ``sigmoid(a + b log d) = level``; inf when success does not fall with distance (b >= 0)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out = np.full(a.shape, np.inf)
    falling = b < 0
    with np.errstate(over="ignore"):
        out[falling] = np.exp((_logit(level) - a[falling]) / b[falling])
    return out


def resample_horizons(
    a: np.ndarray, b: np.ndarray, successes: np.ndarray, trials: np.ndarray, level: float = 0.5
) -> np.ndarray:
    """Logistic horizons of bootstrap resamples, with the degenerate ones read from their counts rather than from
    the sign of a slope of order 1e-13: a resample where every episode succeeded is unbounded (inf), one where
    none did is at 0."""
    out = logistic_horizon(a, b, level)
    out[np.asarray(successes) >= np.asarray(trials)] = np.inf
    out[np.asarray(successes) <= 0] = 0.0
    return out


def reliability_horizon(q: float, level: float = 0.5) -> float:
    """``d`` where ``q^d = level``: ``log level / log q`` (inf for q = 1, 0 for q = 0)."""
    if q >= 1.0:
        return math.inf
    if q <= 0.0:
        return 0.0
    return math.log(level) / math.log(q)


# -- the logistic fit: Newton / IRLS, batched over resamples ------------------------------------------------


def fit_logistic_batch(
    x: np.ndarray, successes: np.ndarray, trials: np.ndarray, penalty: float = SLOPE_PENALTY
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximum-likelihood ``(a, b)`` of ``sigmoid(a + b x)`` for each row of counts.

    Args:
        x: (T,) the regressor (log goal distance) of each task.
        successes: (B, T) successes per task in each of B datasets (e.g. bootstrap resamples).
        trials: (B, T) episodes per task (0 = task not drawn).
        penalty: L2 penalty on ``b``, times the row's episode count.

    Returns:
        ``a`` (B,), ``b`` (B,) and the (unpenalised) binomial log-likelihood (B,) without the constant
        binomial coefficients, i.e. the Bernoulli log-likelihood of the episodes.
    """
    x = np.asarray(x, dtype=float)
    s = np.atleast_2d(np.asarray(successes, dtype=float))
    m = np.atleast_2d(np.asarray(trials, dtype=float))
    rows = s.shape[0]
    n = m.sum(axis=1)
    lam = penalty * np.maximum(n, 1.0)
    # Start at the pooled rate with no slope.
    rate = np.clip(s.sum(axis=1) / np.maximum(n, 1.0), 1e-3, 1 - 1e-3)
    a = np.log(rate / (1 - rate))
    b = np.zeros(rows)
    for _ in range(MAX_NEWTON):
        p = _sigmoid(a[:, None] + b[:, None] * x[None, :])  # (B, T)
        r = s - m * p  # residual counts
        w = m * p * (1 - p)
        g_a = r.sum(axis=1)
        g_b = (r * x).sum(axis=1) - lam * b
        h_aa = w.sum(axis=1) + 1e-12
        h_ab = (w * x).sum(axis=1)
        h_bb = (w * x * x).sum(axis=1) + lam
        det = h_aa * h_bb - h_ab * h_ab
        det = np.where(np.abs(det) < 1e-12, 1e-12, det)
        da = (h_bb * g_a - h_ab * g_b) / det
        db = (h_aa * g_b - h_ab * g_a) / det
        # Damped steps: all-success or all-failure rows drive a toward infinity; a bounded step keeps it sane.
        step = np.minimum(1.0, 5.0 / np.maximum(np.abs(da) + np.abs(db), 1e-12))
        a = a + step * da
        b = b + step * db
        if float(np.max(np.abs(da) + np.abs(db))) < TOL:
            break
    z = a[:, None] + b[:, None] * x[None, :]
    loglik = (s * _log_sigmoid(z) + (m - s) * _log_sigmoid(-z)).sum(axis=1)
    return a, b, loglik


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def fit_logistic(outcomes: Sequence[TaskOutcomes]) -> LogisticFit:
    """METR's fit: ``success ~ sigmoid(a + b log d)`` by maximum likelihood over every episode."""
    d, s, m = _arrays(outcomes)
    a, b, ll = fit_logistic_batch(np.log(d), s[None, :], m[None, :])
    return LogisticFit(float(a[0]), float(b[0]), float(ll[0]), int(m.sum()))


# -- the per-step reliability fit ---------------------------------------------------------------------------


def fit_reliability(outcomes: Sequence[TaskOutcomes]) -> ReliabilityFit:
    """``success ~ q^d`` by maximum likelihood: a bisection on ``u = log q``, whose log-likelihood
    ``sum(s d u + (m - s) log(1 - e^{d u}))`` is concave (its derivative falls monotonically)."""
    d, s, m = _arrays(outcomes)
    q = _fit_q(d, s, m)
    return ReliabilityFit(q, _reliability_loglik(q, d, s, m), int(m.sum()))


def _fit_q(d: np.ndarray, s: np.ndarray, m: np.ndarray) -> float:
    fails = m - s
    if fails.sum() == 0:
        return 1.0
    if s.sum() == 0:
        return 0.0

    def slope(u: float) -> float:
        e = np.exp(d * u)
        return float((s * d).sum() - (fails * d * e / -np.expm1(d * u)).sum())

    # slope(u) falls from sum(s d) > 0 (u -> -inf) to -inf (u -> 0): one root, bracketed by [-60, 0).
    lo, hi = -60.0, -1e-12
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if slope(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-14:
            break
    return float(math.exp(0.5 * (lo + hi)))


def _reliability_loglik(q: float, d: np.ndarray, s: np.ndarray, m: np.ndarray) -> float:
    p = np.clip(np.power(q, d), 1e-300, 1.0)
    fail = np.clip(1.0 - p, 1e-300, 1.0)
    ll = (s * np.log(p)).sum() + ((m - s) * np.log(fail)).sum()
    return float(ll)


def _arrays(outcomes: Sequence[TaskOutcomes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not outcomes:
        raise ValueError("no tasks to fit")
    d = np.array([o.distance for o in outcomes], dtype=float)
    s = np.array([o.successes for o in outcomes], dtype=float)
    m = np.array([o.trials for o in outcomes], dtype=float)
    return d, s, m


# -- the hierarchical bootstrap -----------------------------------------------------------------------------


def task_draws(envs: Sequence[str], boot: int, rng: np.random.Generator) -> np.ndarray:
    """(B, T) how often each task is drawn in each of ``boot`` resamples: tasks with replacement within each
    environment, so every environment keeps its task count."""
    t = len(envs)
    draws = np.zeros(boot * t, dtype=np.int64)
    groups: dict[str, list[int]] = {}
    for i, env in enumerate(envs):
        groups.setdefault(env, []).append(i)
    offsets = (np.arange(boot) * t)[:, None]
    for members in groups.values():
        idx = np.asarray(members)
        picks = idx[rng.integers(0, len(idx), size=(boot, len(idx)))] + offsets  # (B, size of the group)
        draws += np.bincount(picks.ravel(), minlength=boot * t)
    return draws.reshape(boot, t)


def bootstrap_counts(
    outcomes: Sequence[TaskOutcomes], boot: int, rng: np.random.Generator, resampling: str = "two-level"
) -> tuple[np.ndarray, np.ndarray]:
    """(B, T) successes and trials of ``boot`` resamples: tasks with replacement within each environment (each
    keeps its task count); ``resampling="two-level"`` then redraws each drawn task's samples with replacement
    (a binomial draw at the task's observed rate; a task drawn k times gets k independent sample resamples)."""
    if resampling not in RESAMPLING:
        raise ValueError(f"resampling must be one of {', '.join(RESAMPLING)}, got {resampling!r}")
    s = np.array([o.successes for o in outcomes], dtype=float)
    m = np.array([o.trials for o in outcomes], dtype=np.int64)
    draws = task_draws([o.env for o in outcomes], boot, rng)
    trials = draws * m[None, :]
    if resampling == "tasks":
        return (draws * s[None, :]).astype(float), trials.astype(float)
    # Resampling m samples with replacement from a task's m outcomes = Binomial(m, observed rate), per draw;
    # k draws of the same task sum to Binomial(k m, rate).
    rate = s / m
    successes = rng.binomial(trials, np.broadcast_to(rate, trials.shape))
    return successes.astype(float), trials.astype(float)


def estimate(
    outcomes: Sequence[TaskOutcomes],
    *,
    boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    band_points: int = 60,
    resampling: str = "two-level",
) -> HorizonEstimate:
    """Fit both models and bootstrap the 50% / 80% horizons (``confidence`` percentile intervals); say in
    ``status`` / ``note`` when the curve gives no horizon, with an exact one-sided bound where one exists.

    Raises:
        ValueError: no tasks, ``boot`` < 1, ``confidence`` outside (0, 1) or an unknown ``resampling``.
    """
    if boot < 1:
        raise ValueError(f"boot must be >= 1, got {boot}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    outcomes = list(outcomes)
    logistic = fit_logistic(outcomes)
    reliability = fit_reliability(outcomes)
    d, s, m = _arrays(outcomes)
    rng = np.random.default_rng(seed)
    bs, bm = bootstrap_counts(outcomes, boot, rng, resampling)
    a, b, _ = fit_logistic_batch(np.log(d), bs, bm)
    qs = list(interval_percentiles(confidence))
    intervals: dict[str, dict[str, tuple[float, float]]] = {"logistic": {}, "reliability": {}}
    boot_q = np.array([_fit_q(d, bs[i], bm[i]) for i in range(boot)])
    for level in LEVELS:
        lo, hi = _percentile(resample_horizons(a, b, bs.sum(axis=1), bm.sum(axis=1), level), qs)
        intervals["logistic"][_key(level)] = (float(lo), float(hi))
        rel = np.array([reliability_horizon(q, level) for q in boot_q])
        lo, hi = _percentile(rel, qs)
        intervals["reliability"][_key(level)] = (float(lo), float(hi))
    grid = np.geomspace(1.0, max(2.0, float(d.max()) * 2.0), band_points)
    curves = _sigmoid(a[:, None] + b[:, None] * np.log(grid)[None, :])
    lo_band, hi_band = np.percentile(curves, qs, axis=0)
    status, note, bound = curve_status(outcomes, logistic, confidence)
    return HorizonEstimate(
        logistic=logistic,
        reliability=reliability,
        tasks=len(outcomes),
        episodes=int(m.sum()),
        successes=int(s.sum()),
        distance_range=(int(d.min()), int(d.max())),
        confidence=confidence,
        boot=boot,
        intervals=intervals,
        band={"d": grid.tolist(), "lo": lo_band.tolist(), "hi": hi_band.tolist()},
        boot_params=np.stack([a, b, bs.sum(axis=1), bm.sum(axis=1)], axis=1),
        resampling=resampling,
        status=status,
        note=note,
        bound=bound,
    )


def by_env(outcomes: Sequence[TaskOutcomes]) -> Mapping[str, list[TaskOutcomes]]:
    groups: dict[str, list[TaskOutcomes]] = {}
    for o in outcomes:
        groups.setdefault(o.env, []).append(o)
    return groups


# -- curves the logistic cannot read: status in words, exact one-sided bounds ------------------------------------


FLAT_SLOPE = 1e-6
"""A fitted slope above -FLAT_SLOPE is no decline: the horizon of such a curve is a sign of rounding."""


def curve_status(
    outcomes: Sequence[TaskOutcomes], fit: LogisticFit, confidence: float
) -> tuple[str, str, dict[str, Any]]:
    """Whether the logistic fit identifies a horizon; if not, why in words and the exact bound that remains.

    Returns:
        ``(status, note, bound)``: status "ok" | "no_failures" | "no_successes" | "one_distance" |
        "not_declining"; ``bound`` is empty or ``{"kind", "h50", "h80", "confidence"}``.
    """
    d, s, m = _arrays(outcomes)
    conf = round(100 * confidence)
    if s.sum() == m.sum():
        bound: dict[str, Any] = {"kind": "at_least", "confidence": confidence}
        bound.update({_key(lv): horizon_lower_bound(outcomes, lv, confidence) for lv in LEVELS})
        note = (
            f"every episode succeeded (longest task {int(d.max())} steps): the curve never falls, so only a bound: "
            f"with {conf}% confidence the 50% horizon is at least {_bound_text(bound['h50'])} and the 80% horizon "
            f"at least {_bound_text(bound['h80'])} (exact binomial bound, episodes as independent trials)"
        )
        return "no_failures", note, bound
    if s.sum() == 0:
        bound = {"kind": "at_most", "confidence": confidence}
        bound.update({_key(lv): horizon_upper_bound(outcomes, lv, confidence) for lv in LEVELS})
        note = (
            f"no episode succeeded (shortest task {int(d.min())} steps): with {conf}% confidence the 50% horizon "
            f"is below {_bound_text(bound['h50'])} (exact binomial bound, episodes as independent trials)"
        )
        return "no_successes", note, bound
    if len(set(d.tolist())) < 2:
        note = (
            f"every task is {int(d[0])} steps from its goal: success at one distance has no slope, so no horizon "
            f"({100 * s.sum() / m.sum():.1f}% solved at d = {int(d[0])})"
        )
        return "one_distance", note, {}
    if fit.b > -FLAT_SLOPE:
        note = (
            f"success does not fall with distance (fitted slope b = {fit.b:+.3f} per log step): no horizon; "
            "read the success-by-distance table"
        )
        return "not_declining", note, {}
    return "ok", "", {}


def _bound_text(value: float | None) -> str:
    return "no distance in the suite" if value is None else f"{value:g} steps"


def binomial_lower(successes: int, trials: int, confidence: float) -> float:
    """One-sided exact (Clopper-Pearson) lower bound on a success probability: the p whose chance of
    ``successes`` or more in ``trials`` is ``1 - confidence``. With every trial a success, ``(1 - c)^(1/n)``."""
    if successes <= 0:
        return 0.0
    alpha = 1.0 - confidence
    if successes == trials:
        return float(alpha ** (1.0 / trials))
    lo, hi = 0.0, 1.0
    for _ in range(100):  # P(X >= s | p) rises with p: bisect for the p where it equals alpha
        mid = 0.5 * (lo + hi)
        if _upper_tail(successes, trials, mid) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def binomial_upper(successes: int, trials: int, confidence: float) -> float:
    """One-sided exact upper bound on a success probability (the lower bound of the failures, mirrored)."""
    return 1.0 - binomial_lower(trials - successes, trials, confidence)


def _upper_tail(successes: int, trials: int, p: float) -> float:
    """P(Binomial(trials, p) >= successes), summed in log space."""
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [
        math.lgamma(trials + 1)
        - math.lgamma(k + 1)
        - math.lgamma(trials - k + 1)
        + k * math.log(p)
        + (trials - k) * math.log1p(-p)
        for k in range(successes, trials + 1)
    ]
    top = max(logs)
    return float(math.exp(top) * sum(math.exp(x - top) for x in logs))


def horizon_lower_bound(outcomes: Sequence[TaskOutcomes], level: float, confidence: float) -> float | None:
    """The longest distance ``d`` at which success is at least ``level`` with ``confidence``, if success does
    not rise with distance: then p(d) is at least the pooled rate of the tasks at ``d`` and beyond, whose exact
    lower bound is tested at each distance from the shortest up (a fixed-sequence test, so the claim holds at
    ``confidence`` jointly); the walk stops at the first distance whose bound falls under ``level``."""
    d, s, m = _arrays(outcomes)
    found: float | None = None
    for x in sorted(set(d.tolist())):
        beyond = d >= x
        if binomial_lower(int(s[beyond].sum()), int(m[beyond].sum()), confidence) < level:
            break
        found = x
    return found


def horizon_upper_bound(outcomes: Sequence[TaskOutcomes], level: float, confidence: float) -> float | None:
    """The shortest distance ``d`` at which success is below ``level`` with ``confidence`` (the mirror of
    ``horizon_lower_bound``: tasks at ``d`` and shorter, from the longest distance down)."""
    d, s, m = _arrays(outcomes)
    found: float | None = None
    for x in sorted(set(d.tolist()), reverse=True):
        within = d <= x
        if binomial_upper(int(s[within].sum()), int(m[within].sum()), confidence) >= level:
            break
        found = x
    return found


def geometric_mean_horizon(fits: Mapping[str, HorizonEstimate], level: float, confidence: float) -> dict[str, Any]:
    """The cross-environment summary: the geometric mean of the per-environment logistic horizons (every
    environment weighs the same, whatever its task count or step budget), with the percentile interval of the
    same mean over the environments' independent bootstrap resamples. Defined only when every environment has a
    horizon; otherwise the reason.
    """
    missing = [f"{env} ({fit.status.replace('_', ' ')})" for env, fit in fits.items() if not fit.identified]
    estimand = "geometric mean of the per-environment 50%/80% horizons, equal environment weights"
    if missing or not fits:
        return {"estimand": estimand, "value": None, "interval": None, "undefined": ", ".join(missing)}
    value = math.exp(sum(math.log(f.logistic.horizon(level)) for f in fits.values()) / len(fits))
    with np.errstate(divide="ignore"):
        logs = np.mean([np.log(f.boot_horizons(level)) for f in fits.values()], axis=0)
    lo, hi = _percentile(np.exp(logs), interval_percentiles(confidence))
    return {"estimand": estimand, "value": value, "interval": [float(lo), float(hi)], "undefined": ""}
