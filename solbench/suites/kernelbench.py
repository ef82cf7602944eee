"""Read a KernelBench problem file into a workload (nothing of the suite is copied; the file is
read where it is).

A problem (``KernelBench/level{1,2,3}/<id>_<Name>.py``) defines ``class Model(nn.Module)`` (forward
is the reference), module-level size constants, ``get_inputs()`` and ``get_init_inputs()``. It
becomes one workload:

    parameters      every module-level int or float constant (one value each: the file's)
    profiles.cpu    the integer sizes halved until a case fits a CPU run (solbench.suites.scale)
    inputs          forward's arguments, drawn by get_inputs() (shapes traced); Python numbers
                    among them are scalar inputs
    outputs         ``out`` (or ``out0``, ``out1``, ... for a tuple), shapes traced; ``returns``: a
                    solution must return them as Model does (a tensor, or a tuple), as KernelBench
                    compares them
    cost            traced on the meta device (solbench.suites.trace); a forward that cannot run
                    there (``.item()``: it reads a value) is traced per case on the run's device
                    with real inputs, and the problem has no CPU profile
    reference       Model, at the inputs' own dtypes (KernelBench's reference)
    tolerance       KernelBench's: atol = rtol = 1e-4 (fp32), 1e-2 (16-bit)
    baseline        Model, eager; compiled: torch.compile(Model) (needs inductor here)
    a solution      ModelNew of a solution file (``--solution``, or ``<stem>_new*.py`` beside the
                    problem), built under the same seed (solbench.suites.kb_runtime)
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import Any

import torch

from solbench.errors import ConfigError
from solbench.suites import kb_runtime, scale
from solbench.suites.common import one_line, validated
from solbench.suites.trace import probe
from solbench.workload.cases import build_case
from solbench.workload.schema import Profile, WorkloadSpec

RT = "solbench.suites.kb_runtime"
# names kb_runtime's reference and setup take beside the inputs (and ``out``, the output's): a forward
# parameter so named is renamed ``in_<name>``, as one named as a constant is
RESERVED = ("params", "out", "problem", "order", "cls", "solution", "compile")
TOLERANCES = {"float32": {"atol": 1e-4, "rtol": 1e-4}, "float16": {"atol": 1e-2, "rtol": 1e-2},
              "bfloat16": {"atol": 1e-2, "rtol": 1e-2}}


def top_level(path: Path) -> tuple[set[str], ast.Module]:
    """Names a Python file binds at top level, and its syntax tree (ConfigError if unreadable)."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            names.add(node.target.id)  # ``batch_size: int = 16``
    return names, tree


def looks_like_problem(path: Path) -> bool:
    """A .py file that defines Model and get_inputs (what a KernelBench problem defines)."""
    if path.suffix != ".py" or not path.is_file():
        return False
    try:
        names, _ = top_level(path)
    except ConfigError:
        return path.suffix == ".py"  # a broken problem file: read() says what is wrong
    return {"Model", "get_inputs"} <= names


def is_solution(path: Path) -> bool:
    """A .py file that defines ModelNew and not Model: a solution, not a problem."""
    try:
        names, _ = top_level(path)
    except ConfigError:
        return False
    return _defines_solution(names)


def _defines_solution(names: set[str]) -> bool:
    return "ModelNew" in names and "Model" not in names


def read(path: Path, solutions: list[Path] | None = None) -> WorkloadSpec:
    """The workload of one problem file (module docstring); ConfigError naming the file otherwise."""
    path = path.resolve()
    names, _ = top_level(path)
    for need, what in (("Model", "class Model"), ("get_inputs", "get_inputs()"),
                       ("get_init_inputs", "get_init_inputs()")):
        if need not in names:
            raise ConfigError(f"{path}: no {what} (a KernelBench problem defines class Model, get_inputs() "
                              "and get_init_inputs())")
    module = _call(path, "importing it", lambda: kb_runtime.load_module(path))
    if not isinstance(getattr(module, "Model", None), type) or not issubclass(module.Model, torch.nn.Module):
        raise ConfigError(f"{path}: Model is not an nn.Module class")
    constants = {k: v for k, v in module.__solbench_constants__.items() if k in names and not k.startswith("_")}
    meta = _call(path, "get_inputs()", lambda: kb_runtime.inputs(
        constants, "meta", torch.Generator(), str(path), ",".join(_input_names(module, constants, path))))
    order = list(meta)
    odd = [n for n in order if not isinstance(meta[n], torch.Tensor | int | float)]
    if odd or not any(isinstance(v, torch.Tensor) for v in meta.values()):
        what = f"{type(meta[odd[0]]).__name__} for {odd[0]!r}" if odd else "no tensor"
        raise ConfigError(f"{path}: get_inputs() gives {what} (forward's inputs are tensors, and Python numbers)")
    _call(path, "Model(*get_init_inputs())",
          lambda: kb_runtime.build(str(path), "Model", constants, torch.device("meta")))
    outputs, returns = _call(path, "Model's forward", lambda: _outputs(path, constants, meta))
    spec = _spec(path, constants, order, meta, outputs, returns, solutions or [])
    return _with_cpu_profile(spec, path, constants)


