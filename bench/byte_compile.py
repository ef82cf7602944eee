"""Byte-compile, in place, the installed modules a solbench run imports (the device image ships its Python
packages without byte code and does not write any, so every process compiled torch from source: 2.4 s of
`compile()` over 962 modules in an H200 run's parent; a `pip install` writes byte code at install time).

    python3 bench/byte_compile.py      # prints how many modules were compiled, and the seconds

solbench's own files are left to Python; a file that cannot be written is left as it is.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import py_compile
import sys
import time
from pathlib import Path

MODULES = ("torch", "numpy", "scipy.special", "scipy.linalg", "scipy.stats", "click", "rich", "yaml", "cupy",
           "nvmath", "nvmath.linalg.advanced", "cupti", "triton", "pynvml", "solbench.cli.main", "solbench.cli.run",
           "solbench.api", "solbench.execute.run", "solbench.measure.worker", "solbench.measure.pool",
           "solbench.device.timer", "solbench.device.cupti", "solbench.impls.attn", "solbench.impls.cublaslt")


def _compile(path: str) -> bool:
    try:
        py_compile.compile(path, doraise=True)
    except (py_compile.PyCompileError, OSError):
        return False
    return True


def main() -> None:
    start = time.perf_counter()
    for name in MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    here = Path(__file__).resolve().parent.parent / "solbench"
    files = sorted({f for m in list(sys.modules.values())
                    if isinstance(f := getattr(m, "__file__", None), str) and f.endswith(".py")
                    and not Path(f).resolve().is_relative_to(here)})
    with multiprocessing.Pool() as pool:
        done = sum(pool.map(_compile, files, chunksize=16))
    print(f"byte code written for {done} of {len(files)} imported modules in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
