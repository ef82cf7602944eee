import json

import pytest

from solbench.errors import ResultsFormatError
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
    with pytest.raises(OSError):
        store.save(run, path)
    assert path.read_text() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_newer_schema_is_refused(tmp_path):
    data = store.to_dict(sample_run())
    data["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match="newer than this solbench reads"):
        store.load(path)


@pytest.mark.parametrize("text,match", [
    ("{not json", r"bad.json:1: not valid JSON"),
    ('{"cases": []}', "no schema_version"),
    ('{"schema_version": 1, "cases": [{}]}', "malformed result"),
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
