import json
import os
import re
import stat

import pytest

from solbench.errors import ResultsFormatError, ResultsWriteError
from solbench.results import store
from solbench.results.model import SCHEMA_VERSION
from tests.unit.factories import make_run


def sample_run():
    return make_run({"gemm[n=1]": {"baseline": [1e-3, 1.1e-3, 0.9e-3] * 5, "fused": [5e-4] * 12}},
                    statuses={"gemm[n=1]/broken": "incorrect"})


def test_round_trip_is_lossless(tmp_path):
    run = sample_run()
    path = store.save(run, tmp_path / "a" / "run.json")
    back = store.load(path)
    assert back == run
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    impl = data["cases"][0]["impls"][0]
    assert impl["timing"]["n"] == len(impl["timing"]["samples"]) == 15


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    run = sample_run()
    path = store.save(run, tmp_path / "run.json")
    before = path.read_text()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(ResultsWriteError, match=r"cannot write .*run.json: disk full"):
        store.save(run, path, force=True)
    assert path.read_text() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_newer_schema_is_refused(tmp_path):
    data = store.to_dict(sample_run())
    data["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="newer than this solbench reads"):
        store.load(path)


def test_a_run_saved_before_worker_isolation_reads_as_measured_in_process(tmp_path):
    """A run from before implementations ran in worker processes records no protocol.isolation
    (results/h200/isolation-suite-before.json); it was measured in-process, yet read back, and shown by
    show --json, as isolation "worker", the default of later runs."""
    data = store.to_dict(sample_run())
    data["schema_version"] = 1
    for key in ("isolation", "timeout_s"):
        del data["protocol"][key]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert store.load(path).protocol.isolation == "in-process"
    assert store.from_dict(store.to_dict(sample_run())).protocol.isolation == "worker"  # recorded: kept


@pytest.mark.parametrize("text,match", [
    ("{not json", r"bad.json:1: not valid JSON"),
    ('{"cases": []}', "no schema_version"),
    ('{"schema_version": 1, "cases": [{}]}', "malformed result: created: required field missing"),
    ('{"schema_version": 0}', "schema_version 0 is not a version number"),
    ('{"schema_version": true}', "schema_version True is not a version number"),
    ('{"schema_version": "1"}', "schema_version '1' is not a version number"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"schema_version": ' + "9" * 5000 + "}", "not valid JSON: Exceeds the limit"),
    ("[]", "not a solbench result"),
])
def test_malformed_files(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ResultsFormatError, match=match):
        store.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ResultsFormatError, match="no such result file"):
        store.load(tmp_path / "none.json")


def test_find_by_name_and_latest(tmp_path):
    run = sample_run()
    first = store.save(run, store.default_path(run, tmp_path, "base"))
    assert first.parent.name == store.slug(run.spec.id)
    assert first.name.endswith("_base.json")
    assert store.find("base", tmp_path) == first
    assert store.find(str(first), tmp_path) == first
    assert store.latest(tmp_path) == first
    with pytest.raises(ResultsFormatError, match="no such result file or saved run"):
        store.find("head", tmp_path)


def test_not_utf8(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{\n"created": "\xff"}')
    with pytest.raises(ResultsFormatError, match=r"bad.json:2: not UTF-8 text \(byte 0xff\)"):
        store.load(path)


def _mutate(data, path, value):
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value


DELETE = object()


@pytest.mark.parametrize("path,value,message", [
    (["cases", 0, "impls", 0, "status"], "great", r"cases\[0\].impls\[0\].status: unknown status 'great' \(known: ok, incorrect"),
    (["cases", 0, "impls", 0, "timing", "samples", 3], "fast", r"cases\[0\].impls\[0\].timing.samples\[3\]: expected a number, got a string 'fast'"),
    (["cases", 0, "t_sol"], [1], r"cases\[0\].t_sol: expected a number, got a list"),
    (["cases", 0, "bound"], "memroy", r"cases\[0\].bound: unknown value 'memroy'"),
    (["created"], 2025, "created: expected a string, got an integer 2025"),
    (["environment"], DELETE, "environment: required field missing"),
    (["cases", 0, "params", "n"], [1], r"cases\[0\].params.n: expected int or float or str, got a list"),
    (["cases", 0, "impls", 0, "score", "mfu"], "x", r"cases\[0\].impls\[0\].score.mfu: expected a number, got a string 'x'"),
    (["cases", 0, "impls"], {}, r"cases\[0\].impls: expected a list, got an object"),
    (["complete"], 1, "complete: expected a boolean, got an integer 1"),
    (["gate_thresholds"], {"w": "5%"}, r"gate_thresholds.w: expected a number, got a string '5%'"),
    (["cases", 0, "impls", 0, "timing", "median"], 10**400, r"cases\[0\].impls\[0\].timing.median: 1000.* is too large for a number"),
])
def test_field_types_are_checked(tmp_path, path, value, message):
    data = store.to_dict(sample_run())
    _mutate(data, path, value)
    target = tmp_path / "m.json"
    target.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match=r"m.json: malformed result: " + message):
        store.load(target)


def test_unknown_keys_are_ignored_and_defaults_fill_missing_optional_fields(tmp_path):
    data = store.to_dict(sample_run())
    data["later_field"] = {"anything": [1, 2]}
    del data["notes"], data["cases"][0]["impls"][0]["log_tail"]
    assert store.from_dict(data) == sample_run()


def test_decoding_follows_the_type_hints_of_any_dataclass():
    from dataclasses import dataclass, field
    from typing import Literal

    from solbench.results.codec import DecodeError, decode

    @dataclass(frozen=True)
    class Later:
        kind: Literal["a", "b"]
        values: tuple[float, ...]
        table: dict[str, int | None] = field(default_factory=dict)

    assert decode(Later, {"kind": "b", "values": [1, 2.5, "NaN"], "table": {"x": None, "y": 3}}) == Later(
        "b", (1.0, 2.5, pytest.approx(float("nan"), nan_ok=True)), {"x": None, "y": 3})
    with pytest.raises(DecodeError, match=r"^table.y: expected an integer, got a number 3.5$"):
        decode(Later, {"kind": "a", "values": [], "table": {"y": 3.5}})


def non_finite_run():
    import dataclasses
    import math

    from solbench.results.model import Correctness

    run = sample_run()
    case = run.cases[0]
    impl = dataclasses.replace(case.impls[0], correctness=Correctness(False, math.nan, math.inf, 1e-3, 1e-3, "x"))
    # a T_SOL is refused unless finite (store._check_numbers); the intensity carries the -Infinity
    return dataclasses.replace(run, cases=(dataclasses.replace(case, intensity=-math.inf,
                                                               impls=(impl, *case.impls[1:])),))


def test_non_finite_floats_are_written_as_strings_and_read_back(tmp_path):
    import math

    run = non_finite_run()
    path = store.save(run, tmp_path / "nan.json")
    text = path.read_text()
    json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token} in the file"))
    data = json.loads(text)
    assert data["cases"][0]["impls"][0]["correctness"]["max_abs_err"] == "NaN"
    assert data["cases"][0]["impls"][0]["correctness"]["max_rel_l2"] == "Infinity"
    assert data["cases"][0]["intensity"] == "-Infinity"
    back = store.load(path)
    assert math.isnan(back.cases[0].impls[0].correctness.max_abs_err)
    assert back.cases[0].intensity == -math.inf
    assert store.dumps(back) == store.dumps(run)


