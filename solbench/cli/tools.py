"""``solbench report``, ``solbench tune`` and ``solbench profile``: parse, call, render, write files.

    solbench report RUN... --html report.html --png roofline.png --csv runs.csv
    solbench tune workloads/x.yaml -i fused          # every tune: space, per case
    solbench profile workloads/attn.yaml -w o_proj -i fused --case 'o_proj[tokens=16,...]'
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from solbench import exitcodes
from solbench.analysis.suite_summary import DEFAULT_PS
from solbench.cli.common import NamedPath, ProgressBar, console, err_console, print_table, run_sd_option
from solbench.errors import ConfigError, ResultsFormatError
from solbench.report.units import format_bytes, format_flops, format_seconds
from solbench.results import store
from solbench.results.model import FAILED_STATUSES, Calibration, RunResult
from solbench.text import first_few

if TYPE_CHECKING:
    from solbench.analysis.compare import Comparison
    from solbench.analysis.gate import GateResult


# ------------------------------------------------------------------ report


def _calibration(path: str | None, runs: Sequence[RunResult], rdir: Path) -> Calibration | None:
    """The calibration given, else the one saved for the runs' device where they share one, else None."""
    if path is None:
        env = runs[0].environment
        if env.device_kind != "cuda" or any(r.environment.spec_id != env.spec_id for r in runs):
            return None  # one device's ceilings would be drawn over another's points, as refused below
        try:
            return store.load_calibration(rdir, env.spec_id, env.device_uuid)
        except ResultsFormatError:
            return None
    cal = store.read_calibration(Path(path))
    other = next((r.environment for r in runs if r.environment.spec_id != cal.spec_id), None)
    if other is not None:  # its ceilings would be drawn over another device's points
        raise ConfigError(f"--calibration {path}: measured on {cal.spec_id} ({cal.device_name}), a run on "
                          f"{other.spec_id} ({other.device_name}); give that device's calibration, or none")
    return cal


def _report_warnings(names: Sequence[str], runs: Sequence[RunResult], *, to_csv: bool) -> None:
    """ConfigError for one run given twice (every row would appear twice); a warning on stderr for a
    run that is incomplete or a dry run, which the CSV does not say (the table and HTML do)."""
    seen: dict[tuple[str, str], str] = {}
    for name, run in zip(names, runs, strict=True):
        key = (run.created, repr(run.environment))
        if key in seen:
            raise ConfigError(f"{name}: the same run as {seen[key]} (given before it); give each run once")
        seen[key] = name
        if not run.complete:
            click.echo(f"warning: {name}: an incomplete run (interrupted, or killed before its last save): the "
                       "report holds only the cases it measured", err=True)
        if to_csv and run.protocol.timer == "none":
            click.echo(f"warning: {name}: a dry run, nothing measured: the CSV has no rows for it (`solbench show` "
                       "prints its T_SOL, FLOPs and bytes)", err=True)


@click.command()
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("--html", "html_file", type=NamedPath(dir_okay=False), help="Self-contained HTML report here.")
@click.option("--csv", "csv_file", type=NamedPath(dir_okay=False), help="CSV here ('-': stdout).")
@click.option("--png", "png_file", type=NamedPath(dir_okay=False), help="Roofline PNG here.")
@click.option("--calibration", type=NamedPath(dir_okay=False),
              help="Measured ceilings (solbench calibrate JSON); default: the one saved for the runs' GPU "
                   "(none for runs of several GPU models).")
@click.option("--gate-against", metavar="BASE", help="Add the gate verdicts of the (single) run against BASE.")
@click.option("--compare-to", metavar="BASE", help="Add a comparison of the (single) run with BASE.")
@click.option("--allow-cross-hardware", is_flag=True,
              help="--gate-against: gate runs whose fingerprints differ (as solbench gate).")
@run_sd_option
@click.option("--title", default="solbench report", show_default=True)
@click.option("--fast-p", "fast_ps", type=click.FloatRange(min=0), multiple=True, metavar="P",
              help="HTML suite summary: report fast_P (repeatable; default 0 and 1).")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
