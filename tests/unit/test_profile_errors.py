"""``solbench profile`` when ncu, the profiled call or the report go wrong: one line, a non-zero exit.

A stand-in for ncu plays what a real one prints in each case (its lines as Nsight Compute 2025.3
words them); ``plan.json`` beside it says, per step, what to print, the exit status, and whether
the report file is written.
"""

import json
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from solbench.cli import main

CASE = "o_proj[tokens=16,hidden=4096,bfloat16]"

STAND_IN = '''#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
here = Path(__file__).parent
with open(here / "calls.txt", "a") as log:
    log.write(" ".join(args) + "\\n")
plan = json.loads((here / "plan.json").read_text())
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 0)")
    sys.exit(0)
if args == ["--query-metrics"]:
    sys.exit(0)
step = plan["import" if "--import" in args else "nvtx" if "--nvtx" in args else "api"]
sys.stdout.write(step.get("stdout", ""))
sys.stderr.write(step.get("stderr", ""))
if step.get("report"):
    Path(args[args.index("--export") + 1]).write_bytes(b"report")
sys.exit(step.get("rc", 0))
'''

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size",'
          '"dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum",'
          '"sm__throughput.avg.pct_of_peak_sustained_elapsed",'
          '"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"\n'
          '"","","","","","","","byte","byte","ns","%","%"\n')
KERNEL = '"0","1","python3.12","host","void k(float*)","(256, 1, 1)","(132, 1, 1)","1,000","2,000","5,000","80","20"\n'
PROFILED = {"stdout": "==PROF== Connected to process 1\n==PROF== Disconnected from process 1\n", "report": True}
NONE_PROFILED = {"stdout": "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n"}


def _profile(tmp_path, monkeypatch, plan, *extra):
    from solbench.config.hwspecs import get_spec

    fake = tmp_path / "ncu"
    fake.write_text(STAND_IN.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    info = SimpleNamespace(name="NVIDIA H200", spec=get_spec("h200-sxm"))
    monkeypatch.setattr("solbench.device.detect.detect", lambda device: info)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["profile", "workloads/attn.yaml", "-w", "o_proj", "-i", "fused",
                                       "--case", CASE, "--ncu", str(fake), "--out-dir", str(out), *extra])
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    return result, [c for c in calls if "--export" in c], out


def _one_line(result):
    assert "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("printed", ["", "==PROF== Connected\n", HEADER + '"0","1"\n'])
def test_a_report_ncu_cannot_read_back_is_one_line_exit_2(tmp_path, monkeypatch, printed):
    # ncu --import printing nothing (or a row short of its header) was a NcuParseError traceback, exit 5
    result, _, out = _profile(tmp_path, monkeypatch, {"nvtx": PROFILED, "import": {"stdout": printed}})
    assert result.exit_code == 2
    assert _one_line(result).startswith(f"error: ncu --import {out}/")
    assert not list(out.glob("*.json"))  # no summary of nothing


def test_a_report_with_no_kernel_is_an_error_not_an_empty_table(tmp_path, monkeypatch):
    # a header and its units but no kernel row: it printed an empty table, "no kernel was profiled", exit 0
    result, _, out = _profile(tmp_path, monkeypatch, {"nvtx": PROFILED, "import": {"stdout": HEADER}})
    assert result.exit_code == 2
    assert _one_line(result).startswith(f"error: ncu profiled no kernel in the timed call of {CASE} fused")
    assert not list(out.glob("*.json"))


def test_a_call_that_launches_no_kernel_says_so(tmp_path, monkeypatch):
    # neither the NVTX range nor cudaProfilerStart/Stop caught a kernel, and ncu wrote no report:
    # it said "ncu failed on ...: ==WARNING== No kernels were profiled."
    result, profiled, _ = _profile(tmp_path, monkeypatch, {"nvtx": NONE_PROFILED, "api": NONE_PROFILED})
    assert len(profiled) == 2  # the NVTX range, then cudaProfilerStart/Stop
    assert result.exit_code == 2
    line = _one_line(result)
    assert line.startswith(f"error: ncu profiled no kernel in the timed call of {CASE} fused")
    assert "nor between cudaProfilerStart and Stop" in line and "ncu failed" not in line


