"""The byte floor (``floor: true``, solbench.impls.floor): a plain kernel over the case's bytes, timed
like every implementation, never checked or scored; each implementation's T_floor / T."""

from dataclasses import replace

import pytest
import torch
from click.testing import CliRunner

from solbench.analysis.scoring import floor_time, score_impls
from solbench.cli import main
from solbench.impls import floor
from solbench.results import store
from solbench.results.model import ImplResult
from solbench.workload.cases import Case, TensorShape
from solbench.workload.schema import WorkloadFile, WorkloadSpec
from tests.unit.factories import make_run

WORKLOAD = {
    "name": "double", "parameters": {"n": [64]}, "dtypes": ["float32"], "inputs": {"x": {"shape": ["n", 8]}},
    "outputs": {"y": {"shape": ["n", 8]}}, "ops": [{"op": "mul", "numel": "n * 8", "inputs": 1}],
    "reference": "tests.unit.helpers:double", "implementations": {"baseline": "tests.unit.helpers:double"},
}


def _case(inputs: dict[str, tuple[int, ...]], outputs: dict[str, tuple[int, ...]], extra: int = 0) -> Case:
    return Case("w", {"n": 1}, "float32", tuple(TensorShape(k, v, "float32") for k, v in inputs.items()),
                tuple(TensorShape(k, v, "float32") for k, v in outputs.items()), extra_bytes=extra)


@pytest.mark.parametrize(("read", "write", "kind"), [
    (4096, 256, "reduce"), (1000, 1000, "copy"), (4100, 4096, "copy"), (256, 4096, "broadcast"),
    (33_554_432, 131_072, "reduce"), (4, 4, "copy"), (10_000, 4000, "reduce"), (7000, 4000, "copy"),
])
def test_one_call_moves_about_the_cases_bytes_and_the_scale_makes_it_exact(read, write, kind):
    src, dst = floor.buffers(read, write, "cpu", seed=3)
    assert ("copy" if src.dim() == 1 else "reduce" if dst.dim() == 1 else "broadcast") == kind
    moved = src.nbytes + dst.nbytes
    assert abs(moved - (read + write)) <= (read + write) / 7 + 2 * floor.ELEMENT  # one kernel's layouts
    assert floor.scale(read, write, src, dst) * moved == pytest.approx(read + write)
    assert float(src.min()) >= 0.5  # random values, never zeros
    dst.fill_(float("nan"))
    out = floor.read(src, dst)
    assert out.data_ptr() == dst.data_ptr() and not torch.isnan(dst).any()
    expected = {"copy": src, "reduce": src.sum(dim=1) if src.dim() == 2 else src,
                "broadcast": src.expand_as(dst) if dst.dim() == 2 else src}[kind]
    torch.testing.assert_close(dst, expected)


def test_a_residual_and_layernorm_case_is_a_plain_copy_not_twice_its_reads():
    """Reads barely more than writes (the parameters): the floor must not read double (seen: k = 2)."""
    n = 16384 * 768 * 2
    src, dst = floor.buffers(2 * n + 4 * 768, 2 * n, "cpu", seed=0)
    assert src.dim() == 1 and src.nbytes == dst.nbytes == pytest.approx(2 * n, rel=1e-3)


def test_the_bytes_are_the_fused_bytes_split_into_read_and_written():
    spec = WorkloadSpec.model_validate(WORKLOAD)
    case = _case({"x": (64, 8), "w": (8, 8)}, {"y": (64, 8)}, extra=100)
    assert floor.case_bytes(spec, case) == (64 * 8 * 4 + 8 * 8 * 4 + 100, 64 * 8 * 4)
    overridden = WorkloadSpec.model_validate({**WORKLOAD, "bytes": "n * 100000"})  # n = 1 in these cases
    assert floor.case_bytes(overridden, _case({"x": (64, 8)}, {"y": (64, 8)})) == (100000 - 64 * 8 * 4, 64 * 8 * 4)
    assert floor.case_bytes(WorkloadSpec.model_validate({**WORKLOAD, "bytes": "10"}),
                            _case({"x": (64, 8)}, {"y": (64, 8)})) == (0, 64 * 8 * 4)  # never negative