def test_old_files_with_bare_nan_are_still_read(tmp_path):
    import math

    text = json.dumps(store.to_dict(non_finite_run()), indent=1).replace('"NaN"', "NaN")
    path = tmp_path / "old.json"
    path.write_text(text)
    assert math.isnan(store.load(path).cases[0].impls[0].correctness.max_abs_err)


def test_a_file_this_process_did_not_write_is_not_replaced(tmp_path):
    path = tmp_path / "theirs.json"
    path.write_text("precious")
    with pytest.raises(ResultsWriteError, match=r"theirs.json: exists; not overwriting it \(pass --force"):
        store.save(sample_run(), path)
    assert path.read_text() == "precious"
    store.save(sample_run(), path, force=True)
    assert store.load(path) == sample_run()


def test_saving_the_same_run_again_replaces_its_own_file(tmp_path):
    path = store.save(sample_run(), tmp_path / "mine.json")
    store.save(make_run({"other[n=2]": {"baseline": [1e-3] * 3}}), path)
    assert store.load(path).cases[0].case_id == "other[n=2]"


def test_two_runs_in_the_same_instant_get_two_files(tmp_path, monkeypatch):
    names = iter(["0001_same.json", "0001_same.json", "0002_same.json"])
    monkeypatch.setattr(store, "default_path", lambda run, d, name=None: d / next(names))
    first = store.save_new(sample_run(), tmp_path, "same")
    second = store.save_new(make_run({"b[n=2]": {"baseline": [2e-3] * 3}}), tmp_path, "same")
    assert (first.name, second.name) == ("0001_same.json", "0002_same.json")
    assert store.load(first) == sample_run()  # not overwritten by the second run


