"""A hand-edited round label outside what a round counter can be is refused as bad input (exit 2, one
line naming the file and where), never an OverflowError traceback (exit 5) from numpy's int64."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from tests.unit.factories import make_run

CASE = "demo[n=1]"


@pytest.mark.parametrize("label", [10 ** 30, 2 ** 63, -1])
@pytest.mark.parametrize("command", [["show", "{bad}"], ["compare", "{good}", "{bad}"],
                                     ["gate", "--baseline", "{good}", "--current", "{bad}"],
                                     ["spread", "{bad}", "{good}", "{other}"]])
def test_a_round_label_past_int64_or_below_zero_is_bad_input(tmp_path, label, command):
    rdir = tmp_path / "results"
    runs = [store.save_new(make_run({CASE: {"k": [1e-3 + i * 1e-6 + j * 1e-7 for j in range(30)]}}, rounds=3),
                           rdir, name) for i, name in enumerate(("good", "bad", "other"))]
    data = json.loads(runs[1].read_text())
    labels = data["cases"][0]["impls"][0]["timing"]["rounds"]
    data["cases"][0]["impls"][0]["timing"]["rounds"] = [label if x == 0 else x for x in labels]
    runs[1].write_text(json.dumps(data))
    names = dict(zip(("good", "bad", "other"), map(str, runs), strict=True))
    r = CliRunner().invoke(main, [a.format(**names) for a in command] + ["--results-dir", str(rdir)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert f"{runs[1]}: malformed result: cases[0].impls[0].timing: rounds holds the label {label}" in r.output
