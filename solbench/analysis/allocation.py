"""How many rounds, how many samples a round: put the time where the variance is. Pure.

**Variance components.** A round's log median is ``mu + b_r + e_r``: b_r the round's own offset
(per-process state; variance sigma_b^2 between rounds) and e_r the sampling error of the median of
n samples whose logs spread with variance sigma_w^2 within the round. For a median,
``var(e_r) ~ (pi/2) sigma_w^2 / n`` (the asymptotic variance of a sample median,
1 / (4 n f(median)^2), for a normal f; Cramér 1946, sec. 28.5). Estimated from a Timing in rounds
by the method of moments of one-way random-effects ANOVA (Searle, Casella & McCulloch 1992,
ch. 3), with robust scales so one odd sample or round does not dominate:

    sigma_w  = 1.4826 * MAD of the log samples within each round, root-mean-square over rounds
    s_m^2    = variance of the log round medians                     (R - 1 degrees of freedom)
    sigma_b^2 = max(0, s_m^2 - (pi/2) sigma_w^2 / n_bar)             n_bar = mean samples a round

**Samples a round.** Two-stage (cluster) sampling: with c_r the cost of starting a round (a
worker's start, set-up, checks; seconds) and c_s the cost of one sample, the variance of the
grand mean for a fixed budget ``R (c_r + n c_s)`` is smallest at (Cochran, Sampling Techniques,
3rd ed. 1977, sec. 10.6, eq. 10.23; Hansen, Hurwitz & Madow 1953)

    n* = sqrt( (c_r / c_s) * V_w / sigma_b^2 ),   V_w = (pi/2) sigma_w^2  (per-sample variance
                                                  of a median's error, times n)

clamped to [min_samples, max_samples] (sigma_b = 0: max_samples). Worked example from the H200
(issue 16, five o_proj runs): sigma_b 0.78% median (decode points 1.13%, p90 1.83%), sigma_w 2.1%,
19 samples a round. Then (pi/2) sigma_w^2 / 19 = (0.60%)^2: a round median's sampling error is
already below the between-round spread, so extra samples buy little. With c_r / c_s = 100 (a
round of a point costs as much as 100 samples, e.g. 0.2 s against 2 ms) n* = sqrt(100 * 1.571 *
2.1^2 / 0.78^2) = 34 at sigma_b = 0.78% and 23 at 1.13%; at c_r / c_s = 25, 17 and 12. Rounds
then follow from the target (below): at sigma_b = 1.13%, n = 19, one side's 95% half-width of 1%
needs R = 9 rounds (t_8 = 2.31, sd of a round median 1.28%; 7 at sigma_b = 0.78%), where 3 rounds
give ±3.2% (t_2 = 4.30).

The run loop applies it from the second round on (``solbench.execute.session``): each point's
next round stops at n* samples (``samples_next_round``: sigma_w from its samples, sigma_b from its
rounds, c_r and c_s from what its last round's set-up, checks and timing loop took), or sooner
where its own ±target is met; ``protocol.samples_cap`` records the last n* used.

**Rounds for a target.** The t interval of the mean of R log round medians has half-width
``t_{R-1, (1+c)/2} * sqrt((sigma_b^2 + V_w / n) / R)``; ``rounds_for_half_width`` returns the
smallest R that brings it within ``log(1 + target)``. For a ratio of two sides with R rounds each
(pooled, df 2R - 2 where they spread alike) the variance doubles. ``more_rounds_to_decide`` gives the
rounds per side that would move a gate's interval clear of its threshold at the measured spread and
ratio.

**Rounds for a target, with the case's spread.** Three rounds estimate a point's spread with 2
degrees of freedom: a point of a noisy case (decode GEMMs, FP8 at one token) often stops on three
rounds that happen to lie close together, and a gate between two such runs cannot decide it.
``case_rounds_needed`` asks, for each point of a case, for the rounds its own spread needs and no
fewer than the t interval on the spread pooled over the case's points needs (the variances of the
log round medians, weighted by their degrees of freedom; ``df`` their sum, growing by one with
each round the point adds). On an H200, at a cap of 16 rounds, the gates over the 20 ordered
pairs of five o_proj runs of one tree gave 0 INCONCLUSIVE verdicts in six sets and 1 in a seventh,
against 14-18 on the point's own spread with a cap of 8, for about 1.2 times the point-rounds
(BENCHMARKS.md, issue 16, twentieth session; ``bench/gate_replay.py`` had predicted it from 13
measured runs).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from solbench.analysis.rounds import group_by_round
from solbench.analysis.sequential import equal_rounds_df, welch_se_df
from solbench.analysis.tdist import norm_ppf, t_ppf
from solbench.results.model import Timing

__all__ = [
    "MAX_ROUNDS",
    "VarianceComponents",
    "case_rounds_needed",
    "more_current_rounds_to_decide",
    "more_rounds_to_decide",
    "optimal_samples",
    "planned_se_df",
    "rounds_for_half_width",
    "rounds_needed",
    "samples_next_round",
    "variance_components",
    "within_run_offsets",
]

MAX_ROUNDS = 1000  # beyond this a count of rounds means "no practical number decides it"
# sigma_b where a point has one round (unobserved): the median between-round sd of log round medians
# over five o_proj runs on an H200 (issue 16). With two or more rounds the measured one is used, not
# below SIGMA_B_FLOOR: two or three rounds estimate it poorly, often as 0 (n* would then be
# max_samples, the most expensive answer for a guess).
PRIOR_SIGMA_B = 0.0078
SIGMA_B_FLOOR = 0.0025
_MAD_SD = 1.4826  # sd / MAD for a normal distribution
_MEDIAN_EFF = math.pi / 2.0  # var(median) / var(mean) for a normal distribution, large n


@dataclass(frozen=True)
class VarianceComponents:
    """Between- and within-round variances of log times (relative variances)."""

    sigma_b2: float  # between-round variance of the round offsets b_r
    sigma_w2: float  # within-round variance of log samples
    n: float  # mean samples a round
    rounds: int

    @property
    def round_var(self) -> float:
        """Variance of one round's log median: sigma_b^2 + (pi/2) sigma_w^2 / n."""
        return self.sigma_b2 + _MEDIAN_EFF * self.sigma_w2 / self.n


