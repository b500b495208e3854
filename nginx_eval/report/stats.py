"""The report's statistics: intervals, paired tests, multiplicity and power, as pure functions.

Everything here is computed with scipy.stats and statsmodels (imported when first needed: a
report pays for them, `doit list` does not); this module chooses the methods and puts them
together, and each function's docstring names its method. Every random procedure takes a seed
(``seed_for``): the same result files give the same report. Unless a caller says otherwise,
intervals are 95% intervals and tests are two-sided at the 5% level (LEVEL, ALPHA).

- One mode: ``wilson`` (one run per task: the Wilson score interval); ``clustered_mean`` (k
  repeats per task, a mode family: the standard error clustered by task, Miller 2024).
- Two modes, one run per task each: ``paired_binary`` (the discordant counts, Newcombe's hybrid
  score interval for paired proportions, the exact McNemar p-value).
- Two modes, at least one with repeats: ``paired_scores`` (the mean per-task difference, a seeded
  paired bootstrap interval and a seeded sign-flip permutation test).
- Many comparisons: ``holm`` (Holm's step-down adjustment).
- Power (at 80% power, POWER; no multiplicity adjustment): ``mcnemar_power``,
  ``mcnemar_detectable`` and ``mcnemar_tasks_needed`` (the exact power of the exact McNemar test,
  given the tasks and the observed discordance); with repeats the paired t approximation
  (``paired_detectable``, ``paired_plan``: the per-task variance split between tasks and within).
- Two modes over two benchmarks: ``cmh_paired`` (Cochran-Mantel-Haenszel, each task a stratum).
- Cost per resolved task, time and cost ratios: ``ratio_interval`` (a seeded percentile
  bootstrap over tasks; an unbounded upper end is None).

What the report says with them: docs/report.md#error-bars-paired-comparisons-and-power.
"""

import contextlib
import hashlib
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

# (low, high) of an interval; an unbounded side of a ratio's is None.
Interval = tuple[float, float]


class _Numpy:
    """numpy, imported on first use: every doit command imports this module (through the
    report), and only the ones that render a report compute anything."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        return getattr(numpy, name)


np = _Numpy()

LEVEL = 0.95  # interval coverage
ALPHA = 0.05  # test level
POWER = 0.80  # for detectable differences and sample sizes
SEED = 20240917  # the root of every seed (seed_for)
RESAMPLES = 9999  # bootstrap and permutation resamples
BIG = 1e300  # stands for an unbounded ratio inside a bootstrap


def seed_for(*parts: object) -> int:
    """A seed of its own for each procedure (e.g. a pair of modes), stable across runs."""
    text = "\0".join([str(SEED)] + [str(p) for p in parts])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Warnings from scipy and numpy on degenerate samples would reach stderr: the callers
    handle those cases themselves."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            yield


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


# -- one mode --------------------------------------------------------------------------------------
def wilson(k: int, n: int, level: float = LEVEL) -> Interval | None:
    """(low, high) of the Wilson score interval for k successes in n trials; None for n = 0."""
    if not n:
        return None
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def clustered_mean(table: Iterable[Sequence[float]], level: float = LEVEL) -> dict[str, Any]:
    """Mean of a tasks x repeats table of scores (a list per task; lists may differ in length
    when unscored runs, infra errors or budget skips, are left out), with the standard error
    clustered by task (Miller 2024, "Adding Error Bars to Evals", section 2.2): statsmodels OLS
    on a constant with ``cov_type="cluster"``, whose small-sample factor G/(G-1) makes it the
    sample standard deviation of the per-task means over sqrt(tasks); the interval is
    mean +- z * SE, clipped to [0, 1].

    Returns {"mean", "se", "interval": (low, high) | None, "tasks", "observations"}; se and
    interval are None with fewer than two tasks."""
    rows = [list(map(float, r)) for r in table if len(r)]
    obs = [v for r in rows for v in r]
    if not obs:
        return {"mean": None, "se": None, "interval": None, "tasks": 0, "observations": 0}
    mean = float(np.mean(obs))
    out: dict[str, Any] = {
        "mean": mean,
        "se": None,
        "interval": None,
        "tasks": len(rows),
        "observations": len(obs),
    }
    if len(rows) < 2:
        return out
    if max(obs) == min(obs):
        se = 0.0
    else:
        from statsmodels.regression.linear_model import OLS

        groups = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
        with _quiet():
            fit = OLS(np.asarray(obs), np.ones(len(obs))).fit(
                cov_type="cluster", cov_kwds={"groups": groups}
            )
        se = float(fit.bse[0])
    z = _z(level)
    out.update(se=se, interval=(_clip(mean - z * se), _clip(mean + z * se)))
    return out


# -- two modes -------------------------------------------------------------------------------------
def discordance_table(x: Sequence[int], y: Sequence[int]) -> tuple[int, int, int, int]:
    """(both, x only, y only, neither) for two aligned 0/1 sequences."""
    both = sum(1 for a, b in zip(x, y, strict=True) if a and b)
    x_only = sum(1 for a, b in zip(x, y, strict=True) if a and not b)
    y_only = sum(1 for a, b in zip(x, y, strict=True) if b and not a)
    return both, x_only, y_only, len(x) - both - x_only - y_only


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided p-value of the exact (conditional) McNemar test on b and c discordant pairs."""
    if b + c == 0:
        return 1.0
    from statsmodels.stats.contingency_tables import mcnemar

    return float(min(1.0, mcnemar([[0, b], [c, 0]], exact=True).pvalue))


