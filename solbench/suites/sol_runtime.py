"""What a SOL-ExecBench problem runs as, inside a worker: inputs, the reference and a solution.

    inputs(params, device, generator, definition, workloads)   one workload line's inputs:
        random      float: standard normal; int: uniform in [0, 8); bool: fair coin; packed FP4
                    pairs: random bytes (a Python number for a scalar input, as SOL-ExecBench
                    draws one)
        scalar      the line's value
        custom      the definition's custom_inputs_entrypoint(axes_and_scalars, device)
        safetensors the tensor from the file (relative to the problem folder, then its parents);
                    a file not there is a DeviceError: the implementations are ``skipped``; a
                    tensor missing from it, or of another shape or dtype than declared, a
                    ConfigError (its header is read on the meta device too, so the problem's
                    trace refuses it)
    reference(definition, **inputs)      the definition's ``run`` on the inputs in declared order
    solution(definition, solution, **inputs)   a solution's entry point; destination-passing
                                          ones also get the outputs (in declared order)
    prepare(definition, solution, **inputs)    the solution's set-up, outside timing: a Python
                                          solution imported, a C++/CUDA one built (below)

A solution in ``cuda_cpp``, ``cudnn`` or ``cutlass`` with the ``torch`` binding is built as
SOL-ExecBench builds it: ``torch.utils.cpp_extension.load`` over its ``.cu``/``.cpp``/``.cc``/
``.cxx``/``.c`` sources, its ``compile_options`` (``cuda_cflags``, ``cflags``, ``ld_flags``), its own
folder and CUTLASS (``$CUTLASS_DIR``, default /usr/local/cutlass) on the include path; cuDNN's
headers and library come from the ``nvidia-cudnn`` wheel where the CUDA toolkit has none. The
extension is named by a hash of its sources and flags, in torch's extension folder
(``$TORCH_EXTENSIONS_DIR``), so later workers load it instead of building it again, and two workers
that build it at once take turns (torch's lock). A machine without nvcc, CUTLASS or cuDNN makes
the solution ``skipped`` with what it needs; sources that do not compile make it fail, with the
compiler's first error as its message (the whole output goes to the worker's stderr).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from solbench.errors import ConfigError, DeviceError
from solbench.kernels.requirements import importable, not_installed, requirement_missing
from solbench.measure.tensors import PACKED
from solbench.text import first_few

_CACHE: dict[str, Any] = {}


def load_definition(path: str) -> dict[str, Any]:
    """The parsed definition.json (cached per process)."""
    if path not in _CACHE:
        _CACHE[path] = json.loads(Path(path).read_text(encoding="utf-8"))
    return _CACHE[path]  # type: ignore[no-any-return]


def workload_lines(path: str) -> list[dict[str, Any]]:
    key = "lines:" + path
    if key not in _CACHE:
        text = Path(path).read_text(encoding="utf-8")
        _CACHE[key] = [json.loads(line) for line in text.splitlines() if line.strip()]
    return _CACHE[key]  # type: ignore[no-any-return]


def reference_module(path: str) -> types.ModuleType:
    """The definition's reference source as a module (once per process and source)."""
    source = load_definition(path)["reference"]
    name = "solbench_sol_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__file__ = str(Path(path).with_name("reference.py"))
        _run_source(source, f"{path}:reference", module)
        sys.modules[name] = module
    return sys.modules[name]


def _run_source(text: str, filename: str, module: types.ModuleType) -> None:
    """Execute ``text`` as ``module``'s source, with the source in ``linecache`` under ``filename``:
    ``inspect.getsource`` then finds it, as Triton's ``@jit`` needs (a reference given inline in
    definition.json has no file of its own)."""
    import linecache

    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), module.__dict__)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)  # type: ignore[no-any-return]


