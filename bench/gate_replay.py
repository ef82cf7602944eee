"""Replay stopping rules on measured H200 rounds and gate the simulated runs: which rule keeps
`solbench gate` between runs of the same code from INCONCLUSIVE and REGRESSION verdicts?

    PYTHONPATH=. python bench/gate_replay.py [RUN.json[.gz] ...] [--rules rule:sets,...] [--sets N] [--seed 7]
                                             [--jobs N] [--anchored REPS] [--measured [RUN ...]]

Each gated point's rounds from the given runs (default: the 12 o_proj runs of sessions 18-19 and
the o_proj cases of session 18's suite run) form its population (bench/stopping_replay.py:
``pools``). A set of five simulated runs draws each point's rounds without replacement from one
shuffled deck of its population (a fresh shuffle only when the deck runs out), so two runs of a set
share a round only where the population is too small; a run measures FIRST (3) rounds a point, then
adds rounds in passes of at most PASS_ROUNDS, as many passes as ``solbench.execute.session`` allows,
while the rule asks for more. Every rule replays the same decks (common random numbers: set i
draws from the same shuffles under every rule).

Every simulated run is a real ``RunResult`` (the first run given, its byte-floor points left out,
each point's ``Timing`` replaced by the simulated rounds' samples with their round labels), and
the 20 ordered pairs of a set are decided by ``solbench.analysis.gate.gate`` with the CLI's
defaults (threshold: the recorded one, else 5%; alpha 0.01; confidence 0.95; one look), so the
verdicts come from the gate's own statistics (t over log round medians, the moderated spread,
Benjamini-Hochberg, the verdict rule).

Rules (target: the 95% t interval of a point's log round medians, ± target; cap: most rounds):

    now            the run's default: allocation.rounds_needed, ±1.5%, cap 8
    min4           the same, at least 4 rounds
    moderated      ±1.5%, cap 8, on each point's spread moderated over the run's points
                   (bench/stopping_replay.py: Smyth's prior, half its df, as the gate uses) alone
    1%-cap12       --rounds-target 0.01 --max-rounds 12
    now-cap12      ±1.5%, cap 12
    noisy6-cap12   ±1.5%, cap 12, and at least 6 rounds for a point whose spread pooled over its case's
                   implementations (below) is above 1.2%
    case-cap12     ±1.5%, cap 12: a point stops only when its own interval AND the one on the spread
                   pooled over its case's implementations (same case, this run's rounds; df the sum of
                   theirs, one more per added round) are narrow
    case-cap16     the same, cap 16
    (also defined, tried on 16 sets each: own+mod[-cap12|-cap16] (own AND moderated interval narrow),
    case (cap 8), now-cap16, 1%-cap16, min4-cap12, noisy8-cap12, case-1.2%-cap12, case-1.2%-cap16)

Reported per rule: gated point-rounds a run (the 10 byte-floor points add 30 more to a real run)
and their ratio to ``now``; over the sets, INCONCLUSIVE and REGRESSION verdicts per 20 pairs, the
share of sets with at most 2 INCONCLUSIVE, with 0 REGRESSION, with both (the target), exit-3
pairs per 20; then the points the INCONCLUSIVE verdicts fall on. ``--measured`` also gates the
real runs the same way (in process), every five-run subset of them, for the replay's fidelity.
Rounds of several machines are pooled: compare rules, not absolute numbers.

``--anchored REPS`` replays each given real run instead of drawing runs at random: its own rounds
first, in the order measured, then (where a rule asks for more than it measured) rounds of the other
given runs, shuffled; the sets are every five-run subset, REPS times over (``now`` once: it replays
the real runs exactly). It keeps whatever ties a real run's first rounds together, which the random
draws lose.
"""

from __future__ import annotations

import argparse
import itertools
import math
import multiprocessing
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
from stopping_replay import _need_moderated, _timing, pools

