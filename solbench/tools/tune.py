"""Autotuning: measure every valid configuration of an implementation's ``tune:`` space, per case.

Grid search with a budget and early stopping (spaces of a kernel's launch parameters are small;
a sampler such as optuna would only pay off for spaces far larger than a per-case grid)::

    for each case:
        inputs = prepare_case(...)                         # shared by every configuration
        hand-picked = check and time the implementation as declared (its fn defaults, its params)
        best = hand-picked
        for config in grid(space) meeting every constraint, at most max_configs:
            check, then time config; stop sampling it once the 95% CI of its median lies
            above best x (1 + margin) ("beaten": it cannot win)
            new best?  else count a miss; stop after `patience` misses in a row
        (every trial in the implementation's worker process, as in `solbench run`, a multi-rank
         workload's in its rank group: a trial that crashes, hangs past `timeout_s` or tampers with its
         process is that trial's status, crashed, timeout or reward_hack, and the next trial gets a
         fresh worker)
        confirm: in rounds, each round one measurement of hand-picked and one of the winner
                 (the order alternating round by round); the rounds are the units, not the samples
                 (samples of one measurement share its load, clocks and cache state): the verdict
                 is `solbench compare`'s over rounds (the t test on the log round medians,
                 analysis.sequential.log_ratio, paired by round from PAIRED_MIN_ROUNDS rounds on):
                 FASTER, SAME (CI within +-min_gain), SLOWER or INCONCLUSIVE. `confirm_rounds`
                 rounds first; while INCONCLUSIVE, one more round at a time up to
                 `confirm_max_rounds`, every look at alpha / K and confidence 1 - 0.05 / K for the
                 K looks the cap allows (Bonferroni, analysis.sequential.look_levels), so adding
                 rounds until something is decided does not inflate the error rate

Every configuration's result and the winner go into a :class:`TuneResult`; :func:`tuned_file`
turns the confidently FASTER winners into the tuned-configuration file that ``solbench run
--tuned FILE`` applies with :meth:`TunedConfig.apply` (elsewhere hand-picked stays). Nothing here
writes files: the CLI does.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from solbench.analysis.stats import median, median_ci
from solbench.device import threads
from solbench.device.timer import resolved_launch
from solbench.errors import ConfigError, RunInterrupted
from solbench.measure.criteria import BeatOrStop as BeatOrStop  # re-exported: tune's early stop, kept by the worker

# re-exported: tuned files are read by the plan layer (run --tuned) and written here
from solbench.plan.options import check_counts
from solbench.plan.tuned import TUNED_FORMAT, TunedConfig, declared, out_of_space, undeclared
from solbench.plan.tuned import load_tuned as load_tuned
from solbench.plan.tuned import parse_tuned as parse_tuned
from solbench.results.model import FAILED_STATUSES, Environment, ImplResult
from solbench.workload.expr import ExprError
from solbench.workload.schema import Implementation
from solbench.workload.tune_space import ConstraintError, config_label, constraint_names, valid_configs

Progress = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class TuneOptions:
    """Knobs of a tuning run; timing knobs as in ``solbench run``, shorter budget by default."""

    workloads: tuple[str, ...] = ()
    impls: tuple[str, ...] = ()
    max_configs: int | None = None  # valid configurations measured per case (None: all)
    patience: int | None = None  # stop after this many configurations in a row without a new best
    margin: float = 0.02  # abandon a configuration whose median's CI lies above best x (1 + margin)
    confirm_rounds: int = 3  # rounds of the confirmation before its first verdict (2 at least to decide)
    confirm_max_rounds: int = 8  # rounds added one at a time while the verdict is INCONCLUSIVE, up to this
    min_gain: float = 0.01  # the confirmation calls the winner SAME when its CI lies within +-min_gain
    target_rel_ci: float = 0.01
    min_samples: int = 10
    max_samples: int = 1000
    budget_s: float = 0.5
    warmup: int = 3
    input_sets: int = 2
    seed: int = 0
    flush: str = "clean"  # as `solbench run` (README "How solbench measures")
    # as `solbench run --launch`: "auto" is a CUDA graph's replay for the cold timer on a GPU with CUPTI, so
    # a configuration wins under the launch conditions of the run that applies it
    launch: str = "auto"
    timeout_s: float = 120.0  # per trial, set-up and compilation included, as `solbench run --timeout`

    def __post_init__(self) -> None:
        """ConfigError (exit 2) for knobs no tuning can honour, as :class:`solbench.plan.options.RunOptions`
        refuses them: NaN would disable the rule it sets (a margin that never abandons, a gain that never
        decides), inf would make it decide everything."""
        for name, flag in (("budget_s", "--budget"), ("target_rel_ci", "--target"), ("min_gain", "--min-gain"),
                           ("timeout_s", "--timeout")):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{flag} must be a positive finite number, got {value!r}")
        if not (isinstance(self.margin, int | float) and math.isfinite(self.margin) and self.margin >= 0):
            raise ConfigError(f"--margin must be a finite number at least 0, got {self.margin!r}")
        if self.launch not in ("auto", "stream", "graph"):
            raise ConfigError(f"--launch must be 'auto', 'stream' or 'graph', got {self.launch!r}")
        # confirm_rounds 0: tuned, then ValueError "no samples" pooling an empty confirmation
        check_counts((("--min-samples", self.min_samples, 1), ("--confirm-rounds", self.confirm_rounds, 1),
                      ("--confirm-max-rounds", self.confirm_max_rounds, 2),  # one round: no spread between rounds
                      ("TuneOptions.input_sets", self.input_sets, 1),  # `tune` has no option for these two
                      ("TuneOptions.warmup", self.warmup, 0)))
        # None: no bound. Below 1, max_configs measured none (-1: all but the last); patience 0 never stopped
        check_counts(tuple((flag, value, 1) for flag, value in (("--max-configs", self.max_configs),
                                                                ("--patience", self.patience)) if value is not None))
        if self.min_samples > self.max_samples:
            raise ConfigError(f"--min-samples {self.min_samples} is larger than --max-samples {self.max_samples}")
        if self.confirm_rounds > self.confirm_max_rounds:
            raise ConfigError(f"--confirm-rounds {self.confirm_rounds} is larger than --confirm-max-rounds "
                              f"{self.confirm_max_rounds}")

    @property
    def confirm_looks(self) -> int:
        """How many verdicts the confirmation may look at: one at each round count from the first that
        can decide (two rounds) up to the cap."""
        return self.confirm_max_rounds - max(self.confirm_rounds, 2) + 1


@dataclass(frozen=True)
class Trial:
    """One configuration measured on one case."""

    params: dict[str, Any]
    status: str  # an ImplResult status: "ok", "incorrect", "error", "skipped", ...
    message: str = ""
    median: float | None = None  # seconds
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    stop_reason: str = ""  # the measurement loop's, or "beaten" (abandoned early)
    samples: tuple[float, ...] = ()
    # where it failed: the worker's last output (its traceback, a CUDA error), which the message (the
    # harness's one line: "the worker process was killed by SIGSEGV") does not hold; bounded by the pool
    log_tail: str = ""
    # how its calls were timed, as its ImplResult's protocol says: "graph" (a CUDA graph's replay), "stream"
    # (launched; under --launch graph where a call could not be captured: graph_fallback says why), "mixed"
    # (the confirmation's rounds, some of each); "": none recorded (the CPU)
    launch: str = ""
    graph_fallback: str = ""


@dataclass(frozen=True)
class CaseTuning:
    """Every configuration tried on one case, the winner, and the confirmation against hand-picked."""

    workload: str
    impl: str
    case_id: str
    dtype: str
    case_params: dict[str, Any]
    hand_picked: Trial  # the implementation as declared
    trials: tuple[Trial, ...] = ()
    filtered: int = 0  # configurations the constraints excluded
    untried: int = 0  # valid configurations not measured (max_configs or patience)
    winner: dict[str, Any] | None = None  # fastest correct configuration
    # the confirmation's measurements, every round's samples pooled (median: the median of the round
    # medians), or the first that failed
    confirm_hand_picked: Trial | None = None
    confirm_winner: Trial | None = None
    # hand-picked median / winner median of each confirmation round, in the order measured
    confirm_round_ratios: tuple[float, ...] = ()
    # t interval of winner / hand-picked over the rounds (the geometric mean of the round ratios), at
    # confidence 1 - 0.05 / K (K: the looks the rounds' cap allows), the one the verdict used
    confirm_ratio_ci: tuple[float, float] | None = None
    confirm_p: float | None = None  # two-sided p of the same t over rounds (the verdict's tests: alpha 0.01 / K)
    verdict: str = ""  # FASTER, SAME, SLOWER, INCONCLUSIVE ("" when nothing was confirmed; SAME, unconfirmed,
    #                    when the winner is the hand-picked configuration itself)
    space: dict[str, list[Any]] = field(default_factory=dict)  # the tune: space tuned ({}: not recorded)
    constraints: list[str] = field(default_factory=list)  # and its constraints,
    scope: dict[str, Any] = field(default_factory=dict)  # evaluated at the case's names ({}: not recorded)

    @property
    def gain(self) -> float | None:
        """Hand-picked / winner in the confirmation (> 1: the tuned one is faster): the geometric mean of
        the rounds' ratios of medians (1 / the ratio ``confirm_ratio_ci`` brackets)."""
        if self.confirm_round_ratios:
            return math.exp(sum(math.log(r) for r in self.confirm_round_ratios) / len(self.confirm_round_ratios))
        a, b = self.confirm_hand_picked, self.confirm_winner
        if a is None or b is None or not a.median or not b.median:
            return None
        return a.median / b.median

    @property
    def launched_apart(self) -> str:
        """How hand-picked and the winner were launched where that differs (the confirmation's measurements,
        else the search's), with why a call fell back to the stream; "" where they were timed alike. A
        configuration whose call cannot be captured is launched on the stream under --launch graph, paying
        the launch overhead a replay leaves out: beside a replay, its time is not like for like."""
        hand, tuned = self.confirm_hand_picked, self.confirm_winner
        if tuned is None:  # nothing confirmed: the search's measurements
            hand, tuned = self.hand_picked, next((t for t in self.trials if t.params == self.winner), None)
        if hand is None or tuned is None or hand.status != "ok" or tuned.status != "ok" or hand.launch == tuned.launch:
            return ""
        why = next((t.graph_fallback for t in (hand, tuned) if t.graph_fallback), "")
        how = {launch: _LAUNCHED.get(launch, f"launched as {launch!r}") for launch in (hand.launch, tuned.launch)}
        return f"hand-picked was {how[hand.launch]}, the winner {how[tuned.launch]}" + (
            f" ({why})" if why else "")


