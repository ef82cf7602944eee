"""What the commands print where people read it: user text printed as it is (never read as rich
markup), narrow terminals, CI logs and terminals that cannot show every character."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from solbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = str(ROOT / "tests" / "data" / "double.yaml")


def test_list_prints_a_description_as_written_not_as_markup(tmp_path: Path, monkeypatch) -> None:
    """A description is the user's text: ``[/]`` in it crashed list (MarkupError, exit 5) and
    ``[bold]`` was taken as a style and dropped."""
    text = (ROOT / "tests" / "data" / "double.yaml").read_text()
    marked = text.replace("  - name: double\n", "  - name: double\n    description: 'Doubles [/] rows [bold]fast[/bold]'\n")
    (tmp_path / "marked.yaml").write_text(marked)
    monkeypatch.chdir(tmp_path)  # a short path: the table is narrow enough to keep the description on one line
    result = CliRunner().invoke(main, ["list", "marked.yaml"])
    assert result.exit_code == 0, result.output
    assert "Doubles [/] rows [bold]fast[/bold]" in result.output


def test_run_names_the_file_it_saved_as_it_is(tmp_path: Path) -> None:
    """``saved PATH`` went through rich markup: ``-o 'x[/].json'`` saved the run, then crashed
    (MarkupError, exit 5), and ``-o 'y[red]z.json'`` was reported saved as ``yz.json``."""
    for name in ("y[red]z.json", "x[/].json"):
        out = tmp_path / name
        result = CliRunner().invoke(main, ["run", DOUBLE, "--dry-run", "--gpu", "h200", "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert f"saved {out}\n" in result.output and out.is_file()


def test_compare_heads_its_columns_with_the_runs_as_named(tmp_path: Path) -> None:
    """The two runs' names head the table's time columns and went to rich as markup: a file named
    ``a[/].json`` crashed compare (MarkupError, exit 5), and ``a[red].json`` headed its column
    ``a.json``."""
    import shutil

    (tmp_path / "a[").mkdir()
    for name in ("a[red].json", "a[/].json"):
        shutil.copy(ROOT / "results" / "h200" / "attn-oproj.json", tmp_path / name)
        result = CliRunner().invoke(main, ["compare", str(tmp_path / name), "results/h200/attn.json"])
        assert result.exit_code == 0, result.output
        header = next(line for line in result.stdout.splitlines() if "results/h200/attn.json" in line and "┃" in line)
        assert f"{tmp_path / name}" in header, header


def test_gate_prints_the_hardware_differences_it_allowed_as_they_are(tmp_path: Path) -> None:
    """The differences --allow-cross-hardware let through quote the runs' device names and drivers,
    and went to rich as markup: a name with ``[/]`` in it crashed the gate (exit 5, no verdict)."""
    import json

    data = json.loads((ROOT / "results" / "h200" / "attn-oproj.json").read_text())
    data["environment"]["driver"] = "580.159.04 [/]"
    (tmp_path / "other.json").write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["gate", "--baseline", "results/h200/attn.json", "--current",
                                       str(tmp_path / "other.json"), "--allow-cross-hardware"])
    assert result.exit_code == 3, result.output
    assert "(baseline) vs 580.159.04 [/] (current)" in " ".join(result.stdout.split())


def _at(columns: int, args: list[str]) -> str:
    result = CliRunner().invoke(main, args, env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 3), result.output
    return result.stdout


def test_a_run_table_on_a_narrow_terminal_cuts_no_number_and_no_name() -> None:
    """rich narrowed every column to fit: at 80 columns implementations read "cubla…" (cublas_addmm
    and cublaslt alike) and the speedup's header "speed…"; at 60 the numbers themselves were cut
    ("0.…" for a SOL of 0.35, "35…" for an MBU of 35.0%)."""
    import json

    run = json.loads((ROOT / "results" / "h200" / "attn-oproj.json").read_text())
    for columns in (60, 80):
        out = _at(columns, ["show", "results/h200/attn-oproj.json"])
        assert "…" not in out
        words = out.split()
        assert {"cublas_addmm", "cublaslt", "speedup", "0.35", "35.0%"} <= set(words)
        for case in run["cases"]:
            for impl in case["impls"]:
                if impl.get("score"):
                    assert f"{impl['score']['sol']:.2f}" in words


def test_gate_and_compare_tables_on_a_narrow_terminal_keep_every_column() -> None:
    """At 80 columns rich narrowed the case and implementation columns to nothing, cut the numbers
    ("20.0 …", "0.98…") and the verdicts ("INCONCLUSI…"): a gate's table said nothing of which case
    did what."""
    sides = ["results/h200/attn-oproj.json", "results/h200/attn.json"]
    gate = _at(80, ["gate", "--baseline", sides[0], "--current", sides[1]])
    assert "…" not in gate
    assert gate.split().count("INCONCLUSIVE") == 40 + 1  # every row's verdict, and the caption's
    assert "cublas_addmm" in gate.split() and "[0.978, 1.006]" in gate
    compare = _at(80, ["compare", *sides])
    assert "…" not in compare
    assert "cublas_addmm" in compare.split() and "0.989× [0.978, 1.006]" in compare and "SAME" in compare.split()


def _with_encoding(encoding: str, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": encoding}
    env.pop("COLUMNS", None)
    return subprocess.run([sys.executable, "-m", "solbench", *args], cwd=ROOT, env=env, capture_output=True,
                          timeout=300)


def test_a_terminal_that_cannot_show_every_character_gets_ascii_not_a_crash() -> None:
    """µ, ±, × and → cannot be written to an ASCII or Latin-1 stream (PYTHONIOENCODING=ascii, a
    Latin-1 locale): show and gate stopped with UnicodeEncodeError (exit 5, no verdict), gate
    --markdown too on Latin-1. They are written in ASCII instead: a unit stays a unit (20.0 us)."""
    run = "results/h200/attn-oproj.json"
    shown = _with_encoding("ascii", ["show", run])
    assert shown.returncode == 0, shown.stderr.decode(errors="replace")[-2000:]
    text = shown.stdout.decode("ascii")
    assert "20.0 us +-1.0%" in text and "7.00 us" in text
    for encoding, ratio in (("ascii", "0.989x"), ("latin-1", "0.989×")):  # Latin-1 has ×
        gated = _with_encoding(encoding, ["gate", "--baseline", run, "--current", "results/h200/attn.json"])
        assert gated.returncode == 3, gated.stderr.decode(errors="replace")[-2000:]
        text = gated.stdout.decode(encoding)
        assert "INCONCLUSIVE" in text and ratio in text
    marked = _with_encoding("latin-1", ["gate", "--baseline", run, "--current", "results/h200/attn.json", "--markdown"])
    assert marked.returncode == 3, marked.stderr.decode(errors="replace")[-2000:]
    assert "### solbench gate: ! INCONCLUSIVE" in marked.stdout.decode("latin-1")


def test_a_terminal_that_cannot_redraw_gets_a_plain_line_a_case(monkeypatch, capsys) -> None:
    """On a dumb terminal (TERM=dumb: an editor's shell, some CI runners' pseudo-terminals) rich
    cannot redraw a bar in place, and a transient bar prints nothing at all: a run said nothing until
    its tables, however long it took. It gets the CI log's plain lines instead."""
    from solbench.cli.common import ProgressBar

    monkeypatch.delenv("SOLBENCH_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with ProgressBar(quiet=False) as progress:
        progress("start", {"cases": 2})
        progress("case_done", {"case": "o_proj[tokens=16]"})
        progress("case_done", {"case": "o_proj[tokens=64]"})
    err = capsys.readouterr().err
    assert "solbench: [1/2] o_proj[tokens=16]" in err and "solbench: [2/2] o_proj[tokens=64]" in err
    assert "\x1b" not in err


def test_text_that_reads_like_an_emoji_code_is_printed_as_it_is(tmp_path: Path) -> None:
    """rich replaces ``:name:`` with that emoji even in text not read as markup: a run saved as
    ``run:cd:1.json`` was reported saved as ``run💿1.json``."""
    out = tmp_path / "run:cd:1.json"
    result = CliRunner().invoke(main, ["run", DOUBLE, "--dry-run", "--gpu", "h200", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"saved {out}\n" in result.output and out.is_file()


def test_a_command_a_test_starts_renders_at_the_piped_width() -> None:
    """readline (imported by pytest) exports COLUMNS=80 into the C environment, unseen by os.environ:
    a command started by a test inherited it, and its tables wrapped at 80 columns, splitting cells a
    test reads ("2 ok, 2 crashed, 1 timeout") only where other columns happened to be wide. The tests'
    fixture unsets it there too, so a command renders as it does piped (160 columns)."""
    code = "from solbench.cli.common import console; print(console().width)"
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split() == ["160"]