def variance_components(groups: Sequence[np.ndarray]) -> VarianceComponents:
    """sigma_b^2 and sigma_w^2 from samples grouped by round (module docstring).

    One round: sigma_b^2 is unobserved and reported as 0. Raises ValueError on empty rounds or
    non-positive times.
    """
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("every round needs samples")
    logs = []
    for g in groups:
        x = np.asarray(g, dtype=float)
        if np.any(x <= 0.0) or not np.all(np.isfinite(x)):
            raise ValueError("times must be positive and finite")
        logs.append(np.log(x))
    mads = [_MAD_SD * float(np.median(np.abs(lg - np.median(lg)))) for lg in logs]
    sigma_w2 = float(np.mean(np.square(mads)))
    n = float(np.mean([lg.size for lg in logs]))
    meds = np.array([float(np.median(lg)) for lg in logs])
    if meds.size < 2:
        return VarianceComponents(0.0, sigma_w2, n, 1)
    s_m2 = float(np.var(meds, ddof=1))
    return VarianceComponents(max(0.0, s_m2 - _MEDIAN_EFF * sigma_w2 / n), sigma_w2, n, int(meds.size))


def optimal_samples(sigma_b2: float, sigma_w2: float, c_round: float, c_sample: float, *,
                    min_samples: int = 10, max_samples: int = 2000) -> int:
    """n* = sqrt((c_r / c_s) (pi/2) sigma_w^2 / sigma_b^2), clamped (Cochran 1977, eq. 10.23)."""
    if c_round < 0.0 or c_sample <= 0.0 or sigma_b2 < 0.0 or sigma_w2 < 0.0:
        raise ValueError("costs and variances must be non-negative (the cost of a sample positive)")
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError(f"bad sample bounds [{min_samples}, {max_samples}]")
    if sigma_b2 == 0.0:
        return max_samples
    n = math.sqrt(c_round / c_sample * _MEDIAN_EFF * sigma_w2 / sigma_b2)
    return int(min(max_samples, max(min_samples, round(n))))


