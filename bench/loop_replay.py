"""Replay measured runs through the run loop itself: how many passes and worker processes does the
real loop (``solbench.execute.session.measure_units``) start on a run's own rounds, and what would the
run have reported under another rule for added rounds?

    PYTHONPATH=. python3 bench/loop_replay.py [RUN.json[.gz] ...] [--fit] [--rules 16:0.015,16:0.02]
                                              [--pass-rounds 2,4,6] [--reps 3] [--seed 7]

bench/pass_replay.py simulates the added passes with gate_replay's stopping rule; this runs the
loop's own code (its plan of added rounds, ``_undecided``, its pooling of rounds, its worker keys)
with an executor that starts no process. Each task gets the next round its point measured in the
replayed run, in the order measured; where the loop asks for more rounds than that run measured, it
gets rounds of the other given runs, shuffled (once those run out, its own again, drawn at random).
The executor counts processes as ``solbench.measure.pool.Pool`` does: one per worker key prestarted
that is not alive, none again until retired. Implementations the run skipped at every case are
skipped; the floor is measured as the loop measures it (three rounds, never added to).

Played on the run's own rounds, the loop asks for exactly the rounds that run measured and merges
them into the medians and intervals it recorded: the counts printed beside the recorded ones
(``harness.passes``, ``harness.worker_processes``) check the replay. Then:

    --fit          least squares of the runs' harness wall time on passes, processes and point-rounds,
                   an intercept per device call (the runs' folder)
    --rules        each run again under other values of ``max_rounds:rounds_target[:rounds_spread]``. A rule that asks
                   for no more rounds than the run measured replays exactly what the run would have
                   reported; per rule: the counts (and the seconds the fit adds), the spread of run
                   medians and the CIs holding the grand median within each call of three runs or
                   more, ``gate`` over their ordered pairs, and ``compare baseline fused`` in each run;
                   and the spread had each run reported the geometric mean of its round medians
                   (what gate and compare take the ratio of) instead of their median
    --pass-rounds  the runs again with ``session.PASS_ROUNDS`` at each value (rounds beyond a run's
                   own come from the other runs: replays that need many of them lean to more rounds)
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from solbench.analysis.rounds import group_by_round, round_medians
from solbench.execute import session
from solbench.measure.worker import MeasureSettings
from solbench.results import store
from solbench.results.model import ImplResult, RunResult, Timing

S = "results/h200/issue16/"
DEFAULT = [f"{S}session30/call6/five-{k}.json.gz" for k in range(1, 4)]


def load(path: str) -> RunResult:
    return store.load(Path(path))


def rounds_of(run: RunResult) -> dict[tuple[str, str], list[tuple[float, ...]]]:
    """(case id, implementation) -> each round's samples, in the order measured."""
    out = {}
    for case in run.cases:
        for r in case.impls:
            if r.status != "ok" or r.timing is None:
                continue
            out[(case.case_id, r.name)] = [tuple(g.tolist()) for g in group_by_round(r.timing.samples,
                                                                                       r.timing.rounds)]
    return out


def pooled(pools: list[dict]) -> dict:
    """Every point's rounds over several runs' ``rounds_of``, in one list a point."""
    out: dict = defaultdict(list)
    for pool in pools:
        for point, rounds in pool.items():
            out[point] += rounds
    return out


class ReplayExecutor:
    """Hands each point its replayed run's rounds in order, then the other runs' rounds, shuffled."""

    def __init__(self, own: dict, others: dict, parts: set[str], rng: np.random.Generator) -> None:
        self.own, self.others, self.parts, self.rng = own, others, parts, rng
        self.served: dict[tuple[str, str], int] = defaultdict(int)
        self.spare: dict[tuple[str, str], list] = {}
        self.alive: set = set()
        self.started = 0
        self.beyond = 0  # rounds served from other runs

    def prestart(self, keys) -> None:
        new = [k for k in keys if k not in self.alive]
        self.alive.update(new)
        self.started += len(new)

    def retire(self, keys) -> None:
        self.alive.difference_update(keys)

    def close(self) -> None:
        self.alive.clear()

    def run(self, key, task, timeout_s, progress=None) -> ImplResult:
        self.prestart([key])
        point = (task.case.id, task.impl)
        k = self.served[point]
        self.served[point] += 1
        own = self.own[point]
        if k < len(own):
            samples = own[k]
        else:
            if point not in self.spare:
                spare = list(self.others.get(point, []))
                self.rng.shuffle(spare)
                self.spare[point] = spare
            # none left: one of the point's own rounds again, drawn at random
            samples = self.spare[point].pop() if self.spare[point] else own[int(self.rng.integers(len(own)))]
            self.beyond += 1
        median = float(np.median(samples))
        protocol = {"part": "floor"} if task.impl in self.parts else {}
        return ImplResult(task.impl, "ok", timing=Timing(samples, median, min(samples), max(samples), "converged"),
                          protocol=protocol)


