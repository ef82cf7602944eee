"""``solbench ab``: two checkouts measured in one invocation, alternating, then gated.

Nothing here depends on how fast the machine is: the order of measurements is checked with fake
executors, the end-to-end runs assert on structure, on failures (an implementation that raises)
and on a gate with a 10x threshold, and the verdict on a slowdown uses synthetic runs.
"""

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from solbench import api
from solbench.analysis.adaptive import looks_for
from solbench.cli import main
from solbench.execute import session
from solbench.execute.alternate import Side, measure_ab
from solbench.measure.worker import MeasureSettings
from solbench.results import store
from solbench.results.model import ImplResult, Timing
from tests.unit.factories import make_case, make_run

WORKLOAD = """\
workloads:
  - name: tiny
    parameters: {n: [32, 64]}
    dtypes: [float32]
    inputs:
      x: {shape: [n, 8]}
    outputs:
      y: {shape: [n, 8]}
    ops: [{op: mul, numel: n * 8, inputs: 1}]
    reference: abimpl:reference
    implementations:
      baseline: abimpl:reference
      kernel: abimpl:kernel
      local: local_impl.py:kernel
"""
GOOD = "def reference(x):\n    return x * 2\n\n\ndef kernel(x):\n    return x + x\n"
BROKEN = "def reference(x):\n    return x * 2\n\n\ndef kernel(x):\n    raise RuntimeError('broken in this tree')\n"
FAST = ["--device", "cpu", "--budget", "0.05", "--min-samples", "5", "--max-samples", "15"]


def _tree(root: Path, impl: str = GOOD, workload: str = WORKLOAD) -> Path:
    (root / "wl").mkdir(parents=True)
    (root / "wl" / "tiny.yaml").write_text(workload)
    (root / "wl" / "local_impl.py").write_text("def kernel(x):\n    return x * 2\n")
    (root / "abimpl.py").write_text(impl)
    return root


class Recorder:
    """A fake executor per side: records (side, case, impl) in one shared log; never times anything."""

    def __init__(self, label, log):
        self.label, self.log = label, log

    def prestart(self, keys):
        self.log.append(("prestart", self.label))
        self.started = [*getattr(self, "started", []), list(keys)]

    def run(self, key, task, timeout_s, progress=None):
        self.log.append((self.label, task.case.id, task.impl))
        self.checks = [*getattr(self, "checks", []), task.checks]
        self.released = [*getattr(self, "released", []), task.release_after]
        return ImplResult(task.impl, "ok", timing=Timing((1e-3,) * 5, 1e-3, 1e-3, 1e-3, "converged"),
                          protocol={"checks": "light"} if task.checks == "light" else {})

    def retire(self, keys):
        self.log.append(("retire", self.label))

    def close(self):
        pass


def _side(label, tree, log):
    planned = api.plan([tree / "wl" / "tiny.yaml"], "cpu")
    units = [session.Unit(p.spec, p.path, p.cases, tuple(p.spec.implementations)) for p in planned]

    def score(unit, case, impls):
        return replace(make_case(case.id, {}, workload=unit.spec.name), impls=tuple(impls))

    return Side(label, units, make_run({}), Recorder(label, log), score)


def _recorded(tmp_path, monkeypatch, **kwargs):
    """Both sides of identical trees through measure_ab with recording executors: (sides, log of what
    was measured and started, runs, progress events)."""
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    log, events = [], []
    monkeypatch.syspath_prepend(str(base))
    sides = [_side("baseline", base, log), _side("current", head, log)]
    runs = measure_ab(sides, device="cpu", settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
                      emit=lambda e, d: events.append((e, d)), **kwargs)
    return sides, log, runs, events


def test_sides_alternate_implementation_by_implementation_and_swap_each_case_and_round(tmp_path, monkeypatch):
    _, log, runs, _ = _recorded(tmp_path, monkeypatch, rounds=2)
    runs_of = [e for e in log if e[0] in ("baseline", "current")]
    cases = ["tiny[n=32,float32]", "tiny[n=64,float32]"]
    impls = ["baseline", "kernel", "local"]
    expected = []
    for r in range(2):
        for k, case in enumerate(cases):
            order = ["baseline", "current"] if (k + r) % 2 == 0 else ["current", "baseline"]
            expected += [(side, case, impl) for impl in impls for side in order]
    assert runs_of == expected
    # both sides' workers start before anything is measured and are retired after each round
    assert [e for e in log if e[0] in ("prestart", "retire")] == [
        ("prestart", "baseline"), ("prestart", "current"), ("retire", "baseline"), ("retire", "current")] * 2
    for run in runs:
        assert [c.case_id for c in run.cases] == cases
        assert all(r.timing.n_rounds == 2 for c in run.cases for r in c.impls)