def _call(path: Path, what: str, fn: Any) -> Any:
    try:
        return fn()
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:  # a module the problem imports: its suite's requirements
        hint = f" (the problem needs it: pip install {exc.name})" if exc.name else ""
        raise ConfigError(f"{path}: {what} raised ModuleNotFoundError: {one_line(str(exc))}{hint}") from None
    except Exception as exc:
        raise ConfigError(f"{path}: {what} raised {type(exc).__name__}: {one_line(str(exc))}") from None


def _input_names(module: Any, constants: dict[str, Any], path: Path) -> list[str]:
    kb_runtime.set_constants(module, constants)
    count = len(_call(path, "get_inputs()", lambda: _meta_values(module)))
    names = kb_runtime.input_names(module.Model)
    if len(names) != count:
        names = [f"x{i}" for i in range(count)]
    return [f"in_{n}" if n in constants or n in RESERVED else n for n in names]


def _meta_values(module: Any) -> list[Any]:
    with torch.device("meta"):
        return list(module.get_inputs())


def _outputs(path: Path, constants: dict[str, Any], inputs: dict[str, Any]) -> tuple[list[str], str]:
    """The outputs' names, and what Model returns them as (the workload's ``returns``: a solution must
    return the same, as KernelBench compares them). A forward that cannot run on the meta device (it
    reads a value with ``.item()``, or launches a kernel of its own) is called once with real inputs,
    on a GPU where there is one, else on the CPU; what that call raises propagates."""
    try:
        model = kb_runtime.build(str(path), "Model", constants, torch.device("meta"))
        with torch.no_grad():
            value = model(*inputs.values())
    except Exception:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        real = kb_runtime.inputs(constants, device, torch.Generator(), str(path), ",".join(inputs))
        model = kb_runtime.build(str(path), "Model", constants, torch.device(device))
        with torch.no_grad():
            value = model(*real.values())
    if isinstance(value, torch.Tensor):
        return ["out"], "tensor"
    if isinstance(value, tuple | list) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [f"out{i}" for i in range(len(value))], "tuple" if isinstance(value, tuple) else "list"
    raise ConfigError(f"{path}: Model's forward returns {type(value).__name__}, not a tensor or a tuple of tensors")


