"""Reference checks: module findable or file present, function defined, user code never run."""

import sys
import textwrap

import pytest

from solbench.config.workloads import load_workload_file, validate_references
from solbench.errors import ConfigError
from solbench.impls.registry import ResolveError, check_reference
from tests.unit.test_input_yaml import GOOD, write

USER_MODULE = """\
import os
from pathlib import Path as P

Path_marker = {marker!r}
open(Path_marker, "w").write("imported")   # must never run during a check


def kernel(x):
    return x * 2


async def later(x):
    return x


scale = lambda x: x * 3  # noqa: E731
A, (B, C) = 1, (2, 3)

try:
    import cupy as cp
except ImportError:
    cp = None

if cp is not None:
    def gpu_only(x):
        return x


class Holder:
    def method(self, x):
        return x
"""


@pytest.fixture
def user_file(tmp_path):
    marker = tmp_path / "imported.txt"
    path = tmp_path / "kernels" / "mine.py"
    path.parent.mkdir()
    path.write_text(USER_MODULE.format(marker=str(marker)))
    return path, marker


@pytest.mark.parametrize("name", ["kernel", "later", "scale", "A", "B", "C", "P", "os", "cp", "gpu_only",
                                  "Holder", "Holder.method"])
def test_top_level_names_are_found_without_running_the_file(user_file, name):
    path, marker = user_file
    check_reference(f"kernels/mine.py:{name}", path.parent.parent)
    assert not marker.exists()


@pytest.mark.parametrize("ref,expected", [
    ("kernels/mine.py:kernal", r"mine.py defines no 'kernal' at top level \(did you mean 'kernel'\?\)"),
    ("kernels/mine.py:Holder.nothing", "class Holder in .* defines no 'nothing'"),
    ("kernels/other.py:kernel", r"no such file 'kernels/other.py' \(looked in .* and the current directory\)"),
    ("kernels/mine.py", "is not of the form 'module:function'"),
    ("kernels/mine.py:1x", "is not of the form"),
])
def test_file_reference_errors(user_file, ref, expected):
    path, marker = user_file
    with pytest.raises(ResolveError, match=expected):
        check_reference(ref, path.parent.parent)
    assert not marker.exists()



@pytest.mark.parametrize("ref", ["mine:kernel", "kernels.mine:kernel"])
def test_a_module_name_for_a_file_beside_the_workload_names_the_file_form(user_file, ref):
    """`mine:kernel` where the workload's folder holds mine.py: the file is named with its .py."""
    path, marker = user_file
    base = path.parent if ref.startswith("mine") else path.parent.parent
    rel = "mine.py" if ref.startswith("mine") else "kernels/mine.py"
    with pytest.raises(ResolveError, match=rf"cannot find module .*did you mean '{rel}:kernel'\?"):
        check_reference(ref, base)
    assert not marker.exists()

def test_a_folder_named_like_a_file_is_called_a_folder(user_file):
    path, _ = user_file
    (path.parent / "pkg.py").mkdir()
    with pytest.raises(ResolveError, match=r"kernels/pkg.py is a directory, not a Python file"):
        check_reference("kernels/pkg.py:kernel", path.parent.parent)


def test_a_syntax_error_names_the_line(tmp_path):
    (tmp_path / "bad.py").write_text("def f(:\n")
    with pytest.raises(ResolveError, match=r"bad.py:1: syntax error"):
        check_reference("bad.py:f", tmp_path)


def test_a_star_import_or_module_getattr_may_define_anything(tmp_path):
    (tmp_path / "star.py").write_text("from math import *\n")
    (tmp_path / "lazy.py").write_text("def __getattr__(name):\n    return len\n")
    check_reference("star.py:anything", tmp_path)
    check_reference("lazy.py:anything", tmp_path)


