"""A workload author's mistakes are named as theirs: a reference that returns another shape than the
outputs declare, a setup that returns no dict, a function written for other input names, outputs
returned in a dict under other names."""

from pathlib import Path

import yaml
from click.testing import CliRunner

from solbench.cli import main
from solbench.results import store

CODE = '''
def ref(a, b):
    return (a + b)[:-1]

def good_ref(a, b):
    return a + b

def add(a, b):
    return a + b

def add_xy(x, y):
    return x + y

def add_scaled(a, b, alpha):
    return alpha * (a + b)

def tuple_setup(a, b):
    return (a, b)

def keyed_ref(a, b):
    return {"result": a + b}

def keyed(a, b):
    return {"sum": a + b}
'''


def _workload(name: str, reference: str, impls: dict) -> dict:
    return {"name": name, "parameters": {"n": [256]}, "dtypes": ["float32"],
            "inputs": {"a": {"shape": ["n"]}, "b": {"shape": ["n"]}}, "outputs": {"out": {"shape": ["n"]}},
            "ops": [{"op": "add", "numel": "n"}], "reference": f"mistakes.py:{reference}",
            "implementations": impls}


def test_each_mistake_is_named_with_what_to_fix(tmp_path: Path) -> None:
    (tmp_path / "mistakes.py").write_text(CODE)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"workloads": [
        _workload("badref", "ref", {"baseline": "mistakes.py:add"}),
        _workload("badimpl", "good_ref", {"baseline": "mistakes.py:add", "xy": "mistakes.py:add_xy",
                                          "needs_more": "mistakes.py:add_scaled",
                                          "tupled": {"fn": "mistakes.py:add", "setup": "mistakes.py:tuple_setup"},
                                          "keyed": "mistakes.py:keyed"}),
        _workload("badkeys", "keyed_ref", {"baseline": "mistakes.py:add"}),
        _workload("xyref", "add_xy", {"baseline": "mistakes.py:add"}),
    ]}))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(path), "--device", "cpu", "--in-process", "-o", str(out),
                                       "--budget", "0.02", "--min-samples", "3", "--max-samples", "5"])
    assert result.exit_code == 4, result.output
    by = {(c.workload, r.name): r for c in store.load(out).cases for r in c.impls}
    assert by[("badimpl", "baseline")].status == "ok"
    ref = by[("badref", "baseline")]
    assert ref.status == "error" and "reference mistakes.py:ref returned out of shape (255,)" in ref.message
    assert "declares (256,)" in ref.message
    xy = by[("badimpl", "xy")]
    assert xy.status == "error" and "mistakes.py:add_xy takes (x, y) but is called with a, b" in xy.message
    needs_more = by[("badimpl", "needs_more")]  # it said "add_scaled() missing 1 required positional argument"
    assert needs_more.status == "error", needs_more.message
    assert "mistakes.py:add_scaled takes (a, alpha, b) but is called with a, b" in needs_more.message
    assert "alpha not given" in needs_more.message
    tupled = by[("badimpl", "tupled")]
    assert tupled.status == "error" and "returned tuple, not a dict" in tupled.message
    keyed = by[("badimpl", "keyed")]
    assert keyed.status == "incorrect" and "got a dict without out (its keys: 'sum')" in keyed.message
    xy_ref = by[("xyref", "baseline")]  # it said "add_xy() got an unexpected keyword argument 'a' (at runner.py:...)"
    assert xy_ref.status == "error", xy_ref.message
    assert "the workload's reference mistakes.py:add_xy takes (x, y) but is called with a, b" in xy_ref.message
    keyed_ref = by[("badkeys", "baseline")]
    assert keyed_ref.status == "error" and "got a dict without out (its keys: 'result')" in keyed_ref.message


def test_a_dtype_written_the_short_way_names_the_one_meant(tmp_path):
    # bf16, fp32, fp8: the error listed all thirteen names and left the reader to find bfloat16 among them
    from solbench.config.yamlio import validation_message

    def hint(value: str) -> str:
        return validation_message({"type": "literal_error", "msg": "Input should be 'float32', 'bfloat16' or "
                                   "'float8_e4m3fn'", "input": value,
                                   "ctx": {"expected": "'float32', 'bfloat16' or 'float8_e4m3fn'"}})

    assert "did you mean 'bfloat16'?" in hint("bf16")
    assert "did you mean 'float32'?" in hint("fp32")
    assert "did you mean 'float8_e4m3fn'?" in hint("fp8")
    assert "did you mean 'bfloat16'?" in hint("bfloat61")  # a typo: the closest name
    assert "did you mean" not in hint("quaternion")
    src = Path("tests/data/double.yaml").read_text()
    assert "dtypes: [float32]" in src
    path = tmp_path / "d.yaml"
    path.write_text(src.replace("dtypes: [float32]", "dtypes: [bf16]"))
    result = CliRunner().invoke(main, ["run", str(path), "--device", "cpu", "--dry-run"])
    assert result.exit_code == 2
    assert "dtypes.0" in result.output and "did you mean 'bfloat16'?" in result.output
