"""``--help`` reads the same across commands, every option is described, and the CLI starts light."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.cli.main import _COMMANDS


def _options(name: str) -> list[click.Option]:
    return [p for p in main.commands[name].params if isinstance(p, click.Option)]


@pytest.mark.parametrize("name", list(_COMMANDS))
def test_every_option_has_help_and_help_renders_plain(name: str) -> None:
    missing = [p.opts for p in _options(name) if not (p.help or "").strip()]
    assert not missing, f"{name}: options without help: {missing}"
    text = CliRunner().invoke(main, [name, "--help"], terminal_width=200).output
    assert "%%" not in text


def test_shared_options_read_the_same() -> None:
    def option(command: str, flag: str) -> click.Option:
        return next(p for p in _options(command) if flag in p.opts)

    assert {option(c, "--device").metavar for c in ("run", "tune", "ab")} == {"auto|cpu|cuda|cuda:N"}
    for command in ("show", "compare", "gate", "ab"):
        assert option(command, "--markdown").is_flag, command
    assert "--dry-run" in (option("run", "--gpu").help or "")
    assert "GPU only" in (option("run", "--timer").help or "") and "GPU only" in (option("ab", "--timer").help or "")


def test_the_old_markdown_file_form_is_refused_with_the_new_spelling() -> None:
    result = CliRunner().invoke(main, ["gate", "--baseline", "a.json", "--current", "b.json", "--markdown", "g.md"])
    assert result.exit_code == 2 and "--markdown-file g.md" in result.output
    result = CliRunner().invoke(main, ["ab", "--baseline-tree", ".", "workloads/attn.yaml", "--markdown", "g.md"])
    assert result.exit_code == 2 and "--markdown-file g.md" in result.output


def test_importing_the_cli_loads_neither_torch_nor_scipy() -> None:
    code = ("import sys, solbench.cli\n"
            "heavy = [m for m in ('torch', 'scipy', 'numpy', 'solbench.api') if m in sys.modules]\n"
            "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    version = subprocess.run([sys.executable, "-m", "solbench", "--version"], capture_output=True, text=True,
                             timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("solbench, version ")
