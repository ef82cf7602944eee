"""Exit codes of every command, and how two of them combine.

    0    success
    3    a gate was inconclusive (too noisy to decide at the threshold)
    1    a gate found a regression, or a case that fails now (BROKEN: ok in the baseline, or absent or
         skipped there; STILL-BROKEN: failing in the baseline too)
    4    an implementation failed: incorrect, invalid, error, crashed, timeout, oom or reward_hack
    2    bad input or usage: the command could not do what was asked
    5    solbench itself failed (an unexpected exception, a bug: the traceback says where); never 1,
         which a CI reads as a regression of the code under test
    141  the reader of standard output closed it before the command was done (``| head``): what the
         command printed was cut (as a shell reports a process that SIGPIPE ended); never 1
    130  interrupted (Ctrl-C); what was measured is saved, marked incomplete
    143  terminated (SIGTERM, e.g. a cancelled CI job): as Ctrl-C

Listed from least to most severe. ``run --gate-against`` exits with the worse of the run's code
and the gate's code (:func:`worst`), so a broken implementation is never hidden behind a passing
gate, and a regression is never hidden behind an inconclusive case.
"""

from __future__ import annotations

OK = 0
REGRESSION = 1
USAGE = 2
INCONCLUSIVE = 3
IMPL_FAILED = 4
INTERNAL = 5
PIPE_CLOSED = 141
INTERRUPTED = 130
TERMINATED = 143

SEVERITY: tuple[int, ...] = (OK, INCONCLUSIVE, REGRESSION, IMPL_FAILED, USAGE, INTERNAL, PIPE_CLOSED, INTERRUPTED,
                             TERMINATED)


def worst(*codes: int) -> int:
    """The most severe of ``codes`` (unknown codes rank above all known ones)."""
    def rank(code: int) -> int:
        return SEVERITY.index(code) if code in SEVERITY else len(SEVERITY)

    return max(codes, key=rank, default=OK)
