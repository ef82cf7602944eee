"""Device detection with faked torch CUDA and NVML, the NVML wrapper on a fake pynvml, and CPU peaks."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import solbench
from solbench.analysis.hwspec import HardwareSpec
from solbench.config.hwspecs import load_specs
from solbench.device import cpu_peaks, nvml
from solbench.device.detect import detect
from solbench.device.nvml import NvmlInfo
from solbench.errors import ConfigError, DeviceError

GIB = 2**30


@pytest.fixture(scope="module")
def specs() -> tuple[HardwareSpec, ...]:
    return load_specs()


def props(name: str, *, cc: tuple[int, int] = (9, 0), sms: int = 132, memory: int = 140 * GIB,
          l2: int = 62914560, uuid: str = "7a1c0f6e-0000-4000-8000-000000000001", **extra: Any) -> Any:
    """What torch.cuda.get_device_properties returns, for the attributes detect reads."""
    return SimpleNamespace(name=name, major=cc[0], minor=cc[1], multi_processor_count=sms,
                           total_memory=memory, L2_cache_size=l2, uuid=uuid, **extra)


def nvml_info(name: str, pci: int | None, **overrides: Any) -> NvmlInfo:
    fields: dict[str, Any] = dict(
        name=name, uuid="GPU-7a1c0f6e-0000-4000-8000-000000000001", pci_device_id=pci, driver="580.159.04",
        max_sm_clock_mhz=1980, sm_clock_mhz=1980, mem_clock_mhz=3201, max_mem_clock_mhz=3201,
        memory_bus_width=6016, power_limit_w=700.0, clocks_event_reasons=0, temperature_c=34)
    fields.update(overrides)
    return NvmlInfo(**fields)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install one fake CUDA device; returns a setter for its torch properties and NVML answers."""
    calls: list[Any] = []
    state: dict[str, Any] = {"props": None, "nvml": {}}

    def query(index_or_uuid: Any) -> NvmlInfo | None:
        calls.append(index_or_uuid)
        return state["nvml"].get(index_or_uuid)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: state["props"])
    monkeypatch.setattr(nvml, "query_device", query)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(p: Any, answers: dict[Any, NvmlInfo] | None = None) -> list[Any]:
        state["props"], state["nvml"] = p, answers or {}
        calls.clear()
        return calls

    return install


def test_h200_by_pci_id(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA H200")
    calls = fake_gpu(p, {p.uuid: nvml_info("NVIDIA H200", 0x2335)})
    info = detect("auto", specs)
    assert calls[0] == p.uuid  # NVML is asked by UUID first, not by CUDA index
    assert (info.kind, info.index, info.name, info.spec.id, info.spec.source) == (
        "cuda", 0, "NVIDIA H200", "h200-sxm", "datasheet")
    assert info.spec.peaks_for("bfloat16").tensor_flops == 989.4e12
    assert (info.sm_count, info.l2_bytes, info.driver, info.warnings) == (132, 62914560, "580.159.04", ())
    env = info.environment()
    assert (env.device_kind, env.spec_id, env.pci_device_id, env.max_sm_clock_mhz) == (
        "cuda", "h200-sxm", "0x2335", 1980)
    assert env.power_limit_w == 700.0 and env.torch == torch.__version__
    assert env.solbench == solbench.__version__


def test_pci_id_decides_between_lookalike_names(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA H100 80GB HBM3", memory=80 * GIB)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H100 80GB HBM3", 0x2330, max_mem_clock_mhz=2619,
                                   memory_bus_width=5120)})
    assert detect("cuda:0", specs).spec.id == "h100-sxm"
    # Same name but an H100 NVL's PCI ID: the PCI ID wins.
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H100 80GB HBM3", 0x2321)})
    assert detect("cuda", specs).spec.id == "h100-nvl"