@dataclass
class Count:
    passes: int
    processes: int
    point_rounds: int
    beyond: int
    matched: bool  # every point asked for exactly the rounds the replayed run measured
    run: RunResult | None = None  # the replayed run: the template with each point's replayed rounds merged


def replay(template: RunResult, own: dict, others: dict, rng: np.random.Generator, pass_rounds: int,
           max_rounds: int | None = None, target: float | None = None, spread: str | None = None) -> Count:
    """The loop on ``template``'s workloads and protocol (``max_rounds``, ``target``, ``spread``: other
    values of its ``max_rounds``, ``rounds_target`` and ``rounds_spread``), each point served ``own``
    rounds, then ``others``."""
    from solbench import api

    parts = {r.name for c in template.cases for r in c.impls if r.protocol.get("part")}
    spec_files = list(template.workload_files)
    keys_by_workload: dict[str, set[str]] = defaultdict(set)
    for c in template.cases:
        keys_by_workload[c.workload].add(c.case_id)
    units = []
    for p in api.plan(spec_files, "cuda", only=tuple(keys_by_workload)):
        cases = tuple(c for c in p.cases if c.id in keys_by_workload[p.spec.name])
        impls = tuple(dict.fromkeys(r.name for c in template.cases if c.workload == p.spec.name for r in c.impls))
        units.append(session.Unit(p.spec, p.path, cases, impls))
    statuses: dict[tuple[str, str], set[str]] = defaultdict(set)
    for c in template.cases:
        for r in c.impls:
            statuses[(c.workload, r.name)].add(r.status)
    skipped: dict[str, dict[str, str]] = defaultdict(dict)  # implementations the run skipped at every case
    for (workload, name), seen in statuses.items():
        if seen == {"skipped"}:
            skipped[workload][name] = "skipped in the replayed run"
    proto = template.protocol
    ex = ReplayExecutor(own, others, parts, rng)

    def score(unit, case, impls):
        return replace(template.cases[0], case_id=case.id, workload=unit.spec.name, impls=tuple(impls))

    saved = session.PASS_ROUNDS, session._skipped
    session.PASS_ROUNDS = pass_rounds
    session._skipped = lambda unit, device: skipped[unit.spec.name]  # as the replayed run found them
    try:
        run = session.measure_units(units, replace(template, cases=(), harness={}), ex, device="cuda",
                                    settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None, score=score,
                                    emit=lambda e, d: None, repeat=proto.rounds,
                                    max_rounds=proto.max_rounds if max_rounds is None else max_rounds,
                                    target_rel_ci=proto.rounds_target if target is None else target,
                                    rounds_spread=proto.rounds_spread if spread is None else spread)
    finally:
        session.PASS_ROUNDS, session._skipped = saved
    merged = {(c.case_id, r.name): r for c in run.cases for r in c.impls}
    got = {p: r.timing.n_rounds for p, r in merged.items() if r.timing is not None}
    matched = all(got[p] == len(v) for p, v in own.items())
    replayed = replace(template, cases=tuple(
        replace(c, impls=tuple(replace(r, timing=merged[(c.case_id, r.name)].timing) if (c.case_id, r.name) in got
                               else r for r in c.impls)) for c in template.cases))
    return Count(int(run.harness.get("passes", 0)), ex.started, sum(got.values()), ex.beyond, matched, replayed)


