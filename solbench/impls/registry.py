"""Resolve ``module:function`` and ``path/to/file.py:function`` references to callables."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ResolveError(ValueError):
    """A reference cannot be imported or does not name a callable."""


def resolve(ref: str, base_dir: Path | None = None) -> Callable[..., Any]:
    """The callable a reference names.

    ``pkg.mod:fn`` imports a module; ``dir/file.py:fn`` loads a file, relative to ``base_dir``
    (the workload file's folder) first, then to the current directory.
    """
    if ":" not in ref:
        raise ResolveError(f"{ref!r} is not of the form 'module:function' or 'file.py:function'")
    target, _, attr = ref.rpartition(":")
    module = _load_file(target, base_dir) if target.endswith(".py") else _import(target)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ResolveError(f"{target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ResolveError(f"{ref!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ResolveError(f"cannot import {name!r}: {exc}") from None


def _load_file(target: str, base_dir: Path | None) -> Any:
    candidates = [base_dir / target] if base_dir is not None else []
    candidates.append(Path(target))
    path = next((p.resolve() for p in candidates if p.is_file()), None)
    if path is None:
        raise ResolveError(f"no such file {target!r}")
    name = "solbench_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ResolveError(f"error importing {path}: {type(exc).__name__}: {exc}") from None
    return module
