"""The anti-cheat checks, one unit at a time, and the measurement loop's verification of timed calls."""

import random
import sys
import threading
import time
from types import SimpleNamespace

import pytest
import torch

import solbench.measure.tensors as tensors_mod
from solbench.exitcodes import IMPL_FAILED, INCONCLUSIVE, INTERRUPTED, OK, REGRESSION, USAGE, worst
from solbench.measure import guards
from solbench.measure.criteria import CIWidth
from solbench.measure.loop import CheatDetected, measure


def test_plain_fresh_outputs_pass():
    x = torch.randn(4, 4)
    out = x * 2
    assert guards.check_outputs([out], ["y"], {"x": x}) is None


def test_views_of_one_buffer_the_call_allocated_are_fine():
    x = torch.randn(4, 6)
    buf = x @ torch.randn(6, 6)
    q, k = buf.split(3, dim=1)
    assert guards.check_outputs([q, k], ["q", "k"], {"x": x}) is None


@pytest.mark.parametrize("make", [lambda x: x, lambda x: x[1:], lambda x: x.view(-1), lambda x: x.T])
def test_an_input_or_any_view_of_it_is_caught(make):
    x = torch.randn(4, 4)
    reason = guards.check_outputs([make(x)], ["y"], {"x": x})
    assert reason is not None and "input 'x'" in reason


def test_an_earlier_output_is_caught():
    x = torch.randn(4, 4)
    first = x * 2
    assert "earlier call" in guards.check_outputs([first], ["y"], {"x": x}, earlier=[first])
    assert guards.check_outputs([x * 2], ["y"], {"x": x}, earlier=[first]) is None


def test_subclasses_and_meta_tensors_are_caught():
    class Lazy(torch.Tensor):
        pass

    x = torch.randn(3)
    assert "not a plain torch.Tensor" in guards.check_outputs([(x * 2).as_subclass(Lazy)], ["y"], {})
    assert "meta" in guards.check_outputs([torch.empty(3, device="meta")], ["y"], {})


def test_tensor_methods_shadowed_on_an_instance_are_caught():
    # the checks copy an output through .detach() and find its storage through .untyped_storage():
    # set on the instance, the implementation's code would answer for the tensor
    x = torch.randn(3)
    out = torch.empty(3)
    out.detach = lambda: x * 2
    assert "shadowed on the instance (detach)" in guards.check_outputs([out], ["y"], {"x": x})
    cached = x * 2
    again = cached.view(3)
    again.untyped_storage = lambda: torch.empty(3).untyped_storage()  # set after the plain check
    assert "shadowed on the instance (untyped_storage)" in guards.aliased_outputs([again], ["y"], {}, [cached])
    odd = torch.empty(3)
    vars(odd)[1] = 2
    assert "shadowed" in guards.check_outputs([odd], ["y"], {})
    tagged = torch.empty(3)
    tagged.note = "a name torch.Tensor lacks is fine"
    assert guards.check_outputs([tagged], ["y"], {}) is None


def test_input_guard_sees_a_shadowed_view_hiding_a_change():
    x = torch.randn(8)
    g = guards.InputGuard({"x": x})
    saved = x.clone()
    x.mul_(0.5)
    x.view = saved.view
    assert "'x' has torch.Tensor attribute(s) shadowed on the instance (view)" in g.changed({"x": x})


def test_input_guard_sees_any_bit_flip_and_nothing_else():
    x = torch.randn(8)
    g = guards.InputGuard({"x": x})
    assert g.changed({"x": x}) is None
    x.view(torch.int32)[3] ^= 1
    assert "'x' was modified" in g.changed({"x": x})


def test_input_guard_handles_nan_inputs():
    x = torch.full((4,), float("nan"))
    assert guards.InputGuard({"x": x}).changed({"x": x}) is None


def test_tamper_guard_names_a_replaced_function_and_forgets_it_once_restored():
    g = guards.TamperGuard()
    assert g.tampered() is None
    original = tensors_mod.compare
    tensors_mod.compare = lambda *a, **k: None
    try:
        assert "solbench.measure.tensors.compare" in g.tampered()
    finally:
        tensors_mod.compare = original
    assert g.tampered() is None


