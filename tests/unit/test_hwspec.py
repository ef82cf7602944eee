"""Hardware spec files, lookup by PCI ID and name, peak selection per dtype, and datasheet sanity."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from solbench.analysis.hwspec import HardwareSpec, estimate_spec, match_spec, per_sm_rates, strip_mig
from solbench.config.hwspecs import get_spec, load_specs, specs_dir
from solbench.errors import ConfigError

REQUIRED_IDS = {
    "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie",
    "h100-nvl", "h200-sxm", "h200-nvl", "h20", "b200", "gb200", "l4", "l40s", "a10", "t4", "v100-sxm2",
    "rtx-4090", "rtx-3090", "cpu",
}

# Device names as NVML and torch report them.
REAL_NAMES = {
    "NVIDIA H200": "h200-sxm",
    "NVIDIA H200 NVL": "h200-nvl",
    "NVIDIA H20": "h20",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H100 NVL": "h100-nvl",
    "NVIDIA A100-SXM4-40GB": "a100-sxm4-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-sxm4-80gb",
    "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
    "NVIDIA B200": "b200",
    "NVIDIA GB200": "gb200",
    "NVIDIA L4": "l4",
    "NVIDIA L40S": "l40s",
    "NVIDIA A10": "a10",
    "Tesla T4": "t4",
    "Tesla V100-SXM2-32GB": "v100-sxm2",
    "Tesla V100-SXM2-16GB": "v100-sxm2",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    # MIG slices keep the parent's name plus a profile suffix.
    "NVIDIA A100-SXM4-40GB MIG 1g.5gb": "a100-sxm4-40gb",
    "NVIDIA A100-SXM4-80GB MIG 3g.40gb": "a100-sxm4-80gb",
    "NVIDIA A100 80GB PCIe MIG 2g.20gb": "a100-pcie-80gb",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb": "h100-sxm",
    "NVIDIA H200 MIG 1g.18gb": "h200-sxm",
    "NVIDIA H100 NVL MIG 7g.94gb": "h100-nvl",
}

# Parts with no spec file (different SM counts, clocks or memory): they must match nothing, so
# detection estimates them instead of borrowing a sibling's peaks.
UNKNOWN_NAMES = [
    "NVIDIA L40", "NVIDIA L20", "NVIDIA A10G", "NVIDIA A40", "NVIDIA A100", "NVIDIA H100",
    "NVIDIA H800", "NVIDIA H800 80GB HBM3", "NVIDIA GH200 480GB", "NVIDIA B300", "NVIDIA GB300",
    "NVIDIA H20-3e", "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 5090", "Tesla V100-PCIE-32GB", "Tesla V100S-PCIE-32GB",
    "NVIDIA A800-SXM4-80GB", "NVIDIA RTX 6000 Ada Generation", "NVIDIA T400 4GB", "NVIDIA GB10", "",
]

# Documented per-SM dense rates (hardware-specs.md section 5), written out independently of the code.
BF16_RATE = {"8.0": 2048, "8.6": 1024, "8.9": 1024, "9.0": 4096, "10.0": 8192}


@pytest.fixture(scope="module")
def specs() -> tuple[HardwareSpec, ...]:
    return load_specs()


@pytest.fixture(scope="module")
def by_id(specs: tuple[HardwareSpec, ...]) -> dict[str, HardwareSpec]:
    return {s.id: s for s in specs}


def gpus(specs: tuple[HardwareSpec, ...]) -> list[HardwareSpec]:
    return [s for s in specs if s.kind == "gpu"]


def test_every_required_spec_file_loads(by_id: dict[str, HardwareSpec]) -> None:
    assert set(by_id) >= REQUIRED_IDS
    for spec in by_id.values():
        if spec.kind == "gpu":
            assert spec.source == "datasheet"
            assert spec.bandwidth and spec.bandwidth > 1e11, spec.id
            assert spec.vector_peaks["fp32"] > 1e12, spec.id
            assert spec.confidence in {"high", "medium", "low"}
            assert spec.name_patterns, spec.id
            assert spec.sources, spec.id


def test_spec_files_are_named_after_their_id() -> None:
    for path in specs_dir().glob("*.yaml"):
        text = path.read_text()
        assert re.search(rf"^id: {re.escape(path.stem)}$", text, re.MULTILINE), path
        assert text.startswith("# "), f"{path}: header comment on units missing"


@pytest.mark.parametrize(("name", "expected"), sorted(REAL_NAMES.items()))
def test_real_names_resolve_to_their_spec_and_no_other(specs: tuple[HardwareSpec, ...], name: str,
                                                       expected: str) -> None:
    found = match_spec(specs, name=name)
    assert found is not None and found.id == expected
    others = [s.id for s in specs if s.id != expected and s.match(name)]
    assert others == []


@pytest.mark.parametrize("name", UNKNOWN_NAMES)
def test_unknown_names_match_nothing(specs: tuple[HardwareSpec, ...], name: str) -> None:
    assert match_spec(specs, name=name) is None


def test_every_spec_resolves_by_each_pci_id(specs: tuple[HardwareSpec, ...]) -> None:
    for spec in gpus(specs):
        for pci in spec.pci_device_ids:
            assert match_spec(specs, pci_device_id=pci) is spec
            nvml_id = (pci << 16) | 0x10DE  # nvmlPciInfo.pciDeviceId: device << 16 | vendor
            assert match_spec(specs, pci_device_id=nvml_id) is spec
            assert [s.id for s in specs if pci in s.pci_device_ids] == [spec.id]


def test_pci_id_wins_over_name(specs: tuple[HardwareSpec, ...]) -> None:
    assert match_spec(specs, pci_device_id=0x20B5, name="NVIDIA A100-SXM4-40GB").id == "a100-pcie-80gb"
    # An unknown PCI ID falls back to the name.
    assert match_spec(specs, pci_device_id=0x2685, name="NVIDIA L4").id == "l4"


def test_known_pci_ids(by_id: dict[str, HardwareSpec]) -> None:
    expected = {"h200-sxm": 0x2335, "h200-nvl": 0x233B, "h100-sxm": 0x2330, "h100-pcie": 0x2331,
                "h100-nvl": 0x2321, "h20": 0x2329, "a100-sxm4-40gb": 0x20B0, "a100-sxm4-80gb": 0x20B2,
                "a100-pcie-80gb": 0x20B5, "a100-pcie-40gb": 0x20F1, "b200": 0x2901, "gb200": 0x2941,
                "l40s": 0x26B9, "l4": 0x27B8, "a10": 0x2236, "t4": 0x1EB8, "v100-sxm2": 0x1DB5,
                "rtx-4090": 0x2684, "rtx-3090": 0x2204}
    for spec_id, pci in expected.items():
        assert pci in by_id[spec_id].pci_device_ids, spec_id


def test_match_priority_orders_lookalikes(by_id: dict[str, HardwareSpec]) -> None:
    prio = {k: s.match_priority for k, s in by_id.items()}
    assert prio["gb200"] < prio["b200"]
    assert prio["h200-nvl"] < prio["h200-sxm"] < prio["h20"]
    assert prio["l40s"] < prio["l4"]
    assert max(prio[k] for k in by_id if k.startswith("a100")) < prio["a10"]


def test_strip_mig() -> None:
    assert strip_mig("NVIDIA A100-SXM4-40GB MIG 1g.5gb") == "NVIDIA A100-SXM4-40GB"
    assert strip_mig("  NVIDIA  H200 ") == "NVIDIA H200"


def test_peaks_for_rules(by_id: dict[str, HardwareSpec]) -> None:
    h200 = by_id["h200-sxm"]
    bf16 = h200.peaks_for("bfloat16")
    assert bf16.tensor_flops == 989.4e12
    assert bf16.vector_flops == 133.8e12  # Hopper's packed non-tensor BF16: twice FP32 (architecture blog, Table 3)
    assert by_id["b200"].peaks_for("bfloat16").vector_flops == 75e12  # no public figure: the fp32 vector peak
    assert bf16.bandwidth == 4.8e12
    assert bf16.source == "datasheet"
    fp32 = h200.peaks_for("float32")
    assert fp32.tensor_flops == fp32.vector_flops == 66.9e12  # FP32 GEMMs run on CUDA cores
    assert h200.peaks_for("float32", tf32=True).tensor_flops == 494.7e12
    assert h200.peaks_for("float8_e4m3fn").tensor_flops == h200.peaks_for("float8_e5m2").tensor_flops == 1978.9e12
    assert h200.peaks_for("int8").tensor_flops == 1978.9e12
    f64 = h200.peaks_for("float64")
    assert (f64.tensor_flops, f64.vector_flops) == (66.9e12, 33.5e12)
    assert h200.peaks_for("torch.bfloat16") == bf16

    a100 = by_id["a100-sxm4-80gb"]
    assert a100.peaks_for("float8_e4m3fn").tensor_flops is None
    assert a100.peaks_for("float8_e4m3fn").vector_flops == 19.5e12
    assert a100.peaks_for("float16").vector_flops == 78e12
    assert a100.peaks_for("bfloat16").vector_flops == 39e12

    assert by_id["v100-sxm2"].peaks_for("bfloat16").tensor_flops is None
    assert by_id["v100-sxm2"].peaks_for("int8").tensor_flops is None
    assert by_id["v100-sxm2"].peaks_for("float32", tf32=True).tensor_flops == 15.7e12  # no TF32 unit
    assert by_id["t4"].peaks_for("bfloat16").tensor_flops is None
    assert by_id["t4"].peaks_for("float16").tensor_flops == 65e12
    l4_f64 = by_id["l4"].peaks_for("float64")  # no FP64 tensor unit: the vector peak
    assert l4_f64.tensor_flops == l4_f64.vector_flops == 0.47e12
    assert by_id["b200"].peaks_for("float4_e2m1fn_x2").tensor_flops == 9000e12
    assert by_id["rtx-4090"].peaks_for("bfloat16").tensor_flops == 165.2e12  # FP32 accumulate


def test_peaks_for_unknown_dtype_is_an_error(by_id: dict[str, HardwareSpec]) -> None:
    with pytest.raises(ConfigError, match="unknown dtype 'complex64'"):
        by_id["h200-sxm"].peaks_for("complex64")


def test_low_precision_tensor_peaks_match_sms_times_tensor_clock(specs: tuple[HardwareSpec, ...]) -> None:
    checked = 0
    for spec in gpus(specs):
        rates = per_sm_rates(spec.compute_capability or "", geforce="geforce" in spec.name.lower())
        if spec.tensor_spec_clock_mhz is None or rates is None:
            continue
        for unit in ("tf32", "bf16", "fp16", "fp8", "int8", "fp4"):
            if unit in spec.tensor_peaks and unit in rates.tensor:
                expected = spec.sm_count * spec.tensor_spec_clock_mhz * 1e6 * rates.tensor[unit]
                assert spec.tensor_peaks[unit] == pytest.approx(expected, rel=0.02), (spec.id, unit)
                checked += 1
        # The rate table itself, against the documented BF16 rates.
        if "bf16" in spec.tensor_peaks and "geforce" not in spec.name.lower():
            assert rates.tensor["bf16"] == BF16_RATE[spec.compute_capability]
    assert checked >= 60


def test_fp32_and_fp64_peaks_match_sms_times_max_clock(specs: tuple[HardwareSpec, ...]) -> None:
    # FP64 and FP32 datasheet figures use the max clock; GB200's are ~2.4% above 148 SMs x 2.062 GHz.
    checked = 0
    for spec in gpus(specs):
        rates = per_sm_rates(spec.compute_capability or "", geforce="geforce" in spec.name.lower())
        if spec.max_sm_clock_mhz is None or rates is None:
            continue
        hz = spec.sm_count * spec.max_sm_clock_mhz * 1e6
        for unit in ("fp32", "fp64"):
            assert spec.vector_peaks[unit] == pytest.approx(hz * rates.vector[unit], rel=0.03), (spec.id, unit)
        if "fp64" in spec.tensor_peaks:
            assert spec.tensor_peaks["fp64"] == pytest.approx(hz * rates.tensor["fp64"], rel=0.03), spec.id
        checked += 1
    assert checked >= 15


def test_unit_ratios_catch_a_sparse_figure(specs: tuple[HardwareSpec, ...]) -> None:
    for spec in gpus(specs):
        t = spec.tensor_peaks
        if "bf16" in t:
            assert t["fp16"] == t["bf16"], spec.id
            assert t["tf32"] == pytest.approx(t["bf16"] / 2, rel=0.01), spec.id
        if "fp8" in t:
            assert t["fp8"] == pytest.approx(2 * t["fp16"], rel=0.01), spec.id
        assert t.get("bf16", 0) <= 40 * spec.vector_peaks["fp32"], spec.id  # 32x on GB200 is the most


def test_bandwidth_and_l2_against_h200_measurement(by_id: dict[str, HardwareSpec]) -> None:
    h200 = by_id["h200-sxm"]
    assert h200.bandwidth == 4.8e12
    # NVML on an H200 SXM (2026-11-30): max memory clock 3201 MHz, 6016-bit bus.
    assert h200.bandwidth == pytest.approx(3201e6 * 2 * 6016 / 8, rel=0.01)
    assert h200.l2_bytes == 62914560  # torch L2_cache_size on that H200
    assert by_id["a100-sxm4-40gb"].l2_bytes == 40 * 2**20


def test_aliases_and_ids_resolve() -> None:
    assert get_spec("h200").id == "h200-sxm"
    assert get_spec("H100").id == "h100-sxm"
    assert get_spec("a100").id == "a100-sxm4-80gb"
    assert get_spec("b200").id == "b200"
    assert get_spec(" L40S ").id == "l40s"
    assert get_spec("4090").id == "rtx-4090"
    with pytest.raises(ConfigError, match=r"unknown hardware spec 'h300'; known: .*h200-sxm"):
        get_spec("h300")


def test_cpu_spec_has_no_numbers_until_measured() -> None:
    cpu = get_spec("cpu")
    assert (cpu.kind, cpu.source, cpu.name_patterns) == ("cpu", "measured", ())
    assert cpu.tensor_peaks == {} and cpu.vector_peaks == {} and cpu.bandwidth is None
    with pytest.raises(ConfigError, match="measured"):
        cpu.peaks_for("float32")
    measured = cpu.with_peaks(vector={"fp32": 1e11}, bandwidth=2e10)
    assert measured.peaks_for("float32").tensor_flops == 1e11
    assert measured.peaks_for("bfloat16").tensor_flops is None
    assert measured.peaks_for("bfloat16").vector_flops == 1e11
    text = (specs_dir() / "cpu.yaml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert not re.search(r"\d", body.replace("fp32", "")), "cpu.yaml holds documentation only"


def _write_h200(tmp_path: Path, edit: tuple[str, str]) -> Path:
    text = (specs_dir() / "h200-sxm.yaml").read_text()
    old, new = edit
    assert re.search(old, text, re.MULTILINE), old
    path = tmp_path / "h200-sxm.yaml"
    path.write_text(re.sub(old, new, text, count=1, flags=re.MULTILINE))
    return path


BAD_FILES = [
    ((r"^bandwidth_tbs: .*\n", ""), "bandwidth_tbs: required field missing"),
    ((r"^bandwidth_tbs: .*$", "bandwidth_tbs: fast"), r":\d+: bandwidth_tbs: .*number.*'fast'"),
    ((r"^bandwidth_tbs: .*$", "bandwith_tbs: 4.8"), "bandwith_tbs: unknown field"),
    ((r"^sm_count: .*$", "sm_count: -132"), r"sm_count: .*greater than 0"),
    ((r"^sm_count: .*$", "sm_count: true"), "sm_count: .*integer"),
    ((r"^compute_capability: .*$", "compute_capability: 9.0"), "compute_capability: .*string"),
    ((r"^pci_device_ids: .*$", "pci_device_ids: [0x2335]"), r"pci_device_ids\.0: .*string"),
    ((r"^pci_device_ids: .*$", 'pci_device_ids: ["2335"]'), r"pci_device_ids\.0: .*pattern"),
    ((r"^name_patterns: .*$", "name_patterns: ['(H200']"), r"name_patterns\.0: invalid regex"),
    ((r"^vector_peaks_tflops: .*$", "vector_peaks_tflops: {fp64: 33.5}"), "vector_peaks_tflops: the fp32"),
    ((r"^tensor_peaks_tflops: \{", "tensor_peaks_tflops: {fp12: 1, "), r"tensor_peaks_tflops\.fp12"),
    ((r"^confidence: .*$", "confidence: sure"), "confidence: "),
    ((r"^id: .*$", "id: h200"), "'h200' must equal the file name 'h200-sxm'"),
    ((r"^tdp_w: .*$", "tdp_w: [700"), "invalid YAML"),
    # a rate in another unit made every T_SOL it sets 1000x off, and loaded
    ((r"^bandwidth_tbs: .*$", "bandwidth_tbs: 4800"), r"bandwidth_tbs: outside 0\.01-100 TB/s.*\(got 4800\)"),
    ((r"^bandwidth_tbs: .*$", "bandwidth_tbs: 0.0048"), r"bandwidth_tbs: outside 0\.01-100 TB/s.*in TB/s"),
    ((r"bf16: 989\.4", "bf16: 989400"), r"tensor_peaks_tflops\.bf16: outside 0\.1-100000 TFLOP/s"),
    ((r"fp32: 66\.9", "fp32: 66900"), r"vector_peaks_tflops\.fp32: outside 0\.001-1000 TFLOP/s"),
    # an interconnect in TB/s or MB/s made every collective's link term 1000x off, and loaded
    ((r"^nvlink_gbs: .*$", "nvlink_gbs: 0.9"), r"nvlink_gbs: outside 10-20000 GB/s.*900 for 900 GB/s"),
    ((r"^pcie_gbs: .*$", "pcie_gbs: 128000"), r"pcie_gbs: outside 10-20000 GB/s"),
]


@pytest.mark.parametrize(("edit", "message"), BAD_FILES)
def test_ill_formed_spec_names_file_and_field(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = _write_h200(tmp_path, edit)
    with pytest.raises(ConfigError) as info:
        load_specs(tmp_path)
    text = str(info.value)
    assert text.startswith(f"{path}:"), text
    assert re.search(message, text), text
    assert "\n" not in text


def test_every_shipped_rate_lies_well_inside_the_plausible_bounds(specs: tuple[HardwareSpec, ...]) -> None:
    """The bounds leave a clear margin (at least 3x) around every shipped GPU's rates (SI units here)."""
    gpus = [s for s in specs if s.kind == "gpu"]
    assert min(s.bandwidth for s in gpus) >= 0.01e12 * 3 and max(s.bandwidth for s in gpus) * 3 <= 100e12
    tensor = [v for s in gpus for v in s.tensor_peaks.values()]
    vector = [v for s in gpus for v in s.vector_peaks.values()]
    assert min(tensor) >= 0.1e12 * 3 and max(tensor) * 3 <= 1e17
    assert min(vector) >= 1e9 * 3 and max(vector) * 3 <= 1e15
    links = [2 * v for s in gpus for v in (s.nvlink_bandwidth, s.pcie_bandwidth) if v is not None]  # both directions
    assert min(links) >= 10e9 * 3 and max(links) * 3 <= 2e13


