"""Python entry points: what the CLI calls, usable without it. A façade: every name here lives
in a layer below and is re-exported, so ``solbench.api`` owns no logic of its own.

    plan(files, device_kind)      -> workloads and cases (no device work)      solbench.plan.workloads
    dry_run(files, spec)          -> RunResult (FLOPs, bytes, T_SOL)            solbench.plan.workloads
    run(files, options)           -> RunResult (measured on this device)        solbench.execute.run
    ab(files, base_tree, cur_tree)-> (baseline, current) runs                   solbench.execute.ab
    gate_live(base, cur, ...)     -> GateResult, suspect cases re-measured      solbench.execute.run
    tune(files)                   -> TuneResult                                  solbench.tools.tune
    import_problems(src, out)     -> workload files of a suite's problems       solbench.suites.export
    suite_summary(run, ps)        -> fast_p and mean S per suite and impl       solbench.analysis.suite_summary
    bench(fn, *args, flops=, bytes=) -> BenchResult (one callable, no YAML)     solbench.tools.bench
    calibrate(), device_summary(), hardware_spec(), list_specs(), list_workloads(), load_run()
                                                                                 solbench.tools.info
"""

from __future__ import annotations

from pathlib import Path as Path

from solbench._version import __version__ as __version__
from solbench.analysis.suite_summary import suite_summary as suite_summary
from solbench.execute.ab import ab as ab
from solbench.execute.run import gate_live as gate_live
from solbench.execute.run import run as run
from solbench.plan.device import measured_spec as measured_spec
from solbench.plan.device import with_end_clocks as with_end_clocks
from solbench.plan.device import with_peaks as with_peaks
from solbench.plan.options import DEFAULT_GPU_ROUNDS as DEFAULT_GPU_ROUNDS
from solbench.plan.options import Progress as Progress
from solbench.plan.options import RunOptions as RunOptions
from solbench.plan.options import rounds_for as rounds_for
from solbench.plan.prepare import Prepared as Prepared
from solbench.plan.prepare import prepare as prepare
from solbench.plan.workloads import Planned as Planned
from solbench.plan.workloads import cost_of as cost_of
from solbench.plan.workloads import dry_run as dry_run
from solbench.plan.workloads import plan as plan
from solbench.suites.export import import_problems as import_problems
from solbench.tools.bench import BenchResult as BenchResult
from solbench.tools.bench import bench as bench
from solbench.tools.info import calibrate as calibrate
from solbench.tools.info import device_summary as device_summary
from solbench.tools.info import hardware_spec as hardware_spec
from solbench.tools.info import list_specs as list_specs
from solbench.tools.info import list_workloads as list_workloads
from solbench.tools.info import load_run as load_run
