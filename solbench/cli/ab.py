"""``solbench ab``: measure two checkouts of the same workloads in one invocation, then gate.

Exit codes (:mod:`solbench.exitcodes`), the more severe of the gate's and the current tree's:
0 pass · 3 inconclusive · 1 regression, or a case broken now · 4 an implementation of the
current tree failed · 2 bad input or usage · 5 solbench itself failed · 130 interrupted (both runs
measured so far are saved; 143 for SIGTERM).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from solbench import api, exitcodes
from solbench.cli.common import ALPHA, NamedPath, failures
from solbench.errors import ConfigError, RunInterrupted
from solbench.results.model import RunResult


class _AbCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from solbench.cli.common import refuse_markdown_path

        refuse_markdown_path(args, any_word=False)
        return super().parse_args(ctx, args)


@click.command(name="ab", cls=_AbCommand)
@click.argument("files", nargs=-1, required=True)
@click.option("--baseline-tree", required=True, type=NamedPath(file_okay=False),
              help="Checkout of the baseline (e.g. a `git worktree` of the base commit).")
@click.option("--current-tree", default=".", show_default=True, type=NamedPath(file_okay=False),
              help="Checkout of the change.")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Rounds of every case; each starts fresh workers on both sides. The gate decides over rounds.")
@click.option("--max-rounds", type=click.IntRange(min=1), default=15, show_default=True,
              help="Then add rounds only for the undecided cases, 4 at a time, up to this many; the error rates "
                   "are split over the looks (alpha/(1 + ceil((max-rounds - rounds) / 4)): 4 with the defaults). "
                   "Equal to --rounds: no added rounds.")
@click.option("-w", "--workload", "workloads", multiple=True, help="Only this workload (repeatable).")
@click.option("-i", "--impl", "impls", multiple=True, help="Only this implementation (repeatable).")
@click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N")
@click.option("--timer", type=click.Choice(["cold", "graph", "cupti"]), default="cold", show_default=True)
@click.option("--flush", type=click.Choice(["clean", "write"]), default="clean", show_default=True)
@click.option("--launch", type=click.Choice(["auto", "stream", "graph"]), default="auto", show_default=True,
              help="cold timer: the call launched on the stream, or a CUDA graph's replay of it (as `run --launch`).")
@click.option("--budget", type=click.FloatRange(min=0.01), default=2.0, show_default=True,
              help="Seconds of sampling per implementation, case and round.")
@click.option("--target", type=click.FloatRange(min=0.0001), default=0.01, show_default=True)
@click.option("--min-samples", type=click.IntRange(min=3), default=10, show_default=True)
@click.option("--max-samples", type=click.IntRange(min=3), default=2000, show_default=True)
@click.option("--input-sets", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=120.0, show_default=True)
@click.option("--threshold", default=None, help="Gate threshold ('5%'); default: each workload's gate_threshold, "
                                                "else 5%.")
@click.option("--alpha", type=ALPHA, default=0.01, show_default=True)
@click.option("--out-dir", type=NamedPath(file_okay=False),
              help="Write baseline.json and current.json here (default: saved under --results-dir).")
@click.option("--results-dir", type=NamedPath(file_okay=False), default="results", show_default=True)
@click.option("--force", is_flag=True, help="Allow --out-dir to overwrite existing files.")
@click.option("--junit", type=NamedPath(dir_okay=False), help="Write the gate's JUnit XML here.")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the gate's verdicts as Markdown on stdout instead of the table.")
@click.option("--markdown-file", type=NamedPath(dir_okay=False), help="Also write the gate's Markdown to FILE.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the gate's verdicts as JSON (not with --markdown: both go to stdout).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def ab(files: Sequence[str], baseline_tree: str, current_tree: str, rounds: int, max_rounds: int,
       workloads: Sequence[str],
       impls: Sequence[str], device: str, timer: str, flush: str, launch: str, budget: float, target: float,
       min_samples: int,
       max_samples: int, input_sets: int, seed: int, timeout_s: float, threshold: str | None, alpha: float,
       out_dir: str | None, results_dir: str, force: bool, junit: str | None, as_markdown: bool,
       markdown_file: str | None, as_json: bool, quiet: bool) -> None:
    """Measure FILES (paths inside each tree) in two checkouts, alternating, then gate current vs baseline.

    \b
    git worktree add ../base origin/main
    solbench ab --baseline-tree ../base workloads/attn.yaml --junit gate.xml

    Both sides run on the same device in the same invocation: implementation by implementation,
    the side that goes first alternating case by case and round by round, each round with fresh
    workers. Workers resolve implementations in their own tree; the measuring code is this
    solbench's for both.
    """
    from solbench.analysis.adaptive import UNCONFIRMED_VERDICTS, Looks, looks_for
    from solbench.analysis.gate import parse_threshold, unconfirmed
    from solbench.cli.common import (
        ProgressBar,
        distinct_outputs,
        interrupted_code,
        junit_refusals,
        one_stdout_view,
        refuse_junit,
        writable_output,
    )
    from solbench.cli.compare import emit_gate

    if out_dir == "-":  # made a folder named "-" and saved both runs in it
        raise ConfigError("--out-dir -: ab saves the two runs as baseline.json and current.json in a folder, not to "
                          "stdout (--json prints the gate's verdicts there): name a folder")
    one_stdout_view(as_json, as_markdown, markdown_file=True)
    writable_output(junit, "JUnit XML")
    writable_output(markdown_file, "Markdown")
    sides = [("--out-dir", str(Path(out_dir) / f"{side}.json")) for side in ("baseline", "current")] if out_dir else []
    distinct_outputs([*sides, ("--junit", junit), ("--markdown-file", markdown_file)])
    junit_refusals(junit)
    if max_rounds < rounds:
        raise click.UsageError(f"--max-rounds ({max_rounds}) must be at least --rounds ({rounds})")
    # refused (bad input, no workload in a tree, nothing in common): handle_errors has the JUnit file say so
    tau = None if threshold is None else parse_threshold(threshold).fraction  # before measuring
    looks = Looks(looks_for(rounds, max_rounds), threshold=tau, alpha=alpha)
    options = api.RunOptions(timer=timer, target_rel_ci=target, min_samples=min_samples, max_samples=max_samples,
                             budget_s=budget, input_sets=input_sets, seed=seed, workloads=tuple(workloads),
                             impls=tuple(impls), flush=flush, launch=launch, results_dir=Path(results_dir),
                             timeout_s=timeout_s)
    savers = [_saver(out_dir, results_dir, side, force) for side in ("baseline", "current")]

    def save(runs: Sequence[RunResult], final: bool = False) -> None:
        for saver, run in zip(savers, runs, strict=True):
            saver.save(run, final=final)

    try:
        with ProgressBar(quiet or as_json) as progress:
            base, cur = api.ab(files, baseline_tree, current_tree, options, rounds=rounds, device=device,
                               progress=progress, on_case=save, max_rounds=max_rounds,
                               undecided=lambda runs: looks.undecided(runs[0], runs[1]))
    except RunInterrupted as stop:
        save(stop.result)  # type: ignore[arg-type]  # both runs, marked incomplete
        refuse_junit(junit, "interrupted: no verdict (the cases measured so far are saved)")
        click.echo("interrupted: the cases measured so far are saved", err=True)
        sys.exit(interrupted_code())
    save([base, cur], final=True)  # the final records add the end-of-run clocks
    # a key with one round a side is between single processes: nothing about time is decided (as gate)
    result = replace(unconfirmed(looks.result(base, cur), verdicts=UNCONFIRMED_VERDICTS),
                     reruns=added_rounds(cur, rounds),
                     run_sd_source="none: both trees measured in one invocation share its offset")
    code = exitcodes.worst(result.exit_code, exitcodes.IMPL_FAILED if failures(cur) else exitcodes.OK)
    errors = [s.error for s in savers if s.error is not None]
    code = exitcodes.worst(code, exitcodes.USAGE) if errors else code
    emit_gate(result, junit=junit, markdown_file=markdown_file, as_json=as_json, as_markdown=as_markdown,
              exit_code=code)
    for saver in savers:
        if saver.path is not None:
            click.echo(f"saved {saver.path}", err=True)
    for error in errors:
        click.echo(f"error: {error}", err=True)
    sys.exit(code)


def added_rounds(run: RunResult, rounds: int) -> int:
    """The most rounds added to any point after the first ``rounds`` (the gate's "re-measure rounds")."""
    return max([0, *(r.timing.n_rounds - rounds for c in run.cases for r in c.impls if r.timing is not None)])


def _saver(out_dir: str | None, results_dir: str, side: str, force: bool) -> Any:
    """Where a side's run is written after every case (checked writable before measuring)."""
    from solbench.cli.common import Saver

    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return Saver(Path(out_dir) / f"{side}.json", Path(results_dir), None, force=force)
    return Saver(None, Path(results_dir), f"ab-{side}", force=force)
