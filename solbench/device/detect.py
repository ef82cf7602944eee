"""Find the device a run measures on, and the hardware spec its speed of light uses.

    detect("auto")   CUDA device 0 (torch's current device) if torch sees one, else the CPU
    detect("cuda:1") that GPU; DeviceError when CUDA is unavailable
    detect("cpu")    the CPU, with peaks measured on this host (cached per process)

Spec lookup on a GPU, first hit wins:
    1. NVML PCI device ID        (NVML found by the torch device's UUID, never by CUDA index)
    2. name patterns             NVML name, then torch name ("MIG ..." suffix ignored)
    3. estimate from torch       SMs x max SM clock x per-SM rate; bandwidth from memory clocks;
                                 source "estimated", with a warning in the spec's notes
A MIG slice gets the full GPU's spec scaled by its share of SMs and memory (source "estimated").
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from solbench._version import __version__
from solbench.analysis.hwspec import HardwareSpec, estimate_spec, is_mig, match_spec, strip_mig
from solbench.analysis.scoring import CPU_LEAST_BANDWIDTH, CPU_LEAST_FLOPS
from solbench.device import cpu_peaks, nvml, threads
from solbench.device.nvml import NvmlInfo
from solbench.errors import DeviceError
from solbench.results.model import Environment

_BANDWIDTH_WARN = (0.9, 1.12)  # clock-derived / datasheet bandwidth outside this range -> warning


@dataclass(frozen=True)
class DeviceInfo:
    """The device a run measures on, the spec it is scored against, and its software versions."""

    kind: str  # "cuda" or "cpu"
    index: int | None
    name: str
    spec: HardwareSpec
    nvml: NvmlInfo | None
    torch_version: str | None
    cuda_version: str | None
    cupy_version: str | None
    driver: str | None
    sm_count: int | None
    l2_bytes: int | None
    uuid: str | None = None
    memory_bytes: int | None = None
    warnings: tuple[str, ...] = ()

    def environment(self) -> Environment:
        """The fingerprint stored with every result."""
        nv = self.nvml
        return Environment(
            device_kind=self.kind, device_name=self.name, spec_id=self.spec.id, device_uuid=self.uuid,
            pci_device_id=f"0x{nv.pci_device_id:04x}" if nv and nv.pci_device_id is not None else None,
            driver=self.driver, cuda=self.cuda_version, torch=self.torch_version, cupy=self.cupy_version,
            python=platform.python_version(), host=platform.node() or None, sm_count=self.sm_count,
            sm_clock_mhz=nv.sm_clock_mhz if nv else None, max_sm_clock_mhz=nv.max_sm_clock_mhz if nv else None,
            mem_clock_mhz=nv.mem_clock_mhz if nv else None, power_limit_w=nv.power_limit_w if nv else None,
            solbench=__version__, host_load=host_load(),
        )


def host_load() -> float | None:
    """The host's 1-minute load average per CPU, rounded to 0.01 (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)
    except (OSError, AttributeError):
        return None


def detect(device: str = "auto", specs: Sequence[HardwareSpec] | None = None, *, cpu_threads: int = 0) -> DeviceInfo:
    """The device named by ``device`` ("auto", "cpu", "cuda", "cuda:N") with its matched spec.

    On the CPU the peaks are measured with ``cpu_threads`` torch threads (0: the thread policy's
    default, :mod:`solbench.device.threads`), the threads the run measures with.
    """
    import torch

    kind, index = _parse(device)
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if specs is None:
        from solbench.config.hwspecs import load_specs

        specs = load_specs()
    if kind == "cpu":
        return _detect_cpu(specs, threads.policy(cpu_threads, "cpu"))
    if not torch.cuda.is_available():
        raise DeviceError(f"device {device!r} requested but torch.cuda.is_available() is False")
    if index is None:
        index = torch.cuda.current_device()
    if not 0 <= index < torch.cuda.device_count():
        raise DeviceError(f"no CUDA device {index}: torch sees {torch.cuda.device_count()}")
    return _detect_cuda(index, specs)


