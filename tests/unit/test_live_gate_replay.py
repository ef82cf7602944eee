"""``bench/live_gate_replay.py --base-rounds``: a recorded baseline deepened to N rounds keeps its own
rounds first, takes the rest from the pool (which then no longer holds them), and leaves deeper points
as they were."""

import importlib.util
import sys
from pathlib import Path

from solbench.results import store

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "results/h200/issue16/session34/call5"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"bench/{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_deepened_baseline_has_its_own_rounds_then_drawn_ones_up_to_n():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        _module("loop_replay")
        replay = _module("live_gate_replay")
    finally:
        sys.path.remove(str(ROOT / "bench"))
    base = store.load(RUNS / "base-1.json.gz")
    own = replay.rounds_of(base)
    pool = replay.pooled([replay.rounds_of(store.load(RUNS / f"gated-{k}.json.gz")) for k in (1, 2)])
    before = {point: list(rounds) for point, rounds in pool.items()}
    deep = replay.rounds_of(replay.deepened(base, pool, 6))
    assert deep.keys() == own.keys()
    topped = kept = 0
    for point, rounds in own.items():
        if len(rounds) >= 6:
            assert deep[point] == rounds  # a deep enough point is left as measured
            assert pool[point] == before[point]
            kept += 1
            continue
        need = 6 - len(rounds)
        assert len(deep[point]) == 6
        assert deep[point][:len(rounds)] == rounds  # its own rounds first
        assert deep[point][len(rounds):] == before[point][-need:][::-1]  # then drawn from the pool's end
        assert pool[point] == before[point][:-need]  # and gone from the pool
        topped += 1
    assert topped > 0 and kept > 0  # the recorded base has both kinds of point
