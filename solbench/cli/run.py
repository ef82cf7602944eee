"""``solbench run``: check, time and score the workloads in FILES (or only cost them, ``--dry-run``)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource
from rich.console import Console

from solbench import api, exitcodes
from solbench.cli.common import (
    NamedPath,
    ProgressBar,
    Saver,
    console,
    derived,
    distinct_outputs,
    failures,
    finish,
    handle_errors,
    interrupted_code,
    junit_refusals,
    nothing_measured,
    refuse_empty_run_names,
    refuse_junit,
    run_output,
    run_sd_of,
    run_sd_option,
    stdout_for_json_only,
    writable_output,
)
from solbench.errors import ConfigError, RunInterrupted, SolbenchError
from solbench.results import store
from solbench.results.model import FAILED_STATUSES, RunResult

if TYPE_CHECKING:
    from solbench.analysis.gate import GateResult


@click.command()
@click.argument("files", nargs=-1, required=True, type=NamedPath())
@click.option("--solution", "solutions", multiple=True, type=NamedPath(dir_okay=False, exists=True),
              help="A KernelBench ModelNew file or a SOL-ExecBench solution.json: an implementation of the "
                   "problem it belongs to (repeatable).")
@click.option("--gpu", "gpu", metavar="SPEC",
              help="With --dry-run: cost the cases on this hardware spec (what-if; `solbench list` names them).")
@click.option("--dry-run", is_flag=True, help="Print FLOPs, bytes and T_SOL; measure nothing.")
@click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N",
              help="Where to measure; cuda:N picks a GPU (scored against that GPU's spec).")
@click.option("--timer", type=click.Choice(["cold", "graph", "cupti"]), default="cold", show_default=True,
              help="cold: CUDA events, L2 flushed; graph: CUDA-graph replay of many calls of one input set "
                   "(warm L2); cupti: the cold protocol timed by CUPTI from the first to the last GPU activity "
                   "the call launched, on any stream (needs cupti-python: pip install 'solbench[cupti]'). "
                   "GPU only: refused on the CPU, which is timed with the wall clock.")
@click.option("--flush", type=click.Choice(["clean", "write"]), default="clean", show_default=True,
              help="cold/cupti timer: zero 2 x L2 and read it back (clean: no write-back of dirty lines "
                   "inside the timed window) or only zero it (write, as nvbench).")
@click.option("--launch", type=click.Choice(["auto", "stream", "graph"]), default="auto", show_default=True,
              help="cold timer: time the call launched on the stream, or the replay of a CUDA graph of one call "
                   "(captured once per input set; L2 still flushed; a call that cannot be captured, or whose "
                   "replay runs other GPU work than the launched call (CUPTI), is launched, and its result says "
                   "why). Graph replays do not carry the launch path's per-process offset and cost the GPU less "
                   "per kernel: README, '--launch graph'. auto: graph for the cold timer on a GPU with CUPTI, "
                   "else stream.")
@click.option("-w", "--workload", "workloads", multiple=True, help="Only this workload (repeatable).")
@click.option("-i", "--impl", "impls", multiple=True, help="Only this implementation (repeatable).")
@click.option("--case", "cases", multiple=True, metavar="PATTERN",
              help="Only cases matching PATTERN (repeatable): name=value items every one of which the case has "
                   "('tokens=16', 'tokens=16,float32'), or a case id with * and ? wildcards "
                   "('o_proj[tokens=16,*').")
@click.option("--set", "sets", multiple=True, metavar="NAME=V1,V2",
              help="Measure parameter NAME at these values instead of the file's (repeatable; every workload "
                   "that has the parameter).")
@click.option("--budget", type=click.FloatRange(min=0.01), default=2.0, show_default=True,
              help="Seconds of sampling per implementation and case.")
@click.option("--target", type=click.FloatRange(min=0.0001), default=0.01, show_default=True,
              help="Stop when the median's 95% CI half-width is within this fraction.")
@click.option("--min-samples", type=click.IntRange(min=3), default=10, show_default=True)
@click.option("--max-samples", type=click.IntRange(min=3), default=2000, show_default=True)
@click.option("--input-sets", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--peaks", type=click.Choice(["datasheet", "measured"]), default="datasheet", show_default=True,
              help="Score against datasheet peaks or the ceilings `solbench calibrate` measured.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              help="Seconds per implementation and case (set-up and compilation included) before its "
                   "worker is killed and the result is 'timeout'.")
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="torch CPU threads of the measuring process (0: on the CPU, every usable core but one; "
                   "on a GPU, torch's default). Recorded as protocol.threads; see README 'CPU threads'.")
@click.option("--compile-jobs", type=click.IntRange(min=0), default=None,
              help="Processes that run torch.compile side by side before the first round, filling the run's "
                   "compile cache (0: none; each measuring worker compiles for itself). Default: half the "
                   "CPUs, at most 8. See README 'Compiled implementations'.")
@click.option("--compile-cache", type=NamedPath(file_okay=False), default=None,
              help="Keep torch.compile's cache, and the cuBLASLt choices, in this folder across runs (default: "
                   "the run's own folder for torch.compile, removed when it ends; the machine's store for "
                   "cuBLASLt). See README 'Set-up paid once per run'.")
@click.option("--in-process", is_flag=True,
              help="Run implementations in this process (debugging): no isolation, no timeout.")
@click.option("--repeat", type=click.IntRange(min=1), default=None,
              help="Measure in N independent rounds (fresh workers and allocations each) and report the "
                   "median and CI over rounds; see README 'Rounds'. Default: 3.")
@click.option("--max-rounds", type=click.IntRange(min=0), default=None,
              help="Then add rounds, up to N in all, to the points whose interval over rounds is still "
                   "wider than --rounds-target (0: none added). Default: on a GPU without --repeat, 16 at "
                   "±2%, so that a later gate against this run can decide (README 'Rounds'); else 0.")
@click.option("--rounds-target", type=click.FloatRange(min=0.0001), default=None,
              help="The ± width (a fraction) the added rounds aim at over rounds. Default: 0.02 for the "
                   "GPU default, else --target.")
@click.option("--rounds-spread", type=click.Choice(["case", "own"]), default="case", show_default=True,
              help="Whose spread decides the added rounds: a point's own and the one pooled over its case's "
                   "implementations (case), or its own alone (own: fewer rounds, more undecided gates).")
@click.option("--devices", default="", metavar="all|0,1,...",
              help="Shard the cases over these local GPUs (one case per GPU at a time; each GPU scored "
                   "against its own spec); with --executor ray: 'all' or how many GPUs.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="ray: measure on the GPUs of a Ray cluster (pip install 'solbench[ray]').")
@click.option("--address", metavar="ADDR",
              help="Ray cluster to join: 'auto' or 'ray://host:10001' (default: a running or new local one).")
@click.option("--schedule-from", type=NamedPath(dir_okay=False, exists=True),
              help="--devices/Ray: order cases by the times they took in this run (default: the newest "
                   "saved run of this GPU that has them, else by T_SOL).")
@click.option("--force", is_flag=True, help="Allow -o to overwrite an existing file.")
@click.option("--tuned", type=NamedPath(dir_okay=False, exists=True),
              help="Use the configurations `solbench tune` stored in this file.")
@click.option("--save", "save_name", metavar="NAME", help="Save as results/<spec>/<time>-<random>_NAME.json.")
@click.option("-o", "--output", type=NamedPath(dir_okay=False), help="Write the result JSON here.")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result JSON to stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or tables.")
@click.option("--gate-against", metavar="RUN", help="Gate this run against a baseline run (file or name).")
@click.option("--threshold", default=None,
              help="Gate threshold ('5%', 'median:5%'); default: the workload's gate_threshold as the run "
                   "recorded it, else 5%.")
@click.option("--rerun", type=click.IntRange(min=0), default=8, show_default=True,
              help="With --gate-against: up to N more rounds of the cases still undecided only, 4 a look "
                   "(one a look, a round of its own, where the run has a single round: there every timed case "
                   "is measured again once, a verdict of one process a side being none); the error rates are "
                   "split over the looks, 1 + ceil(N / 4) (README 'Comparing runs and gating CI').")
@click.option("--junit", type=NamedPath(dir_okay=False), help="With --gate-against: JUnit XML here.")
@run_sd_option
@handle_errors
def run(files: Sequence[str], solutions: Sequence[str], gpu: str | None, dry_run: bool, device: str, timer: str,
        flush: str, launch: str, workloads: Sequence[str], impls: Sequence[str], cases: Sequence[str],
        sets: Sequence[str],
        budget: float, target: float,
        min_samples: int, max_samples: int, input_sets: int, peaks: str, seed: int, timeout_s: float,
        threads: int, compile_jobs: int | None, compile_cache: str | None, in_process: bool,
        repeat: int | None, max_rounds: int | None, rounds_target: float | None, rounds_spread: str,
        devices: str, executor: str, address: str | None,
        schedule_from: str | None, force: bool, tuned: str | None, save_name: str | None,
        output: str | None, results_dir: str, as_json: bool, quiet: bool, gate_against: str | None,
        threshold: str | None, rerun: int, junit: str | None, run_sd: str | None) -> None:
    """Check and time every implementation of the workloads in FILES: solbench YAML files, KernelBench
    problem files or level folders, SOL-ExecBench problem or benchmark folders."""
    out = console(quiet or as_json)
    if gpu is not None and not dry_run:
        raise click.UsageError("--gpu picks a spec for a what-if; add --dry-run")
    if (devices or executor != "local") and device != "auto":
        raise click.UsageError("--device picks one device; --devices and --executor ray pick several")
    if address and executor != "ray":
        raise click.UsageError("--address names a Ray cluster; add --executor ray")
    if schedule_from and not (devices or executor != "local"):
        raise ConfigError("--schedule-from orders the cases shared out over several devices; add --devices or "
                          "--executor ray")
    refuse_empty_run_names(**{"--gate-against": gate_against})  # "" read as no gate: the run passed ungated
    if save_name is not None:
        saved_name(save_name)
    if junit and not gate_against:
        raise ConfigError("--junit writes the gate's verdicts; add --gate-against RUN (or use solbench gate --junit)")
    if run_sd is not None and not gate_against:
        raise ConfigError("--run-sd prices a gate between runs; add --gate-against RUN")
    rerun_given = click.get_current_context().get_parameter_source("rerun") is not ParameterSource.DEFAULT
    for name, given in (("--threshold", threshold is not None), ("--rerun", rerun_given)):
        if given and not gate_against:
            raise ConfigError(f"{name} sets the gate of --gate-against RUN; add it (or use solbench gate)")
    if max_rounds and repeat and max_rounds < repeat:
        raise click.UsageError(f"--max-rounds ({max_rounds}) must be at least --repeat ({repeat}), or 0 for none added")
    cores = _usable_cores()
    if threads > cores:
        raise click.UsageError(f"--threads {threads}: this process may run on {cores} CPU(s); more threads than "
                               "CPUs measure contention, not the implementation")
    if in_process and not dry_run:  # before --compile-cache's folder is made
        _nothing_to_isolate(click.get_current_context())
    if output == "-":  # saved as a file named "-", stdout left empty
        raise ConfigError("-o -: a run is saved as a file, not to stdout (--json prints it there): name one")
    run_output(output)
    writable_output(junit, "JUnit XML")
    distinct_outputs([("-o", output), ("--junit", junit)])  # the XML would replace the run
    junit_refusals(junit)  # --junit comes only with --gate-against (refused above otherwise)
    if compile_cache:
        _writable_folder(compile_cache, "--compile-cache")
    overrides = parse_sets(sets)
    if dry_run:
        _nothing_to_time(click.get_current_context())
    if dry_run and peaks == "measured":
        raise click.UsageError("--peaks measured scores a run against this GPU's calibrated ceilings; a dry run "
                               "prices the cases against a spec's datasheet peaks (--gpu)")
    if dry_run:
        if gpu is not None and device != "auto":
            raise ConfigError("--gpu prices the cases on a named spec; --device on a detected one: give one")
        from solbench.tools.info import detected_spec

        spec, notes = (api.hardware_spec(gpu), ()) if gpu is not None else detected_spec(device)
        with stdout_for_json_only(as_json):  # a traced cost or a foreign problem runs the user's code here
            result = api.dry_run(files, spec, workloads, impls, solutions, select=tuple(cases),
                                 overrides=dict(overrides), notes=notes)
        _finish_dry(result, out, as_json, output, save_name, Path(results_dir), force)
        return
    options = api.RunOptions(timer=timer, target_rel_ci=target, min_samples=min_samples,
                             max_samples=max_samples, budget_s=budget, input_sets=input_sets,
                             seed=seed, workloads=tuple(workloads), impls=tuple(impls), peaks=peaks, flush=flush,
                             launch=launch, results_dir=Path(results_dir), timeout_s=timeout_s, in_process=in_process,
                             tuned=Path(tuned) if tuned else None, repeat=repeat or 0, max_rounds=max_rounds,
                             rounds_target_rel_ci=rounds_target or 0.0, rounds_spread=rounds_spread,
                             devices=devices,
                             executor=executor, address=address,
                             schedule_from=Path(schedule_from) if schedule_from else None, threads=threads,
                             cases=tuple(cases), overrides=overrides, solutions=tuple(solutions),
                             compile_jobs=compile_jobs,
                             compile_cache_dir=Path(compile_cache) if compile_cache else None)
    # bad input, found before measuring or while, is refused in the JUnit file too (handle_errors)
    api.start_for_run(files, options, device=device)  # the workers' fork server imports beside this process
    saver = Saver(Path(output) if output else None, Path(results_dir), save_name, force=force)
    from solbench.analysis.gate import parse_threshold, same_hardware

    base: RunResult | None = None
    if gate_against:
        base_path = store.find(gate_against, Path(results_dir))
        base = store.load(base_path)
        if output and Path(output).resolve() == base_path.resolve():
            raise ConfigError(f"-o {output}: the baseline --gate-against reads; the run would replace it whatever "
                              "the gate says (write the run elsewhere, and copy it over once the gate passes)")
        from solbench.cli.compare import warn_incomplete

        warn_incomplete([gate_against], [base], "--gate-against ")
        _same_timing(base, options, gate_against)
    tau = None if threshold is None else parse_threshold(threshold).fraction
    sd, sd_source = run_sd_of(run_sd, Path(results_dir), base.spec.id) if base is not None else (0.0, "")
    try:
        with ProgressBar(quiet or as_json) as progress, stdout_for_json_only(as_json):  # implementations' prints
            result = api.run(files, options, device=device, progress=progress, on_case=saver.save,
                             before_measuring=None if base is None else
                             functools.partial(same_hardware, base, allow_cross_hardware=None))
    except RunInterrupted as stop:
        partial: RunResult = stop.result  # type: ignore[assignment]
        if partial.cases or saver.paths:  # a record already claimed is completed as incomplete
            saver.save(partial)
            finish(partial, out, as_json, saved=saver.paths)
            click.echo(f"interrupted: the {len(partial.cases)} case(s) measured so far are saved", err=True)
        else:  # an empty record would only become the "latest" run that show and compare read
            click.echo("interrupted before the first case was measured: nothing saved", err=True)
        refuse_junit(junit, "interrupted while measuring: no verdict")
        sys.exit(interrupted_code())
    if result.cases or result.notes:
        saver.save(result, final=True)  # the final record adds the end-of-run clocks and says complete
    later = as_json and base is not None  # the run's JSON carries the gate's verdict: printed once it is in

    def print_json(gate: dict | None = None) -> None:
        if later:
            click.echo(store.dumps(result, {**derived(result), **({"gate": gate} if gate is not None else {})}))

    # "saved PATH" only for a run saved whole: after a failed write the file holds what came before it
    finish(result, out, as_json, saved=saver.paths if saver.whole else (), json_later=later)
    if nothing_measured(result):  # "exit 0" only where the command does: a gate (or a failed save) decides it
        click.echo(nothing_measured(result, exits_0=base is None and saver.error is None), err=True)
    code = exitcodes.IMPL_FAILED if failures(result) else exitcodes.OK
    if saver.error is not None:
        kept = ", ".join(str(p) for p in saver.paths)
        click.echo(f"error: {saver.error}" + (f" (the run is not saved whole: {kept} holds what was written "
                                               "before it)" if kept and not saver.whole else ""), err=True)
        code = exitcodes.worst(code, exitcodes.USAGE)
    if base is not None:
        from solbench.cli.compare import emit_gate

        try:
            with stdout_for_json_only(as_json):
                verdict = api.gate_live(base, result, files, options, rerun=rerun, device=device, threshold=tau,
                                        run_sd=sd, allow_cross_hardware=None)  # run offers no such option
        except SolbenchError:  # refused: handle_errors has the JUnit file say so
            print_json()  # the run as measured, no gate in it
            raise
        except RunInterrupted:  # Ctrl-C or SIGTERM while re-measuring the undecided cases: no verdict
            stopped = "interrupted while re-measuring the undecided cases: no verdict (the run is saved as measured)"
            print_json()
            refuse_junit(junit, stopped)
            click.echo(stopped, err=True)
            sys.exit(interrupted_code())
        verdict = replace(verdict, run_sd_source=sd_source)
        again = _failed_remeasuring(result, verdict)
        for line in again:
            click.echo(line, err=True)
        code = exitcodes.worst(code, verdict.exit_code, exitcodes.IMPL_FAILED if again else exitcodes.OK)
        emit_gate(verdict, junit=junit, console=console(quiet or as_json), exit_code=code)
        from solbench.report.compare_json import gate_json

        print_json(gate_json(verdict, exit_code=code))
    sys.exit(code)


def _failed_remeasuring(result: RunResult, verdict: GateResult) -> list[str]:
    """``case impl: STATUS while re-measured: message`` for each implementation ok in ``result`` that
    failed when the gate re-measured it (BROKEN). It failed in this command as surely as one that
    failed in the run: exit 4, not the gate's 1, and stderr names it, as it names the run's own."""
    before = {f"{c.case_id}/{r.name}" for c in result.cases for r in c.impls if r.status in FAILED_STATUSES}
    return [f"{v.case_id} {v.impl}: {str(v.status_cur).upper()} while re-measured: "
            + (v.detail.splitlines() or [""])[0]
            for v in verdict.verdicts if v.status_cur in FAILED_STATUSES and v.key not in before]


# Options that only shape a measurement (or a gate of one): a dry run measures nothing, so one given
# with --dry-run would be silently ignored; it is refused instead.
_MEASURING = ("timer", "flush", "launch", "budget", "target", "min_samples", "max_samples", "input_sets",
              "seed", "timeout_s", "threads", "compile_jobs", "compile_cache", "in_process", "repeat", "max_rounds",
              "rounds_target", "rounds_spread", "devices", "executor", "address", "schedule_from", "tuned",
              "gate_against", "threshold", "rerun", "junit", "run_sd")


# Options of the worker processes: --in-process starts none (no timeout; torch's own compile cache), so
# one given with --in-process would be silently ignored; it is refused instead.
_ISOLATED = ("timeout_s", "compile_jobs", "compile_cache")


def _given(ctx: click.Context, names: Sequence[str]) -> str:
    """The options among ``names`` given on the command line, as the user spells them ("" if none)."""
    given = [p for p in ctx.command.params
             if p.name in names and ctx.get_parameter_source(p.name) is not ParameterSource.DEFAULT]
    return ", ".join(p.opts[-1] if len(p.opts) > 1 and p.opts[-1].startswith("--") else p.opts[0] for p in given)


def _nothing_to_time(ctx: click.Context) -> None:
    """ConfigError (exit 2) naming the measuring options given with --dry-run (its counts depend on none of them)."""
    names = _given(ctx, _MEASURING)
    if names:
        raise ConfigError(f"{names}: a dry run measures nothing; these options shape a measurement "
                               "(drop them, or drop --dry-run)")


def _nothing_to_isolate(ctx: click.Context) -> None:
    """ConfigError (exit 2) naming the worker options given with --in-process (it starts no worker)."""
    names = _given(ctx, _ISOLATED)
    if names:
        raise ConfigError(f"{names}: --in-process measures in this process, with no timeout and torch's own "
                          "compile cache; these options shape worker processes (drop them, or drop --in-process)")


def _usable_cores() -> int:
    """The CPUs this process may run on: its affinity (a container's cpuset, a taskset), which the thread
    policy counts too (``solbench.device.threads.usable_cores``; the CLI does not import device code)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _writable_folder(path: str, option: str) -> None:
    """ConfigError (exit 2) unless ``path`` is a folder this process can make and write in."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot make the folder: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: cannot write in the folder: permission denied")


def _same_timing(base: RunResult, options: api.RunOptions, name: str) -> None:
    """ConfigError (exit 2) before anything is measured where ``--gate-against`` names a run timed
    another way (a dry run, another GPU timer, or another ``--launch``): the gate would refuse it afterwards."""
    from solbench.analysis.compare import run_launch

    p = base.protocol
    if p.timer == "none":  # as gate refuses it, not as a run 'measured on different hardware' (its dry fingerprint)
        raise ConfigError(f"--gate-against {name} is a dry run (--dry-run: nothing was timed); gate against a run "
                          "that measured")
    theirs = run_launch(p)
    if p.timer in ("cold", "graph", "cupti") and p.timer != options.timer:
        raise ConfigError(f"--gate-against {name} was timed with --timer {p.timer}; measure with the same timer")
    if theirs != options.launch_on(base.environment.device_kind):
        raise ConfigError(f"--gate-against {name} was timed with --launch {theirs}; measure with the same "
                          f"--launch (gate refuses runs launched differently)")


def parse_sets(sets: Sequence[str]) -> tuple[tuple[str, tuple[int | float | str, ...]], ...]:
    """``("tokens=16,64", "hidden=512")`` -> ``(("tokens", (16, 64)), ("hidden", (512,)))``; numbers
    are ints where they read as ints, else floats, else kept as text."""
    def value(text: str) -> int | float | str:
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    out = []
    for item in sets:
        name, sep, values = item.partition("=")
        parsed = tuple(value(v.strip()) for v in values.split(",") if v.strip())
        if not sep or not name.strip() or not parsed:
            raise ConfigError(f"--set {item!r}: expected NAME=V1,V2 (e.g. --set tokens=16,64)")
        before = next((f"{n}={','.join(map(str, v))}" for n, v in out if n == name.strip()), None)
        if before is not None:  # the later one replaced the earlier, silently
            raise ConfigError(f"--set {item!r}: {name.strip()} is set twice (also --set {before}); give its "
                              f"values once, as --set {name.strip()}=V1,V2")
        out.append((name.strip(), parsed))
    return tuple(out)


def _finish_dry(result: RunResult, out: Console, as_json: bool, output: str | None, save_name: str | None,
                results_dir: Path, force: bool) -> None:
    saved = []
    if output:
        saved.append(store.save(result, Path(output), force=force, extra=derived(result)))
    if save_name:
        saved.append(store.save_new(result, results_dir, save_name, extra=derived(result)))
    finish(result, out, as_json, saved=saved)


def saved_name(name: str) -> None:
    """ConfigError for a ``--save`` name that is not its own file-name form (``store.slug``): ``Nightly``
    and ``nightly``, or ``a/b`` and ``a-b``, were saved as one name, and a gate between the two read one
    run twice; a blank name (an unset variable) saved the run under none."""
    if not name.strip():
        raise ConfigError(f"--save: {name!r} names no run (an unset variable?); give a name, or leave --save out")
    if store.slug(name) != name:
        raise ConfigError(f"--save {name!r}: a saved name is kept in the file name, so it may hold only lower-case "
                          f"letters, digits, '.', '_' and '-', at most 80 characters (e.g. {store.slug(name)!r}): "
                          "two names must never read as one run")
