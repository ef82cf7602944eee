"""Cheats nothing catches yet, each pinned as a strict xfail: it fails its assertion while the hole is
open, and the suite fails (XPASS) once something catches it, so that this file is updated with the
fix. README.md, "Not covered", says what closing each needs."""

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

HOSTILE = "tests/data/hostile/hostile.yaml"


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "known hole, not fixed: set-up runs untimed on the very inputs it is timed on, and again for each "
    "unseen input set, so it can compute the result and keep it where no check looks; the call returns "
    "a copy"))
def test_a_setup_that_does_the_work_is_caught(tmp_path):
    out = tmp_path / "holes.json"
    CliRunner().invoke(main, ["run", HOSTILE, "-w", "known_holes", "-o", str(out), "--repeat", "1",
                              "--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"])
    status = {r.name: r.status for c in store.load(out).cases for r in c.impls}
    if status["baseline"] != "ok":  # the run itself went wrong: a failure, not the expected one
        raise RuntimeError(f"the honest baseline is {status['baseline']}")
    assert status["setup_does_the_work"] in ("reward_hack", "invalid"), status
