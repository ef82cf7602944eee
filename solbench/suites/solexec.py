"""Read a SOL-ExecBench problem folder into a workload (the folder is read where it is).

A problem folder holds ``definition.json`` (axes ``const``/``var``/``expr``, inputs and outputs
with shapes as axis names (or digits: a literal size) or ``null`` for a Python scalar, a
reference ``run``), and ``workload.jsonl`` (one workload per line: axes values, inputs,
tolerance). It becomes one workload:

    constants       the const axes;  derived: the expr axes
    cases           one per line: its var axes and ``wl`` (the line's index)
    profiles.cpu    every case with its sizes halved until it fits a CPU run (solbench.suites.scale)
    inputs          the tensor inputs (declared shapes and dtypes), drawn per line by
                    solbench.suites.sol_runtime (random, scalar, custom, safetensors)
    case_tolerances each line's tolerance (max_atol, max_rtol, required_matched_ratio default 0.99,
                    max_error_cap, allow_negative_inf); SOL-ExecBench's defaults 1e-2 otherwise
    reference       the definition's run, at the declared dtypes
    cost            traced on the meta device (solbench.suites.trace)
    baseline        the reference, eager; compiled: torch.compile of it (needs inductor here)
    a solution      a ``solution*.json`` beside the definition, or ``--solution``: Python, or C++/CUDA
                    built at set-up (solbench.suites.sol_runtime)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError
from solbench.impls.registry import check_defined
from solbench.suites import scale
from solbench.suites.common import one_line, validated
from solbench.suites.kernelbench import sha256
from solbench.suites.sol_runtime import BUILT_LANGUAGES
from solbench.suites.trace import probe
from solbench.workload.cases import build_case
from solbench.workload.expr import ExprError, names
from solbench.workload.schema import DTYPES, Profile, WorkloadSpec

RT = "solbench.suites.sol_runtime"
AXIS_TYPES = ("const", "var", "expr")
INPUT_TYPES = ("random", "scalar", "safetensors", "custom")


def looks_like_problem(path: Path) -> bool:
    """A folder with definition.json (or the definition.json itself)."""
    return (path.is_dir() and (path / "definition.json").is_file()) or path.name == "definition.json"


def read(folder: Path, solutions: list[Path] | None = None) -> WorkloadSpec:
    """The workload of one problem folder (module docstring); ConfigError naming the file otherwise."""
    folder = folder.resolve()
    if folder.name == "definition.json":
        folder = folder.parent
    dpath, wpath = folder / "definition.json", folder / "workload.jsonl"
    d = _json(dpath)
    if not isinstance(d, dict):
        raise ConfigError(f"{dpath}: expected a JSON object")
    for key in ("name", "axes", "inputs", "outputs", "reference"):
        if key not in d:
            raise ConfigError(f"{dpath}: no {key!r} (a SOL-ExecBench definition has name, axes, inputs, outputs, "
                              "reference)")
    if not isinstance(d["reference"], str):
        raise ConfigError(f"{dpath}: reference: expected the reference's Python source, not "
                          f"{type(d['reference']).__name__}")
    check_defined(d["reference"], "run", f"{dpath}:reference")  # what run() would refuse: not found at import
    entry = d.get("custom_inputs_entrypoint")
    if entry is not None:
        if not isinstance(entry, str) or not entry.isidentifier():
            raise ConfigError(f"{dpath}: custom_inputs_entrypoint: expected a function's name, not {entry!r}")
        check_defined(d["reference"], entry, f"{dpath}:reference")
    constants, derived, var = _axes(dpath, d["axes"])
    for group in ("inputs", "outputs"):
        if not isinstance(d[group], dict):
            raise ConfigError(f"{dpath}: {group}: expected an object of {{name: {{shape, dtype}}}}")
        for name, t in d[group].items():
            if not isinstance(t, dict):
                raise ConfigError(f"{dpath}: {group}.{name}: expected an object with shape and dtype")
            if t.get("dtype") not in DTYPES:
                raise ConfigError(f"{dpath}: {group}.{name}.dtype: {t.get('dtype')!r} is not supported "
                                  f"(known: {', '.join(DTYPES)})")
    lines = _lines(wpath)
    cases, tolerances = [], []
    for i, (number, line) in enumerate(lines):
        where = f"{wpath}:{number}"
        axes = line.get("axes", {})
        if not isinstance(axes, dict):
            raise ConfigError(f"{where}: axes: expected an object")
        missing = [a for a in var if a not in axes]
        if missing:
            raise ConfigError(f"{where}: no value for the var axis {missing[0]!r}")
        for a in var:
            if type(axes[a]) is not int:
                raise ConfigError(f"{where}: axes.{a}: a var axis needs an integer value, not {axes[a]!r}")
        _check_described(where, line.get("inputs", {}), d)
        cases.append({"wl": i, **{a: axes[a] for a in var}})
        tolerances.append({"where": {"wl": i}, **_tolerance(where, line.get("tolerance") or {})})
    tensors = {n: {"shape": t["shape"], "dtype": t["dtype"]} for n, t in d["inputs"].items()
               if t.get("shape") is not None}
    outputs = {n: {"shape": t["shape"], "dtype": t["dtype"]} for n, t in d["outputs"].items()}
    floating = [t["dtype"] for t in [*tensors.values(), *outputs.values()]
                if t["dtype"].startswith(("float", "bfloat"))]
    fixed = {"definition": str(dpath)}
    gen = {"definition": str(dpath), "workloads": str(wpath)}
    impls: dict[str, Any] = {
        "baseline": {"fn": f"{RT}:reference", "params": fixed, "description": "the reference, eager"},
        "compiled": {"fn": f"{RT}:compiled_reference", "params": fixed, "requires": ["inductor"],
                     "description": "torch.compile of the reference"},
    }
    skipped = []
    given = solutions if solutions is not None else sorted(folder.glob("solution*.json"))
    for sol in {s.resolve(): s for s in given}.values():  # a file given twice counts once
        named = _definition_of(sol) if solutions is None else None
        if named not in (None, d["name"]):  # found beside the problem, not asked for: left out, and said
            skipped.append(f"{sol.name} skipped: a solution of {named!r}")
            continue
        name, impl = _solution(sol, dpath, d["name"])
        if name in impls:  # one would replace the other (or the baseline): never silently
            raise ConfigError(f"{sol}: name: another implementation of {d['name']!r} is named {name!r} "
                              "(rename the solution)")
        impls[name] = impl
    data = {
        "name": re.sub(r"[^A-Za-z0-9_.\-]", "_", folder.name),
        "description": one_line("; ".join([d.get("description", ""), *skipped]).strip("; ")),
        "constants": constants, "derived": derived, "cases": cases,
        "dtypes": [floating[0] if floating else "float32"],
        "inputs": tensors, "outputs": outputs,
        "input_generator": {"fn": f"{RT}:inputs", "params": gen},
        "reference": f"{RT}:reference", "reference_params": fixed, "reference_dtype": "declared",
        "cost": "traced", "fp32_peak": "torch", "implementations": impls, "case_tolerances": tolerances,
        "source": {"suite": "sol-execbench", "path": str(folder), "sha256": sha256(dpath, wpath)},
    }
    spec = validated(dpath, data)
    return _with_cpu_profile(spec, dpath, cases, [number for number, _ in lines], frozenset(constants) - _sizes(d))


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The workload lines, each with its line number in the file (blank lines are not workloads)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None
    out = []
    for i, raw in enumerate(text.splitlines()):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{i + 1}: not JSON: {exc.msg}") from None
        if not isinstance(line, dict):
            raise ConfigError(f"{path}:{i + 1}: expected a JSON object")
        out.append((i + 1, line))
    if not out:
        raise ConfigError(f"{path}: no workloads")
    return out


def _axes(path: Path, axes: Any) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    if not isinstance(axes, dict):
        raise ConfigError(f"{path}: axes: expected an object")
    constants, derived, var = {}, {}, []
    for name, axis in axes.items():
        kind = axis.get("type") if isinstance(axis, dict) else None
        if kind not in AXIS_TYPES:
            raise ConfigError(f"{path}: axes.{name}: unknown axis type {kind!r} (known: {', '.join(AXIS_TYPES)})")
        if kind == "const":
            constants[name] = axis.get("value")
            if type(constants[name]) is not int:
                raise ConfigError(f"{path}: axes.{name}: a const axis needs an integer value")
        elif kind == "var":
            var.append(name)
        else:
            try:
                names(axis.get("expression", ""))
            except ExprError as exc:
                raise ConfigError(f"{path}: axes.{name}.expression: {exc}") from None
            derived[name] = axis["expression"]
    return constants, derived, var


def _check_described(where: str, described: Any, d: dict[str, Any]) -> None:
    """ConfigError ``where: inputs.<name>...`` for a line's input SOL-ExecBench would refuse: read as
    it was, an unknown type (``safetensor``) or ``custom`` without the definition's
    ``custom_inputs_entrypoint`` drew random inputs, a scalar without a value passed None."""
    if not isinstance(described, dict):
        raise ConfigError(f"{where}: inputs: expected an object")
    for name, desc in described.items():
        kind = desc.get("type") if isinstance(desc, dict) else None
        if kind not in INPUT_TYPES:
            raise ConfigError(f"{where}: inputs.{name}.type: expected one of {', '.join(INPUT_TYPES)}, not {kind!r}")
        if kind == "scalar" and type(desc.get("value")) not in (int, float, bool):
            raise ConfigError(f"{where}: inputs.{name}.value: a scalar input needs a number or true/false, "
                              f"not {desc.get('value')!r}")
        if kind == "safetensors" and not all(isinstance(desc.get(k), str) for k in ("path", "tensor_key")):
            raise ConfigError(f"{where}: inputs.{name}: a safetensors input needs path and tensor_key")
        if kind == "custom" and not d.get("custom_inputs_entrypoint"):
            raise ConfigError(f"{where}: inputs.{name}: a custom input needs the definition's "
                              "custom_inputs_entrypoint")


def _tolerance(where: str, t: Any) -> dict[str, Any]:
    """SOL-ExecBench's tolerance fields (and defaults: 1e-2, 1e-2, 0.99) as solbench's; ConfigError
    ``where: tolerance...`` for one that is not an object of numbers."""
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: tolerance: expected an object")
    for key in ("max_atol", "max_rtol", "required_matched_ratio", "max_error_cap"):
        if t.get(key) is not None and (isinstance(t[key], bool) or not isinstance(t[key], int | float)):
            raise ConfigError(f"{where}: tolerance.{key}: expected a number, not {t[key]!r}")
    out: dict[str, Any] = {"atol": t.get("max_atol", 1e-2), "rtol": t.get("max_rtol", 1e-2),
                           "matched_ratio": t.get("required_matched_ratio", 0.99)}
    if t.get("max_error_cap") is not None:
        out["error_cap"] = t["max_error_cap"]
    if t.get("allow_negative_inf"):
        out["allow_negative_inf"] = True
    return out


def _sizes(d: dict[str, Any]) -> frozenset[str]:
    """Axes that appear in a tensor's shape (the ones worth scaling)."""
    return frozenset(a for g in ("inputs", "outputs") for t in d[g].values() for a in t.get("shape") or []
                     if isinstance(a, str))