def test_a_report_with_a_kernel_is_summarised(tmp_path, monkeypatch):
    result, _, out = _profile(tmp_path, monkeypatch, {"nvtx": PROFILED, "import": {"stdout": HEADER + KERNEL}},
                              "--json")
    assert result.exit_code == 0, result.output
    (summary,) = out.glob("*.json")
    kernel = json.loads(summary.read_text())["summary"]["kernels"][0]
    assert (kernel["dram_read"], kernel["dram_write"], kernel["duration"]) == (1000.0, 2000.0, 5e-6)


PERMISSION = ("==PROF== Connected to process 1 (/usr/bin/python3.12)\n==ERROR== ERR_NVGPUCTRPERM - The user does not "
              "have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on "
              "enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
              "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n")


@pytest.mark.parametrize("rc", [0, 1])
def test_no_permission_for_the_counters_is_named(tmp_path, monkeypatch, rc):
    step = {"stdout": PERMISSION, "rc": rc}
    result, _, _ = _profile(tmp_path, monkeypatch, {"nvtx": step, "api": step})
    assert result.exit_code == 2
    line = _one_line(result)
    assert "ERR_NVGPUCTRPERM - The user does not have permission" in line and "no kernel" not in line


# ------------------------------------------------------------------ the profiled call fails


def test_the_target_says_in_one_line_why_the_implementation_failed(monkeypatch, capsys):
    import torch

    from solbench.tools import profile_target

    def launch():
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be ...")

    monkeypatch.setattr("solbench.measure.runner.prepare_case", lambda *a, **k: SimpleNamespace(sets=[{}]))
    monkeypatch.setattr("solbench.measure.runner.build_launches", lambda *a, **k: [launch])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(L2_cache_size=1 << 20))
    assert profile_target.main(["workloads/attn.yaml", "o_proj", "fused", CASE]) == 4
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == profile_target.failure(4, "fused raised RuntimeError: CUDA error: an illegal memory access was "
                                             "encountered (at test_profile_errors.py:" + last.split(":")[-1])
    assert last.startswith("solbench-profile-target: exit 4: fused raised RuntimeError: CUDA error: an illegal")


def _failed_under_ncu(code, why, rc):
    from solbench.tools.profile_target import failure

    return {"stdout": "==PROF== Connected to process 1 (/usr/bin/python3.12)\n==PROF== Disconnected from process 1\n"
                      f"==ERROR== The application returned an error code ({code}).\n"
                      "==WARNING== No kernels were profiled.",  # no newline at the end: as said, not a line of it
            "stderr": ('Traceback (most recent call last):\n  File "k.py", line 3\n' if code == 4 else "")
                      + failure(code, why) + "\n", "rc": rc}


@pytest.mark.parametrize("rc", [0, 4])  # whether or not ncu passes the application's exit status on
def test_an_implementation_that_raises_under_ncu_exits_4_with_its_error(tmp_path, monkeypatch, rc):
    # it said "ncu failed on ...: ==ERROR== The application returned an error code (1).", exit 2,
    # after profiling the failing call a second time between cudaProfilerStart/Stop
    why = "fused raised RuntimeError: CUDA error: an illegal memory access was encountered (at k.py:3)"
    result, profiled, out = _profile(tmp_path, monkeypatch, {"nvtx": _failed_under_ncu(4, why, rc)})
    assert result.exit_code == 4
    assert _one_line(result) == f"error: profiling {CASE}: {why}"
    assert len(profiled) == 1  # not again outside the NVTX range: it would fail the same way
    assert not list(out.glob("*.json"))


@pytest.mark.parametrize(("rc", "report"), [(11, False), (0, False), (139, True)])
def test_an_implementation_that_kills_its_process_under_ncu_exits_4(tmp_path, monkeypatch, rc, report):
    """A call that segfaults or calls os._exit prints no failure line: ncu said only "The application
    returned an error code (11)" and profile exited 2, as for a missing ncu or bad input. The target says
    when it starts the implementation and when it is done: started and never done is the implementation's
    failure, exit 4, whatever ncu's status and whether it wrote a report."""
    from solbench.tools.profile_target import started

    step = {"stdout": "==PROF== Connected to process 1 (/usr/bin/python3.12)\n"
                      f"==ERROR== The application returned an error code ({rc}).\n",
            "stderr": started("fused") + "\n", "rc": rc, "report": report}
    result, profiled, out = _profile(tmp_path, monkeypatch, {"nvtx": step})
    assert result.exit_code == 4, result.output
    line = _one_line(result)
    assert line.startswith(f"error: profiling {CASE}: fused's process ended inside its set-up or call"), line
    assert len(profiled) == 1 and not list(out.glob("*.json"))


