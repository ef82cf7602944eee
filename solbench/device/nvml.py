"""NVML queries: identity, clocks, power and clock-event (throttle) reasons. The only pynvml importer.

Every value is optional. NVML may be missing altogether (a container without the ``utility`` driver
capability, macOS, ROCm), and single calls may answer NotSupported or NoPermission (vGPU, MIG,
restricted guests): such values are None and nothing raises.

NVML ignores CUDA_VISIBLE_DEVICES and orders GPUs by PCI bus, so callers look devices up by UUID
(``torch.cuda.get_device_properties(i).uuid``), not by CUDA index. MIG slices report clocks and
power through their parent GPU, which ``query_device`` and ``read_clocks`` use for those values.

The measurement loop reads the clocks between samples (``clock_probe``: four NVML calls of a few
µs each, outside the timed window, on the thread that times; no sampling thread competes with
the launches):

    probe = clock_probe(uuid)                 # once per worker; None without NVML
    sample = timer.sample(i); clocks = probe()   # (sm MHz, mem MHz, power W, reason bits)

Nothing here changes a clock or a power limit: every call is a query.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# nvmlClocksEventReasons bits (NVML API, group nvmlClocksEventReasons).
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
# Reasons worth a warning: hardware slowdowns and thermal limits (SwPowerCap is routine on SXM parts).
THROTTLE_WARN_MASK = 0x8 | 0x20 | 0x40 | 0x80

_lock = threading.Lock()
_state: dict[str, Any] = {"module": None, "tried": False}


@dataclass(frozen=True)
class NvmlInfo:
    """What NVML says about one device; every field but ``name`` may be None."""

    name: str
    uuid: str | None
    pci_device_id: int | None  # 16-bit PCI device ID (pciDeviceId >> 16), e.g. 0x2335
    driver: str | None
    max_sm_clock_mhz: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    max_mem_clock_mhz: int | None
    memory_bus_width: int | None  # bits
    power_limit_w: float | None  # enforced limit
    clocks_event_reasons: int | None  # bitmask, see CLOCK_EVENT_REASONS
    temperature_c: int | None
    nvlinks_up: int | None = None  # NVLinks in the active state; None: NVML could not say (no NVLink queries)

    @property
    def bandwidth_from_clocks(self) -> float | None:
        """Theoretical bytes/s: max memory clock x 2 (DDR) x bus width / 8."""
        if not self.max_mem_clock_mhz or not self.memory_bus_width:
            return None
        return self.max_mem_clock_mhz * 1e6 * 2 * self.memory_bus_width / 8


@dataclass(frozen=True)
class ClockSample:
    """One reading of the fast-changing state of a device."""

    t: float  # time.monotonic() seconds
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    clocks_event_reasons: int | None
    temperature_c: int | None


def _nvml() -> ModuleType | None:
    """pynvml, initialised once per process; None when the library or the driver is missing."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                import pynvml
            except ImportError:
                return None
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError:
                return None
            _state["module"] = pynvml
    return _state["module"]


def _call(function: str, *args: Any) -> Any:
    """``pynvml.<function>(*args)``, or None when NVML, the function or the answer is missing."""
    nv = _nvml()
    fn = getattr(nv, function, None) if nv is not None else None
    if fn is None or nv is None:
        return None
    try:
        return fn(*args)
    except nv.NVMLError:
        return None


def _const(name: str) -> Any:
    return getattr(_state["module"], name, None)


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def driver_version() -> str | None:
    """The NVIDIA driver's version (``nvmlSystemGetDriverVersion``), or None without NVML."""
    return _text(_call("nvmlSystemGetDriverVersion"))


def nvml_available() -> bool:
    """Whether NVML could be loaded and initialised."""
    return _nvml() is not None


def get_handle(index_or_uuid: int | str) -> Any:
    """The NVML handle of a device by NVML index or UUID (with or without a GPU-/MIG- prefix)."""
    if isinstance(index_or_uuid, int):
        return _call("nvmlDeviceGetHandleByIndex", index_or_uuid)
    for candidate in _uuid_candidates(index_or_uuid):
        handle = _call("nvmlDeviceGetHandleByUUID", candidate)
        if handle is not None:
            return handle
    return None


