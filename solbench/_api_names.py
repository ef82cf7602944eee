"""Where each entry point of :mod:`solbench.api` lives: a table with no imports, which ``solbench``
and ``solbench.api`` both read (importing either pulls in nothing heavy)."""

WHERE = {  # name -> the module it lives in (docs/api.md's table; tests/unit/test_docs_examples.py holds the two)
    "BenchResult": "solbench.tools.bench",
    "CaseResult": "solbench.results.model",
    "ImplResult": "solbench.results.model",
    "ProfileRequest": "solbench.tools.profile",
    "RunResult": "solbench.results.model",
    "TuneOptions": "solbench.tools.tune",
    "compare_impls": "solbench.analysis.compare",
    "compare_runs": "solbench.analysis.compare",
    "gate": "solbench.analysis.gate",
    "load": "solbench.results.store",
    "parse_threshold": "solbench.analysis.thresholds",
    "profile": "solbench.tools.profile",
    "save": "solbench.results.store",
    "tune": "solbench.tools.tune",
    "DEFAULT_GPU_ROUNDS": "solbench.plan.options",
    "Planned": "solbench.plan.workloads",
    "Prepared": "solbench.plan.prepare",
    "Progress": "solbench.plan.options",
    "RunOptions": "solbench.plan.options",
    "ab": "solbench.execute.ab",
    "bench": "solbench.tools.bench",
    "calibrate": "solbench.tools.info",
    "cost_of": "solbench.plan.workloads",
    "device_summary": "solbench.tools.info",
    "dry_run": "solbench.plan.workloads",
    "gate_live": "solbench.execute.run",
    "hardware_spec": "solbench.tools.info",
    "import_problems": "solbench.suites.export",
    "list_specs": "solbench.tools.info",
    "list_workloads": "solbench.tools.info",
    "load_run": "solbench.tools.info",
    "measured_spec": "solbench.plan.device",
    "plan": "solbench.plan.workloads",
    "prepare": "solbench.plan.prepare",
    "rounds_for": "solbench.plan.options",
    "run": "solbench.execute.run",
    "start_for_run": "solbench.execute.early",
    "suite_summary": "solbench.analysis.suite_summary",
    "with_end_clocks": "solbench.plan.device",
    "with_peaks": "solbench.plan.device",
}

# What ``solbench`` itself re-exports of them: the entry points docs/api.md lists ("Where the
# functions live"), not the plumbing the CLI uses. ``plan`` is left out: ``solbench.plan`` is the package.
PUBLIC = frozenset({
    "run", "gate_live", "ab", "RunOptions", "dry_run", "cost_of", "hardware_spec", "load_run", "calibrate",
    "device_summary", "tune", "TuneOptions", "bench", "BenchResult", "profile", "ProfileRequest", "compare_runs",
    "compare_impls", "suite_summary", "gate", "parse_threshold", "RunResult", "CaseResult", "ImplResult", "load",
    "save",
})
