"""Deciding over rounds, look after look: the t test on log round medians and its error control
under optional stopping. Pure (numpy, scipy).

**The statistic.** A side measured in R rounds gives R round medians m_1..m_R; their logs are
independent draws of ``mu + b_r + e_r`` (b_r: the round's own offset, the per-process state;
e_r: the sampling error of a median of n samples, variance ~ (pi/2) sigma_w^2 / n). The ratio of
two sides is decided on ``d = mean(log m_cur) - mean(log m_base)``, the log of the ratio of the
geometric means of the round medians, with Student's t (Student 1908; Welch 1947 for what the
pooled form assumes):

    pooled   (the default: two sides measured by the same harness on the same machine, whose
             round medians spread alike; a side with one round borrows the other's spread)
                 s^2 = (SS_a + SS_b) / (R_a + R_b - 2),   se = s sqrt(1/R_a + 1/R_b),
                 df  = R_a + R_b - 2,   but at equal rounds R (where se is Welch's too) Welch-Satterthwaite's:
                 df  = (R - 1) (v_a + v_b)^2 / (v_a^2 + v_b^2)   (v = SS / (R - 1): from R - 1 to 2R - 2;
                                                                 moderated, d0 more: below)
    Welch    (moderated sides of unequal rounds, two or more each, below: a saved baseline of 3
             rounds against a current run whose noisy points took up to 16)
                 se^2 = v_a / R_a + v_b / R_b   (v: a side's posterior variance of its log round medians,
                                                 moderated toward that side's own prior, below),
                 df   = se^4 / ((v_a/R_a)^2 / df_a + (v_b/R_b)^2 / df_b)   (Satterthwaite; df = d0 + R - 1,
                                                 d0 that side's prior's)
    paired   (``paired=True`` and both sides measured in the same rounds, e.g. two implementations
             of one run: the per-round log ratios d_r = log m_b,r - log m_a,r)
                 se = sd(d_r) / sqrt(R),   df = R - 1

    interval at confidence c:  exp(d -/+ t_{df, (1+c)/2} * se);   p_slower = P(T_df >= d / se)

**Equal rounds: Welch's degrees of freedom.** With equal rounds the pooled and Welch standard errors
are the same number; only the degrees of freedom differ, and the pooled 2R - 2 claim more than two
sides that spread differently hold. At a true 1.05 with 3 rounds a side and one side's spread 2x
(4x) the other's, the pooled t gave 3.1% (4.2%) wrong REGRESSION and as many wrong PASS at one look,
against 2.5% each; 2.9% (3.1%) with 8 rounds a side (a seeded simulation of 200,000 trials,
forty-eighth session). Through ``compare`` (bench/equal_rounds_sim.py: one case a comparison, rounds
spreading 1% and k times that), its 95% interval held the true ratio in 89.6% of comparisons at 3
rounds a side and k = 8 (91.4% at 4 rounds, 92.3% at 6, 93.3% at 10), and a true ratio of 1 was
called SLOWER or FASTER in 3.1% at 3 rounds (2.0-2.3% at 4-10), against alpha = 1%. So equal rounds
take Welch-Satterthwaite's degrees of freedom: the ratio, d and se are unchanged, and the interval
widens by the t quantile alone. The same rows then read 93.6% (95.1%, 94.8%, 94.9%), and SLOWER or
FASTER at a true 1 in 1.3% at most; with ten cases moderated, 93.6% at 3 rounds and k = 8 against
90.9%. The cost is where the two sides spread alike: their sample variances still differ by chance,
so the degrees of freedom fall below 2R - 2 (at 3 rounds a side, anywhere in 2-4) and the interval
is conservative there (96.4% at 3 rounds and k = 1), and without a prior three rounds a side decide
less: the same code SAME in 91.6% of comparisons against 97.2%, a true 1.05 SLOWER in 53.8% against
75.6% (4 rounds: 100% and 92.3% against 100% and 95.8%; from 6 rounds, or moderated, as before
within the simulation's noise). A moderated point adds the prior's d0 to its own Welch degrees of
freedom and keeps its pooled posterior spread (``at_rounds``): the prior's degrees of freedom carry
no information on how the point's two sides differ. Pairing by round is exact whatever the two
spreads, and unchanged.

**Why Welch for unequal rounds, where moderated.** With unequal rounds the pooled variance is
weighted by the rounds: the side with more rounds lends its spread to the other. Adaptive rounds go
to the noisy points, so the side with more rounds is the noisier one, and a few slow processes there
(3 of 16 rounds at +10%) widened the baseline's three tight rounds' share until the same code was
INCONCLUSIVE. The other way round (a noisy baseline of 3 rounds, a quiet
current of 11), the pooled t is too narrow: 3.9% wrong REGRESSION and 3.9% wrong PASS at a true
1.05, against 2.5% each; Welch's form kept 1.9% and 2.0% with one prior for both sides (1.4% and
1.4% with each side's own, below; bench/review44/welch_moderated.py: 400 trials of 50 moderated
points on ``run --gate-against``'s schedule). It decides fewer points there (A/A PASS 82%, 80% with
each side's prior, against 92%), and more where the current side is the noisier (93%, 95%, against 88%).
Replayed on the recorded five-run sets (bench/gate_pairs_replay.py: 204 ordered pairs of saved
runs, 12 sets, H200 and H100), standalone ``gate`` exits 3 in 2 pairs with Welch's form against 23
with the pooled one, and calls no REGRESSION with either. Welch's own weakness is its degrees of
freedom: a baseline of 3 rounds gives its variance 2. The prior lends each side's variance ``d0``
more (below), which is why the form is used only where a prior was fitted (ten or more points
over rounds). Without one, on ``run --gate-against``'s schedule against a 3-round baseline
(tests/unit/test_sequential.py's noise model), Welch's form PASSed the same code in 71% of trials
and caught a 10% slowdown in 67%, against 96% and 94% pooled; there the pooled t stays, with the
departure measured above.

**Each side its own prior** (``side_priors``). One prior fitted on the points' pooled variances is
mostly the side with more rounds: moderating both sides toward it lent that side's spread to the
other again, through the prior instead of the pooling. With every point's baseline (3 rounds)
spreading twice its current (11), a single look (``gate`` of saved runs) called 6.9% wrong
REGRESSION and 6.7% wrong PASS at a true 1.05 with spreads alike across points (4.1% and 4.0%
lognormal around 0.8%), and ``run --gate-against``'s schedule (3, 7, 11 rounds, K = 3) 3.8% and
3.7%: above the 2.5% each that the union bound promises. So Welch's form moderates each side toward
a prior fitted over that side's own variances at the points that have both (``var_a`` on ``R_a - 1``
degrees of freedom, ``var_b`` on ``R_b - 1``; ``moderate`` in analysis.compare); a side with fewer
than MIN_PRIOR_POINTS such points falls back to the pooled prior. The same cases then gave 2.3% and
2.2%, 2.7% and 2.6%, 1.2% and 1.1% (bench/review44/side_priors.py: 400 trials of 50 points a case).
Where the sides spread alike it changes little, except one look over uneven points (2.7% and 2.5%
against 2.4% and 2.3%: a side's prior rests on 2 degrees of freedom a point). On the schedule it
costs the noisier baseline some decisions (A/A PASS 81% against 83%, a 10% slowdown caught in 78%
against 82%) and gains where the current side is the noisier (95% against 93%, 94% against 92%). The
recorded five-run sets replay unchanged (bench/gate_pairs_replay.py, 268 ordered pairs of 18 sets:
2 exit 3 and no REGRESSION, before and after).

**Tied round medians.** Where every round median of both sides is the same number (a clock that
counts in steps, e.g. CUDA events in 32 ns), the spread between rounds would be zero and the interval
of zero width (p = 0) at a ratio of whole steps. ``log_ratio`` then takes each round median's own
sampling variance from its samples (``median_sampling_var``) as the spread: the between-round
variance cannot truly be below it.

A t interval over 3 round medians has 2 degrees of freedom (t = 4.30): with the between-round
spread measured on an H200 (sd 0.8-2%) the interval is several percent wide however many samples
each round takes. Rounds, not samples, narrow it (``analysis.allocation`` puts a number on it).

**Optional stopping.** ``run --gate-against --rerun`` and ``ab`` look at the data after every four
added rounds (``analysis.gate.ROUNDS_A_LOOK``) and stop re-measuring a point once it is
decided. Testing at the nominal level at every look inflates the error rate (Armitage, McPherson &
Rowe 1969: five looks at 5% give 14%). Here the error is split over the K looks a point may get
(at most ``cap`` rounds): each look tests at ``level / K`` (Bonferroni; the constant-level
spending of Pocock 1977, with the union bound instead of the exact joint distribution of the
looks):

    P(a wrong verdict at any look) <= sum_k P(wrong at look k) <= K * level / K = level

whatever the dependence between looks, so it holds when the stopping depends on the data. Any
split whose shares sum to 1 keeps the bound. Giving the first look more was replayed on nine recorded
H200 o_proj runs of one tree (``bench/live_gate_replay.py --spend``: ``run --gate-against`` over the
72 ordered pairs, three shuffles of the re-measured rounds): 50%, 60% or 75% of the error at the first
look left 22, 23 and 26 of 216 invocations INCONCLUSIVE against 20 with the even split, and let more
points of a true 5% slowdown PASS (95-110 of 2,160 against 91): the few points the first look leaves
open then face stricter later looks. The split stays even. The gate's two error rates are each split
this way (``look_levels``): its claims (REGRESSION,
FASTER) need a rank/t test at ``alpha / K`` and an interval at confidence ``1 - (1 - c) / K``
beyond the threshold; PASS needs the same interval below ``1 + threshold``, so a missed
regression of the threshold or more is rarer than ``(1 - c) / 2`` over all looks. With K = 1
(a single look: ``gate`` on stored runs, ``compare``) the rule is the fixed-sample one.

**Borrowing strength across points** (``variance_prior``, ``moderated``). A run measures tens of
points with one harness; their between-round spreads differ, but not by orders of magnitude (on an
H200, o_proj: median 0.78%, p90 1.83%). Each point's own spread over 3 + 3 rounds has 4 degrees of
freedom at most (2-4, Welch's: above), so its t interval is wide (t = 2.78-4.30) and its spread
itself uncertain. The empirical-Bayes moderated t of Smyth (2004; limma's ``eBayes``) estimates a
prior for the per-point variances from all points of the comparison (a scaled inverse chi-square
with ``d0`` degrees of freedom around ``s0^2``, fitted by moments of ``log s^2``), and gives each
point the posterior variance and the degrees of freedom of both:

    s~^2 = (d0 s0^2 + d s^2) / (d0 + d),      df = d0 + d

(d: the point's own, R_a + R_b - 2; in ``df``, at equal rounds, its Welch-Satterthwaite degrees of
freedom instead: above)

Where the spreads agree, ``d0`` is large and every point gains degrees of freedom; where they
differ widely, ``d0`` falls towards 0 and each point keeps its own spread. ``d0`` is capped at the
comparison's total degrees of freedom (no point can know more than all of them pooled), and no
prior is fitted from fewer than MIN_PRIOR_POINTS points. Only half the fitted ``d0`` is used
(PRIOR_DISCOUNT): the spreads of GPU points are not inverse chi-square distributed, and with
lognormal spreads like the H200's (tests/unit/test_sequential.py, 50 points, three rounds a side,
the true ratio on the threshold) the full prior let each wrong verdict reach 2.7-2.8% against its
2.5% share, while half of it keeps them at 2.3-2.4% and still decides more points. The t statistic stays exactly t
distributed under that model (Smyth 2004, Theorem 2).

Averaged over points, that holds; one point that spreads far more than the rest (a decode point at 3%
among points at 0.8%) is shrunk toward them, and its own wrong verdicts reached 5-8% against its 2.5%
share (bench/review32/e2e_moderation.py: 6.25% wrong REGRESSION and 8.75% wrong PASS in 400 trials at
a true 1.05). Leaving a point unmoderated when its own variance exceeds the 99% quantile of F(d, d0)
times the prior's took these only to 5.5% and 7.25%: the points it leaves moderated are the ones whose
variance came out low, and those err most. Not changed; a variance class known before the data (per
implementation or per bound) is the next candidate.

**Between runs** (``between_runs``). Rounds sample what changes from process to process; a state
shared by every round of one run and different in the next (the machine's state that hour, a
server's warm-up) is not in their spread. Two sides measured as separate runs (two saved runs,
``run --gate-against``) each carry one such offset: with its sd S, the log ratio gains the variance
``S^2 (1/m_a + 1/m_b)`` over sides of m_a and m_b runs, a fixed term added to ``se`` after moderation.
Sides measured in one invocation, alternating round by round (``ab``), share the offset: no term.

Simulated (tests/unit/test_sequential.py, seeded; per-round offset sd 1.5%, within-round sample
sd 2%, 10-20 samples a round, three rounds then one more per look, at most ten; threshold 5%):
false REGRESSION in A/A trials, a 3% slowdown called REGRESSION, a 10% slowdown caught; the
test names hold the bounds, the README the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from solbench.analysis.tdist import t_cdf, t_ppf, t_sf

__all__ = [
    "MIN_PRIOR_POINTS",
    "PAIRED_MIN_ROUNDS",
    "PRIOR_DISCOUNT",
    "LogRatio",
    "VariancePrior",
    "between_runs",
    "equal_rounds_df",
    "gate_codes",
    "log_ratio",
    "log_round_medians",
    "look_levels",
    "median_sampling_var",
    "moderated",
    "side_priors",
    "t_stats",
    "variance_prior",
    "welch_se_df",
]

# Pairing by round costs up to half the degrees of freedom (R - 1 against up to 2R - 2, Welch's at equal
# rounds): below five rounds that loss (t 4.30 vs as little as 2.78 at three rounds) outweighs what
# pairing usually gains, so two sides in the same rounds are paired from five rounds on. The choice
# depends on the design, never on the data.
PAIRED_MIN_ROUNDS = 5


def look_levels(alpha: float, confidence: float, looks: int) -> tuple[float, float]:
    """(alpha_k, confidence_k) for each of ``looks`` looks: ``alpha / K`` and ``1 - (1 - c) / K``."""
    if looks < 1:
        raise ValueError(f"looks must be >= 1, got {looks}")
    return alpha / looks, 1.0 - (1.0 - confidence) / looks


def log_round_medians(groups: Sequence[np.ndarray]) -> np.ndarray:
    """log of each round's median (times must be positive)."""
    meds = np.array([float(np.median(g)) for g in groups])
    if meds.size == 0 or np.any(meds <= 0.0) or not np.all(np.isfinite(meds)):
        raise ValueError("round medians must be positive and finite")
    return np.log(meds)


