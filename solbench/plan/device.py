"""The device a run measures on and the peaks it is scored against.

    detect(device, options)          -> (DeviceInfo, floor spec)   datasheet or measured peaks
    with_peaks(info, peaks, dir)     -> the same for an already detected device (lanes, Ray actors)
    measured_spec(spec, uuid, dir)   -> the spec with the ceilings ``solbench calibrate`` saved
    with_end_clocks(result, info)    -> the run with the clocks read right after measuring
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solbench.errors import ConfigError, DeviceError
from solbench.results.model import RunResult

if TYPE_CHECKING:
    from solbench.analysis.hwspec import HardwareSpec
    from solbench.plan.options import RunOptions


def detect(device: str, options: RunOptions) -> tuple[Any, HardwareSpec]:
    """The device and its spec (measured ceilings with ``--peaks measured``), and the INVALID floor."""
    from solbench.device.detect import detect as detect_device  # device code only when measuring

    info = detect_device(device, cpu_threads=options.threads)
    if info.kind == "cpu":
        refuse_gpu_options(options)
    if info.kind == "cuda" and options.timer == "cupti":
        from solbench.device import cupti

        if not cupti.available():
            raise DeviceError(cupti.INSTALL_HINT)
    refuse_launch(options.launch, info.kind)
    return with_peaks(info, options.peaks, options.results_dir)


def refuse_launch(launch: str, device_kind: str) -> None:
    """``--launch graph`` where it cannot be honoured (``run``, ``tune``): ConfigError (exit 2) on the CPU,
    where it would do nothing; DeviceError without CUPTI, where no replay could be checked against the
    launched call, so none is used."""
    if launch != "graph":
        return
    if device_kind != "cuda":
        raise ConfigError(f"--launch {launch} replays CUDA graphs; on the CPU every call is made as it is "
                          "(leave --launch out)")
    from solbench.device import cupti

    if not cupti.wanted():
        raise DeviceError("--launch graph checks each replay against the launched call with NVIDIA's "
                          "cupti-python (pip install 'solbench[cupti]'; not with SOLBENCH_NO_CUPTI=1): "
                          "install it, or use --launch stream")


def refuse_gpu_options(options: RunOptions) -> None:
    """ConfigError (exit 2) for a GPU-only timing option on the CPU, which would otherwise do nothing
    (``--launch graph``: :func:`refuse_launch`, which tune calls too)."""
    if options.timer != "cold":
        raise ConfigError(f"--timer {options.timer} needs a CUDA GPU; on the CPU every sample is timed "
                          "with the wall clock (leave --timer out)")
    if options.flush != "clean":
        raise ConfigError(f"--flush {options.flush} flushes a GPU's L2; on the CPU nothing is flushed "
                          "(leave --flush out)")


def with_peaks(info: Any, peaks: str, results_dir: Path) -> tuple[Any, HardwareSpec]:
    """The device scored against its measured ceilings where ``peaks`` is "measured" (else as
    detected), and the spec of the INVALID floor (:func:`floor_spec`)."""
    if peaks != "measured":
        return info, info.spec
    measured = replace(info, spec=measured_spec(info.spec, info.uuid, results_dir))
    return measured, floor_spec(info.spec, measured.spec)


def measured_spec(spec: HardwareSpec, uuid: str | None, results_dir: Path) -> HardwareSpec:
    """The spec with the ceilings ``solbench calibrate`` measured on this device (others kept)."""
    from solbench.results import store

    if spec.kind == "cpu":
        return spec  # CPU peaks are always measured
    cal = store.load_calibration(results_dir, spec.id, uuid)
    # both tables: a bf16 case's vector term stays at the datasheet's bf16 vector peak (calibrate measures fp32's)
    kept = [(group, unit) for group, sheet, measured in (("tensor", spec.tensor_peaks, cal.tensor_peaks),
                                                        ("vector", spec.vector_peaks, cal.vector_peaks))
            for unit in sorted(set(sheet) - set(measured))]
    # kept from the spec as it was detected: a datasheet's, or estimated (a GPU no spec file matches, a MIG slice)
    note = f"measured ceilings of {cal.created}" + (
        f"; {spec.source} for {', '.join(f'{unit} {group}' for group, unit in kept)}" if kept else "")
    return spec.with_peaks(tensor={**spec.tensor_peaks, **cal.tensor_peaks},
                           vector={**spec.vector_peaks, **cal.vector_peaks},
                           bandwidth=cal.bandwidth, source="measured", note=note,
                           peak_sources={f"{group}.{unit}": spec.source for group, unit in kept})


def floor_spec(datasheet: HardwareSpec, measured: HardwareSpec) -> HardwareSpec:
    """Peaks for the INVALID rule: the higher of datasheet and measured, unit by unit."""
    def higher(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in {*a, *b}}

    return datasheet.with_peaks(tensor=higher(datasheet.tensor_peaks, measured.tensor_peaks),
                                vector=higher(datasheet.vector_peaks, measured.vector_peaks),
                                bandwidth=max(datasheet.bandwidth or 0.0, measured.bandwidth or 0.0))


def with_end_clocks(result: RunResult, info: Any) -> RunResult:
    """The run with the clocks read right after measuring (the start reading is often idle) and
    whether clocks were locked (:func:`solbench.device.nvml.clocks_locked`; read only); on every
    device, the host's load right after measuring (``host_load_end``)."""
    from solbench.device.detect import host_load

    result = replace(result, environment=replace(result.environment, host_load_end=host_load()))
    if info.kind != "cuda" or info.uuid is None:
        return result
    from solbench.device import nvml

    handle = nvml.get_handle(info.uuid)
    if handle is None:
        return result
    sample = nvml.read_clocks(handle)
    app = nvml.application_clocks(handle)
    seen = [bits for c in result.cases for r in c.impls if r.timing is not None
            for bits in r.timing.throttle_reasons if bits is not None]
    env = replace(result.environment, sm_clock_end_mhz=sample.sm_clock_mhz,
                  clock_event_reasons_end=sample.clocks_event_reasons,
                  applications_sm_clock_mhz=app.sm_mhz, default_applications_sm_clock_mhz=app.default_sm_mhz,
                  applications_mem_clock_mhz=app.mem_mhz, default_applications_mem_clock_mhz=app.default_mem_mhz,
                  clocks_locked=nvml.clocks_locked(app, seen))
    return replace(result, environment=env)