def test_an_implementation_that_exits_0_before_any_kernel_is_not_profiled_twice(tmp_path, monkeypatch):
    """A call that ends its process with status 0 (sys.exit(0), os._exit(0)) before launching a kernel: ncu
    prints no error line, only "No kernels were profiled", which reads as a torch without NVTX, so the
    whole set-up ran a second time between cudaProfilerStart/Stop, to end the same way. The target said
    it started the implementation and never said done: that decides it at the first try."""
    from solbench.tools.profile_target import started

    step = {"stdout": NONE_PROFILED["stdout"], "stderr": started("fused") + "\n", "rc": 0}
    result, profiled, out = _profile(tmp_path, monkeypatch, {"nvtx": step, "api": step})
    assert result.exit_code == 4, result.output
    assert _one_line(result).startswith(f"error: profiling {CASE}: fused's process ended inside its set-up or call")
    assert len(profiled) == 1  # not again outside the NVTX range: it ends the same way
    assert not list(out.glob("*.json"))


# ncu's own failure (counters held by DCGM, its lock file, a kernel it could not profile): it shuts the
# target down itself, after the target said it started the implementation and before it could say done
SHUT_DOWN = ("==PROF== Connected to process 1 (/usr/bin/python3.12)\n==ERROR== An error was reported by the driver\n"
             "==ERROR== Profiling failed because a driver resource was unavailable. Ensure that no other tool (like "
             "DCGM) is concurrently collecting profiling data.\n==ERROR== Failed to profile \"k\" in process 1\n"
             "==PROF== Trying to shutdown target application\n==ERROR== The application returned an error code (9).\n"
             "==ERROR== An error occurred while trying to profile.\n==WARNING== No kernels were profiled.\n")


def test_a_target_ncu_shut_down_is_ncus_failure_not_the_implementations(tmp_path, monkeypatch):
    """ncu ends the profiled process itself when its own profiling fails ("Trying to shutdown target
    application"): the target said it started the implementation and never said done, which read as the
    implementation ending its process (exit 4, "fused's process ended inside its set-up or call"). It is
    ncu's failure, a machine's, not the implementation's: exit 2 with ncu's words, as before the markers."""
    from solbench.tools.profile_target import started

    step = {"stdout": SHUT_DOWN, "stderr": started("fused") + "\n", "rc": 9}
    result, profiled, out = _profile(tmp_path, monkeypatch, {"nvtx": step})
    assert result.exit_code == 2, result.output
    line = _one_line(result)
    assert line.startswith(f"error: ncu failed on {CASE} fused (exit status 9): "), line
    assert "process ended" not in line, line
    assert len(profiled) == 1 and not list(out.glob("*.json"))


def test_an_implementation_that_cannot_run_here_exits_2_with_why(tmp_path, monkeypatch):
    why = "fused cannot run here: needs CuPy (pip install -e '.[cuda12]')"
    result, profiled, _ = _profile(tmp_path, monkeypatch, {"nvtx": _failed_under_ncu(3, why, 3)})
    assert result.exit_code == 2
    assert _one_line(result) == f"error: profiling {CASE}: {why}"
    assert len(profiled) == 1


def test_no_permission_is_not_profiled_a_second_time(tmp_path, monkeypatch):
    result, profiled, _ = _profile(tmp_path, monkeypatch, {"nvtx": {"stdout": PERMISSION}, "api": PROFILED})
    assert result.exit_code == 2 and "ERR_NVGPUCTRPERM" in _one_line(result)
    assert len(profiled) == 1


# ------------------------------------------------------------------ files


def test_two_profiles_in_the_same_second_keep_both_reports(tmp_path, monkeypatch):
    # the file name was the UTC second, workload, implementation and case: a second profile in the same
    # second (another --params, another GPU) replaced the first one's .ncu-rep, CSV and summary
    import datetime as dt

    fixed = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    monkeypatch.setattr("solbench.tools.profile._dt", SimpleNamespace(
        UTC=dt.UTC, datetime=SimpleNamespace(now=lambda tz=None: fixed)))
    plan = {"nvtx": PROFILED, "import": {"stdout": HEADER + KERNEL}}
    for params in ('{"block": 1}', '{"block": 2}'):
        result, _, out = _profile(tmp_path, monkeypatch, plan, "--params", params)
        assert result.exit_code == 0, result.output
    summaries = sorted(out.glob("*.json"))
    assert len(summaries) == 2 and len(list(out.glob("*.csv"))) == 2
    params = [json.loads(s.read_text())["command"][-1] for s in summaries]
    assert sorted(params) == ['{"block": 1}', '{"block": 2}']
    for s in summaries:
        assert s.name.startswith("20260102T030405") and s.with_suffix(".ncu-rep").is_file()


