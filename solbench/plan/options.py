"""The knobs of a run: one frozen record, passed down to every executor as data."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError

MAX_SEED = 2**62  # |seed|: input sets draw from seed + offsets (torch seeds are 64-bit)
# --max-samples: a worker sends its samples with their NVML readings in one message of at most
# measure.wire.MAX_MESSAGE_BYTES (about 60 bytes a sample: 100,000 take about 6 MB); an honest result
# over it would read as a forged one
MAX_SAMPLES = 100_000


@dataclass(frozen=True)
class RunOptions:
    """Knobs of a run; the defaults are the documented protocol."""

    timer: str = "cold"  # "cold", "graph", "cupti" (cupti-python); the CPU always uses "cpu"
    target_rel_ci: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    budget_s: float = 2.0
    warmup: int = 3
    input_sets: int = 2
    seed: int = 0
    workloads: tuple[str, ...] = ()  # only these workload names (all when empty)
    impls: tuple[str, ...] = ()  # only these implementations (and the baseline)
    keys: tuple[str, ...] = ()  # only these "case_id/impl" pairs (re-measuring for the gate)
    peaks: str = "datasheet"  # or "measured": ceilings from `solbench calibrate`
    flush: str = "clean"  # cold/cupti timer: "clean" (no dirty lines left in L2) or "write" (nvbench's)
    # cold timer: the call launched on the stream, or replayed from a CUDA graph ("graph"); "auto": "graph"
    # for the cold timer on CUDA with CUPTI, else "stream" (solbench.device.timer.resolved_launch)
    launch: str = "auto"
    results_dir: Path = Path("results")
    timeout_s: float = 120.0  # per implementation and case, compilation included (worker mode)
    in_process: bool = False  # run implementations in this process (debugging; no isolation)
    tuned: Path | None = None  # a tuned-configuration file from `solbench tune`
    repeat: int = 0  # rounds, each with fresh workers (median and CI over rounds); 0: 3 (GPU and CPU)
    # then add rounds, up to this many in all, to the points whose interval over rounds is wider than
    # ±rounds_target_rel_ci (0: none added; None: the device's default, added_rounds_for); see
    # solbench.execute.session
    max_rounds: int | None = None
    rounds_target_rel_ci: float = 0.0  # the ± width added rounds aim at over rounds (0: the default)
    rounds_spread: str = "case"  # added rounds follow the point's own spread and its case's ("case") or its own
    devices: str = ""  # "all" or "0,1": shard cases over these local GPUs ("": the one --device)
    executor: str = "local"  # or "ray": shard cases over the GPUs of a Ray cluster
    address: str | None = None  # Ray: "auto", "ray://host:10001"; None: the running or a new local instance
    schedule_from: Path | None = None  # --devices/Ray: case times from this run (default: the newest saved)
    cases: tuple[str, ...] = ()  # --case: only cases matching one of these (workload.cases.case_matches)
    overrides: tuple[tuple[str, tuple[int | float | str, ...]], ...] = ()  # --set name=v1,v2: parameter values
    threads: int = 0  # torch CPU threads of the measuring process; 0: the policy (solbench.device.threads)
    solutions: tuple[str, ...] = ()  # solution files of suite problems (KernelBench ModelNew, solution.json)
    compile_jobs: int | None = None  # processes compiling ahead (execute.warm); None: half the CPUs, at most 8
    compile_cache_dir: Path | None = None  # keep torch.compile's cache here across runs; None: the run's own

    @property
    def sharded(self) -> bool:
        """Whether the run is measured over several devices (``--devices``, or a Ray cluster):
        :func:`solbench.execute.lanes.run_sharded`, which adds no rounds of its own."""
        return bool(self.devices) or self.executor != "local"

    def launch_on(self, device_kind: str) -> str:
        """How the calls are made on a device of this kind: ``launch``, "auto" resolved
        (:func:`solbench.device.timer.resolved_launch`)."""
        from solbench.device.timer import resolved_launch

        return resolved_launch(self.launch, self.timer, device_kind)

    def __post_init__(self) -> None:
        """ConfigError (exit 2) for knobs no run can honour: a time that is not a positive finite
        number, fewer samples allowed than required, a seed the generators cannot take."""
        for name in ("timeout_s", "budget_s", "target_rel_ci"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                flag = {"timeout_s": "--timeout", "budget_s": "--budget", "target_rel_ci": "--target"}[name]
                raise ConfigError(f"{flag} must be a positive finite number, got {value!r}")
        check_counts((("--min-samples", self.min_samples, 1), ("--input-sets", self.input_sets, 1),
                      ("RunOptions.warmup", self.warmup, 0),  # no command-line option sets it
                      ("--repeat", self.repeat, 0),  # 0: the default rounds
                      *((("--max-rounds", self.max_rounds, 0),) if self.max_rounds is not None else ())))
        if self.max_samples > MAX_SAMPLES:
            raise ConfigError(f"--max-samples {self.max_samples} is more than a worker's result can carry "
                              f"(at most {MAX_SAMPLES:,})")
        if self.min_samples > self.max_samples:
            raise ConfigError(f"--min-samples {self.min_samples} is larger than --max-samples {self.max_samples}")
        if self.launch not in ("auto", "stream", "graph"):
            raise ConfigError(f"--launch must be 'auto', 'stream' or 'graph', got {self.launch!r}")
        if self.launch == "graph" and self.timer != "cold":
            raise ConfigError(f"--launch graph is a way of the cold timer's; --timer {self.timer} launches on the "
                              "stream (drop --launch, or use --timer cold)")
        if self.rounds_spread not in ("case", "own"):
            raise ConfigError(f"--rounds-spread must be 'case' or 'own', got {self.rounds_spread!r}")
        if abs(self.seed) >= MAX_SEED:
            raise ConfigError(f"--seed {self.seed} is out of range (|seed| < 2**62)")


def check_counts(counts: tuple[tuple[str, Any, int], ...]) -> None:
    """ConfigError for a count below what any run can honour: no samples (the allocation raised a bare
    ValueError), no input set (each worker failed with an IndexError, recorded as the implementation's
    'error', exit 4), a negative warm-up."""
    for flag, value, least in counts:
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= least):
            raise ConfigError(f"{flag} must be an integer at least {least}, got {value!r}")


Progress = Callable[[str, dict[str, Any]], None]

DEFAULT_GPU_ROUNDS = 3
DEFAULT_CPU_ROUNDS = 3  # a gate needs each side's process offset priced: one round a side cannot tell it from the code
# On a GPU, unless --repeat or --max-rounds says otherwise: rounds added, up to 16 in all, to the points
# whose interval over rounds is still wider than ±2%, on their own spread or their case's pooled one
# (RunOptions.rounds_spread). Measured on an H200 (BENCHMARKS.md issue 16, twentieth session): the
# gates over the 20 ordered pairs of five such o_proj runs of the same code gave 0 INCONCLUSIVE verdicts
# in six sets and 1 in a seventh, against 14-18 with the point's own spread and a cap of 8, for about 30%
# more wall time; three rounds alone leave far more, and re-measuring only the current run
# (`--gate-against --rerun`) cannot make up for a baseline measured in three. The target was ±1.5% until
# the thirty-first session: the run loop replayed on 28 H200 o_proj runs of the graph-launch protocol
# (bench/loop_replay.py) kept the gates at 82 of 84 pairs exit 0 (3 INCONCLUSIVE verdicts, against 0)
# and the spread of run medians at 0.75% / 2.90% (median / max, against 0.72% / 2.86%) at ±2%, with 38
# worker processes a run instead of 62 and 246 point-rounds instead of 295.
DEFAULT_GPU_MAX_ROUNDS = 16
DEFAULT_GPU_ROUNDS_TARGET = 0.02


def rounds_for(options: RunOptions, device_kind: str) -> int:
    """Rounds to measure: ``options.repeat``, or by default 3, on a GPU and on the CPU: the CI then
    covers what changes from process to process, and a gate against the run can price that. With one
    round a side a gate cannot tell a process's offset from the code: re-measuring only the current
    run (``run --gate-against``, single-round runs, processes spreading 1.5%) still passed a true 5%
    slowdown in 26% of simulated trials and caught a 10% one in 35% (bench/review32/single_rerun.py)."""
    if options.repeat > 0:
        return options.repeat
    return DEFAULT_GPU_ROUNDS if device_kind == "cuda" else DEFAULT_CPU_ROUNDS


def refuse_round_options(options: RunOptions) -> None:
    """ConfigError (exit 2) for ``--rounds-target`` or ``--rounds-spread own`` where no round is added
    (``--max-rounds 0``, ``--repeat`` without ``--max-rounds``, the CPU, several devices): they would do nothing."""
    given = [name for name, on in (("--rounds-target", options.rounds_target_rel_ci > 0),
                                   ("--rounds-spread own", options.rounds_spread != "case")) if on]
    if given:
        raise ConfigError(f"{', '.join(given)}: this run adds no rounds (--max-rounds 0, --repeat without "
                          "--max-rounds, the CPU or several devices); these options steer added rounds "
                          "(give --max-rounds N, or drop them)")


def added_rounds_for(options: RunOptions, device_kind: str) -> tuple[int, float]:
    """(max rounds in all, the ± width they aim at over rounds): ``options.max_rounds`` when given
    (its target: ``--rounds-target``, else ``--target``); by default, on a GPU when no ``--repeat``
    fixed the rounds and no gate re-measure (``keys``) asked for one, DEFAULT_GPU_MAX_ROUNDS at
    DEFAULT_GPU_ROUNDS_TARGET (or ``--rounds-target``); else none added."""
    if options.max_rounds is not None:
        return options.max_rounds, options.rounds_target_rel_ci or options.target_rel_ci
    if device_kind == "cuda" and options.repeat == 0 and not options.keys:
        return DEFAULT_GPU_MAX_ROUNDS, options.rounds_target_rel_ci or DEFAULT_GPU_ROUNDS_TARGET
    return 0, options.rounds_target_rel_ci or options.target_rel_ci