def test_torch_name_when_nvml_is_missing(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    fake_gpu(props("NVIDIA L40S", cc=(8, 9), sms=142, memory=44 * GIB))
    info = detect("auto", specs)
    assert (info.spec.id, info.nvml, info.driver) == ("l40s", None, None)
    assert info.environment().pci_device_id is None


def test_index_fallback_only_without_visible_devices_and_with_same_name(
        fake_gpu: Any, monkeypatch: pytest.MonkeyPatch, specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA A100-SXM4-80GB", cc=(8, 0), sms=108, memory=80 * GIB)
    a100 = nvml_info("NVIDIA A100-SXM4-80GB", 0x20B2, max_mem_clock_mhz=1593, memory_bus_width=5120)
    calls = fake_gpu(p, {0: a100})  # the UUID lookup fails
    assert detect("auto", specs).nvml == a100
    assert calls == [p.uuid, 0]
    fake_gpu(p, {0: nvml_info("NVIDIA L4", 0x27B8)})  # NVML index 0 is another GPU
    assert detect("auto", specs).nvml is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # CUDA index 0 is NVML index 3
    calls = fake_gpu(p, {0: a100})
    info = detect("auto", specs)
    assert info.nvml is None and calls == [p.uuid]
    assert info.spec.id == "a100-sxm4-80gb"  # by the torch name


def test_unknown_gpu_gets_an_estimated_spec(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA L40", cc=(8, 9), sms=142, memory=44 * GIB, l2=100663296)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA L40", 0x26B5, max_sm_clock_mhz=2490, max_mem_clock_mhz=2250,
                                   memory_bus_width=384)})
    info = detect("auto", specs)
    spec = info.spec
    assert spec.source == "estimated" and spec.id == "estimated-nvidia-l40"
    assert spec.tensor_peaks["bf16"] == pytest.approx(142 * 2490e6 * 1024)
    assert spec.bandwidth == pytest.approx(2250e6 * 2 * 384 / 8)
    assert spec.l2_bytes == 100663296
    assert spec.peaks_for("bfloat16").source == "estimated"
    assert info.warnings and "no spec file matches 'NVIDIA L40'" in info.warnings[0]


def test_estimate_from_torch_clocks_without_nvml(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    fake_gpu(props("NVIDIA A10G", cc=(8, 6), sms=80, memory=22 * GIB, clock_rate=1710000,
                   memory_clock_rate=6251000, memory_bus_width=384))
    spec = detect("auto", specs).spec
    assert spec.source == "estimated"
    assert spec.vector_peaks["fp32"] == pytest.approx(80 * 1710e6 * 256)
    assert spec.bandwidth == pytest.approx(6251e6 * 2 * 384 / 8)


def test_unknown_architecture_has_no_peaks(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA GeForce RTX 5090", cc=(12, 0), sms=170, memory=31 * GIB)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA GeForce RTX 5090", 0x2B85, max_sm_clock_mhz=3090,
                                   max_mem_clock_mhz=14001, memory_bus_width=512)})
    info = detect("auto", specs)
    assert info.spec.tensor_peaks == {} and "no per-SM rate" in info.warnings[0]
    with pytest.raises(ConfigError, match="no vector fp32 peak"):
        info.spec.peaks_for("bfloat16")


def test_mig_slice_scales_the_full_gpu_spec(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    name = "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    p = props(name, cc=(8, 0), sms=14, memory=5_000_000_000, uuid="MIG-1b2c")
    fake_gpu(p, {p.uuid: nvml_info(name, 0x20B0, max_mem_clock_mhz=1215, memory_bus_width=5120)})
    info = detect("auto", specs)
    assert info.spec.id == "a100-sxm4-40gb" and info.spec.source == "estimated"
    assert info.spec.tensor_peaks["bf16"] == pytest.approx(312e12 * 14 / 108)
    assert info.spec.bandwidth == pytest.approx(1.555e12 * 5e9 / 40e9)
    assert "MIG slice" in info.warnings[-1]


def test_spec_disagreement_is_warned(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA H200", sms=120)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H200", 0x2335, max_mem_clock_mhz=2000)})
    warnings = detect("auto", specs).warnings
    assert any("120 SMs" in w for w in warnings)
    assert any("NVML clocks give 3.01 TB/s" in w for w in warnings)


def test_cpu_when_cuda_is_unavailable(monkeypatch: pytest.MonkeyPatch, specs: tuple[HardwareSpec, ...]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cpu_peaks, "measure_cpu_peaks", lambda **_: {"vector_fp32_flops": 2e11, "bandwidth": 3e10})
    info = detect("auto", specs)
    assert (info.kind, info.index, info.nvml, info.spec.id, info.spec.source) == (
        "cpu", None, None, "cpu", "measured")
    peaks = info.spec.peaks_for("float32")
    assert (peaks.tensor_flops, peaks.vector_flops, peaks.bandwidth, peaks.source) == (2e11, 2e11, 3e10, "measured")
    assert info.environment().device_kind == "cpu" and info.environment().spec_id == "cpu"
    with pytest.raises(DeviceError, match=r"torch\.cuda\.is_available"):
        detect("cuda", specs)


