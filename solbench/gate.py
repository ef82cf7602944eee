"""The CI performance-regression gate: is the current run slower than the baseline?

Pure: no I/O, no device libraries. The CLI maps ``GateResult.exit_code`` to the
process exit status and renders the verdicts (``solbench.report``).

For every ``case_id/impl`` measured in both runs, with tau the threshold of the
case's workload (``per_workload`` overrides the global one):

    r = median(cur) / median(base)          slowdown ratio (> 1: current is slower)
    [lo, hi] = bootstrap CI of r             (confidence, default 95%)
    p = one-sided Mann-Whitney U p-value     (H1: current times stochastically greater)
    p~ = Benjamini-Hochberg adjusted p       (over every tested case of the run)

    INCONCLUSIVE  fewer than 5 samples on either side
    REGRESSION    lo > 1 + tau  and  p~ <= alpha      (whole CI beyond the threshold,
                                                       and the rank test agrees)
    PASS          hi <= 1 + tau                        (the CI rules out a slowdown
                                                       of tau or more)
    INCONCLUSIVE  otherwise (too noisy to decide at tau, or lo > 1 + tau
                  without a significant rank test)
    MISSING       measured on one side only: listed, never fails the gate alone

    overall = REGRESSION if any REGRESSION, else INCONCLUSIVE if any
              INCONCLUSIVE, else PASS;  exit code 1, 3, 0 respectively
              (2 is left to the CLI for bad input: ConfigError, GateRefused).

Two runs whose fingerprints differ (``check_fingerprints``) are refused with
``GateRefused`` unless ``allow_cross_hardware``. ``gate_with_rerun`` re-measures
REGRESSION and INCONCLUSIVE cases, pools the new samples with the current ones
and decides again (the asv/Bencher "confirm before alert" practice).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from solbench.analysis import stats
from solbench.analysis.significance import bh_adjust, mann_whitney_p
from solbench.compare import Estimate, Pair, estimate, pair_runs, samples
from solbench.errors import ConfigError, GateRefused
from solbench.results.model import CaseResult, Environment, ImplResult, RunResult, Score, Timing

CaseVerdict = Literal["PASS", "REGRESSION", "INCONCLUSIVE", "MISSING"]
Overall = Literal["PASS", "REGRESSION", "INCONCLUSIVE"]

EXIT_PASS = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3

__all__ = [
    "EXIT_INCONCLUSIVE",
    "EXIT_PASS",
    "EXIT_REGRESSION",
    "EXIT_USAGE",
    "GateCaseVerdict",
    "GateResult",
    "ThresholdRule",
    "case_verdict",
    "cases_to_rerun",
    "check_fingerprints",
    "gate",
    "gate_with_rerun",
    "merge_samples",
    "parse_threshold",
]


@dataclass(frozen=True)
class ThresholdRule:
    """A regression threshold: fail when ``stat`` got slower by more than ``fraction``."""

    stat: str  # only "median" is supported
    fraction: float  # 0.05 means 5%


_RULE = re.compile(r"^(?:(?P<stat>[a-z_]+)\s*:)?\s*(?P<num>[0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(?P<pct>%)?$")


def parse_threshold(text: str) -> ThresholdRule:
    """Parse ``"5%"``, ``"0.05"`` or ``"median:5%"`` (pytest-benchmark style).

    A bare number is a fraction and must be below 1 (``"5"`` is refused: write
    ``"5%"``). Raises ConfigError for any other stat than median, a zero or
    malformed value.
    """
    m = _RULE.match(text.strip().lower())
    if m is None:
        raise ConfigError(f"cannot parse threshold {text!r}: expected e.g. '5%', '0.05' or 'median:5%'")
    stat = m.group("stat") or "median"
    if stat != "median":
        raise ConfigError(f"threshold stat {stat!r} is not supported: only 'median' is")
    value = float(m.group("num"))
    if m.group("pct"):
        value /= 100.0
    elif value >= 1.0:
        raise ConfigError(f"threshold {text!r} reads as {value:.0%}; write '{m.group('num')}%' for percent")
    if value <= 0.0:
        raise ConfigError(f"threshold {text!r} must be positive")
    return ThresholdRule(stat, value)


@dataclass(frozen=True)
class GateCaseVerdict:
    """The gate's decision on one ``case_id/impl`` key."""

    key: str
    case_id: str
    impl: str
    workload: str
    verdict: CaseVerdict
    reason: str  # one human-readable sentence
    threshold: float  # tau applied to this case
    median_base: float | None = None  # seconds
    median_cur: float | None = None  # seconds
    ratio: float | None = None  # median_cur / median_base (> 1: slower)
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None  # one-sided Mann-Whitney, unadjusted
    p_adjusted: float | None = None  # Benjamini-Hochberg adjusted
    n_base: int = 0
    n_cur: int = 0


