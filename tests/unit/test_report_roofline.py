"""Roofline points, roofs and arrows (pure), and the PNG figures (matplotlib)."""

import dataclasses
import io

import pytest

from solbench.report.roofline import _arrows as arrows
from solbench.report.roofline import histograms_png, impl_names, roofline_png, roofline_points, roofs
from solbench.results.model import Calibration, Peaks
from tests.unit.factories import make_case, make_run

PNG = b"\x89PNG\r\n\x1a\n"


def _scored(case, flops_by_impl, *, baseline="baseline", intensity=20.0, dtype="bfloat16", peaks=None):
    impls = []
    for r in case.impls:
        if r.score is not None:
            r = dataclasses.replace(r, score=dataclasses.replace(r.score, achieved_flops=flops_by_impl[r.name]))
        impls.append(r)
    return dataclasses.replace(case, impls=tuple(impls), baseline=baseline, intensity=intensity, dtype=dtype,
                               peaks=peaks or case.peaks)


def two_workload_run():
    """o_proj (bf16, baseline/fused/extra) and a norm case (fp16, an errored fused); H100-like peaks."""
    a = _scored(make_case("o_proj[t=16]", {"baseline": [2e-5] * 20, "fused": [1e-5] * 20, "extra": [1.5e-5] * 20},
                          workload="o_proj"), {"baseline": 1e12, "fused": 2e12, "extra": 1.5e12}, intensity=1.0)
    fp16 = Peaks(tensor_flops=989e12, vector_flops=67e12, bandwidth=3.35e12, source="datasheet")
    b = _scored(make_case("norm[h=768]", {"baseline": [3e-5] * 20, "fused": [1e-5] * 20}, workload="norm",
                          statuses={"norm[h=768]/fused": "error"}), {"baseline": 5e11}, intensity=0.8,
                dtype="float16", peaks=fp16)
    return dataclasses.replace(make_run({}), cases=(a, b))


def test_points_are_every_scored_implementation():
    points = roofline_points([two_workload_run()])
    assert {(p.case_id, p.impl) for p in points} == {("o_proj[t=16]", "baseline"), ("o_proj[t=16]", "fused"),
                                                    ("o_proj[t=16]", "extra"), ("norm[h=768]", "baseline")}
    fused = next(p for p in points if p.impl == "fused")
    assert fused.intensity == 1.0 and fused.flops_per_s == 2e12 and not fused.is_baseline


def test_arrows_go_from_baseline_to_fused_else_to_the_fastest():
    points = roofline_points([two_workload_run()])
    pairs = {(a.impl, b.impl) for a, b in arrows(points)}
    assert pairs == {("baseline", "fused")}  # norm has no scored non-baseline implementation
    no_fused = [p for p in points if p.impl != "fused"]
    assert {(a.impl, b.impl) for a, b in arrows(no_fused)} == {("baseline", "extra")}


def test_roofs_merge_dtypes_sharing_a_ceiling_and_add_measured_ones():
    run = two_workload_run()
    labels = [r.label for r in roofs([run])]
    assert labels == ["bf16/fp16 tensor 989 TFLOP/s (datasheet)", "bf16/fp16 vector 67.0 TFLOP/s (datasheet)",
                      "memory 3.35 TB/s (datasheet)"]
    cal = Calibration("2025", "h100-sxm", "H100", None, bandwidth=3.0e12, tensor_peaks={"bf16": 7e14, "fp8": 1.4e15},
                      vector_peaks={"fp32": 5e13}, burst_peaks={}, protocol="test")
    measured = [r for r in roofs([run], cal) if r.measured]
    assert [r.label for r in measured] == ["bf16 tensor 700 TFLOP/s (measured)", "fp32 vector 50.0 TFLOP/s (measured)",
                                           "memory 3.00 TB/s (measured)"]  # fp8: no fp8 case in the run
    assert [r.kind for r in measured] == ["compute", "compute", "memory"]


def test_roofline_and_histograms_are_png_images():
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    run = two_workload_run()
    png = roofline_png([run])
    assert png.startswith(PNG)
    height, width = imread(io.BytesIO(png)).shape[:2]
    assert (width, height) == (1000, 650)
    hist = histograms_png(run.cases, names=impl_names([run]))
    assert hist.startswith(PNG)
    assert impl_names([run]) == ["baseline", "extra", "fused"]


def test_a_run_without_scored_points_still_draws_its_roofs():
    pytest.importorskip("matplotlib")
    run = make_run({"c": {"baseline": [1e-3] * 5}}, statuses={"c/baseline": "error"})
    assert roofline_points([run]) == []
    assert roofline_png([run]).startswith(PNG)



def test_a_string_parameter_with_dollar_signs_is_drawn_as_text():
    """A case's parameters title its histogram; matplotlib read `$...$` in them as mathtext, and a value
    it could not parse (`$\\frac$`) failed `report --html` with a traceback (exit 5)."""
    pytest.importorskip("matplotlib")
    case = dataclasses.replace(make_case("c", {"baseline": [1e-5, 2e-5, 3e-5]}), params={"mode": "$\\frac$"})
    assert histograms_png([case]).startswith(PNG)


def test_every_implementation_is_named_in_its_histograms_legend(monkeypatch):
    """matplotlib leaves a label that starts with `_` out of a legend it gathers itself: an implementation
    named `_v2` (a valid name) drew bars that no legend entry named."""
    pytest.importorskip("matplotlib")
    import solbench.report.roofline as roofline

    figures = []
    monkeypatch.setattr(roofline, "_png", lambda fig: figures.append(fig) or PNG)
    histograms_png([make_case("c", {"baseline": [1e-5, 2e-5, 3e-5], "_v2": [2e-5, 3e-5, 4e-5]})])
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["baseline", "_v2"]


def test_arrows_stay_within_a_run():
    """Two runs of one case in one report: each run's baseline points to that run's own implementation;
    grouped by case id alone, one arrow went from the first run's baseline to the fastest of both runs."""
    def run(flops):
        case = _scored(make_case("o_proj[t=16]", {"baseline": [2e-5] * 5, "fast": [1e-5] * 5}), flops)
        return dataclasses.replace(make_run({}), cases=(case,))

    points = roofline_points([run({"baseline": 1e12, "fast": 2e12}), run({"baseline": 1.5e12, "fast": 1.8e12})])
    pairs = sorted((a.flops_per_s, b.flops_per_s) for a, b in arrows(points))
    assert pairs == [(1e12, 2e12), (1.5e12, 1.8e12)]


def test_no_histogram_where_nothing_was_sampled():
    pytest.importorskip("matplotlib")
    failed = make_case("c", {"baseline": []}, statuses={"c/baseline": "error"})
    assert histograms_png([failed]) is None
