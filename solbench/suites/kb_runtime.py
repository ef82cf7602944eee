"""What a KernelBench problem runs as, inside a worker: the input generator, the reference, set-up
and the timed call. Workloads name these functions; the problem file is a fixed parameter.

    inputs(params, device, generator, problem)  get_inputs() with the module constants set from
                                                 the case, seeded from the generator, drawn on device
    reference(params, problem, **inputs)         Model(*get_init_inputs())(*inputs), no grad
    setup(params, problem, cls, solution)        builds the module once per input set (untimed)
    forward(model, args)                         the timed call: model(*args), no grad

Model and ModelNew are built under the same seed (``SEED``, as KernelBench builds both). When
ModelNew's state_dict has the same names and shapes as Model's, Model's weights are then copied
into it, so a ModelNew that creates its parameters in another order still gets the problem's
weights; otherwise (other names or shapes) it keeps the weights its own creation order drew, and
is reported incorrect if they differ from Model's.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from solbench.impls.registry import import_file
from solbench.measure.tensors import rng_devices

SEED = 42  # KernelBench's eval seeds Model and ModelNew alike (src/eval.py, set_seed)
_MODELS: dict[tuple[Any, ...], torch.nn.Module] = {}


def load_module(path: str | Path) -> Any:
    """The problem (or solution) file as a module, loaded once per process and file content."""
    path = Path(path).resolve()
    data = path.read_bytes()
    name = "solbench_kb_" + hashlib.sha256(str(path).encode() + data).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    module = import_file(path, name)
    constants = {k: v for k, v in vars(module).items() if isinstance(v, int | float) and not isinstance(v, bool)}
    module.__solbench_constants__ = constants  # type: ignore[attr-defined]  # as the file wrote them
    return module


def set_constants(module: Any, params: Mapping[str, Any]) -> None:
    """Module-level constants set to the case's values (get_inputs and get_init_inputs read them)."""
    for key, value in params.items():
        if key != "dtype" and isinstance(getattr(module, key, None), int | float) and not isinstance(value, str):
            setattr(module, key, type(getattr(module, key))(value))


def input_names(model_cls: type) -> list[str]:
    """forward's parameter names (self excluded); empty when it takes ``*args``."""
    params = list(inspect.signature(model_cls.forward).parameters.values())[1:]  # type: ignore[attr-defined]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return []
    return [p.name for p in params]


def inputs(params: Mapping[str, Any], device: str, generator: torch.Generator, problem: str,
           order: str) -> dict[str, Any]:
    """get_inputs() at the case's constants, seeded from ``generator``, created on ``device``."""
    module = load_module(problem)
    set_constants(module, params)
    names = order.split(",")
    with torch.random.fork_rng(devices=rng_devices(device)), torch.device(device):
        torch.manual_seed(generator.initial_seed())
        values = list(module.get_inputs())
    if len(values) != len(names):
        raise ValueError(f"get_inputs() gave {len(values)} values; forward takes {len(names)}")
    return {n: v.to(device) if isinstance(v, torch.Tensor) else v for n, v in zip(names, values, strict=True)}


def build(problem: str, cls: str, params: Mapping[str, Any], device: torch.device,
          solution: str = "") -> torch.nn.Module:
    """``cls`` of the problem (or of the solution file) built under SEED with get_init_inputs()."""
    key = (problem, cls, solution, tuple(sorted((k, v) for k, v in params.items() if k != "dtype")), str(device))
    if key in _MODELS:
        return _MODELS[key]
    module = load_module(problem)
    set_constants(module, params)
    init = list(module.get_init_inputs())
    owner = load_module(solution) if solution else module
    if solution:
        set_constants(owner, params)
    meta = device.type == "meta"
    try:
        model = _construct(getattr(owner, cls), init, "meta" if meta else "cpu")
    except RuntimeError:
        if not meta:
            raise
        # a constructor that reads values (e.g. ``.item()`` of a drop-path schedule) cannot run on
        # the meta device: build it on the CPU, then move it there
        model = _construct(getattr(owner, cls), init, "cpu")
    if cls != "Model" and not meta:
        _adopt_weights(model, build(problem, "Model", params, torch.device("cpu")))
    model = model.to(device)
    if len(_MODELS) >= 4:
        _MODELS.pop(next(iter(_MODELS)))
    _MODELS[key] = model
    return model


def _construct(cls: Any, init: Sequence[Any], device: str) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(SEED)
        return cls(*init)  # type: ignore[no-any-return]


def _adopt_weights(model: torch.nn.Module, reference: torch.nn.Module) -> None:
    """Model's weights into ModelNew where both state_dicts have the same names and shapes."""
    mine, theirs = model.state_dict(), reference.state_dict()
    if mine.keys() == theirs.keys() and all(mine[k].shape == theirs[k].shape for k in mine):
        model.load_state_dict(theirs)


def _device(values: Mapping[str, Any]) -> torch.device:
    return next((v.device for v in values.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))


def reference(params: Mapping[str, Any], problem: str, order: str, **values: Any) -> Any:
    """Model(*get_init_inputs())(*inputs), without autograd. The model is built outside any dispatch
    mode: a trace (solbench.suites.trace) counts the call, not the initialisers of its weights."""
    with _disable_current_modes():
        model = build(problem, "Model", params, _device(values))
    with torch.no_grad():
        return model(*[values[n] for n in order.split(",")])


def setup(params: Mapping[str, Any], problem: str, order: str, cls: str = "Model", solution: str = "",
          compile: bool = False, **values: Any) -> dict[str, Any]:
    """The module (compiled with torch.compile where asked) and the call's positional arguments."""
    model: Any = build(problem, cls, params, _device(values), solution)
    if compile:
        model = _compiled(model)
    return {"model": model, "args": tuple(values[n] for n in order.split(","))}


_COMPILED: dict[int, Any] = {}


def _compiled(model: torch.nn.Module) -> Any:
    if id(model) not in _COMPILED:
        _COMPILED[id(model)] = torch.compile(model)
    return _COMPILED[id(model)]


def forward(model: Any, args: Sequence[Any], **_fixed: Any) -> Any:
    """The timed call."""
    with torch.no_grad():
        return model(*args)
