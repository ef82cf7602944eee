"""The CI regression gate: did the current run get slower than the baseline, or break?

Pure: no I/O, no device libraries. The CLI maps ``GateResult.exit_code`` to the
process exit status (every code is listed in ``solbench.exitcodes``) and renders
the verdicts (``solbench.report``).

The threshold tau of a case is the first of:

    1. ``threshold``: an explicit ``--threshold``, for every case;
    2. the workload's ``gate_threshold`` as the run recorded it when it was measured
       (``RunResult.gate_thresholds`` of the current run, else of the baseline;
       never re-read from workload files);
    3. DEFAULT_THRESHOLD (5%).

For every ``case_id/impl`` measured ("ok", with samples) in both runs:

    r = median(cur) / median(base)          slowdown ratio (> 1: current is slower)
    [lo, hi] = bootstrap CI of r             (confidence, default 95%)
    p_slow, p_fast = one-sided Mann-Whitney U p-values (H1: current slower / faster)
    p~ = Benjamini-Hochberg adjusted p       (each family over every tested case of the run)

    INCONCLUSIVE  fewer than 5 samples on either side
    REGRESSION    lo > 1 + tau      and  p_slow~ <= alpha   (whole CI beyond the threshold,
                                                             and the rank test agrees)
    FASTER        hi < 1 / (1 + tau) and p_fast~ <= alpha   (confidently faster by tau or more)
    PASS          hi < 1 + tau                              (the CI rules out a slowdown of tau)
    INCONCLUSIVE  otherwise (too noisy to decide at tau, or lo > 1 + tau
                  without a significant rank test)

A side given as several runs (``--baseline a.json b.json``), or a run measured in rounds
(``run --repeat``, ``ab``), is decided over rounds: r is the ratio of the geometric means of the
round medians, [lo, hi] the t interval on the log round medians (pooled over both sides, with
Welch-Satterthwaite's degrees of freedom at equal rounds; moderated where ten or more cases are
tested, and then in Welch's form over sides of unequal rounds: ``analysis.sequential``) and p_slow, p_fast the one-sided
p-values of the same t statistic instead of Mann-Whitney; the rules are the same.
Several runs of one side must share a fingerprint (below).

**Between runs** (``run_sd`` = S). Rounds sample the state of each process; a run also carries an
offset shared by all its rounds (the machine's state while it ran), which its rounds do not show.
Over rounds, where the sides were measured as separate runs (saved runs, ``run --gate-against``),
the log ratio's variance gains ``S^2 (1/m_base + 1/m_cur)`` for a point m runs of each side measured
(``analysis.sequential``, "Between runs"); ``ab`` measures both sides in one invocation and passes
0. Where a side's runs are pooled, their rounds already spread by the offsets, so the term errs on
the safe side there. The CLI passes ``--run-sd``, else what ``solbench spread --save`` stored for the
baseline's GPU model, else DEFAULT_RUN_SD. A case whose ratio lies within that term of the threshold
is undecided however many rounds are added (``run_bound``): only more runs a side decide it.

For every key measured in one run only:

    BROKEN        ok in the baseline, and incorrect, invalid, error, crashed, timeout, oom
                  or reward_hack in the current run: a correctness or fault regression
    MISSING       listed, never fails the gate: absent from the current run; ``skipped``
                  there (the machine lacks a requirement, so nothing can be compared); or
                  measured in the current run only; or failed in the baseline and absent or
                  ``skipped`` in the current run (a key that leaves the current run is listed)
    BROKEN        failed in the current run (as above) and absent or skipped in the baseline:
                  nothing shows it worked before the change
    STILL-BROKEN  failed in the current run and in the baseline too: not broken by the change,
                  yet a failing implementation never passes (exit 1, as BROKEN)
    (not listed)  any other key measured in neither run (skipped in both, say)

    overall = BROKEN if any BROKEN, else REGRESSION if any REGRESSION, else STILL-BROKEN if any
              STILL-BROKEN, else INCONCLUSIVE if any INCONCLUSIVE, else PASS (FASTER and MISSING
              cases pass): what the change did is named first; exit code 1, 1, 1, 3, 0
              respectively (2 is left to the CLI for bad input: ConfigError, GateRefused,
              ResultsFormatError).

A workload's byte floor (``floor: true``: a ``part: floor`` result, solbench's own copy kernel)
is never gated: it measures the card, not the code under test, and it is never scored.

Two runs whose fingerprints differ (``check_fingerprints``) are refused with
``GateRefused`` unless ``allow_cross_hardware``. A run over several devices (``run --devices``,
Ray) records each case's GPU; when either run does, the device and spec are checked per case
instead: a key measured on different GPU models is MISSING ("not comparable: other GPU model"),
never a regression (unless ``allow_cross_hardware``, which compares it anyway).

**Looks.** ``gate_with_rerun`` (``run --gate-against``) and ``ab`` look at the data again after
each re-measurement: a case decided at one look keeps its verdict, an undecided one gets more
rounds (``ab`` and ``run --gate-against`` over rounds: four a look; between single runs, one
pooled re-measurement a look). So that the error rates hold under this optional stopping,
``looks`` = K (the most looks a case can get) splits both levels over them
(``analysis.sequential.look_levels``; Bonferroni): every look uses ``alpha / K`` for the tests
and ``1 - (1 - confidence) / K`` for the interval. K = 1 is the rule above unchanged. Over rounds
only INCONCLUSIVE cases are re-measured (a REGRESSION at a look is already decided at its share of
alpha); between single runs, whose samples come from one process each, a REGRESSION, PASS or FASTER
is re-measured as well (a round of its own) and must hold over the rounds (the asv/Bencher "confirm
before alert" practice); one that nothing re-measured (standalone ``gate``, ``rerun`` 0) is INCONCLUSIVE
(``unconfirmed``), unless both sides hold the very same samples (a run gated against itself). BROKEN
cases are never re-measured: a failure is not noise. An INCONCLUSIVE case over
rounds says how many more rounds per side would decide it at the measured spread and ratio
(``analysis.allocation``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from solbench import exitcodes
from solbench.analysis import stats
from solbench.analysis.allocation import more_current_rounds_to_decide, more_rounds_to_decide, within_run_offsets
from solbench.analysis.compare import (
    Estimate,
    Pair,
    Unpaired,
    check_run_sd,
    devices,
    estimate,
    impl_keys,
    launched_apart,
    moderate,
    pair_runs,
    run_launch,
    run_offset_vars,
    samples,
    side_runs,
    split_launched,
    with_run_offsets,
)
from solbench.analysis.pooling import combine_runs as merge_runs
from solbench.analysis.pooling import merge_samples, merges, rounds_apart
from solbench.analysis.sequential import look_levels
from solbench.analysis.significance import bh_adjust, mann_whitney_p
from solbench.analysis.thresholds import (
    DEFAULT_RUN_SD,
    DEFAULT_THRESHOLD,
    ThresholdRule,
    ThresholdSource,
    decimals_apart,
    decision_edges,
    parse_threshold,
    percent,
    threshold_of,
    validate,
)
from solbench.errors import ConfigError, GateRefused
from solbench.results.model import FAILED_STATUSES, KERNEL_CUT_MARK, Environment, ImplResult, Protocol, RunResult

CaseVerdict = Literal["PASS", "FASTER", "REGRESSION", "BROKEN", "STILL-BROKEN", "INCONCLUSIVE", "MISSING"]
Overall = Literal["PASS", "REGRESSION", "BROKEN", "STILL-BROKEN", "INCONCLUSIVE"]
CASE_VERDICTS: tuple[CaseVerdict, ...] = ("BROKEN", "REGRESSION", "STILL-BROKEN", "INCONCLUSIVE", "MISSING", "FASTER",
                                          "PASS")

__all__ = [
    "CASE_VERDICTS",
    "DEFAULT_RUN_SD",
    "DEFAULT_THRESHOLD",
    "ROUNDS_A_LOOK",
    "UNCONFIRMED_VERDICTS",
    "GateCaseVerdict",
    "GateResult",
    "ThresholdRule",
    "case_verdict",
    "cases_to_rerun",
    "check_fingerprints",
    "check_one_tree",
    "check_timing",
    "gate",
    "gate_with_rerun",
    "looks_for",
    "merge_looks",
    "merge_samples",
    "parse_threshold",
    "same_hardware",
    "unconfirmed",
]


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
    threshold_source: ThresholdSource = "default"
    median_base: float | None = None  # seconds
    median_cur: float | None = None  # seconds
    ratio: float | None = None  # median_cur / median_base (> 1: slower)
    ci_low: float | None = None
    ci_high: float | None = None
    alternative: Literal["slower", "faster"] | None = None  # direction of the test p_value belongs to
    p_value: float | None = None  # one-sided Mann-Whitney, unadjusted
    p_adjusted: float | None = None  # Benjamini-Hochberg adjusted
    n_base: int = 0
    n_cur: int = 0
    rounds_base: int = 1  # rounds (processes, runs) each side's samples came from; 0: that side has none
    rounds_cur: int = 1
    status_base: str | None = "ok"  # the key's status in each run; None: absent from that run
    status_cur: str | None = "ok"
    detail: str = ""  # BROKEN: the current run's full message and the worker's last log lines
    more_rounds: int | None = None  # INCONCLUSIVE over rounds: rounds per side that would decide it
    # INCONCLUSIVE over rounds: rounds added to the current side alone that would decide it (None:
    # none would, the baseline's rounds keep it undecided; see allocation.more_current_rounds_to_decide)
    current_rounds: int | None = None
    choices: str = ""  # not PASS: how the two runs' autotuned algorithms or kernels differed ("": they did not)
    # not PASS, over rounds: the rounds that read far from their side's other rounds (rounds_apart), e.g.
    # "baseline round 5 +10.8%, round 10 +11.0%": a process that ran slow, not the code ("": none)
    apart: str = ""
    # INCONCLUSIVE over rounds: the runs' own offsets (GateResult.run_sd) alone keep it undecided, so no
    # number of rounds decides it; more runs a side, or ``ab``, do
    run_bound: bool = False
    # the two sides hold the very same samples (a run gated against itself): nothing a process could add
    identical: bool = False


@dataclass(frozen=True)
class GateResult:
    """All case verdicts, the overall verdict, and the settings they were reached with."""

    verdicts: tuple[GateCaseVerdict, ...]
    overall: Overall
    threshold: float | None  # the explicit threshold; None: each workload's recorded one, else 5%
    alpha: float
    confidence: float
    fingerprint_diffs: tuple[str, ...] = ()  # non-empty only with allow_cross_hardware
    cards: str = ""  # the sides were measured on different cards of one model (card_note); "": one card, or unknown
    load: str = ""  # the host was far busier during one side (load_note); "": alike, or unknown
    reruns: int = 0  # rounds of re-measurement that went into this result
    looks: int = 1  # K: the looks the error rates are split over (alpha / K, 1 - (1 - confidence) / K)
    run_sd: float = 0.0  # S: the sd of a run's own offset in log time priced in over rounds (module docstring)
    run_sd_source: str = ""  # where S came from (the CLI: --run-sd, a saved spread record, or the default)
    device: str = ""  # what the runs were measured on (analysis.compare.devices)

    @property
    def undecided(self) -> tuple[GateCaseVerdict, ...]:
        """The INCONCLUSIVE cases: what a CI owner must act on when the gate exits 3."""
        return tuple(v for v in self.verdicts if v.verdict == "INCONCLUSIVE")

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression or broken (still broken too), 3 inconclusive (``solbench.exitcodes``)."""
        return {"PASS": exitcodes.OK, "REGRESSION": exitcodes.REGRESSION, "BROKEN": exitcodes.REGRESSION,
                "STILL-BROKEN": exitcodes.REGRESSION, "INCONCLUSIVE": exitcodes.INCONCLUSIVE}[self.overall]

    def count(self, verdict: CaseVerdict) -> int:
        """How many cases have this verdict."""
        return sum(1 for v in self.verdicts if v.verdict == verdict)