def fit(files: list[str], runs: list[RunResult], counts: list[Count]) -> np.ndarray:
    """Least squares of each run's harness wall time on its passes, processes and point-rounds, with
    one intercept per device call (the runs' parent folder: one machine each); returns the three
    slopes and prints them."""
    calls = sorted({str(Path(f).parent) for f in files})
    a = np.array([[float(str(Path(f).parent) == c) for c in calls] + [k.passes, k.processes, k.point_rounds]
                  for f, k in zip(files, counts, strict=True)])
    y = np.array([r.harness["wall_s"] for r in runs])
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    resid = y - a @ coef
    dof = max(len(y) - a.shape[1], 1)
    sd = float(np.sqrt(resid @ resid / dof))
    se = sd * np.sqrt(np.diag(np.linalg.pinv(a.T @ a)))[-3:]
    print(f"\nharness wall over {len(y)} runs, {len(calls)} calls (an intercept each), slope ± standard error: "
          f"{coef[-3]:.2f} ± {se[0]:.2f} s a pass, {coef[-2]:.3f} ± {se[1]:.3f} s a process, "
          f"{coef[-1]:.4f} ± {se[2]:.4f} s a point-round; residual sd {sd:.2f} s")
    return coef[-3:]


def round_geomean(t: Timing) -> float:
    """The geometric mean of a point's round medians: the estimate ``gate`` and ``compare`` take the
    ratio of (a t interval on the log round medians), where the run reports their median."""
    return float(np.exp(np.mean(np.log(round_medians(group_by_round(t.samples, t.rounds))))))


def spread(runs: list[RunResult], estimate=lambda t: t.median) -> tuple[list[float], int, int]:
    """Per point measured in every run: max/min - 1 of the run medians (as bench/repeat_gates.py),
    or of another ``estimate`` of each run's timing; and how many of the runs' 95% CIs hold the
    grand median, of how many."""
    points: dict = defaultdict(list)
    for run in runs:
        for c in run.cases:
            for r in c.impls:
                if r.status == "ok" and r.timing is not None:
                    points[(c.case_id, r.name)].append(r.timing)
    spreads, held, total = [], 0, 0
    for timings in points.values():
        if len(timings) != len(runs):
            continue
        medians = [estimate(t) for t in timings]
        grand = float(np.median(medians))
        spreads.append(max(medians) / min(medians) - 1)
        held += sum(t.ci_low <= grand <= t.ci_high for t in timings)
        total += len(timings)
    return spreads, held, total


