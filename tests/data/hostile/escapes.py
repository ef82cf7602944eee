"""Implementations that start a process outside their worker's process group, to outlive the run.

Each forks once per run (the first call where the pid file named by ``SOLBENCH_ESCAPEE_PID`` does
not exist yet): a process that calls ``setsid()`` (so killing the worker's group misses it) and
sleeps an hour, as one that would rewrite the result file once solbench has exited. Its pid goes to
the pid file before the call returns. Without ``SOLBENCH_ESCAPEE_PID`` they only compute.
"""

import os
import time

PID_FILE = "SOLBENCH_ESCAPEE_PID"


def ref(x, n):
    return x * 2


def honest(x, n):
    return x * 2


def _escape(double: bool) -> None:
    """Fork a process that leaves the worker's session and group; ``double``: it forks the sleeper
    and exits at once (the sleeper is orphaned while the worker still runs)."""
    path = os.environ.get(PID_FILE)
    if not path or os.path.exists(path):
        return
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        os.setsid()
        if double and os.fork() != 0:
            os._exit(0)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        time.sleep(3600)
        os._exit(0)
    os.close(w)
    pid = os.read(r, 32).decode()
    os.close(r)
    with open(path, "w") as f:
        f.write(pid)


def single(x, n):
    """A child in a session of its own that never exits: orphaned when its worker dies."""
    _escape(double=False)
    return x * 2


def double(x, n):
    """The classic daemon's double fork: a child that calls setsid(), forks the sleeper and exits."""
    _escape(double=True)
    return x * 2
