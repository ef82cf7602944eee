"""Result records to finite JSON values and back, every field checked against its declared type.

Encoding turns the non-finite floats JSON has no literal for into the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (``json.dumps(..., allow_nan=False)`` then holds). Decoding
walks the dataclass definitions of :mod:`solbench.results.model` with ``typing.get_type_hints``,
so a field added there is checked here without a change:

    dataclass         a JSON object; missing fields with defaults take them; unknown keys are ignored
    float             a number (an int is widened), or one of the three strings above
    int / str / bool  exactly that JSON type (a bool is not an int)
    Literal[...]      one of the listed values (e.g. a known status)
    X | Y | None      the member matching the value's type; strings stay strings where str is allowed
    tuple[X, ...]     a JSON array;  dict[str, X]: a JSON object

A value of the wrong type raises :class:`DecodeError` with the path of the field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, Literal, Union

NONFINITE: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class DecodeError(ValueError):
    """A value does not match its field's declared type; the message starts with the field's path."""


def encode(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (dicts, lists, numbers, strings) with non-finite floats as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def decode(tp: Any, value: Any, path: str = "") -> Any:
    """``value`` (parsed JSON) as an instance of type ``tp``; DecodeError naming the field otherwise."""
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, path)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        what = "status" if path.endswith("status") else "value"
        raise DecodeError(f"{path}: unknown {what} {_show(value)} (known: {', '.join(map(str, args))})")
    if origin in (Union, types.UnionType):
        return _union(args, value, path)
    if origin is tuple:
        if not isinstance(value, list):
            raise DecodeError(f"{path}: expected a list, got {_kind(value)}")
        item = args[0]
        if item is float:  # sample lists: the hot path
            return tuple(_float(v, f"{path}[{i}]") for i, v in enumerate(value))
        return tuple(decode(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: expected an object, got {_kind(value)}")
        return {decode(args[0], k, f"{path}.{k}"): decode(args[1], v, f"{path}.{k}") for k, v in value.items()}
    return _scalar(tp, value, path)


def _dataclass(cls: Any, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise DecodeError(f"{path or cls.__name__}: expected an object, got {_kind(value)}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in value:
            kwargs[f.name] = decode(hints[f.name], value[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise DecodeError(f"{where}: required field missing")
    try:
        return cls(**kwargs)
    except ValueError as exc:  # a record's own consistency check (e.g. Timing's parallel tuples)
        raise DecodeError(f"{path or cls.__name__}: {exc}") from None


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _union(args: tuple[Any, ...], value: Any, path: str) -> Any:
    if value is None:
        if type(None) in args:
            return None
        raise DecodeError(f"{path}: must not be null")
    members = [a for a in args if a is not type(None)]
    if len(members) == 1:  # X | None: X's own error names the field at fault
        return decode(members[0], value, path)
    exact = [a for a in members if a in (int, float, str, bool) and type(value) is a]
    for member in exact + [a for a in members if a not in exact]:
        if member is float and isinstance(value, str) and str in members:
            continue  # where a string is allowed, a string stays a string
        try:
            return decode(member, value, path)
        except DecodeError:
            continue
    names = " or ".join(getattr(a, "__name__", str(a)) for a in args)
    raise DecodeError(f"{path}: expected {names}, got {_kind(value)} {_show(value)}")


def _scalar(tp: Any, value: Any, path: str) -> Any:
    if tp is float:
        return _float(value, path)
    if tp not in (int, str, bool, type(None)):
        raise DecodeError(f"{path}: cannot read a field of type {tp!r}")
    if type(value) is tp:
        return value
    raise DecodeError(f"{path}: expected {_kind(tp())}, got {_kind(value)} {_show(value)}")


def _float(value: Any, path: str) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise DecodeError(f"{path}: {_show(value)} is too large for a number") from None
    if isinstance(value, str) and value in NONFINITE:
        return NONFINITE[value]
    raise DecodeError(f"{path}: expected a number, got {_kind(value)} {_show(value)}")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _show(value: Any, limit: int = 40) -> str:
    text = repr(value) if not isinstance(value, dict | list) else ("{...}" if isinstance(value, dict) else "[...]")
    return text if len(text) <= limit else text[: limit - 3] + "..."