def test_a_workload_on_one_side_only_is_measured_there_only(tmp_path, monkeypatch):
    base = _tree(tmp_path / "base")
    extra = WORKLOAD + WORKLOAD.split("workloads:\n", 1)[1].replace("name: tiny", "name: added")
    head = _tree(tmp_path / "head", workload=extra)
    monkeypatch.syspath_prepend(str(base))
    log = []
    base_run, head_run = measure_ab([_side("baseline", base, log), _side("current", head, log)], device="cpu",
                                    settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
                                    emit=lambda e, d: None, rounds=1)
    assert {c.workload for c in base_run.cases} == {"tiny"}
    assert {c.workload for c in head_run.cases} == {"tiny", "added"}


def test_rounds_two_to_three_share_a_pass_each_round_in_a_worker_of_its_own(tmp_path, monkeypatch):
    sides, log, runs, _ = _recorded(tmp_path, monkeypatch, rounds=3)
    assert [e for e in log if e[0] in ("prestart", "retire")] == [
        ("prestart", "baseline"), ("prestart", "current"), ("retire", "baseline"), ("retire", "current")] * 2
    impls = ["baseline", "kernel", "local"]
    assert sides[1].executor.started == [[("tiny", i) for i in impls],
                                         [("tiny", w) for i in impls for w in (i, f"{i}#2")]]
    second = [e for e in log if e[0] in ("baseline", "current")][2 * 3 * 2:]  # after round 1 (2 cases, 3 impls, 2 sides)
    expected = []
    for k, case in enumerate(["tiny[n=32,float32]", "tiny[n=64,float32]"]):
        for impl in impls:
            for s in range(2):  # round 2, then round 3; the side that goes first alternates
                order = ["baseline", "current"] if (k + 1 + s) % 2 == 0 else ["current", "baseline"]
                expected += [(side, case, impl) for side in order]
    assert second == expected
    for run in runs:
        assert all(r.timing.n_rounds == 3 for c in run.cases for r in c.impls)
    # these executors cannot say what fits side by side: every task gives its memory back as it ends
    assert all(side.executor.released for side in sides) and all(all(side.executor.released) for side in sides)


def test_added_rounds_measure_only_the_undecided_keys_four_at_a_time_alternating(tmp_path, monkeypatch):
    asked = []
    left = ["tiny[n=64,float32]/kernel"]

    def undecided(runs):
        asked.append([max(r.timing.n_rounds for c in run.cases for r in c.impls) for run in runs])
        return list(left) if len(asked) < 3 else []  # undecided after rounds 2 and 6, decided after 10

    sides, log, runs, events = _recorded(tmp_path, monkeypatch, rounds=2, max_rounds=12, undecided=undecided)
    done = sum(d.get("rounds", 1) for e, d in events if e == "case_done")  # the progress bar ends full
    assert done == 2 * 2 + sum(d["cases"] for e, d in events if e == "more") == 2 * 2 + 8
    assert asked == [[2, 2], [6, 6], [10, 10]]  # asked after the first rounds, then every four; stops when decided
    assert looks_for(2, 12) == 4  # looks at 2, 6, 10 and 12 at most
    added = [e for e in log if e[0] in ("baseline", "current")][2 * 2 * 3 * 2:]  # after two full rounds (2 cases, 3 impls, 2 sides)
    expected = []
    for done in (2, 6):
        for s in range(4):  # the n=64 case is the second (k = 1)
            order = ["baseline", "current"] if (1 + done + s) % 2 == 0 else ["current", "baseline"]
            expected += [(side, "tiny[n=64,float32]", "kernel") for side in order]
    assert added == expected
    assert sides[0].executor.started[-1] == [("tiny", "kernel"), ("tiny", "kernel#2"), ("tiny", "kernel#3"),
                                             ("tiny", "kernel#4")]  # each added round in a worker of its own
    for run in runs:
        rounds = {f"{c.case_id}/{r.name}": r.timing.n_rounds for c in run.cases for r in c.impls}
        assert rounds.pop("tiny[n=64,float32]/kernel") == 10 and set(rounds.values()) == {2}


def test_added_rounds_stop_at_the_cap(tmp_path, monkeypatch):
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    monkeypatch.syspath_prepend(str(base))
    log = []
    runs = measure_ab([_side("baseline", base, log), _side("current", head, log)], device="cpu",
                      settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None, emit=lambda e, d: None,
                      rounds=1, max_rounds=3, undecided=lambda runs: ["tiny[n=32,float32]/local"])
    assert max(r.timing.n_rounds for c in runs[1].cases for r in c.impls) == 3


def _ab(*args):
    return CliRunner().invoke(main, ["ab", *args])