def _major(version: str | None) -> str | None:
    if version is None:
        return None
    m = re.match(r"\s*v?(\d+)", version)
    return m.group(1) if m else version.strip()


def check_fingerprints(base: Environment, cur: Environment, *, device: bool = True,
                       labels: tuple[str, str] = ("baseline", "current")) -> list[str]:
    """Differences that make two runs' times incomparable, as readable lines.

    Compared: device kind, device name and spec id (unless ``device`` is False: runs whose cases
    record their own GPU are checked case by case), driver (full version), CUDA major version,
    torch major version. A value known on one side only counts as a difference. ``labels``: what
    the lines call the two runs.
    """
    checks: list[tuple[str, str | None, str | None]] = [("device kind", base.device_kind, cur.device_kind)]
    if device:
        checks += [("device", base.device_name, cur.device_name), ("spec", base.spec_id, cur.spec_id)]
    checks += [
        ("driver", base.driver, cur.driver),
        ("CUDA major", _major(base.cuda), _major(cur.cuda)),
        ("torch major", _major(base.torch), _major(cur.torch)),
    ]
    return [f"{name}: {b or 'unknown'} ({labels[0]}) vs {c or 'unknown'} ({labels[1]})"
            for name, b, c in checks if b != c]


def check_timing(base: Protocol, cur: Protocol, labels: tuple[str, str] = ("baseline", "current")) -> list[str]:
    """How the two runs' samples were taken differently, as readable lines: the timer, and for the
    cold timer whether each call was launched on the stream or replayed from a CUDA graph
    (``--launch``; a run from before it records none and launched on the stream). The two read the
    same code differently (BENCHMARKS.md, issue 16, twenty-fifth session): never gated together."""
    checks = [("timer", base.timer, cur.timer), ("launch", run_launch(base), run_launch(cur))]
    return [f"{name}: {b} ({labels[0]}) vs {c} ({labels[1]})" for name, b, c in checks if b != c]