from solbench.analysis.allocation import rounds_needed
from solbench.analysis.gate import gate
from solbench.analysis.sequential import variance_prior
from solbench.analysis.tdist import t_ppf
from solbench.execute.session import PASS_ROUNDS
from solbench.results import store
from solbench.results.model import RunResult

S = "results/h200/issue16/"
DEFAULT = [f"{S}session18/call1/oproj-1.json.gz", f"{S}session18/call2/oproj-1.json.gz",
           f"{S}session18/call2/oproj-2.json.gz", f"{S}session18/call3/oproj-gated.json.gz",
           f"{S}session19/call1/oproj-1.json.gz", f"{S}session19/call3/oproj-1.json.gz",
           *(f"{S}session19/call3/gated-{k}.json.gz" for k in range(1, 7)),
           f"{S}session18/call3/suite.json.gz"]
FIRST = 3
RUNS_A_SET = 5


@dataclass(frozen=True)
class Rule:
    target: float
    cap: int
    least: int = FIRST
    spread: str = "own"  # "own", "moderated", "own+mod", "case"
    noisy_sd: float = 0.0  # > 0: points whose case-pooled spread is above it get at least noisy_least rounds
    noisy_least: int = 0


RULES = {
    "now": Rule(0.015, 8),
    "min4": Rule(0.015, 8, least=4),
    "moderated": Rule(0.015, 8, spread="moderated"),
    "1%-cap12": Rule(0.01, 12),
    "now-cap12": Rule(0.015, 12),
    "noisy6-cap12": Rule(0.015, 12, noisy_sd=0.012, noisy_least=6),
    "case-cap12": Rule(0.015, 12, spread="case"),
    "case-cap16": Rule(0.015, 16, spread="case"),
    # tried, left out of the default list (16 sets each: see results/h200/issue16/session19/gate-replay.txt)
    "own+mod": Rule(0.015, 8, spread="own+mod"),
    "own+mod-cap12": Rule(0.015, 12, spread="own+mod"),
    "own+mod-cap16": Rule(0.015, 16, spread="own+mod"),
    "case": Rule(0.015, 8, spread="case"),
    "now-cap16": Rule(0.015, 16),
    "1%-cap16": Rule(0.01, 16),
    "min4-cap12": Rule(0.015, 12, least=4),
    "noisy8-cap12": Rule(0.015, 12, noisy_sd=0.012, noisy_least=8),
    "case-1.2%-cap12": Rule(0.012, 12, spread="case"),
    "case-1.2%-cap16": Rule(0.012, 16, spread="case"),
}
# rule:sets (sets of five runs); more sets where a rule is near the target
DEFAULT_RULES = ("now:100,min4:50,moderated:50,1%-cap12:100,now-cap12:50,noisy6-cap12:100,case-cap12:150,"
                 "case-cap16:150")


def _need_pooled(r: int, var: float, df: float, target: float, cap: int) -> int:
    """Rounds in all for a ±target interval of the mean of n round medians at variance ``var``
    known with ``df`` degrees of freedom now (each added round one more)."""
    half = math.log1p(target)
    for n in range(r, cap + 1):
        if float(t_ppf(0.975, df + n - r)) * math.sqrt(var / n) <= half:
            return n
    return cap


