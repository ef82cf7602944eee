"""The process ``solbench profile`` runs under Nsight Compute: one case of one implementation.

    python -m solbench.tools.profile_target FILE WORKLOAD IMPL CASE_ID [--warmup N] [--params JSON]

Set-up and warm-up calls run outside the measured window; the one timed call runs inside an NVTX
push/pop range named ``solbench_timed`` and between cudaProfilerStart/Stop, so that ncu profiles
it alone (``--nvtx --nvtx-include solbench_timed/``, or ``--profile-from-start off``).
Exit codes: 0 done, 2 bad input, 3 the implementation cannot run here.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from pathlib import Path

RANGE = "solbench_timed"


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
    import torch

    from solbench.device.timer import make_timer
    from solbench.errors import SolbenchError
    from solbench.impls import cublaslt
    from solbench.measure.runner import build_launches, missing_requirement, prepare_case
    from solbench.plan.workloads import plan

    a = _args(argv)
    try:
        p = plan([a.file], "cuda", [a.workload])[0]
        case = next(c for c in p.cases if c.id == a.case_id)
        impl = p.spec.implementations[a.impl]
        impl = impl.model_copy(update={"params": {**impl.params, **json.loads(a.params)}})
    except (SolbenchError, StopIteration, KeyError, IndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reason = missing_requirement(impl, "cuda")
    if reason is not None:
        print(f"error: {a.impl} cannot run here: {reason}", file=sys.stderr)
        return 3
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
    return 0


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
