"""Hardware specs: the peak FLOP/s per dtype and the memory bandwidth of one device model. Pure.

A spec holds ceilings in SI units (FLOP/s, bytes/s, bytes). ``peaks_for`` picks the ceilings that
the speed of light of one dtype is computed against:

    torch dtype          tensor_flops                                   vector_flops
    float64              tensor fp64, else vector fp64                  vector fp64
    float32              tensor tf32 when tf32=True and the unit exists, vector fp32
                         else vector fp32 (FP32 GEMMs run on CUDA cores)
    bfloat16, float16    tensor bf16 / fp16                             vector bf16 / fp16
    float8_*             tensor fp8                                     vector fp32
    int8                 tensor int8                                    vector fp32
    float4_e2m1fn_x2     tensor fp4                                     vector fp32
    int16, int32, int64, none (scored on the vector units)              vector fp32
    uint8, bool

A vector peak not listed for a dtype falls back to the vector fp32 peak. The link bandwidth (what
a collective's bus bytes are scored against) is per GPU and per direction, as nccl-tests' busbw
is: the NVLink figure where the spec has one, else PCIe; on the CPU (gloo between processes of
one host, every bus byte written and read once through host memory) half the measured copy
bandwidth, which counts read and write bytes. ``tensor_flops`` is None
when the device has no matrix unit for the dtype (bf16 on V100 and T4, fp8 on A100): callers then
score matrix FLOPs against the vector peak.

Each ceiling of a ``Peaks`` says where it came from (``tensor_source``, ``vector_source``,
``bandwidth_source``): the spec's ``source``, unless ``peak_sources`` names another for its unit
(``--peaks measured``: a ceiling ``solbench calibrate`` did not measure stays the datasheet's). The
``Peaks``' own ``source`` is theirs where they agree, else "mixed" (:func:`summary_source`).

Lookup (``match_spec``): the PCI device ID first, then the ordered name patterns with any
" MIG ..." suffix removed. When nothing matches, ``estimate_spec`` derives peaks from
SMs x clock x the per-SM rates of the architecture (``per_sm_rates``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from solbench.errors import ConfigError
from solbench.results.model import Peaks

TENSOR_UNITS = ("fp64", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
VECTOR_UNITS = ("fp64", "fp32", "bf16", "fp16")

_DTYPE_UNIT: dict[str, str] = {
    "float64": "fp64",
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
    "int8": "int8",
    "float4_e2m1fn_x2": "fp4",
    # integer and boolean cases (indices, masks, counts): no matrix unit; the vector peak is fp32's, the
    # highest integer rate a CUDA core has (IMAD runs at most at the FFMA rate)
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint8": "int",
    "bool": "int",
}
DTYPES = tuple(_DTYPE_UNIT)

_MIG_SUFFIX = re.compile(r"\s+MIG\b.*$", re.IGNORECASE)


def strip_mig(name: str) -> str:
    """The device name without a " MIG 1g.10gb"-style suffix, whitespace collapsed."""
    return _MIG_SUFFIX.sub("", " ".join(name.split()))


def is_mig(name: str) -> bool:
    """Whether a device name carries a MIG slice suffix."""
    return strip_mig(name) != " ".join(name.split())


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@dataclass(frozen=True)
class HardwareSpec:
    """Identity and ceilings of one device model; FLOP/s, bytes/s, bytes, MHz and W."""

    id: str
    name: str
    kind: str = "gpu"  # "gpu" or "cpu"
    source: str = "datasheet"  # "datasheet", "measured" or "estimated"
    vendor: str | None = None
    arch: str | None = None
    compute_capability: str | None = None  # "9.0"
    sm_count: int | None = None
    max_sm_clock_mhz: int | None = None  # datasheet boost clock
    tensor_spec_clock_mhz: int | None = None  # clock implied by the datasheet tensor peaks
    memory_bytes: int | None = None  # nominal (datasheet GB x 1e9)
    memory_type: str | None = None
    bandwidth: float | None = None  # bytes/s; None until measured (CPU)
    l2_bytes: int | None = None
    tdp_w: float | None = None
    nvlink_bandwidth: float | None = None  # bytes/s per GPU and direction (datasheet bidirectional / 2)
    pcie_bandwidth: float | None = None  # bytes/s per direction of the host link (x16)
    tensor_peaks: dict[str, float] = field(default_factory=dict)  # unit -> FLOP/s (int8: op/s)
    vector_peaks: dict[str, float] = field(default_factory=dict)  # unit -> FLOP/s
    pci_device_ids: tuple[int, ...] = ()  # 16-bit PCI device IDs (NVML pciDeviceId >> 16)
    name_patterns: tuple[str, ...] = ()  # case-insensitive regexes on the MIG-stripped name
    match_priority: int = 100  # lower is tried first
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)  # field or group -> where it comes from
    # "tensor.<unit>", "vector.<unit>" or "bandwidth" -> where that ceiling comes from, where not ``source``
    peak_sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    confidence: str = "high"  # "high", "medium" or "low"

    def peaks_for(self, dtype: str, *, tf32: bool = False) -> Peaks:
        """Ceilings for one torch dtype name; see the module docstring for the rules."""
        unit = _DTYPE_UNIT.get(dtype.removeprefix("torch."))
        if unit is None:
            raise ConfigError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
        fp32 = self.vector_peaks.get("fp32")
        if fp32 is None:
            raise ConfigError(f"hardware spec {self.id!r} has no vector fp32 peak"
                              + (" (a CPU's peaks are measured when it runs: run on this machine with --device cpu"
                                 " instead of a what-if)" if self.kind == "cpu" else ""))
        if self.bandwidth is None:
            raise ConfigError(f"hardware spec {self.id!r} has no memory bandwidth")
        vector_key = f"vector.{unit}" if unit in self.vector_peaks else "vector.fp32"
        tensor_key: str | None = f"tensor.{unit}"
        if unit == "fp32":
            tensor_key = "tensor.tf32" if tf32 and "tf32" in self.tensor_peaks else "vector.fp32"
        elif unit == "fp64" and "fp64" not in self.tensor_peaks:
            tensor_key = vector_key
        elif unit not in self.tensor_peaks:
            tensor_key = None
        vector = self.vector_peaks[vector_key.removeprefix("vector.")]
        tensor = None if tensor_key is None else self._ceiling(tensor_key)
        sources = [self.peak_sources.get(k, self.source) for k in (tensor_key or vector_key, vector_key, "bandwidth")]
        return Peaks(tensor_flops=tensor, vector_flops=vector, bandwidth=self.bandwidth,
                     source=summary_source(*sources), link_bandwidth=self.link_bandwidth, tensor_source=sources[0],
                     vector_source=sources[1], bandwidth_source=sources[2])

    def _ceiling(self, key: str) -> float:
        group, unit = key.split(".")
        return (self.tensor_peaks if group == "tensor" else self.vector_peaks)[unit]

    @property
    def link_bandwidth(self) -> float | None:
        """Bytes/s per GPU and direction a collective's bus bytes go at (module docstring); None: unknown."""
        if self.kind == "cpu":
            return self.bandwidth / 2 if self.bandwidth is not None else None
        return self.nvlink_bandwidth if self.nvlink_bandwidth is not None else self.pcie_bandwidth

    def with_peaks(self, *, tensor: Mapping[str, float] | None = None,
                   vector: Mapping[str, float] | None = None, bandwidth: float | None = None,
                   source: str | None = None, note: str | None = None,
                   peak_sources: Mapping[str, str] | None = None) -> HardwareSpec:
        """A copy with the given peak tables, bandwidth or source replaced (and a note added); a new
        ``source`` is every ceiling's but those ``peak_sources`` names."""
        kept = self.peak_sources if source is None else {}
        return replace(
            self,
            tensor_peaks=dict(self.tensor_peaks if tensor is None else tensor),
            vector_peaks=dict(self.vector_peaks if vector is None else vector),
            bandwidth=self.bandwidth if bandwidth is None else float(bandwidth),
            source=self.source if source is None else source,
            peak_sources=dict(kept if peak_sources is None else peak_sources),
            notes=self.notes if note is None else (*self.notes, note),
        )

    def scaled(self, *, compute: float, memory: float, note: str) -> HardwareSpec:
        """A copy for a slice of the device (MIG): compute peaks x compute, bandwidth and L2 x memory."""
        return replace(
            self.with_peaks(
                tensor={k: v * compute for k, v in self.tensor_peaks.items()},
                vector={k: v * compute for k, v in self.vector_peaks.items()},
                bandwidth=None if self.bandwidth is None else self.bandwidth * memory,
                source="estimated", note=note),
            sm_count=None if self.sm_count is None else round(self.sm_count * compute),
            l2_bytes=None if self.l2_bytes is None else int(self.l2_bytes * memory),
        )

    def match(self, name: str) -> bool:
        """Whether a NVML/torch device name matches one of this spec's patterns (MIG suffix ignored)."""
        plain = strip_mig(name)
        return any(_compiled(p).search(plain) for p in self.name_patterns)


