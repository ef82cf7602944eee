"""What the parent sees of a task, and the checks of a worker's report against it.

A worker streams every timed sample to the parent the moment the timer returns it (before the
sample is stored, verified or shown to anything else), and the parent notes when each arrived
(its own monotonic clock). When the result comes, it must agree with what the parent saw::

    samples        exactly the streamed values, in order (a report rewritten after the fact,
                   e.g. a samples list scaled in the loop's frame, differs)
    counts         min(min, max samples) <= n <= max(min, max samples); every sample finite, >= 0
    median, CI     recomputed here from the samples (never taken from the worker)
    shape          a timing only with status ok; ok only with a timing and (unless a part) a
                   passed correctness; no score (the parent scores); the task's own name; a part
                   (``protocol["part"]``: timed, never scored nor held to T_SOL) only where the
                   workload declares the implementation one, and then that part
    wall time      see below

The wall-time bound. Between the arrivals of sample i-1 and sample i the worker did, in order:
what followed sample i-1 (verification, when ``v`` said one follows: such gaps are left out),
a clock probe, the stopping rule, and sample i itself, whose timed window lies inside the gap.
Over the kept gaps (m of them, sample times summing to R, observed total W)::

    W  =  R x (graph calls per sample)  +  harness work per sample x m  +  time not on a CPU
    honest:   W <= (R x c + m x h) x L + A

where ``c`` is the graph timer's calls per sample (1 otherwise, capped at the timer's 1000), ``h``
bounds the harness's own work between two samples (HARNESS_S, plus the cold timer's spin, host
launch and L2 flush), ``L`` is how much slower the whole machine may run than when unloaded (time slicing
stretches the timed windows and the harness's work alike, so L is the share of a CPU the worker
gets, not a per-sample noise) and ``A`` absorbs one late wake-up of the parent (reading the last
sample late makes W longer). A report is ``reward_hack`` when::

    W > WALL_FACTOR x (R x c + m x h) + WALL_SLACK_S          (WALL_FACTOR = 10, WALL_SLACK_S = 0.5 s)

so an honest run trips it only on a machine that gives the worker less than a tenth of a CPU
throughout the phase *and* adds half a second on top. ``c`` and the spin, launch and flush times are
the worker's word (its result's protocol: the graph timer's calls per replay, the cold timer's spin),
taken only where the task's timer has them (the parent knows the timer and the device: ``c`` for the
graph timer, the rest for the cold and CUPTI timers on CUDA); a worker can put any key in its protocol,
and a claimed 1000 calls a sample let samples 1000x too small pass. It catches a worker whose samples claim a
fraction of the time it was watched working, when the calls dominate the harness's own work:
a call of T seconds reported f times faster is caught once T x (1 - 10/f) > 10 h + A/m (with
h = 2 ms on the CPU: calls of ~25 ms and up, reported 20x or more faster). Smaller calls are
protected by the streamed samples and the tamper checks, not by this bound. A worker that
controls its own pipe can also pace forged messages; the bound is a backstop, not a proof.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from solbench.analysis.stats import median, median_ci
from solbench.results.model import ImplResult

WALL_FACTOR = 10.0
WALL_SLACK_S = 0.5
HARNESS_S = 2e-3  # stopping rule, clock probe, stream message between two samples (each well under 1 ms)
FLUSH_S = 2e-3  # the cold timer's L2 flush (2 x L2 zeroed and read back: < 1 ms on an H200)
SORT_S_PER_SAMPLE = 50e-9  # the stopping rule sorts the samples so far each time
MAX_SPIN_US = 6400.0  # the cold timer's longest spin (solbench.device.timer._MAX_SPIN_US)
MAX_GRAPH_CALLS = 1000  # the graph timer's most calls per replay
MAX_SAMPLE_S = 3600.0
STOP_REASONS = frozenset({"converged", "budget", "max_samples", "beaten"})  # a worker's; the parent adds "allocated"


class Forged(Exception):
    """The worker's report contradicts what the parent saw: reward_hack."""