# A difference in the host's load per CPU (1-minute average) between the sides worth a word: half the
# CPUs busy with something else on one side only
LOAD_GAP = 0.5


def load_note(base: Side, cur: Side) -> str:
    """A line when the host was far busier during one side's runs than the other's, else "".

    Each side's load is the highest ``host_load``/``host_load_end`` its runs recorded (the 1-minute
    average per CPU). Not a fingerprint difference and not refused: a shared CI machine is loaded at
    times, and the gate still decides. But a loaded host slows the launch path and, on the CPU device,
    the code itself: a verdict may be the load's. Said where every run of both sides records a load
    and the sides differ by LOAD_GAP or more.
    """
    def load(side: Side) -> float | None:
        per_run = [[v for v in (r.environment.host_load, r.environment.host_load_end) if v is not None]
                   for r in side_runs(side)]
        return max(max(v) for v in per_run) if per_run and all(per_run) else None

    a, b = load(base), load(cur)
    if a is None or b is None or abs(a - b) < LOAD_GAP:
        return ""
    return (f"the host was busier during the {'current' if b > a else 'baseline'} run: load {a:.2f} (baseline) vs "
            f"{b:.2f} (current) per CPU, 1-minute average; other work on the host slows the launch path (and, on the "
            "CPU device, the code): a verdict may be the load's")


def card_note(base: Side, cur: Side) -> str:
    """A line when the two sides were measured on different cards (device UUIDs) of one model, else "".

    Not a fingerprint difference (same model, driver and software), and not refused: a CI job
    often lands on another card of the same kind. But the same code reads differently card to
    card: on four H200s the same protocol's o_proj prefill GEMMs differed by up to 1.9% card to card
    (median over those points; 2.7% at one point; BENCHMARKS.md, issue 16, twenty-first session). A
    verdict near the threshold may be the card's. Said only where every run of both sides records its UUID.
    """
    def uuids(side: Side) -> list[str | None]:
        return [r.environment.device_uuid for r in side_runs(side)]

    a, b = uuids(base), uuids(cur)
    if None in a or None in b or set(a) == set(b) or not a or not b:
        return ""

    def named(ids: list[str | None]) -> str:
        return ", ".join(sorted({str(i)[:12] for i in ids}))

    return (f"other cards of one model: baseline on {named(a)}, current on {named(b)}; the same code reads "
            f"differently card to card (README, 'Comparing runs and gating CI'), so a verdict near the "
            f"threshold may be the card's")


def case_verdict(ci_low: float | None, ci_high: float | None, significant: bool, threshold: float,
                 faster_significant: bool = False) -> CaseVerdict:
    """The per-case rule of the module docstring on the CI of ``median_cur / median_base``.

    ``significant``: the adjusted "slower" rank test is at or below alpha;
    ``faster_significant``: the adjusted "faster" one is.
    """
    if ci_low is None or ci_high is None:
        return "INCONCLUSIVE"
    if ci_low > 1.0 + threshold and significant:
        return "REGRESSION"
    if ci_high < 1.0 / (1.0 + threshold) and faster_significant:
        return "FASTER"
    if ci_high < 1.0 + threshold:  # a CI that reaches 1 + tau does not rule out a slowdown of tau
        return "PASS"
    return "INCONCLUSIVE"