def newcombe_paired(
    both: int, x_only: int, y_only: int, neither: int, level: float = LEVEL
) -> Interval | None:
    """(low, high) of Newcombe's hybrid score interval (1998, method 10) for the difference of
    two paired proportions, rate(x) - rate(y); None for an empty table."""
    n = both + x_only + y_only + neither
    if not n:
        return None
    p1, p2 = (both + x_only) / n, (both + y_only) / n
    first, second = wilson(both + x_only, n, level), wilson(both + y_only, n, level)
    assert first is not None and second is not None  # n > 0
    l1, u1 = first
    l2, u2 = second
    margins = (both + x_only) * (y_only + neither) * (both + y_only) * (x_only + neither)
    phi = 0.0
    if margins:
        a: float = both * neither - x_only * y_only
        # Newcombe's correction of the correlation for a positive association
        a = a - n / 2 if a > n / 2 else (0.0 if a >= 0 else a)
        phi = a / math.sqrt(margins)
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(
        max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    )
    return max(-1.0, low), min(1.0, high)


def paired_binary(
    x: Sequence[int],
    y: Sequence[int],
    level: float = LEVEL,
    alpha: float = ALPHA,
    power: float = POWER,
) -> dict[str, Any]:
    """Two modes with one run per task: x, y aligned 0/1 scores (resolved or not) per task.

    Returns {"method": "mcnemar", "tasks", "both", "a_only", "b_only", "neither", "a_rate",
    "b_rate", "difference", "interval", "p_value", "discordance", "detectable"}."""
    both, b, c, neither = discordance_table(x, y)
    n = len(x)
    psi = (b + c) / n if n else 0.0
    return {
        "method": "mcnemar",
        "tasks": n,
        "both": both,
        "a_only": b,
        "b_only": c,
        "neither": neither,
        "a_rate": (both + b) / n if n else None,
        "b_rate": (both + c) / n if n else None,
        "difference": (b - c) / n if n else None,
        "interval": newcombe_paired(both, b, c, neither, level),
        "p_value": mcnemar_exact(b, c),
        "discordance": psi,
        "detectable": mcnemar_detectable(n, psi, alpha, power),
    }


def bootstrap_mean(
    values: Sequence[float] | Any, seed: int, level: float = LEVEL
) -> tuple[Interval, str] | tuple[None, None]:
    """((low, high), method) of a seeded bootstrap interval for the mean of `values`: BCa,
    percentile where BCa is undefined, the value itself when every value is the same."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return None, None
    if np.ptp(values) == 0:
        return (float(values[0]), float(values[0])), "degenerate: every value is the same"
    from scipy.stats import bootstrap

    with _quiet():
        for method in ("BCa", "percentile"):
            res = bootstrap(
                (values,),
                np.mean,
                vectorized=True,
                n_resamples=RESAMPLES,
                confidence_level=level,
                method=method,
                rng=np.random.default_rng(seed),
            )
            low, high = res.confidence_interval
            if np.isfinite(low) and np.isfinite(high):
                return (float(low), float(high)), f"bootstrap {method}"
    return None, None


def sign_flip_p(x: Sequence[float] | Any, y: Sequence[float] | Any, seed: int) -> float:
    """Two-sided p-value of the paired permutation (sign-flip) test of mean(x - y) = 0."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) == 0 or np.all(x == y):
        return 1.0
    from scipy.stats import permutation_test

    def mean_difference(a: Any, b: Any, axis: int) -> Any:
        return np.mean(a - b, axis=axis)

    with _quiet():
        res = permutation_test(
            (x, y),
            mean_difference,
            permutation_type="samples",
            vectorized=True,
            n_resamples=RESAMPLES,
            alternative="two-sided",
            rng=np.random.default_rng(seed),
        )
    return float(min(1.0, res.pvalue))


