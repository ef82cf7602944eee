"""Per-sample clock monitoring on a fake NVML: the probe, the loop, the record, the tables.

No GPU: pynvml is replaced by a scripted stand-in that refuses any call that would change the
device (solbench only ever reads clocks).
"""

import io
import random
from dataclasses import replace
from types import SimpleNamespace

import pytest
from rich.console import Console

from solbench import api
from solbench.device import nvml
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import measure
from solbench.measure.worker import MeasureSettings, Task, WorkerState
from solbench.report.console import run_header, run_tables
from solbench.report.markdown import run_markdown
from solbench.report.timing_cells import clock_cell
from solbench.results import store
from solbench.results.model import THROTTLE_MASK, Timing
from tests.unit.factories import make_run

UUID = "GPU-1234"


class _NvmlError(Exception):
    pass


class FakeNvml:
    """Scripted pynvml: clocks, power and reasons come from per-call lists; setters are refused."""

    NVMLError = _NvmlError
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, sm, mem, power_mw, reasons, app=(1980, 1980, 3201, 3201), mig=False):
        self.sm, self.mem, self.power, self.reasons = list(sm), list(mem), list(power_mw), list(reasons)
        self.app = app
        self.mig = mig
        self.calls = []

    def __getattr__(self, name):
        if "Set" in name or "Reset" in name:
            raise AssertionError(f"solbench must never call {name}")
        raise AttributeError(name)

    def _log(self, name, *args):
        self.calls.append((name, args))

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid != UUID:
            raise _NvmlError("NotFound")
        return "mig0" if self.mig else "gpu0"

    def nvmlDeviceIsMigDeviceHandle(self, handle):
        return handle.startswith("mig")

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        return "gpu0"

    def nvmlDeviceGetClockInfo(self, handle, kind):
        self._log("clock", handle, kind)
        return (self.sm if kind == 1 else self.mem).pop(0)

    def nvmlDeviceGetPowerUsage(self, handle):
        self._log("power", handle)
        value = self.power.pop(0)
        if value is None:
            raise _NvmlError("NotSupported")
        return value

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._log("reasons", handle)
        return self.reasons.pop(0)

    def nvmlDeviceGetApplicationsClock(self, handle, kind):
        return self.app[0] if kind == 1 else self.app[2]

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, kind):
        return self.app[1] if kind == 1 else self.app[3]


@pytest.fixture
def fake(monkeypatch):
    def install(**kwargs):
        module = FakeNvml(**kwargs)
        monkeypatch.setattr(nvml, "_state", {"module": module, "tried": True})
        return module

    return install


def test_probe_reads_clocks_power_and_reasons_of_the_parent_gpu(fake):
    module = fake(sm=[1980, 1755], mem=[2619, 2619], power_mw=[650_000, None], reasons=[0x0, 0x4], mig=True)
    probe = nvml.clock_probe(UUID)
    assert probe() == (1980, 2619, 650.0, 0)
    assert probe() == (1755, 2619, None, 0x4)  # power NotSupported: None, nothing raises
    assert {args[0] for _, args in module.calls} == {"gpu0"}  # a MIG slice reads its parent GPU


def test_no_probe_without_nvml_or_device(fake, monkeypatch):
    fake(sm=[], mem=[], power_mw=[], reasons=[])
    assert nvml.clock_probe("GPU-unknown") is None
    assert nvml.clock_probe(None) is None
    monkeypatch.setattr(nvml, "_state", {"module": None, "tried": True})
    assert nvml.clock_probe(UUID) is None


class FakeTimer:
    name = "fake"
    last_output = None

    def __init__(self):
        self.rng = random.Random(0)
        self.pending_s = []

    def prepare(self, launches):
        self.launches = launches

    def sample(self, index):
        return 1e-3 * (1 + self.rng.gauss(0, 0.001))

    def protocol(self):
        return {}

    def output_index(self, index):
        return 0


def test_loop_stores_one_reading_per_sample_and_marks_throttled_ones():
    readings = iter([(1980, 2619, 600.0, 0), (1830, 2619, 700.0, 0x4), (1755, 2619, 700.0, 0x4 | 0x1),
                     (1980, 2619, None, 0x1), (1980, 2619, 610.0, 0x2)] * 4)
    clock = iter(range(10_000)).__next__
    timing = measure(FakeTimer(), [lambda: None], CIWidth(0.5, 20, 20, 1e9), warmup=2, clock=clock,
                     probe=lambda: next(readings))
    assert timing.n == 20
    assert len(timing.sm_clock_mhz) == len(timing.mem_clock_mhz) == len(timing.power_w) == 20
    assert timing.sm_clock_mhz[:3] == (1980, 1830, 1755) and timing.power_w[3] is None
    # power cap (0x4) throttles; idle (0x1) and an owner's clock setting (0x2) do not
    assert timing.throttled[:5] == (False, True, True, False, False)
    assert sum(timing.throttled) == 8
    assert clock_cell(timing) == "1755–1980 ⚠8"


def test_loop_without_probe_records_no_clocks():
    timing = measure(FakeTimer(), [lambda: None], CIWidth(0.5, 5, 5, 1e9), warmup=0,
                     clock=iter(range(100)).__next__)
    assert timing.sm_clock_mhz == () and timing.throttled == () and clock_cell(timing) == ""


