"""YAML reading that keeps line numbers, so errors can say ``file:line: field: problem``.

The text is composed into a node tree by PyYAML's safe loader (pure Python, so that a deep
document raises an error here instead of overflowing the C stack), checked, then constructed:

    size       at most MAX_BYTES of UTF-8 text (a BOM is allowed)
    depth      at most MAX_DEPTH nested lists/mappings, counted through aliases
    aliases    at most MAX_NODES nodes once every alias is expanded ("billion laughs"), no cycles
    keys       no key twice in one mapping (``<<`` merges may still be overridden)

Each refusal is a one-line ConfigError naming the file and line. The node tree maps a path of
keys and indices back to its line for later errors.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from solbench.errors import ConfigError

MAX_BYTES = 1 << 20  # a workload or spec file is a few KiB; 1 MiB leaves a wide margin
MAX_DEPTH = 40  # workload files nest about 7 deep
MAX_NODES = 200_000  # nodes after alias expansion: 10,000 explicit cases of ~15 values
_MERGE = "tag:yaml.org,2002:merge"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"


class _Refused(yaml.YAMLError):
    """A document refused before construction (too deep, too large, duplicate key)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Loader(yaml.SafeLoader):
    """The safe loader with a nesting limit while composing and a record of the node under construction."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self.current: yaml.Node | None = None

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        self.current = node
        return super().construct_object(node, deep)


class YamlDocument:
    """A parsed YAML file with a way to find the line of any path in it."""

    def __init__(self, path: Path, data: Any, root: yaml.Node | None) -> None:
        self.path = path
        self.data = data
        self._root = root

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        """1-based line of the deepest node along ``loc`` that exists."""
        node = self._root
        line = node.start_mark.line + 1 if node is not None else None
        for key in loc:
            mark = None
            if isinstance(node, yaml.MappingNode):  # a field is on its key's line
                # the last pair holding the key: construction put the pairs a ``<<`` merge brings before the
                # mapping's own (PyYAML's flatten_mapping), and a later key overrides an earlier one
                pair = next(((k, v) for k, v in reversed(node.value) if k.value == str(key)), None)
                if pair is not None:
                    mark, node = pair[0].start_mark, pair[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                node = node.value[key]
                mark = node.start_mark
            if mark is None:
                break
            line = mark.line + 1
        return line

    def validation_error(self, error: Mapping[str, Any], message: str | None = None) -> ConfigError:
        """A ConfigError for one pydantic error (``ValidationError.errors()`` item) in this file."""
        loc = [p for p in error["loc"] if not _is_validator_tag(p)]
        ctx = error.get("ctx") or {}
        if error["type"] in ("unknown_field", "bad_field") and "field" in ctx:
            field = ctx["field"]  # raised by the model holding the field: name the field itself (or its path)
            loc += list(field) if isinstance(field, tuple) else [field]
        return self.error(loc, message or validation_message(error))

    def error(self, loc: Sequence[str | int], message: str) -> ConfigError:
        """A one-line ConfigError naming the file, the line and the field."""
        line = self.line_of(loc)
        where = f"{self.path}:{line}" if line else str(self.path)
        field = ".".join(cut(str(p), 40) for p in loc)
        return ConfigError(one_line(f"{where}: {field}: {message}" if field else f"{where}: {message}", 600))


YAML_SUFFIXES = (".yaml", ".yml")


def yaml_files(folder: Path) -> list[Path]:
    """The YAML files of a folder (``.yaml`` and ``.yml`` alike: a user names them either way), in
    name order."""
    return sorted(p for p in folder.iterdir() if p.suffix in YAML_SUFFIXES and p.is_file())


def read_yaml(path: Path) -> YamlDocument:
    """Read a YAML file safely; every problem with the file itself is a one-line ConfigError."""
    text = _read_text(Path(path))
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # checks the characters first
        root = loader.get_single_node()
        if root is not None:
            _check_tree(root)
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = f":{mark.line + 1}"
        elif isinstance(exc, yaml.reader.ReaderError):  # a control character: no mark, only its position
            line = ":" + str(text.count("\n", 0, exc.position) + 1)
        else:
            line = ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line}: invalid YAML: {one_line(problem)}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # e.g. date 2024-13-45
        node = loader.current if loader is not None else None
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        raise ConfigError(f"{path}{line}: invalid YAML value: {one_line(str(exc))}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return YamlDocument(path, data, root)


def _read_text(path: Path) -> str:
    try:
        if path.is_fifo() or path.is_socket():  # opening one waits for a writer: refuse, never hang
            raise ConfigError(f"{path}: not a regular file (a pipe or a socket)")
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)  # bounded: a device file or a huge file is not read whole
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path}: larger than the {MAX_BYTES} bytes a YAML file may have")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start})") from None


def _check_tree(root: yaml.Node) -> None:
    """Refuse alias cycles, alias expansion past MAX_NODES or MAX_DEPTH, and duplicate keys.

    One pass over the node graph, each node visited once (aliases share nodes), so a
    "billion laughs" document is measured in time linear in its text, never expanded.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_NODES:
                raise _Refused(f"expands to more than {MAX_NODES} values (alias bomb?)", node.start_mark)
            if depth[key] > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep once aliases are expanded",
                               node.start_mark)
            continue
        if key in size:
            continue
        on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            _check_keys(node)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _Refused("an alias refers to a node that contains it (recursive alias)", child.start_mark)
            if id(child) not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_keys(node: yaml.MappingNode) -> None:
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE:
            continue
        if key.tag in (_BOOL, _NULL) and not key.style:  # a name YAML 1.1 reads as True, False or None
            raise _Refused(f"the key {short(key.value)} reads as {'None' if key.tag == _NULL else 'a boolean'} "
                           f"in YAML, not as a name: quote it ('{key.value}')", key.start_mark)
        ident = (key.tag, key.value)
        if ident in seen:
            raise _Refused(f"duplicate key {short(key.value)} (first at line {seen[ident]})", key.start_mark)
        seen[ident] = key.start_mark.line + 1