def paired_scores(
    x: Sequence[float],
    y: Sequence[float],
    seed: int,
    level: float = LEVEL,
    alpha: float = ALPHA,
    power: float = POWER,
) -> dict[str, Any]:
    """Two modes, at least one with repeats: x, y aligned per-task mean scores in [0, 1].

    Returns {"method": "permutation", "tasks", "a_better", "b_better", "ties", "a_rate",
    "b_rate", "difference", "interval", "interval_method", "p_value", "sd", "detectable"}."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(xs)
    d = xs - ys
    interval, how = bootstrap_mean(d, seed, level)
    sd = float(np.std(d, ddof=1)) if n > 1 else None
    return {
        "method": "permutation",
        "tasks": n,
        "a_better": int(np.sum(d > 0)),
        "b_better": int(np.sum(d < 0)),
        "ties": int(np.sum(d == 0)),
        "a_rate": float(np.mean(xs)) if n else None,
        "b_rate": float(np.mean(ys)) if n else None,
        "difference": float(np.mean(d)) if n else None,
        "interval": interval,
        "interval_method": how,
        "p_value": sign_flip_p(xs, ys, seed),
        "sd": sd,
        "detectable": paired_detectable(n, sd, alpha, power),
    }


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given."""
    if not p_values:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]


# -- power -----------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _mcnemar_cutoffs(n: int, alpha: float) -> Any:
    """For m = 0..n discordant pairs, the largest r such that b <= r (or b >= m - r) gives an
    exact McNemar p <= alpha; -1 where no b can."""
    from scipy.stats import binom

    m = np.arange(n + 1)
    with _quiet():
        r = np.nan_to_num(binom.ppf(alpha / 2, m, 0.5), nan=-1).astype(int)
        for _ in range(3):  # ppf lands within a step of the answer: settle it
            too_far = (r >= 0) & (2 * binom.cdf(r, m, 0.5) > alpha)
            r = np.where(too_far, r - 1, r)
            room = (r + 1 <= m) & (2 * binom.cdf(r + 1, m, 0.5) <= alpha)
            r = np.where(room, r + 1, r)
    r = np.where(m == 0, -1, r)
    r.setflags(write=False)
    return r


def mcnemar_power(n: int, discordance: float, difference: float, alpha: float = ALPHA) -> float:
    """Exact power of the two-sided exact McNemar test at level alpha with n tasks, when a share
    `discordance` of tasks is resolved by exactly one of the two modes and the rates differ by
    `difference` (|difference| <= discordance): the probability of rejecting, summed over the
    binomial distribution of the number of discordant tasks."""
    from scipy.stats import binom

    psi, delta = float(discordance), abs(float(difference))
    n = int(n)
    if n < 1 or psi <= 0 or delta > psi + 1e-12:
        return 0.0
    p_b = min(1.0, (psi + delta) / (2 * psi))
    m = np.arange(n + 1)
    r = _mcnemar_cutoffs(n, alpha)
    with _quiet():
        weights = binom.pmf(m, n, psi)
        use = r >= 0
        reject = binom.cdf(r[use], m[use], p_b) + binom.sf(m[use] - r[use] - 1, m[use], p_b)
    return float(min(1.0, np.sum(weights[use] * reject)))