_LAUNCHED = {"graph": "replayed from a CUDA graph", "stream": "launched on the stream",
             "mixed": "launched on the stream in some rounds", "": "timed with no launch recorded"}


@dataclass(frozen=True)
class TuneResult:
    """A whole tuning run."""

    created: str
    environment: Environment
    workload_files: tuple[str, ...]
    options: dict[str, Any]
    cases: tuple[CaseTuning, ...] = field(default=())
    complete: bool = True  # False: interrupted (Ctrl-C, SIGTERM)
    # every workload planned -> what it declares now (plan.tuned.declared: its implementations with a tune:
    # space, its case ids): the tuned file's older entries naming anything else in it are dropped
    declared: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def tune(files: Sequence[str | Path], options: TuneOptions = TuneOptions(), *, device: str = "auto",
         progress: Progress | None = None, on_case: Callable[[TuneResult], None] | None = None) -> TuneResult:
    """Tune every implementation that declares ``tune:`` in ``files``, case by case; ``on_case`` gets the
    result so far (``complete`` False) after each case (the CLI saves it).

    Every trial runs in a worker process of the implementation (:class:`solbench.measure.pool.Pool`):
    one that crashes, hangs or leaves its process untrustworthy is that trial's status, and the worker
    is replaced; a multi-rank workload's trial runs in a rank group, one process a rank
    (:class:`solbench.execute.group.GroupExecutor`, as ``run`` measures it). Raises
    :class:`solbench.errors.RunInterrupted` on Ctrl-C, holding the cases tuned so far (``complete`` False)."""
    from solbench.device.detect import detect
    from solbench.execute.group import with_groups
    from solbench.measure.pool import Pool
    from solbench.plan.device import refuse_launch
    from solbench.plan.workloads import plan

    info = detect(device)
    refuse_launch(options.launch, info.kind)  # as run refuses --launch graph where it cannot be honoured
    planned = plan(files, info.kind, options.workloads, options.impls)  # -i naming nothing: refused, as in run
    tunable = [(p, name, impl) for p in planned for name, impl in p.spec.implementations.items()
               if impl.tune is not None]
    targets = [t for t in tunable if not options.impls or t[1] in options.impls]
    if not targets:
        raise ConfigError(f"no implementation with a tune: space in {', '.join(map(str, files))}"
                          + (f" named {', '.join(options.impls)}" if options.impls else ""))
    untuned = sorted(set(options.impls) - {name for _, name, _ in targets})
    if untuned:  # tuning the others alone would read as if these had been tuned too
        raise ConfigError(f"-i {', '.join(untuned)}: no tune: space in the selected workloads "
                          f"(tunable: {', '.join(sorted({name for _, name, _ in tunable}))})")
    bare = sorted(set(options.workloads) - {p.spec.name for p, _, _ in targets})
    if bare:  # as for -i
        raise ConfigError(f"-w {', '.join(bare)}: no implementation with a tune: space"
                          + (f" named {', '.join(options.impls)}" if options.impls else ""))
    for p, name, impl in targets:
        validate(p, name, impl)
    emit = progress or (lambda event, data: None)
    emit("start", {"cases": sum(len(p.cases) for p, _, _ in targets)})
    pool = Pool(info.kind, info.index, threads=threads.policy(0, info.kind))  # the run's CPU thread policy
    # every worker with the driver's CUDA work queues: the pool's one-queue policy (measure.queues) keys on
    # (workload, implementation), which every configuration shares, so a worker replaced after a fault
    # would run the configurations after it with one queue (several streams serialized), unlike the rest
    pool.queues = None
    # a multi-rank workload's trials in a rank group (one process a rank, as run measures them)
    workers = with_groups(pool, [p for p, _, _ in targets], info.kind)
    launch = resolved_launch(options.launch, "cold", info.kind)
    now = {p.spec.name: declared(p.spec, info.kind) for p in planned}
    cases: list[CaseTuning] = []
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")  # one for every result saved on the way

    def result(complete: bool) -> TuneResult:
        opts = {k: v for k, v in dataclasses.asdict(options).items() if k not in ("workloads", "impls")}
        opts["launch"] = launch  # as measured ("auto" resolved)
        return TuneResult(created, info.environment(), tuple(str(f) for f in files), opts, tuple(cases), complete,
                          now)

    try:
        for p, name, impl in targets:
            for case in p.cases:
                emit("impl", {"case": case.id, "impl": name})
                cases.append(_tune_case(p, name, impl, case, info.kind, (workers, info.l2_bytes), options, emit))
                emit("case_done", {"case": f"{case.id} {name}"})
                if on_case is not None:
                    on_case(result(complete=False))
            workers.retire([(p.spec.name, name)])  # the next implementation's trials start in a fresh process
    except KeyboardInterrupt:  # the cases tuned so far are kept, not lost with the one in progress
        raise RunInterrupted(result(complete=False)) from None
    finally:
        workers.close()
    return result(complete=True)