def rules(files: list[str], runs: list[RunResult], pools: list[dict], which: str, seed: int,
          slopes: np.ndarray | None, base: np.ndarray) -> None:
    """Replay every run under each rule (max rounds:target), on its own rounds alone; per rule the
    counts, the spread of run medians and CI coverage within each call's runs (three or more), and
    ``solbench.analysis.gate`` over their ordered pairs."""
    from solbench.analysis.compare import compare_impls
    from solbench.analysis.gate import gate

    every: dict[str, list[int]] = defaultdict(list)
    for i, f in enumerate(files):
        every[str(Path(f).parent)].append(i)
    def same_call(i: int) -> dict:
        """The rounds of the other runs of run ``i``'s call (one machine), for a rule that asks for more."""
        return pooled([pools[j] for j in every[str(Path(files[i]).parent)] if j != i])

    groups = {k: v for k, v in every.items() if len(v) >= 3}
    print(f"\nrules on the runs' own rounds (calls with three runs or more: {len(groups)}): max rounds:target  "
          "passes  processes  point-rounds  [seconds the fit adds]  spread median / max (worst call)  "
          "CIs holding the grand median  gate pairs: exit 0 / INCONCLUSIVE / REGRESSION verdicts  the spread "
          "of each run's geometric mean of round medians instead  "
          "verdicts of compare baseline fused in every run")
    for rule in which.split(","):
        cap, target, *whose = rule.split(":")
        counts = [replay(run, own, same_call(i), np.random.default_rng([seed, i]), session.PASS_ROUNDS, int(cap),
                         float(target), whose[0] if whose else None)
                  for i, (run, own) in enumerate(zip(runs, pools, strict=True))]
        asked_more = sum(c.beyond > 0 for c in counts)
        mean = np.array([[c.passes, c.processes, c.point_rounds] for c in counts]).mean(axis=0)
        extra = f"  {float((mean - base) @ slopes):+.2f} s" if slopes is not None else ""
        medians, maxes, held, total, ok, inc, reg, pairs = [], [], 0, 0, 0, 0, 0, 0
        mean_medians, mean_maxes = [], []  # the spread of the runs' geometric means of round medians
        verdicts: Counter = Counter()  # compare baseline fused inside each replayed run
        for c in counts:
            verdicts.update(str(row.verdict) for row in compare_impls(c.run, "baseline", "fused").rows)
        for members in groups.values():
            replayed = [counts[i].run for i in members]
            sp, h, t = spread(replayed)
            medians.append(float(np.median(sp)))
            maxes.append(max(sp))
            sp_mean = spread(replayed, round_geomean)[0]
            mean_medians.append(float(np.median(sp_mean)))
            mean_maxes.append(max(sp_mean))
            held, total = held + h, total + t
            for a, b in itertools.permutations(replayed, 2):
                res = gate(a, b)
                pairs += 1
                ok += res.exit_code == 0
                inc += sum(v.verdict == "INCONCLUSIVE" for v in res.verdicts)
                reg += sum(v.verdict == "REGRESSION" for v in res.verdicts)
        spreads = (f"{np.mean(medians):.2%} / {np.mean(maxes):.2%} ({max(maxes):.2%})  {held}/{total}  "
                   f"{ok}/{pairs} / {inc} / {reg}  geomean spread {np.mean(mean_medians):.2%} / "
                   f"{np.mean(mean_maxes):.2%} ({max(mean_maxes):.2%})") if groups else "-"
        took = f"  ({asked_more} runs took rounds of their call's other runs)" if asked_more else ""
        tally = " ".join(f"{v} {n}" for v, n in sorted(verdicts.items()))
        print(f"{rule}  {mean[0]:.2f}  {mean[1]:.2f}  {mean[2]:.1f}{extra}  {spreads}  compare baseline fused: "
              f"{tally}{took}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT)
    ap.add_argument("--pass-rounds", default="", help="values of session.PASS_ROUNDS to replay, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="shuffles of the other runs' rounds a replayed run")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rules", default="", help="max rounds:target[:case|own] to replay on the runs' own "
                                                "rounds, comma-separated (e.g. 16:0.015,8:0.015,16:0.02:own)")
    ap.add_argument("--fit", action="store_true", help="fit the runs' harness wall time to the counts (seconds a "
                                                       "pass, a process and a point-round)")
    args = ap.parse_args()
    runs = [load(p) for p in args.runs]
    pools = [rounds_of(r) for r in runs]
    print(f"run  recorded passes/processes/point-rounds  |  replayed (PASS_ROUNDS {session.PASS_ROUNDS}, the "
          f"run's own rounds)")
    own_counts = []
    for path, run, own in zip(args.runs, runs, pools, strict=True):
        c = replay(run, own, {}, np.random.default_rng(args.seed), session.PASS_ROUNDS)
        own_counts.append(c)
        h = run.harness
        recorded = "/".join(str(int(h[k])) if k in h else "-" for k in ("passes", "worker_processes"))
        print(f"{path}  {recorded}/{sum(len(v) for v in own.values())}  |  {c.passes}/{c.processes}/"
              f"{c.point_rounds}{'' if c.matched else '  (asked for rounds the run did not measure)'}")
    slopes = fit(args.runs, runs, own_counts) if args.fit else None
    base = np.array([[c.passes, c.processes, c.point_rounds] for c in own_counts]).mean(axis=0)
    if args.rules:
        rules(args.runs, runs, pools, args.rules, args.seed, slopes, base)
    if not args.pass_rounds:
        return
    print("\nPASS_ROUNDS  passes  processes  point-rounds  rounds from other runs"
          + ("  seconds the fit adds over the default" if slopes is not None else ""))
    for pr in (int(x) for x in args.pass_rounds.split(",")):
        counts = []
        for i, (run, own) in enumerate(zip(runs, pools, strict=True)):
            others = pooled([pool for j, pool in enumerate(pools) if j != i])
            counts += [replay(run, own, others, np.random.default_rng([args.seed, i, rep]), pr)
                       for rep in range(args.reps)]
        mean = np.array([[c.passes, c.processes, c.point_rounds] for c in counts]).mean(axis=0)
        extra = f"  {float((mean - base) @ slopes):+.2f}" if slopes is not None else ""
        print(f"{pr}  {mean[0]:.2f}  {mean[1]:.2f}  {mean[2]:.1f}  {np.mean([c.beyond for c in counts]):.1f}{extra}")


if __name__ == "__main__":
    main()