def test_error_line_number_points_at_the_field(tmp_path: Path) -> None:
    path = _write_h200(tmp_path, (r"^bandwidth_tbs: .*$", "bandwidth_tbs: fast"))
    line = 1 + next(i for i, s in enumerate(path.read_text().splitlines()) if s.startswith("bandwidth_tbs"))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:{line}: bandwidth_tbs"):
        load_specs(tmp_path)


def test_duplicate_pci_id_across_files_is_an_error(tmp_path: Path) -> None:
    _write_h200(tmp_path, (r"^id: .*$", "id: h200-sxm"))
    other = (specs_dir() / "h200-nvl.yaml").read_text().replace('"0x233b"', '"0x2335"')
    (tmp_path / "h200-nvl.yaml").write_text(other)
    with pytest.raises(ConfigError, match=r"'pci 0x2335' is also claimed by .*h200-nvl\.yaml"):
        load_specs(tmp_path)


@pytest.mark.parametrize(("edit", "field"), [
    ((r"^aliases: .*$", 'aliases: ["h200-nvl"]'), "aliases.0"),  # another file's id
    ((r"^pci_device_ids: .*$", 'pci_device_ids: ["0x2335", "0x233b"]'), "pci_device_ids.1"),
])
def test_duplicate_claim_names_file_line_and_field(tmp_path: Path, edit: tuple[str, str], field: str) -> None:
    (tmp_path / "h200-nvl.yaml").write_text((specs_dir() / "h200-nvl.yaml").read_text())
    path = _write_h200(tmp_path, edit)
    key = field.split(".")[0]
    line = 1 + next(i for i, s in enumerate(path.read_text().splitlines()) if s.startswith(f"{key}:"))
    with pytest.raises(ConfigError) as info:
        load_specs(tmp_path)
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: {field}: "), text
    assert re.search(r"is also claimed by .*h200-nvl\.yaml", text), text
    assert "\n" not in text