def validate(p: Any, name: str, impl: Implementation) -> None:
    """Tuned names must not shadow case parameters or tensors; constraints must parse and name
    only tuned or case parameters. A ConfigError names the file and line."""
    from solbench.config.yamlio import read_yaml

    assert impl.tune is not None
    loc: list[str | int] = ["workloads", p.index, "implementations", name, "tune"]
    case_names = {k for c in p.cases for k in c.scope}
    taken = case_names | set(p.spec.inputs) | set(p.spec.outputs)
    for key in impl.tune.space:
        if key in taken:
            raise read_yaml(p.path).error([*loc, "space", key], f"tuned parameter {key!r} is also a case "
                                          "parameter or a tensor name; rename it")
    known = case_names | set(impl.tune.space)
    for j, text in enumerate(impl.tune.constraints):
        try:
            unknown = sorted(constraint_names(text) - known)
        except ExprError as exc:
            raise read_yaml(p.path).error([*loc, "constraints", j], str(exc)) from None
        if unknown:
            raise read_yaml(p.path).error([*loc, "constraints", j], f"unknown parameter {unknown[0]!r} "
                                          f"(known: {', '.join(sorted(known - {'dtype'}))})")
    for case in p.cases:  # one that parses may still fail to evaluate (n // 0): say so before any trial
        try:
            valid_configs(impl.tune.space, impl.tune.constraints, case.scope)
        except ConstraintError as exc:
            raise read_yaml(p.path).error([*loc, "constraints", exc.index], str(exc)) from None


