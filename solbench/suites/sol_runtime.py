"""What a SOL-ExecBench problem runs as, inside a worker: inputs, the reference and a solution.

    inputs(params, device, generator, definition, workloads)   one workload line's inputs:
        random      float: standard normal; int: uniform in [0, 8); bool: fair coin
        scalar      the line's value
        custom      the definition's custom_inputs_entrypoint(axes_and_scalars, device)
        safetensors the tensor from the file (relative to the problem folder, then its parents);
                    a file not there is a DeviceError: the implementations are ``skipped``
    reference(definition, **inputs)      the definition's ``run`` on the inputs in declared order
    solution(definition, solution, **inputs)   a Python solution's entry point; destination-passing
                                          ones also get the outputs (in declared order)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from solbench.errors import DeviceError

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
    for name, tensor in spec["inputs"].items():
        desc = described.get(name, {"type": "random"})
        if tensor.get("shape") is None:
            out[name] = desc.get("value")
            scope[name] = out[name]
            continue
        shape = [int(scope[a]) if isinstance(a, str) else int(a) for a in tensor["shape"]]
        dtype = _dtype(tensor["dtype"])
        if desc.get("type") == "safetensors":
            out[name] = _safetensors(definition, desc, device, shape, dtype)
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
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen, device=device) < 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 8, shape, generator=gen, device=device, dtype=torch.int64).to(dtype)
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _safetensors(definition: str, desc: Mapping[str, Any], device: str, shape: list[int],
                 dtype: torch.dtype) -> torch.Tensor:
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    folder = Path(definition).parent
    candidates = [base / desc["path"] for base in (folder, *folder.parents)]
    found = next((p for p in candidates if p.is_file()), None)
    if found is None or importlib.util.find_spec("safetensors") is None:
        raise DeviceError(f"needs the safetensors input {desc.get('path')!r}, which is not on this machine")
    from safetensors.torch import load_file

    return load_file(str(found), device=device)[desc["tensor_key"]]


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


def _entry(path: str) -> Any:
    key = "solution:" + path
    if key not in _CACHE:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        languages = set(data.get("spec", {}).get("languages", []))
        if languages - {"pytorch", "python", "triton", "cute_dsl", "cutile"}:
            raise DeviceError(f"needs a build of {', '.join(sorted(languages))} sources, which solbench does not "
                              "do yet (Python solutions only)")
        file, _, fn = data["spec"]["entry_point"].partition("::")
        sources = {s["path"]: s["content"] for s in data.get("sources", [])}
        folder = Path(path).parent
        text = sources.get(file) or (folder / file).read_text(encoding="utf-8")
        name = "solbench_solution_" + hashlib.sha256(text.encode()).hexdigest()[:16]
        module = types.ModuleType(name)
        module.__file__ = str(folder / file)
        sys.modules[name] = module
        _run_source(text, str(folder / file), module)
        _CACHE[key] = getattr(module, fn)
    return _CACHE[key]


_COMPILED: dict[str, Any] = {}


def compiled_reference(definition: str, **values: Any) -> Any:
    """torch.compile of the definition's ``run`` (compiled once per process, on the first call)."""
    if definition not in _COMPILED:
        _COMPILED[definition] = torch.compile(reference_module(definition).run)
    with torch.no_grad():
        return _COMPILED[definition](*_ordered(definition, values))
