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


def test_floats_carry_no_last_bit_rounding_and_keep_every_digit_that_was_measured():
    import dataclasses

    from tests.unit.factories import make_case, make_run

    case = make_case("c", {"a": [3.2045000000000004e-06] * 3})  # 3.2045e-06 s, as a computation left it
    [impl] = case.impls
    impl = dataclasses.replace(impl, score=dataclasses.replace(impl.score, speedup=0.1 + 0.2, s_score=0.7999999999999999))
    case = dataclasses.replace(case, impls=(impl,), cost=dataclasses.replace(case.cost, fused_bytes=float(2**49 + 1)))
    [row] = _rows(run_csv([dataclasses.replace(make_run({}), cases=(case,))]))
    assert (row["median_s"], row["speedup"], row["s_score"]) == ("3.2045e-06", "0.3", "0.8")
    assert row["fused_bytes"] == str(2**49 + 1)  # an integer count below 10^15: exact
    assert float(row["median_s"]) == 3.2045e-06 and abs(float(row["sol"]) / impl.score.sol - 1) < 1e-14


def test_each_measured_row_says_which_timer_took_it_and_how_its_calls_were_made():
    import dataclasses

    run = two_workload_run()
    run = dataclasses.replace(run, protocol=dataclasses.replace(run.protocol, timer="cupti", launch="graph"))
    first = run.cases[0]
    fallback = dataclasses.replace(first.impls[1], protocol={"launch": "stream", "graph_fallback": "synchronizes"})
    run = dataclasses.replace(run, cases=(dataclasses.replace(first, impls=(first.impls[0], fallback,
                                                                             *first.impls[2:])), *run.cases[1:]))
    header = next(csv.reader(io.StringIO(run_csv([run]))))
    at = header.index("peaks_source") + 1
    assert header[at: at + 3] == ["message", "timer", "launch"]  # appended after the old ones
    rows = _rows(run_csv([run]))
    assert (rows[0]["timer"], rows[0]["launch"]) == ("cupti", "graph")
    assert (rows[1]["timer"], rows[1]["launch"]) == ("cupti", "stream")  # the point's own launch
    assert rows[4]["status"] == "error" and (rows[4]["timer"], rows[4]["launch"]) == ("", "")  # nothing timed


def test_a_case_measured_on_another_gpu_of_a_sharded_run_names_that_gpu():
    """A sharded run (--devices) records each case's GPU; every CSV row named the run's first GPU."""
    from dataclasses import replace

    from tests.unit.factories import make_env

    run = two_workload_run()
    h200 = make_env(device_name="NVIDIA H200", spec_id="h200-sxm")
    run = replace(run, cases=(run.cases[0], replace(run.cases[1], device=h200)))
    devices = [r["device"] for r in _rows(run_csv([run]))]
    assert devices == [run.environment.device_name] * 3 + ["NVIDIA H200"] * 2


def test_a_case_no_device_took_in_a_run_over_several_names_no_gpu():
    """In a run over several devices, a case no device took (wider than the devices, its device gone, no
    process group) records device None; its rows named the run's first GPU, which never ran it."""
    from dataclasses import replace

    from tests.unit.factories import make_env

    run = two_workload_run()
    h200 = make_env(device_name="NVIDIA H200", spec_id="h200-sxm")
    run = replace(run, protocol=replace(run.protocol, devices=2),
                  cases=(replace(run.cases[0], device=h200), run.cases[1]))
    devices = [r["device"] for r in _rows(run_csv([run]))]
    assert devices == ["NVIDIA H200"] * 3 + [""] * 2


def test_a_collective_row_has_its_bandwidths_and_overlap_and_other_rows_leave_them_empty():
    """The console table and the JSON give a collective case's algbw, busbw and overlap; the CSV had no
    column for them. They come after launch, so the columns before keep their places."""
    import dataclasses

    run = two_workload_run()
    first = run.cases[0]
    fused = first.impls[1]
    fused = dataclasses.replace(fused, score=dataclasses.replace(fused.score, algbw=2.5e11, busbw=3.75e11, overlap=0.8125))
    run = dataclasses.replace(run, cases=(dataclasses.replace(first, impls=(first.impls[0], fused, *first.impls[2:])),
                                          *run.cases[1:]))
    header = next(csv.reader(io.StringIO(run_csv([run]))))
    at = header.index("timer")
    assert header[at: at + 5] == ["timer", "launch", "algbw_bytes_per_s", "busbw_bytes_per_s", "overlap"]
    rows = _rows(run_csv([run]))
    assert (rows[1]["algbw_bytes_per_s"], rows[1]["busbw_bytes_per_s"], rows[1]["overlap"]) == \
        ("250000000000", "375000000000", "0.8125")
    for row in (rows[0], rows[3], rows[4]):  # not a collective, and a failed row
        assert (row["algbw_bytes_per_s"], row["busbw_bytes_per_s"], row["overlap"]) == ("", "", "")
