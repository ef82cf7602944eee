"""Frozen result records: what one ``solbench run`` measured and derived.

Units are SI throughout: seconds, bytes, FLOP, FLOP/s, bytes/s. Reporters convert.
Raw samples are kept so that every statistic can be recomputed (and compared) later.

    RunResult
    ├── environment: Environment      device, driver, versions, clocks
    ├── spec: SpecRef                 which peaks were used, and where they came from
    ├── protocol: Protocol            how samples were taken
    └── cases: tuple[CaseResult]
            ├── cost: Cost            analytic FLOPs and bytes
            ├── t_sol, bound          speed of light for this case
            └── impls: tuple[ImplResult]
                    ├── timing: Timing    raw samples + median and its 95% CI
                    └── score: Score      SOL, MFU, MBU, speedup, S
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

SCHEMA_VERSION = 2  # 2: Cost.source, CaseResult.source and peak_policy

Status = Literal["ok", "incorrect", "invalid", "skipped", "error", "crashed", "timeout", "oom", "reward_hack"]
STATUSES: tuple[str, ...] = ("ok", "incorrect", "invalid", "skipped", "error", "crashed", "timeout", "oom",
                             "reward_hack")
# Statuses that make ``run`` exit 4: the implementation (or its worker) failed, cheated or is wrong.
# "skipped" is not one of them: it means this machine lacks something the implementation requires.
FAILED_STATUSES: frozenset[str] = frozenset(
    {"incorrect", "invalid", "error", "crashed", "timeout", "oom", "reward_hack"})
Bound = Literal["compute", "vector", "memory", "link"]  # link: the interconnect (collectives)
# NVML clocks-event reason bits that mean the clocks were held down while a sample ran: the power
# cap (SwPowerCap 0x4), hardware slowdown (0x8), thermal limits (0x20, 0x40), power brake (0x80).
# GpuIdle (0x1), ApplicationsClocksSetting (0x2, an owner's clock lock), SyncBoost and display
# clocks are not throttling. Names of every bit: solbench.device.nvml.CLOCK_EVENT_REASONS.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
# ImplResult.protocol["kernels"]: a kernel name longer than the worker keeps ends in this mark and
# a digest of the whole name (solbench.measure.worker.kernel_names)
KERNEL_CUT_MARK = "~"


@dataclass(frozen=True)
class Environment:
    """Fingerprint of the machine a run was measured on."""

    device_kind: str  # "cuda" or "cpu"
    device_name: str
    spec_id: str
    device_uuid: str | None = None
    pci_device_id: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    cupy: str | None = None
    python: str | None = None
    host: str | None = None
    sm_count: int | None = None
    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_limit_w: float | None = None
    solbench: str | None = None
    sm_clock_end_mhz: int | None = None  # read right after the last measurement (GPU still busy-warm)
    clock_event_reasons_end: int | None = None  # NVML clocks-event reason bits at that moment
    # Clock locks, read only (solbench never sets clocks; README "Clocks" says how an owner does):
    applications_sm_clock_mhz: int | None = None  # NVML applications clock (SM) at the end of the run
    default_applications_sm_clock_mhz: int | None = None
    applications_mem_clock_mhz: int | None = None
    default_applications_mem_clock_mhz: int | None = None
    # True: applications clocks differ from their defaults, or NVML reported the
    # ApplicationsClocksSetting reason during a sample (clocks pinned by `nvidia-smi -ac`/`-lgc`);
    # False: NVML answered and neither holds; None: not known (CPU, no NVML).
    clocks_locked: bool | None = None
    device_index: int | None = None  # CUDA index on its host (runs over several devices: --devices, Ray)
    # the host's 1-minute load average per CPU, when the run started and right after it measured (None:
    # unknown); coarse, and solbench's own workers count in the second, but a CPU-loaded host shows
    host_load: float | None = None
    host_load_end: float | None = None


@dataclass(frozen=True)
class Peaks:
    """Ceilings the speed of light is computed against, for one dtype."""

    tensor_flops: float | None  # FLOP/s of the matrix units for the dtype (None: no such unit)
    vector_flops: float  # FLOP/s of the non-tensor units
    bandwidth: float  # bytes/s of device memory
    source: str  # "datasheet", "measured" or "estimated" (every ceiling's), or "mixed" (the three below differ)
    link_bandwidth: float | None = None  # bytes/s per GPU and direction of the interconnect (None: unknown)
    # where each ceiling came from (--peaks measured: one calibrate did not measure stays the datasheet's);
    # "": ``source`` (runs saved before they were recorded)
    tensor_source: str = ""
    vector_source: str = ""
    bandwidth_source: str = ""

    def source_of(self, ceiling: str) -> str:
        """Where the "tensor", "vector" or "bandwidth" ceiling came from."""
        return getattr(self, f"{ceiling}_source") or self.source


@dataclass(frozen=True)
class SpecRef:
    """Which hardware spec a run was scored against."""

    id: str
    name: str
    source: str  # "datasheet", "measured" or "estimated"


@dataclass(frozen=True)
class Protocol:
    """How samples were taken. ``timer`` names the method; every knob is recorded."""

    timer: str  # "cold" (events, L2 flushed), "graph" (CUDA-graph replay) or "cpu" (wall clock)
    warmup: int
    min_samples: int
    max_samples: int
    target_rel_ci: float  # stop when the 95% CI half-width of the median / median <= this
    budget_s: float  # per implementation and case
    input_sets: int  # inputs rotated between samples
    l2_flush_bytes: int = 0
    spin_us: float = 0.0  # host-queue pre-fill ahead of each sample (cold timer)
    graph_calls: int = 0  # calls per graph replay (graph timer)
    flush: str = ""  # cold timer: "write" (zero 2 x L2, as nvbench) or "clean" (then read it back)
    isolation: str = "worker"  # "worker" (one process per implementation) or "in-process"
    timeout_s: float = 0.0  # per implementation and case, set-up and compilation included
    rounds: int = 1  # independent rounds (fresh workers and allocations each); see Timing.rounds
    # then rounds added, up to max_rounds in all (0: none), by rounds_rule: "" (run) to points wider than
    # ±rounds_target over rounds; "gate" (ab) to the keys the gate against the other tree left undecided,
    # ROUNDS_A_LOOK (4) a look (solbench.execute.alternate)
    max_rounds: int = 0
    rounds_target: float = 0.0
    rounds_spread: str = ""  # whose spread the added rounds followed: "case" (and the point's own), "own"
    rounds_rule: str = ""
    clock_monitor: str = ""  # "nvml": clocks, power and reasons read after every sample; "": none
    devices: int = 1  # devices the cases were sharded over (--devices, Ray); each case names its own
    executor: str = "local"  # "local" (this host's devices) or "ray" (a Ray cluster)
    threads: int = 0  # torch CPU threads of the measuring process (solbench.device.threads); 0: torch's default
    # torch.compile's cache (solbench.execute.warm): "run" (the run's own folder, removed after it), the
    # folder --compile-cache kept, or "" (torch's default: in-process runs)
    compile_cache: str = ""
    compile_ahead: int = 0  # processes that compiled ahead before the first round; 0: none did
    # cold timer on CUDA: "stream" (the call launched) or "graph" (a CUDA graph's replay of it; each point's
    # protocol says "stream" or "mixed" where it was launched instead, and graph_fallback why); "": another
    # timer or the CPU
    launch: str = ""


@dataclass(frozen=True)
class Cost:
    """Analytic cost of one case."""

    dtype: str
    tensor_flops: float
    vector_flops: float
    fused_bytes: float  # every declared input read once, every output written once
    unfused_bytes: float  # every op's own inputs and outputs
    overridden: tuple[str, ...] = ()  # which of "flops", "bytes" came from explicit expressions
    collective_bytes: float = 0.0  # collectives: the buffer size S that algbw = S / T divides (nccl-tests)
    bus_bytes: float = 0.0  # collectives: bytes each rank moves over its link, S x the busbw factor
    # "analytic" (ops, flops/bytes expressions) or "traced" (the reference run on the meta device: it counts
    # what the reference executes, which can exceed the least work, so no INVALID floor is applied to it)
    source: str = "analytic"
    # of tensor_flops, those of convolutions (traced costs): torch runs fp32 convolutions on TF32 tensor
    # cores by default (cudnn.allow_tf32) and fp32 matmuls without (the ``torch`` fp32 peak policy)
    conv_flops: float = 0.0

    @property
    def flops(self) -> float:
        return self.tensor_flops + self.vector_flops


MAX_ROUND_LABEL = 10 ** 9  # round labels are small counters (numpy groups them as int64; merges add to them)


@dataclass(frozen=True)
class Timing:
    """Raw samples (seconds per call) and the median with its 95% confidence interval.

    Measured in several rounds (``run --repeat``, ``ab``, or runs combined by ``gate``),
    ``rounds`` labels each sample with its round, and ``median``/``ci_*`` are the grand median
    and the two-level bootstrap CI over rounds (:mod:`solbench.analysis.rounds`). The clock
    tuples hold one NVML reading per sample, taken right after it (None where NVML gave no
    answer); all of these are empty when not recorded (one round; CPU; no NVML).
    """

    samples: tuple[float, ...]
    median: float
    ci_low: float
    ci_high: float
    stop_reason: str  # "converged", "budget", "max_samples", "allocated" (a later round's planned samples);
    # rounds: each round's, joined by "+"
    rounds: tuple[int, ...] = ()  # round label per sample; empty: a single round
    sm_clock_mhz: tuple[int | None, ...] = ()  # SM clock right after each sample
    mem_clock_mhz: tuple[int | None, ...] = ()  # memory clock right after each sample
    power_w: tuple[float | None, ...] = ()  # board power right after each sample
    throttle_reasons: tuple[int | None, ...] = ()  # NVML clocks-event reason bits per sample

    def __post_init__(self) -> None:
        n = len(self.samples)
        for name in ("rounds", "sm_clock_mhz", "mem_clock_mhz", "power_w", "throttle_reasons"):
            k = len(getattr(self, name))
            if k not in (0, n):
                raise ValueError(f"{name} has {k} values for {n} samples (one per sample, or none)")
        bad = next((x for x in self.rounds if not 0 <= x < MAX_ROUND_LABEL), None)
        if bad is not None:  # a hand-edited label past int64 crashed every command that groups by round
            raise ValueError(f"rounds holds the label {bad}: round labels count from 0 (below {MAX_ROUND_LABEL})")

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def n_rounds(self) -> int:
        """How many rounds the samples came from (1 without labels)."""
        return len(set(self.rounds)) if self.rounds else 1

    @property
    def throttled(self) -> tuple[bool, ...]:
        """Per sample: whether a throttle reason (THROTTLE_MASK) was set right after it."""
        return tuple(bool(bits and bits & THROTTLE_MASK) for bits in self.throttle_reasons)


@dataclass(frozen=True)
class Score:
    """Speed-of-light figures of one implementation on one case."""

    sol: float  # T_SOL / T (1.0 is the speed of light)
    mfu: float | None  # tensor FLOPs / (T * tensor peak, else the vector peak); None without tensor FLOPs
    mbu: float  # fused bytes / (T * bandwidth)
    achieved_flops: float  # FLOP/s
    achieved_bandwidth: float  # bytes/s
    speedup: float | None  # T_baseline / T
    s_score: float | None  # SOL-ExecBench S = 1 / (1 + (T - T_SOL) / (T_b - T_SOL))
    algbw: float | None = None  # collectives: collective bytes / T (bytes/s; nccl-tests "algbw")
    busbw: float | None = None  # collectives: bus bytes / T (bytes/s; nccl-tests "busbw")
    overlap: float | None = None  # (T_compute + T_comm - T) / min(T_compute, T_comm), from the parts
    floor_fraction: float | None = None  # T_floor / T: the case's bytes moved by a plain kernel (impls.floor)
    # this implementation's own T_SOL and bound: the case's, unless it is scored against another dtype's
    # peak (``peak_dtype``) or its own bytes (``input_dtypes``: e.g. a weight quantized to FP8 in set-up)
    t_sol: float | None = None
    bound: str | None = None
    fused_bytes: float | None = None  # the bytes its T_SOL and MBU count (the case's, or its ``input_dtypes``)
    # where its own dtype's ceilings came from, where it is scored against another dtype's peak (``peak_dtype``):
    # {"float8_e4m3fn tensor": "datasheet"} (--peaks measured: a calibrate that did not measure it); {}: the case's
    peak_sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Correctness:
    """How an implementation's output compared with the reference."""

    passed: bool
    max_abs_err: float
    max_rel_l2: float
    atol: float
    rtol: float
    detail: str = ""


