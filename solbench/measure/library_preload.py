"""Imported by the fork server of a GPU run (:func:`solbench.measure.pool.preload_libraries`), and
only there: the GPU libraries workers would otherwise each import for themselves, imported once
before the first worker is forked. On an H200 (results/h200/issue16/session10/) every worker imported
CuPy for the cold timer's gate (0.23 s a process, at start), and every worker of a cuBLASLt
implementation imported nvmath-python inside its first task's set-up (0.7 s a process, one worker
after the other while the GPU waited): 15.6 s of a 101 s o_proj run. Then the one-time work of a
worker's first CUDA use that touches no device (:mod:`solbench.measure.state_preload`). How it
stays clear of CUDA: :mod:`solbench.measure.preload` (a library that initializes the driver on
import stops the preload, and the workers say so). ``SOLBENCH_PRELOAD=0`` turns it off."""

from solbench.measure.preload import preload

MODULES = ("cupy", "nvmath.linalg.advanced", "solbench.measure.state_preload")

preload(MODULES)