def _trial(params: Mapping[str, Any], r: ImplResult) -> Trial:
    t = r.timing
    if t is None:
        return Trial(dict(params), r.status, r.message, log_tail=r.log_tail)
    return Trial(dict(params), r.status, r.message, t.median, t.ci_low, t.ci_high, t.n, t.stop_reason,
                 t.samples, r.log_tail, str(r.protocol.get("launch", "")), str(r.protocol.get("graph_fallback", "")))


def _tune_case(p: Any, name: str, impl: Implementation, case: Any, device: str,
               worker: tuple[Any, int | None], options: TuneOptions, emit: Progress) -> CaseTuning:
    """Hand-picked, then the grid with early stopping, then the confirmation."""
    from solbench.measure.worker import MeasureSettings, Task

    assert impl.tune is not None
    settings = MeasureSettings.of(options, device)  # the cold timer on CUDA; the criterion is tune's own
    settings = dataclasses.replace(settings, threads=threads.policy(0, device))  # the run's CPU thread policy
    workers, l2_bytes = worker  # the worker processes (one for this implementation) and the L2 size
    key = (p.spec.name, name)

    def measure(label: str, variant: Implementation, bound: float | None = None) -> ImplResult:
        spec = p.spec.model_copy(update={"implementations": {**p.spec.implementations, label: variant}})
        task = Task(spec, case, label, str(p.path.parent.absolute()), device, settings, l2_bytes, beaten_above=bound)
        return workers.run(key, task, options.timeout_s)  # a crash, hang or tampering: its status, a fresh worker

    hand = _trial(impl.params, measure(name, impl))
    emit("trial", {"case": case.id, "impl": name, "label": "hand-picked", "trial": hand})
    valid, filtered = valid_configs(impl.tune.space, impl.tune.constraints, case.scope)
    best = hand.median if hand.status == "ok" else None
    trials: list[Trial] = []
    misses = 0
    for config in valid[: options.max_configs]:
        variant = impl.model_copy(update={"params": {**impl.params, **config}})
        bound = best * (1 + options.margin) if best is not None else None
        t = _trial(config, measure(f"{name}[{config_label(config)}]", variant, bound))
        trials.append(t)
        emit("trial", {"case": case.id, "impl": name, "label": config_label(config), "trial": t})
        if t.status == "ok" and t.median is not None and (best is None or t.median < best):
            best, misses = t.median, 0
        else:
            misses += 1
        if options.patience and misses >= options.patience:
            break
    ok = [t for t in trials if t.status == "ok" and t.median is not None and t.stop_reason != "beaten"]
    winner = min(ok, key=lambda t: t.median or 0.0) if ok else None
    result = CaseTuning(case.workload, name, case.id, case.dtype, dict(case.params), hand, tuple(trials),
                        filtered, len(valid) - len(trials), winner.params if winner else None,
                        space={k: list(v) for k, v in impl.tune.space.items()},
                        constraints=list(impl.tune.constraints), scope=dict(case.scope))
    if winner is None or hand.status != "ok":
        return result
    tuned = impl.model_copy(update={"params": {**impl.params, **winner.params}})
    if tuned.params == impl.params:  # the winner is the configuration as declared: nothing to confirm
        return dataclasses.replace(result, verdict="SAME")
    tuned_label = f"{name}[{config_label(winner.params)}]"

    def measure_round(i: int) -> tuple[Trial, Trial]:
        if i % 2:  # every other round the winner first: neither always follows the other
            w = _trial(winner.params, measure(tuned_label, tuned))
            return _trial(impl.params, measure(name, impl)), w
        h = _trial(impl.params, measure(name, impl))
        return h, _trial(winner.params, measure(tuned_label, tuned))

    return confirm_in_rounds(result, measure_round, options)


