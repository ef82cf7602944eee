"""Numbers that parse but no statistic can use are refused where they are read: hardware spec files
(non-finite, absurdly small or large amounts) and saved runs (degenerate times, peaks, rounds and
thresholds), each as one line naming the file and the field, exit 2, never a traceback."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import gate
from solbench.cli import main
from solbench.config.hwspecs import load_specs, specs_dir
from solbench.errors import ConfigError, ResultsFormatError
from solbench.results import store
from solbench.results.model import ImplResult, Protocol
from tests.unit.factories import make_run


def _spec_dir(tmp_path: Path, old: str, new: str) -> Path:
    """A spec folder holding h200-sxm.yaml with ``old`` (a regex) replaced by ``new``."""
    text = (specs_dir() / "h200-sxm.yaml").read_text()
    assert re.search(old, text, re.MULTILINE), old
    (tmp_path / "h200-sxm.yaml").write_text(re.sub(old, new, text, count=1, flags=re.MULTILINE))
    return tmp_path


BAD_SPECS = [
    (r"^bandwidth_tbs: .*$", "bandwidth_tbs: .inf", r"bandwidth_tbs: .*finite number \(got inf\)"),
    (r"^bandwidth_tbs: .*$", "bandwidth_tbs: 1.0e-320", r"bandwidth_tbs: .*greater than or equal to 0.001"),
    (r"^bandwidth_tbs: .*$", "bandwidth_tbs: 1.0e+300", r"bandwidth_tbs: .*less than or equal to 1000000000"),
    (r"^memory_gb: .*$", "memory_gb: .nan", r"memory_gb: .*finite number \(got nan\)"),
    (r"^l2_mb: .*$", "l2_mb: -.inf", r"l2_mb: .*finite number"),
    (r"^tdp_w: .*$", "tdp_w: 1.0e-9", r"tdp_w: .*greater than or equal to 0.001"),
    (r"fp32: 66.9", "fp32: .inf", r"vector_peaks_tflops\.fp32: .*finite number"),
    (r"bf16: 989.4", "bf16: 1.0e-320", r"tensor_peaks_tflops\.bf16: .*greater than or equal to 0.001"),
    (r"^sm_count: .*$", "sm_count: 1" + "0" * 400, r"sm_count: .*less than or equal to 1000000000"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD_SPECS, ids=[n[:40] for _, n, _ in BAD_SPECS])
def test_spec_refuses_non_finite_and_absurd_amounts(tmp_path, old, new, message):
    folder = _spec_dir(tmp_path, old, new)
    field = new.partition(":")[0] if old.startswith("^") else None
    with pytest.raises(ConfigError) as info:
        load_specs(folder)
    text = str(info.value)
    assert re.match(rf"{re.escape(str(folder / 'h200-sxm.yaml'))}:\d+: ", text), text
    assert re.search(message, text), text
    assert "\n" not in text
    if field:  # the line is the field's own
        line = 1 + next(i for i, s in enumerate((folder / "h200-sxm.yaml").read_text().splitlines())
                        if s.startswith(f"{field}:"))
        assert f"h200-sxm.yaml:{line}: {field}:" in text


@pytest.mark.parametrize("command", [["list"], ["run", "tests/data/double.yaml", "--dry-run", "--gpu", "h200"]])
def test_an_infinite_spec_value_is_exit_2_not_a_traceback(tmp_path, command):
    folder = _spec_dir(tmp_path, r"^bandwidth_tbs: .*$", "bandwidth_tbs: .inf")
    result = CliRunner().invoke(main, command, env={"SOLBENCH_SPECS_DIR": str(folder)})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert re.search(r"h200-sxm\.yaml:\d+: bandwidth_tbs: Input should be a finite number", result.output)


@pytest.mark.parametrize(("written", "suggested"), [("1.0e300", "1.0e+300"), ("1e300", "1.0e+300"),
                                                    ("-2E-3", "-2.0e-3"), (".5e3", "0.5e+3")])
def test_an_unsigned_exponent_gets_a_hint(tmp_path, written, suggested):
    folder = _spec_dir(tmp_path, r"^bandwidth_tbs: .*$", f"bandwidth_tbs: {written}")
    with pytest.raises(ConfigError, match=re.escape(f"(got '{written}'; YAML reads it as text: write {suggested})")):
        load_specs(folder)


def test_text_that_is_no_number_gets_no_exponent_hint(tmp_path):
    folder = _spec_dir(tmp_path, r"^bandwidth_tbs: .*$", "bandwidth_tbs: fast")
    with pytest.raises(ConfigError, match=r"valid number \(got 'fast'\)$"):
        load_specs(folder)


def _run() -> dict:
    run = make_run({"c1": {"torch": [1e-3] * 12, "fused": [8e-4] * 12}, "c2": {"torch": [2e-3] * 12}},
                   gate_thresholds={"demo": 0.1})
    return store.to_dict(run)


def _timing(d: dict, case: int = 0, impl: int = 1) -> dict:
    return d["cases"][case]["impls"][impl]["timing"]


BAD_RUNS = [
    (lambda d: _timing(d).update(median=0.0), r"cases\[0\]\.impls\[1\]\.timing\.median: 0\.0 s is not a time"),
    (lambda d: _timing(d).update(ci_low="NaN"), r"cases\[0\]\.impls\[1\]\.timing\.ci_low: nan s"),
    (lambda d: _timing(d).update(ci_high="Infinity"), r"timing\.ci_high: inf s is not a finite interval bound"),
    (lambda d: _timing(d).update(ci_low=-1e-3), r"timing\.ci_low: -0\.001 s is not a finite interval bound"),
    (lambda d: _timing(d)["samples"].__setitem__(3, 0.0), r"cases\[0\]\.impls\[1\]\.timing\.samples\[3\]: 0\.0"),
    (lambda d: _timing(d, 1, 0)["samples"].__setitem__(0, 5e-324), r"cases\[1\]\.impls\[0\]\.timing\.samples\[0\]"),
    (lambda d: _timing(d)["samples"].__setitem__(0, "Infinity"), r"timing\.samples\[0\]: inf s"),
    (lambda d: _timing(d)["samples"].__setitem__(0, -1e-3), r"timing\.samples\[0\]: -0\.001 s"),
    (lambda d: d["cases"][0]["impls"][0].update(timing=None),
     r"cases\[0\]\.impls\[0\]\.timing: is null, but implementation 'torch' is ok"),
    (lambda d: d["cases"][1]["peaks"].update(bandwidth=0.0), r"cases\[1\]\.peaks\.bandwidth: must be a positive"),
    (lambda d: d["cases"][0]["peaks"].update(tensor_flops="Infinity"), r"cases\[0\]\.peaks\.tensor_flops: "),
    (lambda d: d["cases"][0]["peaks"].update(vector_flops=-1.0), r"cases\[0\]\.peaks\.vector_flops: "),
    (lambda d: d["cases"][0]["peaks"].update(link_bandwidth="NaN"), r"cases\[0\]\.peaks\.link_bandwidth: "),
    (lambda d: d["protocol"].update(rounds=-1), r"protocol\.rounds: must be at least 0, got -1"),
    (lambda d: d["cases"][0].update(t_sol="NaN"), r"cases\[0\]\.t_sol: must be a finite number, at least 0, got nan"),
    (lambda d: d["cases"][1]["cost"].update(fused_bytes=-1.0), r"cases\[1\]\.cost\.fused_bytes: must be a finite"),
    (lambda d: d["cases"][0]["cost"].update(tensor_flops="Infinity"), r"cases\[0\]\.cost\.tensor_flops: "),
    (lambda d: d["cases"][0]["impls"][1]["score"].update(sol="Infinity"),
     r"cases\[0\]\.impls\[1\]\.score\.sol: must be a finite number, got inf"),
    (lambda d: d["cases"][0]["impls"][1]["score"].update(speedup="NaN"), r"cases\[0\]\.impls\[1\]\.score\.speedup: "),
    (lambda d: d["gate_thresholds"].update(demo=5.0), r"gate_thresholds\.demo: .*at most 1 \(100%\), got 5\.0"),
]


@pytest.mark.parametrize(("edit", "message"), BAD_RUNS, ids=[m[:40] for _, m in BAD_RUNS])
def test_degenerate_numbers_in_a_run_are_refused_naming_file_and_path(tmp_path, edit, message):
    data = _run()
    edit(data)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError) as info:
        store.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: "), text
    assert re.search(message, text), text
    assert "\n" not in text


def test_what_solbench_writes_still_loads(tmp_path):
    data = _run()
    data["cases"][0]["peaks"]["tensor_flops"] = None  # a dtype without a tensor unit
    data["cases"][0]["impls"][1] = {**data["cases"][0]["impls"][1], "status": "invalid", "score": None}
    _timing(data).update(samples=[0.0] * 12, median=0.0, ci_low=0.0, ci_high=0.0)  # INVALID keeps its times
    data["cases"][1]["impls"][0] = {"name": "torch", "status": "error", "message": "boom", "timing": None}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert store.load(path).cases[0].peaks.tensor_flops is None
    dry = make_run({"c1": {}})  # a dry run times nothing
    dry = replace(dry, protocol=Protocol("none", 0, 0, 0, 0.0, 0.0, 0),
                  cases=tuple(replace(c, impls=(ImplResult("t", "ok"),)) for c in dry.cases))
    assert store.from_dict(store.to_dict(dry)).cases[0].impls[0].timing is None


def test_a_two_round_interval_wider_than_any_time_saves_and_loads(tmp_path):
    """Two rounds that differ thirtyfold on a loaded machine (3 us and 100 us): the t interval (1 degree
    of freedom, 12.7) runs from about 2e-15 s to 2e+6 s. That is what the rounds say, and the file
    solbench wrote must load (it was refused as 'not a time within [1e-12 s, 1e+06 s]', so show and
    gate failed on a run they had just saved)."""
    from solbench.analysis.rounds import summarize

    samples = [3e-6] * 10 + [1e-4] * 10
    s = summarize(samples, [0] * 10 + [1] * 10)
    assert s.ci_low < 1e-12 and s.ci_high > 1e6  # the interval itself, not a hand-written one
    data = _run()
    _timing(data).update(samples=samples, rounds=[0] * 10 + [1] * 10, median=s.median, ci_low=s.ci_low,
                         ci_high=s.ci_high)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    loaded = store.load(path).cases[0].impls[1].timing
    assert loaded is not None and (loaded.ci_low, loaded.ci_high) == (s.ci_low, s.ci_high)


def _zero_median(d: dict) -> None:
    _timing(d).update(median=0.0, ci_low=0.0)


def _zero_samples(d: dict) -> None:
    _timing(d).update(samples=[0.0] * 12)


def _zero_bandwidth(d: dict) -> None:
    d["cases"][0]["peaks"]["bandwidth"] = 0.0


def _subnormal(d: dict) -> None:
    for case in d["cases"]:
        for impl in case["impls"]:
            impl["timing"].update(samples=[5e-324] * 12, median=5e-324, ci_low=5e-324, ci_high=5e-324)


@pytest.mark.parametrize(("edit", "command"), [
    (_zero_median, ["show", "{bad}", "--markdown"]),
    (_zero_samples, ["report", "{bad}", "--html", "{out}"]),
    (_zero_bandwidth, ["report", "{bad}", "--html", "{out}"]),
    (_subnormal, ["gate", "--baseline", "{bad}", "--current", "{good}"]),
    (_subnormal, ["compare", "{good}", "{bad}"]),
])
def test_commands_on_a_degenerate_run_exit_2_with_one_line(tmp_path, edit, command):
    data = _run()
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(data))
    edit(data)
    bad.write_text(json.dumps(data))
    args = [a.format(bad=bad, good=good, out=tmp_path / "r.html") for a in command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert re.search(rf"{re.escape(str(bad))}: cases\[\d\]\.(impls\[\d\]\.timing|peaks)\.", result.output)
    assert not (tmp_path / "r.html").exists()


def test_a_bad_time_met_by_compare_or_gate_names_the_case_and_the_side():
    base = make_run({"c1": {"torch": [1e-3] * 12}})
    cur = make_run({"c1": {"torch": [1e-3] * 11 + [0.0]}})
    with pytest.raises(ResultsFormatError, match=r"^c1/torch \(head\): times must be positive and finite, got 0\.0$"):
        compare_runs(base, cur, label_a="base", label_b="head")
    with pytest.raises(ResultsFormatError, match=r"^c1/torch \(current\): times must be positive and finite"):
        gate(base, cur)
    with pytest.raises(ResultsFormatError, match=r"^c1/torch \(baseline\): times must be positive and finite"):
        gate(cur, base)