def t_stats(la: np.ndarray, lb: np.ndarray, paired: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d, se, df) over the last axis of log round medians ``la`` (R_a) and ``lb`` (R_b).

    Vectorized over leading axes (simulations pass (trials, R)). Paired needs R_a == R_b >= 2;
    pooled needs R_a + R_b >= 3, and at equal rounds has Welch-Satterthwaite's degrees of freedom
    (``equal_rounds_df``; module docstring).
    """
    ra, rb = la.shape[-1], lb.shape[-1]
    if paired:
        if ra != rb or ra < 2:
            raise ValueError(f"pairing needs the same rounds on both sides (>= 2), got {ra} and {rb}")
        diff = lb - la
        d = diff.mean(axis=-1)
        se = diff.std(axis=-1, ddof=1) / math.sqrt(ra)
        return d, se, np.full(d.shape, float(ra - 1))
    if ra + rb < 3:
        raise ValueError("the spread between rounds needs two rounds on one side at least")
    d = lb.mean(axis=-1) - la.mean(axis=-1)
    ss_a = ((la - la.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    ss_b = ((lb - lb.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    df = ra + rb - 2
    se = np.sqrt((ss_a + ss_b) / df * (1.0 / ra + 1.0 / rb))
    if ra == rb:  # the same se as Welch's form; its degrees of freedom (module docstring)
        return d, se, np.asarray(equal_rounds_df(ss_a / (ra - 1), ss_b / (rb - 1), ra), dtype=float)
    return d, se, np.full(d.shape, float(df))


def equal_rounds_df(var_a: Any, var_b: Any, rounds: int) -> Any:
    """Welch-Satterthwaite's degrees of freedom of two sides of ``rounds`` rounds each whose log round
    medians have the variances ``var_a`` and ``var_b`` (floats or arrays, broadcast):
    ``(R - 1) (v_a + v_b)^2 / (v_a^2 + v_b^2)``, from R - 1 (one side holds all the spread) to the
    pooled 2R - 2 (both alike, and where neither varies). The pooled t's at equal rounds (module
    docstring)."""
    va, vb = np.asarray(var_a, dtype=float), np.asarray(var_b, dtype=float)
    den = va ** 2 + vb ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0.0, (rounds - 1) * (va + vb) ** 2 / np.where(den > 0.0, den, 1.0), 2.0 * (rounds - 1))
    return float(df) if df.ndim == 0 else df


@dataclass(frozen=True)
class LogRatio:
    """The t statistic of one pair over rounds: ``d = log ratio``, its standard error and df."""

    d: float
    se: float
    df: float
    paired: bool
    rounds_a: int
    rounds_b: int
    sd_round: float  # sd of one round's log median (pooled), or of one round's log ratio (paired)
    prior_df: float = 0.0  # degrees of freedom borrowed from the other points (``moderated``)
    # the variance the runs' own offsets add to d (``between_runs``: sides measured as separate runs),
    # already in se; 0: the rounds' spread is the whole of it
    run_var: float = 0.0
    # each side's own variance of its log round medians (before any moderation), where both sides
    # are unpaired and have two rounds or more; None otherwise
    var_a: float | None = None
    var_b: float | None = None
    prior_var: float = 0.0  # the prior's variance (``moderated``; with ``prior_df``)
    own_sd: float | None = None  # ``sd_round`` before ``moderated`` replaced it with the posterior one
    # each side's own prior (df_a, var_a, df_b, var_b) where ``moderated`` was given one per side
    # (``side_priors``), for Welch's form; None: both sides use ``prior_df``/``prior_var``
    side_prior: tuple[float, float, float, float] | None = None

    @property
    def ratio(self) -> float:
        return math.exp(self.d)

    @property
    def welch(self) -> bool:
        """Decided in Welch's form: moderated, over sides of unequal rounds with their own variances."""
        return self.prior_df > 0.0 and self.var_a is not None and self.rounds_a != self.rounds_b

    def side_priors(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Each side's prior (df, variance): its own where ``moderated`` was given one per side, else
        the shared one (``prior_df``, ``prior_var``; (0, 0) unmoderated)."""
        if self.side_prior is None:
            return (self.prior_df, self.prior_var), (self.prior_df, self.prior_var)
        return (self.side_prior[0], self.side_prior[1]), (self.side_prior[2], self.side_prior[3])

    def side_vars(self, rounds_a: int | None = None, rounds_b: int | None = None) -> tuple[float, float] | None:
        """Each side's variance of one round's log median, the posterior one where moderated
        (``(d0 s0^2 + (R - 1) v) / (d0 + R - 1)``, each side with its prior: ``side_priors``); None
        where ``var_a``/``var_b`` are. ``rounds_a``/``rounds_b``: the posterior the same own variances
        would have over that many rounds (planning; default the rounds measured)."""
        if self.var_a is None or self.var_b is None:
            return None
        ra, rb = rounds_a or self.rounds_a, rounds_b or self.rounds_b
        (da, sa), (db, sb) = self.side_priors()
        return (da * sa + (ra - 1) * self.var_a) / (da + ra - 1), (db * sb + (rb - 1) * self.var_b) / (db + rb - 1)

    def at_rounds(self, rounds_a: int, rounds_b: int) -> tuple[float, float]:
        """(se, df) this t would have over ``rounds_a`` and ``rounds_b`` rounds at the same own spreads
        (each side's ``var_a``/``var_b``, else the pooled one) and the same prior(s), the runs' offsets
        aside: the rule of ``moderated`` re-applied at those rounds (pooled, the spread moderated once;
        Welch's form over moderated sides of unequal rounds, each side's posterior at its rounds), for
        the planners of ``analysis.allocation``. At equal rounds the degrees of freedom of the own
        spreads are Welch-Satterthwaite's (``equal_rounds_df``), plus the prior's. A side of one round
        has no spread of its own: the pooled one is held for both."""
        d0, s0 = self.prior_df, self.prior_var
        df = float(rounds_a - 1 if self.paired else rounds_a + rounds_b - 2)
        own_df = df
        if self.var_a is not None and self.var_b is not None:
            if d0 > 0.0 and rounds_a != rounds_b:
                (da, _), (db, _) = self.side_priors()
                return welch_se_df(*self.side_vars(rounds_a, rounds_b), rounds_a, rounds_b,  # type: ignore[misc]
                                   (da, db))
            own = ((rounds_a - 1) * self.var_a + (rounds_b - 1) * self.var_b) / (rounds_a + rounds_b - 2)
            if rounds_a == rounds_b:
                own_df = equal_rounds_df(self.var_a, self.var_b, rounds_a)
        else:
            own = (self.sd_round if self.own_sd is None else self.own_sd) ** 2
        return math.sqrt((d0 * s0 + df * own) / (d0 + df)) * _se_per_sd(self.paired, rounds_a, rounds_b), own_df + d0

    @property
    def spread_df(self) -> float:
        """The degrees of freedom of ``sd_round`` from this point's own rounds (the prior is fitted on them)."""
        return float(self.rounds_a - 1 if self.paired else self.rounds_a + self.rounds_b - 2)

    def interval(self, confidence: float) -> tuple[float, float]:
        """Two-sided interval of the ratio at ``confidence``."""
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        half = float(t_ppf((1.0 + confidence) / 2.0, self.df)) * self.se
        return math.exp(self.d - half), math.exp(self.d + half)

    def p_slower(self) -> float:
        """One-sided p of H1 "b slower" (ratio > 1)."""
        return self._p(+1)

    def p_faster(self) -> float:
        """One-sided p of H1 "b faster" (ratio < 1)."""
        return self._p(-1)

    def _p(self, sign: int) -> float:
        if self.se <= 0.0:  # nothing varies: the sign of d is certain
            return 0.0 if sign * self.d > 0 else 1.0
        return float(t_sf(sign * self.d / self.se, self.df))


def log_ratio(a: Sequence[np.ndarray], b: Sequence[np.ndarray], *, paired: bool = False) -> LogRatio | None:
    """The t statistic of ``b`` against ``a`` (each a list of rounds' samples), or None when
    neither side has two rounds (nothing measures the spread between rounds: a single-run rule).

    ``paired`` asks for pairing by round; it is used when both sides have the same number of
    rounds, at least PAIRED_MIN_ROUNDS (the caller vouches that round i of a and of b are the
    same round).
    """
    la, lb = log_round_medians(a), log_round_medians(b)
    if max(la.size, lb.size) < 2:
        return None
    pair = paired and la.size == lb.size >= PAIRED_MIN_ROUNDS
    d, se, df = t_stats(la, lb, paired=pair)
    ra, rb = int(la.size), int(lb.size)
    # every round's median alike (paired: every round's ratio): a clock that counts in steps, not no spread;
    # read off the medians, not se: the mean of equal logs can round off them (se 1e-15, not 0)
    tied = not (np.ptp(lb - la) if pair else np.ptp(la) + np.ptp(lb))
    if tied:
        floor = median_sampling_var([*a, *b])
        se = math.sqrt((2.0 if pair else 1.0) * floor) * _se_per_sd(pair, ra, rb)
        df = float(ra - 1 if pair else ra + rb - 2)  # both sides' spread the same floor: not off the rounding
    t = LogRatio(float(d), float(se), float(df), pair, ra, rb, float(se) / _se_per_sd(pair, ra, rb))
    if pair or min(ra, rb) < 2:
        return t
    if tied:
        return replace(t, var_a=floor, var_b=floor)
    return replace(t, var_a=float(la.var(ddof=1)), var_b=float(lb.var(ddof=1)))  # for ``moderated``


def median_sampling_var(groups: Sequence[np.ndarray]) -> float:
    """The variance a round's log median has from its own samples alone, averaged over the rounds
    (``pi/2 * var(log samples) / n``, the large-sample variance of a median of normal samples).

    The floor of the spread between rounds where every round's median reads the same: a clock
    that counts in steps (CUDA events in 32 ns on an H100 or H200, 1.6% of a 2 us kernel) can tie
    three round medians exactly although the samples spread, and a spread of zero would claim a
    ratio of one step exactly (an interval of zero width, p = 0). 0 where no round has two
    different samples: then nothing measures a spread.
    """
    logs = [np.log(np.asarray(g, dtype=float)) for g in groups]
    parts = [math.pi / 2.0 * float(np.var(x, ddof=1)) / x.size if np.ptp(x) > 0.0 else 0.0
             for x in logs if x.size >= 2]
    return float(np.mean(parts)) if parts else 0.0


# Fewer points than this give too rough a picture of how their spreads vary: no prior.
MIN_PRIOR_POINTS = 10
# The share of the fitted prior degrees of freedom used (module docstring: a conservative discount).
PRIOR_DISCOUNT = 0.5


@dataclass(frozen=True)
class VariancePrior:
    """The fitted prior of the per-point variances: ``d0`` degrees of freedom around ``s0^2``."""

    df: float
    var: float
    points: int


def variance_prior(variances: Sequence[float], dfs: Sequence[float]) -> VariancePrior | None:
    """Smyth's (2004) moment estimate of the prior of per-point variances ``s_g^2`` with ``d_g``
    degrees of freedom; None below MIN_PRIOR_POINTS usable points (positive, finite, ``d_g > 0``).

    ``e_g = log s_g^2 - digamma(d_g/2) + log(d_g/2)``; ``trigamma(d0/2) = var(e) - mean(trigamma(d_g/2))``
    (``d0`` infinite when the right side is not positive: the spreads vary no more than chance);
    ``s0^2 = exp(mean(e) + digamma(d0/2) - log(d0/2))``. ``d0`` is capped at ``sum(d_g)``, then
    discounted (PRIOR_DISCOUNT) in what is returned.
    """
    from scipy import special

    v, d = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    keep = np.isfinite(v) & (v > 0.0) & np.isfinite(d) & (d > 0.0)
    v, d = v[keep], d[keep]
    if v.size < MIN_PRIOR_POINTS:
        return None
    e = np.log(v) - special.digamma(d / 2.0) + np.log(d / 2.0)
    excess = float(np.var(e, ddof=1) - np.mean(special.polygamma(1, d / 2.0)))
    cap = float(d.sum())
    d0 = cap if excess <= 0.0 else min(cap, 2.0 * _trigamma_inverse(excess))
    var0 = float(np.exp(e.mean() + special.digamma(d0 / 2.0) - math.log(d0 / 2.0)))
    return VariancePrior(PRIOR_DISCOUNT * d0, var0, int(v.size))


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method on 1/trigamma, as limma's ``trigammaInverse``)."""
    from scipy import special

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def side_priors(ts: Sequence[LogRatio]) -> tuple[VariancePrior | None, VariancePrior | None]:
    """The priors of each side's own variances (``var_a`` on ``R_a - 1`` degrees of freedom, ``var_b``
    on ``R_b - 1``), fitted over the unpaired ``ts`` that have both (``variance_prior``; None below
    MIN_PRIOR_POINTS of a side): what Welch's form moderates each side toward (module docstring)."""
    both = [t for t in ts if not t.paired and t.var_a is not None and t.var_b is not None]
    return (variance_prior([t.var_a for t in both], [t.rounds_a - 1.0 for t in both]),  # type: ignore[misc]
            variance_prior([t.var_b for t in both], [t.rounds_b - 1.0 for t in both]))  # type: ignore[misc]


def moderated(t: LogRatio, prior: VariancePrior | None,
              sides: tuple[VariancePrior | None, VariancePrior | None] | None = None) -> LogRatio:
    """``t`` with its spread replaced by the posterior one and ``prior.df`` degrees of freedom added
    (to Welch-Satterthwaite's own at equal rounds; sides of unequal rounds with their own variances:
    Welch's form, each side's variance moderated toward its own prior in ``sides`` (``side_priors``; a
    side without one, or no ``sides``: toward ``prior``) and the degrees of freedom
    Welch-Satterthwaite's over both; module docstring)."""
    if prior is None or t.prior_df > 0.0:
        return t
    d = t.spread_df
    sd = math.sqrt((prior.df * prior.var + d * t.sd_round ** 2) / (prior.df + d))
    pa, pb = (p or prior for p in sides) if sides is not None else (prior, prior)
    side = (pa.df, pa.var, pb.df, pb.var) if t.var_a is not None else None
    t = replace(t, sd_round=sd, prior_df=prior.df, prior_var=prior.var, own_sd=t.sd_round, side_prior=side)
    se, df = t.at_rounds(t.rounds_a, t.rounds_b)  # the one rule, which the planners apply at other rounds
    return replace(t, se=math.sqrt(se ** 2 + t.run_var), df=df)


def welch_se_df(var_a: float, var_b: float, rounds_a: int, rounds_b: int,
                prior_df: float | tuple[float, float] = 0.0) -> tuple[float, float]:
    """Welch's form: ``se = sqrt(v_a / R_a + v_b / R_b)`` and the Welch-Satterthwaite degrees of
    freedom over the two sides' (``R - 1`` each, plus ``prior_df`` where the variances are posterior:
    one for both sides, or each side's own)."""
    da, db = prior_df if isinstance(prior_df, tuple) else (prior_df, prior_df)
    ua, ub = var_a / rounds_a, var_b / rounds_b
    u = ua + ub
    if u <= 0.0:
        return 0.0, float(rounds_a + rounds_b - 2) + min(da, db)
    return math.sqrt(u), u ** 2 / (ua ** 2 / (rounds_a - 1 + da) + ub ** 2 / (rounds_b - 1 + db))


def between_runs(t: LogRatio, run_var: float) -> LogRatio:
    """``t`` with the variance of the runs' own offsets added to its standard error (once: a
    ``t`` that has one keeps it). ``run_var = S^2 (1/m_a + 1/m_b)`` for sides of ``m_a`` and ``m_b``
    separate runs whose offsets in log time have sd S (analysis.gate, "Between runs"). The degrees of
    freedom stay the rounds': S is a fixed, measured value, not estimated from these rounds."""
    if run_var < 0.0 or not math.isfinite(run_var):
        raise ValueError(f"run_var must be finite and >= 0, got {run_var}")
    if t.run_var > 0.0 or run_var == 0.0:
        return t
    return replace(t, se=math.sqrt(t.se ** 2 + run_var), run_var=run_var)


def _se_per_sd(paired: bool, rounds_a: int, rounds_b: int) -> float:
    """The standard error of the log ratio per unit of ``sd_round`` (module docstring)."""
    return math.sqrt(1.0 / rounds_a) if paired else math.sqrt(1.0 / rounds_a + 1.0 / rounds_b)


# Verdict codes of the vectorized gate rule (simulations)
UNDECIDED, PASS, REGRESSION, FASTER = 0, 1, 2, 3


def gate_codes(d: np.ndarray, se: np.ndarray, df: np.ndarray, tau: float, *, alpha: float = 0.01,
               confidence: float = 0.95, looks: int = 1) -> np.ndarray:
    """The gate's rule (analysis.gate.case_verdict) for one point per element, vectorized.

    At each look: ``alpha_k, c_k = look_levels(alpha, confidence, looks)``; interval at c_k;
    REGRESSION if ``lo > 1 + tau`` and ``p_slower <= alpha_k``; FASTER if ``hi < 1/(1 + tau)`` and
    ``p_faster <= alpha_k``; PASS if ``hi < 1 + tau``; else UNDECIDED. One point, so the
    Benjamini-Hochberg step of the gate is the identity here.
    """
    a_k, c_k = look_levels(alpha, confidence, looks)
    q = t_ppf((1.0 + c_k) / 2.0, df)
    lo, hi = d - q * se, d + q * se
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, d / np.where(se > 0, se, 1.0), np.sign(d) * np.inf)
    p_slow, p_fast = t_sf(t, df), t_cdf(t, df)
    edge = math.log1p(tau)
    out = np.full(np.shape(d), UNDECIDED)
    out = np.where(hi < edge, PASS, out)
    out = np.where((hi < -edge) & (p_fast <= a_k), FASTER, out)
    return np.where((lo > edge) & (p_slow <= a_k), REGRESSION, out)
