"""Where a relative file reference not found beside what names it is looked up: the working folder.

A workload's ``file.py:function`` references (:mod:`solbench.impls.registry`) are looked up beside the
workload file first, and kernel sources of ``solbench.kernels.load`` beside the calling Python file
first; then in the working folder. A worker process works in a scratch folder of its own and sets
``FALLBACK_DIR`` to the parent's working folder (absolute) before any user code runs. Importing this
module imports nothing (a worker sets it before torch and NumPy load).
"""

FALLBACK_DIR: str | None = None  # None: this process's working folder
