"""``run --case PATTERN`` and ``run --set NAME=V1,V2``: pick cases and override parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.cli.run import parse_sets
from solbench.errors import ConfigError
from solbench.plan.workloads import plan
from solbench.workload.cases import case_matches

ID = "o_proj[tokens=16,hidden=512,float32]"


@pytest.mark.parametrize(("pattern", "hit"), [
    (ID, True), ("tokens=16", True), ("tokens=16,float32", True), ("tokens=1", False), ("hidden=512,bfloat16", False),
    ("o_proj[tokens=16,*", True), ("o_proj[tokens=1?,*", True), ("o_proj[tokens=1,*", False), ("*float32]", True),
    ("qkv_proj[*", False),
])
def test_case_patterns(pattern: str, hit: bool) -> None:
    assert case_matches(ID, pattern) is hit


def test_parse_sets_reads_numbers_and_refuses_bad_items() -> None:
    assert parse_sets(["tokens=16,64", "eps=1e-5", "mode=fast"]) == (
        ("tokens", (16, 64)), ("eps", (1e-5,)), ("mode", ("fast",)))
    for bad in ("tokens", "=16", "tokens="):
        with pytest.raises(ConfigError, match="expected NAME=V1,V2"):
            parse_sets([bad])
    with pytest.raises(ConfigError, match=r"tokens is set twice \(also --set tokens=32\)"):
        parse_sets(["tokens=32", "eps=1e-5", "tokens=16"])  # the later one silently replaced the earlier


def test_overrides_and_selection_in_the_plan() -> None:
    planned = plan(["workloads/attn.yaml"], "cpu", ["o_proj"], overrides={"tokens": (8, 32)})
    assert [c.id for c in planned[0].cases] == ["o_proj[tokens=8,hidden=512,float32]",
                                                "o_proj[tokens=32,hidden=512,float32]"]
    picked = plan(["workloads/attn.yaml"], "cpu", cases=["tokens=256"])
    assert {c.id for p in picked for c in p.cases} == {"o_proj[tokens=256,hidden=512,float32]",
                                                       "qkv_proj[tokens=256,hidden=512,kv_hidden=128,float32]"}
    with pytest.raises(ConfigError, match="no selected workload has a parameter tokenz"):
        plan(["workloads/attn.yaml"], "cpu", overrides={"tokenz": (8,)})
    with pytest.raises(ConfigError, match="no case matches 'tokens=3'"):
        plan(["workloads/attn.yaml"], "cpu", cases=["tokens=3"])


def test_run_measures_only_the_selected_overridden_case(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "--device", "cpu", "-w", "o_proj", "-i",
                                       "fused", "--set", "tokens=8,24", "--case", "tokens=24", "-o", str(out),
                                       "--budget", "0.02", "--min-samples", "3", "--max-samples", "10", "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [c["case_id"] for c in data["cases"]] == ["o_proj[tokens=24,hidden=512,float32]"]
    assert {i["name"]: i["status"] for i in data["cases"][0]["impls"]} == {"baseline": "ok", "fused": "ok", "floor": "ok"}


def test_a_workload_given_twice_is_refused_before_anything_runs(tmp_path):
    import shutil

    from solbench.errors import ConfigError
    from solbench.plan.workloads import plan

    with pytest.raises(ConfigError, match="workload 'o_proj' given twice"):
        plan(["workloads/attn.yaml", "workloads/attn.yaml"], "cpu")
    copy = tmp_path / "attn2.yaml"
    shutil.copy("workloads/attn.yaml", copy)
    with pytest.raises(ConfigError, match=r"workload 'o_proj' also defined in workloads/attn\.yaml"):
        plan(["workloads/attn.yaml", str(copy)], "cpu")


def test_a_set_value_of_the_wrong_kind_names_set_not_the_file():
    with pytest.raises(ConfigError, match=r"--set tokens=abc: tokens is a number in workloads/attn\.yaml"):
        plan(["workloads/attn.yaml"], "cpu", overrides={"tokens": ("abc",)})


def test_a_set_value_an_expression_refuses_says_it_came_from_set():
    with pytest.raises(ConfigError, match=r"\(with --set tokens=-5\)"):
        plan(["workloads/attn.yaml"], "cpu", overrides={"tokens": (-5,)})


def test_a_folder_of_workload_files_runs_each(tmp_path):
    import shutil

    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy("tests/data/double.yaml", folder / "b.yaml")
    shutil.copy("tests/unit/helpers.py", folder / "helpers.py")  # not a workload: left alone
    assert [p.spec.name for p in plan([str(folder)], "cpu")] == ["double"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="a folder with no workload file"):
        plan([str(empty)], "cpu")


@pytest.mark.parametrize("pattern", ["", " ", ",", " , "])
def test_an_empty_case_pattern_is_refused_not_read_as_every_case(pattern: str) -> None:
    """``--case "$CASE"`` with CASE unset selected every case and exited 0."""
    with pytest.raises(ConfigError, match="names no case"):
        plan(["workloads/attn.yaml"], "cpu", cases=[pattern])
    r = CliRunner().invoke(main, ["run", "workloads/attn.yaml", "--gpu", "b200", "--dry-run", "--case", "tokens=16",
                                  "--case", pattern])
    assert r.exit_code == 2, r.output
    assert f"--case: {pattern!r} names no case" in r.output
