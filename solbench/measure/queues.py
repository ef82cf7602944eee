"""How many hardware work queues a worker's CUDA context gets.

The driver gives a CUDA context ``CUDA_DEVICE_MAX_CONNECTIONS`` work queues (8 by default). Each
costs driver time when the context starts and when it exits, and contexts start one after another
in the driver: on an H200, 14 workers started side by side took 2.4 s with 8 queues and 1.1 s
with one (``bench/worker_steps.py``), and a default o_proj run spent 21.6-24.3 s starting and
retiring its workers against 11.1-12.3 s when every worker had one queue, with the same medians
(BENCHMARKS.md, issue 16, twenty-third session).

One queue puts all of a process's streams in one line: the kernels of two streams no longer
overlap as they would. So a worker gets one queue only for an implementation whose checked calls,
traced by CUPTI in an earlier worker of the same run, ran all their work on one stream; the first
round of every implementation, and every implementation CUPTI cannot see (no cupti-python, or
``SOLBENCH_NO_CUPTI=1``), keeps the driver's default. An implementation seen on several streams in
any worker never gets one queue again in that run, and the result of a worker that saw it records
both (``protocol["streams"]``, ``protocol["work_queues"]``).

``SOLBENCH_WORK_QUEUES=driver`` turns this off; a ``CUDA_DEVICE_MAX_CONNECTIONS`` already in the
run's environment is the user's and is left as it is (every worker inherits it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from solbench.results.model import ImplResult

ENV = "CUDA_DEVICE_MAX_CONNECTIONS"
SWITCH_ENV = "SOLBENCH_WORK_QUEUES"  # "driver": the driver's default for every worker


class QueuePolicy:
    """Which workers of a run get one work queue; told every result the run's workers return."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.enabled = environ.get(SWITCH_ENV, "") != "driver" and ENV not in environ
        self._one_stream: dict[tuple[str, str], bool] = {}  # (workload, implementation) -> seen on one stream only

    def note(self, key: tuple[str, str], result: ImplResult) -> None:
        """What a worker's result says of its implementation's streams (CUPTI's, where it traced);
        ``key`` is the (workload, implementation), whichever of its workers this was."""
        streams = result.protocol.get("streams")  # a worker's word: a count, or it says nothing
        if type(streams) is not int or result.protocol.get("stream_check") != "cupti":
            return
        if streams > 1:
            self._one_stream[key] = False  # for good: it may run on several again
        elif result.status == "ok":
            self._one_stream.setdefault(key, True)

    def queues(self, key: tuple[str, str]) -> int | None:
        """The work queues for a new worker of (workload, implementation) ``key``: 1, or None for the
        driver's default."""
        return 1 if self.enabled and self._one_stream.get(key, False) else None


def apply(queues: int | None) -> None:
    """In a new worker, before CUDA starts: its context gets ``queues`` work queues (None: leave it)."""
    if queues is not None:
        os.environ[ENV] = str(queues)