ALPHA = 0.01


CONFIDENCE = 0.95


def confirm_in_rounds(result: CaseTuning, measure_round: Callable[[int], tuple[Trial, Trial]],
                      options: TuneOptions) -> CaseTuning:
    """The confirmation: ``measure_round(i)`` measures round i (hand-picked, winner), ``confirm_rounds``
    rounds, then one more while the verdict is INCONCLUSIVE, up to ``confirm_max_rounds``. Stops at the
    first failed measurement (its verdict INCONCLUSIVE, the failed trial recorded)."""
    looks = options.confirm_looks
    hands: list[Trial] = []
    wins: list[Trial] = []
    while True:
        h, w = measure_round(len(hands))
        hands.append(h)
        wins.append(w)
        failed = h.status != "ok" or w.status != "ok"
        if len(hands) < options.confirm_rounds and not failed:
            continue
        out = confirm(result, hands, wins, options.min_gain, looks)
        if failed or out.verdict != "INCONCLUSIVE" or len(hands) >= options.confirm_max_rounds:
            return out


def confirm(result: CaseTuning, hand: Sequence[Trial], win: Sequence[Trial], min_gain: float,
            looks: int = 1) -> CaseTuning:
    """Attach the confirmation rounds (``hand[i]``, ``win[i]``: round i's measurements) and `solbench
    compare`'s verdict over rounds on winner / hand-picked, tested at alpha 0.01 / ``looks`` with an
    interval at confidence 1 - 0.05 / ``looks`` (the share of one look of ``looks``).

    The rounds are the units: each round's median is one value, and the ratio is decided by the t test
    on the log round medians (analysis.sequential.log_ratio, paired by round from PAIRED_MIN_ROUNDS
    rounds on). Samples of one measurement share its load, clocks and cache state; pooled as if
    independent, they called two measurements of the same code 1.6x apart FASTER. INCONCLUSIVE below
    two rounds or MIN_SAMPLES samples a side, or where a measurement failed.
    """
    from solbench.analysis.compare import comparison_verdict
    from solbench.analysis.sequential import log_ratio, look_levels
    from solbench.analysis.significance import MIN_SAMPLES

    if len(hand) != len(win) or not hand:
        raise ValueError(f"confirmation rounds: {len(hand)} of hand-picked, {len(win)} of the winner")
    ok = all(t.status == "ok" and t.samples for t in (*hand, *win))
    result = dataclasses.replace(result, confirm_hand_picked=_pooled(hand), confirm_winner=_pooled(win))
    if not ok:
        return dataclasses.replace(result, verdict="INCONCLUSIVE")
    ga = [np.asarray(t.samples, dtype=float) for t in hand]
    gb = [np.asarray(t.samples, dtype=float) for t in win]
    ratios = tuple(float(np.median(a) / np.median(b)) for a, b in zip(ga, gb, strict=True))
    result = dataclasses.replace(result, confirm_round_ratios=ratios)
    t = log_ratio(ga, gb, paired=True)  # b / a: winner / hand-picked; None with one round
    if t is None or min(sum(g.size for g in ga), sum(g.size for g in gb)) < MIN_SAMPLES:
        return dataclasses.replace(result, verdict="INCONCLUSIVE")
    alpha_k, confidence_k = look_levels(ALPHA, CONFIDENCE, looks)
    low, high = t.interval(confidence_k)
    p = min(1.0, 2.0 * min(t.p_slower(), t.p_faster()))
    return dataclasses.replace(result, confirm_ratio_ci=(low, high), confirm_p=p,
                               verdict=comparison_verdict(low, high, p <= alpha_k, min_gain, p <= 2 * alpha_k))


