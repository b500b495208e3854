"""The report's statistics (nginx_eval/report/stats.py) against values computed independently:
textbook examples, closed forms written out here, exact enumeration, and simulation."""

import itertools
import math
import random

import numpy as np
import pytest

from nginx_eval.report import stats

Z95 = 1.959963984540054  # the 97.5% point of the standard normal


def wilson_by_hand(k, n, z=Z95):
    """Wilson (1927) score interval, the closed form."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


# -- one mode -------------------------------------------------------------------------------------
def test_wilson_interval_matches_the_textbook_and_the_closed_form():
    # Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), ch. 2:
    # 13 of 16, Wilson score interval 0.5699 to 0.9341.
    low, high = stats.wilson(13, 16)
    assert (round(low, 4), round(high, 4)) == (0.5699, 0.9341)
    # 0 of 20: the upper bound is z^2 / (n + z^2) (Newcombe 1998a: 0.1611).
    low, high = stats.wilson(0, 20)
    assert low == 0.0 and high == pytest.approx(Z95**2 / (20 + Z95**2), abs=1e-12)
    assert round(high, 4) == 0.1611
    for k, n in ((1, 29), (81, 263), (15, 148), (26, 26), (7, 12)):
        assert stats.wilson(k, n) == pytest.approx(wilson_by_hand(k, n), abs=1e-9), (k, n)
    assert stats.wilson(0, 0) is None


def test_clustered_standard_error_by_hand():
    # Four tasks, three repeats each. Per-task means 2/3, 0, 1, 1/3; the mean of all 12 runs 0.5.
    table = [[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0]]
    # Miller (2024), section 2.2: SE^2 = (1/N^2) sum over tasks (sum of residuals in the task)^2
    # = (1/144) * 9 * ((1/6)^2 + (1/2)^2 + (1/2)^2 + (1/6)^2) = 5/144; with the small-sample
    # factor G/(G-1) = 4/3 of the usual cluster-robust estimator: 5/108.
    residual_sums = [sum(v - 0.5 for v in row) for row in table]
    miller = sum(s * s for s in residual_sums) / 12**2
    assert miller == pytest.approx(5 / 144)
    out = stats.clustered_mean(table)
    assert out["mean"] == 0.5 and out["tasks"] == 4 and out["observations"] == 12
    assert out["se"] == pytest.approx(math.sqrt(5 / 108), abs=1e-12)
    assert out["se"] == pytest.approx(math.sqrt(miller * 4 / 3), abs=1e-12)
    assert out["interval"] == pytest.approx(
        (0.5 - Z95 * math.sqrt(5 / 108), 0.5 + Z95 * math.sqrt(5 / 108)), abs=1e-9
    )
    # The same as the standard error of the per-task means, and with one run per task, of the
    # runs themselves.
    means = [sum(r) / 3 for r in table]
    assert out["se"] == pytest.approx(np.std(means, ddof=1) / 2, abs=1e-12)
    single = stats.clustered_mean([[1], [0], [1], [1], [0]])
    assert single["se"] == pytest.approx(np.std([1, 0, 1, 1, 0], ddof=1) / math.sqrt(5))
    # Clipped to [0, 1]; identical scores have no spread; one task has no standard error.
    assert stats.clustered_mean([[1, 1], [1, 0]])["interval"][1] == 1.0
    assert stats.clustered_mean([[0, 0], [0, 0]])["interval"] == (0.0, 0.0)
    assert stats.clustered_mean([[1, 0, 1]])["se"] is None


# -- two modes ------------------------------------------------------------------------------------
def test_exact_mcnemar_matches_the_textbook_example():
    # Bentur et al. (2009), airway hyper-responsiveness before and after stem cell
    # transplantation: discordant pairs 1 and 7; exact conditional McNemar p = 0.070
    # (Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91).
    p = stats.mcnemar_exact(1, 7)
    # By hand: 2 * P(X <= 1) for X ~ Binomial(8, 1/2) = 2 * (1 + 8) / 256.
    assert p == pytest.approx(2 * (math.comb(8, 0) + math.comb(8, 1)) / 2**8, abs=1e-15)
    assert round(p, 3) == 0.070
    assert stats.mcnemar_exact(7, 1) == p
    assert stats.mcnemar_exact(3, 3) == 1.0 and stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(0, 5) == pytest.approx(2 / 32)


def test_newcombe_interval_for_paired_proportions_matches_the_textbook():
    # Cavo et al. (2012), complete response before and after consolidation therapy, table
    # [[59, 6], [16, 80]]: Newcombe's square-and-add interval (method 10) for the difference
    # -0.0621, 95% CI -0.1186 to -0.0046 (Fagerland, Lydersen & Laake 2017, ch. 8).
    low, high = stats.newcombe_paired(59, 6, 16, 80)
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)
    # Mirror image when the two modes swap.
    assert stats.newcombe_paired(59, 16, 6, 80) == pytest.approx((-high, -low), abs=1e-12)
    # No discordant task: the interval still has width (unlike a Wald interval).
    low, high = stats.newcombe_paired(5, 0, 0, 5)
    assert low < 0 < high


def test_paired_binary_counts_and_orientation():
    x = [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    y = [1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]
    r = stats.paired_binary(x, y)
    assert (r["both"], r["a_only"], r["b_only"], r["neither"]) == (2, 7, 1, 2)
    assert r["difference"] == pytest.approx(0.5) and r["a_rate"] == 0.75 and r["b_rate"] == 0.25
    assert r["p_value"] == pytest.approx(18 / 256)
    assert r["interval"] == pytest.approx(stats.newcombe_paired(2, 7, 1, 2))
    assert r["discordance"] == pytest.approx(8 / 12)


def test_holm_adjustment_by_hand():
    # Sorted 0.01, 0.03, 0.04: 3 * 0.01, max(that, 2 * 0.03), max(that, 1 * 0.04).
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # Sorted 0.5, 0.9: 2 * 0.5 = 1, then max(1, 0.9): monotone.
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([0.2, 0.01]) == pytest.approx([0.2, 0.02])
    assert stats.holm([]) == []


def test_sign_flip_permutation_test_is_exact_for_small_samples():
    x = [1.0, 2 / 3, 1.0, 1 / 3, 0.0, 1.0, 2 / 3, 1.0]
    y = [0.0, 1 / 3, 1.0, 0.0, 1 / 3, 0.0, 2 / 3, 1 / 3]
    d = [a - b for a, b in zip(x, y, strict=True)]
    observed = abs(sum(d))
    # Every one of the 2^8 sign patterns, by hand.
    as_extreme = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(d))
        if abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= observed - 1e-12
    )
    assert stats.sign_flip_p(x, y, seed=1) == pytest.approx(as_extreme / 2 ** len(d))
    assert stats.sign_flip_p(x, y, seed=2) == stats.sign_flip_p(x, y, seed=1)  # exact
    assert stats.sign_flip_p(x, x, seed=1) == 1.0


def test_seeded_bootstrap_is_reproducible_and_agrees_with_a_bootstrap_by_hand():
    rng = random.Random(7)
    d = [rng.choice((-1, -1 / 3, 0, 0, 1 / 3, 2 / 3, 1)) for _ in range(40)]
    first, how = stats.bootstrap_mean(d, seed=stats.seed_for("x", "y"))
    again, _ = stats.bootstrap_mean(d, seed=stats.seed_for("x", "y"))
    assert first == again and how == "bootstrap BCa"
    other, _ = stats.bootstrap_mean(d, seed=stats.seed_for("y", "x"))
    assert other != first and other == pytest.approx(first, abs=0.03)
    # A percentile bootstrap written out with numpy, 20000 resamples of its own.
    gen = np.random.default_rng(12345)
    values = np.asarray(d)
    means = values[gen.integers(0, len(values), size=(20000, len(values)))].mean(axis=1)
    by_hand = np.percentile(means, [2.5, 97.5])
    assert first == pytest.approx(tuple(by_hand), abs=0.03)
    assert first[0] < np.mean(d) < first[1]
    # Degenerate: every task the same difference.
    assert stats.bootstrap_mean([0.5] * 6, seed=1)[0] == (0.5, 0.5)


def test_paired_scores_with_repeats():
    x = [1, 2 / 3, 1, 1 / 3, 0, 1, 2 / 3, 1]
    y = [0, 1 / 3, 1, 0, 1 / 3, 0, 2 / 3, 1 / 3]
    r = stats.paired_scores(x, y, seed=3)
    assert r["difference"] == pytest.approx(np.mean(np.subtract(x, y)))
    assert (r["a_better"], r["b_better"], r["ties"]) == (5, 1, 2)
    assert r["sd"] == pytest.approx(np.std(np.subtract(x, y), ddof=1))
    assert r["interval"][0] < r["difference"] < r["interval"][1]
    assert r == stats.paired_scores(x, y, seed=3)


# -- power ----------------------------------------------------------------------------------------
def simulated_power(n, psi, delta, sims=4000, seed=11):
    """The share of simulated runs in which the exact McNemar test (statsmodels, not stats.py's
    power code) rejects at 5%."""
    from statsmodels.stats.contingency_tables import mcnemar

    gen = np.random.default_rng(seed)
    p_b, p_c = (psi + delta) / 2, (psi - delta) / 2
    rejected = 0
    for _ in range(sims):
        b, c, _rest = gen.multinomial(n, [p_b, p_c, 1 - psi])
        p = 1.0 if b + c == 0 else mcnemar([[0, b], [c, 0]], exact=True).pvalue
        rejected += p <= 0.05
    return rejected / sims


@pytest.mark.parametrize("n,psi,delta", [(30, 0.4, 0.2), (60, 0.3, 0.15), (26, 0.5, 0.35)])
def test_exact_mcnemar_power_agrees_with_simulation(n, psi, delta):
    assert stats.mcnemar_power(n, psi, delta) == pytest.approx(
        simulated_power(n, psi, delta), abs=0.025
    )


def test_detectable_difference_and_tasks_needed():
    n, psi = 40, 0.3
    d = stats.mcnemar_detectable(n, psi)
    assert stats.mcnemar_power(n, psi, d) >= 0.8 > stats.mcnemar_power(n, psi, 0.97 * d)
    # Tasks needed for 10 points at 30% discordance: near Connor's (1987) normal approximation,
    # n = (z_a/2 sqrt(psi) + z_b sqrt(psi - delta^2))^2 / delta^2 = 233; the exact test needs
    # a few more.
    connor = (Z95 * math.sqrt(0.3) + 0.8416212335729143 * math.sqrt(0.3 - 0.01)) ** 2 / 0.01
    need = stats.mcnemar_tasks_needed(0.1, 0.3)
    assert 0.95 * connor < need < 1.15 * connor
    assert stats.mcnemar_power(need, 0.3, 0.1) >= 0.8 > stats.mcnemar_power(need - 1, 0.3, 0.1)
    # No discordance: nothing to say.
    assert stats.mcnemar_detectable(26, 0.0) is None
    assert stats.mcnemar_tasks_needed(0.1, 0.0) == stats.mcnemar_tasks_needed(0.1, 0.1)


def test_paired_t_power_matches_cohens_table():
    # Cohen (1988) / G*Power: a paired (one-sample) t test needs 34 pairs to detect d = 0.5 with
    # 80% power at two-sided 5%.
    assert stats.paired_tasks_needed(0.5, 1.0) == 34
    assert stats.paired_tasks_needed(0.1, 0.2) == 34
    d = stats.paired_detectable(34, 1.0)
    assert 0.48 < d < 0.5
    assert stats.paired_detectable(1, 1.0) is None and stats.paired_detectable(10, 0.0) is None


def test_repeats_plan_shrinks_only_the_variance_within_tasks():
    # All variance between tasks: repeats do not help.
    flat = stats.paired_plan(0.4, 1, 1, 0.0, 0.0, 0.1, repeats=(1, 3))
    assert flat[1] == flat[3] == stats.paired_tasks_needed(0.1, 0.4)
    # All of it within tasks (observed with 2 repeats each): k repeats divide it by k.
    within = 0.4**2 * 2 / 2  # within_a / 2 + within_b / 2 = sd^2
    plan = stats.paired_plan(0.4, 2, 2, within, within, 0.1, repeats=(2, 8))
    assert plan[2] == stats.paired_tasks_needed(0.1, 0.4)
    assert plan[8] == stats.paired_tasks_needed(0.1, 0.2)
    assert stats.paired_plan(0.4, 1, 1, None, 0.0, 0.1) is None
    assert stats.within_task_variance([[1, 0], [1, 1]]) == pytest.approx((0.5 + 0.0) / 2)


# -- cost, text -----------------------------------------------------------------------------------
def test_cost_per_resolved_task_interval():
    costs = [0.2, 0.4, 0.3, 0.5, 0.1, 0.6, 0.2, 0.3]
    resolved = [1, 0, 1, 1, 0, 1, 1, 0]
    value, interval = stats.ratio_interval(costs, resolved, seed=5)
    assert value == pytest.approx(sum(costs) / sum(resolved))
    assert interval[0] < value < interval[1]
    assert (value, interval) == stats.ratio_interval(costs, resolved, seed=5)
    # By hand: a percentile bootstrap of the ratio of sums over tasks.
    gen = np.random.default_rng(99)
    idx = gen.integers(0, len(costs), size=(20000, len(costs)))
    num, den = np.asarray(costs)[idx].sum(axis=1), np.asarray(resolved)[idx].sum(axis=1)
    ratios = np.where(den > 0, num / np.maximum(den, 1), np.inf)
    assert interval == pytest.approx(tuple(np.percentile(ratios, [2.5, 97.5])), rel=0.08)
    # One resolved task among two: half the resamples resolve nothing, the upper end is unbounded.
    value, interval = stats.ratio_interval([0.25, 0.25], [1, 0], seed=5)
    assert value == 0.5 and interval[1] is None
    assert stats.ratio_interval([0.25], [0], seed=5) == (None, None)


def test_text_forms():
    assert stats.fmt_p(0.0703125) == "0.07" and stats.fmt_p(0.0349) == "0.035"
    assert stats.fmt_p(0.0004) == "< 0.001" and stats.fmt_p(1.0) == "1"
    assert stats.fmt_pp(0.07) == "+7" and stats.fmt_pp(-0.0025) == "0"
    assert stats.fmt_pp(0.0646, 1) == "+6.5" and stats.fmt_pp(0.3, sign=False) == "30"
    assert stats.seed_for("a", "b") == stats.seed_for("a", "b") != stats.seed_for("b", "a")