def report(runs: Sequence[str], html_file: str | None, csv_file: str | None, png_file: str | None,
           calibration: str | None, gate_against: str | None, compare_to: str | None, allow_cross_hardware: bool,
           run_sd: str | None, title: str, fast_ps: tuple[float, ...], results_dir: str) -> None:
    """Roofline PNG, self-contained HTML and CSV of saved runs (files, saved names; default: latest).

    Without --html, --csv or --png the CSV goes to stdout. --html and --png need matplotlib
    (pip install 'solbench[plot]'). Everything is checked and built before any file is written:
    a report that fails writes nothing.
    """
    from solbench.cli.common import (
        check_fast_ps,
        distinct_outputs,
        read_run,
        refuse_empty_run_names,
        writable_output,
    )
    from solbench.report.csv import run_csv

    refuse_empty_run_names(**{"--gate-against": gate_against, "--compare-to": compare_to})

    for path, what in ((html_file, "the HTML report"), (csv_file, "the CSV"), (png_file, "the roofline PNG")):
        writable_output(path, what, stdout=True)
    distinct_outputs([("--html", html_file), ("--csv", csv_file), ("--png", png_file)])
    rdir = Path(results_dir)
    if (gate_against or compare_to) and not html_file:
        raise ConfigError("--gate-against and --compare-to add sections to the HTML report; add --html FILE")
    if (gate_against or compare_to) and len(runs) > 1:
        raise ConfigError("--gate-against and --compare-to take a single RUN")
    if allow_cross_hardware and not gate_against:
        raise ConfigError("--allow-cross-hardware sets the gate of --gate-against BASE; add it")
    if run_sd is not None and not (gate_against or compare_to):
        raise ConfigError("--run-sd prices the gate or comparison between runs; add --gate-against or --compare-to")
    # options that act only on a figure or the HTML report would otherwise be silently ignored
    if calibration is not None and not (png_file or html_file):
        raise ConfigError("--calibration draws measured ceilings on the roofline; add --png FILE or --html FILE")
    given = click.get_current_context().get_parameter_source("title") is not click.core.ParameterSource.DEFAULT
    idle = [flag for flag, on in (("--title", given), ("--fast-p", bool(fast_ps))) if on]
    if idle and not html_file:
        raise ConfigError(f"{', '.join(idle)}: used only by the HTML report; add --html FILE")
    check_fast_ps(fast_ps)
    if png_file or html_file:
        _need_matplotlib("--html" if html_file else "--png")
    loaded = [read_run(n, rdir) for n in runs] if runs else [read_run(None, rdir)]
    check_fast_ps(fast_ps, loaded)
    _report_warnings(list(runs) or ["the latest run"], loaded, to_csv=bool(csv_file or not (html_file or png_file)))
    gated = compared = None
    current = runs[0] if runs else "latest"
    if gate_against:  # the verdicts `solbench gate --baseline BASE --current RUN` gives, the same way
        from solbench.cli.compare import saved_gate, warn_incomplete, warn_same_run

        base = read_run(gate_against, rdir, "gate baseline")
        warn_incomplete([gate_against], [base], "--gate-against ")  # and the warnings it gives
        warn_same_run([gate_against], [base], [current], loaded[:1])
        gated = saved_gate([base], loaded[:1], [current], rdir,
                           allow_cross_hardware=allow_cross_hardware, run_sd=run_sd)
    if compare_to:  # as `solbench compare BASE RUN`
        from solbench.cli.compare import nothing_compared, saved_comparison, warn_incomplete, warn_same_run

        other = read_run(compare_to, rdir, "compared with")
        warn_incomplete([compare_to], [other], "--compare-to ")
        warn_same_run([compare_to], [other], [current], loaded[:1])
        compared = saved_comparison([other], loaded[:1], rdir, label_a=compare_to, label_b=current, run_sd=run_sd)
        if not compared.rows:  # as compare refuses it (exit 2): a section of nothing compared must not pass
            raise ConfigError(f"--compare-to {compare_to}: {nothing_compared(compared)}")
    if not (html_file or csv_file or png_file):
        csv_file = "-"
    files: dict[str, str | bytes] = {}
    if csv_file:
        files[csv_file] = run_csv(loaded)
    if png_file or html_file:
        roof, html = _figures(loaded, rdir, html_file is not None, calibration, gated, compared, title,
                              fast_ps or DEFAULT_PS)
        if png_file:
            files[png_file] = roof
        if html_file and html is not None:
            files[html_file] = html
    for path, content in files.items():
        if path == "-":
            click.echo(content, nl=False)
        else:
            store.write_text(Path(path), content)
    for path in files:
        if path != "-":
            click.echo(f"wrote {path}", err=True)