def test_module_references_are_found_without_importing(tmp_path, monkeypatch):
    package = tmp_path / "userpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('package imported')\n")
    (package / "sub" / "__init__.py").write_text("raise SystemExit('subpackage imported')\n")
    (package / "sub" / "impl.py").write_text("raise SystemExit('module imported')\ndef fn(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    check_reference("userpkg.sub.impl:fn", None)
    with pytest.raises(ResolveError, match=r"impl.py defines no 'fnn' at top level \(did you mean 'fn'\?\)"):
        check_reference("userpkg.sub.impl:fnn", None)
    with pytest.raises(ResolveError, match=r"cannot find module 'userpkg.nope'"):
        check_reference("userpkg.nope:fn", None)
    with pytest.raises(ResolveError, match=r"userpkg.sub.impl is not a package"):
        check_reference("userpkg.sub.impl.deeper:fn", None)
    assert not any(m.startswith("userpkg") for m in sys.modules)


@pytest.mark.parametrize("ref,expected", [
    ("solbench.impls.attn:o_proj_baseline", None),
    ("solbench.impls.attn:o_proj_basline", "has no attribute 'o_proj_basline'"),
    ("solbench.impls.nothing:f", "cannot import 'solbench.impls.nothing'"),
    ("json:loads", None),
    ("no_such_module_anywhere:f", r"cannot find module 'no_such_module_anywhere' \(not installed"),
])
def test_installed_modules(ref, expected):
    if expected is None:
        check_reference(ref)
    else:
        with pytest.raises(ResolveError, match=expected):
            check_reference(ref)


def test_validate_references_names_file_line_and_field(tmp_path):
    text = GOOD.replace("baseline: tests.unit.helpers:double",
                        "baseline: tests.unit.helpers:double\n      fused: {fn: tests.unit.helpers:double, setup: prep.py:setup}")
    path = write(tmp_path, text)
    specs = load_workload_file(path)
    with pytest.raises(ConfigError) as info:
        validate_references(path, specs)
    assert str(info.value) == (f"{path}:13: workloads.0.implementations.fused.setup: "
                               "no such file 'prep.py' (looked in " + str(tmp_path) + " and the current directory)")
    validate_references(path, specs, include=lambda workload, impl: impl != "fused")
    (tmp_path / "prep.py").write_text("def setup(x):\n    return {'x': x}\n")
    validate_references(path, specs)


def test_validate_references_checks_the_reference(tmp_path):
    path = write(tmp_path, GOOD.replace("reference: tests.unit.helpers:double", "reference: tests.unit.helpers:dubble"))
    with pytest.raises(ConfigError, match=r"w.yaml:10: workloads.0.reference: .*(defines no|has no attribute) 'dubble'.*did you mean 'double'"):
        validate_references(path, load_workload_file(path))


def test_shipped_workloads_have_valid_references():
    for name in ("attn", "bert", "resnet50"):
        path = f"workloads/{name}.yaml"
        validate_references(path, load_workload_file(path))


def test_resolve_error_is_a_config_error():
    assert issubclass(ResolveError, ConfigError) and issubclass(ResolveError, ValueError)


def test_source_with_a_coding_cookie(tmp_path):
    (tmp_path / "latin.py").write_bytes(textwrap.dedent("""\
        # -*- coding: latin-1 -*-
        NAME = 'caf\xe9'
        def fn(x):
            return x
        """).encode("latin-1"))
    check_reference("latin.py:fn", tmp_path)


def test_a_failing_import_names_the_line_of_the_users_file(tmp_path):
    from solbench.impls.registry import resolve

    (tmp_path / "mine.py").write_text("import math\n\nimport solbench_no_such_module_xyz\n\ndef fn(x):\n    return x\n")
    with pytest.raises(ResolveError) as info:
        resolve("mine.py:fn", tmp_path)
    text = str(info.value)
    assert f"{(tmp_path / 'mine.py').resolve()}:3: ModuleNotFoundError" in text, text


def test_an_implementation_whose_import_fails_is_named_at_its_workload_line(tmp_path):
    """A run where an implementation's file imports a module this machine lacks: exit 4, and the one
    line says which entry of which workload file pointed to it (file:line: field), then the line of the
    implementation's own file (it named that file only)."""
    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.results import store

    (tmp_path / "wl.yaml").write_text(textwrap.dedent("""\
        workloads:
          - name: tiny
            parameters: {n: [32]}
            dtypes: [float32]
            inputs:
              x: {shape: [n, 8]}
            outputs:
              y: {shape: [n, 8]}
            ops: [{op: mul, numel: n * 8, inputs: 1}]
            reference: good.py:reference
            implementations:
              baseline: good.py:reference
              bad: bad.py:kernel
        """))
    (tmp_path / "good.py").write_text("def reference(x):\n    return x * 2\n")
    (tmp_path / "bad.py").write_text("import math\nimport solbench_no_such_module_xyz\n\n\ndef kernel(x):\n"
                                     "    return x\n")
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(tmp_path / "wl.yaml"), "-o", str(out), "--repeat", "1",
                                       "--device", "cpu", "--budget", "0.05", "--min-samples", "5",
                                       "--max-samples", "15"])
    assert result.exit_code == 4, result.output
    (bad,) = [r for c in store.load(out).cases for r in c.impls if r.name == "bad"]
    assert bad.status == "error" and bad.message == (
        f"{(tmp_path / 'wl.yaml').absolute()}:13: workloads.0.implementations.bad: error importing "
        f"{(tmp_path / 'bad.py').resolve()}:2: ModuleNotFoundError: No module named 'solbench_no_such_module_xyz'")