def test_identical_trees_measured_in_one_invocation(tmp_path):
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    out = tmp_path / "out"
    result = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml", "--rounds", "3",
                 "--max-rounds", "3", "--threshold", "1000%", "--out-dir", str(out), "--json", *FAST)
    assert result.exit_code in (0, 3), result.output  # a loaded machine may leave a pair undecided at 3 rounds
    verdicts = json.loads(result.stdout)["verdicts"]
    assert len(verdicts) == 6 and not {v["verdict"] for v in verdicts} & {"REGRESSION", "BROKEN", "MISSING"}
    assert {(v["rounds_base"], v["rounds_cur"]) for v in verdicts} == {(3, 3)}
    for side, tree in (("baseline", base), ("current", head)):
        run = store.load(out / f"{side}.json")
        assert run.protocol.rounds == 3 and run.notes[-1] == f"ab {side}: tree {tree.resolve()}"
        for r in (r for c in run.cases for r in c.impls):
            assert r.status == "ok" and r.timing.n_rounds == 3
            assert r.protocol["tree"] == str(tree.resolve())
            assert Path(r.protocol["impl_file"]).is_relative_to(tree.resolve())  # each side ran its own code


def test_the_saved_runs_record_the_rounds_ab_added_where_the_gate_was_undecided(tmp_path):
    """A verdict between one process a side is undecided, so --rounds 1 --max-rounds 5 adds a look of four
    rounds to every key: the saved runs recorded a cap of 0 and their header no added rounds."""
    from solbench.report.console import run_header

    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    out = tmp_path / "out"
    result = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml", "-i", "kernel",
                 "--rounds", "1", "--max-rounds", "5", "--threshold", "1000%", "--out-dir", str(out), *FAST)
    assert result.exit_code in (0, 3), result.output
    for side in ("baseline", "current"):
        run = store.load(out / f"{side}.json")
        assert {r.timing.n_rounds for c in run.cases for r in c.impls} == {5}
        p = run.protocol
        assert (p.rounds, p.max_rounds, p.rounds_rule, p.rounds_target) == (1, 5, "gate", 0.0)
        assert "1 round, up to 5 where the gate against the other tree was undecided (4 more a look)" in run_header(run)


def test_a_run_that_adds_no_rounds_records_no_cap_or_rule():
    from solbench.report.console import run_header

    run = make_run({})
    for rounds, max_rounds in ((1, 0), (3, 0), (3, 3)):
        p = replace(run.protocol, rounds=rounds, max_rounds=max_rounds)
        header = run_header(replace(run, protocol=p))
        assert "up to" not in header and ("round" in header) == (rounds > 1)
    added = run_header(replace(run, protocol=replace(run.protocol, rounds=3, max_rounds=9, rounds_target=0.02)))
    assert "3 rounds, up to 9 where wider than ±2% over rounds (fresh workers" in added  # run's rule, as before


def test_a_tree_whose_implementation_raises_is_broken_and_exits_4(tmp_path):
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head", impl=BROKEN)
    result = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml", "--rounds", "1",
                 "--out-dir", str(tmp_path / "out"), "--json", *FAST)
    assert result.exit_code == 4, result.output
    doc = json.loads(result.stdout)  # the JSON and the line on stderr say the command's code, not the gate's 1
    assert (doc["exit_code"], doc["gate_exit_code"]) == (4, 1) and "exit 4 (the gate's own: 1)" in result.stderr
    verdicts = {v["key"]: v for v in doc["verdicts"]}
    broken = verdicts["tiny[n=32,float32]/kernel"]
    assert broken["verdict"] == "BROKEN" and "broken in this tree" in broken["reason"]
    # and the other way round the baseline's failure is not the change's: kernel is new work, not broken
    swapped = _ab("--baseline-tree", str(head), "--current-tree", str(base), "wl/tiny.yaml", "--rounds", "1",
                  "--threshold", "1000%", "--out-dir", str(tmp_path / "out2"), "--json", *FAST)
    assert swapped.exit_code in (0, 3), swapped.output
    kernel = {v["key"]: v for v in json.loads(swapped.stdout)["verdicts"]}["tiny[n=32,float32]/kernel"]
    assert kernel["verdict"] == "MISSING"


def test_ab_gates_what_it_measured(tmp_path, monkeypatch):
    """The verdict comes from the gate over rounds: a synthetic 10% slowdown exits 1."""
    rng = np.random.default_rng(0)

    def fake_ab(files, baseline_tree, current_tree, options, *, rounds, device, progress, on_case, **adaptive):
        from solbench.analysis.pooling import combine_runs

        def side(shift):
            return combine_runs([make_run({"c": {"k": list(1e-3 * shift * np.exp(rng.normal(0, 0.005)
                                                                                 + rng.normal(0, 0.01, 30)))}})
                                 for _ in range(rounds)])

        base, cur = side(1.0), side(1.10)
        on_case([base, cur])
        return base, cur

    monkeypatch.setattr(api, "ab", fake_ab)
    out = tmp_path / "out"
    result = _ab("--baseline-tree", str(tmp_path), "x.yaml", "--rounds", "5", "--out-dir", str(out), "-q")
    assert result.exit_code == 1, result.output
    assert "REGRESSION" in result.output and (out / "baseline.json").is_file() and (out / "current.json").is_file()
    doc = json.loads(_ab("--baseline-tree", str(tmp_path), "x.yaml", "--rounds", "5", "--out-dir", str(out),
                         "--force", "--json").stdout)
    assert doc["run_sd"] == 0.0 and doc["run_sd_source"].startswith("none: both trees")  # one invocation, one offset