def _rounds_to_decide(est: Estimate, tau: float, confidence: float) -> tuple[int | None, int | None]:
    """For an undecided case over rounds: rounds per side that would decide it, and rounds added to
    the current side alone that would (each None: not over rounds, or no practical number does),
    planned on what the gate's t will be at those rounds at the measured own spreads
    (``LogRatio.at_rounds``: moderated again there, not the posterior of the rounds measured)."""
    if est.t is None:
        return None, None
    per_side = more_rounds_to_decide(est.t.d, est.t.sd_round, tau, est.rounds_a, other_rounds=est.rounds_b,
                                     confidence=confidence, run_var=est.t.run_var, plan=est.t.at_rounds)
    alone = more_current_rounds_to_decide(est.t.d, est.t.sd_round, tau, est.rounds_a, est.rounds_b,
                                          confidence=confidence, run_var=est.t.run_var, plan=est.t.at_rounds)
    return per_side, alone


def _run_bound(est: Estimate, tau: float, confidence: float) -> bool:
    return est.t is not None and within_run_offsets(est.t.d, tau, est.t.run_var, confidence=confidence)


def _needs(more: int | None, est: Estimate, run_bound: bool = False) -> str:
    if est.t is None:
        return ""
    if run_bound:
        return ("; the ratio lies within the runs' own offsets of the threshold: no number of rounds decides it, "
                "more runs a side would")
    if more is None:
        return "; the ratio sits at the threshold: no practical number of rounds decides it"
    return f"; needs about {more} more round{'s' if more != 1 else ''} per side at the measured spread"


def _reason(verdict: CaseVerdict, est: Estimate, tau: float, p_adj: float | None, alpha: float,
            more: int | None = None, run_bound: bool = False) -> str:
    if est.ci_low is None or est.ci_high is None:
        return f"too few samples to decide (baseline {est.n_a}, current {est.n_b}; need 5 each)"
    d = decimals_apart((est.ci_low, est.ci_high), decision_edges(tau), 4)  # never printed as the edge it is not
    ci = f"CI [{est.ci_low:.{d}f}, {est.ci_high:.{d}f}]"
    if est.over_rounds:
        ci += f" over {est.rounds_a} vs {est.rounds_b} rounds"
    if verdict == "REGRESSION":
        return (f"slower by {est.ratio - 1:+.1%}: {ci} lies above 1+{percent(tau)}, "
                f"adjusted p {p_adj:.2g} <= {alpha:g}")
    if verdict == "FASTER":
        return (f"{1 / est.ratio:.3g}x as fast: {ci} lies below 1/(1+{percent(tau)}), "
                f"adjusted p {p_adj:.2g} <= {alpha:g}")
    if verdict == "PASS":
        return f"{ci} rules out a slowdown of {percent(tau)} or more"
    if est.ci_low > 1.0 + tau:
        return (f"{ci} lies above 1+{percent(tau)} but the rank test disagrees (adjusted p {p_adj:.2g} > {alpha:g})"
                + _needs(more, est, run_bound))
    return f"{ci} straddles 1+{percent(tau)}: too noisy to decide at this threshold" + _needs(more, est, run_bound)


_Tests = tuple[float, float, float, float]  # p_slow, p_slow adjusted, p_fast, p_fast adjusted


def _rank_tests(pairs: Sequence[Pair], ests: Sequence[Estimate]) -> list[_Tests | None]:
    """Both one-sided Mann-Whitney tests of every testable pair, each family BH-adjusted."""
    tested = [i for i, e in enumerate(ests) if e.testable]
    slow = [_p(ests[i].p_slower, pairs[i], "greater") for i in tested]
    fast = [_p(ests[i].p_faster, pairs[i], "less") for i in tested]
    out: list[_Tests | None] = [None] * len(pairs)
    for i, ps, ps_adj, pf, pf_adj in zip(tested, slow, bh_adjust(slow), fast, bh_adjust(fast), strict=True):
        out[i] = (ps, ps_adj, pf, pf_adj)
    return out


def _p(over_rounds: float | None, pair: Pair, alternative: Literal["greater", "less"]) -> float:
    """The two-level test's p over rounds, else one-sided Mann-Whitney (current vs baseline)."""
    if over_rounds is not None:
        return over_rounds
    return mann_whitney_p(samples(pair.b), samples(pair.a), alternative)


def _decide(pair: Pair, est: Estimate, tests: _Tests | None, tau: float, source: ThresholdSource,
            alpha: float, confidence: float) -> GateCaseVerdict:
    slow_sig = tests is not None and tests[1] <= alpha
    fast_sig = tests is not None and tests[3] <= alpha
    verdict = case_verdict(est.ci_low, est.ci_high, slow_sig, tau, faster_significant=fast_sig)
    faster = verdict == "FASTER" or (verdict != "REGRESSION" and est.ratio < 1.0)
    p, p_adj = (None, None) if tests is None else (tests[2], tests[3]) if faster else (tests[0], tests[1])
    alternative: Literal["slower", "faster"] | None = None
    if tests is not None:
        alternative = "faster" if faster else "slower"
    more, current = _rounds_to_decide(est, tau, confidence) if verdict == "INCONCLUSIVE" else (None, None)
    run_bound = verdict == "INCONCLUSIVE" and _run_bound(est, tau, confidence)
    reason = _reason(verdict, est, tau, p_adj, alpha, more, run_bound)
    choices = _other_choices(pair.a, pair.b) if verdict != "PASS" else ""
    if choices:
        reason += f"; the runs {choices}: the difference may be that choice, not the code"
    apart = "; ".join(filter(None, (rounds_apart(pair.a, "baseline"), rounds_apart(pair.b, "current")))) \
        if verdict != "PASS" else ""
    if apart:
        reason += f"; rounds far from the rest of their side ({apart}): a process that ran slow or fast"
    return GateCaseVerdict(
        key=pair.key, case_id=pair.case_id, impl=pair.a.name, workload=pair.workload,
        verdict=verdict, reason=reason, threshold=tau,
        threshold_source=source, median_base=est.median_a, median_cur=est.median_b, ratio=est.ratio,
        ci_low=est.ci_low, ci_high=est.ci_high, alternative=alternative, p_value=p, p_adjusted=p_adj,
        n_base=est.n_a, n_cur=est.n_b, rounds_base=est.rounds_a, rounds_cur=est.rounds_b, more_rounds=more,
        current_rounds=current, choices=choices, apart=apart, run_bound=run_bound, identical=est.identical,
    )