def needs(rounds: dict[str, list[np.ndarray]], rule: Rule, cache: dict[tuple[str, int], int]) -> dict[str, int]:
    """Rounds in all each point asks for under ``rule``, given its rounds so far (``cache``: its own
    rounds_needed by point and rounds, within one run: rounds are only ever appended)."""
    own = {}
    for k, v in rounds.items():
        if (k, len(v)) not in cache:
            cache[(k, len(v))] = rounds_needed(_timing(v), rule.target, rule.cap)
        own[k] = max(rule.least, cache[(k, len(v))])
    if rule.spread == "own" and not rule.noisy_sd:
        return own
    logs = {k: np.array([_LOG_MEDIAN[id(g)] for g in v]) for k, v in rounds.items()}
    var = {k: float(np.var(v, ddof=1)) for k, v in logs.items()}
    ss: dict[str, float] = {}
    df: dict[str, float] = {}
    for k, v in logs.items():
        case = k.rsplit("/", 1)[0]
        ss[case] = ss.get(case, 0.0) + var[k] * (len(v) - 1)
        df[case] = df.get(case, 0.0) + len(v) - 1
    if rule.noisy_sd:
        own = {k: max(n, rule.noisy_least) if ss[k.rsplit("/", 1)[0]] / df[k.rsplit("/", 1)[0]] > rule.noisy_sd ** 2
               else n for k, n in own.items()}
    if rule.spread == "own":
        return own
    if rule.spread in ("moderated", "own+mod"):
        prior = variance_prior(list(var.values()), [len(v) - 1.0 for v in logs.values()])
        if prior is None:
            return own
        mod = {k: _need_moderated(v, prior.var, prior.df, rule.target, rule.cap) for k, v in rounds.items()}
        if rule.spread == "moderated":
            return {k: max(rule.least, m) for k, m in mod.items()}
        return {k: max(own[k], mod[k]) for k in rounds}
    assert rule.spread == "case"
    out = {}
    for k, v in rounds.items():
        case = k.rsplit("/", 1)[0]
        out[k] = max(own[k], _need_pooled(len(v), ss[case] / df[case], df[case], rule.target, rule.cap))
    return out


class Deck:
    """Each point's rounds, shuffled once a set; reshuffled only when a set has used them all."""

    def __init__(self, pool: dict[str, list[np.ndarray]], rng: np.random.Generator) -> None:
        self.pool, self.rng = pool, rng
        self.order = {k: list(rng.permutation(len(v))) for k, v in pool.items()}

    def draw(self, key: str, n: int) -> list[np.ndarray]:
        while len(self.order[key]) < n:
            self.order[key] += list(self.rng.permutation(len(self.pool[key])))
        picked, self.order[key] = self.order[key][:n], self.order[key][n:]
        return [self.pool[key][i] for i in picked]


class AnchoredDeck(Deck):
    """One real run's rounds first, in the order they were measured (``--anchored``), then rounds of
    the other runs, shuffled: a rule that stops where the real run stopped replays it exactly."""

    def __init__(self, own: dict[str, list[np.ndarray]], others: dict[str, list[np.ndarray]],
                 rng: np.random.Generator) -> None:
        super().__init__(others, rng)
        self.own = {k: list(v) for k, v in own.items()}

    def draw(self, key: str, n: int) -> list[np.ndarray]:
        take, self.own[key] = self.own[key][:n], self.own[key][n:]
        return take + (super().draw(key, n - len(take)) if n > len(take) else [])


def simulate(deck: Deck, rule: Rule) -> dict[str, list[np.ndarray]]:
    """One run: FIRST rounds a point (``rule.least`` when more), then passes as session.measure_units."""
    rounds = {k: deck.draw(k, max(FIRST, rule.least)) for k in deck.pool}
    cache: dict[tuple[str, int], int] = {}
    for _ in range(max(FIRST, rule.least), rule.cap):  # session.py: at most max_rounds - repeat passes
        need = needs(rounds, rule, cache)
        more = {k: min(need[k] - len(v), PASS_ROUNDS) for k, v in rounds.items()}
        if not any(m > 0 for m in more.values()):
            break
        for k, m in more.items():
            if m > 0:
                rounds[k] = rounds[k] + deck.draw(k, m)
    return rounds


def as_run(template: RunResult, rounds: dict[str, list[np.ndarray]]) -> RunResult:
    """``template`` with each gated point's timing replaced by ``rounds``; other results left out."""
    cases = []
    for c in template.cases:
        impls = tuple(replace(r, timing=_timing(rounds[f"{c.case_id}/{r.name}"])) for r in c.impls
                      if f"{c.case_id}/{r.name}" in rounds)
        if impls:
            cases.append(replace(c, impls=impls))
    return replace(template, cases=tuple(cases))


