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

from solbench._api_names import PUBLIC as _API_NAMES
from solbench._version import __version__ as __version__

# The entry points of solbench.api that docs/api.md lists (_api_names.PUBLIC), plus the errors and
# the records' parts. ``solbench.plan`` is the subpackage; the function is solbench.api.plan.
_EXPORTS = {
    "ConfigError": "solbench.errors",
    "DeviceError": "solbench.errors",
    "GateRefused": "solbench.errors",
    "ResultsFormatError": "solbench.errors",
    "ResultsWriteError": "solbench.errors",
    "RunInterrupted": "solbench.errors",
    "SolbenchError": "solbench.errors",
    "Score": "solbench.results.model",
    "Timing": "solbench.results.model",
}
_API = "solbench.api"


__all__ = sorted([*_EXPORTS, *_API_NAMES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _API_NAMES:
        return getattr(importlib.import_module(_API), name)
    raise AttributeError(f"module 'solbench' has no attribute {name!r}")
