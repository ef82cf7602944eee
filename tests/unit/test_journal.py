"""A run saved as it is measured: the record without cases, and a journal each case is appended to
(solbench.results.store.append_cases, the CLI's Saver); load replays it, the final save removes it."""

import errno
import json
import resource
import signal
from dataclasses import replace

import pytest

from solbench.cli.common import Saver
from solbench.errors import ResultsFormatError
from solbench.results import store
from tests.unit.factories import make_case, make_run


def _cases(n, t=1e-3):
    return [make_case(f"c[n={i}]", {"baseline": [t * (i + 1)] * 5}) for i in range(n)]


def test_each_save_appends_what_changed_and_load_replays_it(tmp_path):
    out = tmp_path / "run.json"
    saver = Saver(out, tmp_path, None, force=False)
    run = make_run({})
    cases = _cases(3)
    for k in range(1, 4):
        saver.save(replace(run, cases=tuple(cases[:k]), harness={"wall_s": float(k)}))
    assert json.loads(out.read_text())["cases"] == []  # the record alone: never rewritten case by case
    lines = store.journal_path(out).read_text().splitlines()
    assert len(lines) == 3  # each case once, when it came
    back = store.load(out)
    assert [c.case_id for c in back.cases] == [c.case_id for c in cases] and back.cases == tuple(cases)
    assert back.complete is False and back.harness == {"wall_s": 3.0}
    # a later round re-scores a case: only it is appended, and the last line of a case wins
    again = replace(cases[0], impls=tuple(replace(i, message="round 2") for i in cases[0].impls))
    saver.save(replace(run, cases=(again, *cases[1:]), harness={"wall_s": 4.0}))
    assert len(store.journal_path(out).read_text().splitlines()) == 4
    back = store.load(out)
    assert back.cases[0].impls[0].message == "round 2" and [c.case_id for c in back.cases][1:] == ["c[n=1]", "c[n=2]"]
    saver.save(replace(run, cases=(again, *cases[1:])), final=True)
    assert not store.journal_path(out).exists()
    assert len(json.loads(out.read_text())["cases"]) == 3 and store.load(out).complete is True


def test_a_new_note_rewrites_the_record_and_keeps_the_cases(tmp_path):
    out = tmp_path / "run.json"
    saver = Saver(out, tmp_path, None, force=False)
    run = replace(make_run({}), cases=tuple(_cases(2)))
    saver.save(run)
    saver.save(replace(run, notes=("interrupted (Ctrl-C)",)))
    back = store.load(out)
    assert back.notes == ("interrupted (Ctrl-C)",) and len(back.cases) == 2


def test_a_line_torn_by_a_kill_is_ignored_and_a_broken_one_before_it_is_refused(tmp_path):
    out = tmp_path / "run.json"
    saver = Saver(out, tmp_path, None, force=False)
    saver.save(replace(make_run({}), cases=tuple(_cases(2))))
    journal = store.journal_path(out)
    good = journal.read_text()
    journal.write_text(good + good.splitlines()[0][:40])  # killed while appending a third line
    assert len(store.load(out).cases) == 2
    journal.write_text("{not json\n" + good)
    with pytest.raises(ResultsFormatError, match=r"run.json.journal:1: not a journal line"):
        store.load(out)


def test_an_append_cut_short_by_a_full_disk_leaves_no_torn_line_before_the_next(tmp_path):
    """The disk fills while a case is appended (a file size limit stands in for it: the write stops
    part way through the line, as on a full disk), then frees up: the cases appended after it must
    not follow a torn line, which would make the whole journal unreadable."""
    out = tmp_path / "run.json"
    saver = Saver(out, tmp_path, None, force=False)
    run, cases = make_run({}), _cases(3)
    saver.save(replace(run, cases=tuple(cases[:1])))
    size = store.journal_path(out).stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
    try:
        saver.save(replace(run, cases=tuple(cases[:2])))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert saver.error is not None and "run.json.journal" in saver.error
    assert store.journal_path(out).stat().st_size == size  # nothing of the torn line is left
    saver.save(replace(run, cases=tuple(cases)))  # room again: the case that failed is appended with the next
    assert [c.case_id for c in store.load(out).cases] == [c.case_id for c in cases]


