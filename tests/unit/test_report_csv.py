"""CSV: one row per case x implementation, SI units, one column per parameter."""

import csv
import io

from solbench.report.csv import COLUMNS, run_csv
from tests.unit.test_report_roofline import two_workload_run


def _rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_one_row_per_case_and_implementation_in_si_units():
    run = two_workload_run()
    rows = _rows(run_csv([run]))
    assert [(r["case_id"], r["impl"]) for r in rows] == [
        ("o_proj[t=16]", "baseline"), ("o_proj[t=16]", "fused"), ("o_proj[t=16]", "extra"),
        ("norm[h=768]", "baseline"), ("norm[h=768]", "fused")]
    fused = rows[1]
    assert float(fused["median_s"]) == 1e-5 and int(fused["n_samples"]) == 20
    assert float(fused["achieved_flops_per_s"]) == 2e12 and fused["status"] == "ok"
    assert float(fused["fused_bytes"]) == 1e8 and fused["bound"] == "memory"
    failed = rows[4]
    assert failed["status"] == "error" and failed["median_s"] == "" and failed["sol"] == ""
    assert failed["message"] == "synthetic failure"


def test_header_has_every_column_then_the_parameters():
    run = two_workload_run()
    header = next(csv.reader(io.StringIO(run_csv([run]))))
    assert header[: len(COLUMNS)] == list(COLUMNS)
    assert header[len(COLUMNS):] == ["param.n"]
    assert _rows(run_csv([run]))[0]["param.n"] == "1024"


def test_several_runs_are_concatenated():
    run = two_workload_run()
    assert len(_rows(run_csv([run, run]))) == 10
