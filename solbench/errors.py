"""The one exception tree solbench raises for problems a user can fix.

    SolbenchError                 shown as one line, no traceback; exit code 2 unless set
    ├── ConfigError               bad workload or spec file, bad option value
    │   └── GateRefused           runs measured on different hardware/software
    ├── DeviceError               the device cannot do what was asked (no CUDA, no CuPy)
    ├── ResultsFormatError        a result file that cannot be read
    └── ResultsWriteError         results cannot be written where asked

    RunInterrupted                Ctrl-C during a run; carries what was measured (not an error)
"""

from __future__ import annotations


class SolbenchError(Exception):
    """Base of every error solbench reports to the user without a traceback."""

    exit_code = 2


class ConfigError(SolbenchError):
    """A workload, spec or option is wrong; the message names file, line and field."""


class GateRefused(ConfigError):
    """Two runs cannot be compared (different hardware fingerprints)."""


class DeviceError(SolbenchError):
    """The device or a device library cannot do what was asked."""


class LaneLost(DeviceError):
    """A lane of a sharded run can measure nothing more: the Ray actor driving its GPU died (its node
    or process gone), or its local GPU fell off the bus. :mod:`solbench.execute.shard` moves the
    lane's work to the lanes left, where the rounds rule allows (a case's rounds are never merged
    across devices)."""


class ResultsFormatError(SolbenchError):
    """A result file is malformed, or newer than this solbench understands."""


class ResultsWriteError(SolbenchError):
    """Results cannot be written where asked (a folder not writable, a file that exists, a full disk)."""


class RunInterrupted(Exception):
    """Ctrl-C during a run; ``result`` holds the run measured so far, marked incomplete."""

    def __init__(self, result: object) -> None:
        super().__init__("interrupted")
        self.result = result
