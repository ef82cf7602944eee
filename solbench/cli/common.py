"""What every command shares: consoles, one-line errors, the progress bar, saving and printing a run."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from solbench import exitcodes
from solbench.analysis.suite_summary import DEFAULT_PS
from solbench.errors import SolbenchError
from solbench.report.console import run_header, run_notes, run_tables
from solbench.report.suites import summary_json, summary_note, summary_table
from solbench.results import store
from solbench.results.model import FAILED_STATUSES, RunResult

F = TypeVar("F", bound=Callable[..., Any])


# Help of options several commands share, so that one option reads the same everywhere; a command
# gives its own help where its meaning differs. Filled in by solbench.cli.main when a command loads.
OPTION_HELP = {
    "--results-dir": "Folder of solbench's records: where runs are saved and saved names (--save NAME) are looked "
                     "up, and where tuning logs, tuned.json, calibrations and spreads are kept.",
    "--min-samples": "Take at least this many timed samples per implementation and case.",
    "--max-samples": "Stop after this many timed samples, converged or not.",
    "--input-sets": "Independently drawn input sets the timed calls rotate through.",
    "--seed": "Seed of the random inputs (every worker draws its own from it).",
    "--target": "Stop when the median's 95% CI half-width is within this fraction of the median.",
    "--device": "Where to measure: auto (a CUDA GPU if torch sees one, else the CPU), cpu, cuda or cuda:N.",
    "--timer": "cold: CUDA events, L2 flushed; graph: CUDA-graph replay (warm L2); cupti: the cold protocol "
               "timed by CUPTI. GPU only: refused on the CPU, which uses the wall clock.",
    "--flush": "cold/cupti timer: zero 2 x L2 and read it back (clean) or only zero it (write, as nvbench). GPU only.",
    "--timeout": "Seconds per implementation and case (set-up and compilation included) before its worker is "
                 "killed and the result is 'timeout'.",
    "--alpha": "False-discovery rate across cases (Benjamini-Hochberg).",
    "--json": "Print the result as JSON on stdout (nothing else).",
    "--title": "Title of the HTML report.",
    "--workload": "Only this workload (repeatable).",
    "--impl": "Only this implementation (repeatable).",
    "--markdown": "Print Markdown on stdout instead of the table (PR comments, $GITHUB_STEP_SUMMARY).",
    "--markdown-file": "Also write the Markdown to FILE.",
}


class _Alpha(click.FloatRange):
    """A false-regression rate: a number strictly between 0 and 1. click's range lets NaN through
    (every comparison with it is false), and the refusal then came later without the option's name."""

    def __init__(self) -> None:
        super().__init__(0, 1, min_open=True, max_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if math.isnan(rv):
            self.fail(f"{value!r} is not a number between 0 and 1 (a false-regression rate, e.g. 0.01)", param, ctx)
        return rv


ALPHA = _Alpha()


class NamedPath(click.Path):
    """``click.Path`` that refuses an empty or blank word: click read ``--results-dir "$DIR"`` with the
    variable unset as the current folder, and ``ab --baseline-tree ""`` compared a tree with itself."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r} names no file or folder (an unset variable?)", param, ctx)
        return super().convert(value, param, ctx)


def refuse_markdown_path(args: list[str], *, any_word: bool) -> None:
    """``--markdown`` is a flag in every command (Markdown on stdout); a file is ``--markdown-file``.
    The old ``gate``/``ab`` form ``--markdown FILE`` is refused with the new spelling, never read as
    an input: for ``gate`` any word after it, for ``ab`` (whose FILES are workloads) a ``.md`` file."""
    for flag, word in itertools.pairwise(args):
        if flag == "--markdown" and not word.startswith("-") and (any_word or word.endswith((".md", ".markdown"))):
            raise click.UsageError(f"--markdown prints Markdown on stdout; write it to a file with "
                                   f"--markdown-file {word}")


def refuse_junit(junit: str | None, message: str) -> None:
    """Where a command asked for the gate's JUnit stops without a verdict (bad input or usage, runs
    refused, interrupted, a crash), the file says so in one testcase in error: never what an earlier
    job left there. Where the file cannot be written after all, the command's own error is what is
    shown; nothing more is tried."""
    if not junit:
        return
    from solbench.report.junit import refused_junit

    with contextlib.suppress(OSError, SolbenchError):  # store.write_text's ResultsWriteError: a full disk
        store.write_text(Path(junit), refused_junit(message))


_JUNIT = "solbench.junit"  # where junit_refusals keeps the JUnit path, in the command's click context


def junit_refusals(junit: str | None) -> None:
    """From here on, an error that stops the command (bad input, refused runs, a usage error found in
    its body, Ctrl-C outside a run's own handling, a crash) leaves ``junit`` saying no verdict came
    (:func:`handle_errors`). Called once the output paths are checked: before that, a refusal writes
    nothing (the JUnit path may be the very thing refused, or name another output's file), and a
    command line click cannot parse writes nothing either."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and junit:
        ctx.meta[_JUNIT] = junit


def not_over_a_run(path: str | None, what: str, *, runs_only: bool = False, replaces: str | None = None) -> None:
    """ConfigError (exit 2) where ``path`` holds what a user keeps: a saved run, tuned configurations,
    a workload or source file. A report, JUnit or Markdown file written there would destroy it
    (``report --csv run.json`` reads the latest run and wrote over run.json). Checked before any work;
    any other existing file is replaced, as a report's output is. ``runs_only``: only a saved run
    (``tune --tuned-file`` merges into the tuned file it names); ``replaces``: the record the command
    writes there itself, replaced (``tune -o``: a tuning log)."""
    if not path or path == "-" or not Path(path).is_file():
        return
    from solbench.errors import ConfigError

    kept = _kept(Path(path))
    if kept == _SAVED_RUN:
        raise ConfigError(f"{path}: holds a saved run; not writing {what} over it (name another file; "
                          "to report on this run, give it as an argument)")
    if kept is not None and not runs_only and kept != replaces:
        raise ConfigError(f"{path}: holds {kept}; not writing {what} over it (name another file)")


def run_output(path: str | None) -> None:
    """ConfigError (exit 2) where ``run -o`` names a file a user keeps that is not a run: a workload or
    source file, tuned configurations, a calibration. ``--force`` replaces an earlier run there, never
    those (``-o workloads/attn.yaml --force`` wrote the result over the workload)."""
    if not path or path == "-" or not Path(path).is_file():
        return
    kept = _kept(Path(path))
    if kept is not None and kept != _SAVED_RUN:
        from solbench.errors import ConfigError

        raise ConfigError(f"-o {path}: holds {kept}; a run is never written over it, --force or not (name "
                          "another file)")


def writable_output(path: str | None, what: str, *, runs_only: bool = False, stdout: bool = False,
                    replaces: str | None = None) -> None:
    """Check, before any work, a file a command will write (a report, JUnit, Markdown, a tuning log):
    not over a file the user keeps (:func:`not_over_a_run`), and writable. ConfigError (exit 2, one
    line) otherwise. Nothing is created: the write itself makes missing folders. ``-``: stdout where
    the command writes there (``stdout``), else refused; an empty path (an unset variable) is refused."""
    from solbench.errors import ConfigError

    if path is None:
        return
    if not path:
        raise ConfigError(f"an empty path for {what} (an unset variable?): name a file")
    if path == "-":
        if stdout:
            return
        raise ConfigError(f"-: {what} is written as a file, not to stdout: name one")
    not_over_a_run(path, what, runs_only=runs_only, replaces=replaces)

    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{path}: a folder, not a file (for {what})")
    why = store.not_a_file(target)  # /dev/stdout, a device, a pipe: the atomic write would rename a file over it
    if why:
        raise ConfigError(f"{path}: {why}; {what} is written as a file: name one")
    if target.exists() and not os.access(target, os.W_OK):
        raise ConfigError(f"{path}: cannot write {what} there: permission denied")
    _creatable_under(path, target.absolute().parent, what)


@contextlib.contextmanager
def stdout_for_json_only(on: bool) -> Any:
    """With ``on`` (``--json``): within the block, whatever is printed to standard output, by Python
    (``print``) or by native code writing to file descriptor 1, goes to standard error instead, so that
    what the command prints to stdout afterwards is its JSON alone. Implementations run in this process
    with ``--in-process``, and a re-measure of undecided cases may call them too."""
    if not on:
        yield
        return
    sys.stdout.flush()
    try:
        kept = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2 to move: Python's own prints are still kept off stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        _flush_c_stdio()  # what native code buffered goes to stderr too, not into the JSON later
        os.dup2(kept, 1)
        os.close(kept)


def _flush_c_stdio() -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def distinct_outputs(outputs: Sequence[tuple[str, str | None]]) -> None:
    """ConfigError (exit 2), before any work, where two outputs (option, path) name one file: the later
    write would replace the earlier. None is passed over; ``-`` (stdout, where a command writes there)
    is one destination too: ``report --csv - --png -`` printed the PNG alone, the CSV silently lost."""
    from solbench.errors import ConfigError

    seen: dict[Path | str, str] = {}
    for option, path in outputs:
        if not path:
            continue
        key = path if path == "-" else Path(path).resolve()
        if key in seen:
            raise ConfigError(f"{option} {path}: also written by {seen[key]}; give each its own file")
        seen[key] = option


def one_stdout_view(as_json: bool, as_markdown: bool, *, markdown_file: bool = False) -> None:
    """ConfigError (exit 2), before any work, where both ``--json`` and ``--markdown`` are given: each
    prints the whole result on stdout, and the Markdown was silently left out. ``markdown_file``: the
    command has ``--markdown-file``, which writes the Markdown beside the JSON."""
    from solbench.errors import ConfigError

    if as_json and as_markdown:
        instead = "; --markdown-file FILE writes the Markdown beside the JSON" if markdown_file else ""
        raise ConfigError(f"--json and --markdown: each prints the whole result on stdout; give one{instead}")


def writable_folder(path: str, what: str, *, option: str = "") -> None:
    """Check, before any work, a folder a command will write files into (``import --out``): a folder
    or nothing yet, under a writable folder. ConfigError (exit 2, one line, naming ``option`` and
    ``path``) otherwise; nothing is created."""
    _creatable_under(f"{option} {path}".strip(), Path(path).absolute(), what)


def _creatable_under(path: str, folder: Path, what: str) -> None:
    """ConfigError unless the nearest existing folder at or above ``folder`` is a writable folder."""
    from solbench.errors import ConfigError

    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{path}: cannot write {what} there: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{path}: cannot write {what} there: {folder} is not writable")


_SAVED_RUN = "a saved run"


def _kept(path: Path) -> str | None:
    """What a file holds that a user keeps (a saved run, whatever its name; tuned configurations, a
    calibration or spread record, a gate, comparison or spread verdict a command printed as JSON, a
    workload or source file), or None. The file is read once; a ``.json.gz`` is read as its contents
    (results kept in a repository are gzipped)."""
    from solbench.errors import ResultsFormatError

    try:
        data = store.read_json(path)
    except ResultsFormatError:
        data = None
    if store.is_run_data(data):
        return _SAVED_RUN
    if path.suffix in (".yaml", ".yml", ".py", ".cu"):
        return "a workload or source file"
    if not path.name.endswith((".json", ".json.gz")):
        return None
    if data is None:  # not JSON that parses
        return _tuned_text(path)
    return store.other_record(data)


def _tuned_text(path: Path) -> str | None:
    """A tuned file that does not parse is still the user's (the marker is in its first lines)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return "tuned configurations" if '"solbench-tuned/' in f.read(4096) else None
    except OSError:
        return None


def pipe_closed() -> NoReturn:
    """The reader of standard output closed it (``solbench show run.json | head``): exit PIPE_CLOSED, as a
    shell reports a process SIGPIPE ended, never 1 (rich's own choice, which a CI reads as a regression).
    Standard output points at /dev/null first, so flushing it at exit cannot fail again."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(exitcodes.PIPE_CLOSED)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        pipe_closed()


def console(quiet: bool = False) -> Console:
    # Piped output (CI logs, files) gets a wide table rather than rich's 80-column default.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
    return _Console(stderr=False, quiet=quiet, highlight=False, emoji=False, width=width)


def err_console() -> Console:
    return _Console(stderr=True, highlight=False, emoji=False)


def print_table(out: Console, table: Table) -> None:
    """Print ``table`` with no cell cut short. Left to itself, rich fits a table to the terminal by
    narrowing columns down to nothing: numbers ellipsised ("0.…", "20…"), names cut ("cubla…" for
    cublas_addmm and cublaslt alike), whole columns (a gate's case and verdict) gone. Here no column
    is narrower than its longest word (a number and its unit, a name, a verdict; the whole cell where
    the column does not wrap): the widest columns wrap at spaces first, and where the terminal is
    narrower still the table is printed wider than it (the terminal wraps its lines; a log keeps them)."""
    from rich.measure import Measurement

    options = out.options.update_width(1 << 16)
    spans = []  # (narrowest, widest) of each column's cells, header included
    for column in table.columns:
        sizes = [Measurement.get(out, options, cell) for cell in (column.header, *column.cells)]
        widest = max(m.maximum for m in sizes)
        spans.append((widest if column.no_wrap else max(m.minimum for m in sizes), widest))
    _, right, _, left = table.padding
    edges = (left + right) * len(spans) + (len(spans) - 1 + 2 * table.show_edge if table.box else 0)
    widths = [widest for _, widest in spans]
    if not spans or sum(widths) + edges <= out.width:  # it fits as it is
        out.print(table)
        return
    while sum(widths) + edges > out.width:
        narrowable = [i for i, w in enumerate(widths) if w > spans[i][0]]
        if not narrowable:
            break
        widths[max(narrowable, key=widths.__getitem__)] -= 1
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width
    size = out.size
    out.size = (max(size.width, sum(widths) + edges), size.height)
    try:
        out.print(table)
    finally:
        out.size = size


_stopped_by: list[int] = []  # the exit code of the signal that stopped this command, once one has


def interrupted_code() -> int:
    """130 after Ctrl-C, 143 after SIGTERM."""
    return _stopped_by[-1] if _stopped_by else exitcodes.INTERRUPTED


def _on_sigterm(signum: int, frame: Any) -> None:
    _stopped_by.append(exitcodes.TERMINATED)
    raise KeyboardInterrupt


def handle_errors(fn: F) -> F:
    """Show a SolbenchError as one line on stderr and exit with its code; no traceback.

    SIGTERM is handled as Ctrl-C (a run saves what it measured, marked incomplete); either one
    outside a run's own handling (start-up, say) is one line and exit 130 (143 for SIGTERM).
    """
    import functools
    import signal
    import threading

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
        _stopped_by.clear()
        try:
            return fn(*args, **kwargs)
        except SolbenchError as exc:
            refuse_junit(_junit_asked(), str(exc))
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except BrokenPipeError:  # click.echo to a closed standard output
            pipe_closed()
        except KeyboardInterrupt:
            refuse_junit(_junit_asked(), "interrupted: no verdict")
            click.echo("interrupted", err=True)
            sys.exit(interrupted_code())
        except click.exceptions.ClickException as exc:  # click's own usage errors (exit 2)
            refuse_junit(_junit_asked(), exc.format_message())
            raise
        except (click.exceptions.Abort, click.exceptions.Exit):
            raise  # --help, and the like
        except Exception as exc:  # a bug in solbench, not in the code under test: never exit 1 (a regression)
            # a full disk (standard output or a file: the machine's state), or a path the user gave whose name
            # is too long (bad input, wherever it is first looked at): one line, exit 2, not a bug
            full = _no_space(exc)
            why = full or _name_too_long(exc)
            if why is not None:
                refuse_junit(_junit_asked(), why)
                click.echo(f"error: {why}", err=True)
                if full is not None:
                    with contextlib.suppress(OSError):  # so that flushing it at exit cannot fail again
                        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                sys.exit(exitcodes.USAGE)
            import traceback

            traceback.print_exc()
            refuse_junit(_junit_asked(), f"solbench failed unexpectedly (exit {exitcodes.INTERNAL}): no verdict")
            click.echo(f"error: solbench failed unexpectedly (exit {exitcodes.INTERNAL}); the traceback above "
                       "says where", err=True)
            sys.exit(exitcodes.INTERNAL)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    return wrapper  # type: ignore[return-value]


def _no_space(exc: BaseException) -> str | None:
    """One line for an OSError of a full disk or quota (``show > /dev/full``), else None."""
    import errno

    if not isinstance(exc, OSError) or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    where = f" {exc.filename}" if exc.filename else " to standard output"
    return f"cannot write{where}: {exc.strerror}"


def _name_too_long(exc: BaseException) -> str | None:
    """One line for an OSError "file name too long" (a path given on the command line with a name longer
    than the file system allows, which ``Path.is_file`` and the like raise rather than answer), else None."""
    import errno

    if not isinstance(exc, OSError) or exc.errno != errno.ENAMETOOLONG:
        return None
    from solbench.config.yamlio import cut, one_line

    name = os.fsdecode(exc.filename) if exc.filename is not None else str(exc)
    return one_line(f"{cut(name, 300)}: file name too long (a name in the path is longer than the file system "
                    "allows); name a shorter path", 600)


def _junit_asked() -> str | None:
    """The JUnit file the running command said it writes (:func:`junit_refusals`), if any."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_JUNIT)


def refuse_empty_run_names(**options: str | None) -> None:
    """ConfigError (exit 2) for an option that names a run given as an empty or blank word (an unset CI
    variable, ``--gate-against "$BASE"``): the option would read as not given, and the command would
    skip what it asks for (the gate) and exit as if it had passed. ``options``: the option as spelled
    (``"--gate-against"``) mapped to its value."""
    for option, value in options.items():
        if value is not None and not value.strip():
            from solbench.errors import ConfigError

            raise ConfigError(f"{option}: {value!r} names no run (an unset variable?); give a result file or a "
                              "saved name")


def read_run(name_or_path: str | None, results_dir: Path, role: str = "run") -> RunResult:
    """A saved run (a file, a saved name, or with None the latest under ``results_dir``); says on
    stderr which file it read (``read baseline: results/cpu/..._nightly.json``), so that stdout
    stays the table, JSON or Markdown."""
    skipped: list[Path] = []
    if name_or_path is not None and not name_or_path.strip():  # an unset CI variable: never the latest run
        from solbench.errors import ConfigError

        raise ConfigError(f"{role}: {name_or_path!r} names no run; give a result file or a saved name")
    if name_or_path:
        path = store.find(name_or_path, results_dir)
    else:
        path, skipped = store.latest_with_skipped(results_dir)
    result = store.load(path)
    for bad in skipped:
        click.echo(f"warning: passed over {bad}, newer but not readable JSON (damaged?); not the latest run", err=True)
    click.echo(f"read {role}: {path}", err=True)
    return result


def check_fast_ps(fast_ps: Sequence[float], runs: Sequence[RunResult] = ()) -> None:
    """ConfigError (exit 2) for a ``--fast-p`` that is not a finite number (click's range lets NaN and
    inf through), or given for ``runs`` that hold no suite problem: no summary would use it."""
    from solbench.errors import ConfigError

    for p in fast_ps:
        if not math.isfinite(p):
            raise ConfigError(f"--fast-p {p}: p must be a finite number (a speedup, e.g. 1 or 2)")
    if fast_ps and runs and not any(c.suite for run in runs for c in run.cases):
        raise ConfigError("--fast-p: the run holds no KernelBench or SOL-ExecBench problem, so no suite summary "
                          "(fast_p) to report")


def failures(result: RunResult) -> list[str]:
    """``case/impl: status`` for every implementation that failed, cheated or was wrong."""
    return [f"{c.case_id}/{r.name}: {r.status}" for c in result.cases for r in c.impls
            if r.status in FAILED_STATUSES]


class Saver:
    """Writes the run as it is measured, to the places chosen (and checked writable) before measuring:
    ``-o FILE``, and a fresh ``results/<spec>/<time>-<random>_NAME.json`` with ``--save NAME`` (both when both
    are given); without either, a fresh file under the results folder.

    While the run is in progress each file holds the run's record without its cases (rewritten only
    when that record changes: a note, the protocol) and its journal gets every case measured or
    re-scored since the last save (:func:`solbench.results.store.append_cases`): a save costs what
    changed, not the whole run. The final save writes the whole run and removes the journal.

    A write that fails (disk full, folder removed) does not stop the run: what was written stays,
    the error is kept and reported at the end, and the exit code says so.

    ``-o FILE --force`` over an existing file keeps that file as it was until the final save: the
    run in progress is saved beside it (``FILE.partial.json``, removed by the final save), so a run
    interrupted or killed part way never leaves a complete earlier result replaced by a partial one.
    """

    def __init__(self, output: Path | None, results_dir: Path, name: str | None, *, force: bool) -> None:
        self._output, self._dir, self._name, self._force = output, results_dir, name, force
        self.path: Path | None = None  # the -o file, else the file under the results folder
        self.named: Path | None = None  # the --save NAME file when -o is given too
        self.error: str | None = None
        self.whole = False  # the final save wrote the whole run (whatever failed before it)
        self._header: RunResult | None = None  # the record (no cases, no harness) the files hold now
        self._sent: dict[str, Any] = {}  # case id -> the CaseResult last appended to the journals
        # -o over an existing file (--force): the run in progress goes beside it, the file is replaced at the end
        self._partial = output.with_name(output.name + ".partial.json") if output is not None and force \
            and output.exists() else None
        if self._partial is not None and (self._partial.exists() or self._partial.is_symlink()):
            from solbench.errors import ConfigError

            raise ConfigError(f"{self._partial} exists (an earlier run interrupted part way, saved beside "
                              f"{output}): move or remove it first")
        if output is not None:
            store.check_writable(output, is_file=True, force=force)
        if output is None or name is not None:
            store.check_writable(results_dir)

    def save(self, partial: RunResult, *, final: bool = False) -> None:
        """Write ``partial``; unless ``final``, marked incomplete (a run killed before its final
        save then leaves a file that says so: ``complete`` is true only once every case is in)."""
        from dataclasses import replace

        if not final and partial.complete:
            partial = replace(partial, complete=False)
        try:
            if final:
                beside, self._partial = self._partial, None  # the final record goes to -o itself
                self._write(partial, derived(partial))  # failing, it leaves self.path where the run is
                for path in self.paths:
                    store.drop_journal(path)
                if beside is not None:  # only once the final record is written
                    store.drop_journal(beside)
                    beside.unlink(missing_ok=True)
                self.whole = True
                return
            header = replace(partial, cases=(), harness={})
            if header != self._header:
                self._write(replace(partial, cases=()), None)
                if self._header is None:  # a journal left by an earlier run under the same name
                    for path in self.paths:
                        store.drop_journal(path)
                self._header, self._sent = header, {}
            changed = [c for c in partial.cases if self._sent.get(c.case_id) is not c]
            for path in self.paths:
                store.append_cases(path, partial, changed)
            self._sent.update((c.case_id, c) for c in changed)
        except SolbenchError as exc:  # the first failure is the cause: later ones (the same full disk) follow it
            self.error = self.error or str(exc)

    def _write(self, run: RunResult, extra: Any) -> None:
        """The whole record of ``run`` to every place, each file claimed at its first write."""
        if self._output is None:
            self.path = self._again(run, self.path, self._name, extra)
            return
        target = self._partial or self._output
        self.path = store.save(run, target, force=self._force or self.path is not None, extra=extra)
        if self._name is not None:
            self.named = self._again(run, self.named, self._name, extra)

    def _again(self, run: RunResult, path: Path | None, name: str | None, extra: Any) -> Path:
        return (store.save(run, path, extra=extra) if path is not None
                else store.save_new(run, self._dir, name, extra=extra))

    @property
    def paths(self) -> list[Path]:
        return [p for p in (self.path, self.named) if p is not None]


# run notes of what detection was unsure of (solbench.plan.prepare.device_notes): the peaks every number rests on
DETECTION_NOTES = ("device: ", "peaks: ")
# the run note of processes an implementation left outside its worker's group (execute.session.escaped_note)
ESCAPED_NOTE = "killed "
# the run notes printed beside the tables, and on stderr under --json or -q: a case this machine cannot
# run (its inputs are not here), what detection was unsure of, and escapes
SHOWN_NOTES = ("skipped ", *DETECTION_NOTES, ESCAPED_NOTE)


def finish(result: RunResult, out: Console, as_json: bool, *, saved: Path | Sequence[Path] | None = None,
           json_later: bool = False) -> None:
    """Print a run: its tables, or its JSON alone on stdout. With ``--json`` or ``-q``, stderr still
    says which implementations failed (the exit code's reason), which were skipped and which cases
    were left out (a requirement this machine lacks: not a failure, but not measured either), what
    detection was unsure of, and where the run was saved. ``json_later``: the caller prints the JSON
    itself (``run --gate-against`` adds the gate's verdict to it)."""
    paths = [saved] if isinstance(saved, Path) else list(saved or ())
    if as_json or out.quiet:
        if as_json and not json_later:
            click.echo(store.dumps(result, derived(result)))
        for c in result.cases:
            for r in c.impls:
                if r.status in FAILED_STATUSES:
                    click.echo(f"{c.case_id} {r.name}: {r.status.upper()}: {r.message}", err=True)
        for line in skipped_lines(result):
            click.echo(line, err=True)
        for note in result.notes:
            if note.startswith(SHOWN_NOTES):
                click.echo(note, err=True)
        for path in paths:
            click.echo(f"saved {path}", err=True)
        return
    print_run(out, result)
    for path in paths:
        out.print(f"saved {path}", style="dim", markup=False, soft_wrap=True)  # a path, whole and as it is


def skipped_lines(result: RunResult) -> list[str]:
    """``impl: SKIPPED (not a failure) on N case(s): why``, one line per implementation and reason,
    in run order (the tables show each case's; a quiet run's stderr needs one line, not one a case)."""
    counts: dict[tuple[str, str], int] = {}
    for c in result.cases:
        for r in c.impls:
            if r.status == "skipped":
                why = (r.message.splitlines() or [""])[0]
                counts[(r.name, why)] = counts.get((r.name, why), 0) + 1
    return [f"{name}: SKIPPED (not a failure) on {n} case(s): {why}" for (name, why), n in counts.items()]


def nothing_measured(result: RunResult, exits_0: bool = True) -> str:
    """A line where every implementation of every case was skipped (a requirement this machine lacks),
    else "": such a run exits 0, since skipped is not a failure, yet it measured nothing to gate or compare.
    ``exits_0``: whether the command exits 0 (not where a gate follows, or the run could not be saved),
    the only case the line says so."""
    impls = [r for c in result.cases for r in c.impls]
    if not impls or any(r.status != "skipped" for r in impls):
        return ""
    return (f"nothing was measured: every implementation of the {len(result.cases)} case(s) was skipped (a "
            f"requirement this machine lacks, not a failure{': exit 0' if exits_0 else ''}); a gate or comparison "
            "of this run has nothing to decide")


def derived(result: RunResult, fast_ps: Sequence[float] = DEFAULT_PS) -> dict[str, Any]:
    """Values derived from a run, saved beside it in its JSON (ignored when read back): ``suite_summary``
    (fast_p and mean S per suite and implementation, :mod:`solbench.analysis.suite_summary`) when the
    run holds suite problems."""
    summary = summary_json(result, fast_ps)
    return {"suite_summary": summary} if summary else {}


def print_run(out: Console, result: RunResult, fast_ps: Sequence[float] = DEFAULT_PS) -> None:
    out.print(run_header(result), style="dim", markup=False)  # names in a file are text, never markup
    for table in run_tables(result):
        print_table(out, table)
    summary = summary_table(result, fast_ps)
    if summary is not None:
        print_table(out, summary)
        out.print(summary_note(fast_ps), style="dim", overflow="fold", markup=False)
    for note in run_notes(result):
        out.print(note, style="dim", overflow="fold", markup=False)
    for note in result.notes:
        if note.startswith(SHOWN_NOTES):
            out.print(note, style="yellow", markup=False)


class ProgressBar:
    """A rich progress bar over cases, on stderr, with the time elapsed and an ETA (the mean time per
    case so far times the cases left); a no-op callback when quiet. When stderr is not a terminal (a
    CI log) or one that cannot redraw a line (TERM=dumb, where rich's bar prints nothing), one plain
    line per case measured instead (``SOLBENCH_PROGRESS=1`` keeps the bar)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        redraws = sys.stderr.isatty() and err_console().is_interactive
        self.plain = not quiet and not redraws and os.environ.get("SOLBENCH_PROGRESS") != "1"
        self._bar: Progress | None = None
        self._task: Any = None
        self._done = self._total = 0
        self._start = time.monotonic()

    def __enter__(self) -> Callable[[str, dict[str, Any]], None]:
        if self.quiet:
            return lambda event, data: None
        if self.plain:
            return self._line
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                             console=err_console(), transient=True)
        self._bar.__enter__()
        return self._event

    def _line(self, event: str, data: dict[str, Any]) -> None:
        """The plain form: a line a case (and a line a pass of added rounds), never a control code."""
        if event == "start":
            self._total = data["cases"]
        elif event == "more":
            self._total += data["cases"]
            click.echo(f"solbench: {data['rounds']} more round(s) for {data['points']} point(s)", err=True)
        elif event == "case_done":
            self._done += data.get("rounds", 1)
            click.echo(f"solbench: [{self._done}/{self._total}] {data['case']} "
                       f"({time.monotonic() - self._start:.0f} s)", err=True)

    def _event(self, event: str, data: dict[str, Any]) -> None:
        bar = self._bar
        assert bar is not None
        if event == "start":
            self._total = data["cases"]
            self._task = bar.add_task("measuring", total=data["cases"])
        elif event == "round":
            last = data.get("last", data["round"])
            which = f"rounds {data['round']}-{last}" if last > data["round"] else f"round {data['round']}"
            bar.update(self._task, description=f"{which} of {data['of']}")
        elif event == "more":  # added rounds for the points still too uncertain, in one pass
            self._total += data["cases"]
            bar.update(self._task, total=self._total,
                       description=f"{data['rounds']} more round(s) for {data['points']} point(s) "
                                   f"(at most {data['of']} a point)")
        elif event == "compile_ahead":
            bar.update(self._task, description=f"compiling ahead: {data['tasks']} in {data['jobs']} processes")
        elif event == "compiled_ahead":  # from the compiling threads; the count comes counted
            bar.update(self._task, description=f"compiling ahead: {data['done']} of {data['of']}")
        elif event == "workers":
            bar.update(self._task, description=escape(f"starting workers for {data['workload']}"))
        elif event == "impl":
            self._label = escape(f"{data['case']} {data['impl']}")
            bar.update(self._task, description=self._label)
        elif event == "sample" and data["n"] % 10 == 0:
            bar.update(self._task, description=f"{self._label} ({data['n']} samples)")
        elif event == "case_done":  # a case's rounds in one pass (rounds 2-3 together, added rounds)
            bar.advance(self._task, data.get("rounds", 1))

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


run_sd_option = click.option(
    "--run-sd", default=None, metavar="SD",
    help="The sd of a run's own offset (what its rounds do not show), priced into a gate between separate runs "
         "over rounds: '0.2%', '0.002', or 0 for none. Default: what `solbench spread --save` stored for the "
         "baseline's GPU model, else 0.2% (measured on an H200; README 'Between runs').")


def run_sd_of(text: str | None, results_dir: Path, spec_id: str) -> tuple[float, str]:
    """``--run-sd`` as a fraction, and where it came from: the option; else the spread ``solbench spread
    --save`` stored for the GPU model ``spec_id`` under ``results_dir``; else DEFAULT_RUN_SD."""
    from solbench.analysis.thresholds import DEFAULT_RUN_SD, parse_run_sd

    if text is not None:
        return parse_run_sd(text), "--run-sd"
    saved = store.load_spread(results_dir, spec_id)
    if saved is not None:
        return saved.run_sd, f"{store.spread_path(results_dir, spec_id)} ({len(saved.runs)} runs)"
    return DEFAULT_RUN_SD, "default (measured on an H200)"
