"""Issue 8's "Done when" table from result JSONs, on the CPU (no GPU, no measuring).

    PYTHONPATH=. python3 bench/repeat_table.py DIR

DIR holds what bench/repeat_session.sh wrote: oproj-1.json .. oproj-5.json (five separate
`solbench run workloads/attn.yaml bench/data/oproj_slow.yaml -w o_proj -w o_proj_slow`), and
optionally semantics.json (bench/timer_semantics.py), cupti.json (a --timer cupti run) and ab.txt
(the exit codes of the two `solbench ab` runs). Prints, for the o_proj points:

  spread     per point, max/min of the five run medians; the median over points and the maximum
  coverage   per run, the share of points whose 95% CI holds the five-run grand median
  gate       solbench.analysis.gate over the 20 ordered pairs of runs: verdict counts
  slowdown   o_proj_slow (torch.addmm + 10% spin) of run j gated against o_proj/cublas_addmm of run
             i != j (5 pairs): caught as REGRESSION?; and the injected ratio inside each run
  evidence   between-round spread inside a run, per-input-set medians, clocks per round
Writes DIR/table.json too.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from solbench.analysis.gate import gate
from solbench.results.model import RunResult
from solbench.results.store import load

RUNS = 5


def only(run: RunResult, workload: str, rename: str | None = None, impl: str | None = None) -> RunResult:
    """The cases of one workload (optionally renamed, and only one implementation)."""
    cases = []
    for c in run.cases:
        if c.workload != workload:
            continue
        impls = tuple(r for r in c.impls if impl is None or r.name == impl)
        if rename is not None:
            c = replace(c, workload=rename, case_id=c.case_id.replace(workload + "[", rename + "[", 1))
        cases.append(replace(c, impls=impls))
    return replace(run, cases=tuple(cases))


def points(run: RunResult, workload: str = "o_proj") -> dict[str, object]:
    return {f"{c.case_id}/{r.name}": r for c in run.cases if c.workload == workload for r in c.impls
            if r.status == "ok" and r.timing is not None}


def spread_and_coverage(runs: list[RunResult]) -> dict:
    per = [points(r) for r in runs]
    keys = sorted(set.intersection(*(set(p) for p in per)))
    spreads, covered = {}, [0] * len(runs)
    for k in keys:
        meds = [p[k].timing.median for p in per]
        spreads[k] = max(meds) / min(meds) - 1
        grand = statistics.median(meds)
        for i, p in enumerate(per):
            t = p[k].timing
            covered[i] += t.ci_low <= grand <= t.ci_high
    worst = max(spreads, key=spreads.get) if spreads else None
    return {"points": len(keys), "median_spread": statistics.median(spreads.values()) if spreads else None,
            "max_spread": spreads.get(worst) if worst else None, "max_spread_point": worst,
            "within_1pct": sum(v <= 0.01 for v in spreads.values()),
            "coverage_per_run": [c / len(keys) for c in covered] if keys else [],
            "spread_per_point": spreads}


def gates(runs: list[RunResult]) -> dict:
    counts: dict[str, int] = {}
    overall: dict[str, int] = {}
    for i, a in enumerate(runs):
        for j, b in enumerate(runs):
            if i == j:
                continue
            res = gate(only(a, "o_proj"), only(b, "o_proj"))
            overall[res.overall] = overall.get(res.overall, 0) + 1
            for v in res.verdicts:
                counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return {"pairs": len(runs) * (len(runs) - 1), "overall": overall, "per_point": counts}


def slowdown(runs: list[RunResult]) -> dict:
    out = []
    for i in range(len(runs)):
        j = (i + 1) % len(runs)
        slow_keys = {c.case_id.replace("o_proj_slow[", "o_proj[", 1) for c in runs[j].cases
                     if c.workload == "o_proj_slow"}
        base = only(runs[i], "o_proj", impl="cublas_addmm")
        base = replace(base, cases=tuple(c for c in base.cases if c.case_id in slow_keys))
        cur = only(runs[j], "o_proj_slow", rename="o_proj")
        res = gate(base, cur)
        out.append({"base": i + 1, "current": j + 1, "overall": res.overall,
                    "verdicts": {v.key: [v.verdict, round(v.ratio or 0, 4)] for v in res.verdicts}})
    inside = []
    for run in runs:
        p, s = points(run), points(run, "o_proj_slow")
        for k, r in s.items():
            base = p.get(k.replace("o_proj_slow[", "o_proj[", 1))
            if base is not None:
                inside.append(round(r.timing.median / base.timing.median, 4))
    caught = sum(g["overall"] == "REGRESSION" and all(v[0] == "REGRESSION" for v in g["verdicts"].values())
                 for g in out)
    return {"gates": out, "caught": caught, "injected_ratio_inside_runs": inside}


def evidence(runs: list[RunResult]) -> dict:
    """Where the spread comes from: rounds inside a run, input sets inside a round, clocks."""
    round_spread, set_diff, clocks = [], [], {}
    for run in runs:
        for k, r in points(run).items():
            t = r.timing
            labels = t.rounds or (0,) * t.n
            groups: dict[int, list[int]] = {}
            for idx, lab in enumerate(labels):
                groups.setdefault(lab, []).append(idx)
            meds = [statistics.median(t.samples[i] for i in idx) for idx in groups.values()]
            round_spread.append(max(meds) / min(meds) - 1)
            for idx in groups.values():  # sample n of a round used input set n % 2
                even = [t.samples[i] for n, i in enumerate(idx) if n % 2 == 0]
                odd = [t.samples[i] for n, i in enumerate(idx) if n % 2 == 1]
                if even and odd:
                    set_diff.append(abs(statistics.median(even) / statistics.median(odd) - 1))
            if t.sm_clock_mhz and "16384" in k:
                sm = [c for c in t.sm_clock_mhz if c is not None]
                if sm:
                    clocks.setdefault(k, []).append((min(sm), max(sm)))
    q = statistics.quantiles
    return {"round_spread_median": statistics.median(round_spread), "round_spread_p90": q(round_spread, n=10)[-1],
            "input_set_diff_median": statistics.median(set_diff), "input_set_diff_p90": q(set_diff, n=10)[-1],
            "sm_clock_range_16384": clocks}


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = [d / f"oproj-{k}.json" for k in range(1, RUNS + 1)]
    runs = [load(f) for f in files if f.is_file()]
    table: dict = {"runs": len(runs)}
    if len(runs) >= 2:
        table["spread"] = spread_and_coverage(runs)
        table["gate"] = gates(runs)
        table["slowdown"] = slowdown(runs)
        table["evidence"] = evidence(runs)
    if (d / "cupti.json").is_file() and runs:
        cup = points(load(d / "cupti.json"))
        per = [points(r) for r in runs]
        table["cupti_vs_cold_runs"] = {k: round(cup[k].timing.median / statistics.median(
            p[k].timing.median for p in per if k in p), 4) for k in cup if all(k in p for p in per)}
    if (d / "semantics.json").is_file():
        table["semantics"] = json.loads((d / "semantics.json").read_text())
    if (d / "ab.txt").is_file():
        table["ab"] = (d / "ab.txt").read_text().split()
    (d / "table.json").write_text(json.dumps(table, indent=1, default=str))
    show(table)


def show(t: dict) -> None:
    print(f"runs: {t['runs']}")
    s = t.get("spread")
    if s:
        print(f"o_proj points: {s['points']}; median spread {s['median_spread']:.2%}, max {s['max_spread']:.2%} "
              f"({s['max_spread_point']}); within 1%: {s['within_1pct']}")
        print("CI holds the grand median: " + ", ".join(f"{c:.0%}" for c in s["coverage_per_run"]))
    g = t.get("gate")
    if g:
        print(f"gate, {g['pairs']} ordered pairs: overall {g['overall']}; per point {g['per_point']}")
    sl = t.get("slowdown")
    if sl:
        print(f"slowdown caught in {sl['caught']} of {len(sl['gates'])} cross-run gates; injected ratio inside runs "
              f"{sl['injected_ratio_inside_runs']}")
    e = t.get("evidence")
    if e:
        print(f"between rounds of a run: median spread {e['round_spread_median']:.2%} "
              f"(p90 {e['round_spread_p90']:.2%}); input sets inside a round differ by "
              f"{e['input_set_diff_median']:.2%} (p90 {e['input_set_diff_p90']:.2%})")
    if "cupti_vs_cold_runs" in t:
        print("cupti run / five cold runs' grand median: " + json.dumps(t["cupti_vs_cold_runs"]))
    if "ab" in t:
        print("ab exit codes (identical, slowed): " + " ".join(t["ab"]))


if __name__ == "__main__":
    main()