def _need_matplotlib(option: str) -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(f"{option} draws figures with matplotlib, which is not installed: "
                          "pip install 'solbench[plot]' (nothing was written)")


def _figures(runs: list[RunResult], rdir: Path, html: bool, calibration: str | None, gate_result: GateResult | None,
             comparison: Comparison | None, title: str,
             fast_ps: Sequence[float] = DEFAULT_PS) -> tuple[bytes, str | None]:
    """The roofline PNG, and the HTML report when asked for (with the gate and comparison sections)."""
    from solbench.report.html import ReportImages, report_html
    from solbench.report.roofline import histograms_png, impl_names, roofline_png

    roof = roofline_png(runs, _calibration(calibration, runs, rdir))
    if not html:
        return roof, None
    names = impl_names(runs)
    drawn = {(k, w): histograms_png([c for c in run.cases if c.workload == w], names=names)
             for k, run in enumerate(runs) for w in dict.fromkeys(c.workload for c in run.cases)}
    hists = {key: png for key, png in drawn.items() if png is not None}  # None: nothing sampled
    return roof, report_html(runs, ReportImages(roof, hists), labels=[_label(r) for r in runs],
                             comparison=comparison, gate=gate_result, title=title, fast_ps=fast_ps)


def _label(run: RunResult) -> str:
    files = ", ".join(Path(f).name for f in run.workload_files)
    return f"{files} · {run.environment.device_name} · {run.created}"


# ------------------------------------------------------------------ tune


@click.command()
@click.argument("files", nargs=-1, required=True, type=NamedPath(dir_okay=False))
@click.option("-w", "--workload", "workloads", multiple=True, help="Only this workload (repeatable).")
@click.option("-i", "--impl", "impls", multiple=True, help="Only this implementation (repeatable).")
@click.option("--max-configs", type=click.IntRange(min=1), help="Configurations measured per case at most.")
@click.option("--patience", type=click.IntRange(min=1),
              help="Stop a case after this many configurations in a row without a new best.")
@click.option("--margin", type=click.FloatRange(min=0), default=0.02, show_default=True,
              help="Abandon a configuration once its median's 95% CI lies above best x (1 + margin).")
@click.option("--budget", type=click.FloatRange(min=0.01), default=0.5, show_default=True,
              help="Seconds of sampling per configuration.")
@click.option("--target", type=click.FloatRange(min=0.0001), default=0.01, show_default=True)
@click.option("--min-samples", type=click.IntRange(min=3), default=10, show_default=True)
@click.option("--max-samples", type=click.IntRange(min=3), default=1000, show_default=True)
@click.option("--confirm-rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Rounds of the confirmation (each: hand-picked and winner measured again, in turn) before "
                   "its first verdict; the rounds, not the samples, are what it decides on.")
@click.option("--confirm-max-rounds", type=click.IntRange(min=2), default=8, show_default=True,
              help="While the confirmation is INCONCLUSIVE, add a round at a time up to this many.")
@click.option("--min-gain", type=click.FloatRange(min=0, min_open=True), default=0.01, show_default=True,
              help="A winner whose gain's CI (over the confirmation's rounds) lies within +-this of 1 is SAME: "
                   "hand-picked stays.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              help="Seconds per configuration measured (compilation included) before its worker is killed and "
                   "its result is 'timeout'.")