@dataclass(frozen=True)
class GateResult:
    """All case verdicts, the overall verdict, and the settings they were reached with."""

    verdicts: tuple[GateCaseVerdict, ...]
    overall: Overall
    threshold: float
    alpha: float
    confidence: float
    fingerprint_diffs: tuple[str, ...] = ()  # non-empty only with allow_cross_hardware
    reruns: int = 0  # rounds of re-measurement that went into this result

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression, 3 inconclusive."""
        return {"PASS": EXIT_PASS, "REGRESSION": EXIT_REGRESSION,
                "INCONCLUSIVE": EXIT_INCONCLUSIVE}[self.overall]

    def count(self, verdict: CaseVerdict) -> int:
        """How many cases have this verdict."""
        return sum(1 for v in self.verdicts if v.verdict == verdict)


def _major(version: str | None) -> str | None:
    if version is None:
        return None
    m = re.match(r"\s*v?(\d+)", version)
    return m.group(1) if m else version.strip()


def check_fingerprints(base: Environment, cur: Environment) -> list[str]:
    """Differences that make two runs' times incomparable, as readable lines.

    Compared: device kind, device name, spec id, driver (full version), CUDA
    major version, torch major version. A value known on one side only counts
    as a difference.
    """
    checks = [
        ("device kind", base.device_kind, cur.device_kind),
        ("device", base.device_name, cur.device_name),
        ("spec", base.spec_id, cur.spec_id),
        ("driver", base.driver, cur.driver),
        ("CUDA major", _major(base.cuda), _major(cur.cuda)),
        ("torch major", _major(base.torch), _major(cur.torch)),
    ]
    return [f"{name}: {b or 'unknown'} (baseline) vs {c or 'unknown'} (current)"
            for name, b, c in checks if b != c]


def case_verdict(ci_low: float | None, ci_high: float | None, significant: bool,
                 threshold: float) -> CaseVerdict:
    """The per-case rule of the module docstring on the CI of ``median_cur / median_base``."""
    if ci_low is None or ci_high is None:
        return "INCONCLUSIVE"
    if ci_low > 1.0 + threshold and significant:
        return "REGRESSION"
    if ci_high <= 1.0 + threshold:
        return "PASS"
    return "INCONCLUSIVE"


def _reason(verdict: CaseVerdict, est: Estimate, tau: float, p_adj: float | None, alpha: float) -> str:
    if est.ci_low is None:
        return f"too few samples to decide (baseline {est.n_a}, current {est.n_b}; need 5 each)"
    ci = f"CI [{est.ci_low:.4f}, {est.ci_high:.4f}]"
    if verdict == "REGRESSION":
        return (f"slower by {est.ratio - 1:+.1%}: {ci} lies above 1+{tau:.1%}, "
                f"adjusted p {p_adj:.2g} <= {alpha:g}")
    if verdict == "PASS":
        return f"{ci} rules out a slowdown of {tau:.1%} or more"
    if est.ci_low > 1.0 + tau:
        return f"{ci} lies above 1+{tau:.1%} but the rank test disagrees (adjusted p {p_adj:.2g} > {alpha:g})"
    return f"{ci} straddles 1+{tau:.1%}: too noisy to decide at this threshold"


def _decide(pair: Pair, est: Estimate, p: float | None, p_adj: float | None, tau: float,
            alpha: float) -> GateCaseVerdict:
    verdict = case_verdict(est.ci_low, est.ci_high, p_adj is not None and p_adj <= alpha, tau)
    return GateCaseVerdict(
        key=pair.key, case_id=pair.case_id, impl=pair.a.name, workload=pair.workload,
        verdict=verdict, reason=_reason(verdict, est, tau, p_adj, alpha), threshold=tau,
        median_base=est.median_a, median_cur=est.median_b, ratio=est.ratio,
        ci_low=est.ci_low, ci_high=est.ci_high, p_value=p, p_adjusted=p_adj,
        n_base=est.n_a, n_cur=est.n_b,
    )


def _missing(key: str, run: RunResult, side: str, other: str,
             tau_of: Callable[[str], float]) -> GateCaseVerdict:
    case_id, _, impl = key.rpartition("/")
    workload = next((c.workload for c in run.cases if c.case_id == case_id), "")
    return GateCaseVerdict(key=key, case_id=case_id, impl=impl, workload=workload, verdict="MISSING",
                           reason=f"measured in the {side} only (absent or not 'ok' in the {other})",
                           threshold=tau_of(workload))


def _overall(verdicts: tuple[GateCaseVerdict, ...]) -> Overall:
    kinds = {v.verdict for v in verdicts}
    if "REGRESSION" in kinds:
        return "REGRESSION"
    return "INCONCLUSIVE" if "INCONCLUSIVE" in kinds else "PASS"


def _validate(threshold: float, per_workload: Mapping[str, float], alpha: float, confidence: float) -> None:
    for name, tau in [("threshold", threshold), *per_workload.items()]:
        if not tau > 0.0:
            raise ConfigError(f"threshold for {name!r} must be positive, got {tau}")
    if not 0.0 < alpha < 1.0 or not 0.0 < confidence < 1.0:
        raise ConfigError(f"alpha and confidence must lie in (0, 1), got {alpha}, {confidence}")


def gate(base: RunResult, cur: RunResult, *, threshold: float = 0.05,
         per_workload: Mapping[str, float] | None = None, alpha: float = 0.01,
         confidence: float = 0.95, allow_cross_hardware: bool = False, impl: str | None = None,
         seed: int = 0, n_boot: int = 2000) -> GateResult:
    """Decide PASS / REGRESSION / INCONCLUSIVE for ``cur`` against ``base`` (rules above).

    Raises GateRefused when fingerprints differ and ``allow_cross_hardware`` is
    False, and ConfigError for bad settings or when no key is measured in both runs.
    """
    per_workload = dict(per_workload or {})
    _validate(threshold, per_workload, alpha, confidence)
    diffs = check_fingerprints(base.environment, cur.environment)
    if diffs and not allow_cross_hardware:
        raise GateRefused("runs were measured on different hardware or software: " + "; ".join(diffs)
                          + " (allow with --allow-cross-hardware)")
    pairing = pair_runs(base, cur, impl)
    if not pairing.pairs:
        raise ConfigError(f"baseline and current have no measured case in common ({len(pairing.only_in_a)} "
                          f"in baseline only, {len(pairing.only_in_b)} in current only)")

    def tau_of(workload: str) -> float:
        return per_workload.get(workload, threshold)

    ests = [estimate(p.a, p.b, confidence=confidence, seed=seed, n_boot=n_boot) for p in pairing.pairs]
    pvals = [mann_whitney_p(samples(p.b), samples(p.a), "greater") if e.testable else None
             for p, e in zip(pairing.pairs, ests, strict=True)]
    adjusted = iter(bh_adjust([p for p in pvals if p is not None]))
    verdicts = [
        _decide(pair, est, p, next(adjusted) if p is not None else None, tau_of(pair.workload), alpha)
        for pair, est, p in zip(pairing.pairs, ests, pvals, strict=True)
    ]
    verdicts += [_missing(k, base, "baseline", "current", tau_of) for k in pairing.only_in_a]
    verdicts += [_missing(k, cur, "current", "baseline", tau_of) for k in pairing.only_in_b]
    vs = tuple(verdicts)
    return GateResult(vs, _overall(vs), threshold, alpha, confidence, tuple(diffs))


def cases_to_rerun(result: GateResult) -> list[str]:
    """Keys (``case_id/impl``) whose verdict is REGRESSION or INCONCLUSIVE."""
    return [v.key for v in result.verdicts if v.verdict in ("REGRESSION", "INCONCLUSIVE")]


def _pooled(old: ImplResult, new: ImplResult) -> ImplResult:
    pooled = samples(old) + samples(new)
    med = stats.median(pooled)
    low, high = stats.median_ci(pooled)
    score = old.score
    if score is not None and med > 0 and old.timing is not None and old.timing.median > 0:
        k = old.timing.median / med  # every T-proportional figure scales by T_old / T_new
        score = Score(sol=score.sol * k, mfu=None if score.mfu is None else score.mfu * k,
                      mbu=score.mbu * k, achieved_flops=score.achieved_flops * k,
                      achieved_bandwidth=score.achieved_bandwidth * k, speedup=None, s_score=None)
    return replace(old, timing=Timing(pooled, med, low, high, "pooled"), score=score)


def _merge_case(case: CaseResult, fresh: dict[str, ImplResult]) -> CaseResult:
    impls = []
    for r in case.impls:
        new = fresh.get(f"{case.case_id}/{r.name}")
        if new is None or new.status != "ok" or not samples(new):
            impls.append(r)  # nothing usable re-measured: keep what we had
        elif r.status == "ok" and samples(r):
            impls.append(_pooled(r, new))
        else:
            impls.append(new)
    return replace(case, impls=tuple(impls))


def merge_samples(cur: RunResult, fresh: RunResult, keys: list[str] | None = None) -> RunResult:
    """``cur`` with the samples of ``fresh`` appended, key by key (``case_id/impl``).

    Only keys in ``keys`` are merged (all of ``fresh`` when None). For each merged
    key: samples are concatenated, median and its order-statistic CI recomputed
    (``analysis.stats``), ``stop_reason`` becomes ``"pooled"``, and the
    T-proportional scores (sol, mfu, mbu, achieved FLOP/s and bytes/s) are
    rescaled to the pooled median; ``speedup`` and ``s_score`` depend on another
    implementation's time and are set to None. A re-measurement that is not
    "ok" leaves the current result untouched; one that is "ok" where the
    current is not replaces it.
    """
    wanted = None if keys is None else set(keys)
    fresh_by_key = {f"{c.case_id}/{r.name}": r for c in fresh.cases for r in c.impls
                    if wanted is None or f"{c.case_id}/{r.name}" in wanted}
    return replace(cur, cases=tuple(_merge_case(c, fresh_by_key) for c in cur.cases))


def gate_with_rerun(base: RunResult, cur: RunResult, remeasure: Callable[[list[str]], RunResult],
                    rerun: int, **gate_kwargs: object) -> GateResult:
    """``gate``, then up to ``rerun`` rounds of re-measuring suspect cases.

    ::

        result = gate(base, cur)
        repeat rerun times:
            keys = cases_to_rerun(result)           # REGRESSION or INCONCLUSIVE
            if not keys: stop
            cur = merge_samples(cur, remeasure(keys), keys)
            result = gate(base, cur)                # BH again, over all cases

    ``remeasure(keys)`` is injected by the caller (the CLI wires the live
    measurement loop into it): it must measure exactly the given
    ``case_id/impl`` keys on the same device and return them as a RunResult;
    keys it leaves out keep their samples. Pooling and deciding again is a
    sequential test, so the false-positive rate grows slightly with ``rerun``;
    keep it small (1-3). ``gate_kwargs`` are passed to ``gate`` unchanged.
    """
    if rerun < 0:
        raise ConfigError(f"rerun must be >= 0, got {rerun}")
    result = gate(base, cur, **gate_kwargs)  # type: ignore[arg-type]
    rounds = 0
    while rounds < rerun:
        keys = cases_to_rerun(result)
        if not keys:
            break
        cur = merge_samples(cur, remeasure(keys), keys)
        rounds += 1
        result = gate(base, cur, **gate_kwargs)  # type: ignore[arg-type]
    return replace(result, reruns=rounds)