@dataclass(frozen=True)
class ImplResult:
    """One implementation on one case."""

    name: str
    status: Status
    message: str = ""
    correctness: Correctness | None = None
    timing: Timing | None = None
    score: Score | None = None
    protocol: dict[str, float | int | str] = field(default_factory=dict)  # timer knobs used for it
    log_tail: str = ""  # last lines the worker wrote to stdout/stderr (on error, crash or timeout)

    def __post_init__(self) -> None:
        # the implementation's own words (its exception, its output) reach the terminal, Markdown, JSON and
        # JUnit: a lone surrogate in them cannot be written as UTF-8 anywhere and crashed the command (exit 5),
        # and terminal control sequences in them could redraw what the terminal shows
        for name in ("message", "log_tail"):
            object.__setattr__(self, name, shown_as_text(getattr(self, name)))


# C0 but tab and newline, DEL, C1; lone surrogates (UTF-8 cannot write them); U+FFFE and U+FFFF (XML cannot hold them)
_NOT_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def shown_as_text(text: str) -> str:
    """``text`` as written words that a terminal, UTF-8 and XML all hold as they are: control characters
    other than tab and newline (an ANSI escape, a carriage return that overwrites a line), lone
    surrogates and the two non-characters as backslash escapes (``\\x1b``, ``\\ud800``); the rest as is."""
    return _NOT_TEXT.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


