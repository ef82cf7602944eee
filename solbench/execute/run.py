"""``solbench run``: detect, prepare, and hand the plan to the executor the options name.

    run(files, options)  one device: a worker pool (or this process with ``in_process``)
                         several devices: :func:`solbench.execute.lanes.run_sharded`
    gate_live(base, cur, files, options, rerun=N)  the gate, then up to N rounds of the undecided cases
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError, RunInterrupted
from solbench.execute import warm
from solbench.plan.device import detect, with_end_clocks
from solbench.plan.options import Progress, RunOptions, added_rounds_for, refuse_round_options, rounds_for
from solbench.plan.prepare import prepare, tuned_variant
from solbench.results.model import Environment, RunResult


def run(files: Sequence[str | Path], options: RunOptions = RunOptions(), *,  # noqa: B008 (frozen)
        device: str = "auto", progress: Progress | None = None,
        on_case: Callable[[RunResult], None] | None = None,
        before_measuring: Callable[[RunResult], None] | None = None,
        measured_on: Mapping[tuple[str, str], Environment] | None = None) -> RunResult:
    """Check and time every implementation of every case on the detected device.

    With ``options.repeat`` > 1, every case is measured in that many rounds, each with fresh
    workers, and the run holds them all (round labels; median and CI over rounds).
    With ``options.devices`` or ``options.executor == "ray"`` the cases are sharded over several
    devices (:func:`solbench.execute.lanes.run_sharded`).
    ``before_measuring``: called with the run as planned (its device's fingerprint, no case yet)
    before anything is compiled or measured; what it raises stops the run (``run --gate-against``
    refuses a baseline from other hardware there); for a run sharded over devices, with the first
    lane's fingerprint and ``protocol.devices`` saying its cases will record their own.
    ``measured_on`` (a run sharded over devices): the device each (workload, case id) was measured
    on before; such a case is measured on that device again (:mod:`solbench.execute.shard`).
    Raises :class:`solbench.errors.RunInterrupted` (holding the partial run) on Ctrl-C.
    """
    from solbench.execute import session
    from solbench.measure import pool

    if options.sharded:
        from solbench.execute.lanes import run_sharded

        return run_sharded(files, options, progress=progress, on_case=on_case, before_measuring=before_measuring,
                           measured_on=measured_on)

    start = time.perf_counter()
    info, floor = detect(device, options)
    detected = time.perf_counter()
    max_rounds, rounds_target = added_rounds_for(options, info.kind)
    repeat = rounds_for(options, info.kind)
    if not max_rounds:
        refuse_round_options(options)
    elif max_rounds < repeat:  # no round could be added: the cap and --rounds-target would be ignored
        raise ConfigError(f"--max-rounds ({max_rounds}) must be at least the rounds every point is measured in "
                          f"({repeat}: --repeat, or its default), or 0 for none added")
    options = replace(options, repeat=repeat, max_rounds=max_rounds, rounds_target_rel_ci=rounds_target)
    prep = prepare(files, options, info, floor)
    # a stale or foreign file: refused now
    variant, tuned = tuned_variant(options.tuned, info.spec.id, prep.units, options.launch_on(info.kind), info.kind)
    if tuned:
        prep = replace(prep, run=replace(prep.run, notes=(*prep.run.notes, *tuned)))
    if before_measuring is not None:
        before_measuring(prep.run)
    harness = {"detect_s": round(detected - start, 4), "prepare_s": round(time.perf_counter() - detected, 4)}
    emit = progress or (lambda event, data: None)
    emit("start", {"cases": sum(len(u.cases) for u in prep.units) * options.repeat})
    if options.in_process and info.kind == "cuda":
        import torch

        torch.cuda.set_device(info.index)  # workers select it themselves; here, this process must
    settings, base = prep.settings, replace(prep.run, harness=harness)
    with contextlib.nullcontext("") if options.in_process else warm.cache_folder(options.compile_cache_dir) as folder:
        if options.in_process:  # this process compiles for itself, with torch's own cache
            executor: Any = pool.InProcess()
        else:
            try:
                settings, ahead = warm.ahead_of_run(prep.units, settings, folder, info, options, keys=options.keys,
                                                    emit=emit)
            except KeyboardInterrupt:
                raise RunInterrupted(warm.interrupted(prep.run)) from None
            base = replace(base, harness={**harness, **ahead.harness()},
                           protocol=warm.recorded(prep.run.protocol, folder, options.compile_cache_dir, ahead))
            executor = pool.Pool(info.kind, info.index, threads=settings.threads,
                                 side_by_side_bytes=warm.side_by_side_bytes(info))
        result = session.measure_units(prep.units, base, executor, device=info.kind, settings=settings,
                                       timeout_s=options.timeout_s, l2_bytes=info.l2_bytes, score=prep.score,
                                       emit=emit, on_case=on_case, keys=options.keys, repeat=options.repeat,
                                       nvml_id=prep.nvml_id, variant=variant,
                                       max_rounds=max_rounds, target_rel_ci=rounds_target,
                                       rounds_spread=options.rounds_spread)
    emit("done", {})
    result = with_end_clocks(result, info)
    return replace(result, harness={**result.harness, "wall_s": round(time.perf_counter() - start, 4)})


def gate_live(base: RunResult, cur: RunResult, files: Sequence[str | Path], options: RunOptions, *,
              rerun: int, device: str = "auto", **gate_kwargs: Any) -> Any:
    """Gate ``cur`` against ``base``; then up to ``rerun`` rounds more of the cases still undecided
    (:func:`solbench.analysis.gate.gate_with_rerun`): a run measured in rounds gets
    ``ROUNDS_A_LOOK`` of them a look (as ``ab``), a single-round run one pooled re-measurement a look.

    Thresholds: an explicit ``threshold`` in ``gate_kwargs`` wins; otherwise each workload's
    ``gate_threshold`` as the runs recorded it (``RunResult.gate_thresholds``), else 5%. The two are
    separate runs: ``run_sd`` defaults to DEFAULT_RUN_SD (analysis.gate, "Between runs").
    """
    from solbench.analysis.gate import DEFAULT_RUN_SD, ROUNDS_A_LOOK, gate_with_rerun

    gate_kwargs.setdefault("run_sd", DEFAULT_RUN_SD)
    # a run sharded over devices: each case's added rounds go to the device of its first (shard)
    measured_on = {(c.workload, c.case_id): c.device for c in cur.cases if c.device is not None}

    def remeasure(keys: list[str], rounds: int) -> RunResult:  # these keys only, fresh workers each round
        capped = None if options.sharded else rounds  # exactly ``rounds``: none added on top (a sharded run refuses it)
        return run(files, replace(options, keys=tuple(keys), repeat=rounds, max_rounds=capped), device=device,
                   measured_on=measured_on)

    step = ROUNDS_A_LOOK if cur.protocol.rounds > 1 else 1
    return gate_with_rerun(base, cur, remeasure, rerun, step=step, **gate_kwargs)
