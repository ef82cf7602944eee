"""``solbench import SRC --out DIR``: a suite's problems as solbench workload files."""

from __future__ import annotations

from collections.abc import Sequence

import click

from solbench import api
from solbench.cli.common import NamedPath, handle_errors, writable_folder


@click.command("import")
@click.argument("src", type=NamedPath(exists=True))
@click.option("--out", "out", required=True, type=NamedPath(file_okay=False),
              help="Folder to write one workload file per problem into.")
@click.option("--solution", "solutions", multiple=True, type=NamedPath(dir_okay=False, exists=True),
              help="A KernelBench ModelNew file or a SOL-ExecBench solution.json (repeatable).")
@click.option("--force", is_flag=True, help="Replace workload files already in DIR (they may have been edited).")
@handle_errors
def import_(src: str, out: str, solutions: Sequence[str], force: bool) -> None:
    """Write the KernelBench or SOL-ExecBench problems under SRC as solbench workload files in DIR."""
    writable_folder(out, "workload files", option="--out")  # before the problems load (a large folder takes a while)
    for path in api.import_problems(src, out, solutions, force=force):
        click.echo(str(path))
