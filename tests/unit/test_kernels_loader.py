"""The kernel loader without a GPU: includes, #line seams, min_cc declarations, errors."""

from __future__ import annotations

import sys
import textwrap
import types

import numpy as np
import pytest

from solbench.errors import DeviceError
from solbench.kernels import KernelCompileError, UnsupportedDevice, load, loader, user


def _write(path, text):
    path.write_text(text)
    return path


def test_user_source_inlines_includes_once_with_line_markers(tmp_path):
    (tmp_path / "inc").mkdir()
    _write(tmp_path / "inc" / "b.cuh", "// solbench: min_cc 9.0\nint b;\n")
    _write(tmp_path / "inc" / "a.cuh", '#include "b.cuh"\nint a;\n')
    main = _write(tmp_path / "k.cu", '// solbench: min_cc 8.0\n#include "inc/a.cuh"\n#include "inc/b.cuh"\nint k;\n')
    src = loader.user_source(main)
    assert src.min_cc == (9, 0)  # the highest declaration among the file and its includes
    assert src.text.count("int b;") == 1  # included twice, inlined once
    lines = src.text.splitlines()
    # after the seam, numbering resumes at the main file's line 4 ("int k;")
    seam = max(i for i, line in enumerate(lines) if line.startswith("#line") and line.endswith('k.cu"'))
    assert lines[seam] == f'#line 4 "{main}"' and lines[seam + 1] == "int k;"
    assert f'#line 1 "{tmp_path / "inc" / "a.cuh"}"' in lines


def test_includes_with_a_trailing_comment_or_no_space_are_inlined_too(tmp_path):
    """`#include "inc.cuh"  // helpers` and `#include"inc.cuh"` were left to NVRTC, which looks in the
    working folder (a worker's scratch folder), not beside the source: "cannot open source file", or
    a stale file of that name compiled in, outside the cache key."""
    _write(tmp_path / "inc.cuh", "int inc;\n")
    _write(tmp_path / "two.cuh", "int two;\n")
    main = _write(tmp_path / "k.cu", '#include "inc.cuh"  // helpers\n#include"two.cuh" /* more */\n'
                                     '#include "inc.cuh" /* a comment that goes on\nint k;\n')
    lines = loader.user_source(main).text.splitlines()
    assert "int inc;" in lines and "int two;" in lines
    assert not any(line.startswith("#include") for line in lines[:-2])  # only the unfinished comment's is left
    assert lines[-3:] == [f'#line 3 "{main}"', '#include "inc.cuh" /* a comment that goes on', "int k;"]


def test_missing_include_names_the_including_file(tmp_path):
    main = _write(tmp_path / "k.cu", '#include "nope.cuh"\n')
    with pytest.raises(FileNotFoundError, match=r"nope\.cuh"):
        loader.user_source(main)


@pytest.mark.parametrize("line", ["// solbench: min_cc 9.0a", "// solbench: min_cc 9", "//solbench: min_cc sm_90"])
def test_a_malformed_min_cc_declaration_is_an_error_naming_file_and_line(tmp_path, line):
    """It was ignored: the source then had no minimum, and an older GPU failed to compile it
    (`error`) instead of skipping the implementation with the reason."""
    main = _write(tmp_path / "k.cu", f"int k;\n{line}\n")
    with pytest.raises(ValueError, match=rf"^{main}:2: '{line}' is not a declaration '// solbench: min_cc X\.Y'"):
        loader.user_source(main)


def test_source_without_declaration_has_no_minimum(tmp_path):
    assert loader.user_source(_write(tmp_path / "k.cu", "int k;\n")).min_cc == (0, 0)


@pytest.mark.parametrize("source", ["bias_gelu.cu", "residual_layernorm.cu", "gemv_residual.cu", "gemv_stream.cu"])
def test_every_builtin_kernel_declares_a_minimum(source):
    assert loader.kernel_min_cc(source) >= (8, 0)
    assert '#line 1 "common.cu"' in loader.read_source(source)