def test_a_yml_spec_file_is_read_as_a_yaml_one(tmp_path: Path) -> None:
    _write_h200(tmp_path, (r"^id: .*$", "id: h200-sxm")).rename(tmp_path / "h200-sxm.yml")
    assert [s.id for s in load_specs(tmp_path)] == ["h200-sxm"]


def test_a_yaml_and_a_yml_spec_file_of_one_name_is_an_error_naming_both(tmp_path: Path) -> None:
    yaml_file = _write_h200(tmp_path, (r"^id: .*$", "id: h200-sxm"))
    yml_file = tmp_path / "h200-sxm.yml"
    yml_file.write_text(yaml_file.read_text())
    with pytest.raises(ConfigError) as info:
        load_specs(tmp_path)
    assert str(info.value) == f"{yaml_file} and {yml_file}: two hardware spec files named 'h200-sxm'; keep one"


def test_specs_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_h200(tmp_path, (r"^id: .*$", "id: h200-sxm"))
    monkeypatch.setenv("SOLBENCH_SPECS_DIR", str(tmp_path))
    assert [s.id for s in load_specs()] == ["h200-sxm"]
    monkeypatch.setenv("SOLBENCH_SPECS_DIR", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="hardware spec directory not found"):
        load_specs()


def test_estimate_spec_uses_per_sm_rates() -> None:
    est = estimate_spec(name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", compute_capability="9.0", sm_count=132,
                        sm_clock_mhz=1980, bandwidth=3.35e12)
    assert est.source == "estimated" and est.id == "estimated-nvidia-h100-80gb-hbm3"
    assert est.tensor_peaks["bf16"] == pytest.approx(132 * 1980e6 * 4096)
    assert est.peaks_for("float32").tensor_flops == pytest.approx(132 * 1980e6 * 256)
    assert "no spec file matches" in est.notes[0]
    geforce = estimate_spec(name="NVIDIA GeForce RTX 4080", compute_capability="8.9", sm_count=76,
                            sm_clock_mhz=2505, bandwidth=7.17e11)
    assert geforce.tensor_peaks["bf16"] == pytest.approx(76 * 2505e6 * 512)  # half the pro rate
    unknown = estimate_spec(name="NVIDIA GeForce RTX 5090", compute_capability="12.0", sm_count=170,
                            sm_clock_mhz=2407, bandwidth=1.79e12)
    assert unknown.tensor_peaks == {} and unknown.vector_peaks == {}
    with pytest.raises(ConfigError, match="no vector fp32 peak"):
        unknown.peaks_for("bfloat16")


def test_scaled_spec_for_a_slice(by_id: dict[str, HardwareSpec]) -> None:
    a100 = by_id["a100-sxm4-40gb"]
    part = a100.scaled(compute=14 / 108, memory=0.125, note="slice")
    assert part.tensor_peaks["bf16"] == pytest.approx(312e12 * 14 / 108)
    assert part.bandwidth == pytest.approx(1.555e12 / 8)
    assert (part.sm_count, part.source, part.notes[-1]) == (14, "estimated", "slice")
    assert a100.tensor_peaks["bf16"] == 312e12  # the original is untouched


def test_hwspec_module_does_no_file_io() -> None:
    # Heavy imports are checked for every pure module in test_architecture.py.
    import solbench.analysis.hwspec as module

    source = Path(module.__file__).read_text()
    tree = ast.parse(source)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"os", "pathlib", "io", "shutil"}
    assert "open(" not in source