@dataclass
class Watch:
    """One task as the parent sees it: the streamed samples and when each arrived."""

    impl: str
    min_samples: int
    max_samples: int
    clock: Callable[[], float] = time.monotonic
    # the task's timer ("cpu", "cold", "cupti", "graph") and device: which of the protocol's knobs the
    # wall-time bound takes (wall_problem); None: every one the protocol names
    timer: str | None = None
    device: str | None = None
    # the part the workload declares the implementation ("compute", "comm", "floor"; None: none), where
    # known (Watch.of): a result's protocol["part"] must say the same (judge)
    declared_part: str | None = None
    knows_part: bool = False
    values: list[float] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    verified: list[bool] = field(default_factory=list)

    @classmethod
    def of(cls, task: Any) -> Watch:
        s = task.settings
        spec = getattr(task, "spec", None)  # a Task has them all; a stand-in may lack some: not judged by them
        impl = spec.implementations.get(task.impl) if spec is not None else None
        return cls(task.impl, min(s.min_samples, s.max_samples), max(s.min_samples, s.max_samples),
                   timer=getattr(s, "timer", None), device=getattr(task, "device", None),
                   declared_part=getattr(impl, "part", None), knows_part=impl is not None)

    def value(self, i: int, seconds: float, verified: bool) -> None:
        """A streamed sample; Forged when out of order, too many, or not a possible time."""
        if i != len(self.values):
            raise Forged(f"sample {i} streamed after {len(self.values)} samples (out of order)")
        if i >= self.max_samples:
            raise Forged(f"more than {self.max_samples} samples streamed (max_samples)")
        if not (math.isfinite(seconds) and 0.0 <= seconds <= MAX_SAMPLE_S):
            raise Forged(f"sample {i} is {seconds!r} s: not a possible time")
        self.values.append(seconds)
        self.arrived.append(self.clock())
        self.verified.append(verified)

    def judge(self, result: ImplResult) -> ImplResult:
        """``result`` checked against what was seen (see the module docstring); Forged if it lies."""
        if result.name != self.impl:
            raise Forged(f"a result for {result.name[:80]!r}, not for {self.impl!r}")
        if result.score is not None:
            raise Forged("a result with a score (only the parent scores)")
        timing = result.timing
        if timing is None:
            if result.status == "ok":
                raise Forged("status ok without a timing")
            return result
        if result.status != "ok":
            raise Forged(f"a timing with status {result.status}")
        claimed = result.protocol.get("part") or None
        if self.knows_part and claimed != self.declared_part:
            def said(part: Any) -> str:
                return f"part {str(part)[:20]!r}" if part else "no part"
            # a part is timed but never scored nor held to T_SOL (analysis.scoring): the worker's word is not enough
            raise Forged(f"a result that says it is {said(claimed)}, where its workload declares "
                         f"{said(self.declared_part)}")
        if result.correctness is None and not (self.declared_part if self.knows_part else claimed):
            raise Forged("status ok without a correctness check")
        if result.correctness is not None and not result.correctness.passed:
            raise Forged("status ok with a failed correctness check")
        if timing.samples != tuple(self.values):
            raise Forged(f"the result's {timing.n} samples are not the {len(self.values)} streamed as they were "
                         "taken (rewritten after the fact)")
        n = timing.n
        if not self.min_samples <= n <= self.max_samples:
            raise Forged(f"{n} samples, outside [{self.min_samples}, {self.max_samples}]")
        if not all(part in STOP_REASONS for part in timing.stop_reason.split("+")):
            raise Forged(f"unknown stop reason {timing.stop_reason[:40]!r}")
        problem = self.wall_problem(result.protocol)
        if problem is not None:
            raise Forged(problem)
        lo, hi = median_ci(timing.samples)
        return replace(result, timing=replace(timing, median=median(timing.samples), ci_low=lo, ci_high=hi))

    def wall_problem(self, protocol: dict[str, Any]) -> str | None:
        """Why the streamed samples claim less time than the parent watched them take, or None.
        The protocol's knobs count only where the task's timer has them (see the module docstring)."""
        known = self.timer is not None
        if known and not (self.timer == "graph" and self.device == "cuda"):  # the CPU always times with the wall clock
            protocol = {k: v for k, v in protocol.items() if k != "graph_calls"}
        if known and not (self.timer in ("cold", "cupti") and self.device == "cuda"):
            protocol = {k: v for k, v in protocol.items() if k not in ("spin_us", "host_launch_us", "l2_flush_bytes")}
        calls = _number(protocol.get("graph_calls"), 1.0, 1.0, MAX_GRAPH_CALLS)
        spin = _number(protocol.get("spin_us"), 0.0, 0.0, MAX_SPIN_US) * 1e-6
        # the gate holds the GPU for the host's launch time of the call (the spin's bound applies)
        launch = _number(protocol.get("host_launch_us"), 0.0, 0.0, MAX_SPIN_US) * 1e-6
        flush = FLUSH_S if protocol.get("l2_flush_bytes") else 0.0
        per_sample = HARNESS_S + spin + launch + flush + SORT_S_PER_SAMPLE * self.max_samples
        kept = [i for i in range(1, len(self.values)) if not self.verified[i - 1]]
        if not kept:
            return None
        watched = sum(self.arrived[i] - self.arrived[i - 1] for i in kept)
        claimed = sum(self.values[i] for i in kept) * calls
        allowed = WALL_FACTOR * (claimed + len(kept) * per_sample) + WALL_SLACK_S
        if watched <= allowed:
            return None
        return (f"its samples claim {claimed:.3g} s of calls over {len(kept)} samples the parent watched take "
                f"{watched:.3g} s (more than {WALL_FACTOR:g}x the claim plus the harness's own work): "
                "forged timings")


def _number(value: Any, default: float, low: float, high: float) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        return default
    return float(min(max(value, low), high))