def test_tamper_guard_sees_what_the_comparison_calls_replaced_or_shadowed(monkeypatch):
    # torch.stack gathers its counts, ``rtol * |ref|`` is Tensor.__rmul__, int() reads the counts: each,
    # patched to lie only for solbench's code, passed zeros as right (tests/data/hostile/cheats.py)
    import builtins

    g = guards.TamperGuard()
    for owner, name, key in ((torch, "stack", "torch.stack"), (torch.Tensor, "__rmul__", "torch.Tensor.__rmul__"),
                             (torch.Tensor, "tolist", "torch.Tensor.tolist"), (builtins, "int", "builtins.int"),
                             (tensors_mod, "int", "solbench.measure.tensors.int")):
        with monkeypatch.context() as m:
            m.setattr(owner, name, lambda *a, **k: 0, raising=False)
            assert key in (g.tampered() or ""), key
        assert g.tampered() is None


def test_tamper_guard_sees_a_replaced_clock_and_replaced_code():
    g = guards.TamperGuard()
    original = time.perf_counter_ns
    time.perf_counter_ns = lambda: 0
    try:
        assert "time.perf_counter_ns" in g.tampered()
    finally:
        time.perf_counter_ns = original
    code = tensors_mod.upcast.__code__
    tensors_mod.upcast.__code__ = (lambda inputs, dtype: inputs).__code__
    try:
        assert "tensors.upcast" in g.tampered()
    finally:
        tensors_mod.upcast.__code__ = code
    assert g.tampered() is None


def test_settled_outputs_catches_a_thread_still_writing(monkeypatch):
    # The thread writes once the check waits on it (after the outputs were copied), not after a sleep:
    # a main thread descheduled on a loaded machine longer than the sleep let the write come first.
    out = torch.randn(1000)
    returned = out.clone()
    before = set(threading.enumerate())
    waited = threading.Event()
    join = threading.Thread.join

    def waiting(self, timeout=None):
        waited.set()
        join(self, timeout)

    def late():
        waited.wait()
        out.fill_(1.0)

    threading.Thread(target=late, daemon=True).start()
    monkeypatch.setattr(threading.Thread, "join", waiting)
    values, problem = guards.settled_outputs([out], "cpu", before, join_s=60.0)
    assert problem is not None and "changed after the call returned" in problem
    assert torch.equal(values[0], returned)  # what the call returned, not what came later


def test_settled_outputs_passes_finished_work():
    values, problem = guards.settled_outputs([torch.ones(10)], "cpu", set(threading.enumerate()))
    assert problem is None and torch.equal(values[0], torch.ones(10))


def test_settled_outputs_returns_the_values_at_return_not_a_late_write():
    # A thread that writes after the wait: the check then sees no change, and the values it returns
    # (what callers judge) are the ones the call returned, so the late write cannot pass as right.
    out = torch.randn(100)
    returned = out.clone()
    go, done = threading.Event(), threading.Event()

    def late():
        go.wait()
        out.fill_(1.0)
        done.set()

    before = set(threading.enumerate())
    threading.Thread(target=late, daemon=True).start()
    values, problem = guards.settled_outputs([out], "cpu", before, join_s=0.01)
    go.set()
    done.wait()
    assert problem is None and torch.equal(values[0], returned) and torch.equal(out, torch.ones(100))


