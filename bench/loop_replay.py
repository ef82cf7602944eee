"""Replay measured runs through the run loop itself: how many passes and worker processes does the
real loop (``solbench.execute.session.measure_units``) start on a run's own rounds, and under other
settings of it?

    PYTHONPATH=. python3 bench/loop_replay.py [RUN.json[.gz] ...] [--fit] [--pass-rounds 2,4,6] [--reps 3] [--seed 7]

bench/pass_replay.py simulates the added passes with gate_replay's stopping rule; this runs the
loop's own code (its plan of added rounds, ``_undecided``, its pooling of rounds, its worker keys)
with an executor that starts no process. Each task gets the next round its point measured in the
replayed run, in the order measured; where the loop asks for more rounds than that run measured, it
gets rounds of the other given runs, shuffled (``--reps`` shuffles). The executor counts processes
as ``solbench.measure.pool.Pool`` does: one per worker key prestarted that is not alive, none again
until retired. The floor is measured as the loop measures it (three rounds, never added to).

Played on the run's own rounds, the loop must ask for exactly the rounds that run measured (while it
asks for no more than it has): then the counts it prints beside the recorded ones
(``harness.passes``, ``harness.worker_processes``) say how faithful the replay is. Then
``--pass-rounds`` replays the same runs with ``session.PASS_ROUNDS`` set to each value.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from solbench.execute import session
from solbench.measure.worker import MeasureSettings
from solbench.results import store
from solbench.results.model import ImplResult, RunResult, Timing

S = "results/h200/issue16/"
DEFAULT = [f"{S}session30/call6/five-{k}.json.gz" for k in range(1, 4)]


def load(path: str) -> RunResult:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return store.from_dict(json.load(f))


def rounds_of(run: RunResult) -> dict[tuple[str, str], list[tuple[float, ...]]]:
    """(case id, implementation) -> each round's samples, in the order measured."""
    out = {}
    for case in run.cases:
        for r in case.impls:
            if r.status != "ok" or r.timing is None:
                continue
            labels = r.timing.rounds or (0,) * len(r.timing.samples)
            by_round: dict[int, list[float]] = defaultdict(list)
            for label, value in zip(labels, r.timing.samples, strict=True):
                by_round[label].append(value)
            out[(case.case_id, r.name)] = [tuple(by_round[k]) for k in sorted(by_round)]
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
            if not self.spare[point]:
                raise SystemExit(f"{point}: no rounds left to replay")
            samples = self.spare[point].pop()
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


def replay(template: RunResult, own: dict, others: dict, rng: np.random.Generator, pass_rounds: int) -> Count:
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
    proto = template.protocol
    ex = ReplayExecutor(own, others, parts, rng)

    def score(unit, case, impls):
        return replace(template.cases[0], case_id=case.id, workload=unit.spec.name, impls=tuple(impls))

    saved = session.PASS_ROUNDS, session._skipped
    session.PASS_ROUNDS = pass_rounds
    session._skipped = lambda unit, device: {}  # as on the H200: every implementation's requirements met
    try:
        run = session.measure_units(units, replace(template, cases=(), harness={}), ex, device="cuda",
                                    settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None, score=score,
                                    emit=lambda e, d: None, repeat=proto.rounds, max_rounds=proto.max_rounds,
                                    target_rel_ci=proto.rounds_target, rounds_spread=proto.rounds_spread)
    finally:
        session.PASS_ROUNDS, session._skipped = saved
    got = {(c.case_id, r.name): r.timing.n_rounds for c in run.cases for r in c.impls}
    matched = all(got[p] == len(v) for p, v in own.items())
    return Count(int(run.harness.get("passes", 0)), ex.started, sum(got.values()), ex.beyond, matched)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT)
    ap.add_argument("--pass-rounds", default="", help="values of session.PASS_ROUNDS to replay, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="shuffles of the other runs' rounds a replayed run")
    ap.add_argument("--seed", type=int, default=7)
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
    if not args.pass_rounds:
        return
    print("\nPASS_ROUNDS  passes  processes  point-rounds  rounds from other runs"
          + ("  seconds the fit adds over the default" if slopes is not None else ""))
    base = np.array([[c.passes, c.processes, c.point_rounds] for c in own_counts]).mean(axis=0)
    for pr in (int(x) for x in args.pass_rounds.split(",")):
        counts = []
        for i, (run, own) in enumerate(zip(runs, pools, strict=True)):
            others: dict = defaultdict(list)
            for j, pool in enumerate(pools):
                if j != i:
                    for point, rounds in pool.items():
                        others[point] += rounds
            counts += [replay(run, own, others, np.random.default_rng([args.seed, i, rep]), pr)
                       for rep in range(args.reps)]
        mean = np.array([[c.passes, c.processes, c.point_rounds] for c in counts]).mean(axis=0)
        extra = f"  {float((mean - base) @ slopes):+.2f}" if slopes is not None else ""
        print(f"{pr}  {mean[0]:.2f}  {mean[1]:.2f}  {mean[2]:.1f}  {np.mean([c.beyond for c in counts]):.1f}{extra}")


if __name__ == "__main__":
    main()