# ------------------------------------------------------------------ a profiled call that never ends

HANGS = '''#!{python}
import subprocess, sys, time
from pathlib import Path
here = Path(__file__).parent
# the profiled process ncu starts: it writes its pid, then hangs (a kernel that never ends)
subprocess.Popen([sys.executable, "-c", "import os, time; open({pid!r}, 'w').write(str(os.getpid())); time.sleep(600)"])
time.sleep(600)
'''


def _gone(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # exited, not yet reaped by whoever adopted it


def test_ncu_past_its_time_is_killed_with_the_process_it_profiles(tmp_path):
    # subprocess.run killed ncu alone: the profiled process, hung on the GPU, was left running
    import os
    import time

    from solbench.errors import DeviceError
    from solbench.tools.profile import _run

    fake, pid_file = tmp_path / "ncu", tmp_path / "target.pid"
    fake.write_text(HANGS.format(python=sys.executable, pid=str(pid_file)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(DeviceError, match="ncu did not finish within 10 s"):
        _run([str(fake)], 10)
    assert pid_file.is_file(), "the stand-in's child did not start within the 10 s"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not _gone(pid):
        os.kill(pid, 9)
        pytest.fail("the profiled process outlived ncu's timeout")


@pytest.mark.parametrize(("step", "expected"), [
    ({}, "(exit status 0, but it wrote no report): it printed nothing"),  # was ": exit status 0", as if a reason
    ({"rc": 139}, "(exit status 139): it printed nothing"),
    ({"stdout": "==PROF== Connected to process 1\n==ERROR== Failed to connect to the target process\n", "rc": 1},
     "(exit status 1): ==ERROR== Failed to connect to the target process"),
])
def test_ncu_failing_says_how(tmp_path, monkeypatch, step, expected):
    result, profiled, _ = _profile(tmp_path, monkeypatch, {"nvtx": step})
    assert result.exit_code == 2
    assert _one_line(result) == f"error: ncu failed on {CASE} fused {expected}"
    assert len(profiled) == 1


def _profiled_table(tmp_path, monkeypatch, rows):
    """The kernel table's cells by name, of a profile whose ncu report holds ``rows`` (exit 0 asserted)."""
    monkeypatch.setenv("COLUMNS", "200")
    result, _, _ = _profile(tmp_path, monkeypatch, {"nvtx": PROFILED, "import": {"stdout": HEADER + rows}})
    assert result.exit_code == 0, result.output
    return {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.output.splitlines() if line.startswith("│")}


def test_totals_of_dram_counters_ncu_could_not_read_are_missing_not_zero(tmp_path, monkeypatch):
    # both kernels' DRAM counters n/a: the total row read "0 B" read and "0 B" written
    rows = ('"0","1","python3.12","host","void a(float*)","(256, 1, 1)","(1, 1, 1)","n/a","n/a","5,000","80","20"\n'
            '"1","1","python3.12","host","void b(float*)","(256, 1, 1)","(1, 1, 1)","n/a","n/a","5,000","80","20"\n')
    table = _profiled_table(tmp_path, monkeypatch, rows)
    assert table["void a(float*)"][1:3] == ["—", "—"]
    assert table["total"][0] == "10.0 µs" and table["total"][1:3] == ["—", "—"]


def test_a_kernel_without_a_write_counter_does_not_make_the_written_total_negative(tmp_path, monkeypatch):
    # the written total was (read + written of complete kernels) - every read: -1.00 MB here
    rows = ('"0","1","python3.12","host","void a(float*)","(256, 1, 1)","(1, 1, 1)","1,000","2,000","5,000","80","20"\n'
            '"1","1","python3.12","host","void b(float*)","(256, 1, 1)","(1, 1, 1)","1,000,000","n/a","5,000","80","20"\n')
    assert _profiled_table(tmp_path, monkeypatch, rows)["total"][1:3] == ["1.00 MB", "2.00 kB"]