@dataclass
class SetResult:
    point_rounds: list[int]
    inconclusive: int
    regression: int
    exit3: int
    exit1: int
    keys: Counter
    examples: list[str]
    why: Counter  # INCONCLUSIVE verdicts by the rounds of their sides


def gate_set(runs: list[RunResult], cap: int) -> SetResult:
    """gate over every ordered pair of ``runs`` (as `solbench gate --baseline A --current B`)."""
    inc = reg = e3 = e1 = 0
    keys: Counter = Counter()
    why: Counter = Counter()
    examples = []
    for a, b in itertools.permutations(range(len(runs)), 2):
        res = gate(runs[a], runs[b])
        e3 += res.exit_code == 3
        e1 += res.exit_code == 1
        for v in res.verdicts:
            if v.verdict == "INCONCLUSIVE":
                inc += 1
                keys[v.key] += 1
                least = min(v.rounds_base, v.rounds_cur)
                why["a side <=4 rounds" if least <= 4 else "both at the cap" if least == cap else "other"] += 1
                examples.append(f"{v.key}: {v.ratio:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}] "
                                f"{v.rounds_base} vs {v.rounds_cur} rounds")
            elif v.verdict == "REGRESSION":
                reg += 1
                keys["REGRESSION " + v.key] += 1
    return SetResult([], inc, reg, e3, e1, keys, examples, why)


_POOL: dict[str, list[np.ndarray]] = {}
_LOG_MEDIAN: dict[int, float] = {}  # id of a pooled round's samples -> log of its median
_TEMPLATE: RunResult | None = None
_SEED = 7
_ANCHORS: list[dict[str, list[np.ndarray]]] = []  # --anchored: each real run's rounds, in order


def one_replicate(task: tuple[str, int]) -> tuple[list[int], dict[tuple[int, int], SetResult]]:
    """--anchored: every real run replayed once under the rule; every pair of them gated, both ways."""
    name, rep = task
    rule = RULES[name]
    sims = []
    for j, own in enumerate(_ANCHORS):
        others = {k: [g for i, run in enumerate(_ANCHORS) if i != j for g in run[k]] for k in own}
        sims.append(simulate(AnchoredDeck(own, others, np.random.default_rng([_SEED, rep, j])), rule))
    assert _TEMPLATE is not None
    runs = [as_run(_TEMPLATE, s) for s in sims]
    # gate_set of two runs gates both orders
    pairs = {(a, b): gate_set([runs[a], runs[b]], rule.cap) for a, b in itertools.combinations(range(len(runs)), 2)}
    return [sum(len(v) for v in s.values()) for s in sims], pairs


def anchored_sets(results: list[tuple[list[int], dict[tuple[int, int], SetResult]]]) -> list[SetResult]:
    """Every five-run subset of every replicate as a set of 20 ordered pairs."""
    out = []
    for cost, pairs in results:
        n = len(cost)
        for sub in itertools.combinations(range(n), RUNS_A_SET):
            ps = [pairs[p] for p in itertools.combinations(sub, 2)]
            keys: Counter = Counter()
            why: Counter = Counter()
            for p in ps:
                keys.update(p.keys)
                why.update(p.why)
            out.append(SetResult([cost[i] for i in sub], sum(p.inconclusive for p in ps),
                                 sum(p.regression for p in ps), sum(p.exit3 for p in ps),
                                 sum(p.exit1 for p in ps), keys, [e for p in ps for e in p.examples], why))
    return out


def one_set(task: tuple[str, int]) -> SetResult:
    name, i = task
    rule = RULES[name]
    deck = Deck(_POOL, np.random.default_rng([_SEED, i]))
    sims = [simulate(deck, rule) for _ in range(RUNS_A_SET)]
    assert _TEMPLATE is not None
    out = gate_set([as_run(_TEMPLATE, s) for s in sims], rule.cap)
    out.point_rounds = [sum(len(v) for v in s.values()) for s in sims]
    return out