def test_a_journal_left_by_another_run_under_the_same_name_is_not_replayed(tmp_path):
    out = tmp_path / "run.json"
    old = Saver(out, tmp_path, None, force=False)
    old.save(replace(make_run({}), cases=tuple(_cases(2)), created="2025-01-01T00:00:00Z"))
    stale = store.journal_path(out).read_text()
    out.unlink()  # the record removed, its journal left behind
    new = Saver(out, tmp_path, None, force=False)  # the name claimed again by a run that finds no file there
    fresh = replace(make_run({}), created="2025-02-02T00:00:00Z")
    new.save(replace(fresh, cases=tuple(_cases(1, t=5e-3))))
    assert store.journal_path(out).read_text() != stale  # dropped at the new run's first save
    (case,) = store.load(out).cases
    assert case.impls[0].timing.median == pytest.approx(5e-3)
    store.journal_path(out).write_text(stale + store.journal_path(out).read_text())  # and if it were there
    assert [c.case_id for c in store.load(out).cases] == ["c[n=0]"]


def test_o_force_over_a_saved_run_keeps_it_until_the_new_run_is_complete(tmp_path):
    """-o run.json --force: the run in progress is saved beside the file (run.json.partial.json), so a
    run killed part way leaves the earlier complete result as it was; the final save replaces it and
    removes what was beside it."""
    out = tmp_path / "run.json"
    earlier = replace(make_run({}), cases=tuple(_cases(2)), created="2025-01-01T00:00:00Z")
    Saver(out, tmp_path, None, force=False).save(earlier, final=True)
    before = out.read_bytes()
    beside = tmp_path / "run.json.partial.json"
    store.journal_path(beside).write_text("{left by a run killed earlier\n")  # never replayed
    new = Saver(out, tmp_path, None, force=True)
    fresh = replace(make_run({}), created="2025-02-02T00:00:00Z")
    new.save(replace(fresh, cases=tuple(_cases(1, t=5e-3))))
    assert out.read_bytes() == before and new.paths == [beside]  # killed here: the earlier run is intact
    assert store.load(beside).complete is False and len(store.load(beside).cases) == 1
    new.save(replace(fresh, cases=tuple(_cases(3, t=5e-3))), final=True)
    back = store.load(out)
    assert back.complete is True and len(back.cases) == 3 and back.created == "2025-02-02T00:00:00Z"
    assert new.paths == [out] and not beside.exists() and not store.journal_path(beside).exists()


def test_a_final_save_that_fails_over_a_kept_file_still_names_where_the_run_is(tmp_path, monkeypatch):
    """-o run.json --force, and the disk is full at the final save: run.json stays as it was, and the
    run's cases stay beside it, in the file the run was saved to so far; the Saver's paths (the
    "saved ..." lines) must still name that file, not nothing."""
    out = tmp_path / "run.json"
    out.write_text("{}")  # a file the user keeps until the new run is complete
    saver = Saver(out, tmp_path, None, force=True)
    run = replace(make_run({}), cases=tuple(_cases(2)))
    saver.save(run)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "replace", full)
    saver.save(run, final=True)
    beside = tmp_path / "run.json.partial.json"
    assert saver.error is not None and "No space left on device" in saver.error
    assert out.read_text() == "{}" and saver.paths == [beside]
    assert len(store.load(beside).cases) == 2 and store.load(beside).complete is False


def test_a_complete_run_ignores_a_journal_beside_it(tmp_path):
    out = store.save(replace(make_run({}), cases=tuple(_cases(1))), tmp_path / "run.json")
    store.journal_path(out).write_text("garbage\n")
    assert len(store.load(out).cases) == 1


@pytest.mark.parametrize("edit", ["header cases not a list", "header case_id a list", "journal case_id an object"])
def test_a_hand_edited_run_in_progress_is_one_error_line_not_a_crash(tmp_path, edit):
    """An incomplete run whose record or journal was damaged by hand where the replay keys cases by
    id (the record's cases not a list, a case_id that is a list or an object): a ResultsFormatError
    naming the file, as any other malformed run is, not a TypeError (``show`` exited 5 with a traceback)."""
    out = tmp_path / "run.json"
    Saver(out, tmp_path, None, force=False).save(replace(make_run({}), cases=tuple(_cases(2))))
    journal = store.journal_path(out)
    record = json.loads(out.read_text())
    if edit == "header cases not a list":
        record["cases"] = 5
    elif edit == "header case_id a list":
        record["cases"] = [{"case_id": ["c"]}]
    else:
        first, rest = journal.read_text().split("\n", 1)
        entry = json.loads(first)
        entry["case"]["case_id"] = {"n": 0}
        journal.write_text(json.dumps(entry) + "\n" + rest)
    out.write_text(json.dumps(record))
    with pytest.raises(ResultsFormatError) as err:
        store.load(out)
    assert "run.json" in str(err.value) and len(str(err.value).splitlines()) == 1