def _other_choices(base: ImplResult, cur: ImplResult) -> str:
    """How a verdict's two sides ran different code below the implementation: other autotuned
    cuBLASLt algorithms (``cublaslt_algorithms``), other kernels in the checked calls (``kernels``,
    as CUPTI named them), or the same kernels with other launch shapes (``kernel_shapes``), or "".
    The difference may be that choice, not the code."""
    found = []
    a, b = base.protocol.get("cublaslt_algorithms"), cur.protocol.get("cublaslt_algorithms")
    if a and b and a != b:
        found.append(f"autotuning chose different cuBLASLt algorithms ({a} in the baseline, {b} in the current)")
    a, b = base.protocol.get("kernels"), cur.protocol.get("kernels")
    if isinstance(a, str) and isinstance(b, str) and a and b:
        names_a, names_b = _kernel_names(a, b), _kernel_names(b, a)
        only_a = [k for k in names_a if k not in names_b]
        only_b = [k for k in names_b if k not in names_a]
        if only_a or only_b:
            found.append(f"ran different kernels (baseline only: {', '.join(only_a) or 'none'}; current only: "
                         f"{', '.join(only_b) or 'none'})")
    a, b = base.protocol.get("kernel_shapes"), cur.protocol.get("kernel_shapes")
    if not found and isinstance(a, str) and isinstance(b, str) and a and b and a != b:
        found.append(f"launched their kernels with different grids or blocks ({_first_line(a, 160)} in the "
                     f"baseline, {_first_line(b, 160)} in the current)")
    return " and ".join(found)


def _kernel_names(kernels: str, other: str) -> list[str]:
    """The names in a result's ``kernels``; where ``other`` was recorded without the digest of a cut
    name (results saved before names carried one), those digests are left off, so the two compare alike."""
    names = kernels.split(" | ")
    return names if KERNEL_CUT_MARK in other else [n.split(KERNEL_CUT_MARK)[0] for n in names]


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _rounds(r: ImplResult | None) -> int:
    """How many rounds a side's samples came from: 0 where it has none (absent, failed, skipped)."""
    return r.timing.n_rounds if r is not None and r.timing is not None and samples(r) else 0


def _unmeasured(u: Unpaired, tau: float, source: ThresholdSource) -> GateCaseVerdict:
    """BROKEN or MISSING for a key measured in one run only (rules in the module docstring)."""
    base, cur = u.a, u.b
    in_base = base is not None and base.status == "ok" and bool(samples(base))
    measured = base if in_base else cur
    assert measured is not None
    med, n = stats.median(list(samples(measured))), len(samples(measured))
    v = GateCaseVerdict(key=u.key, case_id=u.case_id, impl=measured.name, workload=u.workload,
                        verdict="MISSING", reason="", threshold=tau, threshold_source=source,
                        rounds_base=_rounds(base) if in_base else 0, rounds_cur=0 if in_base else _rounds(cur),
                        status_base=None if base is None else base.status,
                        status_cur=None if cur is None else cur.status)
    if not in_base:
        where = "absent from" if base is None else f"{v.status_base} in"
        return replace(v, median_cur=med, n_cur=n,
                       reason=f"measured in the current run only ({where} the baseline): not compared")
    v = replace(v, median_base=med, n_base=n)
    if cur is not None and cur.status in FAILED_STATUSES:
        msg = _first_line(cur.message)
        detail = "\n".join(part for part in (cur.message.strip(), cur.log_tail.strip()) if part)
        return replace(v, verdict="BROKEN", detail=detail, reason=f"ok in the baseline, {cur.status.upper()} "
                                                                   f"in the current run" + (f": {msg}" if msg else ""))
    return replace(v, reason=f"{_not_now(cur)}; not compared")


def _not_now(cur: ImplResult | None) -> str:
    """Why a key has nothing to compare in the current run (absent, skipped, or ok without samples)."""
    if cur is None:
        return "absent from the current run"
    if cur.status == "skipped":
        why = "skipped in the current run" + (f" ({_first_line(cur.message)})" if cur.message.strip() else "")
        return why + ": this machine lacks a requirement"
    return "ok in the current run but without timing samples"


def _gone(base: RunResult, cur: RunResult, impl: str | None, listed: set[str],
          tau_of: Callable[[str], tuple[float, ThresholdSource]]) -> list[GateCaseVerdict]:
    """MISSING for every key that failed in the baseline and is absent or skipped in the current run:
    a key that leaves the current run is listed, whatever the baseline held."""
    now = {key: r for key, _, r in impl_keys(cur, impl)}
    out = []
    for key, case, was in impl_keys(base, impl):
        r = now.get(key)
        if key in listed or was.status not in FAILED_STATUSES or (r is not None and r.status != "skipped"):
            continue
        out.append(GateCaseVerdict(
            key=key, case_id=case.case_id, impl=was.name, workload=case.workload, verdict="MISSING",
            reason=f"{_not_now(r)} ({was.status.upper()} in the baseline); not compared",
            threshold=tau_of(case.workload)[0], threshold_source=tau_of(case.workload)[1],
            rounds_base=0, rounds_cur=0, status_base=was.status, status_cur=None if r is None else r.status))
    return out


