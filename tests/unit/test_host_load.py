"""The host's load recorded with a run, and the gate's word when one side ran on a far busier host.
Loads are set on synthetic runs; nothing depends on how busy this machine is."""

import os
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from solbench.analysis.gate import LOAD_GAP, gate, load_note
from solbench.device.detect import host_load
from solbench.plan.device import with_end_clocks
from solbench.report.compare_json import gate_json
from solbench.report.junit import gate_junit
from solbench.report.markdown import gate_markdown
from tests.unit.factories import make_run, noisy


def _run(seed, start, end):
    rng = np.random.default_rng(seed)
    run = make_run({"c": {"k": noisy(rng, 30, 1e-3, 0.01)}}, rounds=3)
    return replace(run, environment=replace(run.environment, host_load=start, host_load_end=end))


def test_a_far_busier_side_is_named_with_both_loads():
    note = load_note(_run(0, 0.1, 0.4), _run(1, 0.2, 1.6))
    assert "busier during the current run" in note and "0.40 (baseline) vs 1.60 (current)" in note
    assert "busier during the baseline run" in load_note(_run(0, 1.5, 1.5), _run(1, 0.2, 0.3))


@pytest.mark.parametrize("base,cur", [((0.1, 0.4), (0.2, 0.4 + LOAD_GAP - 0.01)),  # alike
                                      ((None, None), (0.2, 2.0)),  # a run from before loads were recorded
                                      ((0.1, None), (None, None))])
def test_no_word_where_loads_are_alike_or_unknown(base, cur):
    assert load_note(_run(0, *base), _run(1, *cur)) == ""


def test_several_runs_a_side_take_the_busiest_and_need_every_run_to_record_one():
    busy = [_run(0, 0.1, 0.2), _run(2, 0.1, 1.9)]
    assert "busier during the baseline run" in load_note(busy, _run(1, 0.1, 0.2))
    assert load_note([*busy, _run(3, None, None)], _run(1, 0.1, 0.2)) == ""


def test_the_gate_carries_the_word_to_every_output():
    result = gate(_run(0, 0.1, 0.3), _run(1, 0.1, 2.0), threshold=0.05)
    assert result.load and gate_json(result)["load"] == result.load
    assert result.load in gate_markdown(result)
    assert 'name="load"' in gate_junit(result)
    assert gate(_run(0, 0.1, 0.3), _run(1, 0.1, 0.3)).load == ""


def test_a_run_records_the_load_after_measuring_on_any_device(monkeypatch):
    # the OS's load average is stubbed (1.5 per CPU): the end reading is read afresh, not the start's 0.1
    cpus = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5 * cpus, 0.0, 0.0))
    assert host_load() == 1.5
    after = with_end_clocks(_run(0, 0.1, None), SimpleNamespace(kind="cpu", uuid=None))
    assert (after.environment.host_load, after.environment.host_load_end) == (0.1, 1.5)

    def unknown():
        raise OSError("no load average on this OS")

    monkeypatch.setattr(os, "getloadavg", unknown)
    assert host_load() is None
    after = with_end_clocks(_run(0, 0.1, 0.7), SimpleNamespace(kind="cpu", uuid=None))
    assert (after.environment.host_load, after.environment.host_load_end) == (0.1, None)