def samples_next_round(groups: Sequence[Sequence[float]], round_s: float, sample_s: float, *,
                       min_samples: int = 10, max_samples: int = 2000) -> int | None:
    """n* (:func:`optimal_samples`) for a point's next round, from the samples of each of its rounds
    so far (``groups``, the last one last) and what its last round cost: ``round_s`` seconds outside
    the timing loop (set-up, checks) and ``sample_s`` seconds of timing loop for its samples.
    sigma_w^2 is measured; sigma_b^2 too with two or more rounds (not below SIGMA_B_FLOOR^2), else
    PRIOR_SIGMA_B^2. None where the costs are unknown (nothing timed)."""
    if not groups or len(groups[-1]) == 0 or sample_s <= 0.0 or round_s < 0.0:
        return None
    vc = variance_components([np.asarray(g, dtype=float) for g in groups])
    sigma_b2 = max(vc.sigma_b2, SIGMA_B_FLOOR ** 2) if vc.rounds >= 2 else PRIOR_SIGMA_B ** 2
    return optimal_samples(sigma_b2, vc.sigma_w2, round_s, sample_s / len(groups[-1]), min_samples=min_samples,
                           max_samples=max_samples)


def rounds_for_half_width(round_var: float, target: float, *, confidence: float = 0.95, sides: int = 1,
                          min_rounds: int = 2, cap: int = MAX_ROUNDS, other_df: float = 0.0,
                          run_var: float = 0.0) -> int:
    """Smallest R (per side) with ``t_{df, (1+c)/2} sqrt(sides * round_var / R + run_var) <= log(1 + target)``.

    df = sides * (R - 1) + other_df (one side: R - 1; a ratio of two sides, pooled: 2R - 2;
    ``other_df``: what a variance pooled with other points knows beyond these rounds); ``run_var``:
    what no number of rounds removes (the runs' own offsets, analysis.sequential "Between runs").
    Returns ``cap`` when even ``cap`` rounds are not enough.
    """
    if target <= 0.0 or round_var < 0.0 or run_var < 0.0:
        raise ValueError("target must be positive and the variances non-negative")
    edge = math.log1p(target)
    for r in range(max(2, min_rounds), cap + 1):
        q = float(t_ppf((1.0 + confidence) / 2.0, sides * (r - 1) + other_df))
        if q * math.sqrt(sides * round_var / r + run_var) <= edge:
            return r
    return cap


def rounds_needed(timing: Timing, target_rel_ci: float, cap: int, *, confidence: float = 0.95) -> int:
    """How many rounds in all this measurement needs for a ``confidence`` interval of ±target.

    For the run loop after each round: keep adding rounds while ``timing.n_rounds`` is below the
    answer. The spread comes from the rounds so far (variance_components); with one round the
    between-round spread is unknown and the answer is ``min(cap, 2)`` (measure a second round).
    Never below the rounds already measured, never above ``cap``.
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    groups = group_by_round(timing.samples, timing.rounds)
    if len(groups) < 2:
        return min(cap, 2)
    vc = variance_components(groups)
    need = rounds_for_half_width(vc.round_var, target_rel_ci, confidence=confidence, cap=max(cap, 2))
    return max(len(groups), min(cap, need))


def case_rounds_needed(timings: Sequence[Timing], target_rel_ci: float, cap: int, *,
                       confidence: float = 0.95) -> list[int]:
    """For each point of one case (``timings``, in rounds): the rounds it needs in all, the larger
    of :func:`rounds_needed` and what a t interval on the case's pooled spread needs (module
    docstring). Never below a point's rounds, never above ``cap`` (unless it has more)."""
    own = [rounds_needed(t, target_rel_ci, cap, confidence=confidence) for t in timings]
    medians = [np.array([float(np.median(np.log(np.asarray(g, dtype=float))))
                         for g in group_by_round(t.samples, t.rounds)]) for t in timings]
    df = sum(m.size - 1 for m in medians if m.size > 1)
    if df == 0:
        return own
    pooled = sum(float(np.var(m, ddof=1)) * (m.size - 1) for m in medians if m.size > 1) / df
    # for a point with r rounds, the pooled spread's df grows by one a round it adds: df + R - r
    return [max(need, m.size, rounds_for_half_width(pooled, target_rel_ci, confidence=confidence, min_rounds=m.size,
                                                    cap=cap, other_df=df - (m.size - 1)))
            for need, m in zip(own, medians, strict=True)]