def summary(name: str, sets: list[SetResult], base_cost: float | None) -> tuple[str, float]:
    cost = float(np.mean([c for s in sets for c in s.point_rounds]))
    inc = np.array([s.inconclusive for s in sets])
    reg = np.array([s.regression for s in sets])
    rel = f"{cost / base_cost:.2f}" if base_cost else "-"
    line = (f"{name:<14} {len(sets):>4} {cost:>7.0f} {rel:>5} {inc.mean():>6.2f} {np.median(inc):>5.0f}"
            f" {np.mean(inc <= 2):>6.0%} {reg.mean():>5.2f} {np.mean(reg == 0):>6.0%}"
            f" {np.mean((inc <= 2) & (reg == 0)):>7.0%} {np.mean([s.exit3 for s in sets]):>6.2f}"
            f" {np.mean([s.exit1 for s in sets]):>6.2f}")
    return line, cost


HEADER = (f"{'rule':<14} {'sets':>4} {'pt-rnds':>7} {'x now':>5} {'INC/20':>6} {'p50':>5} {'<=2':>6}"
          f" {'REG/20':>5} {'REG=0':>6} {'target':>7} {'exit3':>6} {'exit1':>6}")


def top_points(name: str, sets: list[SetResult], k: int) -> str:
    total: Counter = Counter()
    for s in sets:
        total.update(s.keys)
    n = sum(v for key, v in total.items() if not key.startswith("REGRESSION"))
    why: Counter = Counter()
    for s in sets:
        why.update(s.why)
    parts = [f"{key.replace(',hidden=4096', '')} {v / len(sets):.2f}" for key, v in total.most_common(k)]
    if not parts:
        return f"{name:<14} none"
    kinds = ", ".join(f"{w} {c / max(n, 1):.0%}" for w, c in why.most_common())
    return f"{name:<14} {n / len(sets):.2f}/set ({kinds})\n" + " " * 15 + "; ".join(parts)


def measured(paths: list[str], template_keys: set[str], label: str) -> list[str]:
    """The real runs gated the same way (every ordered pair once), summed over every five-run subset."""
    runs = [store.load(p) for p in paths]
    runs = [replace(r, cases=tuple(replace(c, impls=tuple(i for i in c.impls
                                                         if f"{c.case_id}/{i.name}" in template_keys))
                                   for c in r.cases if any(f"{c.case_id}/{i.name}" in template_keys
                                                           for i in c.impls))) for r in runs]
    pair = {}
    keys: Counter = Counter()
    why: Counter = Counter()
    for a, b in itertools.permutations(range(len(runs)), 2):
        res = gate(runs[a], runs[b])
        pair[(a, b)] = (res.count("INCONCLUSIVE"), res.count("REGRESSION"), res.exit_code)
        for v in res.undecided:
            keys[v.key.replace(",hidden=4096", "")] += 1
            least = min(v.rounds_base, v.rounds_cur)
            why["a side <=4 rounds" if least <= 4 else "both at the cap" if least == 8 else "other"] += 1
    cost = np.mean([sum(i.timing.n_rounds for c in r.cases for i in c.impls if i.timing) for r in runs])
    subsets = list(itertools.combinations(range(len(runs)), RUNS_A_SET))
    inc = np.array([sum(pair[p][0] for p in itertools.permutations(s, 2)) for s in subsets])
    reg = np.array([sum(pair[p][1] for p in itertools.permutations(s, 2)) for s in subsets])
    e3 = np.array([sum(pair[p][2] == 3 for p in itertools.permutations(s, 2)) for s in subsets])
    e1 = np.array([sum(pair[p][2] == 1 for p in itertools.permutations(s, 2)) for s in subsets])
    return [f"{label}: {len(runs)} real runs, {len(subsets)} five-run subsets, {cost:.0f} gated point-rounds a run",
            f"  INCONCLUSIVE per 20 pairs mean {inc.mean():.2f} (min {inc.min()}, median {np.median(inc):.0f}, "
            f"max {inc.max()}), <=2 in {np.mean(inc <= 2):.0%}; REGRESSION mean {reg.mean():.2f}; "
            f"exit-3 pairs mean {e3.mean():.2f} (min {e3.min()}, max {e3.max()}); exit-1 pairs mean {e1.mean():.2f}",
            f"  per 20 pairs ({', '.join(f'{w} {c / max(1, sum(why.values())):.0%}' for w, c in why.most_common())}): "
            + "; ".join(f"{k} {20 * v / len(pair):.2f}" for k, v in keys.most_common(8))]