def _pooled(rounds: Sequence[Trial]) -> Trial:
    """One Trial from the rounds of one configuration: the first that failed, else their samples pooled,
    the median the median of the round medians and its CI over rounds (analysis.rounds)."""
    from solbench.analysis.rounds import summarize

    bad = next((t for t in rounds if t.status != "ok" or not t.samples), None)
    if bad is not None:
        return bad
    samples = tuple(s for t in rounds for s in t.samples)
    labels = tuple(i for i, t in enumerate(rounds) for _ in t.samples)
    launches = {t.launch for t in rounds}
    launched = {"launch": launches.pop() if len(launches) == 1 else "mixed",
                "graph_fallback": next((t.graph_fallback for t in rounds if t.graph_fallback), "")}
    if len(rounds) == 1:
        lo, hi = median_ci(samples)
        return Trial(dict(rounds[0].params), "ok", "", median(samples), lo, hi, len(samples), "1 round", samples,
                     **launched)
    s = summarize(samples, labels)
    return Trial(dict(rounds[0].params), "ok", "", s.median, s.ci_low, s.ci_high, len(samples),
                 f"{len(rounds)} rounds", samples, **launched)


# ------------------------------------------------------------------ serialisation


def result_dict(result: TuneResult) -> dict[str, Any]:
    """A JSON-ready dict of a tuning run (seconds; samples kept)."""
    data = dataclasses.asdict(result)
    data["format"] = "solbench-tune/1"
    for case, obj in zip(data["cases"], result.cases, strict=True):
        case["gain"] = obj.gain
        case["launched_apart"] = obj.launched_apart
    return data


