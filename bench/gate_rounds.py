"""How many rounds a gate between two runs of the same code needs, from the spreads an H200 showed.

Usage: python bench/gate_rounds.py RUN.json [RUN.json ...] [--trials N] [--points-from RUN.json]

From the given runs (3 or more rounds each, same workload), each point's spread of log round
medians is estimated within each run and pooled over the runs (``s_g``, with its degrees of
freedom). A check of that model first: the difference of two runs' mean log round medians,
divided by what the within-run spread predicts for it (``s_g sqrt(1/R_1 + 1/R_2)``), should have
sd 1 when runs differ by nothing but their rounds; above 1, runs carry an offset of their own
that no number of rounds in one run removes.

Then, with true ratio 1 at every point (the same code twice) and each round's log median drawn
from N(0, s_g^2), it applies the gate's own rule (``analysis.sequential``: pooled t, the moderated
prior over all points, ``gate_codes``; threshold 5%, alpha 1%, 95%) and counts per gate:

  fixed R        both runs measured R rounds (``run --repeat R``), gated once;
  adaptive       both runs 3 rounds, then rounds added to the points whose interval over rounds is
                 wider than +-target, up to a cap (``run --max-rounds C --rounds-target T``);
  rerun K        the baseline run 3 rounds; the current run 3 rounds, then one more round for the
                 points still undecided, up to K more (``run --gate-against --rerun K``; the error
                 rates split over the K + 1 looks).

Nothing is timed here: the cost is counted in rounds of points (one point, one round: about
0.17 s of harness on the H200 for o_proj, BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from solbench.analysis import sequential as seq
from solbench.analysis.allocation import rounds_for_half_width

TAU, ALPHA, CONF = 0.05, 0.01, 0.95


def round_logs(path: str) -> dict[str, np.ndarray]:
    """point key -> log round medians of that run (points with ok timings and >= 2 rounds)."""
    with open(path) as f:
        run = json.load(f)
    out = {}
    for case in run["cases"]:
        for impl in case["impls"]:
            t = impl.get("timing")
            if impl["status"] != "ok" or not t or not t.get("rounds"):
                continue
            s, r = np.asarray(t["samples"]), np.asarray(t["rounds"])
            meds = [np.median(s[r == k]) for k in sorted(set(r.tolist()))]
            if len(meds) >= 2:
                out[f"{case['case_id']}/{impl['name']}"] = np.log(meds)
    return out


def pooled_sd(runs: list[dict[str, np.ndarray]]) -> dict[str, tuple[float, int]]:
    """point -> (pooled within-run sd of log round medians, its degrees of freedom)."""
    keys = set.intersection(*(set(r) for r in runs))
    out = {}
    for k in sorted(keys):
        ss = sum(float(((r[k] - r[k].mean()) ** 2).sum()) for r in runs)
        df = sum(r[k].size - 1 for r in runs)
        out[k] = (math.sqrt(ss / df), df)
    return out


def adaptive(s: np.ndarray, target: float, cap: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One run of ``run --max-rounds cap --rounds-target target``: 3 rounds, then a round more for
    each point whose interval over its rounds is still wider than +-target (``allocation.rounds_needed``,
    the spread of its round medians standing for sigma_b^2 + V_w / n), until none is or ``cap``."""
    out = []
    for x in s:
        logs = list(rng.normal(0.0, x, 3))
        while len(logs) < cap and rounds_for_half_width(float(np.var(logs, ddof=1)), target,
                                                         cap=cap) > len(logs):
            logs.append(float(rng.normal(0.0, x)))
        out.append(np.asarray(logs))
    return out