def test_cpu_can_be_forced(fake_gpu: Any, monkeypatch: pytest.MonkeyPatch, specs: tuple[HardwareSpec, ...]) -> None:
    fake_gpu(props("NVIDIA H200"))
    monkeypatch.setattr(cpu_peaks, "measure_cpu_peaks", lambda **_: {"vector_fp32_flops": 1e11, "bandwidth": 1e10})
    assert detect("CPU", specs).kind == "cpu"


def test_bad_device_strings(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    fake_gpu(props("NVIDIA H200"))
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        detect("tpu", specs)
    with pytest.raises(DeviceError, match="no CUDA device 3"):
        detect("cuda:3", specs)


def test_measure_cpu_peaks_returns_positive_rates_and_caches() -> None:
    first = cpu_peaks.measure_cpu_peaks(0.05)
    assert set(first) == {"vector_fp32_flops", "bandwidth"}
    assert all(math.isfinite(v) and v > 0 for v in first.values())
    measured = dict(first)
    first["bandwidth"] = -1.0  # callers get a copy
    # cached: the same rates, not a second measurement (two timings of a copy never agree to the bit)
    assert cpu_peaks.measure_cpu_peaks(0.05) == measured


class _FakeNvmlError(Exception):
    pass


def _fake_pynvml(*, event_reasons: bool) -> Any:
    """A pynvml stand-in with one H200 whose power queries are NotSupported."""
    handle = object()

    def by_uuid(uuid: str) -> object:
        if uuid != "GPU-7a1c":
            raise _FakeNvmlError("NotFound")
        return handle

    def not_supported(*args: Any) -> Any:
        raise _FakeNvmlError("NotSupported")

    clocks = {1: 1980, 2: 3201}
    fake = SimpleNamespace(
        NVMLError=_FakeNvmlError, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetHandleByUUID=by_uuid, nvmlDeviceGetHandleByIndex=lambda i: handle,
        nvmlDeviceIsMigDeviceHandle=lambda h: 0,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200", nvmlDeviceGetUUID=lambda h: "GPU-7a1c",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(pciDeviceId=0x233510DE),
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlDeviceGetMaxClockInfo=lambda h, c: clocks[c], nvmlDeviceGetClockInfo=lambda h, c: clocks[c] // 2,
        nvmlDeviceGetMemoryBusWidth=lambda h: 6016, nvmlDeviceGetEnforcedPowerLimit=not_supported,
        nvmlDeviceGetPowerUsage=not_supported, nvmlDeviceGetTemperature=lambda h, s: 34,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x1,
    )
    if event_reasons:
        fake.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4
    return fake


@pytest.mark.parametrize(("event_reasons", "bits"), [(True, 0x4), (False, 0x1)])
def test_query_device_on_a_fake_nvml(monkeypatch: pytest.MonkeyPatch, event_reasons: bool, bits: int) -> None:
    monkeypatch.setattr(nvml, "_state", {"module": _fake_pynvml(event_reasons=event_reasons), "tried": True})
    assert nvml.nvml_available()
    info = nvml.query_device("7a1c")  # torch's UUID has no GPU- prefix
    assert info is not None
    assert (info.name, info.uuid, info.pci_device_id, info.driver) == ("NVIDIA H200", "GPU-7a1c", 0x2335, "580.159.04")
    assert (info.max_sm_clock_mhz, info.sm_clock_mhz, info.max_mem_clock_mhz, info.memory_bus_width) == (
        1980, 990, 3201, 6016)
    assert info.power_limit_w is None  # NotSupported -> None, not an exception
    assert info.clocks_event_reasons == bits
    assert info.bandwidth_from_clocks == pytest.approx(4.815e12, rel=1e-3)
    assert nvml.query_device("ffff") is None
    sample = nvml.read_clocks(nvml.get_handle(0))
    assert (sample.sm_clock_mhz, sample.mem_clock_mhz, sample.power_w, sample.temperature_c) == (990, 1600, None, 34)


def test_no_nvml_means_none_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "_state", {"module": None, "tried": True})
    assert not nvml.nvml_available()
    assert nvml.query_device(0) is None and nvml.query_device("GPU-1") is None
    sample = nvml.read_clocks(None)
    assert (sample.sm_clock_mhz, sample.power_w, sample.clocks_event_reasons) == (None, None, None)


