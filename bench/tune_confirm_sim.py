"""Error rates and power of `solbench tune`'s confirmation in rounds, simulated through its own code.

    PYTHONPATH=. python bench/tune_confirm_sim.py > bench/tune_confirm_sim.txt
    PYTHONPATH=. python bench/tune_confirm_sim.py --tunes 2000 --other-tunes 500   # a quick look

Options: --tunes N (A/A tunes a setting, default 20,000), --other-tunes N (every other row, default
5,000), --jobs J (processes, default 4), --seed S (default 0). The defaults cost about 650 CPU-seconds
(180,000 tunes): under 3 minutes on 4 free cores. The table depends on the seed and the counts, not on
--jobs (each chunk of 500 tunes has its own seed); only its last line (the time) varies.

Every simulated tune is one call of the real ``solbench.tools.tune.confirm_in_rounds`` with the
default TuneOptions (confirm_rounds 3, confirm_max_rounds 8: K = 6 looks; min_gain 1%), whose
``measure_round`` returns synthetic ``Trial`` objects; the verdict is the real ``confirm``'s
(analysis.sequential.log_ratio, look_levels; analysis.compare.comparison_verdict). One thing is
replaced: ``tune._pooled``, the display summary of each side's pooled rounds (a two-level bootstrap,
90% of the time of a call), which no verdict reads. A check at the start runs 200 tunes with and
without it from the same seed and stops unless every verdict and round count agrees.

The measurement model, one round (one measurement of hand-picked and one of the winner):

    samples = exp(mu + effect + offset + eps),   eps ~ N(0, 2.1%) within the measurement,
    n ~ uniform 10..30 samples a measurement,    offset ~ N(0, S) a measurement's process state,
    S = 0.78% (the median between-round spread of an H200's o_proj points) or 1.8% (about their p90)

with the offsets either *shared* by the pair of a round (one machine state for both measurements) or
*independent* (each measurement its own). ``effect`` = -log(1 + g) for a winner truly g faster
(hand-picked / winner = 1 + g, the ``gain`` tune reports); 0 in the A/A rows.

Printed: one row a setting with the share of tunes ending FASTER, SLOWER, SAME and INCONCLUSIVE, the
mean rounds measured, and a Clopper-Pearson 95% interval on FASTER and SLOWER. In the A/A rows every
FASTER and every SLOWER is a false claim. Nominal: a FASTER at look k needs the one-sided t test's p
at most alpha / K (analysis.compare: "directional" at alpha_k, or the two-sided test at alpha_k), so
over the K looks P(FASTER) <= K * alpha / K = alpha = 1% whatever the stopping (the union bound), and
the same for SLOWER. The last rows are a control: every look at the full alpha and 95% (no split over
the looks, a TuneOptions whose confirm_looks is 1), which the union bound no longer covers.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy import stats

from solbench.tools import tune as tuning

SD_WITHIN = 0.021
N_RANGE = (10, 30)
MU = math.log(10e-6)  # 10 us: the scale does not matter
CHUNK = 500
VERDICTS = ("FASTER", "SLOWER", "SAME", "INCONCLUSIVE")
BASE = tuning.CaseTuning("w", "impl", "case", "float32", {}, tuning.Trial({}, "ok"))
REAL_POOLED = tuning._pooled


@dataclass(frozen=True)
class Setting:
    name: str  # A/A, power, equivalence, control
    gain: float  # hand-picked / winner - 1 (truth)
    sd_offset: float
    shared: bool
    corrected: bool = True  # False: every look at the full alpha and confidence (control)


@dataclass(frozen=True)
class OneLook(tuning.TuneOptions):
    """TuneOptions that test every look at the full alpha and confidence (the control)."""

    @property
    def confirm_looks(self) -> int:
        return 1


def _trial(rng: np.random.Generator, shift: float) -> tuning.Trial:
    x = np.exp(MU + shift + rng.normal(0.0, SD_WITHIN, int(rng.integers(N_RANGE[0], N_RANGE[1] + 1))))
    return tuning.Trial({}, "ok", median=float(np.median(x)), n=x.size, samples=tuple(x.tolist()))


def one_tune(rng: np.random.Generator, s: Setting) -> tuning.CaseTuning:
    effect = -math.log1p(s.gain)

    def measure_round(i: int) -> tuple[tuning.Trial, tuning.Trial]:
        off_h = rng.normal(0.0, s.sd_offset)
        off_w = off_h if s.shared else rng.normal(0.0, s.sd_offset)
        return _trial(rng, off_h), _trial(rng, effect + off_w)

    options = tuning.TuneOptions() if s.corrected else OneLook()
    return tuning.confirm_in_rounds(BASE, measure_round, options)


def _light_pooled(rounds):  # the verdict never reads the pooled summary (module docstring)
    return rounds[0]


def chunk(task: tuple[Setting, int, int, int]) -> tuple[Setting, Counter, int]:
    s, seed, index, n = task
    tuning._pooled = _light_pooled
    rng = np.random.default_rng(np.random.SeedSequence([seed, _key(s), index]))
    counts: Counter = Counter()
    rounds = 0
    for _ in range(n):
        out = one_tune(rng, s)
        counts[out.verdict] += 1
        rounds += len(out.confirm_round_ratios)
    return s, counts, rounds


def _key(s: Setting) -> int:
    """A stable integer per setting (its chunks' seeds do not depend on the order of the settings)."""
    return round(s.gain * 1e4) * 1000 + round(s.sd_offset * 1e4) * 4 + 2 * s.shared + s.corrected


def check_light(seed: int, n: int = 200) -> None:
    """The same tunes with the real ``_pooled`` and with the light one: the same verdicts and rounds."""
    s = Setting("check", 0.0, 0.018, False)
    got = []
    for pooled in (REAL_POOLED, _light_pooled):
        tuning._pooled = pooled
        rng = np.random.default_rng(np.random.SeedSequence([seed, 99]))
        got.append([(o.verdict, len(o.confirm_round_ratios)) for o in (one_tune(rng, s) for _ in range(n))])
    tuning._pooled = REAL_POOLED
    if got[0] != got[1]:
        sys.exit("the light _pooled changed a verdict: the simulation would not be tune's")


def cp(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a binomial proportion."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def settings(tunes: int, other: int) -> list[tuple[Setting, int]]:
    out = []
    for shared in (True, False):
        for sd in (0.0078, 0.018):
            out.append((Setting("A/A", 0.0, sd, shared), tunes))
    for gain in (0.03, 0.05, 0.10):
        for shared in (True, False):
            for sd in (0.0078, 0.018):
                out.append((Setting("power", gain, sd, shared), other))
    for shared in (True, False):
        for sd in (0.0078, 0.018):
            out.append((Setting("equivalence", 0.005, sd, shared), other))
    for shared in (True, False):
        for sd in (0.0078, 0.018):
            out.append((Setting("control", 0.0, sd, shared, corrected=False), other))
    return out


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tunes", type=int, default=20_000, help="A/A tunes a setting")
    ap.add_argument("--other-tunes", type=int, default=5_000, help="tunes of every other setting")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    start = time.monotonic()
    check_light(args.seed)
    plan = settings(args.tunes, args.other_tunes)
    tasks = [(s, args.seed, i, min(CHUNK, n - i * CHUNK)) for s, n in plan for i in range(math.ceil(n / CHUNK))]
    totals: dict[Setting, Counter] = {s: Counter() for s, _ in plan}
    rounds: dict[Setting, int] = {s: 0 for s, _ in plan}
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for s, counts, r in pool.imap_unordered(chunk, tasks):
            totals[s].update(counts)
            rounds[s] += r

    opts = tuning.TuneOptions()
    k = opts.confirm_looks
    alpha_k, conf_k = tuning.ALPHA / k, 1 - (1 - tuning.CONFIDENCE) / k
    print(f"solbench tune's confirmation, simulated: {opts.confirm_rounds} rounds, then one "
          f"at a time while INCONCLUSIVE up to {opts.confirm_max_rounds} (K = {k} looks, each at alpha "
          f"{alpha_k:.5f} and an interval at {conf_k:.4f}); min_gain {opts.min_gain:.0%}")
    print(f"round model: offset sd S a measurement, within-measurement sd {SD_WITHIN:.1%}, "
          f"{N_RANGE[0]}-{N_RANGE[1]} samples a measurement; seed {args.seed}")
    print("gain: hand-picked / winner - 1 (truth); FASTER and SLOWER with Clopper-Pearson 95% intervals")
    print(f"nominal: P(FASTER) <= alpha = {tuning.ALPHA:.0%} and P(SLOWER) <= {tuning.ALPHA:.0%} over all K looks "
          "(the union bound); the control rows test every look at alpha and 95% (K = 1)")
    print()
    head = (f"{'rows':<12} {'gain':>5} {'offsets':<11} {'S':>5} {'tunes':>6}  {'FASTER [95% CI]':<26} "
            f"{'SLOWER [95% CI]':<26} {'SAME':>7} {'INCONCL':>7} {'rounds':>6}")
    print(head)
    print("-" * len(head))
    last = None
    for s, n in plan:
        if last is not None and s.name != last:
            print()
        last = s.name
        c = totals[s]
        cells = []
        for v in ("FASTER", "SLOWER"):
            lo, hi = cp(c[v], n)
            cells.append(f"{pct(c[v] / n):>6} [{pct(lo)}, {pct(hi)}]")
        print(f"{s.name:<12} {s.gain:>5.1%} {'shared' if s.shared else 'independent':<11} {s.sd_offset:>5.2%} "
              f"{n:>6}  {cells[0]:<26} {cells[1]:<26} {pct(c['SAME'] / n):>7} {pct(c['INCONCLUSIVE'] / n):>7} "
              f"{rounds[s] / n:>6.2f}")
    print()
    print(f"{sum(n for _, n in plan)} tunes in {time.monotonic() - start:.0f} s on {args.jobs} processes")


if __name__ == "__main__":
    main()
