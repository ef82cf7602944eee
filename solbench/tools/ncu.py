"""Nsight Compute counters against the analytic cost model. Pure (standard library only).

``parse_raw_csv`` reads ``ncu --import R.ncu-rep --csv --page raw --print-units base``: a header
row of metric names, a row of units, then one row per profiled kernel. ``summarize`` sets the
counters beside solbench's model of the case::

    DRAM bytes    dram__bytes_read.sum + dram__bytes_write.sum     vs analytic fused bytes
    tensor FLOPs  sum of sm__ops_path_tensor_src_*.sum             vs analytic tensor FLOPs
                  (math operations of the tensor pipe; sparsity_on/off sub-counters skipped)
    FP32 FLOPs    fadd + fmul + 2 x ffma thread instructions        vs analytic vector FLOPs
                  (smsp__sass_thread_inst_executed_op_*_pred_on.sum, as ncu's own roofline)

and gives one line of diagnosis (``diagnose``), in this order::

    max(SM %, memory %) < 60 of peak (time-weighted)   -> latency-bound (ncu's own threshold)
    measured FLOPs / DRAM bytes below the ridge point  -> memory-bound; with extra traffic when
      peak FLOP/s / bandwidth (a counter roofline;        measured bytes > 1.2 x analytic, naming
      without counters: memory % >= SM %)                 the kernel that moves most bytes
    else                                               -> compute-bound

The memory % of ncu's speed-of-light section is the busiest of L1, L2 and DRAM, so a GEMM keeping
its shared memory busy reads as high as its tensor pipes; the counter roofline is what tells a
DRAM-bound kernel from a compute-bound one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DURATION = "gpu__time_duration.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
FP32_OPS = {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1.0,
            "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1.0,
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2.0}
TENSOR_PREFIX = "sm__ops_path_tensor_src_"
TENSOR_FLOPS_PER_OP = 1.0  # see summarize(): checked against cuBLAS GEMMs on an H200
BASE_METRICS = (DRAM_READ, DRAM_WRITE, *FP32_OPS)
EXTRA_TRAFFIC = 1.2  # measured / analytic bytes above this is "extra traffic"
LATENCY_PCT = 60.0  # ncu's SOL rule: below 60% of peak in both, latency issues

_SCALE = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
          "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class KernelMetrics:
    """The counters of one profiled kernel (SI units: seconds, bytes, FLOP; percentages as 0-100)."""

    name: str
    duration: float | None
    dram_read: float | None
    dram_write: float | None
    sm_pct: float | None  # SpeedOfLight: SM throughput, % of peak
    mem_pct: float | None  # SpeedOfLight: memory throughput, % of peak
    dram_pct: float | None
    occupancy_pct: float | None  # achieved
    theoretical_occupancy_pct: float | None
    tensor_flops: float | None  # None when no tensor counter was collected
    fp32_flops: float | None
    grid: str = ""
    block: str = ""
    raw: dict[str, str] = field(default_factory=dict)  # every metric as ncu printed it

    @property
    def dram_bytes(self) -> float | None:
        """Bytes read plus bytes written."""
        if self.dram_read is None or self.dram_write is None:
            return None
        return self.dram_read + self.dram_write


@dataclass(frozen=True)
class ProfileSummary:
    """Totals over the profiled kernels beside the analytic model, and a diagnosis."""

    kernels: tuple[KernelMetrics, ...]
    analytic_bytes: float
    analytic_tensor_flops: float
    analytic_vector_flops: float
    measured_bytes: float | None
    measured_tensor_flops: float | None
    measured_fp32_flops: float | None
    duration: float | None
    sm_pct: float | None  # time-weighted over kernels
    mem_pct: float | None
    diagnosis: str
    ridge: float | None = None  # FLOP per byte where the compute roof meets the memory roof

    @property
    def measured_intensity(self) -> float | None:
        """Measured FLOPs (tensor pipe + FP32) per measured DRAM byte."""
        flops = [f for f in (self.measured_tensor_flops, self.measured_fp32_flops) if f is not None]
        if not flops or not self.measured_bytes:
            return None
        return sum(flops) / self.measured_bytes

    @property
    def bytes_ratio(self) -> float | None:
        """Measured DRAM bytes / analytic fused bytes."""
        return _ratio(self.measured_bytes, self.analytic_bytes)

    @property
    def tensor_ratio(self) -> float | None:
        """Measured tensor-pipe FLOPs / analytic tensor FLOPs."""
        return _ratio(self.measured_tensor_flops, self.analytic_tensor_flops)

    @property
    def fp32_ratio(self) -> float | None:
        """Measured FP32 FLOPs / analytic vector FLOPs."""
        return _ratio(self.measured_fp32_flops, self.analytic_vector_flops)


def _ratio(a: float | None, b: float) -> float | None:
    return a / b if a is not None and b > 0 else None


class NcuParseError(ValueError):
    """ncu's CSV is not in the expected shape."""