def _failing_now(base: RunResult, cur: RunResult, impl: str | None, listed: set[str],
                 tau_of: Callable[[str], tuple[float, ThresholdSource]]) -> list[GateCaseVerdict]:
    """For every key that fails in the current run and was not ok in the baseline either: STILL-BROKEN
    where it failed there too (not the change's doing), else BROKEN (absent or skipped there: nothing
    shows it worked). Either way an incorrect, crashed or cheating implementation never passes."""
    before = {key: r for key, _, r in impl_keys(base, impl)}
    out = []
    for key, case, r in impl_keys(cur, impl):
        if key in listed or r.status not in FAILED_STATUSES:
            continue
        was = before.get(key)
        still = was is not None and was.status in FAILED_STATUSES
        then = ("absent from the baseline" if was is None else
                f"{was.status.upper()} in the baseline too: not broken by this change, still failing" if still else
                f"{was.status} in the baseline")
        msg = _first_line(r.message)
        out.append(GateCaseVerdict(
            key=key, case_id=case.case_id, impl=r.name, workload=case.workload,
            verdict="STILL-BROKEN" if still else "BROKEN",
            reason=f"{r.status.upper()} in the current run ({then})" + (f": {msg}" if msg else ""),
            threshold=tau_of(case.workload)[0], threshold_source=tau_of(case.workload)[1],
            rounds_base=_rounds(was), rounds_cur=_rounds(r),
            status_base=None if was is None else was.status, status_cur=r.status,
            detail="\n".join(part for part in (r.message.strip(), r.log_tail.strip()) if part)))
    return out


def _launched_differently(p: Pair, tau: float, source: ThresholdSource) -> GateCaseVerdict:
    """MISSING for a key whose calls one side replayed from a CUDA graph and the other launched on
    the stream (its call could not be captured there: ``graph_fallback``): not comparable."""
    sa, sb = samples(p.a), samples(p.b)
    how = launched_apart(p, "the baseline", "the current run")
    return GateCaseVerdict(key=p.key, case_id=p.case_id, impl=p.a.name, workload=p.workload, verdict="MISSING",
                           reason=f"not comparable: launched differently ({how})",
                           threshold=tau, threshold_source=source,
                           median_base=stats.median(list(sa)), median_cur=stats.median(list(sb)),
                           n_base=len(sa), n_cur=len(sb), rounds_base=_rounds(p.a), rounds_cur=_rounds(p.b))


def _other_model(u: Unpaired, model_base: str, model_cur: str, tau: float,
                 source: ThresholdSource) -> GateCaseVerdict:
    """MISSING for a key measured on different GPU models: not comparable, never a regression."""
    assert u.a is not None and u.b is not None
    sa, sb = samples(u.a), samples(u.b)
    return GateCaseVerdict(key=u.key, case_id=u.case_id, impl=u.a.name, workload=u.workload, verdict="MISSING",
                           reason=f"not comparable: other GPU model ({model_base} in the baseline, {model_cur} in "
                                  "the current run)", threshold=tau, threshold_source=source,
                           median_base=stats.median(list(sa)), median_cur=stats.median(list(sb)),
                           n_base=len(sa), n_cur=len(sb), rounds_base=_rounds(u.a), rounds_cur=_rounds(u.b))


def _overall(verdicts: tuple[GateCaseVerdict, ...]) -> Overall:
    kinds = {v.verdict for v in verdicts}
    for worst in ("BROKEN", "REGRESSION", "STILL-BROKEN", "INCONCLUSIVE"):
        if worst in kinds:
            return worst  # type: ignore[return-value]
    return "PASS"


Side = RunResult | Sequence[RunResult]


def _without_floor(run: RunResult) -> RunResult:
    """``run`` without its byte-floor results (``part: floor``), which the gate never decides on."""
    cases = tuple(replace(c, impls=tuple(r for r in c.impls if r.protocol.get("part") != "floor"))
                  for c in run.cases)
    return replace(run, cases=cases)


def check_one_tree(runs: Sequence[RunResult], name: str, allow_cross_hardware: bool | None = False) -> None:
    """GateRefused unless ``runs`` (several runs of one side, or of one tree for ``spread``) were
    measured on the same hardware and software and timed alike. ``allow_cross_hardware``: True
    lets the hardware and software differ; None where the command offers no such option."""
    for k, other in enumerate(runs[1:], 2):  # runs of one side: numbered in the order given, not "current"
        labels = (f"{name} run 1", f"{name} run {k}")
        diffs = check_fingerprints(runs[0].environment, other.environment, labels=labels)
        if diffs and not allow_cross_hardware:
            hint = "" if allow_cross_hardware is None else " (allow with --allow-cross-hardware)"
            raise GateRefused(f"the {name} runs were measured on different hardware or software: "
                              + "; ".join(diffs) + hint)
        timing = check_timing(runs[0].protocol, other.protocol, labels)
        if timing:
            raise GateRefused(f"the {name} runs were timed differently: " + "; ".join(timing))


def _one_side(runs: Side, name: str, allow_cross_hardware: bool | None) -> RunResult:
    """Several runs of one side as one (``pooling.combine_runs``), after checking they agree."""
    if isinstance(runs, RunResult):
        return runs
    runs = list(runs)
    if not runs:
        raise ConfigError(f"no {name} run given")
    check_one_tree(runs, name, allow_cross_hardware)
    return merge_runs(runs)


def _per_case(base: RunResult, cur: RunResult) -> bool:
    """Whether either run records each case's GPU (a sharded run, or one planned over several
    devices, not measured yet): fingerprints are then compared device by device, not as one device."""
    return any(c.device is not None for run in (base, cur) for c in run.cases) \
        or any(run.protocol.devices > 1 for run in (base, cur))


def same_hardware(base: RunResult, cur: RunResult, allow_cross_hardware: bool | None = False) -> list[str]:
    """GateRefused where the two runs' fingerprints differ (:func:`check_fingerprints`; device by
    device where either run records each case's GPU), unless ``allow_cross_hardware`` (None: refused,
    naming no option to allow it); the differences allowed otherwise. ``cur`` may be a run not
    measured yet (``run --gate-against`` checks it before measuring anything)."""
    diffs = check_fingerprints(base.environment, cur.environment, device=not _per_case(base, cur))
    if diffs and not allow_cross_hardware:
        hint = "" if allow_cross_hardware is None else " (allow with --allow-cross-hardware)"
        raise GateRefused("runs were measured on different hardware or software: " + "; ".join(diffs) + hint)
    return diffs


