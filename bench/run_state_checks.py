"""What the saved o_proj runs of sessions 20 and 21 say about the state that rounds do not sample
(BENCHMARKS.md, issue 16, twenty-first session). CPU only; reads results/h200/issue16/.

    PYTHONPATH=. python3 bench/run_state_checks.py

Sections: the kernels each point ran, clocks and power against round medians, serial correlation of
round medians, a trend inside rounds, run deviations shared within a case, how many points a
simulation of independent rounds flags above 0.5% sd_extra (bench/between_runs.py's statistic),
card to card, the spread of three runs per kind in session 21's calls 1-2, and per final-tree run the
workers its rounds need and its median point's rounds and spread.
"""

from __future__ import annotations

import glob
import gzip
import itertools
import json
from collections import Counter, defaultdict

import numpy as np
from between_runs import is_decode  # bench/ is on the path when this runs as a script

from solbench.analysis.allocation import rounds_for_half_width

ROOT = "results/h200/issue16/"
S20 = [f for f in sorted(glob.glob(ROOT + "session20/call[124]/*.json.gz")) if "own8" not in f and "gated" not in f]
S21_CALL1 = sorted(glob.glob(ROOT + "session21/call1/*.json.gz"))
FINAL = sorted(glob.glob(ROOT + "session21/call3/*.json.gz") + glob.glob(ROOT + "session21/call4/*.json.gz"))


def read(path: str) -> dict:
    return json.load(gzip.open(path))


def gated(run: dict):
    """(case, impl, timing, protocol) of every ok o_proj point that is gated (the byte floor left out)."""
    for c in run["cases"]:
        for i in c["impls"]:
            t = i.get("timing")
            if c["workload"] == "o_proj" and i["status"] == "ok" and t and not i["protocol"].get("part"):
                yield c["case_id"], i["name"], t, i["protocol"]


