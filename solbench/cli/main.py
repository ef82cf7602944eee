"""The ``solbench`` command line: one click group assembled from one module per command family.

    run.py       run (and --dry-run, --gate-against)
    compare.py   compare, gate, spread
    ab.py        ab (two checkouts in one invocation)
    info.py      calibrate, show, schema, list, info
    tools.py     report, tune, profile
    imports.py   import (KernelBench and SOL-ExecBench problems as workload files)
    common.py    consoles, one-line errors, the progress bar, saving and printing a run

Commands parse options, call :mod:`solbench.api` and render; they hold no measurement logic.
A command's module is imported when the command is used (or listed by ``--help``), so
``solbench --version`` and ``import solbench.cli`` load neither torch nor scipy.
Exit codes (see :mod:`solbench.exitcodes`): 0 success · 1 a gate found a regression or a broken
case · 2 bad input or usage · 3 a gate was inconclusive · 4 an implementation failed (incorrect,
invalid, error, crashed, timeout, oom, reward_hack) · 5 solbench itself failed · 141 standard output
closed by its reader (`| head`) · 130 interrupted · 143 terminated (SIGTERM).
"""

from __future__ import annotations

import codecs
import importlib
import sys
from typing import Any

import click

from solbench._version import __version__

# command name -> (module, attribute, whether its errors are wrapped here: the others wrap their own)
_COMMANDS: dict[str, tuple[str, str, bool]] = {
    "run": ("run", "run", False),
    "show": ("info", "show", False),
    "compare": ("compare", "compare", True),
    "gate": ("compare", "gate_cmd", True),
    "spread": ("compare", "spread", True),
    "ab": ("ab", "ab", True),
    "report": ("tools", "report", True),
    "tune": ("tools", "tune", True),
    "profile": ("tools", "profile", True),
    "calibrate": ("info", "calibrate", False),
    "info": ("info", "info", False),
    "list": ("info", "list_", False),
    "schema": ("info", "schema", False),
    "import": ("imports", "import_", False),
}


def _load(name: str) -> click.Command:
    module, attr, wrap = _COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(f"solbench.cli.{module}"), attr)
    from solbench.cli.common import OPTION_HELP, handle_errors

    for param in command.params:  # one help text per shared option (common.OPTION_HELP)
        if isinstance(param, click.Option) and not (param.help or "").strip():
            param.help = OPTION_HELP.get(max(param.opts, key=len))
    if wrap and not getattr(command, "_solbench_wrapped", False):
        command.callback = handle_errors(command.callback)  # type: ignore[arg-type,type-var]
        command._solbench_wrapped = True  # type: ignore[attr-defined]
    return command


class _Commands(dict[str, click.Command]):
    """The group's commands, each imported on first use."""

    def __missing__(self, name: str) -> click.Command:
        if name not in _COMMANDS:
            raise KeyError(name)
        self[name] = command = _load(name)
        return command

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[name] if name in _COMMANDS or dict.__contains__(self, name) else default

    def __contains__(self, name: object) -> bool:
        return name in _COMMANDS or dict.__contains__(self, name)


class _LazyGroup(click.Group):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name)


# What solbench prints that an ASCII or Latin-1 stream cannot carry, in ASCII: a unit stays a unit
# ("20.0 us"), and the tables' marks stay apart; anything else reads "?".
_ASCII = {"µ": "u", "±": "+-", "×": "x", "·": "-", "−": "-", "—": "-", "–": "-", "→": "->", "…": "...", "†": "+",
          "‡": "++", "§": "S", "⚠": "!", "\ufe0f": ""}


def _in_ascii(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(_ASCII.get(ch, "?") for ch in error.object[error.start:error.end]), error.end


def _streams_that_degrade() -> None:
    """Where stdout or stderr cannot encode what solbench prints (PYTHONIOENCODING=ascii, a Latin-1
    locale), those characters are written in ASCII, not a UnicodeEncodeError once the work is done."""
    codecs.register_error("solbench.ascii", _in_ascii)
    for stream in (sys.stdout, sys.stderr):
        try:
            "".join(_ASCII).encode(stream.encoding)
        except UnicodeEncodeError:
            stream.reconfigure(errors="solbench.ascii")
        except (AttributeError, LookupError, TypeError):  # no encoding to check, or not a text stream to set
            pass


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="solbench", message="%(prog)s, version %(version)s")
def main() -> None:
    """How far is an implementation from the hardware's speed of light?"""
    _streams_that_degrade()


if __name__ == "__main__":  # pragma: no cover
    main()