@click.option("--launch", type=click.Choice(["auto", "stream", "graph"]), default="auto", show_default=True,
              help="As `run --launch`: each call launched on the stream or replayed from a CUDA graph; auto: "
                   "graph on a GPU with CUPTI, as `run` times it, so a configuration wins under the launch "
                   "conditions of the run that applies it.")
@click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N")
@click.option("-o", "--output", type=NamedPath(dir_okay=False),
              help="Every configuration's result (JSON; replaced if it exists); default "
                   "results/<spec>/<time>-<random>_tune.json, a new name each time.")
@click.option("--tuned-file", type=NamedPath(dir_okay=False),
              help="Tuned configurations for `run --tuned` (merged); default results/<spec>/tuned.json.")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="One line per configuration as it is measured.")
def tune(files: Sequence[str], workloads: Sequence[str], impls: Sequence[str], max_configs: int | None,
         patience: int | None, margin: float, budget: float, target: float, min_samples: int, max_samples: int,
         confirm_rounds: int, confirm_max_rounds: int, min_gain: float, timeout_s: float, launch: str,
         device: str, output: str | None,
         tuned_file: str | None, results_dir: str, verbose: bool) -> None:
    """Measure every valid configuration of each implementation's tune: space, per case.

    Exit 4 where an implementation fails as declared, in the winner measured again, or in any
    configuration tried (wrong, crashed, hung, out of memory, tampered): tuning goes on without a
    failed configuration and writes what it found, but the command does not pass it."""
    from solbench.cli.common import interrupted_code, writable_output
    from solbench.errors import RunInterrupted
    from solbench.tools import tune as tuning

    writable_output(output, "the tuning log", replaces=store.TUNING_LOG)
    writable_output(tuned_file, "tuned configurations", runs_only=True)
    if output and tuned_file and Path(output).absolute() == Path(tuned_file).absolute():  # before measuring
        raise ConfigError(f"-o {output}: the tuned-configuration file; give the tuning log another name")
    if tuned_file and Path(tuned_file).is_file():
        tuning.load_tuned(tuned_file)  # one that is not a tuned file: refused now, before measuring
    options = tuning.TuneOptions(workloads=tuple(workloads), impls=tuple(impls), max_configs=max_configs,
                                 patience=patience, margin=margin, confirm_rounds=confirm_rounds,
                                 confirm_max_rounds=confirm_max_rounds, min_gain=min_gain,
                                 target_rel_ci=target, min_samples=min_samples, max_samples=max_samples,
                                 budget_s=budget, timeout_s=timeout_s, launch=launch)
    err = err_console()

    def verbose_lines(event: str, data: dict[str, Any]) -> None:
        if event == "trial":
            t = data["trial"]
            when = format_seconds(t.median) if t.median else t.status.upper()
            err.print(f"{data['case']} {data['impl']} {data['label']}: {when} ({t.stop_reason or t.message})",
                      markup=False)

    paths: list[Path] = []  # the log and the tuned file, named at the first save

    def save(result: Any) -> None:
        """The log and the tuned file as they stand (atomically): as each case is tuned, and at the end."""
        if not paths:
            spec_dir = Path(results_dir) / store.slug(result.environment.spec_id)
            stamp = result.created.replace(":", "").replace("-", "")[:15]
            paths.append(Path(output) if output else spec_dir / f"{stamp}-{secrets.token_hex(2)}_tune.json")
            paths.append(Path(tuned_file) if tuned_file else spec_dir / "tuned.json")
            if paths[0].absolute() == paths[1].absolute():
                raise ConfigError(f"-o {output}: the tuned-configuration file; give the tuning log another name")
            replace = output is not None  # a new name is claimed, never taken over
        else:
            replace = True
        out_path, tuned_path = paths
        # the log first: a tuned file refused below (another device's, malformed) must not lose what was measured
        store.write_text(out_path, json.dumps(tuning.result_dict(result), indent=1) + "\n", replace=replace)
        # read as it is now: another tune may have merged into it while this one measured
        existing = tuning.load_tuned(tuned_path) if tuned_path.is_file() else None
        if existing is not None and existing.spec_id != result.environment.spec_id:
            raise ConfigError(f"{tuned_path}: tuned on {existing.spec_id}, this device is "
                              f"{result.environment.spec_id}; a file holds one device's configurations (give "
                              f"--tuned-file another name; what was tuned is in {out_path})")
        store.write_text(tuned_path, tuning.tuned_file(result, existing))

    try:  # -v: a line a configuration; else the run's progress over cases (a bar, or a line a case in a CI log)
        with ProgressBar(quiet=verbose) as bar:
            result = tuning.tune(files, options, device=device, progress=verbose_lines if verbose else bar,
                                 on_case=save)
    except RunInterrupted as stop:  # the cases tuned so far are written below, then the exit code says so
        result = stop.result  # type: ignore[assignment]
        if not result.cases:
            raise KeyboardInterrupt from None  # nothing tuned: nothing to write
    save(result)
    out_path, tuned_path = paths
    print_table(console(), _tune_table(result))
    click.echo(f"results: {out_path}", err=True)
    skipped = [c for c in result.cases if c.hand_picked.status == "skipped"]
    if skipped and len(skipped) == len(result.cases):  # nothing measured here: say why, not "use with"
        click.echo(f"nothing measured: every implementation was skipped ({skipped[0].hand_picked.message})",
                   err=True)
    # the constraints left no configuration to try (on its own a case may have none; everywhere, a typo?)
    excluded = [c for c in result.cases if not c.trials and c.filtered and c.hand_picked.status != "skipped"]
    if excluded:
        click.echo(f"nothing tried: the constraints exclude every configuration of {len(excluded)} case(s): "
                   + first_few([f"{c.case_id} {c.impl} ({c.filtered} excluded)" for c in excluded], 5, "; ")
                   + (" (every case: check the constraints)" if len(excluded) == len(result.cases) else ""),
                   err=True)
    found = len(tuning.faster_cases(result))
    click.echo(f"tuned configurations: {tuned_path} " + (
        f"({found} new FASTER than hand-picked; use with: solbench run ... --tuned {tuned_path})" if found else
        "(none new: no winner was FASTER than hand-picked)"), err=True)
    # why each failed is in the log (the message and the worker's last output): the lines name it with its first line
    where = f" (every failure's message and worker output: {out_path})"
    broken = [f"{c.case_id} {c.impl} ({why})" for c in result.cases if (why := _tune_failure(c))]
    if broken:  # wrong as declared, in every configuration tried, or (flaky) in the winner measured again
        click.echo("failed: " + first_few(broken, 5, "; ") + where, err=True)
    # configurations that failed beside others that did not: tuning went on without them, but the implementation
    # is wrong, crashes or hangs with those parameters, which the command must not pass (as run exits 4 for a
    # failed implementation); those that tampered have a line of their own
    failing = [f"{c.case_id} {c.impl}[{tuning.config_label(t.params)}]: {_failed_why(t)}" for c in result.cases
               for t in c.trials if t.status in FAILED_STATUSES and t.status != "reward_hack"]
    if failing:
        click.echo("configurations that failed: " + first_few(failing, 5, "; ") + where, err=True)
        click.echo("(tuning went on without them, but they fail the command, exit 4: fix the implementation for "
                   "those parameters, or leave them out of the tune: space with a constraint, never tried, e.g. "
                   "constraints: [\"n % chunk == 0\"])", err=True)
    # a winner timed under another launch than hand-picked (its call could not be captured in a graph, or
    # hand-picked's could not): the verdict stands, but what it compared is said
    for c in result.cases:
        if c.launched_apart:
            click.echo(f"not like for like: {c.case_id} {c.impl}: {c.launched_apart}; a replay leaves out the launch "
                       "overhead a call on the stream pays, so the gain is not the configuration's alone", err=True)
    # a configuration that tampered with its process: tuning went on without it, but the implementation
    # cheats under some parameters, which the command must not pass (as run exits 4 for a reward_hack)
    cheats = [f"{c.case_id} {c.impl}[{tuning.config_label(t.params)}]" for c in result.cases for t in c.trials
              if t.status == "reward_hack"]
    if cheats:
        click.echo("tampered: " + first_few(cheats, 5, "; ")
                   + " (reward_hack: left out of the tuning; the implementation cheats with those parameters)",
                   err=True)
    code = exitcodes.IMPL_FAILED if broken or cheats or failing else exitcodes.OK
    if excluded and len(excluded) == len(result.cases):  # nothing was tuned anywhere: what was asked was not done
        code = exitcodes.worst(code, exitcodes.USAGE)
    if not result.complete:
        click.echo(f"interrupted: the {len(result.cases)} case(s) tuned so far are saved", err=True)
        code = exitcodes.worst(code, interrupted_code())
    if code != exitcodes.OK:
        sys.exit(code)