def test_worker_probes_only_a_cuda_task_with_a_device_id(fake, monkeypatch):
    fake(sm=[1980], mem=[2619], power_mw=[500_000], reasons=[0])
    state = WorkerState()
    task = Task(spec=None, case=None, impl="x", base_dir=None, device="cpu", settings=MeasureSettings(),
                nvml_id=UUID)
    assert state.probe(task) is None
    assert state.probe(replace(task, device="cuda", nvml_id=None)) is None
    probe = state.probe(replace(task, device="cuda"))
    assert probe() == (1980, 2619, 500.0, 0)
    assert state.probe(replace(task, device="cuda")) is probe  # one handle lookup per worker


@pytest.mark.parametrize(("app", "seen", "locked"), [
    ((1980, 1980, 3201, 3201), [0x0, 0x4], False),  # defaults, no setting reason: not locked
    ((1410, 1980, 3201, 3201), [], True),            # nvidia-smi -ac: applications clocks changed
    ((1980, 1980, 3201, 3201), [0x2], True),         # clocks held by a setting (-lgc)
    ((None, None, None, None), [], None),            # NVML gave nothing: unknown
    ((None, None, None, None), [0x4], False),
])
def test_clocks_locked_is_read_never_set(fake, app, seen, locked):
    fake(sm=[], mem=[], power_mw=[], reasons=[], app=app)
    read = nvml.application_clocks(nvml.get_handle(UUID))
    assert nvml.clocks_locked(read, seen) is locked


def _clocked_run(reasons=(0, 0x4, 0x4, 0)):
    run = make_run({"n=1024": {"torch": [1e-3, 1.1e-3, 1.2e-3, 1.05e-3], "fused": [5e-4] * 4}})
    case = run.cases[0]
    timed = replace(case.impls[0], timing=replace(case.impls[0].timing, sm_clock_mhz=(1980, 1755, 1800, 1980),
                                                  mem_clock_mhz=(2619,) * 4, power_w=(600.0, 700.0, None, 650.0),
                                                  throttle_reasons=reasons))
    return replace(run, cases=(replace(case, impls=(timed, case.impls[1])),))


def test_end_of_run_record_says_whether_clocks_were_locked(fake):
    fake(sm=[1900], mem=[2619], power_mw=[640_000], reasons=[0x4], app=(1980, 1980, 3201, 3201))
    info = SimpleNamespace(kind="cuda", uuid=UUID)
    env = api.with_end_clocks(_clocked_run(), info).environment
    assert (env.sm_clock_end_mhz, env.clock_event_reasons_end) == (1900, 0x4)
    assert env.applications_sm_clock_mhz == env.default_applications_sm_clock_mhz == 1980
    assert env.clocks_locked is False
    fake(sm=[1410], mem=[2619], power_mw=[640_000], reasons=[0x2], app=(1980, 1980, 3201, 3201))
    locked = api.with_end_clocks(_clocked_run(reasons=(0x2,) * 4), info).environment
    assert locked.clocks_locked is True
    assert "clocks locked" in run_header(replace(_clocked_run(), environment=locked))


def test_tables_show_the_clock_range_only_when_recorded():
    out = io.StringIO()
    console = Console(width=200, file=out)
    for table in run_tables(_clocked_run()):
        console.print(table)
    text = out.getvalue()
    assert "SM MHz" in text and "1755–1980 ⚠2" in text
    md = run_markdown(_clocked_run())
    assert "| SM MHz |" in md and "1755–1980 ⚠2" in md and "under a throttle reason" in md
    plain = io.StringIO()
    for table in run_tables(make_run({"n=1024": {"torch": [1e-3] * 5}})):
        Console(width=200, file=plain).print(table)
    assert "SM MHz" not in plain.getvalue() and "SM MHz" not in run_markdown(make_run({"c": {"t": [1e-3] * 5}}))


def test_clock_readings_survive_the_result_file(tmp_path):
    run = _clocked_run()
    back = store.load(store.save(run, tmp_path / "run.json"))
    timing = back.cases[0].impls[0].timing
    assert timing.power_w == (600.0, 700.0, None, 650.0) and timing.throttle_reasons == (0, 4, 4, 0)
    assert back == run


def test_a_result_file_from_before_clock_monitoring_still_loads(tmp_path):
    run = make_run({"c": {"t": [1e-3] * 5}})
    data = store.to_dict(run)
    for key in ("rounds", "sm_clock_mhz", "mem_clock_mhz", "power_w", "throttle_reasons"):
        del data["cases"][0]["impls"][0]["timing"][key]
    for key in ("rounds", "clock_monitor"):
        del data["protocol"][key]
    del data["environment"]["clocks_locked"]
    path = tmp_path / "old.json"
    import json

    path.write_text(json.dumps(data))
    old = store.load(path)
    assert old.cases[0].impls[0].timing == Timing(run.cases[0].impls[0].timing.samples,
                                                   *(getattr(run.cases[0].impls[0].timing, f)
                                                     for f in ("median", "ci_low", "ci_high", "stop_reason")))
    assert old.protocol.rounds == 1 and old.environment.clocks_locked is None


def test_throttle_mask_names_only_slowdowns():
    names = nvml.describe_reasons(THROTTLE_MASK)
    assert "SwPowerCap" in names and "HwThermalSlowdown" in names
    assert "GpuIdle" not in names and "ApplicationsClocksSetting" not in names


def test_a_file_whose_per_sample_lists_do_not_match_the_samples_is_refused(tmp_path):
    import json

    from solbench.errors import ResultsFormatError

    data = store.to_dict(_clocked_run())
    data["cases"][0]["impls"][0]["timing"]["sm_clock_mhz"] = [1980]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match=r"cases\[0\]\.impls\[0\]\.timing: sm_clock_mhz has 1 values for 4"):
        store.load(path)
