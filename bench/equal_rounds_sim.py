"""Coverage of the 95% interval over rounds, and the verdict's wrong decisions, at EQUAL rounds a side
and UNEQUAL spreads, simulated through solbench's own ``compare``.

    PYTHONPATH=. python bench/equal_rounds_sim.py --label after    # rewrites that section of the .txt
    PYTHONPATH=. python bench/equal_rounds_sim.py --quick          # a quarter of the trials, prints only

Options: --label L (the section of bench/equal_rounds_sim.txt to write: the other sections are kept,
so the table of the tree before a change stays beside the one after it), --jobs J (processes, default
2), --seed S (default 0), --quick. The run prints its CPU-seconds: 128-141 for the defaults on the
development machine while it was shared (load 10-25 on 2 cores), about a minute of wall time on 2 free
cores. The table depends on the seed and the counts, not on --jobs (every row has its own seed).

Every trial is one call of the real ``analysis.compare.compare_runs`` (or ``compare_impls``) on
synthetic runs built by ``tests.unit.factories.make_run``; nothing of the statistics is re-implemented
here. The rows read what it returns: the interval ``[ci_low, ci_high]`` (does it hold the true ratio?)
and the verdict.

The measurement model (per case and side): R rounds, each a process with its own offset,

    samples = true_ratio(b only) * 1 ms * exp(offset + eps),   offset ~ N(0, S_side) a round,
    eps ~ N(0, 0.5%) within the round, 9 samples a round,
    S_a = 1%, S_b = k * S_a  (k = the spread ratio: b's rounds spread k times a's)

so a side's log round medians spread by about sqrt(S^2 + 0.2%^2). The paths:

    unmoderated  one case a comparison (``compare_runs``; fewer than MIN_PRIOR_POINTS: no prior).
                 Two separate runs, so never paired: the pooled t on the log round medians.
    moderated    ten cases a comparison (``compare_runs``: the empirical-Bayes prior is fitted over
                 them, analysis.compare.moderate); each case's S_a drawn lognormal around 1% (log-sd 0.3),
                 S_b = k S_a; Benjamini-Hochberg over the ten rows, as compare does.
    paired       two implementations of one run in the same rounds (``compare_impls``), each round's
                 offsets independent between them: paired by round from PAIRED_MIN_ROUNDS (5) rounds
                 on, so only rows of 6 and 10 rounds (below it compare_impls takes the unmoderated rule).

True ratios 1 and 1 +- tau (tau = 5%, compare's default; alpha 0.01, confidence 0.95). Wrong: at a
true 1, SLOWER or FASTER; at 1 + tau, SAME or FASTER; at 1/(1 + tau), SAME or SLOWER. A SAME at a
true ratio on the band's edge needs the interval inside it, so it is wrong at most (1 - c)/2 = 2.5% of
the time if the interval is right; a SLOWER/FASTER at a true 1 needs the two-sided test at alpha.
Rows: 1,200 comparisons (unmoderated), 50 comparisons of ten cases (moderated), 800 (paired). A t
interval covers every true ratio alike, so the summary pools each (R, k)'s three rows: the binomial
standard error of a coverage near 95% is then 0.36 points (unmoderated), 0.56 (moderated; the ten cases
of a comparison share their prior, so a little more) and 0.44 (paired).
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from solbench.analysis.compare import compare_impls, compare_runs
from solbench.analysis.sequential import PAIRED_MIN_ROUNDS
from tests.unit.factories import make_run

TAU = 0.05
S_A = 0.01
SD_WITHIN = 0.005
N_SAMPLES = 9
ROUNDS = (3, 4, 6, 10)
SPREADS = (1, 2, 4, 8)
RATIOS = (1.0, 1.0 + TAU, 1.0 / (1.0 + TAU))
VERDICTS = ("SAME", "SLOWER", "FASTER", "INCONCLUSIVE")
WRONG = {0: ("SLOWER", "FASTER"), 1: ("SAME", "FASTER"), 2: ("SAME", "SLOWER")}
PATHS = ("unmoderated", "moderated", "paired")
CASES_MODERATED = 10
OUT = Path(__file__).with_suffix(".txt")


def _samples(rng: np.random.Generator, rounds: int, sd_round: float, ratio: float) -> list[float]:
    off = rng.normal(0.0, sd_round, rounds)
    eps = rng.normal(0.0, SD_WITHIN, (rounds, N_SAMPLES))
    return list((ratio * 1e-3 * np.exp(off[:, None] + eps)).ravel())


def _trials(path: str) -> int:
    return {"unmoderated": 1200, "moderated": 50, "paired": 800}[path]  # moderated: 10 cases a trial


def row(job: tuple[str, int, int, int, int, float]) -> tuple[str, int, int, int, int, Counter[str], float]:
    """One row: (path, R, k, ratio index, points, counts of each verdict and of "covered", CPU seconds)."""
    path, rounds, k, ri, seed, scale = job
    cpu = time.process_time()
    ratio = RATIOS[ri]
    rng = np.random.default_rng([seed, PATHS.index(path), rounds, k, ri])
    counts: Counter[str] = Counter()
    points = 0
    for _ in range(max(1, round(_trials(path) * scale))):
        if path == "paired":
            xa, xb = _samples(rng, rounds, S_A, 1.0), _samples(rng, rounds, k * S_A, ratio)
            rows = compare_impls(make_run({"c": {"a": xa, "b": xb}}, rounds=rounds), "a", "b").rows
        else:
            cases = CASES_MODERATED if path == "moderated" else 1
            sd = S_A * np.exp(rng.normal(0.0, 0.3, cases)) if path == "moderated" else np.full(1, S_A)
            a = {f"c{i}": {"x": _samples(rng, rounds, sd[i], 1.0)} for i in range(cases)}
            b = {f"c{i}": {"x": _samples(rng, rounds, k * sd[i], ratio)} for i in range(cases)}
            rows = compare_runs(make_run(a, rounds=rounds), make_run(b, rounds=rounds), threshold=TAU).rows
        for r in rows:
            assert r.ci_low is not None and r.ci_high is not None
            counts[r.verdict] += 1
            counts["covered"] += r.ci_low <= ratio <= r.ci_high
            counts["above"] += r.ci_low > ratio  # the interval misses the truth on its upper side
            points += 1
    return path, rounds, k, ri, points, counts, time.process_time() - cpu


def table(results: list[tuple[str, int, int, int, int, Counter[str], float]]) -> list[str]:
    """The summary (coverage over the three true ratios, which a t interval covers alike; false claims
    at a true 1; wrong verdicts at 1 +- tau), then every row."""
    by = {(p, r, k, ri): (n, c) for p, r, k, ri, n, c, _ in results}
    lines = ["coverage of the 95% interval (the three true ratios together), by R (rows) and spread ratio k (columns):"]
    for path in PATHS:
        rounds = sorted({r for p, r, *_ in results if p == path})
        lines.append(f"  {path:12s} " + " ".join(f"{'k=' + str(k):>8s}" for k in SPREADS))
        for r in rounds:
            cells = []
            for k in SPREADS:
                n = sum(by[path, r, k, ri][0] for ri in range(3))
                cells.append(f"{sum(by[path, r, k, ri][1]['covered'] for ri in range(3)) / n:8.2%}")
            lines.append(f"  {'R=' + str(r):>12s} " + " ".join(cells))
    lines.append("")
    lines.append("false SLOWER or FASTER at a true 1 (alpha 0.01), by R and k; "
                 "then the largest wrong share at 1 +- tau:")
    for path in PATHS:
        rounds = sorted({r for p, r, *_ in results if p == path})
        lines.append(f"  {path:12s} " + " ".join(f"{'k=' + str(k):>8s}" for k in SPREADS) + f" {'1+-tau':>8s}")
        for r in rounds:
            false = [(by[path, r, k, 0][1]["SLOWER"] + by[path, r, k, 0][1]["FASTER"]) / by[path, r, k, 0][0]
                     for k in SPREADS]
            edge = max(sum(by[path, r, k, ri][1][v] for v in WRONG[ri]) / by[path, r, k, ri][0]
                       for k in SPREADS for ri in (1, 2))
            lines.append(f"  {'R=' + str(r):>12s} " + " ".join(f"{f:8.2%}" for f in false) + f" {edge:8.2%}")
    lines.append("")
    head = (f"{'path':12s} {'R':>3s} {'k':>2s} {'ratio':>6s} {'points':>6s} {'cover':>7s} {'lo>x':>6s} {'hi<x':>6s}  "
            + " ".join(f"{v[:6]:>7s}" for v in VERDICTS) + f" {'wrong':>7s}")
    lines += [head, "-" * len(head)]
    last = None
    for path, rounds, k, ri, n, c, _ in results:
        if last is not None and (path, rounds) != last:
            lines.append("")
        last = (path, rounds)
        wrong = sum(c[v] for v in WRONG[ri]) / n
        lines.append(f"{path:12s} {rounds:3d} {k:2d} {RATIOS[ri]:6.4f} {n:6d} {c['covered'] / n:7.2%} "
                     f"{c['above'] / n:6.2%} {(n - c['covered'] - c['above']) / n:6.2%}  "
                     + " ".join(f"{c[v] / n:7.2%}" for v in VERDICTS) + f" {wrong:7.2%}")
    return lines


def _tree() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "solbench"], capture_output=True, text=True,
                               cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown tree"
    return f"tree {head}" + (" with uncommitted changes to solbench/" if dirty else "")


def write_section(label: str, body: list[str]) -> None:
    """Replace (or add) the section ``label`` of OUT, keeping the others in order."""
    head = [
        "Coverage of compare's 95% interval over rounds and its wrong verdicts, equal rounds a side, unequal spreads",
        "(bench/equal_rounds_sim.py: the model, the paths and what is counted are in its docstring)",
        f"S_a = {S_A:.0%} between rounds, S_b = k S_a; within-round sd {SD_WITHIN:.1%}, {N_SAMPLES} samples a round; "
        f"tau = {TAU:.0%}, alpha 0.01",
        "cover: the interval holds the true ratio (nominal 95%); "
        "lo>x / hi<x: the miss on each side (nominal 2.5% each)",
        "wrong: at a true 1, SLOWER or FASTER; at 1 + tau, SAME or FASTER; at 1/(1 + tau), SAME or SLOWER",
        "",
    ]
    text = OUT.read_text() if OUT.exists() else ""
    sections = re.split(r"^(?==== )", text, flags=re.M)
    kept = [s for s in sections[1:] if not s.startswith(f"=== {label}:")]
    new = f"=== {label}: {_tree()} ===\n" + "\n".join(body) + "\n\n"
    order = {"before": 0, "after": 1}
    every = sorted([*kept, new], key=lambda s: order.get(s[4:].split(":", 1)[0], 2))
    OUT.write_text("\n".join(head) + "\n" + "".join(every))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    scale = 0.25 if args.quick else 1.0
    jobs = [(p, r, k, ri, args.seed, scale) for p in PATHS for r in ROUNDS for k in SPREADS for ri in range(3)
            if p != "paired" or r >= PAIRED_MIN_ROUNDS]  # below it compare_impls pools: the unmoderated rows
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        results = pool.map(row, jobs, chunksize=1)
    body = table(results)
    quick = ", --quick" if args.quick else ""
    body.append(f"({sum(r[4] for r in results)} points, {sum(r[6] for r in results):.0f} CPU-seconds, "
                f"{time.perf_counter() - start:.0f} s with {args.jobs} jobs; seed {args.seed}{quick})")
    print("\n".join(body))
    if args.label and not args.quick:
        write_section(args.label, body)
    elif args.label:
        sys.exit("--quick does not write the table")


if __name__ == "__main__":
    main()
