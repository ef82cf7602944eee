"""``solbench ab``: two checkouts of the same workloads measured in one invocation.

    for each tree: plan its copy of the workload files (its references checked with the tree
                   first on sys.path), build its settings and empty run, and a worker pool whose
                   workers resolve implementations in that tree
    measure both, alternating (solbench.execute.alternate), in ``rounds`` rounds; then, with
    ``undecided`` given, four more rounds at a time of the keys it names, up to ``max_rounds``
    -> (baseline run, current run); the caller gates them (solbench.analysis.gate, .adaptive)
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from solbench.errors import ConfigError, RunInterrupted
from solbench.execute import warm
from solbench.plan.device import detect, with_end_clocks
from solbench.plan.options import Progress, RunOptions
from solbench.plan.prepare import prepare
from solbench.results.model import RunResult
from solbench.text import guessed

__all__ = ["ab"]


_NOTHING_TO_COMPARE = "nothing to compare against (a workload new in this change: solbench run it)"


def ab(files: Sequence[str | Path], baseline_tree: str | Path, current_tree: str | Path,
       options: RunOptions | None = None, *, rounds: int = 3, device: str = "auto",
       progress: Progress | None = None,
       on_case: Callable[[Sequence[RunResult]], None] | None = None, max_rounds: int | None = None,
       undecided: Callable[[Sequence[RunResult]], Sequence[str]] | None = None) -> tuple[RunResult, RunResult]:
    """Measure the workload ``files`` (paths inside each tree) of two checkouts, alternating.

    Each tree's workers resolve implementations in that tree (:mod:`solbench.execute.alternate`); a
    file missing from one tree is measured on the other side only, and so is a ``-w`` workload new in
    the current tree (a ConfigError where the baseline has none of them). Returns (baseline, current),
    each with ``rounds`` rounds, and up to ``max_rounds`` for the keys ``undecided(runs)`` names
    after each round (:class:`solbench.analysis.adaptive.Looks`). Raises RunInterrupted on Ctrl-C
    (``on_case`` saw every case).
    """
    from solbench.execute import alternate as ab_loop
    from solbench.measure import pool

    options = options or RunOptions()
    for f in files:
        if Path(f).is_absolute() or Path(os.path.normpath(f)).parts[:1] == ("..",):  # both sides would read it
            raise ConfigError(f"{f}: give workload files as paths inside each tree (e.g. workloads/attn.yaml)")
    if rounds < 1:
        raise ConfigError(f"rounds must be at least 1, got {rounds}")
    if max_rounds is not None and max_rounds < rounds:
        raise ConfigError(f"max rounds ({max_rounds}) must be at least the rounds ({rounds})")
    # the cap on the rounds added to the keys the gate leaves undecided (0: none can be), recorded with that rule
    cap = max_rounds if undecided is not None and max_rounds is not None and max_rounds > rounds else 0
    info, floor_spec = detect(device, options)
    sides = []
    for label, tree in (("baseline", baseline_tree), ("current", current_tree)):
        root = Path(tree).resolve()
        if not root.is_dir():
            raise ConfigError(f"--{label}-tree {tree}: no such folder")
        paths = [root / f for f in files if (root / f).exists()]  # a folder of workloads too, as `run`'s
        if not paths:  # a file new in the change is measured on its side only; none at all is a wrong tree
            raise ConfigError(f"none of {', '.join(map(str, files))} exists in --{label}-tree {tree}"
                              + (f": {_NOTHING_TO_COMPARE}" if label == "baseline" else ""))
        with _import_path(root):  # -i may name an implementation of one tree only: checked over both below;
            # -w a workload of the current tree, new in it (measured there only, as without -w)
            prep = prepare(paths, options, info, floor_spec, require_impls=False,
                           require_workloads=label == "current")
        run = replace(prep.run, protocol=replace(prep.run.protocol, rounds=rounds, max_rounds=cap, rounds_target=0.0,
                                                 rounds_spread="", rounds_rule="gate" if cap else ""),
                      notes=(*prep.run.notes, f"ab {label}: tree {root}"))
        executor = pool.Pool(info.kind, info.index, tree=str(root), side_by_side_bytes=warm.side_by_side_bytes(info))
        sides.append(ab_loop.Side(label, prep.units, run, executor, prep.score))
    if options.workloads and not sides[0].units:  # each -w workload is in the current tree (planned above)
        raise ConfigError(f"-w: no workload named {', '.join(options.workloads)} in --baseline-tree {baseline_tree} "
                          f"({', '.join(map(str, files))}): {_NOTHING_TO_COMPARE}")
    known = {n for s in sides for u in s.units for n in u.spec.implementations}
    missing = sorted(set(options.impls) - known)
    if missing:
        raise ConfigError(f"-i: no implementation named {guessed(missing, known)} in the selected workloads of either "
                          f"tree (there are: {', '.join(sorted(known))})")
    emit = progress or (lambda event, data: None)
    emit("start", {"cases": len({(u.spec.name, c.id) for s in sides for u in s.units for c in u.cases}) * rounds})
    with warm.cache_folder(options.compile_cache_dir) as folder:  # one torch.compile cache, both trees
        settings = prep.settings
        for side, tree in zip(sides, (baseline_tree, current_tree), strict=True):
            try:
                settings, ahead = warm.ahead_of_run(side.units, settings, folder, info, options,
                                                    tree=str(Path(tree).resolve()), emit=emit)
            except KeyboardInterrupt:
                raise RunInterrupted(warm.interrupted([s.run for s in sides])) from None
            side.run = replace(side.run, protocol=warm.recorded(side.run.protocol, folder, options.compile_cache_dir,
                                                                ahead))
        base, cur = ab_loop.measure_ab(sides, device=info.kind, settings=settings, timeout_s=options.timeout_s,
                                       l2_bytes=info.l2_bytes, emit=emit, rounds=rounds, nvml_id=prep.nvml_id,
                                       on_case=on_case, max_rounds=max_rounds, undecided=undecided)
    emit("done", {})
    return with_end_clocks(base, info), with_end_clocks(cur, info)


class _import_path:
    """``root`` first on ``sys.path`` while a tree's references are checked (nothing is imported)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)

    def __enter__(self) -> None:
        sys.path.insert(0, self.root)
        importlib.invalidate_caches()

    def __exit__(self, *exc: object) -> None:
        if self.root in sys.path:
            sys.path.remove(self.root)
