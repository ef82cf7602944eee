"""Compile solbench's kernel variants in parallel processes, filling CuPy's on-disk cache.

A fresh GPU machine compiles each template instantiation once (~1.5 s each through NVRTC);
run this first in a device session so that tests and benchmarks find every cubin cached::

    PYTHONPATH=. python3 bench/precompile.py [processes]
"""

from __future__ import annotations

import itertools
import sys
import time
from concurrent.futures import ProcessPoolExecutor

PLANS = ((16, 1), (32, 1), (64, 1), (64, 2), (128, 4), (128, 2), (32, 2))


def names() -> list[tuple[str, str, tuple[int, int] | None]]:
    """(source, kernel name, min_cc override) of every variant the tests and benchmarks launch."""
    out: list[tuple[str, str, tuple[int, int] | None]] = []
    for kind, w8, (rows, cl), nt in itertools.product((0, 1), (0, 1), PLANS, range(1, 9)):
        if cl > 1:
            out.append(("gemv_stream.cu", f"gemv_stream_cluster_kernel<{kind}, {w8}, {rows}, {nt}, {cl}>", (9, 0)))
        else:
            out.append(("gemv_stream.cu", f"gemv_stream_kernel<{kind}, {w8}, {rows}, {nt}>", None))
    for kind in (0, 1):
        out.append(("gemv_residual.cu", f"gemv_residual_scalar_kernel<{kind}>", None))
        out += [("gemv_residual.cu", f"gemv_residual_kernel<{kind}, {nt}>", None) for nt in range(1, 9)]
        out += [("bias_gelu.cu", f"bias_gelu_kernel<{kind}, {vec}, {mode}>", None)
                for vec in (1, 8) for mode in (0, 1)]
        out += [("residual_layernorm.cu", f"residual_layernorm_kernel<{kind}, {vec}, {vpt}>", None)
                for vec, vpts in ((8, (1, 2, 4)), (1, (1, 2, 4, 8, 16))) for vpt in vpts]
        out += [("residual_layernorm.cu", f"residual_layernorm_kernel<{kind}, {vec}, {vpt}, {mode}>", None)
                for vec, vpts in ((8, (1, 2, 4)), (1, (1, 2, 4, 8, 16))) for vpt in vpts for mode in (1, 2)]
        out += [("maxpool_nhwc.cu", f"maxpool_nhwc_kernel<{kind}, {vec}>", None) for vec in (1, 8)]
    return out


def _compile(job: tuple[str, str, tuple[int, int] | None]) -> str:
    from solbench.kernels import loader

    source, name, min_cc = job
    try:
        loader.get_kernel(source, name, name_expressions=(name,), min_cc=min_cc)
    except Exception as exc:  # report, keep going
        return f"{name}: {type(exc).__name__}: {str(exc)[:300]}"
    return ""


def main() -> None:
    procs = int(sys.argv[1]) if len(sys.argv) > 1 else 14
    jobs = names()
    t0 = time.time()
    with ProcessPoolExecutor(procs) as pool:
        errors = [e for e in pool.map(_compile, jobs, chunksize=4) if e]
    print(f"precompiled {len(jobs) - len(errors)}/{len(jobs)} kernels in {time.time() - t0:.0f} s")
    for e in errors:
        print("  FAILED", e)


if __name__ == "__main__":
    main()