def _uuid_candidates(uuid: str) -> list[str]:
    """The names NVML may know a UUID by: as given where it has a GPU-/MIG- prefix, else with each."""
    uuid = uuid.strip()
    return [uuid] if uuid.upper().startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"]


def gpu_lost(uuid: str) -> str | None:
    """Why the GPU ``uuid`` is gone, where NVML says it is lost (``NVML_ERROR_GPU_IS_LOST``: fallen off
    the bus, Xid 79), or None: present, or NVML missing or unable to say."""
    nv = _nvml()
    if nv is None or not uuid:
        return None
    lost = getattr(nv, "NVML_ERROR_GPU_IS_LOST", 15)
    for candidate in _uuid_candidates(uuid):  # not get_handle: it swallows errors, and this one is the answer
        handle = None
        try:
            handle = nv.nvmlDeviceGetHandleByUUID(candidate)
            nv.nvmlDeviceGetPciInfo(_parent(handle))
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == lost:
                return f"NVML reports the GPU lost: {exc}"
            if handle is None:
                continue  # not known by this name: the next
        return None
    return None


def _parent(handle: Any) -> Any:
    """The full GPU of a MIG handle (clocks, power and PCI belong to it); else the handle itself."""
    if _call("nvmlDeviceIsMigDeviceHandle", handle):
        return _call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", handle) or handle
    return handle


def _reasons(handle: Any) -> int | None:
    # ...ClocksThrottleReasons is the deprecated alias, removed in CUDA 14 (NVML_ERROR_DEPRECATED).
    value = _call("nvmlDeviceGetCurrentClocksEventReasons", handle)
    return value if value is not None else _call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def query_device(index_or_uuid: int | str) -> NvmlInfo | None:
    """Identity and clocks of a device (see ``get_handle``), or None when NVML cannot find it."""
    handle = get_handle(index_or_uuid)
    if handle is None:
        return None
    gpu = _parent(handle)
    name = _text(_call("nvmlDeviceGetName", handle)) or _text(_call("nvmlDeviceGetName", gpu))
    if not name:
        return None
    pci = _call("nvmlDeviceGetPciInfo", gpu)
    sm, mem = _const("NVML_CLOCK_SM"), _const("NVML_CLOCK_MEM")
    return NvmlInfo(
        name=name,
        uuid=_text(_call("nvmlDeviceGetUUID", handle)),
        pci_device_id=None if pci is None else int(pci.pciDeviceId) >> 16,
        driver=driver_version(),
        max_sm_clock_mhz=_call("nvmlDeviceGetMaxClockInfo", gpu, sm),
        sm_clock_mhz=_call("nvmlDeviceGetClockInfo", gpu, sm),
        mem_clock_mhz=_call("nvmlDeviceGetClockInfo", gpu, mem),
        max_mem_clock_mhz=_call("nvmlDeviceGetMaxClockInfo", gpu, mem),
        memory_bus_width=_call("nvmlDeviceGetMemoryBusWidth", gpu),
        power_limit_w=_watts(_call("nvmlDeviceGetEnforcedPowerLimit", gpu)),
        clocks_event_reasons=_reasons(gpu),
        temperature_c=_call("nvmlDeviceGetTemperature", gpu, _const("NVML_TEMPERATURE_GPU")),
        nvlinks_up=_nvlinks_up(gpu),
    )


def _nvlinks_up(gpu: Any) -> int | None:
    """How many of the device's NVLinks are active (0 on a PCIe card without a bridge), or None when
    NVML answered for no link (links a device lacks answer NotSupported)."""
    states = [_call("nvmlDeviceGetNvLinkState", gpu, link) for link in range(_const("NVML_NVLINK_MAX_LINKS") or 18)]
    known = [s for s in states if s is not None]
    return sum(int(s) == 1 for s in known) if known else None