def _parse(device: str) -> tuple[str, int | None]:
    text = device.strip().lower()
    if text in ("auto", "cpu"):
        return text, None
    m = re.fullmatch(r"cuda(?::(\d+))?", text)
    if m is None:
        raise DeviceError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")
    return "cuda", int(m.group(1)) if m.group(1) else None


def _detect_cpu(specs: Sequence[HardwareSpec], n_threads: int) -> DeviceInfo:
    import torch

    base = next((s for s in specs if s.kind == "cpu"), None)
    if base is None:
        raise DeviceError("no hardware spec with kind: cpu (hardware_specs/cpu.yaml)")
    measured = cpu_peaks.measure_cpu_peaks(threads=n_threads)
    spec = base.with_peaks(tensor={}, vector={"fp32": measured["vector_fp32_flops"]},
                           bandwidth=measured["bandwidth"], source="measured")
    return DeviceInfo(kind="cpu", index=None, name=_cpu_name(), spec=spec, nvml=None,
                      torch_version=torch.__version__, cuda_version=torch.version.cuda,
                      cupy_version=_cupy_version(), driver=None, sm_count=None, l2_bytes=None,
                      warnings=starved_cpu_peaks(measured))


def starved_cpu_peaks(measured: dict[str, float]) -> tuple[str, ...]:
    """A warning where the measured CPU peaks read below what any host reaches unloaded: other
    processes held the cores while they were measured, so SOL and MFU read high (the INVALID floor
    takes no rate this low, :mod:`solbench.analysis.scoring`)."""
    flops, bandwidth = measured["vector_fp32_flops"], measured["bandwidth"]
    if flops >= CPU_LEAST_FLOPS and bandwidth >= CPU_LEAST_BANDWIDTH:
        return ()
    return (f"the CPU peaks measured {flops / 1e9:.2f} GFLOP/s and {bandwidth / 1e9:.2f} GB/s, below what a host "
            f"reaches unloaded ({CPU_LEAST_FLOPS / 1e9:.0f} GFLOP/s, {CPU_LEAST_BANDWIDTH / 1e9:.0f} GB/s): other "
            "processes held the cores while they were measured, so SOL and MFU read high",)


def _detect_cuda(index: int, specs: Sequence[HardwareSpec]) -> DeviceInfo:
    import torch

    props = torch.cuda.get_device_properties(index)
    uuid = str(props.uuid) if getattr(props, "uuid", None) else None
    info = _nvml_for(index, uuid, props.name)
    sm_count = int(props.multi_processor_count)
    spec = (match_spec(specs, pci_device_id=info.pci_device_id if info else None, name=info.name if info else None)
            or match_spec(specs, name=props.name)
            or _estimate(props, info))
    warnings = list(spec.notes if spec.source == "estimated" else ())
    name = info.name if info else props.name
    device_id = info.pci_device_id if info else None  # 16-bit (NvmlInfo)
    if device_id is not None and spec.pci_device_ids and device_id not in spec.pci_device_ids:
        warnings.append(f"PCI device ID 0x{device_id:04x} is none of {spec.id}'s "
                        f"({', '.join(f'0x{i:04x}' for i in spec.pci_device_ids)}); matched by the name {name!r}: "
                        "another variant of the part may have other peaks (memory, bandwidth); check it against "
                        "the spec, or add a spec file for it")
    if spec.source == "datasheet" and is_mig(name) and spec.sm_count and sm_count < spec.sm_count:
        spec = _mig_slice(spec, sm_count, int(props.total_memory), name)
        warnings.append(spec.notes[-1])
    elif spec.source == "datasheet":
        warnings.extend(_cross_check(spec, sm_count, info))
    if spec.nvlink_bandwidth is not None and info is not None and info.nvlinks_up == 0:
        spec = replace(spec, nvlink_bandwidth=None)  # a PCIe card's NVLink bridge is optional
        warnings.append(f"no NVLink of this {spec.name} is up: " + (
            f"collectives are scored against PCIe ({spec.pcie_bandwidth / 1e9:g} GB/s a direction)"
            if spec.pcie_bandwidth else "the spec has no PCIe figure either, so a collective's T_SOL has no link term"))
    return DeviceInfo(
        kind="cuda", index=index, name=name, spec=spec, nvml=info, torch_version=torch.__version__,
        cuda_version=torch.version.cuda, cupy_version=_cupy_version(), driver=info.driver if info else None,
        sm_count=sm_count, l2_bytes=getattr(props, "L2_cache_size", None) or spec.l2_bytes,
        uuid=(info.uuid if info and info.uuid else uuid), memory_bytes=int(props.total_memory),
        warnings=tuple(warnings),
    )