def _number(text: str, unit: str) -> float | None:
    """A value as ncu prints it ("1,234.5", "n/a") in base units."""
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in ("n/a", "nan", "-"):
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value * _SCALE.get(unit.strip().lower(), 1.0)


def parse_raw_csv(text: str) -> list[KernelMetrics]:
    """Kernels from ``ncu --csv --page raw`` output (lines before the header, e.g. ``==PROF==``, skipped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2 or "Kernel Name" not in rows[0]:
        raise NcuParseError("no 'Kernel Name' header in ncu's CSV output (was anything profiled?)")
    header, units = rows[0], rows[1]
    kernels = []
    for row in rows[2:]:
        if len(row) != len(header):
            raise NcuParseError(f"a CSV row has {len(row)} fields, the header {len(header)}")
        values = dict(zip(header, row, strict=True))
        unit = dict(zip(header, units, strict=True))
        kernels.append(_kernel(values, unit))
    return kernels


def _kernel(values: Mapping[str, str], unit: Mapping[str, str]) -> KernelMetrics:
    def num(key: str) -> float | None:
        return _number(values[key], unit[key]) if key in values else None

    tensor_keys = [k for k in values if k.startswith(TENSOR_PREFIX) and k.endswith(".sum")
                   and "_sparsity_" not in k]
    tensor = sum(num(k) or 0.0 for k in tensor_keys) * TENSOR_FLOPS_PER_OP if tensor_keys else None
    fp32_keys = [k for k in FP32_OPS if k in values]
    fp32 = sum((num(k) or 0.0) * FP32_OPS[k] for k in fp32_keys) if fp32_keys else None
    metrics = {k: v for k, v in values.items() if "__" in k}
    return KernelMetrics(
        name=values.get("Kernel Name", "?"), duration=num(DURATION), dram_read=num(DRAM_READ),
        dram_write=num(DRAM_WRITE), sm_pct=num(SM_PCT), mem_pct=num(MEM_PCT), dram_pct=num(DRAM_PCT),
        occupancy_pct=num(OCCUPANCY), theoretical_occupancy_pct=num(THEORETICAL_OCCUPANCY),
        tensor_flops=tensor, fp32_flops=fp32, grid=values.get("Grid Size", ""),
        block=values.get("Block Size", ""), raw=metrics)


def _total(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _weighted(kernels: Sequence[KernelMetrics], attr: str) -> float | None:
    pairs = [(k.duration, getattr(k, attr)) for k in kernels if k.duration and getattr(k, attr) is not None]
    total = sum(d for d, _ in pairs)
    return sum(d * v for d, v in pairs) / total if total else None


def summarize(kernels: Sequence[KernelMetrics], *, analytic_bytes: float, analytic_tensor_flops: float,
              analytic_vector_flops: float, ridge: float | None = None) -> ProfileSummary:
    """Totals, ratios to the analytic model, and the diagnosis.

    ``ridge`` is the device's peak FLOP/s over its bandwidth (for the unit the kernels use).
    Tensor FLOPs take ``TENSOR_FLOPS_PER_OP`` FLOP per tensor-pipe math op: on an H200 the
    counters of cuBLAS GEMMs read 2·M·N·K (o_proj, 16 tokens: 537 MFLOP against 537 analytic).
    """
    summary = ProfileSummary(
        kernels=tuple(kernels), analytic_bytes=analytic_bytes, analytic_tensor_flops=analytic_tensor_flops,
        analytic_vector_flops=analytic_vector_flops,
        measured_bytes=_total([k.dram_bytes for k in kernels]),
        measured_tensor_flops=_total([k.tensor_flops for k in kernels]),
        measured_fp32_flops=_total([k.fp32_flops for k in kernels]),
        duration=_total([k.duration for k in kernels]),
        sm_pct=_weighted(kernels, "sm_pct"), mem_pct=_weighted(kernels, "mem_pct"), diagnosis="", ridge=ridge)
    return ProfileSummary(**{**summary.__dict__, "diagnosis": diagnose(summary)})


def _short(name: str, limit: int = 60) -> str:
    name = " ".join(name.split())
    return name if len(name) <= limit else name[: limit - 1] + "…"


def diagnose(s: ProfileSummary) -> str:
    """One line: latency-, memory- (with or without extra traffic) or compute-bound (rules above)."""
    if not s.kernels:
        return "no kernel was profiled"
    longest = max(s.kernels, key=lambda k: k.duration or 0.0)
    sm, mem = s.sm_pct or 0.0, s.mem_pct or 0.0
    ratio, intensity = s.bytes_ratio, s.measured_intensity
    many = f" over {len(s.kernels)} kernels" if len(s.kernels) > 1 else ""
    if max(sm, mem) < LATENCY_PCT:
        occ = f", occupancy {longest.occupancy_pct:.0f}%" if longest.occupancy_pct is not None else ""
        return (f"latency-bound: SM {sm:.0f}% and memory {mem:.0f}% of peak{many} (< {LATENCY_PCT:.0f}%)"
                f"{occ}; longest kernel {_short(longest.name)}")
    if intensity is not None and s.ridge is not None:
        memory_side = intensity < s.ridge
        where = f"{intensity:.1f} FLOP/B measured, ridge {s.ridge:.0f}"
    else:
        memory_side, where = mem >= sm, "no FLOP counters"
    extra = ratio is not None and ratio > EXTRA_TRAFFIC
    if memory_side:
        if extra:
            top = max(s.kernels, key=lambda k: k.dram_bytes or 0.0)
            share = (top.dram_bytes or 0.0) / (s.measured_bytes or 1.0)
            return (f"memory-bound with extra traffic: DRAM bytes {ratio:.2f}x the analytic fused bytes{many}; "
                    f"{_short(top.name)} moves {share:.0%} of them ({where})")
        tail = f"DRAM bytes {ratio:.2f}x the analytic fused bytes" if ratio is not None else "no DRAM counters"
        return f"memory-bound, traffic as modelled ({tail}); memory throughput {mem:.0f}% of peak ({where})"
    tensor = f", tensor FLOPs {s.tensor_ratio:.2f}x analytic" if s.tensor_ratio is not None else ""
    reread = f"; DRAM bytes {ratio:.2f}x analytic (re-reads, not the limit)" if extra else ""
    return (f"compute-bound: SM throughput {sm:.0f}% of peak{many}{tensor} ({where}){reread}; "
            f"longest kernel {_short(longest.name)}")


def parse_metric_names(text: str) -> set[str]:
    """Base metric names from ``ncu --query-metrics`` output (first word of each table line)."""
    found = set()
    for line in text.splitlines():
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if "__" in word and word.replace("_", "").replace(".", "").isalnum():
            found.add(word)
    return found


def wanted_metrics(available: set[str] | None) -> list[str]:
    """The metrics to ask ncu for beyond its sections: DRAM bytes and FP32 counters (present on
    every GPU ncu supports), plus the tensor-pipe counters the device lists (an unknown metric would
    make ncu fail, so none without the device's list)."""
    tensor = sorted(f"{m}.sum" for m in available or () if m.startswith(TENSOR_PREFIX) and "_sparsity_" not in m)
    return [*BASE_METRICS, *tensor]