def gate(base: Side, cur: Side, *, threshold: float | None = None, alpha: float = 0.01,
         confidence: float = 0.95, allow_cross_hardware: bool | None = False, impl: str | None = None,
         seed: int = 0, n_boot: int = 2000, looks: int = 1, run_sd: float = 0.0) -> GateResult:
    """Decide every key and the overall verdict of ``cur`` against ``base`` (rules above).

    ``looks``: how many looks the error rates are split over (module docstring, "Looks"); each
    verdict is reached at ``alpha / looks`` and an interval at ``1 - (1 - confidence) / looks``.
    ``run_sd``: the sd S of a run's own offset in log time (module docstring, "Between runs"); 0
    where both sides were measured in one invocation (``ab``), DEFAULT_RUN_SD for separate runs.

    Each side is a run or a sequence of runs of the same code (decided over rounds).
    ``threshold`` is an explicit threshold for every case; None uses each workload's
    recorded ``gate_threshold``, else DEFAULT_THRESHOLD. Raises GateRefused when
    fingerprints differ and ``allow_cross_hardware`` is False (None: the same, where the command
    offers no such option, so the refusal names none); ConfigError for bad
    settings, or when no key is measured in both runs and none fails in the current run;
    ResultsFormatError for a recorded threshold that is not a positive number.
    """
    sides = (base, cur)  # as given: each run has its own offset, priced per point by the runs that measured it
    check_run_sd(run_sd)  # before anything else
    cards, load = card_note(base, cur), load_note(base, cur)
    base = _without_floor(_one_side(base, "baseline", allow_cross_hardware))
    cur = _without_floor(_one_side(cur, "current", allow_cross_hardware))
    recorded = {**base.gate_thresholds, **cur.gate_thresholds}
    validate(threshold, recorded, alpha, confidence)
    dry = [label for label, side in (("baseline", base), ("current", cur)) if side.protocol.timer == "none"]
    if dry:  # not "no measured case in common", as if the runs held different cases
        raise ConfigError(f"the {' and the '.join(dry)} {'is a dry run' if len(dry) == 1 else 'are dry runs'} "
                          "(--dry-run: nothing was timed); gate runs that measured")
    per_case = _per_case(base, cur)
    diffs = same_hardware(base, cur, allow_cross_hardware)
    timing = check_timing(base.protocol, cur.protocol)
    if timing:
        raise GateRefused("runs were timed differently: " + "; ".join(timing)
                          + " (measure both with the same --timer and --launch)")
    pairing = pair_runs(base, cur, impl, same_model=not allow_cross_hardware)
    pairing, mixed = split_launched(pairing)
    tau_of = threshold_of(threshold, recorded)
    if looks < 1:
        raise ConfigError(f"looks must be >= 1, got {looks}")
    alpha_k, confidence_k = look_levels(alpha, confidence, looks)
    ests = moderate([estimate(p.a, p.b, confidence=confidence_k, seed=seed, n_boot=n_boot, key=p.key,
                              sides=("baseline", "current")) for p in pairing.pairs], confidence_k)
    ests = with_run_offsets(ests, run_offset_vars(run_sd, *sides, [p.key for p in pairing.pairs]), confidence_k)
    tests = _rank_tests(pairing.pairs, ests)
    verdicts = [_decide(pair, est, t, *tau_of(pair.workload), alpha_k, confidence_k)
                for pair, est, t in zip(pairing.pairs, ests, tests, strict=True)]
    verdicts += [_unmeasured(u, *tau_of(u.workload)) for u in pairing.unpaired]
    verdicts += [_other_model(u, a, b, *tau_of(u.workload)) for u, a, b in pairing.other_model]
    verdicts += [_launched_differently(p, *tau_of(p.workload)) for p in mixed]
    verdicts += _failing_now(base, cur, impl, {v.key for v in verdicts}, tau_of)
    verdicts += _gone(base, cur, impl, {v.key for v in verdicts}, tau_of)
    if not pairing.pairs and not any(v.verdict in ("BROKEN", "STILL-BROKEN") for v in verdicts):
        other = f", {len(pairing.other_model)} on other GPU models" if pairing.other_model else ""
        if mixed:  # measured on both sides, but one replayed a graph and the other launched
            how = launched_apart(mixed[0], "baseline", "current")
            other += f", {len(mixed)} launched differently ({mixed[0].key}: {how})"
        failed = [u for u in pairing.unpaired if u.other is not None]
        if failed:  # present on both sides, measured on one: say what the other holds (a tree that fixes one)
            u = failed[0]
            side = "baseline" if u.a is u.other else "current"
            other += (f"; {len(failed)} of them present on both sides but not measured on one, e.g. {u.key}: "
                      f"{u.other.status} in the {side}")
        raise ConfigError(f"baseline and current have no measured case in common ({len(pairing.only_in_a)} "
                          f"in baseline only, {len(pairing.only_in_b)} in current only{other})")
    vs = tuple(verdicts)
    return GateResult(vs, _overall(vs), threshold, alpha, confidence, tuple(diffs), looks=looks, run_sd=run_sd,
                      cards="" if per_case or diffs else cards, load=load,  # other models: the diffs say more
                      device=devices([base, cur]))


# The verdicts on time between single runs (one process a side) that are no verdict until a fresh process
# confirms them (``unconfirmed``): ``gate_with_rerun`` and ``ab`` measure such a key again, standalone
# ``gate`` reports it INCONCLUSIVE.
UNCONFIRMED_VERDICTS = ("REGRESSION", "PASS", "FASTER")


