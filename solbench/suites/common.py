"""Helpers the suite readers share: a validated workload, one-line messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.errors import ConfigError
from solbench.workload.schema import WorkloadSpec


def validated(path: Path, data: dict[str, Any]) -> WorkloadSpec:
    """``data`` as a WorkloadSpec; ConfigError ``path: field: message`` where it does not fit."""
    try:
        return WorkloadSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{path}: cannot be read as a workload: {loc}: {one_line(err['msg'])}") from None


def one_line(text: str, limit: int = 300) -> str:
    """The first line of ``text``, cut to ``limit`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."
