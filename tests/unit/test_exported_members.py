import solbench


def test_all_is_explicit_and_importable():
    for name in solbench.__all__:
        assert hasattr(solbench, name), name
    assert set(solbench.__all__) == {
        "CaseResult", "ConfigError", "DeviceError", "GateRefused", "ImplResult", "ResultsFormatError", "ResultsWriteError",
        "RunInterrupted",
        "RunOptions", "RunResult", "Score", "SolbenchError", "Timing", "__version__", "compare_impls",
        "compare_runs", "dry_run", "gate", "hardware_spec", "load_run", "run"}
