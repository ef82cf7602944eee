"""The process ``solbench profile`` runs under Nsight Compute: one case of one implementation.

    python -m solbench.tools.profile_target FILE WORKLOAD IMPL CASE_ID [--warmup N] [--params JSON]

Set-up and warm-up calls run outside the measured window; the one timed call runs inside an NVTX
push/pop range named ``solbench_timed`` and between cudaProfilerStart/Stop, so that ncu profiles
it alone (``--nvtx --nvtx-include solbench_timed/``, or ``--profile-from-start off``).
Exit codes: 0 done, 2 bad input, 3 the implementation cannot run here, 4 it (or its case's set-up)
raised. Each failure ends with one line ``solbench-profile-target: exit N: WHY`` on stderr, which
``solbench profile`` finds in ncu's output and shows (ncu's own last line says only "The application
returned an error code"). The lines ``started IMPL`` and ``done IMPL`` bound the implementation's
set-up and call: started and never done, with no failure line, the implementation ended the process
(a signal, an exit), which is its failure too, unless ncu says it shut the process down itself (its own
profiling failed).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import traceback
from pathlib import Path
from typing import Any

RANGE = "solbench_timed"
MARK = "solbench-profile-target"
FAILED = 4  # the implementation raised: exitcodes.IMPL_FAILED, as a run's failed implementation


def failure(code: int, why: str) -> str:
    """The line that says why the target stopped (``solbench.tools.profile`` parses it)."""
    from solbench.config.yamlio import one_line

    return f"{MARK}: exit {code}: {one_line(why)}"


def started(impl: str) -> str:
    """The line printed as the implementation's set-up begins: a process that ends after it and before
    :func:`done`'s line, with no failure line, was ended by the implementation (a signal, an exit)."""
    return f"{MARK}: started {impl}"


def done(impl: str) -> str:
    """The line printed once the profiled call has returned."""
    return f"{MARK}: done {impl}"


def _fail(code: int, why: str) -> int:
    print(failure(code, why), file=sys.stderr)
    return code


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m solbench.tools.profile_target")
    ap.add_argument("file")
    ap.add_argument("workload")
    ap.add_argument("impl")
    ap.add_argument("case_id")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--params", default="{}", help="extra keyword arguments for fn, as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Prepare, warm up, then run the timed call once inside the profiled range."""
    from solbench.errors import SolbenchError
    from solbench.measure.runner import missing_requirement
    from solbench.plan.workloads import plan

    a = _args(argv)
    try:
        p = plan([a.file], "cuda", [a.workload])[0]
    except (SolbenchError, IndexError) as exc:
        return _fail(2, str(exc))
    case = next((c for c in p.cases if c.id == a.case_id), None)
    impl = p.spec.implementations.get(a.impl)
    if case is None or impl is None:
        return _fail(2, f"{a.file}: no case {a.case_id!r} in {a.workload} on CUDA" if case is None else
                     f"{a.file}: workload {a.workload!r} has no implementation {a.impl!r}")
    impl = impl.model_copy(update={"params": {**impl.params, **json.loads(a.params)}})
    reason = missing_requirement(impl, "cuda")
    if reason is not None:
        return _fail(3, f"{a.impl} cannot run here: {reason}")
    print(started(a.impl), file=sys.stderr, flush=True)
    try:
        _timed_call(a, p, case, impl)
    except Exception as exc:  # the implementation's code (or its case's set-up)
        traceback.print_exc()
        return _fail(FAILED, f"{a.impl} raised {_raised(exc)}")
    print(done(a.impl), file=sys.stderr, flush=True)
    return 0


def _raised(exc: BaseException) -> str:
    """The exception's first line and where it was raised, as a run's 'error' says it."""
    where = traceback.extract_tb(exc.__traceback__)
    at = f" (at {Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    text = str(exc).strip()
    return (f"{type(exc).__name__}: {text}".splitlines()[0] if text else type(exc).__name__) + at


def _timed_call(a: argparse.Namespace, p: Any, case: Any, impl: Any) -> None:
    """Set up the case, build and warm up the implementation, then make the one profiled call."""
    import torch

    from solbench.device.timer import make_timer
    from solbench.impls import cublaslt
    from solbench.measure.runner import build_launches, prepare_case

    base_dir = Path(a.file).parent
    inputs = prepare_case(p.spec, case, "cuda", base_dir, input_sets=1, seed=0)
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    with cublaslt.tuning(functools.partial(make_timer, "cuda", "cold", l2_bytes=l2_bytes)):  # as a run would
        launch = build_launches(impl, case, inputs.sets, base_dir)[0]
    for _ in range(a.warmup):
        launch()
    torch.cuda.synchronize()
    _range_push()
    torch.cuda.profiler.start()
    launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    _range_pop()


def _range_push() -> None:
    import torch

    with contextlib.suppress(RuntimeError, AttributeError):  # no NVTX: cudaProfilerStart/Stop still bound it
        torch.cuda.nvtx.range_push(RANGE)


def _range_pop() -> None:
    import torch

    with contextlib.suppress(RuntimeError, AttributeError):
        torch.cuda.nvtx.range_pop()


if __name__ == "__main__":  # pragma: no cover - runs under ncu
    sys.exit(main())
