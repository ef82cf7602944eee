"""Load workload files into validated :class:`WorkloadSpec` models.

Pydantic validates the structure; its error locations are mapped back to YAML lines, so a
user sees ``workloads/attn.yaml:14: workloads.0.inputs.x.shape: ...`` and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.config.yamlio import YamlDocument, read_yaml
from solbench.errors import ConfigError
from solbench.impls.registry import ResolveError, check_reference
from solbench.workload.expr import ExprError
from solbench.workload.expr import names as expr_names
from solbench.workload.ops import FLAG_FIELDS, NAME_FIELDS
from solbench.workload.schema import WorkloadFile, WorkloadSpec


def load_workload_file(path: str | Path) -> tuple[WorkloadSpec, ...]:
    """Read and validate one workload file."""
    if str(path).endswith((".json", ".json.gz")) and Path(path).is_file():
        from solbench.results.store import is_run_file

        if is_run_file(Path(path)):  # else it reads as YAML with an "unknown field 'created'"
            raise ConfigError(f"{path}: a saved run, not a workload file (see it with: solbench show {path})")
    doc = read_yaml(Path(path))
    if not isinstance(doc.data, dict):
        raise doc.error([], "expected a mapping with a 'workloads' list")
    try:
        parsed = WorkloadFile.model_validate(doc.data)
    except ValidationError as exc:
        raise doc.validation_error(exc.errors()[0]) from None
    for i, spec in enumerate(parsed.workloads):
        _check_names(doc, i, spec)
    names = [w.name for w in parsed.workloads]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise doc.error(["workloads", i, "name"], f"duplicate workload name {name!r}")
    return tuple(parsed.workloads)


def validate_references(path: str | Path, specs: Sequence[WorkloadSpec],
                        include: Callable[[str, str], bool] | None = None) -> None:
    """Check every reference of a loaded workload file without running user code.

    ``specs`` is what :func:`load_workload_file` returned for ``path`` (all of them, in file
    order, so that errors name the right line). The reference and input generator of each workload
    are always checked; each implementation's ``fn`` and ``setup`` when ``include(workload_name,
    impl_name)`` is true (default: all). File references are relative to the workload file's folder,
    then to the current directory, as at run time. Raises a ConfigError ``file:line: field: message``.
    """
    path = Path(path)
    for i, spec in enumerate(specs):
        refs: list[tuple[list[str | int], str]] = [(["reference"], spec.reference)]
        if spec.input_generator is not None:
            refs.append((["input_generator", "fn"], spec.input_generator.fn))
        for name, impl in spec.implementations.items():
            if include is None or include(spec.name, name):
                refs.append((["implementations", name, "fn"], impl.fn))
                if impl.setup is not None:
                    refs.append((["implementations", name, "setup"], impl.setup))
        for loc, ref in refs:
            try:
                check_reference(ref, path.parent)
            except ResolveError as exc:
                raise read_yaml(path).error(["workloads", i, *loc], str(exc)) from None


def located_in(path: str | Path, workload: str, loc: Sequence[str | int], message: str) -> str:
    """``message`` at ``loc`` of workload ``workload`` of the file ``path``, one line as a ConfigError
    names a field (``file:line: field: message``), for what goes wrong after planning (an
    implementation whose import fails in a worker); ``message`` alone where ``path`` is not a YAML
    file (a suite's problem) or no longer has the workload."""
    if Path(path).suffix not in (".yaml", ".yml"):
        return message
    try:
        doc = read_yaml(Path(path))
    except ConfigError:
        return message
    listed = doc.data.get("workloads") if isinstance(doc.data, dict) else None
    names = [w.get("name") if isinstance(w, dict) else None for w in listed or []]
    return str(doc.error(["workloads", names.index(workload), *loc], message)) if workload in names else message


def workload_json_schema() -> dict[str, Any]:
    """The JSON Schema of a workload file, for editors.

    Pydantic describes the models as they are once validated; the loader also takes a few shorter
    forms that its "before" validators rewrite (:mod:`solbench.workload.schema`), which the schema must
    take too, or an editor underlines the README's example and every shipped file: an implementation or
    an ``input_generator`` written as its ``module:function`` string, an op's flag (``bias``,
    ``batched_b``, ``causal``) as true/false, a ``gate_threshold`` as a percent ('5%'), and the top-level
    ``x-`` keys that hold YAML anchors."""
    schema = WorkloadFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    defs = schema["$defs"]
    ref = {"type": "string", "description": "module:function or file.py:function"}
    spec = defs["WorkloadSpec"]["properties"]
    impls = spec["implementations"]["patternProperties"]
    for name, impl in impls.items():
        impls[name] = {"anyOf": [impl, {**ref, "description": "the implementation's fn alone (module:function or "
                                                              "file.py:function)"}]}
    spec["input_generator"]["anyOf"].insert(1, {**ref, "description": "the generator's fn alone"})
    spec["gate_threshold"]["anyOf"].insert(1, {"type": "string", "pattern": r"^\s*[0-9.]+\s*%\s*$"})
    for flag in FLAG_FIELDS:
        defs["Op"]["properties"][flag]["anyOf"].insert(0, {"type": "boolean"})
    schema["patternProperties"] = {"^x-": {}}  # ignored by the loader; additionalProperties stays false
    return schema


def _check_names(doc: YamlDocument, index: int, spec: WorkloadSpec) -> None:
    """Every expression may only name parameters, constants, ``dtype`` or (with ranks) ``world_size``, and only
    where they are numbers."""
    known = set(spec.parameters) | set(spec.constants) | set(spec.derived) | {"dtype"}
    if spec.world_size > 1:  # every case of a multi-rank workload has it (cases.build_case)
        known.add("world_size")
    values: list[tuple[str, Any]] = [(k, v) for k, vs in spec.parameters.items() for v in vs]
    values += [*spec.constants.items(), *(("dtype", d) for d in spec.dtypes)]
    for case in spec.cases or []:
        known |= set(case)
        values += case.items()
    for profile in spec.profiles.values():
        known |= set(profile.parameters or {}) | {k for c in profile.cases or [] for k in c}
        values += [(k, v) for k, vs in (profile.parameters or {}).items() for v in vs]
        values += [item for c in profile.cases or [] for item in c.items()]
    text = dict(reversed([(k, v) for k, v in values if isinstance(v, str)]))  # a name -> its first text value
    for loc, expr in _expressions(spec):
        try:
            used = expr_names(expr)
        except ExprError as exc:
            raise doc.error(["workloads", index, *loc], str(exc)) from None
        unknown = sorted(used - known)
        if unknown:
            raise doc.error(["workloads", index, *loc],
                            f"unknown parameter {unknown[0]!r} (known: {', '.join(sorted(known))})")
        words = sorted(used & set(text))
        if words:
            raise doc.error(["workloads", index, *loc], f"{words[0]!r} is {text[words[0]]!r} in some case, "
                            "not a number (an expression computes with numbers only)")


def _expressions(spec: WorkloadSpec) -> list[tuple[list[str | int], Any]]:
    found: list[tuple[list[str | int], Any]] = []
    for group, tensors in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        for name, t in tensors.items():
            found += [([group, name, "shape", j], d) for j, d in enumerate(t.shape or [])]
            found += [([group, name, "std"], t.std), ([group, name, "mean"], t.mean)]
    for j, op in enumerate(spec.ops):
        found += [(["ops", j, key], value) for key, value in op.sizes().items() if key not in NAME_FIELDS]
    found += [(["derived", name], expr) for name, expr in spec.derived.items()]
    found += [([key], value) for key, value in (("flops", spec.flops), ("bytes", spec.bytes))
              if value is not None]
    return found


def write_workload_file(path: str | Path, specs: Sequence[WorkloadSpec], header: str = "") -> None:
    """Write workloads as a workload file (defaults left out), atomically, as solbench writes its records
    (:func:`solbench.results.store.write_text`: ResultsWriteError where it cannot); ``header`` becomes comments."""
    import yaml

    from solbench.results import store

    data = {"workloads": [s.model_dump(mode="json", exclude_defaults=True) for s in specs]}
    text = "".join(f"# {line}\n" for line in header.splitlines()) + yaml.safe_dump(data, sort_keys=False, width=110)
    store.write_text(Path(path), text)