def test_default_names_are_unique_and_sort_by_time(tmp_path):
    run = sample_run()
    paths = [store.default_path(run, tmp_path, "x") for _ in range(50)]
    assert len(set(paths)) == 50
    assert all(p.name.endswith("_x.json") and "_" not in p.name[: -len("_x.json")] for p in paths)


def test_check_writable(tmp_path):
    store.check_writable(tmp_path / "new" / "results")
    assert (tmp_path / "new" / "results").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultsWriteError, match=r"file/results: cannot write results there: .*file is a file"):
        store.check_writable(blocker / "results")
    # -o file/x.json: mkdir said only "File exists", naming neither the file in the way nor what is wrong
    with pytest.raises(ResultsWriteError, match=r"file/sub/x.json: cannot write results there: \S*/file is a file, "
                       r"not a folder$"):
        store.check_writable(blocker / "sub" / "x.json", is_file=True)
    with pytest.raises(ResultsWriteError, match="exists; not overwriting it"):
        store.check_writable(blocker, is_file=True)
    store.check_writable(blocker, is_file=True, force=True)
    with pytest.raises(ResultsWriteError, match="is a directory"):
        store.check_writable(tmp_path, is_file=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "new"]  # no probe files left


def test_a_pipe_or_device_is_no_place_for_a_run(tmp_path):
    """`run -o /dev/stdout --force` as root: the atomic save renamed a file over the device's link.
    Refused before measuring, even with --force, and the pipe is left as it was."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ResultsWriteError, match="pipe: not a regular file"):
        store.check_writable(fifo, is_file=True, force=True)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_write_failures_are_one_line_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ResultsWriteError, match=r"^cannot write .*file/run.json: File exists$"):
        store.save(sample_run(), blocker / "run.json")


def test_latest_and_find_skip_calibrations_and_other_json(tmp_path):
    import os

    from solbench.results.model import Calibration

    run_path = store.save(sample_run(), store.default_path(sample_run(), tmp_path, "base"))
    cal = Calibration("2025-01-02T00:00:00Z", "h100-sxm", "H100", "GPU-1", 3e12, {"bf16": 9e14}, {"fp32": 5e13},
                      {"bf16": 9.5e14}, "copy + gemm")
    cal_path = store.save_calibration(cal, tmp_path)
    other = tmp_path / "h100-sxm" / "zzzz_base.json"
    other.write_text('{"env": {}, "protocol": {}}')
    broken = tmp_path / "broken.json"
    broken.write_bytes(b"\xff")
    for age, path in enumerate([run_path, cal_path, other, broken]):
        os.utime(path, (1e9 + age, 1e9 + age))
    assert store.latest(tmp_path) == run_path
    assert store.find("base", tmp_path) == other  # the newest file saved under that name...
    with pytest.raises(ResultsFormatError, match="not a solbench result"):
        store.load(store.find("base", tmp_path))  # ...which then fails to load with a clear line
    assert store.is_run_file(run_path) and not store.is_run_file(cal_path) and not store.is_run_file(other)
    assert store.load_calibration(tmp_path, "h100-sxm", "GPU-1") == cal


def test_find_matches_the_whole_name(tmp_path):
    run = sample_run()
    mine = store.save(run, tmp_path / "spec" / "20250101T000000-000001-aaaa_my_base.json")
    base = store.save(run, tmp_path / "spec" / "20250101T000000-000000-aaaa_base.json")
    assert store.find("base", tmp_path) == base
    assert store.find("my_base", tmp_path) == mine


def test_shipped_h200_results_load():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "results" / "h200"
    runs = [p for p in sorted(folder.glob("*.json")) if store.is_run_file(p)]
    assert {p.name for p in runs} >= {"attn.json", "bert.json", "resnet50.json"}
    for path in runs:
        assert store.load(path).cases
    assert not store.is_run_file(folder / "kernels_h200_run10.json")


def test_oversized_and_device_files(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.setattr(store, "MAX_FILE_BYTES", 100)
    with pytest.raises(ResultsFormatError, match="larger than the 100 bytes a result file may have"):
        store.load(Path("/dev/zero"))
    path = store.save(sample_run(), tmp_path / "run.json")
    with pytest.raises(ResultsFormatError, match="larger than the 100 bytes"):
        store.load(path)


def test_a_gzipped_run_reads_as_the_run(tmp_path):
    import gzip

    path = store.save(sample_run(), tmp_path / "run.json")
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert packed.stat().st_size < path.stat().st_size
    assert store.load(packed) == store.load(path)


def test_a_gzipped_run_is_found_by_its_saved_name_and_as_the_latest(tmp_path):
    """show, compare and gate read a run kept as run.json.gz by its path, but not by the name it was
    saved under (--save NAME), nor as the latest run: 'no such result file or saved run'."""
    import gzip

    run = sample_run()
    older = store.save(run, tmp_path / "spec" / "20250101T000000-000000-aaaa_base.json")
    saved = store.save(run, tmp_path / "spec" / "20250102T000000-000000-aaaa_base.json")
    packed = saved.with_name(saved.name + ".gz")
    packed.write_bytes(gzip.compress(saved.read_bytes()))
    saved.unlink()
    os.utime(older, (1, 1))
    assert store.find("base", tmp_path) == packed  # the newer of the two saved under that name
    assert store.latest(tmp_path) == packed
    assert store.load(store.find("base", tmp_path)) == store.load(older)
    with pytest.raises(ResultsFormatError, match="no such result file or saved run"):
        store.find("bas", tmp_path)


def test_a_gzip_bomb_or_a_cut_gzip_file_is_one_clear_error(tmp_path, monkeypatch):
    import gzip

    monkeypatch.setattr(store, "MAX_FILE_BYTES", 20_000)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 10_000_000))
    assert bomb.stat().st_size < 20_000
    with pytest.raises(ResultsFormatError, match="larger than the 20000 bytes"):
        store.load(bomb)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(b'{"schema_version": 1}' * 20)[:30])
    with pytest.raises(ResultsFormatError, match=r"cut short|does not inflate"):
        store.load(cut)


def test_a_standard_stream_is_no_place_for_a_run(tmp_path):
    """`run -o /dev/stdout --force` with stdout sent to a file: /dev/stdout read as a regular file and
    the atomic save renamed the run over the link /dev/stdout itself (as root). A path whose links lead
    into /proc or /dev/fd is refused before measuring and at the save; the link is left as it was."""
    out = tmp_path / "stdout.txt"
    out.write_text("kept")
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{os.open(out, os.O_WRONLY)}")  # as /dev/stdout -> /proc/self/fd/1
    assert link.is_file()  # what made it look like a file one may replace
    with pytest.raises(ResultsWriteError, match="stdout: a standard stream or open file descriptor, not a file"):
        store.check_writable(link, is_file=True, force=True)
    with pytest.raises(ResultsWriteError, match="a standard stream or open file descriptor"):
        store.save(sample_run(), link, force=True)
    assert link.is_symlink() and out.read_text() == "kept"
    assert not store.a_stream(out)



def test_an_implementations_words_are_kept_as_text_a_terminal_and_utf8_can_show():
    from solbench.results.model import ImplResult

    r = ImplResult("bad", "error", "boom \x1b[2J\rok \ud800", log_tail="line 1\n\tline 2 \x07")
    assert r.message == "boom \\x1b[2J\\x0dok \\ud800"  # no screen cleared, no line overwritten, writable
    assert r.log_tail == "line 1\n\tline 2 \\x07"  # tabs and newlines kept
    assert ImplResult("ok", "ok", "µs ≤ 2× fine").message == "µs ≤ 2× fine"  # other text untouched
    r.message.encode("utf-8")


def test_another_solbench_record_read_as_a_run_is_named_not_called_malformed(tmp_path):
    """``show results/spread/h100-sxm.json`` (or a calibration given to ``gate``) said "malformed result:
    environment: required field missing", as if the file were damaged: it names what the file is."""
    from solbench.results.model import RunSpread

    spread = store.save_spread(RunSpread(created="2025-01-01T00:00:00Z", spec_id="h100-sxm", device_name="H100",
                                         run_sd=0.002, median_point=0.001, points=3, runs=("a", "b", "c")), tmp_path)
    verdict = tmp_path / "gate.json"
    verdict.write_text(json.dumps({"kind": "gate", "version": 1, "overall": "PASS"}))
    for path, what in ((spread, "a spread record (solbench spread --save), not a run"),
                       (verdict, "a gate verdict (solbench gate or ab --json), not a run")):
        with pytest.raises(ResultsFormatError, match=re.escape(f"{path}: {what}")):
            store.load(path)