def faster_cases(result: TuneResult) -> list[CaseTuning]:
    """The cases whose winner the confirmation found FASTER than hand-picked: what the tuned file keeps."""
    return [c for c in result.cases if c.winner is not None and c.gain is not None and c.verdict == "FASTER"]


def outdated(c: CaseTuning, params: Mapping[str, Any]) -> bool:
    """Whether an older entry's configuration ``params`` is not one of the space tuned now, or one its
    constraints exclude on the case (``run --tuned`` refuses both; the search never measures it again),
    or this run measured it again and found it failing, or found no configuration faster than hand-picked
    (SAME, SLOWER, or none correct and unbeaten)."""
    if c.space and out_of_space(params, c.space, c.constraints, c.scope or None) is not None:
        return True
    tried = next((t for t in c.trials if t.params == params), None)
    if tried is None:  # not measured this time (--max-configs, --patience): nothing new about it
        return False
    return tried.status in FAILED_STATUSES or (c.hand_picked.status == "ok" and c.verdict in ("SAME", "SLOWER", ""))


def tuned_file(result: TuneResult, existing: TunedConfig | None = None) -> str:
    """The tuned-configuration file: the winner of every case where the confirmation found it
    FASTER than hand-picked, merged over ``existing`` entries (same device spec) but for those this
    run found :func:`outdated` (hand-picked stays there) and those of a workload it planned naming an
    implementation or case the workload no longer declares (``run --tuned`` applies them to nothing)."""
    spec_id = result.environment.spec_id
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    if existing is not None and existing.spec_id == spec_id:
        entries.update({k: e for k, e in existing.entries.items()
                        if k[0] not in result.declared or undeclared(k, result.declared[k[0]]) is None})
    for c in result.cases:
        key = (c.workload, c.impl, c.case_id)
        if key in entries and outdated(c, entries[key]["params"]):
            del entries[key]
    for c in faster_cases(result):
        gain = c.gain
        assert c.confirm_winner is not None and c.confirm_hand_picked is not None and gain is not None
        entries[(c.workload, c.impl, c.case_id)] = {
            "workload": c.workload, "impl": c.impl, "case_id": c.case_id, "params": c.winner,
            "median_s": c.confirm_winner.median, "hand_picked_median_s": c.confirm_hand_picked.median,
            "gain": gain, "ratio_ci": c.confirm_ratio_ci, "p": c.confirm_p, "tuned": result.created,
            **({"launch": result.options["launch"]} if "launch" in result.options else {})}
    data = {"format": TUNED_FORMAT, "spec_id": spec_id, "device_name": result.environment.device_name,
            "entries": [entries[k] for k in sorted(entries)]}
    return json.dumps(data, indent=1) + "\n"