def test_unsupported_reason_compares_capabilities(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    reason = loader.unsupported_reason("gemv_stream.cu")
    assert reason == "needs compute capability 8.0+ (gemv_stream.cu); this GPU is 7.5"
    with pytest.raises(UnsupportedDevice, match=r"needs compute capability 8\.0"):
        loader.get_kernel("gemv_stream.cu", "gemv_stream_kernel<0, 0, 32, 2>",
                          name_expressions=("gemv_stream_kernel<0, 0, 32, 2>",))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert loader.unsupported_reason("gemv_stream.cu") is None
    assert "9.0" in loader.unsupported_reason("gemv_stream.cu", min_cc=(9, 0))


def test_unsupported_device_is_a_device_error():
    assert issubclass(UnsupportedDevice, DeviceError)  # the runner reports it "skipped"
    assert not issubclass(KernelCompileError, DeviceError)  # ... and this one "error"


def test_load_without_cuda_is_unsupported_with_a_reason(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = _write(tmp_path / "k.cu", 'extern "C" __global__ void k() {}\n')
    with pytest.raises(UnsupportedDevice, match=r"^needs a CUDA GPU \(k.cu\)"):
        load(path, "k")


@pytest.mark.parametrize("kwargs", [{"options": "-DTILE=128"}, {"name_expressions": "k<float>"}])
def test_a_string_for_options_or_name_expressions_is_refused(tmp_path, kwargs):
    """options=("-DTILE=128") (the comma left out) went to NVRTC one character an option."""
    path = _write(tmp_path / "k.cu", 'extern "C" __global__ void k() {}\n')
    with pytest.raises(TypeError, match=r"must be a sequence of strings, e\.g\. \('"):
        load(path, "k<float>", **kwargs)


def test_relative_path_is_found_next_to_the_calling_file(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (tmp_path / "pkg").mkdir()
    _write(tmp_path / "pkg" / "k.cu", "int k;\n")
    caller = _write(tmp_path / "pkg" / "impl.py",
                    "from solbench.kernels import load\n\ndef go():\n    return load('k.cu', 'k')\n")
    monkeypatch.chdir(tmp_path)  # not the caller's folder
    namespace: dict = {}
    exec(compile(caller.read_text(), str(caller), "exec"), namespace)
    with pytest.raises(UnsupportedDevice, match=r"\(k.cu\)"):  # found, then refused for want of CUDA
        namespace["go"]()
    with pytest.raises(FileNotFoundError, match="looked in"):
        load("missing.cu", "k")


def _fake_cupy(monkeypatch, log: str):
    """A stand-in CuPy whose NVRTC rejects every source with ``log``."""
    class CompileException(Exception):
        def get_message(self):
            return log

    class RawModule:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def compile(self):
            raise CompileException("ignored")

    compiler = types.ModuleType("cupy.cuda.compiler")
    compiler.CompileException = CompileException
    cuda = types.ModuleType("cupy.cuda")
    cuda.compiler = compiler
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    cupy.RawModule = RawModule
    for name, mod in (("cupy", cupy), ("cupy.cuda", cuda), ("cupy.cuda.compiler", compiler)):
        monkeypatch.setitem(sys.modules, name, mod)


def test_compile_error_carries_the_log(tmp_path, monkeypatch):
    log = f'{tmp_path}/k.cu(2): error: identifier "nope" is undefined'
    _fake_cupy(monkeypatch, log)
    source = loader.user_source(_write(tmp_path / "k.cu", "int k = nope;\n"))
    with pytest.raises(KernelCompileError) as info:
        loader.compile_module(source)
    assert str(info.value) == f"{source.path}: NVRTC failed to compile: {log}\n{log}"


def test_the_reported_status_names_the_first_compile_errors_file_and_line(tmp_path, monkeypatch):
    """A status shows an exception's first line alone: it was "NVRTC failed to compile:", the
    compiler's message (file, line, what) left out, though the README promises it."""
    from solbench.measure import worker

    error = f'{tmp_path}/inc.cuh(7): error: identifier "nope" is undefined'
    log = (f'{tmp_path}/k.cu(3): warning #177-D: variable "error_count" was declared but never referenced\n\n'
           f"{error}\n      int k = nope;\n              ^\n\n1 error detected in the compilation of \"k.cu\".")
    _fake_cupy(monkeypatch, log)
    source = loader.user_source(_write(tmp_path / "k.cu", "int k = nope;\n"))
    with pytest.raises(KernelCompileError) as info:
        loader.compile_module(source)
    status = worker._fault("mine", info.value, "set-up failed: ")
    assert status.status == "error"
    assert status.message.startswith(f"set-up failed: KernelCompileError: {source.path}: NVRTC failed to compile: "
                                     f"{error} (at ")


def test_missing_cupy_is_a_device_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    source = loader.user_source(_write(tmp_path / "k.cu", "int k;\n"))
    with pytest.raises(DeviceError, match=r"^needs CuPy"):
        loader.compile_module(source)


def test_a_cupy_that_is_installed_but_fails_to_import_says_why(monkeypatch, tmp_path):
    """CuPy installed on a machine without the driver (or for another CUDA) raises ImportError on import:
    that read "needs CuPy (pip install ...)", though it is installed and `requires: [cupy]` had passed."""
    fake = tmp_path / "site" / "cupy"
    fake.mkdir(parents=True)
    _write(fake / "__init__.py", "try:\n    raise OSError('libcuda.so.1: cannot open shared object file')\n"
                                 "except OSError as e:\n    raise ImportError('CuPy failed to load.\\n\\nmore') from e\n")
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    source = loader.user_source(_write(tmp_path / "k.cu", "int k;\n"))
    with pytest.raises(DeviceError) as info:
        loader.compile_module(source)
    assert str(info.value) == ("needs a working CuPy: importing it failed (OSError: libcuda.so.1: cannot open "
                               "shared object file)")


def test_a_launch_on_another_device_raises_the_shared_memory_limit_there(monkeypatch):
    """CuPy keeps a kernel's compiled function, and attributes such as its dynamic shared-memory limit,
    per device: the limit was raised on the current device, before switching to the launch device, so
    a launch of more than 48 KiB on another GPU was refused there."""
    import contextlib

    import torch

    current = [0]

    class Device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            self.before, current[0] = current[0], self.index

        def __exit__(self, *exc):
            current[0] = self.before

    class Stream:
        @staticmethod
        def from_external(stream):
            return contextlib.nullcontext()

    class RawKernel:
        def __init__(self):
            self.limits, self.launched = {}, []

        @property
        def max_dynamic_shared_size_bytes(self):
            return self.limits.get(current[0], 48 * 1024)

        @max_dynamic_shared_size_bytes.setter
        def max_dynamic_shared_size_bytes(self, value):
            self.limits[current[0]] = value

        def __call__(self, grid, block, args, shared_mem=0):
            self.launched.append((current[0], shared_mem <= self.max_dynamic_shared_size_bytes))

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(Device=Device, Stream=Stream)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(__cuda_stream__=None))
    kernel = RawKernel()
    loader.launch(kernel, (4,), (256,), (), 100 * 1024, device="cuda:1")
    assert kernel.launched == [(1, True)] and kernel.limits == {1: 100 * 1024}


def test_launch_arguments_are_checked_before_any_launch():
    import torch

    with pytest.raises(TypeError, match=r"np\.int32"):
        user._convert_args("k", (np.float32(1.0), 3))
    with pytest.raises(TypeError, match="Python float"):
        user._convert_args("k", (2.5,))
    with pytest.raises(ValueError, match="CUDA tensors"):
        user._convert_args("k", (torch.zeros(2),))
    with pytest.raises(TypeError, match="list"):
        user._convert_args("k", ([1, 2],))
    assert user._convert_args("k", (np.int32(3), np.float32(1.5))) == ((np.int32(3), np.float32(1.5)), None)
    assert user._dims(4) == (4,) and user._dims((2, 3)) == (2, 3)
    with pytest.raises(ValueError, match="launch dimensions"):
        user._dims((1, 2, 3, 4))
    with pytest.raises(ValueError, match="launch dimensions"):
        user._dims(0)
    assert user._dims(np.int64(3)) == (3,) and user._dims([np.int32(2), 5]) == (2, 5)


@pytest.mark.parametrize("dims", [(1000 / 256,), 1000 / 256, (4, 2.0), np.float32(4.0), "4"])
def test_launch_dimensions_that_are_not_integers_are_refused(dims):
    """grid=(n / 256,) was cut down to int(3.9) = 3 blocks (part of the output never written), and a
    bare float failed with "'float' object is not iterable"."""
    with pytest.raises(ValueError, match="launch dimensions must be 1 to 3 positive integers"):
        user._dims(dims)


def test_a_relative_kernel_path_falls_back_on_the_working_folder_in_a_worker(tmp_path, monkeypatch):
    """load("kernels/k.cu") from impls/my.py, run from the folder holding kernels/: the worker works in
    a scratch folder of its own, and looked there instead of in the folder solbench was run from
    (the set-up failed, FileNotFoundError, instead of the kernel being skipped for want of CUDA)."""
    from click.testing import CliRunner

    from solbench.cli import main
    from solbench.results import store

    (tmp_path / "impls").mkdir()
    (tmp_path / "kernels").mkdir()
    _write(tmp_path / "kernels" / "k.cu", 'extern "C" __global__ void k(float* x) {}\n')
    _write(tmp_path / "impls" / "my.py", textwrap.dedent("""
        from solbench.kernels import load

        def reference(x):
            return x * 2

        def setup(x):
            return {"x": x, "kernel": load("kernels/k.cu", "k")}

        def kernel(x, kernel):
            return x * 2
    """))
    _write(tmp_path / "wl.yaml", textwrap.dedent("""
        workloads:
          - name: twice
            parameters: {n: [64]}
            dtypes: [float32]
            inputs: {x: {shape: [n]}}
            outputs: {y: {shape: [n]}}
            ops: [{op: elementwise, numel: n, flops_per_element: 1}]
            reference: impls/my.py:reference
            implementations:
              baseline: {fn: impls/my.py:reference}
              mine: {fn: impls/my.py:kernel, setup: impls/my.py:setup}
    """))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", "wl.yaml", "--device", "cpu", "-o", str(out), "--repeat", "1",
                                       "--budget", "0.02", "--min-samples", "3", "--max-samples", "5", "-q"])
    assert result.exit_code == 0, result.output
    (case,) = store.load(out).cases
    mine = next(r for r in case.impls if r.name == "mine")
    assert (mine.status, mine.message) == ("skipped", "needs a CUDA GPU (k.cu)")
