import pytest

from solbench.api import measured_spec
from solbench.config.hwspecs import get_spec
from solbench.errors import ResultsFormatError
from solbench.results import store
from solbench.results.model import Calibration


def cal(**kw):
    fields = dict(created="2026-11-30T00:00:00+00:00", spec_id="h200-sxm", device_name="NVIDIA H200",
                  device_uuid="GPU-1234", bandwidth=4.08e12, tensor_peaks={"bf16": 680e12},
                  vector_peaks={"fp32": 50e12}, burst_peaks={"bf16": 746e12, "fp32": 51e12}, protocol="test")
    fields.update(kw)
    return Calibration(**fields)


def test_calibration_round_trip(tmp_path):
    path = store.save_calibration(cal(), tmp_path)
    assert path == tmp_path / "calibration" / "h200-sxm" / "gpu-1234.json"
    assert store.load_calibration(tmp_path, "h200-sxm", "GPU-1234") == cal()


def test_measured_spec_replaces_measured_ceilings_only(tmp_path):
    store.save_calibration(cal(), tmp_path)
    sheet = get_spec("h200")
    spec = measured_spec(sheet, "GPU-1234", tmp_path)
    assert spec.source == "measured"
    bf16 = spec.peaks_for("bfloat16")
    assert bf16.tensor_flops == 680e12 and bf16.bandwidth == 4.08e12
    assert (bf16.tensor_source, bf16.bandwidth_source) == ("measured", "measured")
    assert spec.peaks_for("float8_e4m3fn").tensor_flops == sheet.peaks_for("float8_e4m3fn").tensor_flops
    assert "datasheet for" in spec.notes[-1] and "fp8" in spec.notes[-1]


def test_the_note_names_the_vector_peaks_that_stayed_the_datasheets(tmp_path):
    """calibrate measures the fp32 vector rate only: a bf16 case's vector term stays at the datasheet's."""
    store.save_calibration(cal(), tmp_path)
    spec = measured_spec(get_spec("h200"), "GPU-1234", tmp_path)
    assert spec.peaks_for("bfloat16").vector_flops == get_spec("h200").vector_peaks["bf16"]
    assert spec.notes[-1].endswith("; datasheet for fp16 tensor, fp64 tensor, fp8 tensor, int8 tensor, tf32 tensor, "
                                   "bf16 vector, fp16 vector, fp64 vector")


def test_missing_calibration_says_how_to_make_one(tmp_path):
    with pytest.raises(ResultsFormatError, match="solbench calibrate"):
        measured_spec(get_spec("h200"), "GPU-none", tmp_path)


@pytest.mark.parametrize("seconds", ["nan", "inf"])
def test_calibrate_refuses_a_window_that_is_not_finite(seconds, tmp_path):
    from click.testing import CliRunner

    from solbench.cli import main

    # click's FloatRange(min=0.1) lets both through: inf GEMMs forever, NaN times none
    result = CliRunner().invoke(main, ["calibrate", "--seconds", seconds, "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: --seconds must be a positive finite number, got {seconds}"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("other", [{"spec_id": "b200"}, {"device_uuid": "GPU-5678"}, {"device_uuid": None}])
def test_a_calibration_of_another_device_at_this_ones_path_is_refused(tmp_path, other):
    """A record copied or renamed into this device's place holds another card's ceilings."""
    import dataclasses
    import json

    from solbench.results.codec import encode

    path = store.calibration_path(tmp_path, "h200-sxm", "GPU-1234")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(encode(dataclasses.asdict(cal(**other, tensor_peaks={"bf16": 2e15})))))
    with pytest.raises(ResultsFormatError, match=r"gpu-1234\.json: measured on .*not on this device"):
        measured_spec(get_spec("h200"), "GPU-1234", tmp_path)


def _fake_gpu_calibration(monkeypatch, nvml_module):
    """``api.calibrate`` on no GPU: detection says CUDA, the measurements are fixed numbers, and NVML
    is ``nvml_module`` (a stand-in pynvml, or None: no NVML)."""
    import contextlib

    import torch

    from solbench.device import calibrate as cal_module
    from solbench.device import detect as detect_module
    from solbench.device import nvml
    from solbench.device.detect import DeviceInfo

    info = DeviceInfo(kind="cuda", index=0, name="NVIDIA H200", spec=get_spec("h200"), nvml=None,
                      torch_version=None, cuda_version=None, cupy_version=None, driver=None, sm_count=132,
                      l2_bytes=None)
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": info)
    monkeypatch.setattr(cal_module, "copy_bandwidth", lambda torch: 4.0e12)
    monkeypatch.setattr(cal_module, "gemm_rates", lambda torch, unit, n, seconds: [6e14, 7e14])
    monkeypatch.setattr(nvml, "_state", {"module": nvml_module, "tried": True})
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())


