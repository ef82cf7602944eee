"""A process an implementation starts outside its worker's process group (``setsid()``) does not
outlive the run: solbench is its subreaper and kills it before the last save
(solbench.measure.reaper, pool.sweep). Linux only (PR_SET_CHILD_SUBREAPER).

Every test runs solbench, or the reaper, in a process of its own: a pytest process that became a
subreaper would adopt the orphans of every later test.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from solbench.results import store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")

ESCAPES = "tests/data/hostile/escapes.yaml"
FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"]
ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    """Whether no process ``pid`` exists any more (a zombie still does: nobody reaped it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _end(pid: int) -> None:
    """Kill a sleeper left behind (the test failed), so that it does not sleep on for an hour."""
    if not _gone(pid):
        os.kill(pid, 9)


def _python(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter at the repository root; its output in files, not pipes
    (a pipe stays open while anything that inherited it lives)."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env},
                              stdout=o, stderr=e, timeout=600, check=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())


@pytest.mark.parametrize("impl", ["single", "double"])
def test_a_process_that_leaves_its_workers_group_does_not_outlive_the_run(impl, tmp_path):
    """single: a child that calls setsid() and sleeps (orphaned when its worker is killed); double:
    that child forks the sleeper and exits (orphaned while the worker runs)."""
    pid_file, out = tmp_path / "escapee.pid", tmp_path / "run.json"
    code = (f"import sys; from solbench.cli import main; sys.argv = ['solbench', 'run', {ESCAPES!r}, '-i', {impl!r}, "
            f"'-o', {str(out)!r}, '-q', *{FAST!r}]; main()")
    done = _python(code, {"SOLBENCH_ESCAPEE_PID": str(pid_file)}, tmp_path)
    pid = int(pid_file.read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert _gone(pid), f"the escapee {pid} outlived the run"
        run = store.load(out)
        assert {r.name: r.status for c in run.cases for r in c.impls}[impl] == "ok"
        assert run.harness["escaped_killed"] == 1
        assert any(n.startswith("killed 1 process that an implementation left running") for n in run.notes)
        assert "killed 1 process" in done.stderr  # -q still says so
    finally:
        _end(pid)


def test_an_in_process_run_kills_the_escapee_and_leaves_its_host_as_it_found_it(tmp_path):
    """A run inside a longer-lived process (the Python API; CliRunner under pytest): what the host
    started in a session of its own before the run is spared, and the host is no subreaper after."""
    pid_file, out = tmp_path / "escapee.pid", tmp_path / "run.json"
    code = textwrap.dedent(f"""
        import json, subprocess, sys
        from click.testing import CliRunner
        from solbench.cli import main
        from solbench.measure import reaper
        own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        before = reaper.subreaper()
        result = CliRunner().invoke(main, ["run", {ESCAPES!r}, "-i", "double", "-o", {str(out)!r}, *{FAST!r}])
        print(json.dumps({{"exit": result.exit_code, "output": result.output, "own": own.poll(),
                           "before": before, "after": reaper.subreaper()}}))
        own.kill()
        own.wait()
    """)
    done = _python(code, {"SOLBENCH_ESCAPEE_PID": str(pid_file)}, tmp_path)
    assert done.returncode == 0, done.stderr
    pid = int(pid_file.read_text())
    try:
        seen = json.loads(done.stdout.splitlines()[-1])
        assert seen["exit"] == 0, seen["output"]
        assert _gone(pid), f"the escapee {pid} outlived the run"
        assert seen["own"] is None  # the host's own process in a session of its own still runs
        assert (seen["before"], seen["after"]) == (False, False)
        assert store.load(out).harness["escaped_killed"] == 1
    finally:
        _end(pid)


# the scripts' shared part: whether a process is gone (its pid not signalable)
GONE = """
import os
def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
"""

KILL_ADOPTED = GONE + """
import os, subprocess, sys, time
from solbench.measure import reaper

def sleeper(**kw):
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], **kw)

def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


earlier = sleeper(start_new_session=True)  # the host's own, before hold(): spared
assert reaper.kill_adopted() == 0  # not a subreaper yet: nothing to do
assert reaper.hold() and reaper.subreaper()
same = sleeper()  # in this process's session: never touched
kept = sleeper(start_new_session=True)  # a live worker that is a child (spawn): passed as keep
r, w = os.pipe()
worker = os.fork()
if worker == 0:  # a worker: a session of its own; a sleeper that leaves it, with a child; one that exits
    os.setsid()
    for leaves in range(2):
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if leaves == 0:
                os._exit(0)
            child = os.fork()
            if child == 0:
                time.sleep(600)
                os._exit(0)
            os.write(w, f"{os.getpid()} {child}\\n".encode())
            time.sleep(600)
            os._exit(0)
        if leaves == 0:
            os.write(w, f"{pid}\\n".encode())
    time.sleep(0.2)
    os._exit(0)
os.close(w)
with os.fdopen(r) as f:
    exited, (escapee, its_child) = int(f.readline()), map(int, f.readline().split())
os.waitpid(worker, 0)  # the worker is gone: what it left is this process's now
while state(exited) != "Z":  # the one that exited, a zombie of this process
    time.sleep(0.01)
killed = reaper.kill_adopted(keep=[kept.pid])
assert killed == 2, killed  # the escapee and its child (adopted once the escapee died); the zombie reaped
assert gone(escapee) and gone(its_child) and gone(exited)
assert earlier.poll() is None and same.poll() is None and kept.poll() is None
reaper.release()
assert reaper.subreaper() is False
for p in (earlier, same, kept):
    p.kill()
    p.wait()
print("ok")
"""


def test_kill_adopted_kills_what_left_a_workers_session_and_nothing_else(tmp_path):
    done = _python(KILL_ADOPTED, {}, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


IN_A_KILLED_GROUP = GONE + """
import os, time
from solbench.measure import reaper


assert reaper.hold()
r, w = os.pipe()
worker = os.fork()
if worker == 0:  # a worker: a session of its own; a child left in its group, and one that leaves it
    os.setsid()
    stays = os.fork()
    if stays == 0:
        time.sleep(600)
        os._exit(0)
    os.write(w, f"stays {stays}\\n".encode())
    if os.fork() == 0:
        os.setsid()
        os.write(w, f"leaves {os.getpid()}\\n".encode())  # only once it has left the group
        time.sleep(600)
        os._exit(0)
    os._exit(0)
os.close(w)
with os.fdopen(r) as f:  # a line from each side, in either order: both are in place once both are read
    pids = dict(f.readline().split() for _ in range(2))
stays, leaves = int(pids["stays"]), int(pids["leaves"])
os.waitpid(worker, 0)  # both adopted by this process
# the pool has killed the worker's group (kill_group) and sweeps at once: its members, dying of that
# kill, may still be alive when the sweep looks (here they are, for certain: the group was not signalled)
killed = reaper.kill_adopted(killed_groups=[worker])
assert killed == 1, killed  # only the one that left the group escaped
assert gone(stays) and gone(leaves)
print("ok")
"""


def test_a_process_left_in_a_killed_workers_group_is_killed_but_not_counted_as_escaped(tmp_path):
    """A child that stayed in its worker's group did not try to outlive the worker: the run's note
    ("killed N processes ... outside its worker's process group (setsid())") must not count it."""
    done = _python(IN_A_KILLED_GROUP, {}, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
