"""Load workload files into validated :class:`WorkloadSpec` models.

Pydantic validates the structure; its error locations are mapped back to YAML lines, so a
user sees ``workloads/attn.yaml:14: workloads.0.inputs.x.shape: ...`` and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.config.yamlio import read_yaml
from solbench.errors import ConfigError
from solbench.workload.schema import WorkloadFile, WorkloadSpec


def load_workload_file(path: str | Path) -> tuple[WorkloadSpec, ...]:
    """Read and validate one workload file."""
    doc = read_yaml(Path(path))
    if not isinstance(doc.data, dict):
        raise doc.error([], "expected a mapping with a 'workloads' list")
    try:
        parsed = WorkloadFile.model_validate(doc.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [p for p in first["loc"] if not _is_union_tag(p)]
        raise doc.error(loc, _message(first)) from None
    names = [w.name for w in parsed.workloads]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise doc.error(["workloads", i, "name"], f"duplicate workload name {name!r}")
    return tuple(parsed.workloads)


def workload_json_schema() -> dict[str, Any]:
    """The JSON Schema of a workload file, for editors."""
    schema = WorkloadFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _is_union_tag(part: Any) -> bool:
    # pydantic adds union member tags such as 'str' or 'function-after[...]' to locations
    return isinstance(part, str) and (part in {"str", "int", "float"} or "[" in part)


def _message(error: dict[str, Any]) -> str:
    msg = str(error["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if error["type"] == "extra_forbidden":
        msg = "unknown field"
    elif error["type"] == "missing":
        msg = "required field missing"
    elif "input" in error and error["type"] not in {"missing"} and not isinstance(
        error["input"], dict | list
    ):
        msg = f"{msg} (got {json.dumps(error['input'], default=str)})"
    return msg