def summary_source(*sources: str) -> str:
    """The source of ceilings that come from ``sources``: theirs where they agree, else "mixed"."""
    return sources[0] if len(set(sources)) == 1 else "mixed"


def match_spec(specs: Sequence[HardwareSpec], *, pci_device_id: int | None = None,
               name: str | None = None) -> HardwareSpec | None:
    """The spec of a device: by PCI device ID (32-bit NVML id or 16-bit), then by name pattern."""
    if pci_device_id is not None:
        device = pci_device_id >> 16 if pci_device_id > 0xFFFF else pci_device_id
        for spec in specs:
            if device in spec.pci_device_ids:
                return spec
    if name:
        for spec in sorted(specs, key=lambda s: (s.match_priority, s.id)):
            if spec.match(name):
                return spec
    return None


@dataclass(frozen=True)
class PerSmRates:
    """Dense FLOP per clock per SM (an FMA counts 2) of one architecture class."""

    label: str
    tensor: dict[str, float]
    vector: dict[str, float]


# hardware-specs.md section 5: every row reproduces the datasheet peaks of its GPUs. GeForce
# Ampere/Ada run TF32, FP16/BF16 and FP8 with FP32 accumulation at half the pro rate.
_RATES: dict[tuple[str, bool], PerSmRates] = {
    ("7.0", False): PerSmRates("volta", {"fp16": 1024}, {"fp64": 64, "fp32": 128}),
    ("7.5", False): PerSmRates("turing", {"fp16": 1024, "int8": 2048}, {"fp64": 4, "fp32": 128}),
    ("8.0", False): PerSmRates(
        "ampere-ga100", {"fp64": 128, "tf32": 1024, "bf16": 2048, "fp16": 2048, "int8": 4096},
        {"fp64": 64, "fp32": 128}),
    ("8.6", False): PerSmRates(
        "ampere-ga10x", {"tf32": 512, "bf16": 1024, "fp16": 1024, "int8": 2048}, {"fp64": 4, "fp32": 256}),
    ("8.6", True): PerSmRates(
        "ampere-ga10x-geforce", {"tf32": 256, "bf16": 512, "fp16": 512, "int8": 2048},
        {"fp64": 4, "fp32": 256}),
    ("8.9", False): PerSmRates(
        "ada", {"tf32": 512, "bf16": 1024, "fp16": 1024, "fp8": 2048, "int8": 2048}, {"fp64": 4, "fp32": 256}),
    ("8.9", True): PerSmRates(
        "ada-geforce", {"tf32": 256, "bf16": 512, "fp16": 512, "fp8": 1024, "int8": 2048},
        {"fp64": 4, "fp32": 256}),
    ("9.0", False): PerSmRates(
        "hopper", {"fp64": 256, "tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192, "int8": 8192},
        {"fp64": 128, "fp32": 256}),
    ("10.0", False): PerSmRates(
        "blackwell", {"fp64": 128, "tf32": 4096, "bf16": 8192, "fp16": 8192, "fp8": 16384, "int8": 16384,
                      "fp4": 32768},
        {"fp64": 128, "fp32": 256}),
}


# Parts whose per-SM tensor rates are cut below their architecture's (export variants): SMs x clock x the
# architecture's rates overstates them several times (the H20: 78 SMs x 1.98 GHz x Hopper's rate is 633
# bf16 TFLOP/s; its datasheet says 148). No estimate: a spec file gives their peaks.
_RATE_CUT = re.compile(r"\bH20\b", re.IGNORECASE)


def per_sm_rates(compute_capability: str, *, geforce: bool = False) -> PerSmRates | None:
    """Per-SM rates of a compute capability ("8.9"); None where no verified row exists."""
    return _RATES.get((compute_capability, geforce))


def estimate_spec(*, name: str, compute_capability: str, sm_count: int, sm_clock_mhz: float | None,
                  bandwidth: float | None, l2_bytes: int | None = None,
                  memory_bytes: int | None = None) -> HardwareSpec:
    """A spec for a GPU no spec file matches: SMs x max SM clock x per-SM rates; source "estimated"."""
    cut = _RATE_CUT.search(strip_mig(name)) is not None
    rates = None if cut else per_sm_rates(compute_capability, geforce="geforce" in name.lower())
    hz = sm_clock_mhz * 1e6 if sm_clock_mhz else None
    tensor = {u: sm_count * hz * r for u, r in rates.tensor.items()} if rates and hz else {}
    vector = {u: sm_count * hz * r for u, r in rates.vector.items()} if rates and hz else {}
    if rates and hz:
        warning = (f"no spec file matches {name!r}: peaks estimated as {sm_count} SMs x {sm_clock_mhz:g} MHz"
                   f" x the {rates.label} per-SM rates (cc {compute_capability}); Hopper and Blackwell"
                   " datasheet tensor peaks use a lower clock, so these may be up to ~8% high")
    elif cut:
        warning = (f"no spec file matches {name!r}, a part whose tensor rates are cut below its architecture's: "
                   "its peaks cannot be estimated from clocks; no FLOP/s peaks; add hardware_specs/<id>.yaml "
                   "(or point SOLBENCH_SPECS_DIR at one)")
    else:
        warning = (f"no spec file matches {name!r} and no per-SM rate is known for cc {compute_capability}"
                   f"{'' if hz else ' or the SM clock is unknown'}: no FLOP/s peaks;"
                   " add hardware_specs/<id>.yaml (or point SOLBENCH_SPECS_DIR at one)")
    slug = re.sub(r"[^a-z0-9]+", "-", strip_mig(name).lower()).strip("-")
    return HardwareSpec(
        id=f"estimated-{slug}", name=strip_mig(name), kind="gpu", source="estimated", vendor="nvidia",
        compute_capability=compute_capability, sm_count=sm_count,
        max_sm_clock_mhz=round(sm_clock_mhz) if sm_clock_mhz else None, memory_bytes=memory_bytes,
        bandwidth=bandwidth, l2_bytes=l2_bytes, tensor_peaks=tensor, vector_peaks=vector,
        sources={"peaks": "estimated: SMs x max SM clock x per-SM rate (hardware-specs.md section 5)",
                 "bandwidth": "estimated: NVML max memory clock x 2 x bus width / 8"},
        notes=(warning,), confidence="low",
    )