def read_clocks(handle: Any) -> ClockSample:
    """Current SM/memory clocks, power, clock-event reasons and temperature; safe from any thread."""
    gpu = _parent(handle)
    return ClockSample(
        t=time.monotonic(),
        sm_clock_mhz=_call("nvmlDeviceGetClockInfo", gpu, _const("NVML_CLOCK_SM")),
        mem_clock_mhz=_call("nvmlDeviceGetClockInfo", gpu, _const("NVML_CLOCK_MEM")),
        power_w=_watts(_call("nvmlDeviceGetPowerUsage", gpu)),
        clocks_event_reasons=_reasons(gpu),
        temperature_c=_call("nvmlDeviceGetTemperature", gpu, _const("NVML_TEMPERATURE_GPU")),
    )


ClockReading = tuple[int | None, int | None, float | None, int | None]  # sm MHz, mem MHz, W, reasons


def clock_probe(index_or_uuid: int | str | None) -> Any:
    """A zero-argument function returning the current ``ClockReading`` of a device, or None.

    None when NVML is missing or does not know the device. The handle (and a MIG slice's parent)
    is looked up once here, so each call costs only the four queries.
    """
    if index_or_uuid is None:
        return None
    handle = get_handle(index_or_uuid)
    if handle is None:
        return None
    gpu = _parent(handle)
    sm, mem = _const("NVML_CLOCK_SM"), _const("NVML_CLOCK_MEM")

    def probe() -> ClockReading:
        return (_call("nvmlDeviceGetClockInfo", gpu, sm), _call("nvmlDeviceGetClockInfo", gpu, mem),
                _watts(_call("nvmlDeviceGetPowerUsage", gpu)), _reasons(gpu))

    return probe


@dataclass(frozen=True)
class ApplicationClocks:
    """Applications clocks (what ``nvidia-smi -ac`` sets) and their defaults, in MHz; None if unknown."""

    sm_mhz: int | None
    default_sm_mhz: int | None
    mem_mhz: int | None
    default_mem_mhz: int | None

    @property
    def changed(self) -> bool | None:
        """Whether an owner set applications clocks other than the defaults (None: unknown)."""
        pairs = [(a, d) for a, d in ((self.sm_mhz, self.default_sm_mhz), (self.mem_mhz, self.default_mem_mhz))
                 if a is not None and d is not None]
        return any(a != d for a, d in pairs) if pairs else None


def application_clocks(handle: Any) -> ApplicationClocks:
    """Read (never set) the applications clocks and their defaults."""
    gpu = _parent(handle)
    sm, mem = _const("NVML_CLOCK_SM"), _const("NVML_CLOCK_MEM")
    return ApplicationClocks(
        sm_mhz=_call("nvmlDeviceGetApplicationsClock", gpu, sm),
        default_sm_mhz=_call("nvmlDeviceGetDefaultApplicationsClock", gpu, sm),
        mem_mhz=_call("nvmlDeviceGetApplicationsClock", gpu, mem),
        default_mem_mhz=_call("nvmlDeviceGetDefaultApplicationsClock", gpu, mem),
    )


APPLICATIONS_CLOCKS_SETTING = 0x2


def clocks_locked(app: ApplicationClocks, reasons_seen: Sequence[int]) -> bool | None:
    """Whether the owner pinned the clocks, from what NVML showed (never from changing anything).

    True: applications clocks differ from their defaults (``nvidia-smi -ac``), or a reading taken
    after a sample had the ApplicationsClocksSetting reason (clocks held by a setting, as
    ``nvidia-smi -lgc`` does). False: NVML answered for either and neither holds. None: unknown.
    """
    if app.changed or any(bits & APPLICATIONS_CLOCKS_SETTING for bits in reasons_seen):
        return True
    if app.changed is False or reasons_seen:
        return False
    return None


def describe_reasons(bits: int | None) -> tuple[str, ...]:
    """Names of the clock-event reason bits set in a mask."""
    if not bits:
        return ()
    return tuple(name for bit, name in CLOCK_EVENT_REASONS.items() if bits & bit)


def free_memory(handle: Any) -> int | None:
    """Free device memory in bytes (NVML's view: every process's allocations counted), or None."""
    info = _call("nvmlDeviceGetMemoryInfo", handle)
    return int(info.free) if info is not None and getattr(info, "free", None) is not None else None


def host_available_memory() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (Linux), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