def validation_message(error: Mapping[str, Any]) -> str:
    """A short message for one pydantic error: "unknown field", "required field missing", or
    pydantic's text with the offending value."""
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field missing"
    msg = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if error["type"] in ("unknown_field", "bad_field") or isinstance(value, dict | list):
        return msg
    hint = _exponent_hint(value) if str(error["type"]).startswith("float") else _literal_hint(error, value)
    return f"{msg} (got {short(value)}{hint})"


# How people write dtypes for short (bf16, fp32, ...), against the names a workload takes
_SHORT_DTYPES = {"fp64": "float64", "double": "float64", "fp32": "float32", "f32": "float32", "float": "float32",
                 "bf16": "bfloat16", "fp16": "float16", "f16": "float16", "half": "float16", "fp8": "float8_e4m3fn",
                 "e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
                 "fp8_e5m2": "float8_e5m2", "fp4": "float4_e2m1fn_x2"}


def _literal_hint(error: Mapping[str, Any], value: Any) -> str:
    """"; did you mean 'bfloat16'?" for a value that is not one of a field's names: the name a short form
    (bf16, fp32) stands for, else the closest name; "" where none is close."""
    if error["type"] != "literal_error" or not isinstance(value, str):
        return ""
    expected = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
    guess = _SHORT_DTYPES.get(value.strip().lower())
    if guess not in expected:
        close = difflib.get_close_matches(value, expected, n=1, cutoff=0.6)
        guess = close[0] if close else None
    return f"; did you mean {guess!r}?" if guess else ""


def _exponent_hint(value: Any) -> str:
    """How to write a number YAML 1.1 read as text, such as 1e300 or 1.0e300 (its floats need a dot and a
    signed exponent): "; YAML reads it as text: write 1.0e+300"; "" for any other value."""
    m = re.fullmatch(r"([-+]?)(\d*)\.?(\d*)[eE]([-+]?)(\d+)", value.strip()) if isinstance(value, str) else None
    if m is None or not (m[2] or m[3]):
        return ""
    sign, whole, frac, exp_sign, exp = m.groups()
    return f"; YAML reads it as text: write {sign}{whole or 0}.{frac or 0}e{exp_sign or '+'}{exp}"


def short(value: Any, limit: int = 60) -> str:
    """``repr`` of a value, cut to ``limit`` characters (a key or value in a message)."""
    return cut(repr(value), limit)


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit - 3`` characters and "..." when longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str, limit: int = 400) -> str:
    """A message on one line (newlines and runs of blanks become one space), at most ``limit`` long."""
    return cut(" ".join(text.split()), limit)


def _is_validator_tag(part: Any) -> bool:
    # pydantic adds union members and validators ('str', 'function-after[...]') to locations
    return isinstance(part, str) and (part in {"str", "int", "float"} or "[" in part)
