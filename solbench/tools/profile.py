"""Run one case of one implementation under Nsight Compute and set its counters beside the model.

    ncu --nvtx --nvtx-include solbench_timed/          only the timed call (warm-up outside)
        --clock-control none                           clocks as found (ncu would lock them to base)
        --cache-control all                            caches flushed before each kernel (cold, as solbench's timer)
        --section SpeedOfLight --section Occupancy --section LaunchStats
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,<FP32 and tensor-pipe counters>
        --export R.ncu-rep  python -m solbench.tools.profile_target FILE WORKLOAD IMPL CASE_ID
    ncu --import R.ncu-rep --csv --page raw --print-units base     -> profile_ncu.parse_raw_csv

If the NVTX filter catches no kernel (a torch built without NVTX), the call is profiled again
between cudaProfilerStart/Stop (``--profile-from-start off``); not where ncu or the profiled process
said something failed (a second try would fail the same way). Without ncu or a CUDA GPU, or when
neither catches a kernel or ncu's report cannot be read back: DeviceError (one line, exit 2); where
the implementation raised, ProfiledCallFailed with the profiled process's own line (exit 4).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solbench import exitcodes
from solbench.errors import ConfigError, DeviceError
from solbench.text import suggest
from solbench.tools.ncu import (
    NcuParseError,
    ProfileSummary,
    parse_metric_names,
    parse_raw_csv,
    summarize,
    wanted_metrics,
)
from solbench.tools.profile_target import FAILED, MARK, RANGE, done, started

SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats")
_NO_KERNELS = "No kernels were profiled"
_NCU_ERROR = "==ERROR=="  # how ncu starts a line of its own errors (ERR_NVGPUCTRPERM, a failed application)
# ncu ending the profiled process itself, its own profiling having failed (counters held by another tool, its
# lock file, a kernel it could not profile): the target then never says done, through no doing of its own
_SHUT_DOWN = "==PROF== Trying to shutdown target application"
_TARGET_FAILED = re.compile(rf"^{re.escape(MARK)}: exit (\d+): (.*)$", re.MULTILINE)


class ProfiledCallFailed(DeviceError):
    """The profiled process stopped: exit 4 where the implementation raised (as ``run`` exits for a
    failed implementation), else 2 (it cannot run here, or bad input)."""

    def __init__(self, message: str, target_code: int) -> None:
        super().__init__(message)
        self.exit_code = exitcodes.IMPL_FAILED if target_code == FAILED else exitcodes.USAGE


@dataclass(frozen=True)
class ProfileRequest:
    """What to profile and where to put the report."""

    file: str
    workload: str
    impl: str
    case_id: str | None = None  # None: the workload's first case on CUDA
    ncu: str | None = None  # path to ncu; None: from PATH
    out_dir: Path = Path("results") / "profiles"
    params: dict[str, Any] = field(default_factory=dict)  # extra keyword arguments (e.g. tuned)
    warmup: int = 3
    timeout_s: float = 600.0


@dataclass(frozen=True)
class ProfileResult:
    """One profiled call: where the report is, how it was taken, and the summary."""

    created: str
    device_name: str
    workload: str
    impl: str
    case_id: str
    t_sol: float
    ncu_rep: str
    ncu_version: str
    range_mode: str  # "nvtx" or "profiler-api"
    command: tuple[str, ...]
    summary: ProfileSummary
    csv_text: str = ""


def find_ncu(explicit: str | None) -> str:
    """The ncu executable: ``explicit`` if given, else the one on PATH; DeviceError when none."""
    if explicit is not None:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise DeviceError(f"--ncu {explicit}: not an executable file")
        return str(path)
    found = shutil.which("ncu")
    if found is None:
        raise DeviceError("Nsight Compute (ncu) is not on PATH: install it or pass --ncu PATH")
    return found


def _locate(req: ProfileRequest) -> tuple[Any, Any]:
    from solbench.plan.workloads import located, plan

    p = plan([req.file], "cuda", [req.workload])[0]
    if p.spec.world_size > 1:  # the profiled process has no group of ranks for its collectives
        raise located(p.path, ["workloads", p.index, "world_size"], f"workload {req.workload!r} has world_size "
                      f"{p.spec.world_size}: profile runs one process under ncu, not a group of ranks")
    if req.impl not in p.spec.implementations:
        raise ConfigError(f"{req.file}: workload {req.workload!r} has no implementation {req.impl!r}"
                          f"{suggest(req.impl, p.spec.implementations)} "
                          f"(implementations: {', '.join(p.spec.implementations)})")
    if req.case_id is None:
        return p, p.cases[0]
    case = next((c for c in p.cases if c.id == req.case_id), None)
    if case is None:
        raise ConfigError(f"{req.file}: no case {req.case_id!r} in {req.workload} on CUDA (cases: "
                          f"{', '.join(c.id for c in p.cases)})")
    return p, case


def _run(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ncu in a process group of its own; past ``timeout_s`` (or on Ctrl-C) the whole group is killed:
    ncu and the process it profiles (killing ncu alone left that one running, hung on the GPU)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()  # not communicate(): a process that left the group could hold the pipes open
            if isinstance(exc, subprocess.TimeoutExpired):
                raise DeviceError(f"ncu did not finish within {timeout_s:g} s") from None
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _query(ncu: str) -> set[str] | None:
    out = _run([ncu, "--query-metrics"], 120)
    names = parse_metric_names(out.stdout)
    return names or None


def _version(ncu: str) -> str:
    out = _run([ncu, "--version"], 60)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "?"


def _profile_cmd(ncu: str, req: ProfileRequest, case_id: str, rep: Path, metrics: list[str],
                 nvtx: bool) -> list[str]:
    select = ["--nvtx", "--nvtx-include", f"{RANGE}/"] if nvtx else ["--profile-from-start", "off"]
    sections = [x for s in SECTIONS for x in ("--section", s)]
    return [ncu, *select, "--clock-control", "none", "--cache-control", "all", "--target-processes", "all",
            *sections, "--metrics", ",".join(metrics), "--export", str(rep), "--force-overwrite",
            sys.executable, "-m", "solbench.tools.profile_target", req.file, req.workload, req.impl, case_id,
            "--warmup", str(req.warmup), "--params", json.dumps(req.params)]


def _last_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (out.stderr + "\n" + out.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["it printed nothing"])[-1]


def profile(req: ProfileRequest) -> ProfileResult:
    """Profile the timed call of one case under ncu; the report lands in ``req.out_dir``."""
    from solbench.analysis.sol import speed_of_light
    from solbench.device.detect import detect
    from solbench.plan.workloads import cost_of
    from solbench.results.store import slug

    ncu = find_ncu(req.ncu)
    try:
        info = detect("cuda")
    except DeviceError as exc:
        raise DeviceError(f"profile needs a CUDA GPU: {exc}") from None
    p, case = _locate(req)
    cost = cost_of(p, case)
    peaks = info.spec.peaks_for(case.dtype)
    t_sol = speed_of_light(cost, peaks).t_sol
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    stamp = created.replace(":", "").replace("-", "").split("+")[0]
    req.out_dir.mkdir(parents=True, exist_ok=True)
    # a random part, as a run's file name has: two profiles started in one second must not share files
    rep = req.out_dir / f"{stamp}-{secrets.token_hex(2)}_{slug(req.workload)}_{slug(req.impl)}_{slug(case.id)}.ncu-rep"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    mode, cmd = _take(ncu, req, case.id, rep, wanted_metrics(_query(ncu)), env)
    csv_out = _run([ncu, "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"], 300)
    if csv_out.returncode != 0:
        raise DeviceError(f"ncu --import {rep} failed (exit status {csv_out.returncode}): {_last_line(csv_out)}")
    try:
        kernels = parse_raw_csv(csv_out.stdout)
    except NcuParseError as exc:  # a bug of neither the user nor solbench: one line, not a traceback
        raise DeviceError(f"ncu --import {rep}: {exc}") from None
    if not kernels:  # a summary of nothing would read as a profile, exit 0
        raise DeviceError(_no_kernel(case.id, req.impl, mode))
    summary = summarize(kernels, analytic_bytes=cost.fused_bytes, analytic_tensor_flops=cost.tensor_flops,
                        analytic_vector_flops=cost.vector_flops, ridge=ridge_point(kernels, peaks))
    return ProfileResult(created, info.name, req.workload, req.impl, case.id, t_sol, str(rep), _version(ncu),
                         mode, tuple(cmd), summary, csv_out.stdout)


def _take(ncu: str, req: ProfileRequest, case_id: str, rep: Path, metrics: list[str],
          env: dict[str, str]) -> tuple[str, list[str]]:
    """Profile the timed call into ``rep``: in the NVTX range, else between cudaProfilerStart/Stop.
    The range mode and the command; DeviceError, one line, for whatever kept ncu from writing it."""
    mode, cmd = "nvtx", _profile_cmd(ncu, req, case_id, rep, metrics, nvtx=True)
    out = _run(cmd, req.timeout_s, env)
    said = out.stdout + "\n" + out.stderr
    # no kernel in the range, and nothing failed: NVTX is missing (else a second try fails as the first);
    # a target that started the implementation and never said done failed too, even with status 0
    if _NO_KERNELS in said and _NCU_ERROR not in said and _target_failure(said) is None \
            and not _unfinished(said, req.impl):
        mode, cmd = "profiler-api", _profile_cmd(ncu, req, case_id, rep, metrics, nvtx=False)
        out = _run(cmd, req.timeout_s, env)
        said = out.stdout + "\n" + out.stderr
    failed = _target_failure(said)
    if failed is not None:  # ncu's own last line says only "The application returned an error code (N)"
        code, why = failed
        raise ProfiledCallFailed(f"profiling {case_id}: {why}", code)
    # no failure line: the call ended its process (unless ncu ended it: ncu's failure, below)
    if _unfinished(said, req.impl) and _SHUT_DOWN not in said:
        raise ProfiledCallFailed(f"profiling {case_id}: {req.impl}'s process ended inside its set-up or call, "
                                 f"with no error raised (a signal or an exit; ncu: {_last_line(out)})", FAILED)
    if out.returncode == 0 and not rep.is_file() and _NO_KERNELS in said and _NCU_ERROR not in said:
        raise DeviceError(_no_kernel(case_id, req.impl, mode))
    if out.returncode != 0 or not rep.is_file():
        status = f"exit status {out.returncode}" if out.returncode else "exit status 0, but it wrote no report"
        raise DeviceError(f"ncu failed on {case_id} {req.impl} ({status}): {_last_line(out)}")
    return mode, cmd


def _unfinished(said: str, impl: str) -> bool:
    """Whether the profiled process started the implementation and never said its call was done."""
    return started(impl) in said and done(impl) not in said


def _target_failure(said: str) -> tuple[int, str] | None:
    """The exit code and reason the profiled process gave for stopping (profile_target.failure)."""
    found = _TARGET_FAILED.findall(said)
    return (int(found[-1][0]), found[-1][1].strip()) if found else None


def _no_kernel(case_id: str, impl: str, mode: str) -> str:
    where = f"the NVTX range {RANGE}" + (", nor between cudaProfilerStart and Stop" if mode != "nvtx" else "")
    return f"ncu profiled no kernel in the timed call of {case_id} {impl} ({where}): does it launch CUDA kernels?"


def ridge_point(kernels: Any, peaks: Any) -> float:
    """Peak FLOP/s over bandwidth, for the tensor units when the kernels ran mostly on them."""
    tensor = sum(k.tensor_flops or 0.0 for k in kernels)
    fp32 = sum(k.fp32_flops or 0.0 for k in kernels)
    peak = peaks.tensor_flops if peaks.tensor_flops and tensor >= fp32 else peaks.vector_flops
    return float(peak / peaks.bandwidth)


def profile_dict(result: ProfileResult) -> dict[str, Any]:
    """A JSON-ready dict of a profile (the ncu CSV is written beside it, not inside)."""
    data = dataclasses.asdict(result)
    data.pop("csv_text")
    s = result.summary
    data["format"] = "solbench-profile/1"
    data["summary"].update(bytes_ratio=s.bytes_ratio, tensor_ratio=s.tensor_ratio, fp32_ratio=s.fp32_ratio,
                           measured_intensity=s.measured_intensity)
    for k, obj in zip(data["summary"]["kernels"], s.kernels, strict=True):
        k["dram_bytes"] = obj.dram_bytes
    return data
