"""What the commands print where people read it: user text printed as it is (never read as rich
markup), narrow terminals, CI logs and terminals that cannot show every character."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from solbench.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = str(ROOT / "tests" / "data" / "double.yaml")


def test_list_prints_a_description_as_written_not_as_markup(tmp_path: Path) -> None:
    """A description is the user's text: ``[/]`` in it crashed list (MarkupError, exit 5) and
    ``[bold]`` was taken as a style and dropped."""
    text = (ROOT / "tests" / "data" / "double.yaml").read_text()
    marked = text.replace("  - name: double\n", "  - name: double\n    description: 'Doubles [/] rows [bold]fast[/bold]'\n")
    (tmp_path / "marked.yaml").write_text(marked)
    result = CliRunner().invoke(main, ["list", str(tmp_path / "marked.yaml")])
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