def cases_to_rerun(result: GateResult) -> list[str]:
    """Keys to measure again: INCONCLUSIVE ones; between single runs REGRESSION, PASS and FASTER ones
    too (to confirm on a fresh process); never BROKEN (module docstring, "Looks")."""
    def again(v: GateCaseVerdict) -> bool:
        over_rounds = max(v.rounds_base, v.rounds_cur) > 1
        return v.verdict == "INCONCLUSIVE" or (v.verdict in UNCONFIRMED_VERDICTS and not over_rounds
                                               and not v.identical)

    return [v.key for v in result.verdicts if again(v)]


UNCONFIRMED = ("between single runs (one process a side), not confirmed on a fresh process: a process's own "
               "offset reaches several percent; measure each side with --repeat 3, or gate with run "
               "--gate-against or ab, which re-measure it")


def unconfirmed(result: GateResult, *, verdicts: Collection[str] = UNCONFIRMED_VERDICTS) -> GateResult:
    """``result`` with every verdict in ``verdicts`` between single runs made INCONCLUSIVE: samples of
    one process a side cannot tell the code from that process's offset (module docstring, "Looks").
    A key that was re-measured has a round of its own for each re-measurement (``merge_samples``), so
    it is no longer between single runs.

    ``gate_with_rerun``, ``ab`` and standalone ``gate`` (which re-measures nothing) all demote them: on a
    loaded 2-CPU machine four runs of one tree gave 5 REGRESSION exits in 12 ordered pairs, and in
    simulation (processes spreading 1.5%) a true 5% slowdown PASSed in 34% of single-run pairs, where
    the rule allows 2.5%."""
    def demoted(v: GateCaseVerdict) -> GateCaseVerdict:
        # the very same samples both sides are one measurement, not two processes. An interval of [1, 1]
        # is not that: two processes' medians on one step of a coarse clock (CUDA events tick in 32 ns) give it
        if v.verdict not in verdicts or max(v.rounds_base, v.rounds_cur) > 1 or v.ratio is None or v.identical:
            return v
        return replace(v, verdict="INCONCLUSIVE", reason=f"{v.reason}; {UNCONFIRMED}")

    vs = tuple(demoted(v) for v in result.verdicts)
    return replace(result, verdicts=vs, overall=_overall(vs))


def merge_looks(previous: GateResult, new: GateResult, measured: Sequence[str]) -> GateResult:
    """``new`` with the verdicts of ``previous`` kept for every key not in ``measured``.

    A case decided at an earlier look is not measured again, so its data are unchanged; keeping
    its verdict keeps it from moving with the Benjamini-Hochberg family of later looks.
    """
    again = set(measured)
    before = {v.key: v for v in previous.verdicts}
    vs = tuple(v if v.key in again or v.key not in before else before[v.key] for v in new.verdicts)
    return replace(new, verdicts=vs, overall=_overall(vs))


ROUNDS_A_LOOK = 4  # rounds ``ab`` and ``run --gate-against`` add to an undecided key between two looks


def looks_for(rounds: int, max_rounds: int | None, step: int = ROUNDS_A_LOOK) -> int:
    """How many times a loop that measures ``rounds`` rounds, then adds ``step`` at a time up to
    ``max_rounds``, may look at a key: after ``rounds``, then after every ``step`` more (the last at
    ``max_rounds``). The K that the gate splits its error rates over (``gate(looks=K)``)."""
    return 1 + -(-(max(rounds, max_rounds or rounds) - rounds) // step)


def gate_with_rerun(base: Side, cur: RunResult, remeasure: Callable[[list[str], int], RunResult],
                    rerun: int, *, step: int = 1, **gate_kwargs: object) -> GateResult:
    """``gate``, then looks again after re-measuring the undecided cases, up to ``rerun`` rounds more.

    ::

        K = looks_for(0, rerun, step)               # 1 + ceil(rerun / step) looks; each at alpha / K
        result = gate(base, cur, looks=K)
        while fewer than rerun rounds were added:
            keys = cases_to_rerun(result)           # undecided (and, between single runs, every timed verdict)
            if not keys: stop
            n = min(step, rerun - added)
            fresh = remeasure(keys, n)
            if it measured none of keys (all skipped): stop  # its device gone: asking again adds nothing
            cur = merge_samples(cur, fresh, keys)   # n more rounds (pooled for single runs)
            result = merge_looks(result, gate(base, cur, looks=K), keys)

    ``remeasure(keys, n)`` is injected by the caller (the CLI wires the live measurement loop into
    it): it must measure exactly the given ``case_id/impl`` keys on the same device, ``n`` rounds
    (fresh workers each), and return them as a RunResult; keys it leaves out keep their samples.
    ``step`` 1 looks after every round; more rounds a look mean fewer looks to split the error
    rates over (``ab`` adds ``ROUNDS_A_LOOK``). The error rates hold whatever the
    stopping (analysis.sequential). ``gate_kwargs`` are passed to ``gate``. ``reruns`` of the
    result counts the rounds added.
    """
    if rerun < 0:
        raise ConfigError(f"rerun must be >= 0, got {rerun}")
    if step < 1:
        raise ConfigError(f"rounds a look must be >= 1, got {step}")
    kwargs = {**gate_kwargs, "looks": looks_for(0, rerun, step)}
    result = gate(base, cur, **kwargs)  # type: ignore[arg-type]
    rounds = 0
    while rounds < rerun:
        keys = cases_to_rerun(result)
        if not keys:
            break
        n = min(step, rerun - rounds)
        fresh = remeasure(keys, n)
        if not any(merges(r) for c in fresh.cases for r in c.impls if f"{c.case_id}/{r.name}" in keys):
            break  # every key skipped (its device gone, a requirement missing): asking again adds nothing
        cur = merge_samples(cur, fresh, keys)
        rounds += n
        result = merge_looks(result, gate(base, cur, **kwargs), keys)  # type: ignore[arg-type]
    return replace(unconfirmed(result), reruns=rounds)
