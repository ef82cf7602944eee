"""gate and compare across runs over several devices: a case is compared only with the same GPU model."""

import io
from dataclasses import replace

import numpy as np
import pytest
from rich.console import Console

from solbench.analysis.compare import compare_runs, device_model
from solbench.analysis.gate import check_fingerprints, gate
from solbench.errors import ConfigError, GateRefused
from solbench.report.compare_console import comparison_table
from solbench.report.compare_json import comparison_json
from tests.unit.factories import make_env, make_run, noisy

H200 = make_env(device_name="NVIDIA H200", spec_id="h200-sxm")
H100 = make_env()  # NVIDIA H100 80GB HBM3, h100-sxm


def _runs(slower=1.0, seed=0):
    rng = np.random.default_rng(seed)
    ids = ("a", "b")
    base = make_run({c: {"x": noisy(rng, 40)} for c in ids})
    cur = make_run({c: {"x": noisy(rng, 40, median=1e-3 * slower)} for c in ids})
    return base, cur


def _on(run, models):
    """``run`` with case i measured on ``models[i]`` (a run over several devices)."""
    return replace(run, cases=tuple(replace(c, device=replace(m, device_index=i))
                                    for i, (c, m) in enumerate(zip(run.cases, models, strict=True))))


def test_a_case_on_another_gpu_model_is_not_comparable_and_never_a_regression():
    base, cur = _runs(slower=1.5)
    base = _on(base, [H100, H100])
    cur = _on(cur, [H100, H200])  # case b moved to an H200 lane: 50% slower there, but not comparable
    g = gate(base, cur)
    by_key = {v.key: v for v in g.verdicts}
    assert by_key["a/x"].verdict == "REGRESSION"
    b = by_key["b/x"]
    assert b.verdict == "MISSING" and "not comparable: other GPU model" in b.reason
    assert "NVIDIA H200 (h200-sxm)" in b.reason and b.median_base and b.median_cur


def test_same_model_on_another_lane_is_compared():
    base, cur = _runs()
    g = gate(_on(base, [H100, H100]), _on(cur, [H100, H100]))
    assert {v.verdict for v in g.verdicts} == {"PASS"}


def test_run_level_device_is_not_checked_when_cases_carry_their_own():
    base, cur = _runs()
    base = replace(base, environment=H200)  # a one-device H100 run whose run-level record says H200
    with pytest.raises(GateRefused):
        gate(base, cur)
    g = gate(_on(base, [H100, H100]), cur)  # per-case records: checked case by case, all H100
    assert g.overall == "PASS" and not g.fingerprint_diffs
    assert check_fingerprints(H100, H200, device=False) == []
    assert check_fingerprints(H100, replace(H200, driver="1"), device=False) == [
        "driver: 550.54.15 (baseline) vs 1 (current)"]


def test_allow_cross_hardware_compares_other_models_anyway():
    base, cur = _runs(slower=1.5)
    g = gate(_on(base, [H100, H100]), _on(cur, [H100, H200]), allow_cross_hardware=True)
    assert {v.verdict for v in g.verdicts} == {"REGRESSION"}


def test_nothing_comparable_is_an_error_naming_why():
    base, cur = _runs()
    with pytest.raises(ConfigError, match="2 on other GPU models"):
        gate(_on(base, [H100, H100]), _on(cur, [H200, H200]))


def test_compare_lists_other_models_apart():
    base, cur = _runs()
    c = compare_runs(_on(base, [H100, H100]), _on(cur, [H100, H200]))
    assert [r.key for r in c.rows] == ["a/x"]
    assert c.not_comparable == {"b/x": "NVIDIA H100 80GB HBM3 (h100-sxm) vs NVIDIA H200 (h200-sxm)"}
    assert comparison_json(c)["not_comparable"] == c.not_comparable
    out = Console(width=200, file=io.StringIO())
    out.print(comparison_table(c))
    assert "not comparable: other GPU model" in out.file.getvalue()


def test_compare_markdown_lists_other_models_apart_too():
    """compare --markdown dropped a key measured on another GPU model, which the table and the JSON list:
    the comparison read as if the key were not in the runs."""
    from solbench.report.markdown import comparison_markdown

    base, cur = _runs()
    md = comparison_markdown(compare_runs(_on(base, [H100, H100]), _on(cur, [H100, H200])))
    assert "- `b/x`: NVIDIA H100 80GB HBM3 (h100-sxm) vs NVIDIA H200 (h200-sxm)" in md
    assert "Not comparable, other GPU model" in md


def test_compare_of_one_device_runs_still_compares_gpus():
    base, cur = _runs()
    c = compare_runs(base, replace(cur, environment=H200))  # comparing two GPUs is a use of compare
    assert len(c.rows) == 2 and c.not_comparable == {}


def test_device_model_falls_back_to_the_run():
    base, _ = _runs()
    assert device_model(base, base.cases[0]) == "NVIDIA H100 80GB HBM3 (h100-sxm)"
    assert device_model(base, _on(base, [H200, H200]).cases[0]) == "NVIDIA H200 (h200-sxm)"
