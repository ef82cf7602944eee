"""The ``solbench`` command line: parses options, calls :mod:`solbench.api`, renders results.

Exit codes (see :mod:`solbench.exitcodes`): 0 success · 1 a gate found a regression ·
2 bad input or usage · 3 a gate was inconclusive · 4 an implementation failed (incorrect, invalid,
error, crashed, timeout, oom, reward_hack) · 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from solbench import api, exitcodes
from solbench.errors import RunInterrupted, SolbenchError
from solbench.report.console import run_header, run_notes, run_tables
from solbench.results import store
from solbench.results.model import FAILED_STATUSES, RunResult

F = TypeVar("F", bound=Callable[..., Any])


def _console(quiet: bool = False) -> Console:
    # Piped output (CI logs, files) gets a wide table rather than rich's 80-column default.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return Console(stderr=False, quiet=quiet, highlight=False, width=width)


def _err_console() -> Console:
    return Console(stderr=True, highlight=False)


def handle_errors(fn: F) -> F:
    """Show a SolbenchError as one line on stderr and exit with its code; no traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SolbenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(api.__version__, prog_name="solbench")
def main() -> None:
    """How far is an implementation from the hardware's speed of light?"""


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--gpu", "gpu", metavar="SPEC", help="Score against this hardware spec (what-if).")
@click.option("--dry-run", is_flag=True, help="Print FLOPs, bytes and T_SOL; measure nothing.")
@click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N",
              help="Where to measure; cuda:N picks a GPU (scored against that GPU's spec).")
@click.option("--timer", type=click.Choice(["cold", "graph", "cupti"]), default="cold", show_default=True,
              help="cold: CUDA events, L2 flushed; graph: CUDA-graph replay of many calls of one input set "
                   "(warm L2); cupti: the cold protocol timed by CUPTI from the first to the last GPU activity "
                   "the call launched, on any stream (needs cupti-python: pip install 'solbench[cupti]').")
@click.option("--flush", type=click.Choice(["clean", "write"]), default="clean", show_default=True,
              help="cold/cupti timer: zero 2 x L2 and read it back (clean: no write-back of dirty lines "
                   "inside the timed window) or only zero it (write, as nvbench).")
@click.option("-w", "--workload", "workloads", multiple=True, help="Only this workload (repeatable).")
@click.option("-i", "--impl", "impls", multiple=True, help="Only this implementation (repeatable).")
@click.option("--budget", type=click.FloatRange(min=0.01), default=2.0, show_default=True,
              help="Seconds of sampling per implementation and case.")
@click.option("--target", type=click.FloatRange(min=0.0001), default=0.01, show_default=True,
              help="Stop when the median's 95%% CI half-width is within this fraction.")
@click.option("--min-samples", type=click.IntRange(min=3), default=10, show_default=True)
@click.option("--max-samples", type=click.IntRange(min=3), default=2000, show_default=True)
@click.option("--input-sets", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--peaks", type=click.Choice(["datasheet", "measured"]), default="datasheet", show_default=True,
              help="Score against datasheet peaks or the ceilings `solbench calibrate` measured.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              help="Seconds per implementation and case (set-up and compilation included) before its "
                   "worker is killed and the result is 'timeout'.")
@click.option("--in-process", is_flag=True,
              help="Run implementations in this process (debugging): no isolation, no timeout.")
@click.option("--repeat", type=click.IntRange(min=1), default=None,
              help="Measure in N independent rounds (fresh workers and allocations each) and report the "
                   "median and CI over rounds; see README 'Rounds'. Default: 3 on a GPU, 1 on the CPU.")