def main() -> None:
    global _TEMPLATE, _SEED
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="*", default=DEFAULT)
    ap.add_argument("--sets", type=int, default=None, help="sets of five simulated runs a rule (overrides :N)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rules", default=DEFAULT_RULES,
                    help="rule[:sets],... (rules: " + ", ".join(RULES).replace("%", "%%") + ")")
    ap.add_argument("--top", type=int, default=6, help="inconclusive points listed a rule")
    ap.add_argument("--anchored", type=int, default=0, metavar="REPS",
                    help="replay each given real run, its own rounds first in measured order, then rounds of the "
                         "others; sets: every five-run subset, REPS times (rule:N ignored)")
    ap.add_argument("--measured", nargs="*", metavar="RUN", default=None,
                    help="also gate these real runs (no RUN: the pooled ones) over every five-run subset")
    args = ap.parse_args()
    plan = {}
    for item in args.rules.split(","):
        name, _, n = item.partition(":")
        plan[name] = args.sets or int(n or 60)
    rules = list(plan)
    _SEED = args.seed
    t0 = time.time()
    template = store.load(args.runs[0])
    gated = {f"{c.case_id}/{r.name}" for c in template.cases for r in c.impls if not r.protocol.get("part")}
    _POOL.update({k: v for k, v in pools(args.runs).items() if k in gated})
    _LOG_MEDIAN.update({id(g): math.log(float(np.median(g))) for v in _POOL.values() for g in v})
    _TEMPLATE = template
    if args.anchored:
        _ANCHORS.extend({k: v for k, v in pools([p]).items() if k in _POOL} for p in args.runs)
        _LOG_MEDIAN.update({id(g): math.log(float(np.median(g))) for a in _ANCHORS for v in a.values() for g in v})
    sizes = [len(v) for v in _POOL.values()]
    print(f"{len(_POOL)} gated points, {min(sizes)}-{max(sizes)} rounds each in {len(args.runs)} runs; "
          f"sets of five simulated runs (20 ordered pairs each), seed {args.seed}")
    if args.measured is not None:
        for line in measured(args.measured or args.runs, set(_POOL), "measured"):
            print(line, flush=True)
    print(HEADER, flush=True)
    done: dict[str, list[SetResult]] = {}
    ctx = multiprocessing.get_context("fork")
    base_cost = None
    with ctx.Pool(args.jobs) as workers:
        for name in rules:
            if args.anchored:
                reps = 1 if name == "now" else args.anchored  # now replays the real runs exactly
                done[name] = anchored_sets(workers.map(one_replicate, [(name, i) for i in range(reps)], chunksize=1))
            else:
                done[name] = workers.map(one_set, [(name, i) for i in range(plan[name])], chunksize=1)
            line, cost = summary(name, done[name], base_cost)
            if name == "now":
                base_cost = cost
                line, _ = summary(name, done[name], base_cost)
            print(line, flush=True)
    print("\nwhere the INCONCLUSIVE (and any REGRESSION) verdicts fall, per set of 20 pairs:")
    for name in rules:
        print(top_points(name, done[name], args.top))
    for name in rules[:1]:
        ex = [e for s in done[name] for e in s.examples][:5]
        if ex:
            print(f"\nexamples ({name}): " + "\n  ".join(["", *ex]))
    print(f"\n{time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
