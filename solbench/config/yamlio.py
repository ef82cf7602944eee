"""YAML reading that keeps line numbers, so errors can say ``file:line: field: problem``.

Data is read with ``yaml.safe_load``; the same text is composed into a node tree
(``yaml.compose``, also safe) that maps a path of keys and indices to its line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from solbench.errors import ConfigError


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
            if isinstance(node, yaml.MappingNode):
                nxt = next((v for k, v in node.value if k.value == str(key)), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
                nxt = node.value[key] if 0 <= key < len(node.value) else None
            else:
                nxt = None
            if nxt is None:
                break
            node = nxt
            line = node.start_mark.line + 1
        return line

    def validation_error(self, error: Mapping[str, Any], message: str | None = None) -> ConfigError:
        """A ConfigError for one pydantic error (``ValidationError.errors()`` item) in this file."""
        loc = [p for p in error["loc"] if not _is_validator_tag(p)]
        return self.error(loc, message or validation_message(error))

    def error(self, loc: Sequence[str | int], message: str) -> ConfigError:
        """A one-line ConfigError naming the file, the line and the field."""
        line = self.line_of(loc)
        where = f"{self.path}:{line}" if line else str(self.path)
        field = ".".join(str(p) for p in loc)
        return ConfigError(f"{where}: {field}: {message}" if field else f"{where}: {message}")


def read_yaml(path: Path) -> YamlDocument:
    """Read a YAML file safely; a missing file or a syntax error is a one-line ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{line}: invalid YAML: {problem}") from None
    return YamlDocument(path, data, root)


def validation_message(error: Mapping[str, Any]) -> str:
    """A short message for one pydantic error: "unknown field", "required field missing", or
    pydantic's text with the offending value."""
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field missing"
    msg = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    return msg if isinstance(value, dict | list) else f"{msg} (got {value!r})"


def _is_validator_tag(part: Any) -> bool:
    # pydantic adds union members and validators ('str', 'function-after[...]') to locations
    return isinstance(part, str) and (part in {"str", "int", "float"} or "[" in part)