def _tune_failure(c: Any) -> str:
    """What of a case's implementation failed its tuning, and why ("" where nothing did): the configuration
    as declared, either side of the confirmation, or every configuration tried (each on a line of its own)."""
    for what, t in (("as declared", c.hand_picked), ("as declared, measured again", c.confirm_hand_picked),
                    ("the winner measured again", c.confirm_winner)):
        if t is not None and t.status in FAILED_STATUSES:
            return f"{what}: {_failed_why(t)}"
    return "in every configuration tried" if c.trials and all(t.status in FAILED_STATUSES for t in c.trials) else ""


def _failed_why(t: Any) -> str:
    """A failed trial's status and the first line of its message (the rest, and its worker's output: the log)."""
    return f"{t.status.upper()}: {(t.message.splitlines() or [''])[0]}"


def _tune_table(result: Any) -> Table:
    t = Table(title=Text(f"tuning on {result.environment.device_name}"), title_justify="left")
    for col in ("case", "impl", "tried", "hand-picked", "winner", "tuned", "gain", "verdict"):
        t.add_column(col, justify="left" if col in ("case", "impl", "winner", "verdict") else "right")
    for c in result.cases:
        counts: dict[str, int] = {}
        for tr in c.trials:
            key = "beaten" if tr.stop_reason == "beaten" else tr.status
            counts[key] = counts.get(key, 0) + 1
        parts = [", ".join(f"{n} {k}" for k, n in counts.items())] if counts else []
        parts += [f"{c.filtered} excluded"] if c.filtered else []
        parts += [f"{c.untried} untried"] if c.untried else []
        tried = "; ".join(parts) or "-"
        hand = c.confirm_hand_picked or c.hand_picked
        winner = ",".join(f"{k}={v}" for k, v in (c.winner or {}).items()) or "-"
        win = c.confirm_winner
        tuned = "-" if win is None else format_seconds(win.median) if win.median else win.status.upper()
        gain = f"{c.gain:.3f}×" if c.gain else "-"
        if c.confirm_ratio_ci:
            gain += f" [{1 / c.confirm_ratio_ci[1]:.3f}, {1 / c.confirm_ratio_ci[0]:.3f}]"
        before = format_seconds(hand.median) if hand.median else hand.status.upper()
        t.add_row(Text(c.case_id), Text(c.impl), tried, before, Text(winner), tuned, gain, c.verdict or "-")
    return t


