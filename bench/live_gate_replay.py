"""Replay ``run --gate-against`` on recorded runs of one tree: how often does the live gate end
INCONCLUSIVE, and how does it treat a slowdown, under each way of spending its error over looks?

    PYTHONPATH=. python3 bench/live_gate_replay.py RUN.json[.gz] ... [--spend equal,0.6] [--slow 1.0,1.05,1.1]
                                                   [--base-rounds 0,6] [--run-sd 0,0.003] [--rerun 8] [--reps 2]
                                                   [--seed 5]

Every ordered pair (i, j) of the given runs is one invocation: run i is the saved baseline and run j
the current run just measured. The live gate (``analysis.gate.gate_with_rerun``, four rounds a look
as ``execute.run.gate_live`` gives a run in rounds) re-measures the keys it has not decided; each
re-measured round is a round of that key drawn, without replacement, from the runs other than i and
j (shuffled, ``--reps`` shuffles a pair). ``--slow F`` multiplies every sample of the current side,
re-measured rounds included, by F for one implementation (``--impl``, default ``cublas_addmm``):
the truth is then F for its points and 1 for every other. Per spending rule and F: invocations by
overall verdict, and the slowed points' verdicts.

``--spend``: ``equal`` is the gate's own rule (``analysis.sequential.look_levels``: the error split
evenly over the K looks); a number s gives the first look the share s and the later looks
(1 - s) / (K - 1) each, by standing in for ``look_levels`` with the look counted here.

``--base-rounds N`` (0: as recorded): every point of the baseline is first deepened to N rounds with
rounds drawn from the same pool (so they are not drawn again), as if the baseline run had been
measured with ``--repeat N``; a point that already has N rounds or more keeps its own.

``--run-sd S``: the gate's between-run term (``gate(run_sd=S)``, analysis.gate "Between runs"): every
pooled estimate over rounds gets ``se**2 + 2 S**2`` after moderation, one offset a side. 0 is the gate
without it; ``run --gate-against`` uses DEFAULT_RUN_SD (0.2%).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
from loop_replay import pooled, rounds_of

from solbench.analysis import gate as gate_mod
from solbench.analysis.pooling import merge_rounds
from solbench.results import store
from solbench.results.model import ImplResult, RunResult, Timing


def one_round(samples: tuple[float, ...]) -> Timing:
    m = statistics.median(samples)
    return Timing(samples=samples, median=m, ci_low=m, ci_high=m, stop_reason="converged")


def from_rounds(r: ImplResult, rounds) -> ImplResult:
    """``r`` measured as the given rounds (each round's samples), merged as the run loop merges them."""
    return merge_rounds([replace(r, timing=one_round(tuple(s))) for s in rounds])


def scaled(run: RunResult, impl: str, factor: float) -> RunResult:
    if factor == 1.0:
        return run
    cases = []
    for c in run.cases:
        impls = []
        for r in c.impls:
            if r.name == impl and r.timing is not None:
                t = r.timing
                r = replace(r, timing=replace(t, samples=tuple(x * factor for x in t.samples), median=t.median * factor,
                                              ci_low=t.ci_low * factor, ci_high=t.ci_high * factor))
            impls.append(r)
        cases.append(replace(c, impls=tuple(impls)))
    return replace(run, cases=tuple(cases))


def deepened(base: RunResult, pool: dict[tuple[str, str], list[tuple[float, ...]]], n: int) -> RunResult:
    """``base`` with each point's rounds topped up to ``n`` from ``pool`` (see the module docstring)."""
    own = rounds_of(base)
    cases = []
    for c in base.cases:
        impls = []
        for r in c.impls:
            rounds = own.get((c.case_id, r.name), [])
            need = n - len(rounds)
            if r.timing is not None and need > 0 and len(pool.get((c.case_id, r.name), ())) >= need:
                drawn = [pool[(c.case_id, r.name)].pop() for _ in range(need)]
                r = from_rounds(r, (*rounds, *drawn))
            impls.append(r)
        cases.append(replace(c, impls=tuple(impls)))
    return replace(base, cases=tuple(cases))


def invocation(base: RunResult, cur: RunResult, pool: dict[tuple[str, str], list[tuple[float, ...]]], rerun: int,
               impl: str, factor: float, run_sd: float = 0.0) -> tuple[str, dict[str, str]]:
    def remeasure(keys: list[str], n: int) -> RunResult:
        cases = []
        for c in cur.cases:
            impls = []
            for r in c.impls:
                point = (c.case_id, r.name)
                if f"{c.case_id}/{r.name}" not in keys or r.timing is None or len(pool.get(point, ())) < n:
                    continue
                f = factor if r.name == impl else 1.0
                drawn = [pool[point].pop() for _ in range(n)]
                impls.append(from_rounds(r, [[x * f for x in s] for s in drawn]))
            if impls:
                cases.append(replace(c, impls=tuple(impls)))
        return replace(cur, cases=tuple(cases))

    result = gate_mod.gate_with_rerun(base, cur, remeasure, rerun, step=gate_mod.ROUNDS_A_LOOK, run_sd=run_sd)
    return result.overall, {v.key: v.verdict for v in result.verdicts}


def front_loaded(first: float):
    """(gate, look_levels) to stand in for analysis.gate's: each gate call is the next look of the
    invocation (``looks.clear()`` starts one), and the first look spends ``first`` of the error."""
    looks: list[int] = []
    real_gate = gate_mod.gate

    def gate(*args, **kwargs):
        looks.append(1)
        return real_gate(*args, **kwargs)

    def look_levels(alpha: float, confidence: float, k: int) -> tuple[float, float]:
        share = 1.0 if k == 1 else first if len(looks) == 1 else (1.0 - first) / (k - 1)
        return alpha * share, 1.0 - (1.0 - confidence) * share

    return looks, gate, look_levels


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--spend", default="equal,0.6")
    ap.add_argument("--slow", default="1.0,1.05,1.1")
    ap.add_argument("--impl", default="cublas_addmm")
    ap.add_argument("--base-rounds", default="0")
    ap.add_argument("--run-sd", default="0")
    ap.add_argument("--rerun", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    runs = [store.load(Path(p)) for p in args.runs]
    pools = [rounds_of(r) for r in runs]
    real = gate_mod.gate, gate_mod.look_levels
    print(f"{len(runs)} runs, {len(runs) * (len(runs) - 1)} ordered pairs x {args.reps} shuffles; "
          f"--rerun {args.rerun}, {gate_mod.ROUNDS_A_LOOK} rounds a look; slowed: {args.impl}")
    for spend, depth, run_sd in itertools.product(args.spend.split(","), [int(n) for n in args.base_rounds.split(",")],
                                                  [float(x) for x in args.run_sd.split(",")]):
        looks: list[int] = []
        if spend != "equal":
            looks, gate_mod.gate, gate_mod.look_levels = front_loaded(float(spend))
        for factor in (float(f) for f in args.slow.split(",")):
            rng = np.random.default_rng(args.seed)
            overall, slowed = Counter(), Counter()
            for (i, j), _ in itertools.product(itertools.permutations(range(len(runs)), 2), range(args.reps)):
                pool = pooled([p for k, p in enumerate(pools) if k not in (i, j)])
                for rounds in pool.values():
                    rng.shuffle(rounds)
                looks.clear()
                base = deepened(runs[i], pool, depth) if depth else runs[i]
                verdict, per_key = invocation(base, scaled(runs[j], args.impl, factor), pool, args.rerun,
                                              args.impl, factor, run_sd)
                overall[verdict] += 1
                slowed.update(v for k, v in per_key.items() if k.endswith(f"/{args.impl}"))
            print(f"spend {spend:5s} base rounds {depth or 'as run'} run sd {run_sd:.2%} truth {factor:.2f}: "
                  f"invocations {dict(sorted(overall.items()))}; "
                  f"{args.impl} points {dict(sorted(slowed.items()))}")
        gate_mod.gate, gate_mod.look_levels = real


if __name__ == "__main__":
    main()
