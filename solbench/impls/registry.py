"""Resolve ``module:function`` and ``path/to/file.py:function`` references to callables.

:func:`resolve` imports (runs) the module. :func:`check_reference` verifies a reference without
running any of the user's code: the file exists or the module can be found on ``sys.path``, and
its source defines the name at top level (read with :mod:`ast`).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solbench.errors import ConfigError
from solbench.workload import paths

MAX_SOURCE_BYTES = 16 << 20  # a source file larger than this is not parsed to check a name


class ResolveError(ConfigError, ValueError):
    """A reference cannot be imported or does not name a callable."""


def resolve(ref: str, base_dir: Path | None = None) -> Callable[..., Any]:
    """The callable a reference names.

    ``pkg.mod:fn`` imports a module; ``dir/file.py:fn`` loads a file, relative to ``base_dir``
    (the workload file's folder) first, then to the current directory (``paths.FALLBACK_DIR`` in a worker).
    """
    if ":" not in ref:
        raise ResolveError(f"{ref!r} is not of the form 'module:function' or 'file.py:function'")
    target, _, attr = ref.rpartition(":")
    module = _load_file(target, base_dir) if target.endswith(".py") else _import(target)
    obj = _attribute(module, target, attr)
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
    candidates.append(Path(paths.FALLBACK_DIR, target) if paths.FALLBACK_DIR is not None else Path(target))
    path = next((p.resolve() for p in candidates if p.is_file()), None)
    if path is None:
        raise ResolveError(f"no such file {target!r}")
    name = "solbench_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    try:
        return import_file(path, name)
    except Exception as exc:
        raise ResolveError(f"error importing {path}{_line_in(path, exc)}: {type(exc).__name__}: {exc}") from None


def _line_in(path: Path, exc: BaseException) -> str:
    """``:N``, the line of ``path`` that the import was running when ``exc`` rose (e.g. an ``import`` of a
    module this machine lacks), or "" where no frame of the traceback is in that file."""
    lines = [n for frame, n in traceback.walk_tb(exc.__traceback__) if frame.f_code.co_filename == str(path)]
    return f":{lines[-1]}" if lines else ""


def import_file(path: Path, name: str) -> Any:
    """The Python file ``path`` imported as module ``name``, once per process (kept in
    ``sys.modules``); an import that raises leaves nothing behind and re-raises."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def check_reference(ref: str, base_dir: Path | None = None) -> None:
    """Raise ResolveError unless ``ref`` names a findable module or an existing file whose source
    defines the function at top level; never imports the user's module.

    A top-level name is a ``def``, ``async def``, ``class``, an assignment or an import (also
    inside top-level ``if``/``try``/``with`` blocks). A module with ``from x import *`` or a
    module ``__getattr__`` may define anything, and compiled modules cannot be read: for those
    only the module itself is checked. solbench's own modules are imported and checked exactly.
    """
    target, attr = _split(ref)
    if target.endswith(".py"):
        path = _find_file(target, base_dir)
        check_defined(_read_source(path), attr, str(path))
        return
    if target == "solbench" or target.startswith("solbench."):
        module = _import(target)
        if not callable(_attribute(module, target, attr)):
            raise ResolveError(f"{ref!r} is not callable")
        return
    if target in sys.modules:  # already imported (by solbench or an earlier check): nothing runs
        if not callable(_attribute(sys.modules[target], target, attr)):
            raise ResolveError(f"{ref!r} is not callable")
        return
    try:
        spec = _find_module(target)
    except ResolveError as exc:
        raise ResolveError(f"{exc}{_file_hint(target, attr, base_dir)}") from None
    origin = spec.origin
    if origin is None:
        raise ResolveError(f"module {target!r} is a namespace package: it defines no {attr!r}")
    if origin.endswith(".py"):  # a compiled or built-in module cannot be read without importing it
        check_defined(_read_source(Path(origin)), attr, origin)


def _split(ref: Any) -> tuple[str, str]:
    if not isinstance(ref, str) or ":" not in ref:
        raise ResolveError(f"{ref!r} is not of the form 'module:function' or 'file.py:function'")
    target, _, attr = ref.rpartition(":")
    if not target or not all(part.isidentifier() for part in attr.split(".")):
        raise ResolveError(f"{ref!r} is not of the form 'module:function' or 'file.py:function'")
    return target, attr


def _file_hint(target: str, attr: str, base_dir: Path | None) -> str:
    """Where a module name not found is a Python file in the workload's folder: the reference that names it."""
    rel = target.replace(".", "/") + ".py"
    try:
        beside = base_dir is not None and (base_dir / rel).is_file()
    except (OSError, ValueError):
        return ""
    return f"; {base_dir} holds {rel}: did you mean '{rel}:{attr}'?" if beside else ""


def _find_file(target: str, base_dir: Path | None) -> Path:
    candidates = [base_dir / target] if base_dir is not None else []
    candidates.append(Path(paths.FALLBACK_DIR, target) if paths.FALLBACK_DIR is not None else Path(target))
    try:
        found = next((p for p in candidates if p.is_file()), None)
        folder = next((p for p in candidates if p.is_dir()), None)
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise ResolveError(f"no such file {target!r}: {exc}") from None
    if found is None and folder is not None:
        raise ResolveError(f"{folder} is a directory, not a Python file")
    if found is None:
        where = f" (looked in {base_dir} and the current directory)" if base_dir is not None else ""
        raise ResolveError(f"no such file {target!r}{where}")
    return found


def _find_module(name: str) -> Any:
    """The module spec of ``name``, found without importing it or its parent packages."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        raise ResolveError(f"{name!r} is not a module name")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None:
                break
            locations = spec.submodule_search_locations
            if locations is None:
                raise ResolveError(f"cannot find module {name!r}: {'.'.join(parts[:i])} is not a package")
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), list(locations))
    except ResolveError:
        raise
    except (ImportError, ValueError) as exc:
        raise ResolveError(f"cannot find module {name!r}: {exc}") from None
    if spec is None:
        raise ResolveError(f"cannot find module {name!r} (not installed, or not on sys.path)")
    return spec


def _read_source(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise ResolveError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes; not a source file")
        return importlib.util.decode_source(path.read_bytes())
    except OSError as exc:
        raise ResolveError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, SyntaxError) as exc:
        raise ResolveError(f"{path}: cannot decode the source: {exc}") from None


def check_defined(source: str, attr: str, where: str) -> None:
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as exc:
        raise ResolveError(f"{where}:{exc.lineno}: syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ResolveError(f"{where}: cannot parse: {type(exc).__name__}") from None
    defined, open_ended = _top_level(tree.body)
    first, *rest = attr.split(".")
    if first not in defined:
        if open_ended:
            return
        close = difflib.get_close_matches(first, sorted(defined), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ResolveError(f"{where} defines no {first!r} at top level{hint}")
    node = defined[first]
    if not rest and _literal_only(tree.body, first):
        raise ResolveError(f"{where}: {first!r} is bound only to a literal value, not to something callable")
    if rest and isinstance(node, ast.ClassDef):
        members, open_members = _top_level(node.body)
        if rest[0] not in members and not open_members and not node.bases:
            raise ResolveError(f"class {first} in {where} defines no {rest[0]!r}")


_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr, ast.ListComp, ast.DictComp)


def _literal_only(body: list[ast.stmt], name: str) -> bool:
    """Whether every top-level statement binding ``name`` assigns it a literal (a number, a string,
    a list...): then it cannot be called. Anything else (a def, an import, a call) may be."""
    bindings = []
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return False
        if isinstance(node, ast.Import | ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return False
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                bindings.append(node.value)
            elif any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return False  # unpacked: the value is not visible here
        elif not isinstance(node, ast.Expr) and any(
                isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(node)):
            return False  # bound inside if/try/with/for: not judged
    return bool(bindings) and all(isinstance(v, _LITERALS) for v in bindings)


def _top_level(body: list[ast.stmt]) -> tuple[dict[str, ast.AST], bool]:
    """Names a block of statements binds (descending into if/try/with blocks), and whether it may
    bind others too (a star import or a module ``__getattr__``)."""
    defined: dict[str, ast.AST] = {}
    open_ended = False
    pending = list(body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined[node.name] = node
            open_ended |= node.name == "__getattr__"
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defined.setdefault(name.id, node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    open_ended = True
                else:
                    defined.setdefault(alias.asname or alias.name.split(".")[0], node)
        elif isinstance(node, ast.If | ast.With | ast.AsyncWith | ast.For | ast.While):
            pending += [*node.body, *getattr(node, "orelse", [])]
        elif isinstance(node, ast.Try | ast.TryStar):
            pending += [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
    return defined, open_ended


def _attribute(module: Any, target: str, attr: str) -> Any:
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            close = difflib.get_close_matches(part, [n for n in dir(obj) if not n.startswith("_")], n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ResolveError(f"{target} has no attribute {attr!r}{hint}")
        obj = getattr(obj, part)
    return obj