# ------------------------------------------------------------------ profile


@click.command()
@click.argument("file", type=NamedPath(dir_okay=False))
@click.option("-w", "--workload", required=True, help="The workload to profile (one).")
@click.option("-i", "--impl", required=True, help="The implementation to profile (one).")
@click.option("--case", "case_id", metavar="ID", help="Case id as `run` prints it (default: the first case).")
@click.option("--ncu", type=NamedPath(dir_okay=False), help="Path to ncu (default: from PATH).")
@click.option("--params", default="{}", help="Extra keyword arguments for fn as JSON, e.g. a tuned config.")
@click.option("--out-dir", type=NamedPath(file_okay=False), default="results/profiles", show_default=True,
              help="Where the .ncu-rep, its CSV and the JSON summary go.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary.")
def profile(file: str, workload: str, impl: str, case_id: str | None, ncu: str | None, params: str,
            out_dir: str, as_json: bool) -> None:
    """Profile one case of one implementation under Nsight Compute, beside the analytic model."""
    from solbench.tools.profile import ProfileRequest, find_ncu, profile_dict
    from solbench.tools.profile import profile as run_profile

    try:
        extra = json.loads(params)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--params: not JSON: {exc.msg}") from None
    if not isinstance(extra, dict):
        raise ConfigError("--params: expected a JSON object, e.g. '{\"block\": 256}'")
    find_ncu(ncu)  # before anything else: without ncu, one line and exit 2
    store.check_writable(Path(out_dir))  # before profiling: a folder under a file was a traceback after it
    result = run_profile(ProfileRequest(file, workload, impl, case_id, ncu, Path(out_dir), extra))
    rep = Path(result.ncu_rep)
    store.write_text(rep.with_suffix(".csv"), result.csv_text)  # atomically, as every other record
    data = profile_dict(result)
    store.write_text(rep.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    if as_json:
        click.echo(json.dumps(data, indent=1))
        return
    out = console()
    print_table(out, _profile_table(result))
    out.print(f"diagnosis: {result.summary.diagnosis}", markup=False, soft_wrap=True)
    out.print(f"report: {rep} ({result.ncu_version}; range: {result.range_mode}); summary: "
              f"{rep.with_suffix('.json')}", style="dim", markup=False, soft_wrap=True)


def _pct(x: float | None) -> str:
    return f"{x:.0f}%" if x is not None else "-"


def _ratio(x: float | None) -> str:
    return f"{x:.2f}×" if x is not None else "-"


def _sum(values: Sequence[float | None]) -> float | None:
    """The total of the counters ncu could read; None (shown "—", not "0 B") where it read none."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _profile_table(result: Any) -> Table:
    s = result.summary
    t = Table(title=Text(f"{result.case_id} {result.impl} on {result.device_name} (ncu, one timed call)"),
              title_justify="left")
    for col in ("kernel", "time", "DRAM read", "DRAM write", "SM %", "mem %", "DRAM %", "occupancy",
                "tensor FLOP", "FP32 FLOP"):
        t.add_column(col, justify="left" if col == "kernel" else "right", overflow="fold")
    for k in s.kernels:
        t.add_row(Text(k.name[:70]), format_seconds(k.duration), format_bytes(k.dram_read), format_bytes(k.dram_write),
                  _pct(k.sm_pct), _pct(k.mem_pct), _pct(k.dram_pct), _pct(k.occupancy_pct),
                  format_flops(k.tensor_flops), format_flops(k.fp32_flops))
    t.add_section()
    read, written = (_sum([getattr(k, f) for k in s.kernels]) for f in ("dram_read", "dram_write"))
    t.add_row("total", format_seconds(s.duration), format_bytes(read), format_bytes(written),
              _pct(s.sm_pct), _pct(s.mem_pct), "", "", format_flops(s.measured_tensor_flops),
              format_flops(s.measured_fp32_flops))
    t.add_row("analytic model", format_seconds(result.t_sol) + " (T_SOL)", format_bytes(s.analytic_bytes) + " fused",
              "", "", "", "", "", format_flops(s.analytic_tensor_flops), format_flops(s.analytic_vector_flops))
    t.add_row("measured / analytic", "", _ratio(s.bytes_ratio) + " (bytes)", "", "", "", "", "",
              _ratio(s.tensor_ratio), _ratio(s.fp32_ratio))
    return t


TOOLS = (report, tune, profile)