def test_settled_outputs_waits_once_for_all_new_threads(monkeypatch):
    # Ten threads that never end: one deadline shared by all, not join_s for each in turn. The clock is
    # fake (each join waits out its timeout on it): the real one made the first wait 0 on a machine
    # that descheduled the check for join_s between setting its deadline and the first join.
    never = threading.Event()
    before = set(threading.enumerate())
    threads = [threading.Thread(target=never.wait, daemon=True) for _ in range(10)]
    for t in threads:
        t.start()
    now = [0.0]
    waits = []

    def recorded(self, timeout=None):
        waits.append(timeout)
        now[0] += timeout  # none of them ends: each join waits out its timeout

    monkeypatch.setattr(guards, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(threading.Thread, "join", recorded)
    try:
        guards.settled_outputs([torch.ones(4)], "cpu", before, join_s=0.05)
    finally:
        never.set()
    assert waits == [0.05] + [0.0] * 9  # the first waits out the deadline; the rest get what is left: nothing


class FakeTimer:
    """Returns an output per call from a script; a sample takes 1 µs."""

    name = "fake"

    def __init__(self, outputs):
        self.outputs = outputs
        self.calls = 0
        self.last_output = None

    def prepare(self, launches):
        self.launches = launches

    def sample(self, index):
        self.last_output = self.outputs(self.calls)
        self.calls += 1
        return 1e-6

    def protocol(self):
        return {}

    def output_index(self, index):
        return index % len(self.launches)


def test_loop_verifies_the_last_timed_call_and_raises_on_a_wrong_one():
    timer = FakeTimer(lambda n: "good" if n < 12 else "bad")
    seen = []

    def verify(k, out, seconds):
        seen.append(out)
        return None if out == "good" else "wrong output"

    with pytest.raises(CheatDetected, match="wrong output"):
        measure(timer, [None, None], CIWidth(min_samples=10, max_samples=10), warmup=3, verify=verify,
                rng=random.Random(0))
    assert seen[-1] == "bad"


def test_loop_verifies_a_random_few_of_many_samples():
    timer = FakeTimer(lambda n: "good")
    seen = []
    measure(timer, [None], CIWidth(target=0.0, min_samples=10, max_samples=1000, budget_s=1e9), warmup=0,
            verify=lambda k, out, s: seen.append(k), rng=random.Random(3))
    assert 5 <= len(seen) <= 100  # about 4 ln(1000) + 1, never all 1000


def test_the_verification_rate_runs_on_over_a_points_rounds():
    """A later round (``seen`` samples timed before it) verifies about 4 ln((seen + n) / seen) of its
    n samples, plus its last, instead of starting again at 4 of the first 4."""
    def verified(seen_before, seed):
        timer, seen = FakeTimer(lambda n: "good"), []
        measure(timer, [None], CIWidth(target=0.0, min_samples=20, max_samples=20, budget_s=1e9), warmup=0,
                verify=lambda k, out, s: seen.append(k), rng=random.Random(seed), seen=seen_before)
        return len(seen)

    first = [verified(0, seed) for seed in range(50)]
    later = [verified(40, seed) for seed in range(50)]
    assert min(first) >= 4  # the first four samples of a point are always verified
    assert min(later) >= 1  # and every round's last
    assert sum(later) < sum(first) / 2  # 4 ln(60/40) + 1 ~ 2.6 against 4 + 4 ln(20/4) + 1 ~ 11


def test_a_verified_sample_is_followed_by_a_discarded_call_before_the_next_timed_one():
    """A verification's own work is outside the window, but not what it leaves behind: the next timed
    sample comes after one more call, discarded (measured on an H200: loop.measure's docstring)."""
    log = []

    class Logged(FakeTimer):
        def sample(self, index):
            log.append("call")
            return super().sample(index)

    timer = Logged(lambda n: "good")
    timing = measure(timer, [None], CIWidth(target=0.0, min_samples=30, max_samples=30, budget_s=1e9), warmup=2,
                     verify=lambda k, out, s: log.append("verify"), rng=random.Random(5),
                     on_value=lambda i, s, v: log.append("timed"))
    assert log[:2] == ["call", "call"]  # the warm-up
    rest = log[2:]
    assert rest.count("timed") == timing.n == 30
    verifies = [k for k, event in enumerate(rest) if event == "verify"]
    assert len(verifies) >= 5  # the first four always, and the last
    for k in verifies[:-1]:  # after each verification but the last: a discarded call, then the timed one
        assert rest[k + 1:k + 4] == ["call", "call", "timed"]
    assert rest[-1] == "verify"
    assert rest.count("call") == 30 + len(verifies) - 1


def test_worst_exit_code_order():
    assert worst(OK, INCONCLUSIVE) == INCONCLUSIVE
    assert worst(INCONCLUSIVE, REGRESSION) == REGRESSION
    assert worst(REGRESSION, IMPL_FAILED) == IMPL_FAILED
    assert worst(IMPL_FAILED, USAGE) == USAGE
    assert worst(USAGE, INTERRUPTED, OK) == INTERRUPTED
    assert worst() == OK


def test_the_tamper_snapshot_holds_the_timer_and_the_sol_modules():
    from solbench.measure.worker import WorkerState

    keys = WorkerState().tamper._snapshot
    assert "solbench.device.timer.CpuTimer.sample" in keys
    assert any(k.startswith("solbench.analysis.sol.") for k in keys)


def test_tamper_guard_sees_a_re_pointed_name():
    import solbench.measure.worker as worker_mod

    g = guards.TamperGuard()
    for name, stand_in in (("measure", lambda *a, **k: None), ("tolerance_for", lambda *a: (1.0, 1.0, None)),
                           ("tensors", object())):
        original = getattr(worker_mod, name)
        setattr(worker_mod, name, stand_in)
        try:
            assert f"solbench.measure.worker.{name}" in g.tampered()
        finally:
            setattr(worker_mod, name, original)
    assert g.tampered() is None


def test_tamper_guard_sees_a_watched_instance_rebound_or_shadowed():
    from solbench.device.timer import CpuTimer

    g = guards.TamperGuard()
    timer = CpuTimer()
    g.watch("timer cpu", timer)
    assert g.tampered() is None
    timer.last_output = object()  # the timer's own bookkeeping is not tampering
    assert g.tampered() is None
    timer.sample = lambda index: 1e-9
    assert "instance timer cpu.sample" in g.tampered()
    del timer.sample
    timer._clock = lambda: 0
    assert "instance timer cpu._clock" in g.tampered()


def test_warm_tracer_collects_once_and_never_fails_the_worker(monkeypatch):
    from solbench.measure import guards

    seen = []
    tracer = object()

    def refused(call, trace):
        seen.append(trace)
        raise RuntimeError("CUPTI refused")

    monkeypatch.setattr(guards, "stream_tracer", lambda device: tracer if device == "cuda" else None)
    monkeypatch.setattr(guards, "traced_call", refused)
    guards.warm_tracer("cpu")
    assert seen == []  # no tracer on the CPU: nothing to load
    guards.warm_tracer("cuda")  # raises nothing although CUPTI does
    assert seen == [tracer]


def test_unseen_inputs_are_drawn_once_the_timed_sets_state_is_freed(monkeypatch, tmp_path):
    """After timing, the references, the input guards' saved copies and the checked calls' outputs
    are let go before the two unseen input sets (and their references) are drawn: at KernelBench's
    sizes they are tens of GiB, and compiled workers ran out of memory with both held."""
    import gc
    import weakref

    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.measure import worker
    from solbench.results import store

    seen = []
    draw = worker._Checker._fresh_inputs

    def watched(self, base_dir, seed, **kwargs):
        gc.collect()
        seen.append((self.inputs.references, self.input_guards, self.kept, [r() for r in self.weak]))
        return draw(self, base_dir, seed, **kwargs)

    first = worker._Checker.correctness

    def remember(self, launches, light=False):
        result = first(self, launches, light)
        self.weak = [weakref.ref(t) for ref in self.inputs.references for t in ref] + [weakref.ref(t) for t in self.kept]
        return result

    monkeypatch.setattr(worker._Checker, "_fresh_inputs", watched)
    monkeypatch.setattr(worker._Checker, "correctness", remember)
    out = tmp_path / "d.json"
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-i", "baseline", "--in-process", "--repeat", "1",
                                       "--device", "cpu", "--budget", "0.05", "--min-samples", "3", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert {r.status for c in store.load(out).cases for r in c.impls} == {"ok"}
    assert len(seen) == 4  # two a case: the fresh set, then the new values for the timed tensors
    for references, guards_left, kept, alive in seen:
        assert references == () and guards_left == [] and kept == []
        assert alive and all(t is None for t in alive)  # freed, not only dropped from the checker


def test_a_worker_holds_no_inputs_or_outputs_between_tasks(monkeypatch, tmp_path):
    """The timers a worker keeps for its next task let go of this task's calls (and through them its
    inputs) and last output: on an H200 a KernelBench compiled worker ran out of memory while its
    sibling worker's timer still held the 32 GiB of inputs it had been timed on."""
    import gc
    import weakref

    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.measure import worker

    drawn, after = [], []
    prepare = worker.prepare_case

    def remembered(*args, **kwargs):
        inputs = prepare(*args, **kwargs)
        drawn.extend(weakref.ref(t) for s in inputs.sets for t in s.values() if hasattr(t, "data_ptr"))
        return inputs

    guarded = worker.guarded

    def watched(task, state, body):
        out = guarded(task, state, body)
        gc.collect()
        after.append(([r() for r in drawn], [(t._launches, t.last_output) for t in state.timers.values()]))
        drawn.clear()
        return out

    monkeypatch.setattr(worker, "prepare_case", remembered)
    monkeypatch.setattr(worker, "guarded", watched)
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-i", "baseline", "--in-process", "--repeat", "1", "--device",
                                       "cpu", "--budget", "0.05", "--min-samples", "3", "-o", str(tmp_path / "d.json")])
    assert result.exit_code == 0, result.output
    timed = [(alive, timers) for alive, timers in after if timers]
    assert len(timed) >= 2  # a task per implementation and case
    for alive, timers in timed:
        assert alive and all(t is None for t in alive)  # the task's inputs are gone
        assert all(launches == () and last is None for launches, last in timers)