def more_rounds_to_decide(log_ratio: float, sd_round: float, tau: float, rounds: int, *,
                          confidence: float, run_var: float = 0.0, other_rounds: int | None = None,
                          side_vars: tuple[float, float] | None = None, prior_df: float = 0.0,
                          welch: bool = True, plan: Callable[[int, int], tuple[float, float]] | None = None
                          ) -> int | None:
    """Rounds to add to each side so a gate's interval at ``confidence`` clears ``1 + tau``.

    At the measured ratio ``exp(log_ratio)`` and spread of one round's log median ``sd_round``
    (pooled), both sides at R rounds give ``se = sqrt(sd_round^2 2 / R + run_var)`` with 2R - 2
    degrees of freedom (``run_var``: the runs' own offsets, which rounds do not shrink); the
    interval decides once ``t se <= |log_ratio - log(1 + tau)|``. Returns R minus the rounds already
    measured (``rounds``), at least 1; None when no practical number does (the
    ratio sits at the threshold, or within the runs' offsets of it: more than MAX_ROUNDS).
    ``other_rounds``: the other side's rounds where they differ from ``rounds``; then k rounds added
    to each side give ``se = sqrt(sd_round^2 (1/(R_a + k) + 1/(R_b + k)) + run_var)`` with
    R_a + R_b + 2k - 2 degrees of freedom, and the smallest such k is returned (the side with fewer
    rounds keeps the interval wide: planning both at the larger side's rounds understated k).
    ``prior_df``: the degrees of freedom a moderated spread borrows from the other points (the gate's
    df is theirs plus the rounds'); ``side_vars``: each side's variance (``LogRatio.side_vars``), held
    fixed, with which sides of unequal rounds are planned in the gate's form (``planned_se_df``).
    ``plan``: ``(R_a, R_b) -> (se, df)`` the gate's t would have over those rounds, runs' offsets
    aside (``LogRatio.at_rounds``: the same own spreads, moderated again at those rounds as the gate
    will); where given, it alone is planned on and the spread arguments are not used.
    """
    gap = abs(log_ratio - math.log1p(tau))
    if gap == 0.0:
        return None
    other = rounds if other_rounds is None else other_rounds
    if plan is None and other == rounds:
        target = math.expm1(gap)
        need = rounds_for_half_width(sd_round ** 2, target, confidence=confidence, sides=2, cap=MAX_ROUNDS + 1,
                                     run_var=run_var, other_df=prior_df)
        if need > MAX_ROUNDS:
            return None
        return max(1, need - rounds)
    if plan is None:
        variances, form = (side_vars, welch) if side_vars is not None else ((sd_round ** 2,) * 2, False)
        plan = functools.partial(planned_se_df, variances, prior_df=prior_df, welch=form)
    return _first_deciding(plan, ((rounds + k, other + k) for k in range(1, MAX_ROUNDS + 1)), gap,
                           confidence=confidence, run_var=run_var)


