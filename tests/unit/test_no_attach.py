"""Workers, ranks and the fork server are undumpable: no other process of the user may ptrace them
or open their /proc/<pid>/mem (solbench.measure.nodump). Linux only.

The implementations in tests/data/hostile/attach.py answer right only when their own process is
undumpable, so a run's statuses say what the flag was while user code ran. Where the tests run as
root (CAP_SYS_PTRACE passes the kernel's check whatever the flag), reading another process's
memory cannot show anything; that test runs only without root.
"""

import multiprocessing
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_DUMPABLE) is Linux's")

ATTACH = "tests/data/hostile/attach.yaml"
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "20", "--device", "cpu"]


def test_forbid_attach_clears_the_dumpable_flag_of_its_process():
    code = ("from solbench.measure import nodump; before = nodump.dumpable(); "
            "print(before, nodump.forbid_attach(), nodump.dumpable())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout.split()
    assert out == ["1", "True", "0"]


def test_workers_and_ranks_run_user_code_undumpable(tmp_path):
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", ATTACH, "--timeout", "120", "-o", str(out), "-q", *FAST])
    statuses = {(c.workload, r.name): (r.status, r.message) for c in store.load(out).cases for r in c.impls}
    assert {k: v[0] for k, v in statuses.items()} == {
        (w, name): "ok" for w in ("attach", "attach_ranks") for name in ("baseline", "undumpable")}, statuses
    assert result.exit_code == 0


def _sleeper(conn):
    conn.recv()


@pytest.mark.skipif(os.geteuid() == 0, reason="root's CAP_SYS_PTRACE opens any process's memory")
def test_another_process_cannot_open_a_workers_memory():
    from multiprocessing import forkserver

    from solbench.measure.pool import ProcessWorker, _context

    # the check must pass against a child of this process that did not clear the flag (else a
    # stricter kernel setting, such as Yama's ptrace_scope 2, forbids it anyway: nothing to show)
    parent, child = multiprocessing.get_context("fork").Pipe()
    plain = multiprocessing.get_context("fork").Process(target=_sleeper, args=(child,))
    plain.start()
    try:
        open(f"/proc/{plain.pid}/mem", "rb").close()
    except PermissionError:
        pytest.skip("this kernel forbids opening a child's memory whatever the flag")
    finally:
        parent.send(None)
        plain.join(10)
    assert _context().get_start_method() == "forkserver"
    worker = ProcessWorker("cpu", None)
    try:
        worker._wait_ready()
        server = forkserver._forkserver._forkserver_pid
        for pid in (worker._proc.pid, server):
            with pytest.raises(PermissionError):
                open(f"/proc/{pid}/mem", "rb").close()
    finally:
        worker.kill()
