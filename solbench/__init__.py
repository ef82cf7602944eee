"""solbench: how far is a GPU implementation from the hardware's speed of light?

    import solbench
    run = solbench.run(["workloads/attn.yaml"])          # check, time and score on this device
    dry = solbench.dry_run(["workloads/attn.yaml"], solbench.hardware_spec("b200"))
    verdict = solbench.gate(base_run, run)               # CI regression decision
"""

from solbench._version import __version__
from solbench.api import RunOptions, dry_run, hardware_spec, load_run, run
from solbench.compare import compare_impls, compare_runs
from solbench.errors import ConfigError, DeviceError, GateRefused, ResultsFormatError, SolbenchError
from solbench.gate import gate
from solbench.results.model import CaseResult, ImplResult, RunResult, Score, Timing

__all__ = [
    "CaseResult",
    "ConfigError",
    "DeviceError",
    "GateRefused",
    "ImplResult",
    "ResultsFormatError",
    "RunOptions",
    "RunResult",
    "Score",
    "SolbenchError",
    "Timing",
    "__version__",
    "compare_impls",
    "compare_runs",
    "dry_run",
    "gate",
    "hardware_spec",
    "load_run",
    "run",
]