def more_current_rounds_to_decide(log_ratio: float, sd_round: float, tau: float, rounds_base: int,
                                  rounds_cur: int, *, confidence: float, cap: int = 64,
                                  run_var: float = 0.0, side_vars: tuple[float, float] | None = None,
                                  prior_df: float = 0.0, welch: bool = True,
                                  plan: Callable[[int, int], tuple[float, float]] | None = None) -> int | None:
    """Rounds to add to the current side alone (``run --gate-against --rerun``: the baseline is a
    saved run) so a gate's interval at ``confidence`` clears ``1 + tau``; None when none does.

    With the baseline fixed at ``rounds_base``, ``se = sqrt(sd_round^2 (1/R_base + 1/R_cur) +
    run_var)`` never falls below ``sqrt(sd_round^2 / R_base + run_var)``: when even that, at the
    normal quantile, is wider than the gap between the ratio and the threshold, no number of current
    rounds decides, and the baseline must be measured in more rounds (or, where ``run_var`` alone
    is that wide, as more runs). Otherwise the smallest R_cur (df R_base + R_cur - 2) that clears the
    gap, minus the rounds already measured; None beyond ``cap`` added rounds.

    ``side_vars``: each side's variance of one round's log median (``LogRatio.side_vars``: posterior
    where moderated with ``prior_df`` borrowed degrees of freedom), with which each R_cur is planned
    as the gate decides it (``planned_se_df``): added rounds leave the sides unequal, which a
    moderated gate decides in Welch's form (``welch``; the baseline's floor is then ``v_base / R_base``)
    and an unmoderated one on the pooled spread, which moves toward the current side's as its rounds
    grow. ``sd_round`` (both sides alike, fixed) is the fallback where a side has one round.
    ``plan``: as for ``more_rounds_to_decide`` (``LogRatio.at_rounds``); where given, each R_cur is
    planned on it alone.
    """
    gap = abs(log_ratio - math.log1p(tau))
    if gap == 0.0 or rounds_base < 1:
        return None
    if plan is None:
        planned = side_vars is not None and rounds_base >= 2
        variances, form, d0 = (side_vars, welch, prior_df) if planned else ((sd_round ** 2,) * 2, False, 0.0)
        floor = variances[0] / rounds_base + run_var  # type: ignore[index]  # the baseline's share
        if (form or not planned) and float(norm_ppf((1.0 + confidence) / 2.0)) * math.sqrt(floor) >= gap:
            return None  # no current round gets under it (a pooled spread that moves with them has no floor)
        plan = functools.partial(planned_se_df, variances, prior_df=d0, welch=form)
    return _first_deciding(plan, ((rounds_base, rounds_cur + k) for k in range(1, cap + 1)), gap,
                           confidence=confidence, run_var=run_var)


def _first_deciding(plan: Callable[[int, int], tuple[float, float]], rounds: Iterable[tuple[int, int]], gap: float,
                    *, confidence: float, run_var: float) -> int | None:
    """The place (from 1) of the first ``(R_a, R_b)`` in ``rounds`` at which ``plan``'s t interval at
    ``confidence`` (widened by ``run_var``) clears ``gap``; None where none does."""
    q = (1.0 + confidence) / 2.0
    for k, (rounds_a, rounds_b) in enumerate(rounds, start=1):
        se, df = plan(rounds_a, rounds_b)
        if float(t_ppf(q, df)) * math.sqrt(se ** 2 + run_var) <= gap:
            return k
    return None


def planned_se_df(side_vars: tuple[float, float], rounds_a: int, rounds_b: int, prior_df: float = 0.0, *,
                  welch: bool = True) -> tuple[float, float]:
    """The se (runs' offsets aside) and degrees of freedom a gate would reach over sides of ``rounds_a``
    and ``rounds_b`` rounds whose log round medians keep the variances ``side_vars``: Welch's form over
    unequal rounds where the gate moderates (``welch``, ``prior_df`` borrowed by each side), else the
    pooled t on the two variances pooled at those rounds, with Welch-Satterthwaite's degrees of
    freedom at equal rounds (``sequential.equal_rounds_df``; a side of one round only where both
    variances are the same one: a spread held fixed)."""
    var_a, var_b = side_vars
    if welch and rounds_a != rounds_b:
        return welch_se_df(var_a, var_b, rounds_a, rounds_b, prior_df)
    pooled = ((rounds_a - 1) * var_a + (rounds_b - 1) * var_b) / (rounds_a + rounds_b - 2)
    own_df = equal_rounds_df(var_a, var_b, rounds_a) if rounds_a == rounds_b else float(rounds_a + rounds_b - 2)
    return math.sqrt(pooled * (1.0 / rounds_a + 1.0 / rounds_b)), own_df + prior_df


def within_run_offsets(log_ratio: float, tau: float, run_var: float, *, confidence: float) -> bool:
    """Whether the runs' own offsets alone (``run_var``) keep an interval at ``confidence`` from
    clearing ``1 + tau`` at this ratio: then no number of rounds decides it, only more runs a side."""
    gap = abs(log_ratio - math.log1p(tau))
    return run_var > 0.0 and float(norm_ppf((1.0 + confidence) / 2.0)) * math.sqrt(run_var) >= gap