def mcnemar_detectable(
    n: int, discordance: float, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest difference in resolved rate the exact McNemar test detects with `power`
    (n tasks, the given discordance); None when even a difference equal to the discordance
    (every discordant task favouring one mode) is not detected that often, or no discordance."""
    psi = float(discordance)
    if n < 1 or psi <= 0 or mcnemar_power(n, psi, psi, alpha) < power:
        return None
    low, high = 0.0, psi
    for _ in range(40):
        mid = (low + high) / 2
        if mcnemar_power(n, psi, mid, alpha) >= power:
            high = mid
        else:
            low = mid
    return high


def mcnemar_tasks_needed(
    difference: float,
    discordance: float,
    alpha: float = ALPHA,
    power: float = POWER,
    most: int = 100000,
) -> int | None:
    """About how many tasks the exact McNemar test needs to detect `difference` with `power`
    when the modes disagree on a share `discordance` of tasks (at least the difference); None
    without discordance or beyond `most`."""
    delta = abs(float(difference))
    psi = max(float(discordance), delta)
    if delta <= 0 or psi <= 0:
        return None

    def enough(n: int) -> bool:
        return mcnemar_power(n, psi, delta, alpha) >= power

    high = 8
    while not enough(high):
        if high >= most:
            return None
        high = min(most, high * 2)
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid
    return high


def paired_detectable(
    n: int | None, sd: float | None, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """Smallest mean per-task difference a paired t test on n tasks detects with `power`, when
    per-task differences have standard deviation sd; None for n < 2 or sd 0/unknown."""
    if not sd or n is None or n < 2:
        return None
    from statsmodels.stats.power import TTestPower

    with _quiet():
        effect = TTestPower().solve_power(
            effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided"
        )
    return float(effect) * sd


def paired_tasks_needed(
    difference: float, sd: float | None, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Tasks a paired t test needs to detect a mean per-task `difference` with `power`."""
    if not sd or not difference:
        return None
    from statsmodels.stats.power import TTestPower

    with _quiet():
        n = TTestPower().solve_power(
            effect_size=abs(difference) / sd,
            nobs=None,
            alpha=alpha,
            power=power,
            alternative="two-sided",
        )
    return int(math.ceil(float(np.atleast_1d(n)[0])))


def within_task_variance(table: Iterable[Sequence[float]]) -> float | None:
    """Mean over tasks of the sample variance of a task's repeated scores (tasks x repeats,
    at least two repeats); None with fewer."""
    rows = [r for r in table if len(r) >= 2]
    if not rows:
        return None
    return float(np.mean([np.var(np.asarray(r, dtype=float), ddof=1) for r in rows]))


def paired_plan(
    differences_sd: float | None,
    k_a: float,
    k_b: float,
    within_a: float | None,
    within_b: float | None,
    difference: float,
    repeats: Iterable[int] = (1, 2, 3, 5, 10),
    alpha: float = ALPHA,
    power: float = POWER,
) -> dict[int, int | None] | None:
    """{k: tasks needed} to detect `difference` with k repeats of each mode, from a run with
    k_a and k_b repeats: the variance of the per-task differences less the part the repeats
    average out (within_x / k_x) is the part between tasks, which repeats do not shrink.
    None when a side has no within-task variance (it ran once)."""
    if differences_sd is None or within_a is None or within_b is None:
        return None
    between = max(0.0, differences_sd**2 - within_a / k_a - within_b / k_b)
    return {
        k: paired_tasks_needed(
            difference, math.sqrt(between + (within_a + within_b) / k), alpha, power
        )
        for k in repeats
    }


# -- across benchmarks ---------------------------------------------------------------------------
def cmh_paired(strata: list, level: float = LEVEL) -> dict:
    """Two modes over several benchmarks: `strata` holds, per benchmark, (x, y), aligned 0/1
    scores of the two modes per task. Pooled with the Cochran-Mantel-Haenszel test, each task a
    stratum of its own (a 2x2 table: mode by resolved; statsmodels StratifiedTable, no continuity
    correction), which keeps the pairing: for matched pairs it is McNemar's test on the discordant
    tasks of every benchmark together. With it: the Mantel-Haenszel odds ratio (tasks only A
    resolves over tasks only B resolves) and its interval (Robins-Breslow-Greenland); the pooled
    difference in resolved rate, every task weighted alike, with Newcombe's interval; the exact
    McNemar p-value of the pooled counts (the CMH statistic is a large-sample test); and whether
    the effect is the same in every benchmark (Fisher's exact test on (A only, B only) by
    benchmark, chi-square beyond two).

    Returns {"tasks", "both", "a_only", "b_only", "neither", "difference", "interval",
    "statistic", "p_value", "p_exact", "odds_ratio", "odds_ratio_interval", "homogeneity_p"};
    odds ratios are None where a count is 0 (no finite estimate), tests without discordant tasks
    have p 1 and no statistic."""
    tables, counts, per = [], [0, 0, 0, 0], []
    for x, y in strata:
        table = discordance_table(x, y)
        counts = [c + t for c, t in zip(counts, table, strict=True)]
        per.append(table[1:3])
        tables += [[[a, 1 - a], [b, 1 - b]] for a, b in zip(x, y, strict=True)]
    both, a_only, b_only, neither = counts
    n = sum(counts)
    out = {
        "tasks": n,
        "both": both,
        "a_only": a_only,
        "b_only": b_only,
        "neither": neither,
        "difference": (a_only - b_only) / n if n else None,
        "interval": newcombe_paired(both, a_only, b_only, neither, level),
        "statistic": None,
        "p_value": 1.0,
        "p_exact": mcnemar_exact(a_only, b_only),
        "odds_ratio": None,
        "odds_ratio_interval": None,
        "homogeneity_p": _homogeneity([t for t in per if sum(t)]),
    }
    if not a_only + b_only:
        return out
    from statsmodels.stats.contingency_tables import StratifiedTable

    with _quiet():
        st = StratifiedTable(np.asarray(tables, dtype=float).transpose(1, 2, 0))
        test = st.test_null_odds(correction=False)
        out.update(statistic=float(test.statistic), p_value=float(min(1.0, test.pvalue)))
        if a_only and b_only:
            low, high = st.oddsratio_pooled_confint(alpha=1 - level)
            out.update(
                odds_ratio=float(st.oddsratio_pooled), odds_ratio_interval=(float(low), float(high))
            )
    return out


def _homogeneity(discordant: Sequence[Sequence[int]]) -> float | None:
    """p of "the two modes' discordant tasks split alike in every benchmark", or None with
    fewer than two benchmarks that have any."""
    if len(discordant) < 2:
        return None
    from scipy.stats import chi2_contingency, fisher_exact

    with _quiet():
        if len(discordant) == 2:
            return float(fisher_exact([list(t) for t in discordant]).pvalue)
        return float(chi2_contingency([list(t) for t in discordant])[1])


# -- cost ------------------------------------------------------------------------------------------
def ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], seed: int, level: float = LEVEL
) -> tuple[float | None, tuple[float | None, float | None] | None]:
    """sum(numerators) / sum(denominators) over tasks (e.g. cost per resolved task), with a
    seeded percentile bootstrap over tasks. Returns (estimate | None, (low, high | None) | None):
    no estimate when nothing is in the denominator; high None when resamples without one
    (an unbounded ratio) reach the upper tail."""
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if len(num) == 0 or den.sum() <= 0:
        return None, None
    estimate = float(num.sum() / den.sum())
    if len(num) < 2:
        return estimate, None
    from scipy.stats import bootstrap

    def ratio(a: Any, b: Any, axis: int) -> Any:
        top, bottom = np.sum(a, axis=axis), np.sum(b, axis=axis)
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), BIG)

    with _quiet():
        res = bootstrap(
            (num, den),
            ratio,
            paired=True,
            vectorized=True,
            n_resamples=RESAMPLES,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = (float(v) for v in res.confidence_interval)
    return estimate, (low if low < BIG / 2 else None, high if high < BIG / 2 else None)


# -- text ------------------------------------------------------------------------------------------
def fmt_p(p: float | None) -> str:
    """A p-value as a reader quotes it: two significant digits, "< 0.001" below."""
    if p is None:
        return "—"
    if p < 0.001:
        return "< 0.001"
    text = f"{p:.2g}"
    return "1" if text in ("1", "1.0") else text


def fmt_pp(value: float | None, digits: int = 0, sign: bool = True) -> str:
    """A difference of rates in percentage points: +7, -3, 0."""
    if value is None:
        return "—"
    v = round(100 * value, digits)
    if v == 0:
        return f"{0.0:.{digits}f}"  # neither "+0" nor "-0"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"