def inputs(params: Mapping[str, Any], device: str, generator: torch.Generator, definition: str,
           workloads: str) -> dict[str, Any]:
    """The inputs of workload line ``params["wl"]`` (module docstring), in declared order."""
    spec = load_definition(definition)
    line = workload_lines(workloads)[int(params["wl"])]
    described = line.get("inputs", {})
    scope = {k: v for k, v in params.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    out: dict[str, Any] = {}
    scalars = torch.Generator().manual_seed(generator.initial_seed())  # the same values on every device
    for name, tensor in spec["inputs"].items():
        desc = described.get(name, {"type": "random"})
        if tensor.get("shape") is None:
            drawn = desc.get("type") == "random"
            out[name] = _random([], _dtype(tensor["dtype"]), "cpu", scalars).item() if drawn else desc.get("value")
            scope[name] = out[name]
            continue
        shape = [int(scope[a]) if isinstance(a, str) and not a.isdigit() else int(a) for a in tensor["shape"]]
        dtype = _dtype(tensor["dtype"])
        if desc.get("type") == "safetensors":
            out[name] = _safetensors(definition, name, desc, device, shape, dtype)
        else:
            out[name] = _random(shape, dtype, device, generator)
    entry = spec.get("custom_inputs_entrypoint")
    if entry and any(d.get("type") == "custom" for d in described.values()):
        module = reference_module(definition)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(generator.initial_seed())
            custom = getattr(module, entry)(scope, torch.device(device))
        out.update({k: v for k, v in custom.items() if k in out})
    return out


def _random(shape: list[int], dtype: torch.dtype, device: str, gen: torch.Generator) -> torch.Tensor:
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if dtype in PACKED:  # torch cannot cast to packed FP4 pairs: random bytes (every one is two valid values)
        return torch.randint(0, 256, shape, generator=gen, device=device, dtype=torch.uint8).view(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen, device=device) < 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 8, shape, generator=gen, device=device, dtype=torch.int64).to(dtype)
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _safetensors(definition: str, name: str, desc: Mapping[str, Any], device: str, shape: list[int],
                 dtype: torch.dtype) -> torch.Tensor:
    folder = Path(definition).parent
    candidates = [base / desc["path"] for base in (folder, *folder.parents)]
    found = next((p for p in candidates if p.is_file()), None)
    if found is not None:  # on the meta device too: a file unlike the definition is refused when the problem is read
        _check_stored(found, name, desc["tensor_key"], shape, dtype)
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if found is None or importlib.util.find_spec("safetensors") is None:
        raise DeviceError(f"needs the safetensors input {desc.get('path')!r}, which is not on this machine")
    from safetensors.torch import load_file

    return load_file(str(found), device=device)[desc["tensor_key"]]


# The safetensors header's name of each dtype a definition may declare (packed FP4 pairs have none: unchecked)
SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
                      torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2", torch.int8: "I8",
                      torch.int16: "I16", torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8",
                      torch.bool: "BOOL"}


def _check_stored(path: Path, name: str, key: str, shape: list[int], dtype: torch.dtype) -> None:
    """ConfigError ``inputs.<name>: <file>: ...`` where the file's header (its first 8 bytes give the
    size of a JSON object {key: {dtype, shape, data_offsets}}) has no tensor ``key``, or one of another
    shape or dtype than the definition declares; the tensor's data are not read."""
    where = f"inputs.{name}: {path}"
    try:
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size)) if 2 <= size <= 100_000_000 else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        raise ConfigError(f"{where}: not a safetensors file (no JSON header after its first 8 bytes)")
    entry = header.get(key)
    if key == "__metadata__" or not isinstance(entry, dict):
        held = [k for k in header if k != "__metadata__"]
        listed = first_few(held, 8)
        raise ConfigError(f"{where}: no tensor {key!r} (it holds: {listed or 'nothing'})")
    stored = SAFETENSORS_DTYPES.get(dtype)
    if stored is not None and (entry.get("dtype") != stored or entry.get("shape") != shape):
        raise ConfigError(f"{where}: tensor {key!r} is {entry.get('dtype')} {entry.get('shape')}; the definition "
                          f"declares {str(dtype).removeprefix('torch.')} {tuple(shape)}")


def _ordered(path: str, values: Mapping[str, Any]) -> list[Any]:
    return [values[n] for n in load_definition(path)["inputs"]]


def reference(definition: str, **values: Any) -> Any:
    """The definition's ``run`` on the inputs, in declared order."""
    with torch.no_grad():
        return reference_module(definition).run(*_ordered(definition, values))