def _spec(path: Path, constants: dict[str, Any], order: list[str], meta: dict[str, Any], outputs: list[str],
          returns: str, solutions: list[Path]) -> WorkloadSpec:
    problem = str(path)
    fixed = {"problem": problem, "order": ",".join(order)}
    tensors = [n for n in order if isinstance(meta[n], torch.Tensor)]
    floating = [meta[n].dtype for n in tensors if meta[n].is_floating_point()]
    dtype = str(floating[0]).removeprefix("torch.") if floating else "float32"
    impls: dict[str, Any] = {
        "baseline": {"fn": f"{RT}:forward", "setup": f"{RT}:setup", "params": fixed,
                     "description": "Model, eager (KernelBench's reference)"},
        "compiled": {"fn": f"{RT}:forward", "setup": f"{RT}:setup", "params": {**fixed, "compile": 1},
                     "requires": ["inductor"], "description": "torch.compile(Model)"},
    }
    given: dict[Path, Path] = {}
    for sol in solutions:
        given.setdefault(sol.resolve(), sol)  # a file given twice (beside the problem and --solution) counts once
    for resolved, sol in given.items():
        name = solution_name(path, sol)
        if name in impls:  # another solution has that name: this one is named by its file
            name = re.sub(r"[^A-Za-z0-9_.\-]", "_", sol.stem)
        if name in impls:
            raise ConfigError(f"{path}: two implementations would be named {name!r}; rename the solution {sol}")
        impls[name] = {"fn": f"{RT}:forward", "setup": f"{RT}:setup",
                       "params": {**fixed, "cls": "ModelNew", "solution": str(resolved)},
                       "description": f"ModelNew of {sol.name}"}
    data = {
        "name": workload_name(path),
        "description": f"KernelBench {path.parent.name}/{path.name}",
        "parameters": {k: [v] for k, v in constants.items()} or None,
        "constants": {} if constants else {"problem_size": 1},
        "dtypes": [dtype],
        "inputs": {n: {"shape": None} for n in tensors},
        "outputs": {n: {"shape": None} for n in outputs},
        "input_generator": {"fn": f"{RT}:inputs", "params": fixed},
        "reference": f"{RT}:reference",
        "returns": returns,
        "reference_params": fixed,
        "reference_dtype": "declared",
        "cost": "traced",
        "fp32_peak": "torch",  # the implementations run with torch's defaults: convolutions in TF32
        "implementations": impls,
        "tolerances": TOLERANCES,
        "source": {"suite": "kernelbench", "path": problem, "sha256": sha256(path)},
    }
    if not constants:
        del data["parameters"]
    return validated(path, data)


def _with_cpu_profile(spec: WorkloadSpec, path: Path, constants: dict[str, Any]) -> WorkloadSpec:
    if not constants:
        return spec
    dtype = spec.dtypes[0]

    def trace(params: dict[str, Any]) -> Any:
        try:
            return probe(spec, build_case(spec, params, dtype), None)[1]
        except ConfigError as exc:  # the trace's own messages name no file
            raise ConfigError(f"{path}: {exc}") from None

    try:
        trace(dict(constants))
    except ConfigError:
        raise
    except Exception as exc:  # .item(), or a kernel of its own: traced per run on the real device instead
        why = f"{type(exc).__name__}: {one_line(str(exc))}"[:160]
        note = f"no CPU profile (the reference does not run on the meta device: {why})"
        return spec.model_copy(update={"description": one_line(f"{spec.description}; {note}")})
    small = scale.scaled(constants, trace)
    if small == constants:
        return spec
    return spec.model_copy(update={"profiles": {"cpu": Profile(parameters={k: [v] for k, v in small.items()})}})


def workload_name(path: Path) -> str:
    """``level1/1_Square_matrix_multiplication_.py`` -> ``level1_1_Square_matrix_multiplication_``."""
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", path.stem)
    parent = path.parent.name
    return f"{parent}_{stem}" if re.fullmatch(r"level\d+", parent) else stem


def solution_name(problem: Path, solution: Path) -> str:
    """``new`` for ``<stem>_new.py``, ``new_x`` for ``<stem>_new_x.py``; else ``solution`` (a second
    such solution of one problem is named by its file's stem instead)."""
    stem = solution.stem
    if stem.startswith(problem.stem + "_new"):
        rest = stem[len(problem.stem) + 1:]
        return re.sub(r"[^A-Za-z0-9_.\-]", "_", rest)
    return "solution"


def siblings(problem: Path) -> list[Path]:
    """Solution files beside a problem: ``<stem>_new.py`` and ``<stem>_new_*.py`` defining ModelNew
    (with a copy of Model too: such a file is a solution, not a problem of its own). ConfigError for
    such a file that cannot be parsed (a syntax error): named as a solution, it must not be dropped
    without a word (the run would exit 0 without it)."""
    found = [problem.with_name(problem.stem + "_new.py"), *sorted(problem.parent.glob(problem.stem + "_new_*.py"))]
    # top_level raises ConfigError naming the file and line
    return [p for p in found if p.is_file() and "ModelNew" in top_level(p)[0]]


def sha256(*paths: Path) -> str:
    """The sha256 of the files' bytes, one after another (a SOL-ExecBench problem is two files)."""
    return hashlib.sha256(b"".join(path.read_bytes() for path in paths)).hexdigest()
