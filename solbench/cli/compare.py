"""``solbench compare`` and ``solbench gate``: parse, call the pure core, render, exit.

Exit codes (all of them, with their order, in :mod:`solbench.exitcodes`):
``compare`` 0 done · 2 bad input or usage.
``gate`` 0 pass · 1 a regression, or a case that fails now (BROKEN; STILL-BROKEN where it failed in
the baseline too) · 2 bad input or usage · 3 inconclusive.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console

from solbench import exitcodes
from solbench.analysis.compare import Comparison, compare_impls, compare_runs, impl_keys
from solbench.analysis.gate import GateResult, check_one_tree, gate, parse_threshold, unconfirmed
from solbench.cli import common
from solbench.cli.common import (
    ALPHA,
    NamedPath,
    distinct_outputs,
    junit_refusals,
    one_stdout_view,
    print_table,
    read_run,
    refuse_markdown_path,
    run_sd_of,
    run_sd_option,
    writable_output,
)
from solbench.errors import ConfigError, ResultsFormatError
from solbench.report.compare_console import comparison_table, gate_table
from solbench.report.compare_json import comparison_json, gate_json
from solbench.report.junit import gate_junit
from solbench.report.markdown import comparison_markdown, gate_markdown, undecided_note
from solbench.results import store
from solbench.results.model import MAX_RUN_SD, RunResult
from solbench.text import first_few

_compare_threshold = click.option("--threshold", default="5%", show_default=True,
                                  help="Smallest change that counts: '5%', '0.05' or 'median:5%'.")
_gate_threshold = click.option(
    "--threshold", default=None,
    help="Smallest slowdown that fails: '5%', '0.05' or 'median:5%'; applies to every case. "
         "Default: each workload's gate_threshold as the current run (else the baseline) recorded it, "
         "else 5%.")


class _Sides(click.Command):
    """``--baseline a.json b.json`` reads as ``--baseline a.json --baseline b.json`` (same for
    ``--current``): every bare word after one of them, up to the next option, is one more run."""

    sides = ("--baseline", "--current")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        refuse_markdown_path(args, any_word=self.name == "gate")
        out: list[str] = []
        side: str | None = None
        for i, token in enumerate(args):
            if token == "--":
                out += args[i:]
                break
            if token in self.sides and (i + 1 == len(args) or args[i + 1].startswith("-")):
                # click would take the next option as this one's run, and then call that one missing
                after = f"before {args[i + 1]}" if i + 1 < len(args) else "at the end"
                raise click.UsageError(f"{token} needs at least one run (a result file or saved name); "
                                       f"none given {after}", ctx)
            if token.startswith("-"):
                side = token.split("=", 1)[0] if token.split("=", 1)[0] in self.sides else None
                out.append(token)
            elif side is not None and out[-1] != side:
                out += [side, token]
            else:
                out.append(token)
        return super().parse_args(ctx, out)


@click.command(cls=_Sides)
@click.argument("a", required=False)
@click.argument("b", required=False)
@click.option("--baseline", "baselines", multiple=True, metavar="RUN...",
              help="Side A as one or more runs of the same code (instead of A B; with --current).")
@click.option("--current", "currents", multiple=True, metavar="RUN...",
              help="Side B as one or more runs (their rounds kept apart: CI over runs, then samples).")
@click.option("--run", "run_file", metavar="FILE", help="Run to compare implementations in (default: latest).")
@click.option("--impl", help="Compare only this implementation (when A and B are runs).")
@_compare_threshold
@run_sd_option
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print the comparison as JSON (not with --markdown: both go to stdout).")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the comparison as Markdown on stdout instead of the table.")
def compare(a: str | None, b: str | None, baselines: tuple[str, ...], currents: tuple[str, ...],
            run_file: str | None, impl: str | None, threshold: str, run_sd: str | None, results_dir: str,
            as_json: bool, as_markdown: bool) -> None:
    """Compare two saved runs, or two implementations (A B) inside one run.

    \b
    solbench compare base.json head.json       # two runs, every case and implementation
    solbench compare nightly head --impl fused  # runs saved with --save NAME
    solbench compare baseline fused             # two implementations in the latest run
    solbench compare --baseline a1.json a2.json --current b1.json b2.json   # several runs per side
    """
    one_stdout_view(as_json, as_markdown)
    rdir = Path(results_dir)
    tau = parse_threshold(threshold).fraction
    if baselines or currents:
        if not (baselines and currents) or a is not None or run_file is not None:
            raise click.UsageError("give --baseline RUN... and --current RUN... together, instead of A B")
        sides = _read_sides(baselines, currents, rdir)
        warn_incomplete(currents, sides[1], "--current ")
        check_one_tree(sides[0], "baseline", allow_cross_hardware=None)  # the runs of a side share a fingerprint
        check_one_tree(sides[1], "current", allow_cross_hardware=None)
        _check_impl(impl, [*sides[0], *sides[1]])
        result = saved_comparison(sides[0], sides[1], rdir, impl=impl, threshold=tau, label_a=_label(baselines),
                                  label_b=_label(currents), run_sd=run_sd)
        _show_comparison(result, as_json, as_markdown)
        return
    if a is None or b is None:
        raise click.UsageError("compare needs A and B (runs or implementations), or --baseline and --current")
    runs = _as_runs(a, b, rdir) if run_file is None else None
    if runs is not None:
        _one_result_a_key([a, b], runs)
        warn_incomplete([a, b], runs)
        warn_same_run([a], runs[:1], [b], runs[1:])
        _check_impl(impl, runs)
        result = saved_comparison([runs[0]], [runs[1]], rdir, impl=impl, threshold=tau, label_a=a, label_b=b,
                                  run_sd=run_sd)
    else:
        if run_sd is not None:
            raise ConfigError("--run-sd prices the offsets of separate runs; two implementations of one run share "
                              "theirs")
        if impl is not None:  # ignored here, a misspelled or wrong --impl compared A and B and exited 0
            raise ConfigError(f"--impl {impl} picks one implementation of two runs; here {a!r} and {b!r} are the "
                              "implementations compared (drop --impl)")
        run = read_run(run_file, rdir)
        warn_incomplete([run_file or "the latest run"], [run])
        names = {r.name for c in run.cases for r in c.impls}
        if not names:
            state = "incomplete: stopped before its first case" if not run.complete else "empty"
            if run_file is not None:  # A and B named implementations of it: they were never read as runs
                raise ConfigError(f"--run {run_file}: the run holds no case ({state}); nothing to compare "
                                  f"{a!r} and {b!r} in")
            raise ConfigError(f"{a!r} and {b!r} are neither result files nor saved runs, and the run to compare "
                              f"them in holds no case ({state}); name one with --run")
        for name in (a, b):
            if name in names:
                continue
            held = f"(implementations: {', '.join(sorted(names))})"
            if run_file is not None:  # named implementations of that run, never read as runs
                raise ConfigError(f"{name!r} is not an implementation of --run {run_file} {held}")
            raise ConfigError(f"{name!r} is neither a result file, a saved run, nor an implementation of the run "
                              + held)
        result = compare_impls(run, a, b, threshold=tau)
    _show_comparison(result, as_json, as_markdown)


def _check_impl(impl: str | None, runs: Sequence[RunResult]) -> None:
    """ConfigError for an ``--impl`` no run holds, listing those they do (a misspelled name would
    otherwise compare nothing and pass)."""
    names = {r.name for run in runs for c in run.cases for r in c.impls}
    if impl is not None and impl not in names:
        raise ConfigError(f"--impl {impl}: no such implementation in the runs (they hold: {', '.join(sorted(names))})")


def _read_sides(baseline: Sequence[str], current: Sequence[str], rdir: Path) -> tuple[list[RunResult], list[RunResult]]:
    """The runs of each side, read: refused where a run holds two results for one key
    (:func:`_one_result_a_key`) or a side holds one run twice (:func:`separate_runs`)."""
    base = [read_run(x, rdir, "baseline") for x in baseline]
    cur = [read_run(x, rdir, "current") for x in current]
    _one_result_a_key([*baseline, *current], [*base, *cur])
    separate_runs(baseline, base, "--baseline")
    separate_runs(current, cur, "--current")
    warn_incomplete(baseline, base, "--baseline ")
    warn_same_run(baseline, base, current, cur)
    return base, cur


def warn_incomplete(names: Sequence[str], runs: Sequence[RunResult], option: str = "") -> None:
    """One warning line (stderr) for each run saved as incomplete that is read as a side: what it did
    not measure reads as MISSING, not as a case compared (a current run is refused by ``gate``)."""
    for name, run in zip(names, runs, strict=True):
        if not run.complete:
            click.echo(f"warning: {option}{name}: the run is incomplete (complete: false: stopped before every "
                       "case was measured); the cases it lacks are MISSING, not compared", err=True)


def _one_result_a_key(names: Sequence[str], runs: Sequence[RunResult]) -> None:
    """ResultsFormatError naming the file where a run holds two results for one case and
    implementation (a damaged or hand-merged file): nothing can pair it."""
    for name, run in zip(names, runs, strict=True):
        try:
            for _ in impl_keys(run, None):
                pass
        except ResultsFormatError as exc:
            raise ResultsFormatError(f"{name}: {exc}") from None


def _same_run(a: RunResult, b: RunResult) -> bool:
    """Whether two runs are one run (or a copy of it): every point timed in both holds the same samples."""
    timed = [{f"{c.case_id}/{r.name}": r.timing.samples for c in run.cases for r in c.impls
              if r.timing is not None and r.timing.samples} for run in (a, b)]
    common = timed[0].keys() & timed[1].keys()
    return bool(common) and all(timed[0][k] == timed[1][k] for k in common)


def separate_runs(names: Sequence[str], runs: Sequence[RunResult], option: str) -> None:
    """ConfigError where two runs of one side are one run given twice (or a copy of it): every point
    timed in both holds the same samples. Its rounds would count twice, as runs that agree exactly,
    narrowing the interval until it decides what one run cannot (a REGRESSION between single runs)."""
    for j in range(len(runs)):
        for i in range(j):
            if _same_run(runs[i], runs[j]):
                raise ConfigError(f"{option} {names[j]}: the same run as {names[i]} (the same samples at every "
                                  "point); give separate runs")


def warn_same_run(base_names: Sequence[str], base: Sequence[RunResult], cur_names: Sequence[str],
                  cur: Sequence[RunResult]) -> None:
    """One warning line (stderr) where a baseline run and a current run are one run: compared with
    itself a run passes by construction (allowed, as a check of the tool), which a CI job wired to the
    wrong file would read as a pass."""
    for bn, b in zip(base_names, base, strict=True):
        for cn, c in zip(cur_names, cur, strict=True):
            if _same_run(b, c):
                click.echo(f"warning: {cn} is the same run as {bn} (the same samples at every point): a run "
                           "compared with itself passes by construction", err=True)


def _label(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1}"


def _show_comparison(result: Comparison, as_json: bool, as_markdown: bool) -> None:
    """Print the comparison; exit 2 after it where no key was measured on both sides (the table then
    lists only what each side holds alone: nothing was compared, and a script must not read success)."""
    if as_json:
        click.echo(json.dumps(comparison_json(result), indent=1))
    elif as_markdown:
        click.echo(comparison_markdown(result))
    else:
        print_table(common.console(), comparison_table(result))
    if not result.rows:
        click.echo(f"error: {nothing_compared(result)}", err=True)
        sys.exit(exitcodes.USAGE)


def nothing_compared(result: Comparison) -> str:
    """Why a comparison with no rows compared nothing: what each side held alone, or apart."""
    parts = [f"{len(result.only_in_a)} measured in {result.label_a} only",
             f"{len(result.only_in_b)} in {result.label_b} only"]
    if result.not_comparable:
        parts.append(f"{len(result.not_comparable)} on other GPU models")
    if result.launched_differently:
        parts.append(f"{len(result.launched_differently)} launched differently")
    return f"nothing compared: no case was measured on both sides ({', '.join(parts)})"


def _as_runs(a: str, b: str, rdir: Path) -> tuple | None:
    """Both runs when A and B both name runs; None when neither does (two implementations); an
    error naming the one that is missing when only one does."""
    found = {name: _find(name, rdir) for name in (a, b)}
    if all(p is None for p in found.values()):
        return None
    missing = [name for name, p in found.items() if p is None]
    if missing:
        other = a if missing[0] == b else b
        raise ResultsFormatError(f"{missing[0]}: no such result file or saved run in {rdir} ({other} is one; "
                                 "compare takes two runs, or two implementations of one run)")
    return read_run(a, rdir, f"A ({a})"), read_run(b, rdir, f"B ({b})")


def _find(name: str, rdir: Path) -> Path | None:
    if Path(name).is_dir():  # a folder names no run: A and B are then read as implementations
        return None
    try:
        return store.find(name, rdir)
    except ResultsFormatError as exc:
        if "no such result file or saved run" in str(exc):
            return None
        raise


@click.command(name="gate", cls=_Sides)
@click.option("--baseline", "baseline", required=True, multiple=True, metavar="RUN...",
              help="Baseline run(s): files or saved names; several runs of the same code are decided over "
                   "runs, then samples.")
@click.option("--current", "current", required=True, multiple=True, metavar="RUN...",
              help="Current run(s), likewise.")
@_gate_threshold
@click.option("--impl", help="Gate only this implementation.")
@click.option("--alpha", type=ALPHA, default=0.01, show_default=True,
              help="False-discovery rate across cases (Benjamini-Hochberg).")
@click.option("--allow-cross-hardware", is_flag=True, help="Compare runs whose fingerprints differ.")
@run_sd_option
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--junit", type=NamedPath(dir_okay=False), help="Write JUnit XML here.")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the verdicts as Markdown on stdout instead of the table.")
@click.option("--markdown-file", type=NamedPath(dir_okay=False), help="Also write the Markdown to FILE.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the verdicts as JSON (not with --markdown: both go to stdout).")
@click.option("--require-all", is_flag=True,
              help="Fail (exit 1) when a case of the baseline is MISSING now (absent from the current run, or "
                   "skipped there); by default MISSING is listed, never a failure.")
def gate_cmd(baseline: tuple[str, ...], current: tuple[str, ...], threshold: str | None, impl: str | None,
             alpha: float, allow_cross_hardware: bool, run_sd: str | None, results_dir: str, junit: str | None,
             as_markdown: bool, markdown_file: str | None, as_json: bool, require_all: bool) -> None:
    """Fail (exit 1) when CURRENT is slower than BASELINE beyond the threshold, or broken.

    Each side may be several runs of the same code (--baseline a.json b.json --current c.json
    d.json): the ratio's confidence interval then covers what changes between runs.

    A case is BROKEN when it is incorrect, invalid, error, crashed, timeout, oom or reward_hack
    now and was ok (or absent, or skipped) in the baseline; STILL-BROKEN when it failed there too (not the
    change's doing, yet a failing implementation never passes: exit 1 either way); one skipped now
    is listed as MISSING.

    A current run saved as incomplete (interrupted, cancelled, killed before its last save) is
    refused: exit 2, as bad input. A gate must not pass on the cases a cancelled job happened to
    measure.

    Exit codes: 0 pass, 1 regression or broken, 2 bad input, 3 inconclusive (too noisy to decide).
    """
    one_stdout_view(as_json, as_markdown, markdown_file=True)
    writable_output(junit, "JUnit XML")
    writable_output(markdown_file, "Markdown")
    distinct_outputs([("--junit", junit), ("--markdown-file", markdown_file)])  # the Markdown would replace the XML
    junit_refusals(junit)
    rdir = Path(results_dir)
    # a run that cannot be read or a bad threshold is refused: handle_errors has the JUnit file say so
    tau = None if threshold is None else parse_threshold(threshold).fraction
    base, cur = _read_sides(baseline, current, rdir)
    _check_impl(impl, [*base, *cur])
    result = saved_gate(base, cur, current, rdir, threshold=tau, alpha=alpha,
                        allow_cross_hardware=allow_cross_hardware, impl=impl, run_sd=run_sd)
    # a case the baseline measured (a median) that the current run did not: never one it adds, nor one
    # both measured that cannot be compared (launched differently, another GPU model: its reason says so)
    missing = [v.key for v in result.verdicts
               if v.verdict == "MISSING" and v.median_base is not None and v.median_cur is None] \
        if require_all else []
    code = exitcodes.worst(result.exit_code, exitcodes.REGRESSION) if missing else result.exit_code
    emit_gate(result, junit=junit, markdown_file=markdown_file, as_json=as_json, as_markdown=as_markdown,
              exit_code=code, required=missing)
    if missing:
        click.echo(f"--require-all: {len(missing)} case(s) MISSING from the current run: " + first_few(missing, 5),
                   err=True)
    sys.exit(code)


def saved_gate(base: Sequence[RunResult], cur: Sequence[RunResult], names: Sequence[str], rdir: Path, *,
               threshold: float | None = None, alpha: float = 0.01, allow_cross_hardware: bool = False,
               impl: str | None = None, run_sd: str | None = None) -> GateResult:
    """The gate of saved runs, as ``gate`` and ``report --gate-against`` both give it: an incomplete
    current run refused; the run offset priced (``--run-sd``, else the stored spread, else the
    default); verdicts between single-round runs unconfirmed, since nothing re-measures here.
    ``names``: how the current runs were named, for the errors."""
    for name, run in zip(names, cur, strict=True):
        if not run.complete:
            raise ConfigError(f"--current {name}: the run is incomplete (complete: false: interrupted or "
                              "cancelled before every case was measured); measure it again")
    sd, sd_source = run_sd_of(run_sd, rdir, base[0].spec.id)
    result = gate(base, cur, threshold=threshold, alpha=alpha, allow_cross_hardware=allow_cross_hardware, impl=impl,
                  run_sd=sd)
    result = unconfirmed(result)
    return replace(result, run_sd_source=sd_source)


def saved_comparison(a: Sequence[RunResult], b: Sequence[RunResult], rdir: Path, *, label_a: str, label_b: str,
                     impl: str | None = None, threshold: float = 0.05, run_sd: str | None = None) -> Comparison:
    """Two sides of saved runs compared, as ``compare A B`` and ``report --compare-to`` both give it:
    the run offset priced as the gate prices it."""
    sd, _ = run_sd_of(run_sd, rdir, a[0].spec.id)
    return compare_runs(a, b, impl=impl, threshold=threshold, label_a=label_a, label_b=label_b, run_sd=sd)


@click.command(name="spread")
@click.argument("runs", nargs=-1, required=True)
@click.option("--save", "save", is_flag=True,
              help="Store the result as results/spread/<spec>.json: later gates between runs of this GPU model "
                   "price it in when no --run-sd is given.")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def spread(runs: tuple[str, ...], save: bool, results_dir: str, as_json: bool) -> None:
    """How far runs of one tree differ beyond what their rounds show: the --run-sd to gate with.

    RUNS are three or more saved runs of the same code on one machine, measured in rounds (`run
    --repeat 3` or the default protocol). Per point, the spread of the runs' means over what each
    run's rounds predict; pooled over points, it is the sd of a run's own offset that `gate` and
    `run --gate-against` price in (`--run-sd`, default 0.2%).

    \b
    for i in 1 2 3 4 5; do solbench run workloads/attn.yaml --save same-$i; done
    solbench spread same-1 same-2 same-3 same-4 same-5 --save
    """
    from solbench.analysis.pooling import run_offsets

    rdir = Path(results_dir)
    loaded = [read_run(x, rdir, "run") for x in runs]
    if len(loaded) < 3:
        raise ConfigError(f"spread needs three runs of one tree at least, got {len(loaded)}")
    _one_result_a_key(runs, loaded)  # a hand-merged run's second result would count as another run's
    seen: dict[tuple[str, tuple[float, ...]], int] = {}
    for k, (name, run) in enumerate(zip(runs, loaded, strict=True)):
        if not run.complete:
            raise ConfigError(f"{name}: the run is incomplete (complete: false); give complete runs")
        for key, samples in ((f"{c.case_id}/{r.name}", r.timing.samples) for c in run.cases for r in c.impls
                             if r.timing is not None and r.timing.samples):
            other = seen.setdefault((key, samples), k)
            if other != k:  # a point measured once, given twice, reads as runs that agree exactly
                raise ConfigError(f"{name}: {key} holds the same samples as in {runs[other]}; give separate runs")
    check_one_tree(loaded, "spread", allow_cross_hardware=None)
    try:
        found = run_offsets(loaded, runs)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if found.sd >= MAX_RUN_SD:  # no gate takes it (--run-sd refuses it, a saved one breaks every later gate)
        raise ConfigError(f"the runs differ by sd {found.sd:.2%}, at or above the {MAX_RUN_SD:.0%} a run's own offset "
                          "may be: not runs of one tree on one machine? (nothing saved)")
    saved, first = None, loaded[0]
    if save:
        import datetime as dt

        from solbench.results.model import RunSpread

        record = RunSpread(created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), spec_id=first.spec.id,
                           device_name=first.environment.device_name or first.spec.name, run_sd=found.sd,
                           median_point=found.median, points=found.points, runs=tuple(runs))
        saved = store.save_spread(record, rdir)
    if as_json:
        click.echo(json.dumps({"kind": "spread", "version": 1, "run_sd": found.sd, "median_point": found.median,
                               "points": found.points, "runs": found.runs, "spec_id": first.spec.id,
                               "device_name": first.environment.device_name or first.spec.name,
                               "timer": first.protocol.timer,
                               "largest": [{"key": k, "sd": v} for k, v in found.largest],
                               "left_out": list(found.left_out),
                               "saved": None if saved is None else str(saved)}, indent=1))
        return
    click.echo(f"{found.runs} runs on {first.environment.device_name or first.spec.name} ({first.spec.id}, timer "
               f"{first.protocol.timer}), {found.points} points measured in rounds by every run")
    click.echo(f"a run's own offset: sd {_pct(found.sd)} pooled over points (a typical point: {_pct(found.median)})")
    click.echo("largest at (signed sd of the excess): " + ", ".join(f"{k} {_pct(v, '+')}" for k, v in found.largest))
    if found.left_out:
        click.echo(f"left out {len(found.left_out)} point(s) not measured in rounds by every run: "
                   + first_few(found.left_out, 10))
    if found.sd == 0.0:  # the excess is estimated below zero and kept at zero: a few runs' estimate, not none
        click.echo(f"(the {found.runs} runs spread no more than their rounds predict: sd 0 is an estimate from "
                   f"{found.runs} runs, and a gate priced with it adds nothing for a run's own offset; the default "
                   "0.2% was measured over more runs)", err=True)
    if saved is None:
        click.echo(f"gate with: --run-sd {_pct(found.sd)} (or store it: --save)")
    else:
        click.echo(f"saved {saved}: gates between {first.spec.id} runs under {rdir} now price "
                   f"{_pct(found.sd)} unless --run-sd is given")


def _pct(sd: float, sign: str = "") -> str:
    """A run's offset sd as a percent, never "0.00%" for one that is not 0 (the gate would price it);
    ``sign`` "+": signed."""
    return f"{sd:{sign}.2%}" if sd == 0 or abs(sd) >= 5e-5 else f"{sd * 100:{sign}.2g}%"


def emit_gate(result: GateResult, *, junit: str | None = None, markdown_file: str | None = None,
              as_json: bool = False, console: Console | None = None, as_markdown: bool = False,
              exit_code: int | None = None, required: Sequence[str] = ()) -> None:
    """Render a gate result to the terminal, files and $GITHUB_STEP_SUMMARY. ``exit_code``: what the
    command exits with where that is more severe than the gate's (an implementation failed: 4).
    ``required``: the MISSING keys that fail the command (``--require-all``), failures in the JUnit."""
    code = result.exit_code if exit_code is None else exit_code
    md = gate_markdown(result, exit_code=code)
    if junit:
        store.write_text(Path(junit), gate_junit(result, exit_code=code, required=required))
    if markdown_file:
        store.write_text(Path(markdown_file), md)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(md + "\n")
        except OSError as exc:  # the verdict still stands and is printed; the summary is an extra
            click.echo(f"warning: $GITHUB_STEP_SUMMARY {summary}: cannot write: {exc.strerror or exc}", err=True)
    if as_json:
        click.echo(json.dumps(gate_json(result, exit_code=code, required=required), indent=1))
    elif as_markdown:
        click.echo(md)
    else:
        print_table(console or common.console(), gate_table(result, exit_code=code))
    why = "" if code == result.exit_code else f" (the gate's own: {result.exit_code})"
    click.echo(f"gate: {result.overall} (exit {code}{why}, {len(result.verdicts)} cases, "
               f"{result.reruns} re-measure round(s))", err=True)
    if result.undecided:
        click.echo(undecided_note(result), err=True)