def test_calibrate_records_the_driver_version_nvml_reports(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from solbench import api

    fake = SimpleNamespace(NVMLError=RuntimeError, nvmlSystemGetDriverVersion=lambda: b"580.159.04")
    _fake_gpu_calibration(monkeypatch, fake)
    result, path, _ = api.calibrate(results_dir=tmp_path)
    assert result.driver == "580.159.04"
    assert store.read_calibration(path).driver == "580.159.04"
    _fake_gpu_calibration(monkeypatch, None)  # no NVML: unknown, not a guess
    result, path, _ = api.calibrate(results_dir=tmp_path)
    assert result.driver is None and store.read_calibration(path).driver is None


def test_a_calibration_saved_before_the_driver_was_recorded_still_loads(tmp_path):
    import dataclasses
    import json

    from solbench.results.codec import encode

    old = encode(dataclasses.asdict(cal()))
    del old["driver"]
    path = store.calibration_path(tmp_path, "h200-sxm", "GPU-1234")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    loaded = store.load_calibration(tmp_path, "h200-sxm", "GPU-1234")
    assert loaded.driver is None and loaded.bandwidth == 4.08e12
    assert measured_spec(get_spec("h200"), "GPU-1234", tmp_path).source == "measured"


def test_the_note_calls_the_ceilings_kept_from_an_estimated_spec_estimated(tmp_path):
    """A GPU no spec file matches (or a MIG slice) is scored against estimated peaks: the ceilings
    calibrate did not measure stay those estimates, not a datasheet's."""
    from solbench.analysis.hwspec import estimate_spec

    guess = estimate_spec(name="NVIDIA L40", compute_capability="8.9", sm_count=142, sm_clock_mhz=2490,
                          bandwidth=864e9)
    store.save_calibration(cal(spec_id=guess.id), tmp_path)
    spec = measured_spec(guess, "GPU-1234", tmp_path)
    assert spec.notes[-1].endswith("; estimated for fp16 tensor, fp8 tensor, int8 tensor, tf32 tensor, fp64 vector")
    assert "datasheet" not in spec.notes[-1]


def test_calibrate_measures_on_the_device_it_names(tmp_path, monkeypatch):
    """``api.calibrate(device="cuda:1")`` saves its ceilings under GPU 1's UUID: they must be measured
    with GPU 1 current, not on torch's current device (GPU 0), where every tensor and event goes."""
    import contextlib
    from dataclasses import replace

    import torch

    from solbench import api
    from solbench.device import calibrate as cal_module
    from solbench.device import detect as detect_module

    _fake_gpu_calibration(monkeypatch, None)
    info = detect_module.detect()
    monkeypatch.setattr(detect_module, "detect", lambda device="auto": replace(info, index=1, uuid="GPU-1"))
    current = [0]

    @contextlib.contextmanager
    def device(index):
        before, current[0] = current[0], index
        try:
            yield
        finally:
            current[0] = before

    seen = []
    monkeypatch.setattr(torch.cuda, "device", device)
    monkeypatch.setattr(cal_module, "copy_bandwidth", lambda torch: seen.append(current[0]) or 4.0e12)
    result, path, _ = api.calibrate(results_dir=tmp_path, device="cuda:1")
    assert seen == [1] and store.read_calibration(path).device_uuid == result.device_uuid == "GPU-1"


def _measured_run(spec, dtype):
    """A run scored against ``spec`` (``--peaks measured``) with one ``dtype`` case."""
    import dataclasses

    from solbench.results.model import SpecRef
    from tests.unit.factories import make_case, make_run

    case = dataclasses.replace(make_case("gemm", {"baseline": [1e-5] * 5}), dtype=dtype, peaks=spec.peaks_for(dtype))
    return dataclasses.replace(make_run({}), spec=SpecRef(spec.id, spec.name, spec.source), cases=(case,))


def test_each_ceiling_a_case_uses_says_where_it_came_from(tmp_path):
    """calibrate measures no fp8 GEMM: an fp8 case's tensor ceiling stays the datasheet's (its vector
    ceiling is the measured fp32 rate); a bf16 case's vector ceiling stays the datasheet's."""
    store.save_calibration(cal(), tmp_path)
    spec = measured_spec(get_spec("h200"), "GPU-1234", tmp_path)
    fp8 = spec.peaks_for("float8_e4m3fn")
    assert (fp8.tensor_source, fp8.vector_source, fp8.bandwidth_source) == ("datasheet", "measured", "measured")
    assert fp8.source == "mixed"
    bf16 = spec.peaks_for("bfloat16")
    assert (bf16.tensor_source, bf16.vector_source, bf16.bandwidth_source) == ("measured", "datasheet", "measured")
    fp32 = spec.peaks_for("float32")  # priced at the measured fp32 rate: every ceiling measured
    assert (fp32.source, fp32.tensor_source, fp32.vector_source) == ("measured", "measured", "measured")
    from solbench.plan.workloads import peaks_at

    as_fp16 = peaks_at(spec, "float32", "fp16")  # a float32 case priced at the fp16 tensor rate, not measured
    assert (as_fp16.source, as_fp16.tensor_source, as_fp16.vector_source) == ("mixed", "datasheet", "measured")
    sheet = get_spec("h200").peaks_for("float8_e4m3fn")
    assert (sheet.source, sheet.tensor_source, sheet.bandwidth_source) == ("datasheet", "datasheet", "datasheet")


def test_the_roofline_csv_and_header_of_a_measured_run_name_the_datasheet_ceilings_it_kept(tmp_path):
    from solbench.report.console import run_header
    from solbench.report.csv import run_csv
    from solbench.report.html import report_html
    from solbench.report.markdown import run_markdown
    from solbench.report.roofline import roofs

    store.save_calibration(cal(), tmp_path)
    run = _measured_run(measured_spec(get_spec("h200"), "GPU-1234", tmp_path), "float8_e4m3fn")
    assert [r.label for r in roofs([run])] == ["fp8 tensor 1.98 PFLOP/s (datasheet)",
                                               "fp8 vector 50.0 TFLOP/s (measured)", "memory 4.08 TB/s (measured)"]
    [row] = __import__("csv").DictReader(__import__("io").StringIO(run_csv([run])))
    assert (row["peaks_source"], row["tensor_peak_source"], row["vector_peak_source"], row["bandwidth_source"]) == (
        "mixed", "datasheet", "measured", "measured")
    assert "peaks: measured; datasheet for float8_e4m3fn tensor)" in run_header(run)
    assert "(h200-sxm, measured peaks; datasheet for float8_e4m3fn tensor)" in run_markdown(run)
    assert "h200-sxm (measured; datasheet for float8_e4m3fn tensor)" in report_html([run])


def test_a_run_saved_before_each_ceiling_had_its_source_shows_as_before(tmp_path):
    import dataclasses
    import json

    from solbench.report.console import run_header
    from solbench.report.csv import run_csv
    from solbench.report.roofline import roofs
    from solbench.results.codec import encode

    store.save_calibration(cal(), tmp_path)
    run = _measured_run(measured_spec(get_spec("h200"), "GPU-1234", tmp_path), "bfloat16")
    old = encode(dataclasses.asdict(run))
    old["cases"][0]["peaks"] = {k: v for k, v in old["cases"][0]["peaks"].items() if not k.endswith("_source")}
    old["cases"][0]["peaks"]["source"] = "measured"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = store.load(path)
    assert [r.label.rsplit(" (", 1)[1] for r in roofs([loaded])] == ["measured)"] * 3
    [row] = __import__("csv").DictReader(__import__("io").StringIO(run_csv([loaded])))
    assert {row[k] for k in ("peaks_source", "tensor_peak_source", "vector_peak_source", "bandwidth_source")} == {
        "measured"}
    assert "peaks: measured)" in run_header(loaded)


def test_calibrate_names_the_file_it_saved_as_it_is(tmp_path, monkeypatch):
    """The closing line went through rich markup: a results folder named with ``[/]`` saved the
    calibration, then crashed (MarkupError, exit 5); one with ``[red]`` lost those characters."""
    from click.testing import CliRunner

    from solbench.cli import main

    _fake_gpu_calibration(monkeypatch, None)
    for folder in ("r[red]s", "r[/]s"):
        result = CliRunner().invoke(main, ["calibrate", "--seconds", "0.1", "--results-dir", str(tmp_path / folder)])
        assert result.exit_code == 0, result.output
        saved = store.calibration_path(tmp_path / folder, "h200-sxm", None)
        assert saved.is_file() and f"saved {saved}\n" in result.output


def test_the_header_names_an_fp8_rows_datasheet_ceiling_in_a_bf16_case_of_a_measured_run(tmp_path):
    """o_proj is a bf16 case; its ``fp8`` row is scored at the FP8 peak (``peak_dtype``), which calibrate does
    not measure: the header says that ceiling stayed the datasheet's, as it does for an FP8 case."""
    import dataclasses

    from solbench.plan.workloads import case_result, plan
    from solbench.report.console import run_header
    from solbench.results.model import ImplResult, SpecRef
    from tests.unit.factories import make_run, make_timing

    store.save_calibration(cal(), tmp_path)
    spec = measured_spec(get_spec("h200"), "GPU-1234", tmp_path)
    (p,) = plan(["workloads/attn.yaml"], "cuda", only=("o_proj",), cases=("tokens=2048,bfloat16",))
    (case,) = p.cases
    timed = [ImplResult(name, "ok", timing=make_timing([t * (1 + 0.001 * k) for k in range(-2, 3)]))
             for name, t in (("baseline", 2e-4), ("fp8", 1e-4))]
    result = case_result(p, case, spec, timed)
    scored = {r.name: r for r in result.impls}
    assert scored["fp8"].score.peak_sources == {"float8_e4m3fn tensor": "datasheet", "float8_e4m3fn vector": "measured"}
    assert scored["baseline"].score.peak_sources == {}
    run = dataclasses.replace(make_run({}), spec=SpecRef(spec.id, spec.name, spec.source), cases=(result,))
    assert "datasheet for bfloat16 vector, float8_e4m3fn tensor)" in run_header(run)