def test_floor_true_adds_the_builtin_floor_and_keeps_a_workloads_own():
    spec = WorkloadSpec.model_validate({**WORKLOAD, "floor": True})
    assert spec.implementations["floor"].part == "floor" and spec.implementations["floor"].fn.endswith(":read")
    own = {**WORKLOAD, "floor": True, "implementations": {**WORKLOAD["implementations"],
                                                          "mine": {"fn": "my:read", "part": "floor"}}}
    assert set(WorkloadSpec.model_validate(own).implementations) == {"baseline", "mine"}
    assert "floor" not in WorkloadSpec.model_validate(WORKLOAD).implementations


@pytest.mark.parametrize(("change", "message"), [
    ({"floor": True, "implementations": {"baseline": "a:b", "floor": "a:c"}}, "adds an implementation named 'floor'"),
    ({"implementations": {"baseline": {"fn": "a:b", "part": "floor"}}}, "cannot be a part"),
    ({"world_size": 2, "implementations": {"baseline": "a:b", "f": {"fn": "a:c", "part": "floor"}}},
     "part floor needs world_size 1"),
    ({"implementations": {"baseline": "a:b", "c": {"fn": "a:c", "part": "compute"}}}, "needs world_size > 1"),
])
def test_a_floor_in_the_wrong_place_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        WorkloadFile.model_validate({"workloads": [{**WORKLOAD, **change}]})


def test_every_scored_implementation_gets_the_fastest_floor_over_its_time():
    run = make_run({"c": {"baseline": [2e-3] * 5, "fused": [1e-3] * 5, "floor": [0.8e-3] * 5,
                          "floor2": [0.9e-3] * 5}})
    case = run.cases[0]
    impls = [r if not r.name.startswith("floor") else
             ImplResult(r.name, "ok", "", None, r.timing, protocol={"part": "floor"}) for r in case.impls]
    assert floor_time(impls) == pytest.approx(0.8e-3)
    peaks = {r.name: _peaks() for r in impls}
    scored = {r.name: r for r in score_impls(case.cost, impls, peaks, "baseline", "cuda")}
    assert scored["fused"].score.floor_fraction == pytest.approx(0.8)
    assert scored["baseline"].score.floor_fraction == pytest.approx(0.4)
    assert scored["floor"].score is None and scored["floor2"].score is None  # never scored
    assert floor_time([r for r in impls if not r.name.startswith("floor")]) is None
    scaled = [replace(r, protocol={**r.protocol, "floor_scale": 1.25}) if r.name == "floor" else r for r in impls]
    assert floor_time(scaled) == pytest.approx(0.9e-3)  # 0.8 ms x 1.25 = 1.0 ms: now floor2's 0.9 ms is the fastest


def _peaks():
    from solbench.analysis.scoring import ImplPeaks
    from solbench.results.model import Peaks

    p = Peaks(tensor_flops=1e18, vector_flops=1e18, bandwidth=1e18, source="datasheet")  # nothing INVALID
    return ImplPeaks(p, p)


def test_a_cpu_run_times_the_floor_and_reports_each_fraction(tmp_path):
    import yaml

    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"workloads": [{**WORKLOAD, "floor": True}]}))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(path), "--device", "cpu", "-o", str(out), "-i", "baseline",
                                       "--budget", "0.02", "--min-samples", "3", "--max-samples", "5"])
    assert result.exit_code == 0, result.output
    assert "of floor" in result.output
    (case,) = store.load(out).cases
    by = {r.name: r for r in case.impls}
    assert by["floor"].status == "ok" and by["floor"].correctness is None and by["floor"].score is None
    assert by["floor"].protocol["floor_read_bytes"] == 64 * 8 * 4 == by["floor"].protocol["floor_write_bytes"]
    fraction = by["baseline"].score.floor_fraction
    assert fraction == pytest.approx(by["floor"].timing.median / by["baseline"].timing.median)


def test_the_csv_carries_each_fraction_of_the_floor():
    import csv
    import io

    from solbench.report.csv import run_csv

    run = make_run({"c": {"baseline": [2e-3] * 5}})
    case = run.cases[0]
    (base,) = case.impls
    scored = replace(base, score=replace(base.score, floor_fraction=0.8))
    rows = list(csv.DictReader(io.StringIO(run_csv([replace(run, cases=(replace(case, impls=(scored,)),))]))))
    assert rows[0]["floor_fraction"] == "0.8"
    assert next(csv.DictReader(io.StringIO(run_csv([run]))))["floor_fraction"] == ""  # no floor: empty
