"""Device, hardware-spec and saved-run helpers of the Python API (re-exported by :mod:`solbench.api`):
what ``solbench info``, ``list``, ``show`` and ``calibrate`` read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench.config.workloads import load_workload_file
from solbench.config.yamlio import yaml_files
from solbench.errors import ConfigError, DeviceError
from solbench.results.model import RunResult
from solbench.workload.schema import WorkloadSpec

if TYPE_CHECKING:
    from solbench.analysis.hwspec import HardwareSpec


def hardware_spec(name: str | None, device: str = "auto") -> HardwareSpec:
    """The spec named (id or alias), or, when None, the spec of ``device`` as detected ("auto", "cpu",
    "cuda", "cuda:N")."""
    if name is None:
        from solbench.device.detect import detect

        return detect(device).spec
    from solbench.config.hwspecs import get_spec

    return get_spec(name)


def detected_spec(device: str = "auto") -> tuple[HardwareSpec, tuple[str, ...]]:
    """The spec of this machine's ``device`` and what detection was unsure of (an estimated spec, a
    device that disagrees with its datasheet, CPU peaks measured on busy cores, which peaks a
    measured spec lacks): the notes a measured run prints, which a dry run's T_SOL rests on too."""
    from solbench.device.detect import detect
    from solbench.plan.prepare import device_notes

    info = detect(device)
    return info.spec, device_notes(info)


def list_specs() -> tuple[HardwareSpec, ...]:
    """Every hardware spec shipped in hardware_specs/."""
    from solbench.config.hwspecs import load_specs

    return load_specs()


def list_workloads(paths: Sequence[str | Path]) -> list[tuple[Path, WorkloadSpec]]:
    """(file, workload) for every workload in ``paths``: workload files, folders of them, and KernelBench or
    SOL-ExecBench problems read in place (each problem's own file), as ``run`` takes them."""
    from solbench.suites import NoProblems, detect, load

    listed: list[tuple[Path, WorkloadSpec]] = []
    for p in map(Path, paths):
        files = yaml_files(p) if p.is_dir() else []
        try:
            suite = None if files else detect(p)
        except NoProblems:
            suite = None
        if suite is not None:
            listed += [(origin, spec) for spec, origin in load(p)]
            continue
        if p.is_dir() and not files:  # an empty table would read as "this folder's workloads: none", exit 0
            raise ConfigError(f"{p}: a folder with no workload file (.yaml, .yml), no KernelBench problem (.py "
                              "files defining Model) and no SOL-ExecBench problem (folders with definition.json)")
        listed += [(f, spec) for f in (files or [p]) for spec in load_workload_file(f)]
    return listed


def device_summary() -> dict[str, Any]:
    """Detected device, matched spec, driver, versions and current clocks, for ``solbench info``."""
    from solbench.device.detect import detect

    info = detect("auto")
    env = info.environment()
    data: dict[str, Any] = {k: v for k, v in vars(env).items() if v is not None}
    data["spec_source"] = info.spec.source
    if info.spec.kind != "cpu":
        # none where the card has no bf16 tensor unit (T4) or no peaks at all (an unmatched GPU of unknown
        # rates, which info must still show): peaks_for would refuse the latter and give 0 for the former
        if "bf16" in info.spec.tensor_peaks:
            data["bf16_tensor_peak_tflops"] = info.spec.tensor_peaks["bf16"] / 1e12
    else:  # measured on this host at start-up (solbench.device.cpu_peaks)
        data["fp32_peak_tflops"] = float(f"{info.spec.vector_peaks.get('fp32', 0.0) / 1e12:.4g}")
    if info.spec.bandwidth is not None:
        data["bandwidth_tbs"] = float(f"{info.spec.bandwidth / 1e12:.4g}")
    if info.warnings:  # an estimated spec, or a device that disagrees with its datasheet
        data["warnings"] = list(info.warnings)
    return data


def load_run(name_or_path: str, results_dir: Path = Path("results")) -> RunResult:
    """A saved run: a file path, or the newest run saved under that name."""
    from solbench.results import store

    return store.load(store.find(name_or_path, results_dir))


def calibrate(*, seconds: float = 1.0, results_dir: Path = Path("results"), device: str = "auto") -> Any:
    """Measure this GPU's ceilings and save them for ``run --peaks measured``."""
    import math

    if not (math.isfinite(seconds) and seconds > 0):  # inf never ends; NaN times no GEMM at all
        raise ConfigError(f"--seconds must be a positive finite number, got {seconds!r}")
    import torch

    from solbench.device import calibrate as cal
    from solbench.device.detect import detect
    from solbench.results import store

    info = detect(device)
    if info.kind != "cuda":
        raise DeviceError("calibrate needs a CUDA GPU; CPU peaks are measured at every run")
    from solbench.device import nvml

    handle = nvml.get_handle(info.uuid) if info.uuid else None
    with torch.cuda.device(info.index):  # the device named, whose UUID the ceilings are saved under
        result = cal.calibrate(torch, spec_id=info.spec.id, device_name=info.name, device_uuid=info.uuid,
                               seconds=seconds, driver=info.driver or nvml.driver_version(),
                               sm_clock=(lambda: nvml.read_clocks(handle).sm_clock_mhz) if handle is not None
                               else None)
    return result, store.save_calibration(result, results_dir), info.spec
