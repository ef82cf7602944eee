"""requirement_missing: the reason an implementation is skipped, for each ``requires`` kind."""

from __future__ import annotations

import sys

import pytest
import torch

from solbench.kernels import requirement_missing
from solbench.kernels.requirements import KNOWN
from solbench.workload.schema import Implementation


def test_every_schema_requirement_is_known_and_vice_versa():
    literal = Implementation.model_fields["requires"].annotation.__args__[0].__args__
    assert set(literal) == set(KNOWN)


@pytest.mark.parametrize("need", KNOWN)
def test_every_requirement_has_a_reason_on_the_cpu_or_is_importable(need):
    reason = requirement_missing(need, "cpu")
    if need in ("cupy", "nvmath", "inductor", "build"):  # tool checks (inductor, build: a C++ compiler)
        assert reason is None or reason.startswith("needs ")
    else:
        assert reason is not None and reason.startswith("needs ")


def test_cuda_and_compile_keep_the_runners_wording():
    assert requirement_missing("cuda", "cpu") == "needs CUDA (cuda)"
    assert requirement_missing("compile", "cpu") == "needs CUDA (compile)"
    assert requirement_missing("cuda", "cuda") is None


@pytest.mark.parametrize(("need", "have", "missing"), [
    ("sm80", (7, 5), True), ("sm80", (8, 0), False), ("sm89", (8, 6), True), ("sm89", (9, 0), False),
    ("sm90", (8, 9), True), ("sm90", (9, 0), False), ("fp8", (8, 6), True), ("fp8", (8, 9), False),
])
def test_compute_capability_requirements(monkeypatch, need, have, missing):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: have)
    reason = requirement_missing(need, "cuda")
    assert (reason is not None) == missing
    if missing:
        assert reason.endswith(f"this GPU is {have[0]}.{have[1]}")
    if need == "fp8" and missing:
        assert reason.startswith("needs FP8 tensor cores (compute capability 8.9+)")


def test_missing_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvmath", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert requirement_missing("nvmath") == "needs nvmath-python (pip install 'solbench[nvmath]')"
    assert requirement_missing("cupy").startswith("needs CuPy")


def test_build_needs_a_compiler_and_ninja(monkeypatch):
    import shutil

    tools = {"c++": "/usr/bin/c++", "ninja": "/usr/bin/ninja"}
    monkeypatch.setattr(shutil, "which", lambda name: tools.get(name))
    assert requirement_missing("build", "cpu") is None and requirement_missing("build", "cuda") is None
    del tools["ninja"]
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert requirement_missing("build") == "needs ninja to build C++/CUDA sources (pip install ninja)"
    tools.clear()
    assert requirement_missing("build") == "needs a C++ compiler to build C++/CUDA sources"


def test_unknown_requirement_is_an_error():
    with pytest.raises(ValueError, match="unknown requirement 'tpu'"):
        requirement_missing("tpu")


def test_inductor_on_the_cpu_needs_a_cxx_compiler(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert requirement_missing("inductor", "cpu") == "needs a C++ compiler for torch.compile on the CPU (inductor)"
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/g++" if name == "g++" else None)
    assert requirement_missing("inductor", "cpu") is None