@dataclass(frozen=True)
class CaseResult:
    """One case (workload x parameter values x dtype) and all its implementations."""

    workload: str
    case_id: str
    params: dict[str, int | float | str]
    dtype: str
    cost: Cost
    peaks: Peaks
    t_sol: float
    bound: Bound
    intensity: float  # FLOP per fused byte
    impls: tuple[ImplResult, ...] = ()
    baseline: str | None = None
    # The device this case was measured on, when a run spans several (--devices, Ray); None: the
    # run's own environment, or in a run over several (protocol.devices > 1) none: every implementation
    # was skipped before any device took the case. Its spec_id is the spec the case was scored against.
    device: Environment | None = None
    # Provenance of an imported workload: "suite:path@sha256" (suite: kernelbench, sol-execbench); "": native
    source: str = ""
    peak_policy: str = ""  # the tensor peak an fp32 case was priced at: "fp32", "tf32" or "fp16-rate"

    @property
    def suite(self) -> str:
        """The suite an imported case came from ("" for a native workload)."""
        return self.source.partition(":")[0] if self.source else ""

    def impl(self, name: str) -> ImplResult | None:
        return next((r for r in self.impls if r.name == name), None)


@dataclass(frozen=True)
class RunResult:
    """Everything one run measured."""

    created: str  # ISO 8601, UTC
    environment: Environment
    spec: SpecRef
    protocol: Protocol
    cases: tuple[CaseResult, ...] = ()
    workload_files: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION
    notes: tuple[str, ...] = field(default=())
    gate_thresholds: dict[str, float] = field(default_factory=dict)  # workload -> gate_threshold, as run
    complete: bool = True  # False when the run was interrupted (Ctrl-C) or a save failed midway
    # where the run's wall time went, seconds (execute.session.Harness): detect_s, prepare_s, workers_s,
    # tasks_s (setup_s, check_s, sample_s, after_s within them), gpu_busy_s, save_s, wall_s
    harness: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Calibration:
    """Ceilings measured on one device by ``solbench calibrate``: what its code can actually reach.

    GEMM rates are sustained medians over the measuring window (power capping included); the
    bandwidth is a device-to-device copy counting bytes read plus bytes written.
    """

    created: str
    spec_id: str
    device_name: str
    device_uuid: str | None
    bandwidth: float  # bytes/s
    tensor_peaks: dict[str, float]  # unit ("bf16", "fp16", "fp8", "tf32") -> FLOP/s, sustained median
    vector_peaks: dict[str, float]  # "fp32": FP32 GEMM without TF32 (CUDA cores)
    burst_peaks: dict[str, float]  # unit -> best batch seen (not used for scoring)
    protocol: str
    sm_clock_mhz: int | None = None  # read right after the GEMMs
    # the NVIDIA driver's version (NVML) the ceilings were measured under; None: unknown (no NVML), or a
    # file written before calibrate recorded it
    driver: str | None = None
    schema_version: int = SCHEMA_VERSION


MAX_RUN_SD = 0.5  # a run's offset sd at or above this is a mistake (a percent written as a fraction)


@dataclass(frozen=True)
class RunSpread:
    """What ``solbench spread --save`` measured on one GPU model: the sd of a run's own offset, which
    gates between runs of that model price in when no ``--run-sd`` is given (analysis.gate)."""

    created: str
    spec_id: str
    device_name: str
    run_sd: float  # pooled over points (analysis.pooling.run_offsets)
    median_point: float  # a typical point's
    points: int
    runs: tuple[str, ...]  # the runs it was measured from, as they were named
    schema_version: int = SCHEMA_VERSION
