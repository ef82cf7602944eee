"""``solbench.bench``: time one Python callable with the run's protocol, no YAML (as Triton's do_bench).

    r = solbench.bench(torch.mm, a, b, flops=2 * m * n * k, bytes=4 * (m * k + k * n + m * n))
    r.median, (r.ci_low, r.ci_high), r.sol, r.mfu, r.mbu, r.bound

What is the same as ``solbench run``: the timer (on a GPU the cold timer: a spin kernel ahead of
the call, L2 flushed and read back, CUDA events; on the CPU the wall clock with the CPU thread
policy of :mod:`solbench.device.threads`), the warm-up calls, the stopping rule (the 95%
order-statistic CI of the median within ``target_rel_ci`` of it, or ``budget_s`` spent, after at
least ``min_samples``), and the roofline of :mod:`solbench.analysis.sol` against the device's
spec (datasheet peaks on a GPU, peaks measured with the same threads on the CPU).

What differs: it runs in this process (no worker, no timeout, no isolation), calls ``fn`` with the
same arguments every time (no second input set; on a GPU the inputs are still evicted from L2),
and checks nothing: no reference, no anti-cheat checks. ``flops`` are scored against the dtype's
tensor peak (as a matmul's), ``vector_flops`` against its vector peak; ``bytes`` is what the call
must move at least (every input read once, every output written once).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from solbench.errors import ConfigError
from solbench.results.model import Cost, Timing


@dataclass(frozen=True)
class BenchResult:
    """One callable timed: the median and its 95% CI (seconds), and the roofline figures."""

    median: float
    ci_low: float
    ci_high: float
    n: int
    stop_reason: str  # "converged", "budget" or "max_samples"
    device: str  # the device's name
    spec: str  # the hardware spec scored against, and where its peaks came from
    t_sol: float | None  # None without flops or bytes
    bound: str | None  # "compute", "vector" or "memory"
    sol: float | None  # T_SOL / median
    mfu: float | None  # flops / (median x tensor peak)
    mbu: float | None  # bytes / (median x bandwidth)
    invalid: bool  # faster than T_SOL against datasheet peaks: the flops or bytes given are too high
    # (against peaks measured on this host, as on the CPU, a SOL above 1 is possible and not INVALID:
    # the ceiling measurement was beaten, e.g. by data that fits in cache)
    protocol: dict[str, Any] = field(default_factory=dict)
    timing: Timing | None = None  # every sample


def bench(fn: Callable[..., Any], *args: Any, flops: float = 0.0, bytes: float = 0.0,
          vector_flops: float = 0.0, dtype: str | None = None, device: str = "auto", budget_s: float = 2.0,
          target_rel_ci: float = 0.01, min_samples: int = 10, max_samples: int = 2000, warmup: int = 3,
          threads: int = 0, **kwargs: Any) -> BenchResult:
    """Time ``fn(*args, **kwargs)`` and score it; see the module docstring.

    ``device`` "auto" is the device of the first tensor argument (else a CUDA GPU if torch sees
    one, else the CPU); ``dtype`` defaults to the first floating-point tensor's (else float32).
    """
    from solbench.analysis.sol import is_below_sol, score, speed_of_light
    from solbench.device import threads as thread_policy
    from solbench.device.detect import detect
    from solbench.device.timer import make_timer
    from solbench.measure.criteria import CIWidth
    from solbench.measure.loop import measure

    _check_args({"flops": flops, "bytes": bytes, "vector_flops": vector_flops},
                {"budget_s": budget_s, "target_rel_ci": target_rel_ci}, min_samples, max_samples, warmup)
    tensors = [a for a in (*args, *kwargs.values()) if hasattr(a, "dtype") and hasattr(a, "device")]
    where = device if device != "auto" or not tensors else str(tensors[0].device)
    info = detect(where, cpu_threads=threads)
    n_threads = thread_policy.policy(threads, info.kind)
    dtype = dtype or next((str(t.dtype).removeprefix("torch.") for t in tensors if t.dtype.is_floating_point),
                          "float32")
    peaks = info.spec.peaks_for(dtype) if flops or bytes or vector_flops else None  # a bad dtype: before timing
    timer = make_timer(info.kind, "cold", l2_bytes=info.l2_bytes)
    before = _torch_threads()
    thread_policy.apply(n_threads)
    try:
        timing = measure(timer, [lambda: fn(*args, **kwargs)],
                         CIWidth(target_rel_ci, min_samples, max_samples, budget_s), warmup=warmup)
    finally:
        thread_policy.apply(before)
    protocol = {"timer": timer.name, "warmup": warmup, "min_samples": min_samples, "max_samples": max_samples,
                "target_rel_ci": target_rel_ci, "budget_s": budget_s, "isolation": "in-process",
                "threads": n_threads, **timer.protocol()}
    spec = f"{info.spec.id} ({info.spec.source} peaks)"
    if peaks is None:
        return _result(timing, info.name, spec, protocol)
    cost = Cost(dtype=dtype, tensor_flops=float(flops), vector_flops=float(vector_flops),
                fused_bytes=float(bytes), unfused_bytes=float(bytes))
    sol = speed_of_light(cost, peaks)
    s = score(timing.median, cost, peaks, sol, None)
    return _result(timing, info.name, spec, protocol, t_sol=sol.t_sol, bound=sol.bound, sol=s.sol, mfu=s.mfu,
                   mbu=s.mbu if bytes else None,
                   invalid=info.spec.source != "measured" and is_below_sol(timing.median, sol.t_sol))


def _check_args(costs: dict[str, float], positive: dict[str, float], min_samples: int, max_samples: int,
                warmup: int) -> None:
    """ConfigError, before anything is timed, for an argument no measurement can honour (what ``run``
    refuses in its options) or a cost that would score as nonsense (a negative MFU, a NaN MBU)."""
    for name, value in costs.items():
        if not (isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0):
            raise ConfigError(f"bench: {name} must be a finite number, 0 or more, got {value!r}")
    for name, value in positive.items():
        if not (isinstance(value, numbers.Real) and math.isfinite(value) and value > 0):
            raise ConfigError(f"bench: {name} must be a positive finite number, got {value!r}")
    for name, count, least in (("min_samples", min_samples, 1), ("max_samples", max_samples, 1),
                               ("warmup", warmup, 0)):
        if not (isinstance(count, numbers.Integral) and not isinstance(count, bool) and count >= least):
            raise ConfigError(f"bench: {name} must be an integer at least {least}, got {count!r}")
    if min_samples > max_samples:
        raise ConfigError(f"bench: min_samples {min_samples} is larger than max_samples {max_samples}")


def _result(timing: Timing, device: str, spec: str, protocol: dict[str, Any], *, t_sol: float | None = None,
            bound: str | None = None, sol: float | None = None, mfu: float | None = None,
            mbu: float | None = None, invalid: bool = False) -> BenchResult:
    return BenchResult(timing.median, timing.ci_low, timing.ci_high, timing.n, timing.stop_reason, device, spec,
                       t_sol, bound, sol, mfu, mbu, invalid, protocol, timing)


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())
