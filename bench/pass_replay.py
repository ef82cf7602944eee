"""Replay the run's added rounds on measured H200 rounds with several caps on the rounds a point may
add in one pass: how many passes and worker processes does each cap cost, and do the runs still gate?

(Superseded for counts by bench/loop_replay.py, which runs the loop's own code and reproduces the
recorded passes and processes exactly; this model of the loop under-counted them. Kept for the
thirtieth session's numbers in BENCHMARKS.md.)

    PYTHONPATH=. python3 bench/pass_replay.py [RUN.json[.gz] ...] [--caps 4,8,13] [--sets 40] [--seed 7]

Each gated point's rounds from the given runs (default: the five o_proj runs of sessions 26 and 29,
graph launch, the default protocol) form its population, drawn as bench/gate_replay.py draws them
(one shuffled deck per set of five runs). A simulated run measures three rounds a point, then adds
rounds in passes as ``solbench.execute.session`` does under the default rule (the case's pooled
spread and the point's own, ±1.5%, at most 16 rounds: gate_replay's ``case-cap16``), each point at
most CAP rounds a pass. Counted per run, as the run loop starts them:

    passes      1 (round 1) + 1 (rounds 2-3) + the added passes
    processes   7 + 14 (one worker per implementation and round in the first two passes; one per
                implementation a point for the floor, which is never added to) + per added pass, for
                each implementation, the most rounds any of its cases adds in it
    point-rounds

Then every set of five runs is gated both ways over its 20 ordered pairs (``solbench.analysis.gate``,
the CLI's defaults), as gate_replay does. An H200 pays about 0.18 s a worker process (its CUDA
context and exit, serialized: BENCHMARKS.md, fifteenth and nineteenth sessions) and about 0.6 s a
pass beyond that, plus a barrier per case: compare caps by passes and processes, not by seconds.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
from dataclasses import dataclass

import gate_replay as gr
import numpy as np

S = "results/h200/issue16/"
DEFAULT = [f"{S}session29/call2/five-{k}.json.gz" for k in range(1, 6)]  # one machine
RULE = gr.RULES["case-cap16"]


@dataclass
class Sim:
    passes: int
    processes: int
    point_rounds: int


def simulate(deck: gr.Deck, cap_a_pass: int, fill: bool = False) -> tuple[dict[str, list[np.ndarray]], Sim]:
    """One run. ``fill``: in each added pass every undecided point of an implementation gets as many
    rounds as the pass starts workers of it (its deepest point's), not only the rounds it asks for:
    the processes are started anyway, and a round in one costs a turn, not a process."""
    rounds = {k: deck.draw(k, gr.FIRST) for k in deck.pool}
    impls = {k.rsplit("/", 1)[1] for k in rounds}
    passes, processes = 2, len(impls) * gr.FIRST
    cache: dict[tuple[str, int], int] = {}
    for _ in range(gr.FIRST, RULE.cap):
        need = gr.needs(rounds, RULE, cache)
        more = {k: min(need[k] - len(v), cap_a_pass) for k, v in rounds.items()}
        if not any(m > 0 for m in more.values()):
            break
        passes += 1
        depth: dict[str, int] = {}
        for k, m in more.items():
            if m > 0:
                name = k.rsplit("/", 1)[1]
                depth[name] = max(depth.get(name, 0), m)
        if fill:
            more = {k: min(depth[k.rsplit("/", 1)[1]], RULE.cap - len(rounds[k])) if m > 0 else m
                    for k, m in more.items()}
        for k, m in more.items():
            if m > 0:
                rounds[k] = rounds[k] + deck.draw(k, m)
        processes += sum(depth.values())
    return rounds, Sim(passes, processes, sum(len(v) for v in rounds.values()))


def one_set(task: tuple[int, int]) -> tuple[list[Sim], gr.SetResult]:
    cap_a_pass, i = task
    deck = gr.Deck(gr._POOL, np.random.default_rng([gr._SEED, i]))
    sims = [simulate(deck, abs(cap_a_pass), fill=cap_a_pass < 0) for _ in range(gr.RUNS_A_SET)]
    assert gr._TEMPLATE is not None
    return [s for _, s in sims], gr.gate_set([gr.as_run(gr._TEMPLATE, r) for r, _ in sims], RULE.cap)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="*", default=DEFAULT)
    ap.add_argument("--caps", default="2,4,6,13,-4", help="rounds a point may add in a pass; a negative cap also "
                    "fills: every undecided point of an implementation gets the pass's depth of it")
    ap.add_argument("--sets", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    gr._SEED = args.seed
    template = gr.store.load(args.runs[0])
    gated = {f"{c.case_id}/{r.name}" for c in template.cases for r in c.impls if not r.protocol.get("part")}
    gr._POOL.update({k: v for k, v in gr.pools(args.runs).items() if k in gated})
    gr._LOG_MEDIAN.update({id(g): float(np.log(np.median(g))) for v in gr._POOL.values() for g in v})
    gr._TEMPLATE = template
    sizes = [len(v) for v in gr._POOL.values()]
    print(f"{len(gr._POOL)} gated points, {min(sizes)}-{max(sizes)} rounds each in {len(args.runs)} runs; "
          f"{args.sets} sets of five simulated runs a cap, seed {args.seed}; rule case-cap16 (±1.5%)")
    print(f"{'cap a pass':>10} {'passes':>7} {'max':>4} {'processes':>9} {'pt-rounds':>9} "
          f"{'INC/20':>6} {'REG/20':>6} {'<=2 INC':>7}")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.jobs) as pool:
        for cap in (int(c) for c in args.caps.split(",")):
            out = pool.map(one_set, [(cap, i) for i in range(args.sets)], chunksize=1)
            sims = list(itertools.chain.from_iterable(s for s, _ in out))
            inc = np.array([g.inconclusive for _, g in out])
            reg = np.array([g.regression for _, g in out])
            label = str(abs(cap)) + (" fill" if cap < 0 else "")
            print(f"{label:>10} {np.mean([s.passes for s in sims]):>7.2f} {max(s.passes for s in sims):>4} "
                  f"{np.mean([s.processes for s in sims]):>9.1f} {np.mean([s.point_rounds for s in sims]):>9.1f} "
                  f"{inc.mean():>6.2f} {reg.mean():>6.2f} {np.mean(inc <= 2):>7.0%}", flush=True)


if __name__ == "__main__":
    main()
