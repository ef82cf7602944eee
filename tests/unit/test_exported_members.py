import solbench


def test_all_is_explicit_and_importable():
    for name in solbench.__all__:
        assert hasattr(solbench, name), name
    assert set(solbench.__all__) == {
        "BenchResult", "CaseResult", "ConfigError", "DeviceError", "GateRefused", "ImplResult", "ResultsFormatError",
        "ResultsWriteError", "RunInterrupted", "RunOptions", "RunResult", "Score", "SolbenchError", "Timing",
        "__version__", "bench", "compare_impls", "compare_runs", "dry_run", "gate", "hardware_spec", "load_run", "run",
        # docs/api.md's table ("Where the functions live"), the same from solbench and solbench.api
        "ab", "calibrate", "cost_of", "device_summary", "gate_live", "load", "parse_threshold", "profile",
        "ProfileRequest", "save", "suite_summary", "tune", "TuneOptions"}


def test_exported_names_are_never_shadowed_by_modules() -> None:
    """``from solbench import gate`` is the function, even after every submodule was imported
    (a submodule named like an export would otherwise replace it as an attribute)."""
    import subprocess
    import sys

    code = ("import importlib, pkgutil, types, solbench\n"
            "skip = ('solbench.impls.', 'solbench.kernels.', 'solbench.execute.ray', 'solbench.device.cupti')\n"
            "for m in pkgutil.walk_packages(solbench.__path__, 'solbench.'):\n"
            "    if not m.name.startswith(skip) and m.name != 'solbench.__main__':\n"
            "        importlib.import_module(m.name)\n"
            "from solbench import gate, run, compare_runs, compare_impls, dry_run, load_run, hardware_spec\n"
            "bad = [n for n in solbench.__all__ if isinstance(getattr(solbench, n), types.ModuleType)]\n"
            "assert not bad, bad\n"
            "assert callable(gate) and gate.__module__ == 'solbench.analysis.gate'\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