def test_calls_the_check_made_again_are_recorded_and_summed_over_rounds(monkeypatch, tmp_path):
    """A check calls again when its spin ran dry or CUPTI had to be primed; an implementation that
    counts its calls sees those calls, so each result says how many there were."""
    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.measure import guards, worker
    from solbench.results import store

    first = guards.traced_call

    def twice(call, trace, *args, **kwargs):  # every check made again once, as a dry spin does
        call()
        return first(call, trace, *args, **kwargs)

    monkeypatch.setattr(worker.guards, "traced_call", twice)
    out = tmp_path / "d.json"
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-i", "baseline", "--in-process", "--repeat", "2",
                                       "--device", "cpu", "--budget", "0.05", "--min-samples", "3", "-o", str(out)])
    assert result.exit_code == 0, result.output
    impls = [r for c in store.load(out).cases for r in c.impls]
    assert impls and all(r.status == "ok" for r in impls)
    for r in impls:
        checked = 3 + 1  # round 1: both input sets, then the first again; round 2 (light): the first
        assert r.protocol["rounds"] == 2 and r.protocol["check_extra_calls"] == checked, r.protocol



_SKIPPED: list[bool] = []  # per call of _doubles_only_into_nan: whether it found a result there and did nothing


def _doubles_only_into_nan(x, y):
    """Destination-passing 2 x that does the work only where its output holds NaN (a check's refill):
    a call that finds the last call's result there returns at once."""
    _SKIPPED.append(not torch.isnan(y).any())
    if _SKIPPED[-1]:
        return
    y.copy_(x * 2)