def _definition_of(path: Path) -> str | None:
    """The definition a solution file names (None: unreadable or not said; ``_solution`` reports it)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("definition")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _solution(path: Path, dpath: Path, definition: str) -> tuple[str, dict[str, Any]]:
    data = _json(path)
    if not isinstance(data, dict) or not isinstance(data.get("spec"), dict) or "entry_point" not in data["spec"]:
        raise ConfigError(f"{path}: not a SOL-ExecBench solution (no spec.entry_point)")
    _check_solution(path, data)
    if data.get("definition") not in (None, definition):
        raise ConfigError(f"{path}: a solution of {data.get('definition')!r}, not of {definition!r}")
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", str(data.get("name") or path.stem))
    built = set(data["spec"].get("languages") or []) & BUILT_LANGUAGES
    return name, {"fn": f"{RT}:solution", "setup": f"{RT}:prepare", "requires": ["build"] if built else [],
                  "params": {"definition": str(dpath), "solution": str(path.resolve())},
                  "destination": bool(data["spec"].get("destination_passing_style", True)),
                  "description": f"{path.name} ({', '.join(data['spec'].get('languages', []))})"}


def _check_solution(path: Path, data: dict[str, Any]) -> None:
    """ConfigError ``path: field: ...`` for a solution.json field of the wrong type (SOL-ExecBench's
    schema): read as it is, ``languages: "pytorch"`` was seven languages and the solution ``skipped``."""
    spec = data["spec"]
    entry = spec["entry_point"]
    if not isinstance(entry, str) or not re.fullmatch(r"[^:]+::[A-Za-z_]\w*", entry):
        raise ConfigError(f"{path}: spec.entry_point: expected 'file::function', not {entry!r}")
    for key in ("name", "definition"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key}: expected a string, not {data[key]!r}")
    for key in ("languages", "dependencies"):
        value = spec.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{path}: spec.{key}: expected a list of strings, not {value!r}")
    dps = spec.get("destination_passing_style")
    if dps is not None and not isinstance(dps, bool):
        raise ConfigError(f"{path}: spec.destination_passing_style: expected true or false, not {dps!r}")
    sources = data.get("sources")
    if sources is not None and not isinstance(sources, list):
        raise ConfigError(f"{path}: sources: expected a list of {{path, content}}, not {type(sources).__name__}")
    for i, src in enumerate(sources or []):
        if not (isinstance(src, dict) and isinstance(src.get("path"), str) and isinstance(src.get("content"), str)):
            raise ConfigError(f"{path}: sources[{i}]: expected {{path, content}} with string values")


def _with_cpu_profile(spec: WorkloadSpec, dpath: Path, cases: list[dict[str, Any]], numbers: list[int],
                      keep: frozenset[str]) -> WorkloadSpec:
    dtype = spec.dtypes[0]

    def trace(params: dict[str, Any]) -> Any:
        return probe(spec, build_case(spec, params, dtype), None)[1]

    small = []
    for case, number in zip(cases, numbers, strict=True):
        full = {**spec.constants, **case}
        try:
            trace(full)
        except ConfigError as exc:  # the trace's own messages name no file
            raise ConfigError(f"{dpath}: case wl={case['wl']} (workload.jsonl line {number}): {exc}") from None
        except Exception as exc:  # .item(), or a kernel of its own: traced per run on the real device instead
            why = f"{type(exc).__name__}: {one_line(str(exc))}"[:160]
            note = f"no CPU profile (the reference does not run on the meta device: {why})"
            return spec.model_copy(update={"description": one_line(f"{spec.description}; {note}".strip("; "))})
        small.append(scale.scaled(full, trace, keep | {"wl"}))
    if small == [{**spec.constants, **c} for c in cases]:
        return spec
    return spec.model_copy(update={"profiles": {"cpu": Profile(cases=small)}})