@pytest.mark.parametrize(("args", "message"), [
    (["--baseline-tree", "{tmp}/nowhere", "wl/tiny.yaml"], "no such folder"),
    (["--baseline-tree", "{tmp}/base", "{tmp}/base/wl/tiny.yaml"], "paths inside each tree"),
    (["--baseline-tree", "{tmp}/base", "--current-tree", "{tmp}/head", "../head/wl/tiny.yaml", "--out-dir",
      "{tmp}/out"], "paths inside each tree"),  # resolved in the baseline tree, it is the current tree's file
    (["--baseline-tree", "{tmp}/base", "--current-tree", "{tmp}/base", "wl/missing.yaml"], "exists in --baseline-tree"),
    (["--baseline-tree", "{tmp}/base", "--current-tree", "{tmp}/base", "wl/tiny.yaml", "--threshold", "x"],
     "cannot parse threshold"),
])
def test_bad_input_exits_2(tmp_path, args, message):
    _tree(tmp_path / "base"), _tree(tmp_path / "head")
    result = _ab(*[a.format(tmp=tmp_path) for a in args], *FAST)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_folder_of_workloads_is_measured_in_each_tree_as_run_measures_it(tmp_path):
    """`run wl/` measures every workload file of the folder; `ab` took only files and said the
    folder did not exist in the baseline tree (alone) or left it out unmeasured (beside a file)."""
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    out = tmp_path / "out"
    result = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl", "--rounds", "1",
                 "--max-rounds", "1", "--out-dir", str(out), *FAST)
    assert result.exit_code in (0, 3), result.output
    for side in ("baseline", "current"):
        assert {c.case_id for c in store.load(out / f"{side}.json").cases} == {"tiny[n=32,float32]",
                                                                              "tiny[n=64,float32]"}