def _nvml_for(index: int, uuid: str | None, torch_name: str) -> NvmlInfo | None:
    """NVML's view of a torch device: by UUID; by index only when no CUDA_VISIBLE_DEVICES
    remapping is possible and the names agree."""
    info = nvml.query_device(uuid) if uuid else None
    if info is None and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        candidate = nvml.query_device(index)
        if candidate is not None and strip_mig(candidate.name) == strip_mig(torch_name):
            info = candidate
    return info


def _estimate(props: Any, info: NvmlInfo | None) -> HardwareSpec:
    """Spec from torch properties and NVML clocks for a GPU no spec file matches."""
    clock = info.max_sm_clock_mhz if info and info.max_sm_clock_mhz else None
    if clock is None and getattr(props, "clock_rate", None):
        clock = props.clock_rate / 1000  # kHz
    bandwidth = info.bandwidth_from_clocks if info else None
    if bandwidth is None and getattr(props, "memory_clock_rate", None) and getattr(props, "memory_bus_width", None):
        bandwidth = props.memory_clock_rate * 1e3 * 2 * props.memory_bus_width / 8  # kHz, bits
    return estimate_spec(
        name=info.name if info else props.name, compute_capability=f"{props.major}.{props.minor}",
        sm_count=int(props.multi_processor_count), sm_clock_mhz=clock, bandwidth=bandwidth,
        l2_bytes=getattr(props, "L2_cache_size", None) or None, memory_bytes=int(props.total_memory),
    )


def _mig_slice(spec: HardwareSpec, sm_count: int, memory_bytes: int, name: str) -> HardwareSpec:
    compute = sm_count / spec.sm_count if spec.sm_count else 1.0
    # the profile names its memory in the datasheet's decimal GB ("3g.40gb" of an 80 GB part: half);
    # torch's total_memory of the slice, in bytes of a GiB-sized carve-out, would read 0.53
    profile = re.search(r"\b\d+g\.(\d+)gb\b", name, re.IGNORECASE)
    held = int(profile.group(1)) * 1e9 if profile else memory_bytes
    memory = min(1.0, held / spec.memory_bytes) if spec.memory_bytes else compute
    note = (f"MIG slice {name!r}: {spec.id} peaks x {compute:.3f} ({sm_count}/{spec.sm_count} SMs), "
            f"bandwidth and L2 x {memory:.3f} (memory share); estimated")
    return spec.scaled(compute=compute, memory=memory, note=note)


def _cross_check(spec: HardwareSpec, sm_count: int, info: NvmlInfo | None) -> list[str]:
    """Warnings where the device disagrees with its datasheet spec."""
    out = []
    if spec.sm_count and sm_count != spec.sm_count:
        out.append(f"torch reports {sm_count} SMs but spec {spec.id} has {spec.sm_count}: is this the right spec?")
    derived = info.bandwidth_from_clocks if info else None
    if derived and spec.bandwidth:
        ratio = derived / spec.bandwidth
        if not _BANDWIDTH_WARN[0] <= ratio <= _BANDWIDTH_WARN[1]:
            out.append(f"NVML clocks give {derived / 1e12:.2f} TB/s but spec {spec.id} says "
                       f"{spec.bandwidth / 1e12:.2f} TB/s")
    return out


def _cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return m.group(1).strip() if m else (platform.processor() or "CPU")


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# The names CuPy is distributed under (PyPI; conda's is "cupy"). Asking each by name is fast;
# ``packages_distributions()`` reads every installed package's file list (2 s on the H200 image).
_CUPY_DISTRIBUTIONS = ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy", "cupy-rocm-6-0", "cupy-rocm-5-0")


def _cupy_version() -> str | None:
    """CuPy's version from package metadata (cupy, cupy-cuda12x, ...), without importing it."""
    return next((v for v in map(_version, _CUPY_DISTRIBUTIONS) if v), None)