def solution(definition: str, solution: str, **values: Any) -> Any:
    """A Python solution's entry point (``file.py::fn``) on the inputs, then the outputs where it is
    destination-passing (solbench allocates them outside the timed call)."""
    fn = _entry(solution)
    spec = load_definition(definition)
    args = _ordered(definition, values) + [values[n] for n in spec["outputs"] if n in values]
    return fn(*args)


def prepare(definition: str, solution: str, **values: Any) -> dict[str, Any]:
    """The solution's set-up (import or build), outside every timed call; the inputs unchanged."""
    _entry(solution)
    return values


PYTHON_LANGUAGES = frozenset({"pytorch", "python", "triton", "cute_dsl", "cutile"})
BUILT_LANGUAGES = frozenset({"cuda_cpp", "cudnn", "cutlass"})
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")


def _entry(path: str) -> Any:
    key = "solution:" + path
    if isinstance(_CACHE.get(key), Exception):  # a build or import that failed fails again, the same way
        raise _CACHE[key]
    if key not in _CACHE:
        try:
            _CACHE[key] = _load(path)
        except Exception as exc:
            _CACHE[key] = exc
            raise
    return _CACHE[key]


def _load(path: str) -> Any:
    """The solution's entry point: its Python source run, or its C++/CUDA sources built."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    spec = data.get("spec", {})
    languages = set(spec.get("languages") or [])
    file, _, fn = spec["entry_point"].partition("::")
    sources = {s["path"]: s["content"] for s in data.get("sources", [])}
    folder = Path(path).parent
    unknown = languages - PYTHON_LANGUAGES - BUILT_LANGUAGES
    if unknown:
        raise DeviceError(f"needs a build of {', '.join(sorted(unknown))} sources, which solbench does not do "
                          f"(it builds {', '.join(sorted(BUILT_LANGUAGES))} and runs Python solutions)")
    built = languages & BUILT_LANGUAGES
    module = _build(folder, sources, spec, languages) if built else _python(folder, file, sources)
    if not hasattr(module, fn):
        raise AttributeError(f"{path}: the entry point {spec['entry_point']!r} names no function {fn!r}")
    return getattr(module, fn)


def _python(folder: Path, file: str, sources: Mapping[str, str]) -> types.ModuleType:
    text = sources.get(file) or (folder / file).read_text(encoding="utf-8")
    name = "solbench_solution_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    module = types.ModuleType(name)
    module.__file__ = str(folder / file)
    sys.modules[name] = module
    try:
        _run_source(text, str(folder / file), module)
    except ModuleNotFoundError as exc:
        if not_installed(exc):
            raise DeviceError(f"needs the Python module {exc.name!r}, which is not installed here") from None
        raise
    return module


def _build(folder: Path, sources: Mapping[str, str], spec: Mapping[str, Any], languages: set[str]) -> Any:
    """The solution's sources built into a torch extension (module docstring), or a DeviceError
    saying what this machine lacks."""
    binding = spec.get("binding") or "torch"
    if binding != "torch":
        raise DeviceError(f"needs the {binding!r} binding; solbench builds torch-bound C++/CUDA solutions only")
    import torch.utils.cpp_extension as ext

    missing = requirement_missing("build")  # the compiler and ninja (a solution's ``requires: [build]``)
    if missing is not None:
        raise DeviceError(missing)
    options = spec.get("compile_options") or {}
    cflags = list(options.get("cflags") or [])
    cuda_cflags = list(options.get("cuda_cflags") or [])
    ldflags = list(options.get("ld_flags") or [])
    files = dict(sources) or {
        p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())
        if p.is_file() and p.suffix in (*SOURCE_SUFFIXES, ".h", ".hpp", ".cuh")}
    if any(Path(n).suffix == ".cu" for n in files):
        if not torch.cuda.is_available():
            raise DeviceError("needs CUDA (the solution has .cu sources)")
        if ext.CUDA_HOME is None:
            raise DeviceError("needs CUDA's compiler (nvcc) to build .cu sources: set CUDA_HOME")
    needs = languages | set(spec.get("dependencies") or [])
    includes: list[str] = []
    if "cutlass" in needs:
        root = Path(os.environ.get("CUTLASS_DIR", "/usr/local/cutlass"))
        if not (root / "include" / "cutlass" / "cutlass.h").is_file():
            raise DeviceError(f"needs CUTLASS's headers: set CUTLASS_DIR to a CUTLASS checkout (none in {root})")
        includes += [str(root / "include"), str(root / "tools" / "util" / "include")]
    digest = hashlib.sha256(json.dumps([sorted(files.items()), cflags, cuda_cflags, ldflags, includes,
                                        torch.__version__]).encode()).hexdigest()[:16]
    name = f"solbench_sol_{digest}"
    root_dir = _extensions_dir() / name
    src = root_dir / "src"
    src.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    if "cudnn" in needs:
        inc, link, lib = _cudnn(root_dir)
        includes.append(inc)
        ldflags = [f"-L{link}", f"-Wl,-rpath,{lib}", *ldflags]
    compiled = [str(src / n) for n in files if Path(n).suffix in SOURCE_SUFFIXES]
    if not compiled:
        raise ValueError(f"no source file to build (expected one of {', '.join(SOURCE_SUFFIXES)})")
    try:
        return ext.load(name, compiled, extra_cflags=cflags, extra_cuda_cflags=cuda_cflags, extra_ldflags=ldflags,
                        extra_include_paths=[str(src), *includes], build_directory=str(root_dir), verbose=False)
    except RuntimeError as exc:  # the compiler's first error as the message; all it printed to stderr
        text = str(exc)
        print(text, file=sys.stderr)
        first = next((ln.strip() for ln in text.splitlines() if "error" in ln.lower() and "Error building" not in ln),
                     None)
        if first is None:
            raise
        raise RuntimeError(f"the build failed: {first.replace(str(src) + os.sep, '')}") from exc


def _extensions_dir() -> Path:
    """Where built solutions live: ``$TORCH_EXTENSIONS_DIR``, else torch's own default folder, one
    sub-folder per Python and CUDA version."""
    base = os.environ.get("TORCH_EXTENSIONS_DIR") or str(Path.home() / ".cache" / "torch_extensions")
    flavour = f"solbench_py{sys.version_info.major}{sys.version_info.minor}_{torch.version.cuda or 'cpu'}"
    return Path(base) / flavour


def _cudnn(build: Path) -> tuple[str, str, str]:
    """cuDNN's include folder, the folder to link from and the folder to load from: the CUDA
    toolkit's, else the ``nvidia-cudnn`` wheel's (which ships ``libcudnn.so.N`` alone: a
    ``libcudnn.so`` link to it is made in the build folder)."""
    import torch.utils.cpp_extension as ext

    home = Path(ext.CUDA_HOME or "/nonexistent")
    for inc, lib in ((home / "include", home / "lib64"), (home / "include", home / "lib")):
        if (inc / "cudnn.h").is_file() and any(lib.glob("libcudnn.so*")):
            return str(inc), str(lib), str(lib)
    spec = importlib.util.find_spec("nvidia.cudnn") if importable("nvidia.cudnn") else None
    if spec is None or not spec.submodule_search_locations:
        raise DeviceError("needs cuDNN's headers and library (pip install nvidia-cudnn-cu12 or -cu13)")
    root = Path(next(iter(spec.submodule_search_locations)))
    if not (root / "include" / "cudnn.h").is_file():
        raise DeviceError(f"needs cuDNN's headers (no cudnn.h under {root / 'include'})")
    lib = root / "lib"
    if not (lib / "libcudnn.so").exists():
        versioned = sorted(lib.glob("libcudnn.so.*"))
        if not versioned:
            raise DeviceError(f"needs cuDNN's library (no libcudnn.so under {lib})")
        link = build / "cudnn_lib"
        link.mkdir(parents=True, exist_ok=True)
        if not (link / "libcudnn.so").exists():
            (link / "libcudnn.so").symlink_to(versioned[0])
        return str(root / "include"), str(link), str(lib)
    return str(root / "include"), str(lib), str(lib)


_COMPILED: dict[str, Any] = {}


def compiled_reference(definition: str, **values: Any) -> Any:
    """torch.compile of the definition's ``run`` (compiled once per process, on the first call)."""
    if definition not in _COMPILED:
        _COMPILED[definition] = torch.compile(reference_module(definition).run)
    with torch.no_grad():
        return _COMPILED[definition](*_ordered(definition, values))