def adaptive_gates(s: np.ndarray, target: float, cap: int, trials: int, rng: np.random.Generator,
                   ratio: float = 1.0, confidence: float = CONF) -> tuple[np.ndarray, ...]:
    """(undecided, regressions, passes, current run's point-rounds) per gate over ``trials`` gates of
    two ``adaptive`` runs, the current one slower by ``ratio`` at every point."""
    und, reg, passed, cost = (np.zeros(trials) for _ in range(4))
    for t in range(trials):
        a = adaptive(s, target, cap, rng)
        b = [x + math.log(ratio) for x in adaptive(s, target, cap, rng)]
        c = codes(a, b, confidence=confidence)
        und[t], reg[t], passed[t] = (c == seq.UNDECIDED).sum(), (c == seq.REGRESSION).sum(), (c == seq.PASS).sum()
        cost[t] = sum(x.size for x in b)
    return und, reg, passed, cost


def codes(a: list[np.ndarray], b: list[np.ndarray], looks: int = 1, confidence: float = CONF) -> np.ndarray:
    """The gate's codes per point: log round medians ``a[g]`` (baseline) and ``b[g]`` (current),
    each point with its own number of rounds; pooled t, the moderated prior fitted over all points
    as the gate fits it (none below ``MIN_PRIOR_POINTS``), the error rates split over ``looks``."""
    d = np.array([y.mean() - x.mean() for x, y in zip(a, b, strict=True)])
    ss = np.array([((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum() for x, y in zip(a, b, strict=True)])
    df = np.array([x.size + y.size - 2 for x, y in zip(a, b, strict=True)], float)
    k = np.array([math.sqrt(1 / x.size + 1 / y.size) for x, y in zip(a, b, strict=True)])
    sd = np.sqrt(ss / df)
    prior = seq.variance_prior((sd ** 2).tolist(), df.tolist())
    if prior is not None:
        sd, df = np.sqrt((prior.df * prior.var + df * sd ** 2) / (prior.df + df)), df + prior.df
    return seq.gate_codes(d, sd * k, df, TAU, alpha=ALPHA, confidence=confidence, looks=looks)


def run_offsets(runs: list[dict[str, np.ndarray]], sd: dict[str, tuple[float, int]]) -> np.ndarray:
    """(mean_i - mean_j) / (s_g sqrt(1/R_i + 1/R_j)) over every pair of runs and point."""
    z = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            for k, (s, _) in sd.items():
                a, b = runs[i][k], runs[j][k]
                if s > 0:
                    z.append((a.mean() - b.mean()) / (s * math.sqrt(1 / a.size + 1 / b.size)))
    return np.asarray(z)


def fixed(s: np.ndarray, rounds: int, trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(undecided per gate, regressions per gate) over ``trials`` gates of two R-round runs."""
    und, reg = np.zeros(trials, int), np.zeros(trials, int)
    for t in range(trials):
        la = rng.normal(0.0, s[:, None], (s.size, rounds))
        lb = rng.normal(0.0, s[:, None], (s.size, rounds))
        c = codes(list(la), list(lb))
        und[t], reg[t] = int((c == seq.UNDECIDED).sum()), int((c == seq.REGRESSION).sum())
    return und, reg


def rerun(s: np.ndarray, more: int, trials: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(undecided, regressions, rounds added) per gate: ``run --gate-against --rerun more``.

    Each look gates every point (its rounds so far against the baseline's three), the prior fitted
    over all of them as the gate refits it; a point keeps the verdict of the look that decided it."""
    und, reg, added = np.zeros(trials, int), np.zeros(trials, int), np.zeros(trials, int)
    looks = more + 1
    for t in range(trials):
        la = rng.normal(0.0, s[:, None], (s.size, 3))
        cur = [list(rng.normal(0.0, x, 3)) for x in s]
        final = np.full(s.size, seq.UNDECIDED)
        pending = np.arange(s.size)
        for look in range(looks):
            # one look: every point's current rounds against the baseline's three
            now = codes(list(la), [np.asarray(c) for c in cur], looks)
            for g in pending:
                final[g] = now[g]
            pending = np.array([g for g in pending if now[g] == seq.UNDECIDED], int)
            if look == looks - 1 or pending.size == 0:
                break
            for g in pending:
                cur[g].append(float(rng.normal(0.0, s[g])))
                added[t] += 1
        und[t] = int((final == seq.UNDECIDED).sum())
        reg[t] = int((final == seq.REGRESSION).sum())
    return und, reg, added


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--default-only", action="store_true",
                    help="only the default protocol (3 rounds, then up to 8 at +-1.5%%), at two interval "
                         "levels and at true ratios 1 and 1 + threshold")
    args = ap.parse_args()
    runs = [round_logs(p) for p in args.runs]
    sd = pooled_sd(runs)
    s = np.array([v[0] for v in sd.values()])
    z = run_offsets(runs, sd)
    print(f"{len(sd)} points, {len(runs)} runs; pooled between-round sd of log round medians: "
          f"median {np.median(s):.2%}, p90 {np.percentile(s, 90):.2%}, max {s.max():.2%}")
    df = int(np.median([v[1] for v in sd.values()]))
    expect = math.sqrt(df / (df - 2)) if df > 2 else float("inf")
    print(f"run-to-run check: sd of the standardized differences of run means {z.std(ddof=1):.2f} over "
          f"{z.size} (runs that differ only by their rounds: {expect:.2f}, a t with {df} df)")
    rng = np.random.default_rng(args.seed)
    if args.default_only:
        default_levels(s, args.trials, rng)
        return
    print(f"\n{args.trials} simulated gates each, true ratio 1, threshold {TAU:.0%}, alpha {ALPHA}:")
    print("| protocol | undecided per gate (mean) | gates with <= 2 undecided | gates that exit 0 "
          "| regressions per gate (mean) | point-rounds per run |")
    print("|---|---|---|---|---|---|")
    for r in (3, 4, 5, 6, 8):
        und, reg = fixed(s, r, args.trials, rng)
        print(f"| both runs {r} rounds | {und.mean():.2f} | {(und <= 2).mean():.1%} "
              f"| {((und == 0) & (reg == 0)).mean():.1%} | {reg.mean():.3f} | {r * s.size} |")
    for target, cap in ((0.02, 6), (0.02, 8), (0.015, 8), (0.01, 8), (0.01, 12), (0.0075, 16)):
        und, reg, _, cost = adaptive_gates(s, target, cap, args.trials, rng)
        print(f"| both runs 3 rounds, then `--max-rounds {cap} --rounds-target {target:.2%}` | {und.mean():.2f} "
              f"| {(und <= 2).mean():.1%} | {((und == 0) & (reg == 0)).mean():.1%} | {reg.mean():.3f} "
              f"| {cost.mean():.0f} |")
    for k in (3, 6, 10):
        und, reg, added = rerun(s, k, args.trials, rng)
        print(f"| 3 rounds, then `--gate-against --rerun {k}` | {und.mean():.2f} | {(und <= 2).mean():.1%} "
              f"| {((und == 0) & (reg == 0)).mean():.1%} | {reg.mean():.3f} | {3 * s.size} + {added.mean():.1f} |")


def default_levels(s: np.ndarray, trials: int, rng: np.random.Generator) -> None:
    """The default protocol's gates at the gate's two-sided 95% interval and at a 90% one (whose upper
    end is a one-sided 95% bound: PASS then allows a 5% chance, not 2.5%, of passing a point that is
    exactly at the threshold), with the same code on both sides and with every point slower by tau."""
    print(f"\n{trials} simulated gates each, the default protocol on both runs (3 rounds, then up to 8 "
          f"at +-1.5%), threshold {TAU:.0%}, alpha {ALPHA}:")
    print("| interval | true ratio | undecided per gate | gates that exit 0 | PASS per point | REGRESSION per point |")
    print("|---|---|---|---|---|---|")
    for confidence in (0.95, 0.90):
        for ratio in (1.0, 1 + TAU):
            und, reg, passed, _ = adaptive_gates(s, 0.015, 8, trials, rng, ratio, confidence)
            clean = ((und == 0) & (reg == 0)).mean()
            print(f"| {confidence:.0%} two-sided | {ratio:.2f} | {und.mean():.2f} | {clean:.1%} "
                  f"| {passed.mean() / s.size:.3f} | {reg.mean() / s.size:.3f} |")


if __name__ == "__main__":
    main()