def test_a_destination_passing_call_timed_on_the_cpu_finds_its_outputs_poisoned():
    """The cold timer poisons a destination-passing call's outputs before each timed call; the CPU
    timer did not, so a call that skipped its work whenever its outputs still held the last call's
    result passed every verified sample and was timed as an empty call (ok, and fast)."""
    from solbench.measure.worker import MeasureSettings, Task, WorkerState, execute
    from solbench.workload.cases import build_case
    from solbench.workload.schema import WorkloadSpec

    spec = WorkloadSpec.model_validate({
        "name": "w", "parameters": {"n": [64]}, "dtypes": ["float32"], "inputs": {"x": {"shape": ["n"]}},
        "outputs": {"y": {"shape": ["n"]}}, "reference": "tests.unit.helpers:double",
        "implementations": {"baseline": {"fn": "tests.unit.test_guards:_doubles_only_into_nan",
                                         "destination": True}}})
    settings = MeasureSettings(timer="cpu", warmup=1, min_samples=5, max_samples=8, budget_s=0.05)
    task = Task(spec, build_case(spec, {"n": 64}, "float32"), "baseline", None, "cpu", settings)
    _SKIPPED.clear()
    result, _ = execute(task, WorkerState())
    assert result.status == "ok", result.message
    assert result.timing is not None and len(_SKIPPED) > result.timing.n  # the checks' calls and the timed ones
    assert not any(_SKIPPED)  # every call, timed or not, found NaN where its outputs go, and did the work


