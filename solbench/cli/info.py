"""``solbench calibrate``, ``show``, ``schema``, ``list`` and ``info``: the device, the specs, saved runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click

from solbench import api
from solbench.analysis.suite_summary import DEFAULT_PS
from solbench.cli.common import (
    NamedPath,
    check_fast_ps,
    console,
    derived,
    handle_errors,
    print_run,
    print_table,
    read_run,
)
from solbench.errors import ConfigError
from solbench.results import store


@click.command()
@click.option("--seconds", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Measuring window per GEMM dtype.")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def calibrate(seconds: float, results_dir: str, as_json: bool) -> None:
    """Measure this GPU's ceilings (copy bandwidth, sustained GEMM per dtype) for --peaks measured."""
    from rich.table import Table
    from rich.text import Text

    cal, path, spec = api.calibrate(seconds=seconds, results_dir=Path(results_dir))
    if as_json:
        click.echo(path.read_text())
        return
    t = Table(title=Text(f"measured ceilings: {cal.device_name} ({spec.id})"), title_justify="left")
    for col in ("ceiling", "measured", "burst", "datasheet", "of datasheet"):
        t.add_column(col, justify="left" if col == "ceiling" else "right")
    bw = spec.bandwidth or 0
    t.add_row("copy bandwidth", f"{cal.bandwidth / 1e12:.2f} TB/s", "", f"{bw / 1e12:.2f} TB/s",
              f"{cal.bandwidth / bw:.0%}" if bw else "")
    for unit, rate in {**cal.tensor_peaks, **cal.vector_peaks}.items():
        sheet = spec.tensor_peaks.get(unit) or spec.vector_peaks.get(unit)
        t.add_row(f"{unit} GEMM", f"{rate / 1e12:.0f} TFLOP/s", f"{cal.burst_peaks[unit] / 1e12:.0f}",
                  f"{sheet / 1e12:.0f}" if sheet else "", f"{rate / sheet:.0%}" if sheet else "")
    out = console()
    print_table(out, t)
    out.print(f"{cal.protocol}; SM clock after: {cal.sm_clock_mhz} MHz; driver {cal.driver or 'unknown'}; saved {path}",
              style="dim", markup=False, soft_wrap=True)  # a path, whole and as it is


@click.command()
@click.argument("run_file", required=False, metavar="[RUN]")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--markdown", "as_markdown", is_flag=True, help="Markdown tables (PR comments, docs).")
@click.option("--harness", "harness", is_flag=True,
              help="Where the run's wall time went (detect, workers, set-up, checks, sampling, saving; GPU busy).")
@click.option("--json", "as_json", is_flag=True,
              help="The run as JSON, with its suite summary (fast_p, mean S) when it holds suite problems.")
@click.option("--fast-p", "fast_ps", type=click.FloatRange(min=0), multiple=True, metavar="P",
              help="Suite summary: report fast_P (correct and faster than the baseline by more than P; "
                   "repeatable; default 0 and 1).")
@handle_errors
def show(run_file: str | None, results_dir: str, as_markdown: bool, harness: bool, as_json: bool,
         fast_ps: tuple[float, ...]) -> None:
    """Show a saved run (a file, a saved name, or the latest) as tables, Markdown or JSON.

    A run of KernelBench or SOL-ExecBench problems ends with a suite summary: fast_p per
    implementation (KernelBench's) and the mean S score (SOL-ExecBench's).
    """
    from solbench.report.markdown import run_markdown

    chosen = [flag for flag, on in (("--markdown", as_markdown), ("--harness", harness), ("--json", as_json)) if on]
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)}: each is a whole view of the run; give one")
    if harness and fast_ps:
        raise ConfigError("--fast-p picks the suite summary's p; --harness shows no suite summary")
    check_fast_ps(fast_ps)
    rdir = Path(results_dir)
    result = read_run(run_file, rdir)
    check_fast_ps(fast_ps, [result])
    if harness:
        from solbench.report.harness import harness_table

        if not result.harness:
            raise ConfigError("this run has no harness record (measured before solbench recorded one, or a dry run)")
        print_table(console(), harness_table(result))
        return
    ps = fast_ps or DEFAULT_PS
    if as_json:
        click.echo(store.dumps(result, derived(result, ps)))
        return
    if as_markdown:
        click.echo(run_markdown(result, ps))
        return
    print_run(console(), result, ps)


@click.command()
@handle_errors
def schema() -> None:
    """Print the JSON Schema of workload files (for editor validation)."""
    from solbench.config.workloads import workload_json_schema

    click.echo(json.dumps(workload_json_schema(), indent=2))


@click.command(name="list")
@click.argument("paths", nargs=-1, type=NamedPath())
@handle_errors
def list_(paths: Sequence[str]) -> None:
    """List workloads (in PATHS: workload files, folders of them, KernelBench or SOL-ExecBench problems;
    default workloads/) and hardware specs."""
    from rich.table import Table
    from rich.text import Text

    out = console()
    t = Table(title="workloads", title_justify="left")
    for col in ("file", "workload", "implementations", "description"):
        t.add_column(col)
    for path, spec in api.list_workloads(paths or ["workloads"]):
        cells = (str(path), spec.name, ", ".join(spec.implementations), _first_sentence(spec.description))
        t.add_row(*(Text(c) for c in cells))  # the user's text, never markup
    print_table(out, t)
    s = Table(title="hardware specs", title_justify="left")
    for col in ("id", "name", "bf16 tensor TFLOP/s", "memory TB/s"):
        s.add_column(col)
    for hw in api.list_specs():
        bf16 = hw.tensor_peaks.get("bf16")
        s.add_row(Text(hw.id), Text(hw.name), f"{bf16 / 1e12:g}" if bf16 else "-",
                  f"{hw.bandwidth / 1e12:g}" if hw.bandwidth else "measured")
    print_table(out, s)


def _first_sentence(text: str, limit: int = 90) -> str:
    first = " ".join(text.split()).split(". ")[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


@click.command()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def info(as_json: bool) -> None:
    """Show the detected device, its matched spec, versions and current clocks."""
    data = api.device_summary()
    if as_json:
        click.echo(json.dumps(data, indent=1))
        return
    out = console()
    width = max(len(k) for k in data)
    for key, value in data.items():
        for line in value if isinstance(value, list) else [value]:  # warnings: one a line
            out.print(f"{key:<{width}}  {line}", markup=False)
