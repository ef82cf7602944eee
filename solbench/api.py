"""Python entry points: what the CLI calls, usable without it. A façade: every name here lives
in a layer below and is re-exported, so ``solbench.api`` owns no logic of its own.

    plan(files, device_kind)      -> workloads and cases (no device work)      solbench.plan.workloads
    dry_run(files, spec)          -> RunResult (FLOPs, bytes, T_SOL)            solbench.plan.workloads
    run(files, options)           -> RunResult (measured on this device)        solbench.execute.run
    ab(files, base_tree, cur_tree)-> (baseline, current) runs                   solbench.execute.ab
    gate_live(base, cur, ...)     -> GateResult, suspect cases re-measured      solbench.execute.run
    tune(files, TuneOptions())    -> TuneResult                                  solbench.tools.tune
    profile(ProfileRequest(...))  -> ProfileResult (ncu over one case)           solbench.tools.profile
    gate(base, cur), compare_runs(a, b), compare_impls(run, a, b), parse_threshold(text)
                                                                                 solbench.analysis
    load(path), save(run, path), RunResult, CaseResult, ImplResult              solbench.results
    import_problems(src, out)     -> workload files of a suite's problems       solbench.suites.export
    suite_summary(run, ps)        -> fast_p and mean S per suite and impl       solbench.analysis.suite_summary
    bench(fn, *args, flops=, bytes=) -> BenchResult (one callable, no YAML)     solbench.tools.bench
    calibrate(), device_summary(), hardware_spec(), list_specs(), list_workloads(), load_run()
                                                                                 solbench.tools.info
    start_for_run(files, options)  -> the run's fork server started now       solbench.execute.early

Each name is imported when first used (PEP 562), so ``import solbench.api`` does not import torch:
``solbench run`` starts its fork server first (start_for_run), then imports what measures.
"""

from __future__ import annotations

import importlib
from pathlib import Path as Path
from typing import Any

from solbench._api_names import WHERE as _WHERE
from solbench._version import __version__ as __version__

__all__ = ["Path", "__version__", *_WHERE]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'solbench.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
