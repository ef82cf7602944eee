"""Set-up runs untimed on the very inputs it is timed on. After timing, new values are written into the
inputs set-up may not prepare from (neither ``fixed`` in the workload nor in the implementation's
``setup_reads``) and the timed call is made again without set-up: a result set-up computed is caught."""

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

HOSTILE = "tests/data/hostile/hostile.yaml"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("setup_work") / "run.json"
    r = CliRunner().invoke(main, ["run", HOSTILE, "-w", "setup_work", "-o", str(out), "--repeat", "1",
                                  "--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"])
    by_name = {i.name: i for c in store.load(out).cases for i in c.impls}
    return r, by_name


def test_a_setup_that_does_the_work_is_a_reward_hack(results):
    r, by = results
    assert r.exit_code != 0, r.output  # a cheat makes the run fail
    hack = by["setup_does_the_work"]
    assert hack.status == "reward_hack", (hack.status, hack.message)
    assert "new values in x, residual" in hack.message and "set-up not run again" in hack.message
    assert "; w kept as set-up saw them)" in hack.message and "marked fixed: true in the workload" in hack.message


def test_a_setup_that_prepares_from_a_fixed_weight_passes(results):
    _, by = results
    assert by["baseline"].status == "ok" and by["prepares_from_the_weight"].status == "ok", \
        by["prepares_from_the_weight"].message
    assert "setup_reads" not in by["prepares_from_the_weight"].protocol


def test_a_copy_of_an_input_made_in_setup_must_be_declared(results):
    """A copy of x made once in set-up (an NHWC copy, say) is stale once x changes: undeclared, it reads as a
    result kept from set-up; declared in setup_reads, x keeps its values and residual alone gets new ones,
    and the declaration is in the result."""
    _, by = results
    assert by["copies_x"].status == "reward_hack", by["copies_x"].message
    assert "in the implementation's setup_reads" in by["copies_x"].message  # what an honest one does about it
    declared = by["copies_x_declared"]
    assert declared.status == "ok", declared.message
    assert declared.protocol["setup_reads"] == "x"


def test_declaring_every_input_falls_back_to_setup_run_again(results):
    """With nothing left to change, the check runs set-up again on new values in every input (the weaker
    check before this one): a set-up that does the work then passes. The declaration is recorded, and
    README.md, "Not covered", says so."""
    _, by = results
    weak = by["does_the_work_declaring_every_input"]
    assert weak.status == "ok", weak.message
    assert weak.protocol["setup_reads"] == "x,residual"