def _patched(monkeypatch, tmp_path, rounds, *impls):
    """The results of ``impls``, measured in that order after the baseline, ``rounds`` rounds in one process
    (``--in-process``: a later round checks lighter, and an implementation's module state lives on from one
    round to the next). A patch caught before its implementation took it off again is still in this process:
    put back when the test ends."""
    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.results import store

    monkeypatch.setattr(tensors_mod, "compare", tensors_mod.compare)
    for name in [n for n in sys.modules if n.startswith("solbench_user_")]:  # each run imports the cheats afresh
        monkeypatch.delitem(sys.modules, name)
    out = tmp_path / "run.json"
    chosen = [a for impl in ("baseline", *impls) for a in ("-i", impl)]
    r = CliRunner().invoke(main, ["run", "tests/data/hostile/hostile.yaml", "-w", "patch_for_a_while", *chosen,
                                  "-o", str(out), "--in-process", "--repeat", str(rounds), "--max-rounds", str(rounds),
                                  "--budget", "0.05", "--min-samples", "5", "--max-samples", "20", "--device", "cpu"])
    by_name = {i.name: i for c in store.load(out).cases for i in c.impls}
    assert by_name["baseline"].status == "ok", by_name["baseline"].message
    assert r.exit_code != 0, r.output
    return [by_name[impl] for impl in impls]


def test_a_comparison_patched_for_the_checks_and_restored_before_the_task_ends_is_caught(monkeypatch, tmp_path):
    """The tamper snapshot is also compared right after the correctness checks: a later round's one checked call
    that patches the comparison, restored by the next call (whose output holds the same bits, so its verification
    reuses the patched verdict), left nothing for the comparison at the task's end to see."""
    (hack,) = _patched(monkeypatch, tmp_path, 2, "patches_comparison_for_a_while")
    assert hack.status == "reward_hack", (hack.status, hack.message)
    assert "solbench.measure.tensors.compare" in hack.message and "after its correctness checks" in hack.message


def test_a_comparison_patched_while_timed_and_restored_after_timing_is_caught(monkeypatch, tmp_path):
    """And right after timing, before the checks after timing make their calls: a comparison patched for the
    timed calls' verification, taken off by the first call after timing."""
    (hack,) = _patched(monkeypatch, tmp_path, 1, "patches_comparison_while_timed")
    assert hack.status == "reward_hack", (hack.status, hack.message)
    assert "solbench.measure.tensors.compare" in hack.message and "after timing" in hack.message


@pytest.mark.parametrize("owner", [torch.Tensor, __import__("builtins")], ids=["Tensor", "builtins"])
def test_the_snapshot_finds_each_attribute_where_static_lookup_does(owner):
    import inspect

    found = guards._static_attrs(owner)
    assert [a for a in dir(owner) if found.get(a) is not inspect.getattr_static(owner, a, None)] == []


def test_a_method_shadowed_on_a_subclass_is_found_before_the_base_classes():
    class Base:
        def f(self):
            return 1

    class Child(Base):
        def f(self):
            return 2

    assert guards._static_attrs(Child)["f"] is vars(Child)["f"]
    assert guards._static_attrs(Base)["f"] is vars(Base)["f"]


def test_in_process_nothing_is_measured_after_a_cheat_left_its_patch_behind(monkeypatch, tmp_path):
    """--in-process has no worker to throw away: a patch caught before its implementation took it off stays in
    the process, and a plainly wrong implementation measured after it would pass the patched comparison. It is
    an error that names the cheat instead, never an ok."""
    hack, wrong = _patched(monkeypatch, tmp_path, 1, "patches_comparison_while_timed", "plainly_wrong")
    assert hack.status == "reward_hack", (hack.status, hack.message)
    assert wrong.status == "error", (wrong.status, wrong.message)
    assert "patches_comparison_while_timed" in wrong.message and "--in-process" in wrong.message