def test_a_worker_in_a_tree_loads_code_under_test_from_that_tree(tmp_path):
    """enter_tree: a module of a package the harness already imported (solbench.impls) comes from
    the tree; the harness's own modules stay the invoking solbench's."""
    pkg = tmp_path / "solbench" / "impls"
    pkg.mkdir(parents=True)
    (pkg / "ab_probe.py").write_text("WHERE = 'tree'\n")
    (tmp_path / "plain_mod.py").write_text("WHERE = 'tree'\n")
    code = textwrap.dedent(f"""
        import os, solbench.measure.worker as w, solbench.impls.registry as reg
        w.enter_tree({str(tmp_path)!r})
        import solbench.impls.ab_probe as probe, plain_mod
        print(probe.WHERE, plain_mod.WHERE, os.getcwd() == {str(tmp_path.resolve())!r},
              reg.__file__.startswith({str(Path(api.__file__).parent)!r}), w.TREE == {str(tmp_path.resolve())!r})
    """)
    root = Path(api.__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout.split() == ["tree", "tree", "True", "True", "True"]


def test_a_worker_in_a_tree_builds_solbench_kernels_from_that_trees_sources(tmp_path):
    """enter_tree: solbench's kernel sources (gemv_stream.cu, ...) come from the tree, as its ops.py does;
    the loader, a harness module, read them from the invoking solbench's folder, so `ab` of two trees
    that differ in a .cu file measured the same kernel on both sides. The timer's gate stays the harness's."""
    from solbench.kernels import loader

    pkg = tmp_path / "solbench" / "kernels"
    pkg.mkdir(parents=True)
    ours = Path(loader.__file__).parent
    (pkg / "bias_gelu.cu").write_text("// the tree's\n" + (ours / "bias_gelu.cu").read_text())
    (pkg / "gate.cu").write_text("// the tree's\n" + (ours / "gate.cu").read_text())
    code = textwrap.dedent(f"""
        import solbench.measure.worker as w
        from solbench.kernels import loader
        w.enter_tree({str(tmp_path)!r})
        gelu = loader.read_source("bias_gelu.cu")
        print(gelu.startswith('#line 1 "bias_gelu.cu"\\n// the tree'), '#line 1 "common.cu"' in gelu,
              "the tree's" in loader.read_source("gate.cu"))
    """)
    root = Path(api.__file__).parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout.split() == ["True", "True", "False"]  # common.cu, not in the tree: the invoking one's


def test_the_ci_example_uses_only_options_that_exist():
    """docs/ci/github-actions-gpu-gate.yml: every solbench option it passes is one the command has."""
    import re

    import yaml

    doc = yaml.safe_load((Path(api.__file__).parents[1] / "docs/ci/github-actions-gpu-gate.yml").read_text())
    scripts = [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]
    calls = [line for text in scripts for line in text.replace("\\\n", " ").splitlines() if "bin/solbench " in line]
    assert any(" ab " in c for c in calls) and any(" gate " in c for c in calls)
    for call in calls:
        words = call.split("bin/solbench ", 1)[1].split()
        command = main.commands[words[0]]
        known = {opt for p in command.params for opt in p.opts}
        used = {w.split("=")[0] for w in words[1:] if re.match(r"^--?[a-z]", w)}
        assert used <= known, (words[0], used - known)


def test_ab_without_a_verdict_says_so_in_the_junit(tmp_path, monkeypatch):
    """Refused (no such baseline tree, a bad threshold) or interrupted, ab leaves its --junit file saying that
    no verdict came (one testcase in error), as gate does: never the verdicts an earlier job left there."""
    import xml.etree.ElementTree as ET

    from solbench.errors import RunInterrupted

    _tree(tmp_path / "base")
    junit = tmp_path / "gate.xml"

    def gated(*args: str) -> tuple[int, str, str]:
        junit.write_text("<testsuites><testsuite><testcase name='an earlier job'/></testsuite></testsuites>")
        r = _ab(*args, "wl/tiny.yaml", "--junit", str(junit), "--out-dir", str(tmp_path / "out"), "--force", *FAST)
        error = ET.parse(junit).getroot().find("testsuite/testcase/error")
        return r.exit_code, r.output, "" if error is None else error.get("message")

    code, output, junit_says = gated("--baseline-tree", str(tmp_path / "nowhere"))
    assert code == 2 and "no such folder" in output and "no such folder" in junit_says
    code, output, junit_says = gated("--baseline-tree", str(tmp_path / "base"), "--threshold", "x")
    assert code == 2 and "cannot parse threshold" in output and "cannot parse threshold" in junit_says
    code, output, junit_says = gated("--baseline-tree", str(tmp_path / "base"), "--rounds", "4", "--max-rounds", "3")
    assert code == 2 and "--max-rounds (3)" in output and "--max-rounds (3)" in junit_says  # a usage error too

    def interrupted(*args, **kwargs):
        raise RunInterrupted([make_run({"c": {"k": [1e-3] * 10}}), make_run({"c": {"k": [1e-3] * 10}})])

    monkeypatch.setattr(api, "ab", interrupted)
    code, output, junit_says = gated("--baseline-tree", str(tmp_path / "base"))
    assert code == 130 and "interrupted" in output and "interrupted" in junit_says


def test_ctrl_c_hands_back_both_runs_marked_incomplete(tmp_path, monkeypatch):
    from solbench.errors import RunInterrupted

    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    monkeypatch.syspath_prepend(str(base))
    log = []
    sides = [_side("baseline", base, log), _side("current", head, log)]
    calls = []

    def interrupt(key, task, timeout_s, progress=None):
        calls.append(task.impl)
        if len(calls) == 5:  # during the second case of the first round
            raise KeyboardInterrupt
        return Recorder.run(sides[0].executor, key, task, timeout_s)

    sides[1].executor.run = interrupt
    with pytest.raises(RunInterrupted) as stop:
        measure_ab(sides, device="cpu", settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
                   emit=lambda e, d: None, rounds=2)
    runs = stop.value.result
    assert [r.complete for r in runs] == [False, False]
    assert all(len(r.cases) == 1 for r in runs)  # the first case, measured on both sides, is kept


def test_each_side_checks_every_point_in_full_once_then_lighter(tmp_path, monkeypatch):
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    log = []
    monkeypatch.syspath_prepend(str(base))
    sides = [_side("baseline", base, log), _side("current", head, log)]
    measure_ab(sides, device="cpu", settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
               emit=lambda e, d: None, rounds=3)
    for side in sides:
        checks = side.executor.checks
        points = len(checks) // 3  # 2 cases x 3 implementations a round
        assert checks == ["full"] * points + ["light"] * 2 * points


class Spread(Recorder):
    """A fake executor whose rounds carry costs and a side-specific spread of samples, and which records
    each task's samples cap: what the allocation needs to size a next round."""

    def __init__(self, label, log, spread):
        super().__init__(label, log)
        self.spread, self.caps, self.calls = spread, [], 0

    def run(self, key, task, timeout_s, progress=None):
        super().run(key, task, timeout_s, progress)
        self.calls += 1
        self.caps.append((task.case.id, task.impl, task.settings.max_samples))
        level = 1e-3 * (1 + self.spread * ((self.calls % 3) - 1))  # round medians that move, side by side
        samples = tuple(level * (1 + 0.01 * k) for k in range(12))
        return ImplResult(task.impl, "ok", timing=Timing(samples, level, level * 0.99, level * 1.01, "converged"),
                          protocol={"setup_s": 0.05, "check_s": 0.05, "after_s": 0.01, "sample_s": 0.02})


def test_later_rounds_give_both_sides_one_samples_cap_the_larger_allocation(tmp_path, monkeypatch):
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    monkeypatch.syspath_prepend(str(base))
    log = []
    sides = [_side("baseline", base, log), _side("current", head, log)]
    sides[0].executor, sides[1].executor = Spread("baseline", log, 0.0), Spread("current", log, 0.03)
    settings = MeasureSettings()
    measure_ab(sides, device="cpu", settings=settings, timeout_s=1.0, l2_bytes=None, emit=lambda e, d: None, rounds=3)
    caps = [side.executor.caps for side in sides]
    points = len(caps[0]) // 3
    for side_caps in caps:  # the first round samples freely
        assert {cap for _, _, cap in side_caps[:points]} == {settings.max_samples}
    assert sorted(caps[0][points:]) == sorted(caps[1][points:])  # one cap a point, on both sides
    for name, case_id in sides[1].rounds:
        for impl in ("baseline", "kernel", "local"):
            own = [session._samples_cap(side.rounds[(name, case_id)][:1], impl, settings) for side in sides]
            second = next(cap for case, i, cap in caps[0][points:] if case == case_id and i == impl)
            assert None not in own and second == max(own) < settings.max_samples


def test_the_gate_line_counts_the_rounds_ab_added():
    """``gate: ... N re-measure round(s)`` after ab: the most rounds any point got beyond --rounds."""
    from solbench.cli.ab import added_rounds

    def run_with(rounds_per_point):
        cases = []
        for k, n in enumerate(rounds_per_point):
            timing = Timing((1e-3,) * n, 1e-3, 1e-3, 1e-3, "converged", rounds=tuple(range(n)))
            cases.append(replace(make_case(f"c{k}", {}), impls=(ImplResult("x", "ok", timing=timing),)))
        return replace(make_run({}), cases=tuple(cases))

    assert added_rounds(run_with([3, 7, 11]), 3) == 8
    assert added_rounds(run_with([3, 3]), 3) == 0
    assert added_rounds(run_with([]), 3) == 0


def test_later_rounds_count_each_sides_workers_at_the_peaks_their_first_round_measured(tmp_path, monkeypatch):
    """Rounds 2 and 3 of each point, on each side, carry what that side's worker of the point held in
    round 1 (``memory_peak_bytes``), and give their caches back once all the pass's workers at that
    size exceed the budget; round 1 has nothing measured."""
    from solbench.execute import alternate, warm

    peak = {("baseline", "kernel"): 7 << 20, ("current", "kernel"): 9 << 20}  # others: 1 MiB
    sent = []

    def fake_run_case(jobs, clock=None):
        out = []
        for job in jobs:
            side = "baseline" if job.executor.label == "baseline" else "current"
            sent.append((side, job.task.case.id, job.name, job.slot, job.held, job.task.release_after))
            out.append(ImplResult(job.name, "ok", timing=Timing((1e-3,) * 5, 1e-3, 1e-3, 1e-3, "converged"),
                                  protocol={"memory_peak_bytes": peak.get((side, job.name), 1 << 20)}))
        return out

    monkeypatch.setattr(alternate, "run_case", fake_run_case)
    probe = _tree(tmp_path / "probe")
    monkeypatch.syspath_prepend(str(probe))
    need = max(warm.held_bytes(c, input_sets=MeasureSettings().input_sets, reference_dtype="float32", device="cpu")
               for c in api.plan([probe / "wl" / "tiny.yaml"], "cpu")[0].cases)
    budget = 12 * max(need, 9 << 20) - 1  # 12 later workers (3 impls x 2 rounds x 2 sides) fit at the count only
    assert 12 * need <= budget
    monkeypatch.setattr(Recorder, "hold_budget", lambda self, key: budget, raising=False)
    _recorded(tmp_path, monkeypatch, rounds=3)
    first = [s for s in sent if s[4] == 0]
    later = [s for s in sent if s not in first]
    assert len(first) == 2 * 2 * 3 and len(later) == 2 * 2 * 3 * 2  # 2 cases, 2 sides, 3 impls (x 2 rounds)
    assert all(not s[5] for s in first)  # 6 workers at the count: they keep their caches
    assert {(s[0], s[2], s[4]) for s in later} == {(side, impl, peak.get((side, impl), 1 << 20))
                                                   for side in ("baseline", "current")
                                                   for impl in ("baseline", "kernel", "local")}
    assert need < 9 << 20 and all(s[5] for s in later)  # 12 x 9 MiB over the budget: caches given back


class FailsOnce(Recorder):
    """A side whose ``kernel`` times out in its first round (and would pass after)."""

    def run(self, key, task, timeout_s, progress=None):
        if task.impl == "kernel" and not any(e == (self.label, task.case.id, "kernel") for e in self.log):
            self.log.append((self.label, task.case.id, task.impl))
            return ImplResult(task.impl, "timeout", "no result within 1 s; the worker was killed")
        return super().run(key, task, timeout_s, progress)


def test_a_point_that_failed_on_one_side_gets_no_more_rounds_there_and_all_on_the_other(tmp_path, monkeypatch):
    """A failure in round 1 is the point's result on that side, whatever later rounds measure: its
    worker is not started again and its calls are not repeated; the other side measures every round."""
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    log = []
    monkeypatch.syspath_prepend(str(base))
    sides = [_side("baseline", base, log), _side("current", head, log)]
    sides[1].executor = FailsOnce("current", log)
    base_run, head_run = measure_ab(sides, device="cpu", settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
                                    emit=lambda e, d: None, rounds=3)
    ran = [e for e in log if e[0] in ("baseline", "current") and e[2] == "kernel"]
    assert sum(e[0] == "current" for e in ran) == 2 and sum(e[0] == "baseline" for e in ran) == 6
    later = sides[1].executor.started[1]  # rounds 2-3: the current tree's workers
    assert not any(key[1].startswith("kernel") for key in later) and any(key[1].startswith("local") for key in later)
    kernel = [r for c in head_run.cases for r in c.impls if r.name == "kernel"]
    assert all(r.status == "timeout" and r.message.startswith("round 1 of 3: ") for r in kernel)
    assert all(r.timing.n_rounds == 3 for c in base_run.cases for r in c.impls)


class AlwaysTimesOut(Recorder):
    def run(self, key, task, timeout_s, progress=None):
        self.log.append((self.label, task.case.id, task.impl))
        return ImplResult(task.impl, "timeout", "no result within 1 s; the worker was killed")


def test_a_workload_whose_every_point_failed_on_both_sides_is_still_counted_done_each_round(tmp_path, monkeypatch):
    """Rounds 2-3 start nothing for a workload all of whose points failed in round 1, but its cases
    still advance the progress (the bar's total is cases x rounds)."""
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    log, events = [], []
    monkeypatch.syspath_prepend(str(base))
    sides = [_side("baseline", base, log), _side("current", head, log)]
    for side in sides:
        side.executor = AlwaysTimesOut(side.label, log)
    measure_ab(sides, device="cpu", settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
               emit=lambda e, d: events.append((e, d)), rounds=3)
    assert sum(e[0] in ("baseline", "current") for e in log) == 2 * 3 * 2  # round 1 only
    assert sum(d.get("rounds", 1) for e, d in events if e == "case_done") == 2 * 3  # 2 cases x 3 rounds


@pytest.mark.parametrize(("outputs", "says"), [
    (["--junit", "{d}/gate.out", "--markdown-file", "{d}/gate.out"], "--markdown-file"),
    (["--out-dir", "{d}/ab", "--junit", "{d}/ab/current.json"], "--junit"),
])
def test_ab_refuses_two_outputs_in_one_file_before_measuring(outputs, says, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "ab", lambda *a, **k: pytest.fail("measured"))
    args = [a.format(d=tmp_path) for a in outputs]
    result = CliRunner().invoke(main, ["ab", "tests/data/double.yaml", "--baseline-tree", ".", "--device", "cpu",
                                       "--results-dir", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {says} ") and "also written by" in result.output


def test_an_implementation_new_in_the_current_tree_can_be_selected_with_i(tmp_path):
    """-i NEW, where only the current tree's workload has NEW: it is measured there and MISSING from
    the baseline, as without -i (it was refused as named in no selected workload). A name in neither
    tree is still refused, exit 2."""
    newer = WORKLOAD.replace("      local: local_impl.py:kernel\n",
                             "      local: local_impl.py:kernel\n      newer: abimpl:kernel\n")
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head", workload=newer)
    out = tmp_path / "out"
    result = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml", "-i", "newer",
                 "--rounds", "1", "--max-rounds", "1", "--out-dir", str(out), "--json", *FAST)
    assert result.exit_code in (0, 3), result.output
    verdicts = {v["key"]: v["verdict"] for v in json.loads(result.stdout)["verdicts"]}
    assert verdicts["tiny[n=32,float32]/newer"] == "MISSING"
    assert {r.name for c in store.load(out / "current.json").cases for r in c.impls} == {"baseline", "newer"}
    nowhere = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml", "-i", "nosuch",
                  "--out-dir", str(tmp_path / "out2"), *FAST)
    assert nowhere.exit_code == 2 and "no implementation named nosuch" in nowhere.output and "either tree" in nowhere.output


def test_a_workload_new_in_the_current_tree_with_w(tmp_path):
    """-w NEW, where only the current tree's file defines NEW: alone, there is nothing to compare, and
    ab says so in one line naming the workload and the baseline tree (exit 2; it was refused as named
    in no workload of the baseline's file); beside a workload of both trees, NEW is measured in the
    current tree and MISSING from the baseline, as without -w. A name in neither tree is still refused."""
    newer = WORKLOAD + WORKLOAD.replace("workloads:\n", "").replace("name: tiny", "name: fresh")
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head", workload=newer)
    trees = ["--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml"]
    alone = _ab(*trees, "-w", "fresh", "--out-dir", str(tmp_path / "out1"), *FAST)
    assert alone.exit_code == 2, alone.output
    assert alone.output.strip() == (f"error: -w: no workload named fresh in --baseline-tree {base} (wl/tiny.yaml): "
                                    "nothing to compare against (a workload new in this change: solbench run it)")
    out = tmp_path / "out"
    both = _ab(*trees, "-w", "tiny", "-w", "fresh", "-i", "kernel", "--rounds", "1", "--max-rounds", "1",
               "--out-dir", str(out), "--json", *FAST)
    assert both.exit_code in (0, 3), both.output
    verdicts = {v["key"]: v["verdict"] for v in json.loads(both.stdout)["verdicts"]}
    assert verdicts["fresh[n=32,float32]/kernel"] == "MISSING" and verdicts["tiny[n=32,float32]/kernel"] != "MISSING"
    assert {c.workload for c in store.load(out / "baseline.json").cases} == {"tiny"}
    assert {c.workload for c in store.load(out / "current.json").cases} == {"tiny", "fresh"}
    nowhere = _ab(*trees, "-w", "nosuch", "--out-dir", str(tmp_path / "out2"), *FAST)
    assert nowhere.exit_code == 2 and "no workload named nosuch" in nowhere.output and "fresh, tiny" in nowhere.output


def test_both_sides_note_the_processes_killed_for_leaving_their_workers_group(tmp_path, monkeypatch):
    """One sweep kills what the workers of either tree left (pool.sweep): both runs say how many."""
    class Escaping(Recorder):
        def close(self):
            self.escaped = 1

    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    monkeypatch.syspath_prepend(str(base))
    log = []
    sides = [_side("baseline", base, log), _side("current", head, log)]
    sides[1].executor = Escaping("current", log)
    runs = measure_ab(sides, device="cpu", settings=MeasureSettings(), timeout_s=1.0, l2_bytes=None,
                      emit=lambda e, d: None)
    assert [r.notes[-1] for r in runs] == [session.escaped_note(1)] * 2
    _, _, calm, _ = _recorded(tmp_path / "calm", monkeypatch)
    assert not any(r.notes for r in calm)


def test_ab_refuses_out_dir_dash_before_measuring(tmp_path, monkeypatch):
    """``--out-dir -`` made a folder named "-" and saved both runs there; '-' means stdout, which a
    folder of two runs cannot go to: refused in one line, exit 2, nothing made or measured."""
    monkeypatch.setattr(api, "ab", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["ab", str(Path(__file__).parents[2] / "tests/data/double.yaml"),
                                       "--baseline-tree", ".", "--device", "cpu", "--out-dir", "-"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --out-dir -: ") and result.output.count("\n") == 1
    assert not (tmp_path / "-").exists()



def test_ab_refuses_json_and_markdown_together_before_measuring(tmp_path, monkeypatch):
    """Both print the gate's whole verdict on stdout: the Markdown was silently dropped."""
    monkeypatch.setattr(api, "ab", lambda *a, **k: pytest.fail("measured"))
    result = CliRunner().invoke(main, ["ab", "tests/data/double.yaml", "--baseline-tree", ".", "--device", "cpu",
                                       "--results-dir", str(tmp_path), "--json", "--markdown"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --json and --markdown: ") and "--markdown-file" in result.output


def test_both_saved_runs_keep_what_the_run_says_about_the_device_and_skipped_cases(tmp_path, monkeypatch):
    """Each side's saved run replaced the prepared run's notes with its tree's line, so a run scored
    against estimated or mixed peaks, or with cases left out, no longer said so: it keeps them now."""
    from solbench.plan import prepare

    monkeypatch.setattr(prepare, "device_notes", lambda info: ("device: peaks estimated (a test's warning)",))
    base, head = _tree(tmp_path / "base"), _tree(tmp_path / "head")
    out = tmp_path / "out"
    result = _ab("--baseline-tree", str(base), "--current-tree", str(head), "wl/tiny.yaml", "-i", "kernel",
                 "--rounds", "1", "--max-rounds", "1", "--out-dir", str(out), *FAST)
    assert result.exit_code in (0, 3), result.output
    for side, tree in (("baseline", base), ("current", head)):
        notes = store.load(out / f"{side}.json").notes
        assert "device: peaks estimated (a test's warning)" in notes, notes
        assert f"ab {side}: tree {tree.resolve()}" in notes, notes