def test_describe_reasons() -> None:
    assert nvml.describe_reasons(0x5) == ("GpuIdle", "SwPowerCap")
    assert nvml.describe_reasons(None) == ()
    assert nvml.THROTTLE_WARN_MASK & 0x4 == 0


def test_cupy_version_is_read_by_distribution_name(monkeypatch):
    """CuPy's version comes from whichever of its distributions is installed, without scanning
    every installed package (``packages_distributions`` took 2 s on the H200 image)."""
    import importlib.metadata

    from solbench.device import detect

    def version(name):
        if name == "cupy-cuda12x":
            return "13.6.0"
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(importlib.metadata, "packages_distributions",
                        lambda: (_ for _ in ()).throw(AssertionError("scanned every package")))
    assert detect._cupy_version() == "13.6.0"
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: (_ for _ in ()).throw(importlib.metadata.PackageNotFoundError(name)))
    assert detect._cupy_version() is None


def test_a_name_match_with_another_pci_id_is_warned(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    """A variant whose PCI ID no spec lists can share a listed part's name (an H20 with more memory):
    the name still matches, and the run says which IDs the spec was written for."""
    p = props("NVIDIA H20", sms=78, memory=140 * GIB)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H20", 0x232C)})
    info = detect("auto", specs)
    assert info.spec.id == "h20"
    assert any("PCI device ID 0x232c is none of h20's" in w for w in info.warnings)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H20", info.spec.pci_device_ids[0])})
    assert not any("PCI device ID" in w for w in detect("auto", specs).warnings)


def test_a_part_with_cut_tensor_rates_is_not_estimated_from_clocks(fake_gpu: Any,
                                                                   specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA H20-3e", sms=78, memory=140 * GIB)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H20-3e", 0x7777)})
    info = detect("auto", specs)
    assert info.spec.source == "estimated" and info.spec.tensor_peaks == {}
    assert "cannot be estimated from clocks" in info.warnings[0]
    with pytest.raises(ConfigError, match="no vector fp32 peak"):
        info.spec.peaks_for("bfloat16")


