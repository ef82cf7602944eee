"""Kill what an implementation leaves behind outside its worker's group: this process as a subreaper.

A worker leads its own session and process group (:func:`solbench.measure.pool.into_log` calls
``os.setsid``), and the parent kills that group when it is done with the worker. A process the
implementation forks can leave the group with ``setsid()`` (and fork again, its parent exiting):
without more, it is reparented to init when its parent dies and outlives the run. With
``prctl(PR_SET_CHILD_SUBREAPER, 1)`` on the process that starts workers (prctl(2)), such an
orphan is reparented to this process instead: the nearest living subreaper among its ancestors.

Every descendant of a worker is in a session other than this process's (a process cannot join
another session, only make a new one), while the fork server and multiprocessing's resource
tracker, this process's own children, stay in its session. So a child of this process in another
session is a worker's descendant it adopted, or a worker that is its direct child (``spawn``:
the caller passes those as ``keep``), or a process this process started in a new session itself
(``start_new_session``) before it became a subreaper (kept: :func:`hold` notes them).
:func:`kill_adopted` kills the rest, pass after pass: killing one reparents its own children here.

    hold()                             subreaper from the first worker on (pool.start)
    kill_adopted(keep, killed_groups)  after workers are closed (Pool._reap), before the run's last save
    release()                          once no worker is left (Pool.close): not a subreaper any more

Not covered: a process an implementation has started through something that is not its
descendant (``systemd-run --user``, ``at``, ``ssh localhost``); a tree that keeps forking new
generations faster than the passes kill them, for longer than ``SWEEP_S``; and anything after
this process is killed itself (SIGKILL: its adoptees go on to init). Those need a cgroup or a PID
namespace per run. Linux only; elsewhere (and without ``/proc``) these functions do nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from solbench.measure.nodump import libc_prctl

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
PR_GET_CHILD_SUBREAPER = 37
SWEEP_S = 5.0  # at most this long per sweep: killing adoptees, waiting for them, finding their children

__all__ = ["hold", "kill_adopted", "release", "subreaper"]


class _Hold(NamedTuple):
    """What :func:`hold` found: whether it set the flag itself (:func:`release` clears only that), and
    this process's children already in other sessions, as (pid, start time): not adopted."""

    set_here: bool
    before: frozenset[tuple[int, int]]


_hold: _Hold | None = None  # callers serialize hold, release and kill_adopted (pool._MAIN_LOCK)


def subreaper() -> bool | None:
    """``prctl(PR_GET_CHILD_SUBREAPER)``: whether this process is a subreaper; None off Linux."""
    prctl = libc_prctl()
    if prctl is None:
        return None
    flag = ctypes.c_int(0)
    if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        return None
    return bool(flag.value)


def hold() -> bool:
    """Make this process a subreaper (once; again after :func:`release`), noting the children it
    has in other sessions already. False where it cannot (not Linux, no ``/proc``)."""
    global _hold
    if _hold is not None:
        return True
    prctl = libc_prctl()
    if prctl is None or not os.path.isdir("/proc"):
        return False
    was = subreaper()
    if not was and _set(prctl, 1) != 0:
        return False
    _hold = _Hold(not was, frozenset((pid, start) for pid, _, start, _ in _others()))
    return True


def release() -> None:
    """Stop being a subreaper where :func:`hold` made this process one (the run's workers are all
    gone: nothing of theirs is left to adopt)."""
    global _hold
    prctl = libc_prctl()
    if _hold is not None and _hold.set_here and prctl is not None:
        _set(prctl, 0)
    _hold = None


def _set(prctl: Any, on: int) -> int:
    """``prctl(PR_SET_CHILD_SUBREAPER, on)``, the flag passed as the unsigned long the kernel reads."""
    return int(prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(on), 0, 0, 0))


def kill_adopted(keep: Iterable[int] = (), killed_groups: Iterable[int] = ()) -> int:
    """SIGKILL every child of this process in another session (what it adopted from workers), but
    the pids in ``keep`` (live workers that are its children) and those there before :func:`hold`;
    wait for each, and again for the children each one leaves, until none is left or ``SWEEP_S``
    has passed. Adopted zombies are only waited for. Returns how many live processes it killed
    that had left their worker's group: one still in a group of ``killed_groups`` (a worker's group
    the caller has SIGKILLed: it is dying of that, adopted here on its way out when its parent died
    first) is killed and waited for too, but not counted.
    Never raises for what it cannot read or signal (one it may not signal is left alone); nothing
    where :func:`hold` was not called."""
    if _hold is None:
        return 0
    kept, before, groups = set(keep), _hold.before, set(killed_groups)
    killed = 0
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        found = [(pid, state, group) for pid, state, start, group in _others()
                 if pid not in kept and (pid, start) not in before]
        if not found:
            break
        for pid, state, group in found:
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                    if group not in groups:  # it left its worker's group, or its worker was not killed
                        killed += 1
                except OSError:  # not this user's to signal any more (it ran a set-user-ID program): left
                    kept.add(pid)
        for pid, _, _ in found:
            if pid not in kept:
                _wait(pid, deadline)
    return killed


def _wait(pid: int, deadline: float) -> None:
    """Reap the child ``pid``, polling until ``deadline`` (a process in uninterruptible sleep dies late)."""
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except OSError:  # reaped already (ECHILD)
            return
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.001)


def _others() -> list[tuple[int, str, int, int]]:
    """(pid, state, start time, process group) of this process's children in a session other than
    its own: one scan of ``/proc/<pid>/stat`` (fields after the last ")": the name may hold any
    character)."""
    me, session = os.getpid(), os.getsid(0)
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            state, ppid, group, sid, start = (fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]),
                                              int(fields[19]))
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and sid != session:
            out.append((int(name), state, start, group))
    return out