def round_medians(t: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each round's median log time, and each sample's log time, grouped by round."""
    s, r = np.log(np.array(t["samples"])), np.array(t["rounds"])
    return np.array([np.median(s[r == k]) for k in range(r.max() + 1)]), s


def kernels() -> None:
    files = sorted(glob.glob(ROOT + "session21/call*/*.json.gz"))
    files += sorted(glob.glob(ROOT + "session20/call[124]/*.json.gz"))
    sets: dict = defaultdict(Counter)
    cards, runs = set(), 0
    for f in files:
        run = read(f)
        runs += 1
        cards.add(run["environment"]["device_uuid"])
        for case, impl, _, protocol in gated(run):
            sets[(case, impl)][protocol.get("kernels", "")] += 1
    print(f"kernels: {runs} runs, {len(cards)} cards, {len(sets)} points, "
          f"{sum(len(v) > 1 for v in sets.values())} with more than one kernel set")


def clocks_and_rounds() -> None:
    clocks, samples, reasons, power_corr, lag1, expected = set(), 0, 0, [], [], []
    for f in S21_CALL1:
        for _, _, t, _ in gated(read(f)):
            samples += len(t["samples"])
            clocks.update(x for x in t["sm_clock_mhz"] if x is not None)
            reasons += sum(1 for x in t["throttle_reasons"] if x)
            med, _ = round_medians(t)
            if med.size < 6:
                continue
            r = np.array(t["rounds"])
            power = np.array([x if x is not None else np.nan for x in t["power_w"]], float)
            per_round = np.array([np.nanmedian(power[r == k]) for k in range(med.size)])
            if np.std(per_round) > 0:
                power_corr.append(np.corrcoef(per_round, med)[0, 1])
            x = med - med.mean()
            lag1.append((x[1:] * x[:-1]).sum() / (x * x).sum())
            expected.append(-1 / med.size)
    print(f"clocks (session 21 call 1): SM clocks seen {sorted(clocks)}, {samples} samples, {reasons} with a "
          f"clock-event reason; corr(round power, round median) {np.mean(power_corr):.3f} "
          f"(se {np.std(power_corr) / np.sqrt(len(power_corr)):.3f}, {len(power_corr)} points with 6+ rounds)")
    print(f"lag-1 autocorrelation of round medians {np.mean(lag1):.3f} (se {np.std(lag1) / np.sqrt(len(lag1)):.3f}); "
          f"independent rounds {np.mean(expected):.3f}")


def trend_in_rounds() -> None:
    diffs = []
    for f in FINAL:
        for case, _, t, _ in gated(read(f)):
            if not is_decode(case):
                continue
            s, r = np.log(np.array(t["samples"])), np.array(t["rounds"])
            for k in range(r.max() + 1):
                x = s[r == k]
                if len(x) >= 12:
                    diffs.append(np.median(x[: len(x) // 2]) - np.median(x[len(x) // 2:]))
    print(f"trend inside rounds (final tree, {len(diffs)} decode rounds of 12+ samples): first half - second "
          f"half {100 * np.mean(diffs):+.3f}% (se {100 * np.std(diffs) / np.sqrt(len(diffs)):.3f}%)")


def medians_of(files: list[str]) -> list[dict]:
    return [{(case, impl): float(np.log(t["median"])) for case, impl, t, _ in gated(read(f))} for f in files]


def shared_per_case() -> None:
    for label, files in (("final tree, 6 runs", FINAL), ("session 20, 7 runs", S20)):
        runs = medians_of(files)
        keys = sorted(k for k in set.intersection(*[set(r) for r in runs]) if is_decode(k[0]))
        dev = {k: np.array([r[k] for r in runs]) for k in keys}
        dev = {k: v - np.median(v) for k, v in dev.items()}
        same, other = [], []
        for a, b in itertools.combinations(keys, 2):
            if np.std(dev[a]) and np.std(dev[b]):
                (same if a[0] == b[0] else other).append(np.corrcoef(dev[a], dev[b])[0, 1])
        print(f"run deviations of decode points ({label}): correlation within a case {np.mean(same):.3f}, "
              f"across cases {np.mean(other):.3f}")


def chance(trials: int = 20) -> None:
    sd: dict = defaultdict(list)
    for f in S21_CALL1:
        if "default" in f:
            for case, impl, t, _ in gated(read(f)):
                sd[(case, impl)].append(np.std(round_medians(t)[0], ddof=1))
    sig = np.array([np.median(v) for v in sd.values()])
    rng = np.random.default_rng(1)

    def one_run(s: float) -> tuple[float, float]:
        x = list(rng.normal(0, s, 3))
        while len(x) < 16:
            need = rounds_for_half_width(np.var(x, ddof=1), 0.01, cap=16, min_rounds=len(x))
            if need <= len(x):
                break
            x += list(rng.normal(0, s, min(need - len(x), 4)))
        a = np.array(x)
        return a.mean(), np.var(a, ddof=1) / a.size

    for runs in (3, 7):
        counts = []
        for _ in range(trials):
            flagged = 0
            for s in sig:
                res = [one_run(s) for _ in range(runs)]
                m = np.array([a for a, _ in res])
                flagged += np.sqrt(max(0.0, np.var(m, ddof=1) - np.mean([b for _, b in res]))) > 0.005
            counts.append(flagged)
        print(f"independent rounds, {runs} runs: {np.mean(counts):.1f} of {sig.size} points flagged above 0.5% "
              f"sd_extra (range {min(counts)}-{max(counts)}, {trials} trials)")


def card_to_card() -> None:
    sets = {"0f69b959": S20, "095239e1": [f for f in S21_CALL1 if "default" in f],
            "08f4babe": sorted(glob.glob(ROOT + "session21/call2/*.json.gz")), "595efd22": FINAL}
    meds = {}
    for card, files in sets.items():
        runs = medians_of(files)
        meds[card] = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
    for a, b in itertools.combinations(meds, 2):
        keys = set(meds[a]) & set(meds[b])
        line = []
        for label, short in (("prefill", False), ("decode", True)):
            d = 100 * np.array([meds[b][k] - meds[a][k] for k in keys if is_decode(k[0]) == short])
            line.append(f"{label} median {np.median(d):+.2f}% [{d.min():+.2f}, {d.max():+.2f}]")
        print(f"card {b} / {a}: " + "; ".join(line))


def workers() -> None:
    """Per final-tree run: the workers its rounds need at least (over implementations, the most rounds of
    any case, the floor included), and the median point's rounds and between-round spread."""
    for f in FINAL:
        run = read(f)
        deepest: dict = defaultdict(int)
        for c in run["cases"]:
            for i in c["impls"]:
                if i["status"] == "ok" and i.get("timing"):
                    deepest[i["name"]] = max(deepest[i["name"]], max(i["timing"]["rounds"]) + 1)
        points = [round_medians(t)[0] for _, _, t, _ in gated(run)]
        print(f"{f.split('session21/')[1]}: at least {sum(deepest.values())} workers; median point "
              f"{np.median([m.size for m in points]):.1f} rounds, sd of a round "
              f"{100 * np.median([np.std(m, ddof=1) for m in points]):.2f}%")


def spreads() -> None:
    for kind, files in (("default", [f for f in S21_CALL1 if "default" in f]),
                        ("fresh", [f for f in S21_CALL1 if "fresh" in f]),
                        ("--target 0.005", sorted(glob.glob(ROOT + "session21/call2/*.json.gz")))):
        runs = medians_of(files)
        keys = set.intersection(*[set(r) for r in runs])
        sp = np.array([np.exp(max(r[k] for r in runs) - min(r[k] for r in runs)) - 1 for k in keys])
        print(f"spread of 3 runs (max/min - 1, {kind}): median {100 * np.median(sp):.2f}%, max {100 * sp.max():.2f}%")


if __name__ == "__main__":
    kernels()
    clocks_and_rounds()
    trend_in_rounds()
    shared_per_case()
    chance()
    card_to_card()
    spreads()
    workers()
