"""The measurement loop: warm up, then sample through a Timer until a criterion says stop.

Device-agnostic: the Timer does the device work; this module only counts, keeps raw samples
and asks the criterion. Tests drive it with a fake timer.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from solbench.analysis.stats import median, median_ci
from solbench.measure.criteria import CIWidth
from solbench.results.model import Timing

Launch = Callable[[], object]


class Timer(Protocol):
    """Times one call of a launch; knows how (events, graph replay, wall clock)."""

    name: str
    last_output: object  # what the last timed call returned (for verifying timed calls)
    pending_s: list[float]  # GPU: seconds a device-wide sync took right after each window
    stray: str | None  # after a sample: why the call's GPU work was not all inside its window (CUPTI)

    def prepare(self, launches: Sequence[Launch]) -> None:
        """Warm whatever the timer needs (graph capture, spin sizing) for these launches."""

    def sample(self, index: int) -> float:
        """Seconds per call for one sample of launch ``index % len(launches)``."""

    def protocol(self) -> dict[str, Any]:
        """The knobs this timer chose (spin length, flush size, calls per graph), for the record."""

    def output_index(self, index: int) -> int:
        """Which launch produced ``last_output`` after sample ``index``."""


class Draws(Protocol):
    """Where the loop draws which timed calls it verifies (``random.SystemRandom``; the same draws on
    every rank of a group: :class:`solbench.measure.rank.AgreedDraws`)."""

    def random(self) -> float: ...


class CheatDetected(Exception):
    """A check found an implementation looking fast or correct without doing the work."""


Verify = Callable[[int, object, float], "str | None"]  # (launch index, output, sample seconds) -> reason
# Clocks right after a sample: (SM MHz, memory MHz, power W, clocks-event reason bits), each may be None.
Probe = Callable[[], "tuple[int | None, int | None, float | None, int | None]"]
# (index, seconds, verified next): each timed sample as the timer returned it, before it is stored
OnValue = Callable[[int, float, bool], None]


def measure(
    timer: Timer,
    launches: Sequence[Launch],
    criterion: CIWidth,
    *,
    warmup: int = 3,
    on_sample: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    verify: Verify | None = None,
    rng: Draws | None = None,
    probe: Probe | None = None,
    on_value: OnValue | None = None,
    seen: int = 0,
) -> Timing:
    """Sample ``launches`` (rotated) until ``criterion`` stops; returns raw samples and stats.

    ::

        timer.prepare(launches)
        repeat warmup times: timer.sample(i)            # discarded
        samples = []
        until criterion.reason(samples, elapsed):
            if the last sample was verified: timer.sample(i)   # discarded: see below
            seconds = timer.sample(i); on_value(i, seconds, verified?); samples += seconds
            with probability min(1, 4 / (seen + i)), and for the last sample:
                verify(the output of that timed call)   # outside the timed window
            clocks += probe()                           # if given: NVML, outside the window

    Verified samples are drawn at random (about 4 ln n of n), so an implementation cannot tell
    which of its timed calls will be checked. A verification is outside the window, but what it leaves
    behind is not: on an H200, in the o_proj rounds whose first four samples were all verified, the
    sample right after a verified one read a median of 2.4-3.1% slower than the round's later samples,
    against at most 0.4% in rounds with hardly any verified (311 and 716 point-rounds of ten runs,
    ``results/h200/issue16/session1[4-6]``). So after a verification one call is made and discarded,
    as a warm-up is, before the next timed sample: one for every sample ``on_value`` flags as
    verified, but the last. ``seen``: the point's samples timed in earlier rounds
    of the invocation, so that the rate runs on over its rounds (about 4 ln n of all n, plus each
    round's last) instead of starting again at every round. A failed verification raises
    CheatDetected, and so does a sample (warm-up included) after which the timer reports ``stray``
    work (the CUPTI timer: GPU work of the call still running after the current stream passed it, or
    no GPU work at all).
    ``probe`` (from ``solbench.device.nvml.clock_probe``) reads the clocks after every sample;
    the readings are stored per sample in the Timing. ``on_value`` streams each sample the moment
    the timer returns it (a worker sends it to its parent, :mod:`solbench.measure.watch`), so a
    list rewritten afterwards no longer matches what was streamed.
    """
    rng = rng or random.Random()
    finish = getattr(timer, "finish", None)  # the CUPTI timer turns collection off there
    try:
        samples, clocks, reason = _loop(timer, launches, criterion, warmup, on_sample, clock, verify, rng, probe,
                                        on_value, seen)
    finally:
        if finish is not None:
            finish()
    lo, hi = median_ci(samples)
    if not clocks:
        return Timing(tuple(samples), median(samples), lo, hi, reason)
    sm, mem, power, reasons = (tuple(column) for column in zip(*clocks, strict=True))
    return Timing(tuple(samples), median(samples), lo, hi, reason, sm_clock_mhz=sm, mem_clock_mhz=mem,
                  power_w=power, throttle_reasons=reasons)


def _loop(timer: Timer, launches: Sequence[Launch], criterion: CIWidth, warmup: int,
          on_sample: Callable[[int], None] | None, clock: Callable[[], float], verify: Verify | None,
          rng: Draws, probe: Probe | None,
          on_value: OnValue | None = None, seen: int = 0) -> tuple[list[float], list[Any], str]:
    """The body of :func:`measure`: (samples, clock readings, stop reason).

    Draws go through ``rng``'s class's ``random``, taken here before any call is made: the loop's
    generator is a local any call can read off the stack, and a ``random`` set on the instance (no
    class or module replaced, so no tamper check sees it) chose which timed calls were verified:
    none after the first four, while the calls skipped their work."""
    draw = type(rng).random
    timer.prepare(launches)
    for i in range(warmup):
        _sample(timer, i)
    samples: list[float] = []
    clocks: list[tuple[int | None, int | None, float | None, int | None]] = []
    start = clock()
    reason = None
    checked = False
    while reason is None:
        i = len(samples)
        if checked:  # the last sample was verified: one call discarded first (see measure)
            _sample(timer, i)
        seconds = _sample(timer, i)
        checked = verify is not None and draw(rng) < 4 / (seen + i + 1)
        if on_value is not None:
            on_value(i, seconds, checked)
        samples.append(seconds)
        if verify is not None and checked:  # right after the call: a late writer is still writing
            _verify(verify, timer, i, samples[-1])
        if probe is not None:
            clocks.append(probe())
        if on_sample is not None:
            on_sample(len(samples))
        reason = criterion.reason(samples, clock() - start)
        if reason is not None and verify is not None and not checked:
            _verify(verify, timer, i, samples[-1])
    return samples, clocks, reason


def _sample(timer: Timer, i: int) -> float:
    seconds = timer.sample(i)
    stray = getattr(timer, "stray", None)
    if stray is not None:
        raise CheatDetected(f"timed call {i + 1}: {stray}")
    return seconds


def _verify(verify: Verify, timer: Timer, i: int, seconds: float) -> None:
    untraced = getattr(timer, "untraced", None)  # the CUPTI timer: its records of the check's own work are not wanted
    with untraced() if untraced is not None else contextlib.nullcontext():
        problem = verify(timer.output_index(i), timer.last_output, seconds)
    if problem is not None:
        raise CheatDetected(f"timed call {i + 1}: {problem}")