def test_a_runs_notes_carry_the_devices_warnings(fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    from solbench.plan.prepare import device_notes

    p = props("NVIDIA H200", sms=120)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H200", 0x2335)})
    notes = device_notes(detect("auto", specs))
    assert any(n.startswith("device: ") and "120 SMs" in n for n in notes)


def test_a_pcie_card_without_an_nvlink_up_is_scored_against_pcie(fake_gpu: Any,
                                                                  specs: tuple[HardwareSpec, ...]) -> None:
    p = props("NVIDIA H100 PCIe", sms=114, memory=80 * GIB)
    answer = nvml_info("NVIDIA H100 PCIe", 0x2331, max_mem_clock_mhz=1593, memory_bus_width=5120)
    fake_gpu(p, {p.uuid: answer})
    bridged = detect("auto", specs).spec
    assert bridged.id == "h100-pcie" and bridged.link_bandwidth == bridged.nvlink_bandwidth  # NVML did not say
    fake_gpu(p, {p.uuid: dataclasses.replace(answer, nvlinks_up=0)})
    info = detect("auto", specs)
    assert info.spec.nvlink_bandwidth is None and info.spec.link_bandwidth == bridged.pcie_bandwidth
    assert any("no NVLink" in w for w in info.warnings)
    fake_gpu(p, {p.uuid: dataclasses.replace(answer, nvlinks_up=2)})
    assert detect("auto", specs).spec.nvlink_bandwidth == bridged.nvlink_bandwidth


def test_a_card_without_an_nvlink_up_nor_a_pcie_figure_is_not_said_to_be_scored_against_pcie(
        fake_gpu: Any, specs: tuple[HardwareSpec, ...]) -> None:
    """The B200's spec has NVLink and no PCIe figure: with its NVLinks down the warning said collectives
    were scored against PCIe, while their T_SOL had no link term at all."""
    p = props("NVIDIA B200", cc=(10, 0), sms=148, memory=180 * GIB)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA B200", 0x2901, nvlinks_up=0)})
    info = detect("auto", specs)
    assert info.spec.id == "b200" and info.spec.link_bandwidth is None
    (warning,) = [w for w in info.warnings if "no NVLink" in w]
    assert "scored against PCIe" not in warning and "no link term" in warning


def test_nvlink_states_are_counted_and_missing_links_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_pynvml(event_reasons=True)

    def state(h: Any, link: int) -> int:
        if link >= 4:
            raise _FakeNvmlError("NotSupported")  # links the device does not have
        return 1 if link < 3 else 0

    fake.nvmlDeviceGetNvLinkState = state
    monkeypatch.setattr(nvml, "_state", {"module": fake, "tried": True})
    assert nvml.query_device("7a1c").nvlinks_up == 3
    del fake.nvmlDeviceGetNvLinkState
    assert nvml.query_device("7a1c").nvlinks_up is None


def test_a_mig_slices_memory_share_is_the_profiles_gb_over_the_parts(fake_gpu: Any,
                                                                   specs: tuple[HardwareSpec, ...]) -> None:
    name = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    p = props(name, cc=(8, 0), sms=42, memory=39 * GIB + 512 * 2**20, uuid="MIG-3c40")  # torch: 42.4e9 bytes
    fake_gpu(p, {p.uuid: nvml_info(name, 0x20B2, max_mem_clock_mhz=1593, memory_bus_width=5120)})
    spec = detect("auto", specs).spec
    assert spec.id == "a100-sxm4-80gb"
    full = next(s for s in specs if s.id == "a100-sxm4-80gb")
    assert spec.bandwidth == pytest.approx(full.bandwidth * 0.5)  # 40 of 80 GB, not 42.4 / 80


@pytest.mark.parametrize(("name", "cc", "pci", "bf16"), [
    ("NVIDIA GeForce RTX 5090", (12, 0), 0x2B85, None),  # no spec file, no per-SM rate: no peaks at all
    ("Tesla T4", (7, 5), 0x1EB8, None),  # a spec without a bf16 tensor unit
    ("NVIDIA H200", (9, 0), 0x2335, 989.4)])
def test_info_shows_the_bf16_tensor_peak_only_where_there_is_one(fake_gpu: Any, name: str, cc: tuple[int, int],
                                                                 pci: int, bf16: float | None) -> None:
    """solbench info is what one runs on a GPU no spec matches: it must not fail for want of peaks, nor
    print a bf16 tensor peak of 0 TFLOP/s for a card that has no bf16 tensor unit."""
    from solbench import api

    p = props(name, cc=cc)
    fake_gpu(p, {p.uuid: nvml_info(name, pci)})
    data = api.device_summary()
    assert data.get("bf16_tensor_peak_tflops") == bf16
    assert data["device_name"] == name


def test_a_dry_run_on_the_detected_device_says_what_detection_was_unsure_of(
        fake_gpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A measured run prints detection's warnings (its T_SOL rests on those peaks); the dry run on
    the same device, pricing the cases against the same peaks, dropped them."""
    from click.testing import CliRunner

    from solbench.cli import main

    p = props("NVIDIA H200", sms=120)
    fake_gpu(p, {p.uuid: nvml_info("NVIDIA H200", 0x2335, max_mem_clock_mhz=2000)})
    gpu = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--dry-run"])
    assert gpu.exit_code == 0, gpu.output
    assert "device: " in gpu.output and "120 SMs" in gpu.output
    monkeypatch.setattr(cpu_peaks, "measure_cpu_peaks", lambda **_: {"vector_fp32_flops": 1e8, "bandwidth": 1e8})
    cpu = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--dry-run", "--device", "cpu", "--json"])
    assert cpu.exit_code == 0, cpu.output
    assert "device: the CPU peaks measured 0.10 GFLOP/s" in cpu.stderr  # the JSON alone on stdout
    assert "peaks: There is no tensor peak" in cpu.stderr
    named = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "--dry-run", "--gpu", "h200"])
    assert named.exit_code == 0 and "device: " not in named.output  # a named spec: no device was detected
