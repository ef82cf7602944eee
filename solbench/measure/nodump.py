"""Keep other processes of the same user from attaching to a worker: ``prctl(PR_SET_DUMPABLE, 0)``.

A process that is not "dumpable" can be ptrace-attached, and its ``/proc/<pid>/mem`` (also
``environ``, ``fd/``, ``maps``...) opened, only by a process holding ``CAP_SYS_PTRACE`` over it
(ptrace(2), "Ptrace access mode checking"; proc(5); prctl(2), ``PR_SET_DUMPABLE``). Workers, rank
processes and the fork server they are forked from set it before any implementation is imported,
so one implementation cannot read or rewrite another's memory, nor the fork server's (whose
later forks would carry the change). The flag is kept across ``fork`` and reset by ``execve``
(a worker started with ``spawn`` sets it in its first step, :func:`solbench.measure.pool.into_log`).

Not covered: a process with ``CAP_SYS_PTRACE`` (root, in most containers) passes the check anyway,
and signals between processes of one user are not governed by this flag at all (kill(2) compares
user ids only: keeping workers from signalling each other needs a user id or a PID namespace
per worker). Linux only; elsewhere these functions do nothing.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

PR_GET_DUMPABLE = 3  # <linux/prctl.h>
PR_SET_DUMPABLE = 4

__all__ = ["dumpable", "forbid_attach", "libc_prctl"]


def libc_prctl() -> Any:
    """libc's ``prctl`` (ctypes, errno kept), or None off Linux (:mod:`solbench.measure.reaper` too)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


def forbid_attach() -> bool:
    """Make this process undumpable; True when the flag is now set, False where prctl is missing."""
    prctl = libc_prctl()
    return prctl is not None and prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 and dumpable() == 0


def dumpable() -> int | None:
    """``prctl(PR_GET_DUMPABLE)``: 0 undumpable, 1 dumpable (2: root-only dumps); None off Linux."""
    prctl = libc_prctl()
    if prctl is None:
        return None
    value = int(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    return None if value < 0 else value
