"""The ``solbench`` command line: one click group assembled from one module per command family.

    run.py       run (and --dry-run, --gate-against)
    compare.py   compare, gate
    ab.py        ab (two checkouts in one invocation)
    info.py      calibrate, show, schema, list, info
    tools.py     report, tune, profile
    imports.py   import (KernelBench and SOL-ExecBench problems as workload files)
    common.py    consoles, one-line errors, the progress bar, saving and printing a run

Commands parse options, call :mod:`solbench.api` and render; they hold no measurement logic.
Exit codes (see :mod:`solbench.exitcodes`): 0 success · 1 a gate found a regression ·
2 bad input or usage · 3 a gate was inconclusive · 4 an implementation failed (incorrect, invalid,
error, crashed, timeout, oom, reward_hack) · 130 interrupted.
"""

from __future__ import annotations

import click

from solbench._version import __version__
from solbench.cli import ab, compare, imports, info, run, tools
from solbench.cli.common import handle_errors


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="solbench")
def main() -> None:
    """How far is an implementation from the hardware's speed of light?"""


def _register() -> None:
    for command in (run.run, imports.import_, info.calibrate, info.show, info.schema, info.list_, info.info):
        main.add_command(command)  # these wrap their own errors (@handle_errors)
    for command in (compare.compare, compare.gate_cmd, ab.ab, *tools.TOOLS):
        command.callback = handle_errors(command.callback)  # type: ignore[arg-type,type-var]
        main.add_command(command)


_register()

if __name__ == "__main__":  # pragma: no cover
    main()
