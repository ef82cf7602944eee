"""A point measured in some rounds of a run and skipped in others is an error, not its measured rounds.

Skipped is no failure: an implementation that raises DeviceError ("needs another GPU") before any
call of it has run in its worker is ``skipped``, and a skipped round was left out of the point's
merged result. So an implementation could choose its rounds: time its own kernels in set-up
(untimed, before any call of it) and say it is skipped whenever the round looks slow (another
process's clocks, a slow mode of this process), keeping only its fast rounds (with --max-rounds
the run even adds rounds for those it skipped). A requirement does not go missing between the
rounds of one run on one device: a point skipped in one round and measured in another is an error.
"""

import textwrap

from click.testing import CliRunner

from solbench import api
from solbench.analysis.pooling import merge_rounds
from solbench.cli import main
from solbench.cli.common import failures
from solbench.execute import session
from solbench.measure.worker import MeasureSettings
from solbench.results import store
from solbench.results.model import ImplResult, Timing
from tests.unit.factories import RoundCounter, kept_as_given, make_run

T = Timing((1e-3,) * 4, 1e-3, 1e-3, 1e-3, "converged")
OK = ImplResult("picky", "ok", timing=T)
SKIP = ImplResult("picky", "skipped", "needs an sm_100 GPU")


def test_a_point_skipped_in_one_round_and_measured_in_another_merges_into_an_error():
    for rounds in ([OK, SKIP, OK], [SKIP, OK, OK]):
        merged = merge_rounds(rounds)
        assert merged.status == "error", merged
        assert merged.timing is None and "skipped" in merged.message and "needs an sm_100 GPU" in merged.message
    assert merge_rounds([SKIP, SKIP]).status == "skipped"  # a machine that lacks it: skipped every round
    assert merge_rounds([OK, OK]).status == "ok"
    failed = ImplResult("picky", "incorrect", "y: 3 of 8 elements outside")
    assert merge_rounds([OK, SKIP, failed]).status == "incorrect"  # a failure is the result, as before


class _Picky(RoundCounter):
    """Every round of every task is measured, but "wrong" (standing in for a picky implementation) says
    it needs another GPU in every round after the first."""

    def run(self, key, task, timeout_s, progress=None):
        if self.round > 0 and task.impl == "wrong":
            return ImplResult(task.impl, "skipped", "needs an sm_100 GPU")
        return ImplResult(task.impl, "ok", timing=T, protocol={"checks": "light"} if task.checks == "light" else {})


def test_the_run_loop_fails_a_point_that_skips_its_later_rounds():
    (planned,) = api.plan(["tests/data/double.yaml"], "cpu", impls=("baseline", "wrong"))
    units = [session.Unit(planned.spec, planned.path, planned.cases[:1], ("baseline", "wrong"))]
    run = session.measure_units(units, make_run({}), _Picky(), device="cpu", settings=MeasureSettings(),
                                timeout_s=1.0, l2_bytes=None, score=kept_as_given, emit=lambda e, d: None, repeat=3)
    status = {r.name: r.status for r in run.cases[0].impls}
    assert status == {"baseline": "ok", "wrong": "error"}
    assert failures(run) == [f"{run.cases[0].case_id}/wrong: error"]


PICKY = '''
import os
from pathlib import Path

from solbench.errors import DeviceError


def double(x):
    return x * 2


def once(x, mark):
    """Measured in the first worker that sets it up; in every later one it says it needs another GPU
    (a set-up that had timed its own kernels and judged the round slow would say the same)."""
    me = str(os.getpid())
    if Path(mark).exists() and Path(mark).read_text() != me:
        raise DeviceError("needs an sm_100 GPU")
    Path(mark).write_text(me)
    return {"x": x}
'''


def test_a_run_whose_implementation_skips_its_later_rounds_exits_4(tmp_path):
    (tmp_path / "picky.py").write_text(PICKY)
    (tmp_path / "picky.yaml").write_text(textwrap.dedent(f"""\
        workloads:
          - name: picky
            parameters: {{n: [64], mark: ["{tmp_path / 'mark'}"]}}
            dtypes: [float32]
            inputs:
              x: {{shape: [n, 8]}}
            outputs:
              y: {{shape: [n, 8]}}
            ops: [{{op: mul, numel: n * 8, inputs: 1}}]
            reference: picky.py:double
            implementations:
              baseline: picky.py:double
              picky: {{fn: picky.py:double, setup: picky.py:once}}
        """))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(tmp_path / "picky.yaml"), "--device", "cpu", "--repeat", "3",
                                       "--budget", "0.05", "--min-samples", "5", "--max-samples", "20",
                                       "-o", str(out)])
    assert result.exit_code == 4, result.output
    picky = {r.name: r for c in store.load(out).cases for r in c.impls}["picky"]
    assert picky.status == "error" and "needs an sm_100 GPU" in picky.message, picky
