"""GPU faults and cheats end to end: illegal memory access, a kernel that never returns, a 200 GiB
allocation, a segfault and sys.exit(0) between healthy implementations; side-stream work and a
patched event timer. Each must be its status; the healthy ones must be measured; exit code 4."""

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

pytestmark = pytest.mark.gpu
HOSTILE = "tests/data/hostile/hostile_gpu.yaml"


def _run(tmp_path, workload, timeout):
    out = tmp_path / f"{workload}.json"
    result = CliRunner().invoke(main, ["run", HOSTILE, "-w", workload, "--timeout", str(timeout), "-o", str(out),
                                       "--budget", "0.5"])
    run = store.load(out)
    return result, {r.name: (r.status, r.message) for c in run.cases for r in c.impls}


def _launches(tmp_path, workload):
    """How each implementation's calls were timed in the run ``_run`` saved: (launch, why not a graph)."""
    run = store.load(tmp_path / f"{workload}.json")
    return {r.name: (r.protocol.get("launch"), r.protocol.get("graph_fallback", "")) for c in run.cases
            for r in c.impls}


def test_gpu_faults_are_statuses_and_healthy_ones_are_measured(tmp_path):
    result, status = _run(tmp_path, "gpu_faults", 30)
    assert result.exit_code == 4, result.output
    assert status["illegal_memory_access"][0] == "crashed", status["illegal_memory_access"]
    assert status["never_returns"][0] == "timeout"
    assert status["allocates_200_gib"][0] == "oom"
    assert status["segfault"][0] == "crashed" and "SIGSEGV" in status["segfault"][1]
    assert status["exits_zero"][0] == "crashed"
    for name in ("baseline", "honest", "after"):
        assert status[name][0] == "ok", status[name]
    run = store.load(tmp_path / "gpu_faults.json")
    peaks = {r.name: r.protocol.get("memory_peak_bytes", 0) for c in run.cases for r in c.impls}
    assert all(peaks[name] > 0 for name in ("baseline", "honest", "after")), peaks  # what each worker held


def test_gpu_cheats_are_caught(tmp_path):
    pytest.importorskip("cupti")  # the default launch replays graphs only where CUPTI checks them
    result, status = _run(tmp_path, "gpu_cheats", 60)
    launches = _launches(tmp_path, "gpu_cheats")
    assert result.exit_code == 4, result.output
    # its work hides outside the timed window: the time left is below T_SOL (or the output is caught unsettled)
    assert status["side_stream"][0] in ("reward_hack", "incorrect", "invalid"), status["side_stream"]
    assert status["patches_event_timer"][0] == "reward_hack"
    assert "elapsed_time" in status["patches_event_timer"][1]
    assert status["cached_by_pointer"][0] == "reward_hack"
    assert status["cached_copy_by_pointer"][0] in ("reward_hack", "invalid"), status["cached_copy_by_pointer"]
    # honest for its first five calls only. The checks before timing call it three times, and once more
    # whenever a check's spin ran dry or CUPTI had to be primed (guards.traced_call), which depends on the
    # host's speed: its sixth call falls in a checked call (incorrect) or after them (reward_hack, caught
    # in the timed or unseen-input calls). tests/unit/test_isolation.py pins the reward_hack path, where
    # the checks call exactly three times.
    first_calls = status["honest_first_calls_only"]
    assert first_calls[0] == "reward_hack" or (first_calls[0] == "incorrect" and "input set" in first_calls[1]), \
        first_calls
    # right when launched; captured, only a copy of its last result: timed launched, as it computes
    assert status["caches_under_capture"][0] == "ok", status["caches_under_capture"]
    assert launches["caches_under_capture"][0] == "stream", launches["caches_under_capture"]
    assert "ReplayMismatch: the replay ran other GPU work" in launches["caches_under_capture"][1]
    # waits 80 ms on the host, then hides its work on a side stream while the gate holds the timed
    # stream: the check's spin, sized from the call's host time, now outlasts the wait and sees it
    assert status["waits_out_the_check"][0] == "reward_hack", status["waits_out_the_check"]
    assert "before the current stream reached the call" in status["waits_out_the_check"][1]
    # sets SOLBENCH_NO_CUPTI=1 in its worker (set-up) to turn the CUPTI checks off: the worker read the
    # switch before any implementation ran, so its side-stream work is still seen
    assert status["turns_off_cupti"][0] == "reward_hack", status["turns_off_cupti"]
    assert "does not wait for the current stream" in status["turns_off_cupti"][1]
    assert status["baseline"][0] == "ok" and status["honest"][0] == "ok"
    assert launches["baseline"][0] == "graph" and launches["honest"][0] == "graph"


@pytest.mark.parametrize("impl", ["single", "double"])
def test_a_process_that_leaves_its_workers_group_does_not_outlive_a_gpu_run(impl, tmp_path):
    """The subreaper on the GPU (tests/unit/test_reaper.py runs it on the CPU): a worker with a CUDA
    context forks a process that calls setsid(); solbench, run in a process of its own, kills it
    before the last save, and says so."""
    import contextlib
    import os
    import subprocess
    import sys

    pid_file, out = tmp_path / "escapee.pid", tmp_path / "run.json"
    with open(tmp_path / "stderr", "w") as err:  # a file, not a pipe: a pipe stays open while the escapee lives
        done = subprocess.run([sys.executable, "-m", "solbench", "run", "tests/data/hostile/escapes.yaml", "-i", impl,
                               "--device", "cuda", "-o", str(out), "-q", "--budget", "0.2"],
                              env={**os.environ, "SOLBENCH_ESCAPEE_PID": str(pid_file)}, stdout=subprocess.DEVNULL,
                              stderr=err, timeout=600, check=False)
    pid = int(pid_file.read_text())
    try:
        assert done.returncode == 0, (tmp_path / "stderr").read_text()
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive, f"the escapee {pid} outlived the run"
        run = store.load(out)
        assert {r.name: r.status for c in run.cases for r in c.impls}[impl] == "ok"
        assert run.harness["escaped_killed"] == 1
        assert any(n.startswith("killed 1 process") for n in run.notes)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
