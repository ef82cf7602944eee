"""Hand-edited result files (zero samples, rich markup in names) print without a traceback."""

from dataclasses import replace

import pytest
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store
from solbench.results.model import Timing

FAST = ["--budget", "0.05", "--min-samples", "5", "--max-samples", "30", "--device", "cpu"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("edited") / "r.json"
    assert CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-o", str(out), "-i", "baseline",
                                     *FAST]).exit_code == 0
    return store.load(out)


def _zero_samples(run):
    case = run.cases[0]
    impls = tuple(replace(r, status="invalid", score=None, timing=Timing((0.0,) * 5, 0.0, 0.0, 0.0, "converged"))
                  for r in case.impls)
    return replace(run, cases=(replace(case, impls=impls),))


def _markup(run):
    case = run.cases[0]
    return replace(run, environment=replace(run.environment, device_name="[/] [bold]x"),
                   cases=(replace(case, case_id="[/]", params={**case.params, "p": "[/]"}),))


@pytest.mark.parametrize("edit", [_zero_samples, _markup])
@pytest.mark.parametrize("command", [["show"], ["report"]])
def test_hand_edited_files_print_without_a_traceback(saved, tmp_path, edit, command):
    path = tmp_path / "edited.json"
    store.save(edit(saved), path)
    result = CliRunner().invoke(main, [*command, str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 4), result.output
    assert "Traceback" not in result.output


def test_markup_in_a_parameter_prints_as_text_in_a_dry_run(tmp_path):
    (tmp_path / "f.py").write_text("def fn(x, n, tag):\n    return x * 2\n")
    (tmp_path / "w.yaml").write_text(
        "workloads:\n  - name: m\n    parameters: {n: [8], tag: ['[/]']}\n    dtypes: [float32]\n"
        "    inputs: {x: {shape: [n]}}\n    outputs: {y: {shape: [n]}}\n    reference: f.py:fn\n"
        "    implementations: {baseline: f.py:fn}\n")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "w.yaml"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "tag=[/]" in result.output


def test_output_through_a_dangling_symlink_is_refused_before_measuring(tmp_path):
    link = tmp_path / "r.json"
    link.symlink_to(tmp_path / "missing" / "r.json")
    result = CliRunner().invoke(main, ["run", "tests/data/double.yaml", "-o", str(link), *FAST])
    assert result.exit_code == 2 and "symbolic link to nothing" in result.output
    assert "Traceback" not in result.output
