"""solbench: how far is a GPU implementation from the hardware's speed of light?

    import solbench
    run = solbench.run(["workloads/attn.yaml"])          # check, time and score on this device
    dry = solbench.dry_run(["workloads/attn.yaml"], solbench.hardware_spec("b200"))
    verdict = solbench.gate(base_run, run)               # CI regression decision
    r = solbench.bench(torch.mm, a, b, flops=2 * m * n * k)   # one callable, no YAML

Names are imported lazily, so importing one pure submodule pulls in nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import Any

from solbench._version import __version__ as __version__

_EXPORTS = {
    "BenchResult": "solbench.api",
    "RunOptions": "solbench.api",
    "bench": "solbench.api",
    "dry_run": "solbench.api",
    "hardware_spec": "solbench.api",
    "load_run": "solbench.api",
    "run": "solbench.api",
    "compare_impls": "solbench.analysis.compare",
    "compare_runs": "solbench.analysis.compare",
    "gate": "solbench.analysis.gate",
    "ConfigError": "solbench.errors",
    "DeviceError": "solbench.errors",
    "GateRefused": "solbench.errors",
    "ResultsFormatError": "solbench.errors",
    "ResultsWriteError": "solbench.errors",
    "RunInterrupted": "solbench.errors",
    "SolbenchError": "solbench.errors",
    "CaseResult": "solbench.results.model",
    "ImplResult": "solbench.results.model",
    "RunResult": "solbench.results.model",
    "Score": "solbench.results.model",
    "Timing": "solbench.results.model",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'solbench' has no attribute {name!r}")