@click.option("--devices", default="", metavar="all|0,1,...",
              help="Shard the cases over these local GPUs (one case per GPU at a time; each GPU scored "
                   "against its own spec); with --executor ray: 'all' or how many GPUs.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="ray: measure on the GPUs of a Ray cluster (pip install 'solbench[ray]').")
@click.option("--address", metavar="ADDR",
              help="Ray cluster to join: 'auto' or 'ray://host:10001' (default: a running or new local one).")
@click.option("--schedule-from", type=click.Path(dir_okay=False, exists=True),
              help="--devices/Ray: order cases by the times they took in this run (default: the newest "
                   "saved run of this GPU that has them, else by T_SOL).")
@click.option("--force", is_flag=True, help="Allow -o to overwrite an existing file.")
@click.option("--tuned", type=click.Path(dir_okay=False, exists=True),
              help="Use the configurations `solbench tune` stored in this file.")
@click.option("--save", "save_name", metavar="NAME", help="Save as results/<spec>/<time>_NAME.json.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result JSON here.")
@click.option("--results-dir", type=click.Path(file_okay=False), default="results", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result JSON to stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or tables.")
@click.option("--gate-against", metavar="RUN", help="Gate this run against a baseline run (file or name).")
@click.option("--threshold", default=None,
              help="Gate threshold ('5%', 'median:5%'); default: the workload's gate_threshold as the run "
                   "recorded it, else 5%.")
@click.option("--rerun", type=click.IntRange(min=0), default=1, show_default=True,
              help="Re-measure suspected regressions this many times before deciding.")
@click.option("--junit", type=click.Path(dir_okay=False), help="With --gate-against: JUnit XML here.")
@handle_errors
def run(files: Sequence[str], gpu: str | None, dry_run: bool, device: str, timer: str, flush: str,
        workloads: Sequence[str], impls: Sequence[str], budget: float, target: float,
        min_samples: int, max_samples: int, input_sets: int, peaks: str, seed: int, timeout_s: float,
        in_process: bool, repeat: int | None, devices: str, executor: str, address: str | None,
        schedule_from: str | None, force: bool, tuned: str | None, save_name: str | None,
        output: str | None, results_dir: str, as_json: bool, quiet: bool, gate_against: str | None,
        threshold: str | None, rerun: int, junit: str | None) -> None:
    """Check and time every implementation of the workloads in FILES."""
    out = _console(quiet or as_json)
    if gpu and not dry_run:
        raise click.UsageError("--gpu picks a spec for a what-if; add --dry-run")
    if (devices or executor != "local") and device != "auto":
        raise click.UsageError("--device picks one device; --devices and --executor ray pick several")
    if address and executor != "ray":
        raise click.UsageError("--address names a Ray cluster; add --executor ray")
    if dry_run:
        result = api.dry_run(files, api.hardware_spec(gpu), workloads, impls)
        _finish_dry(result, out, as_json, output, save_name, Path(results_dir), force)
        return
    options = api.RunOptions(timer=timer, target_rel_ci=target, min_samples=min_samples,
                             max_samples=max_samples, budget_s=budget, input_sets=input_sets,
                             seed=seed, workloads=tuple(workloads), impls=tuple(impls), peaks=peaks, flush=flush,
                             results_dir=Path(results_dir), timeout_s=timeout_s, in_process=in_process,
                             tuned=Path(tuned) if tuned else None, repeat=repeat or 0, devices=devices,
                             executor=executor, address=address,
                             schedule_from=Path(schedule_from) if schedule_from else None)
    saver = _Saver(Path(output) if output else None, Path(results_dir), save_name, force=force)
    base = api.load_run(gate_against, Path(results_dir)) if gate_against else None
    from solbench.gate import parse_threshold

    tau = None if threshold is None else parse_threshold(threshold).fraction  # bad input fails before measuring
    try:
        with _progress(quiet or as_json) as progress:
            result = api.run(files, options, device=device, progress=progress, on_case=saver.save)
    except RunInterrupted as stop:
        partial: RunResult = stop.result  # type: ignore[assignment]
        saver.save(partial)
        _finish(partial, out, as_json, saved=saver.path)
        click.echo("interrupted: the cases measured so far are saved", err=True)
        sys.exit(exitcodes.INTERRUPTED)
    if result.cases:
        saver.save(result)  # the final record adds the end-of-run clocks
    _finish(result, out, as_json, saved=saver.path)
    code = exitcodes.IMPL_FAILED if _failures(result) else exitcodes.OK
    if saver.error is not None:
        click.echo(f"error: {saver.error}", err=True)
        code = exitcodes.worst(code, exitcodes.USAGE)
    if base is not None:
        from solbench.cli_compare import emit_gate

        verdict = api.gate_live(base, result, files, options, rerun=rerun, device=device, threshold=tau)
        emit_gate(verdict, junit=junit, console=_console(quiet or as_json))
        code = exitcodes.worst(code, verdict.exit_code)
    sys.exit(code)


def _failures(result: RunResult) -> list[str]:
    """``case/impl: status`` for every implementation that failed, cheated or was wrong."""
    return [f"{c.case_id}/{r.name}: {r.status}" for c in result.cases for r in c.impls
            if r.status in FAILED_STATUSES]


class _Saver:
    """Writes the run after every case, to one file chosen (and checked writable) before measuring.

    A write that fails (disk full, folder removed) does not stop the run: the last good file
    stays, the error is kept and reported at the end, and the exit code says so.
    """

    def __init__(self, output: Path | None, results_dir: Path, name: str | None, *, force: bool) -> None:
        self._output, self._dir, self._name, self._force = output, results_dir, name, force
        self.path: Path | None = None
        self.error: str | None = None
        if output is not None:
            store.check_writable(output, is_file=True, force=force)
        else:
            store.check_writable(results_dir)

    def save(self, partial: RunResult) -> None:
        try:
            if self.path is not None:
                store.save(partial, self.path)
            elif self._output is not None:
                self.path = store.save(partial, self._output, force=self._force)
            else:
                self.path = store.save_new(partial, self._dir, self._name)
        except SolbenchError as exc:
            self.error = str(exc)


def _finish_dry(result: RunResult, out: Console, as_json: bool, output: str | None, save_name: str | None,
                results_dir: Path, force: bool) -> None:
    saved = None
    if output:
        saved = store.save(result, Path(output), force=force)
    elif save_name:
        saved = store.save_new(result, results_dir, save_name)
    _finish(result, out, as_json, saved=saved)


def _finish(result: RunResult, out: Console, as_json: bool, *, saved: Path | None = None) -> None:
    if as_json:
        click.echo(store.dumps(result))
        return
    _print_run(out, result)
    if saved is not None:
        out.print(f"saved {saved}", style="dim")


class _progress:
    """A rich progress bar over cases, on stderr; a no-op callback when quiet."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet or (not sys.stderr.isatty() and os.environ.get("SOLBENCH_PROGRESS") != "1")
        self._bar: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> Callable[[str, dict[str, Any]], None]:
        if self.quiet:
            return lambda event, data: None
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=_err_console(), transient=True)
        self._bar.__enter__()
        return self._event

    def _event(self, event: str, data: dict[str, Any]) -> None:
        bar = self._bar
        assert bar is not None
        if event == "start":
            self._task = bar.add_task("measuring", total=data["cases"])
        elif event == "round":
            bar.update(self._task, description=f"round {data['round']} of {data['of']}")
        elif event == "workers":
            bar.update(self._task, description=escape(f"starting workers for {data['workload']}"))
        elif event == "impl":
            self._label = escape(f"{data['case']} {data['impl']}")
            bar.update(self._task, description=self._label)
        elif event == "sample" and data["n"] % 10 == 0:
            bar.update(self._task, description=f"{self._label} ({data['n']} samples)")
        elif event == "case_done":
            bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


@main.command()
@click.option("--seconds", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Measuring window per GEMM dtype.")
@click.option("--results-dir", type=click.Path(file_okay=False), default="results", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def calibrate(seconds: float, results_dir: str, as_json: bool) -> None:
    """Measure this GPU's ceilings (copy bandwidth, sustained GEMM per dtype) for --peaks measured."""
    from rich.table import Table

    cal, path, spec = api.calibrate(seconds=seconds, results_dir=Path(results_dir))
    if as_json:
        click.echo(path.read_text())
        return
    t = Table(title=f"measured ceilings: {cal.device_name} ({spec.id})", title_justify="left")
    for col in ("ceiling", "measured", "burst", "datasheet", "of datasheet"):
        t.add_column(col, justify="left" if col == "ceiling" else "right")
    bw = spec.bandwidth or 0
    t.add_row("copy bandwidth", f"{cal.bandwidth / 1e12:.2f} TB/s", "", f"{bw / 1e12:.2f} TB/s",
              f"{cal.bandwidth / bw:.0%}" if bw else "")
    for unit, rate in {**cal.tensor_peaks, **cal.vector_peaks}.items():
        sheet = spec.tensor_peaks.get(unit) or spec.vector_peaks.get(unit)
        t.add_row(f"{unit} GEMM", f"{rate / 1e12:.0f} TFLOP/s", f"{cal.burst_peaks[unit] / 1e12:.0f}",
                  f"{sheet / 1e12:.0f}" if sheet else "", f"{rate / sheet:.0%}" if sheet else "")
    out = _console()
    out.print(t)
    out.print(f"{cal.protocol}; SM clock after: {cal.sm_clock_mhz} MHz; saved {path}", style="dim")


@main.command()
@click.argument("run_file", required=False, metavar="RUN")
@click.option("--results-dir", type=click.Path(file_okay=False), default="results", show_default=True)
@click.option("--markdown", "as_markdown", is_flag=True, help="Markdown tables (PR comments, docs).")
@handle_errors
def show(run_file: str | None, results_dir: str, as_markdown: bool) -> None:
    """Show a saved run (a file, a saved name, or the latest) as tables or Markdown."""
    from solbench.report.markdown import run_markdown

    rdir = Path(results_dir)
    result = api.load_run(run_file, rdir) if run_file else store.load(store.latest(rdir))
    if as_markdown:
        click.echo(run_markdown(result))
        return
    _print_run(_console(), result)


def _print_run(out: Console, result: RunResult) -> None:
    out.print(run_header(result), style="dim")
    for table in run_tables(result):
        out.print(table)
    for note in run_notes(result):
        out.print(note, style="dim", overflow="fold", markup=False)


@main.command()
@handle_errors
def schema() -> None:
    """Print the JSON Schema of workload files (for editor validation)."""
    from solbench.config.workloads import workload_json_schema

    click.echo(json.dumps(workload_json_schema(), indent=2))


@main.command(name="list")
@click.argument("paths", nargs=-1, type=click.Path())
@handle_errors
def list_(paths: Sequence[str]) -> None:
    """List workloads (in PATHS, default workloads/) and hardware specs."""
    from rich.table import Table

    out = _console()
    t = Table(title="workloads", title_justify="left")
    for col in ("file", "workload", "implementations", "description"):
        t.add_column(col)
    for path, spec in api.list_workloads(paths or ["workloads"]):
        t.add_row(str(path), spec.name, ", ".join(spec.implementations), _first_sentence(spec.description))
    out.print(t)
    s = Table(title="hardware specs", title_justify="left")
    for col in ("id", "name", "bf16 tensor TFLOP/s", "memory TB/s"):
        s.add_column(col)
    for hw in api.list_specs():
        bf16 = hw.tensor_peaks.get("bf16")
        s.add_row(hw.id, hw.name, f"{bf16 / 1e12:g}" if bf16 else "-",
                  f"{hw.bandwidth / 1e12:g}" if hw.bandwidth else "measured")
    out.print(s)


def _first_sentence(text: str, limit: int = 90) -> str:
    first = " ".join(text.split()).split(". ")[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


@main.command()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def info(as_json: bool) -> None:
    """Show the detected device, its matched spec, versions and current clocks."""
    data = api.device_summary()
    if as_json:
        click.echo(json.dumps(data, indent=1))
        return
    out = _console()
    width = max(len(k) for k in data)
    for key, value in data.items():
        out.print(f"{key:<{width}}  {value}")


def _register() -> None:
    from solbench.cli_ab import ab
    from solbench.cli_compare import compare, gate_cmd
    from solbench.cli_tools import TOOLS

    for command in (compare, gate_cmd, ab, *TOOLS):
        command.callback = handle_errors(command.callback)  # type: ignore[arg-type,type-var]
        main.add_command(command)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
