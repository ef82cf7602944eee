"""Messages from a worker to its parent: data only (JSON text), checked field by field on receipt.

The parent trusts itself, not its workers: a worker runs an implementation that may read
solbench's source, find its pipe and write anything to it. So nothing a worker sends is ever
unpickled by the parent. Each message is one JSON object sent with ``Connection.send_bytes``
and read in the same framing, with a deadline (:class:`Frames`)::

    {"kind": "ready", "pid": int}                          the worker is up
    {"kind": "progress", "event": "sample", "data": {"n": int}}    samples taken so far
    {"kind": "progress", "event": "phase", "data": {"phase": str}} what a rank is doing
    {"kind": "value", "i": int, "s": float, "v": bool}     timed sample i (seconds), taken just now;
                                                           v: a verification follows it
    {"kind": "turn"}                                       a held task (Task.wait_turn) is set up and
                                                           checked; it waits for the parent's "go"
    {"kind": "timed"}                                      a task held for its checks after timing
                                                           (Task.wait_checks) has timed; it waits for
                                                           the parent's "go" again
    {"kind": "result", "result": {ImplResult}, "fatal": bool}

Floats that JSON has no literal for travel as the strings "NaN"/"Infinity"/"-Infinity"
(:mod:`solbench.results.codec`); the result is decoded against the ImplResult dataclass, field
by field, so a wrong type, an unknown status or an unknown key shape is :class:`BadMessage`.
A message over ``MAX_MESSAGE_BYTES``, bytes that are not UTF-8 JSON, an object of the wrong
shape, nesting deeper than the records have: all :class:`BadMessage`, which the parent turns
into ``reward_hack`` and a killed worker (:mod:`solbench.measure.pool`).
A task's deadline is one for hangs, not for a message under way: a worker's message (a result with
its samples, up to ``MAX_MESSAGE_BYTES``) moves only as the parent reads it, and the parent may get
to it late (it reads held tasks' results one after another) or the deadline may pass while it comes.
So past the deadline a message under way is read on for as long as its bytes keep coming: no pause
over ``STALL_S``, ``FINISH_S`` in all from the parent's first read of it past the deadline (16 MiB
crosses a pipe in well under a second); no message begun after the deadline is read (of a worker's,
what it had sent by then: :meth:`~solbench.measure.pool.ProcessWorker.wait`; of a rank group's, the
messages its ranks had begun: :mod:`solbench.execute.group`). One not whole by then
(a worker that wrote part of one and stopped, or trickles it) is :class:`Incomplete`: a hang, which
the parent turns into ``timeout``, at most ``STALL_S`` past the deadline for a worker that stopped.

The other direction (parent to worker: the Task, "go" to a held task, None to stop) stays a pickle: the worker
unpickles what its trusted parent sent. A Ray actor (:mod:`solbench.execute.ray_cluster`) runs
only solbench's code and its own workers through this pipe; it still returns each result to the
driver as message text (:func:`result_text`), which the driver checks the same way.

What the parent then checks against what it saw itself is :mod:`solbench.measure.watch`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import time
from multiprocessing.connection import Connection
from typing import Any

from solbench.results.codec import DecodeError, decode, encode
from solbench.results.model import ImplResult

MAX_MESSAGE_BYTES = 16 << 20  # a result of 100k samples with clock readings is ~10 MB
MAX_TEXT_CHARS = 4096  # an ImplResult's message: longer ones are cut (the worker's log keeps the rest)
_MAX_PROGRESS_TEXT = 200
READ_BYTES = 1 << 20  # the most one read takes off the pipe (a pipe holds less, a result up to MAX_MESSAGE_BYTES)
STALL_S = 2.0  # past the deadline, the longest pause in the bytes of a message begun (a busy host's scheduling)
FINISH_S = 10.0  # past the deadline, the longest a message begun has to end, from the parent's first read then
_POLL_S = 60.0  # the longest one poll waits for bytes (Frames.read polls again until its deadline)
_LONG = struct.pack("!i", -1)  # Connection.send_bytes's length of a message over 2 GiB: 8 bytes of length follow


class BadMessage(Exception):
    """A worker sent something that is not a well-formed message: it is not to be trusted."""


class Incomplete(Exception):
    """A worker began a message and had not sent all of it by the deadline."""


def send(conn: Connection, kind: str, **fields: Any) -> None:
    """Send one message (worker side)."""
    conn.send_bytes(json.dumps({"kind": kind, **encode(fields)}, allow_nan=False).encode())


def send_result(conn: Connection, result: ImplResult, fatal: bool) -> None:
    """Send a task's result (worker side)."""
    send(conn, "result", result=dataclasses.asdict(result), fatal=fatal)


def result_text(result: ImplResult) -> str:
    """A result as message text (a Ray actor returns this to the driver, not the object)."""
    return json.dumps({"kind": "result", **encode({"result": dataclasses.asdict(result), "fatal": False})},
                      allow_nan=False)


def result_from_text(text: Any) -> ImplResult:
    """The result in ``result_text`` output, checked as any message; BadMessage otherwise."""
    if not isinstance(text, str):
        raise BadMessage(f"a {type(text).__name__}, not message text")
    msg = parse(text.encode())
    if msg["kind"] != "result":
        raise BadMessage(f"a {msg['kind']!r} message, not a result")
    return msg["result"]  # type: ignore[no-any-return]


class Frames:
    """A worker's messages, read off its pipe (parent side) in ``Connection.send_bytes``'s framing (a
    4-byte big-endian length, or -1 and an 8-byte one over 2 GiB; then the message) as the bytes
    come (poll, then ``os.read``), never waiting past a deadline (and the grace of a message under
    way, see the module docstring): a worker that sends part of a message and stops holds the parent
    no longer than that. ``taken``: the bytes of the pipe in the messages read so far (where the next
    one begins); ``pulled``: those read off it (``taken``, and what came of the next message: kept
    for the next :meth:`read`)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._begun = bytearray()  # the next message as far as it came: its length, then its bytes
        self._last = 0.0  # when its last bytes came (or its grace began)
        self._finish_by: float | None = None  # past the deadline, when its grace ends (once it began)
        self.taken = 0
        self.pulled = 0

    def read(self, deadline: float | None) -> bytes:
        """The next message's bytes, unchecked (:func:`parse` checks them). :class:`Incomplete` where
        not all of it is here by ``deadline`` and its grace (:meth:`wait_s`; what came is kept), or
        with ``deadline`` None, where it is not here now (no wait at all); :class:`BadMessage` for a
        length over ``MAX_MESSAGE_BYTES`` (or a corrupt length header), before any of the message is
        read; EOFError, or OSError in the middle of a message, when the pipe is closed, as
        ``Connection.recv_bytes``."""
        while (missing := self._missing()) > 0:
            wait_s = 0.0 if deadline is None else self.wait_s(deadline)
            if not self._conn.poll(min(wait_s, _POLL_S)):  # poll takes no more than 2**31 ms at once
                if wait_s > 0:  # waited: there may be more to wait (a longer time, or past the deadline the grace)
                    continue
                raise Incomplete(f"{len(self._begun)} bytes of a message, {missing} more to come")
            chunk = os.read(self._conn.fileno(), min(missing, READ_BYTES))
            if not chunk:
                if self._begun:
                    raise OSError("got end of file during message")
                raise EOFError
            self._begun += chunk
            self._last = time.monotonic()
            self.pulled += len(chunk)
        raw = bytes(self._begun[12 if self._begun[:4] == _LONG else 4:])
        self._begun.clear()
        self._finish_by = None
        self.taken = self.pulled
        return raw

    def wait_s(self, deadline: float) -> float:
        """How long to wait now for the next bytes: until ``deadline``; past it, for a message begun, while
        its bytes keep coming: ``STALL_S`` after the last, ``FINISH_S`` after the first call past the
        deadline (which starts its grace) at most; 0 past it with nothing begun."""
        now = time.monotonic()
        if now < deadline:
            return deadline - now
        if not self._begun:
            return 0.0
        if self._finish_by is None:
            self._finish_by, self._last = now + FINISH_S, now
        return max(min(self._last + STALL_S, self._finish_by) - now, 0.0)

    def _missing(self) -> int:
        """How many more bytes the next message needs to be whole (0: it is)."""
        begun = self._begun
        if len(begun) < 4:
            return 4 - len(begun)
        (size,), head = struct.unpack_from("!i", begun), 4
        if begun[:4] == _LONG:
            if len(begun) < 12:
                return 12 - len(begun)
            (size,), head = struct.unpack_from("!Q", begun, 4), 12
        if not 0 <= size <= MAX_MESSAGE_BYTES:
            raise BadMessage(f"a message over {MAX_MESSAGE_BYTES} bytes (or a corrupt length header)")
        return head + size - len(begun)


def parse(raw: bytes) -> dict[str, Any]:
    """One message's bytes as a checked message (see the module docstring)."""
    if len(raw) > MAX_MESSAGE_BYTES:
        raise BadMessage(f"a message over {MAX_MESSAGE_BYTES} bytes")
    try:
        msg = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadMessage(f"not a JSON message ({type(exc).__name__})") from None
    if not isinstance(msg, dict):
        raise BadMessage("a message that is not a JSON object")
    kind = msg.get("kind")
    check = _CHECKS.get(kind) if isinstance(kind, str) else None
    if check is None:
        raise BadMessage(f"a message of unknown kind {str(kind)[:40]!r}")
    return check(msg)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _keys(msg: dict[str, Any], *names: str) -> None:
    if set(msg) != {"kind", *names}:
        raise BadMessage(f"a {msg['kind']!r} message with fields {sorted(msg)} (expected {sorted(['kind', *names])})")


def _ready(msg: dict[str, Any]) -> dict[str, Any]:
    _keys(msg, "pid")
    if type(msg["pid"]) is not int:
        raise BadMessage("a 'ready' message whose pid is not an integer")
    return msg


def _progress(msg: dict[str, Any]) -> dict[str, Any]:
    _keys(msg, "event", "data")
    event, data = msg["event"], msg["data"]
    if event == "sample" and isinstance(data, dict) and set(data) == {"n"} and type(data["n"]) is int:
        return msg
    if (event == "phase" and isinstance(data, dict) and set(data) == {"phase"} and type(data["phase"]) is str
            and len(data["phase"]) <= _MAX_PROGRESS_TEXT):
        return msg
    raise BadMessage(f"a malformed progress message ({str(event)[:40]!r})")


def _value(msg: dict[str, Any]) -> dict[str, Any]:
    _keys(msg, "i", "s", "v")
    if type(msg["i"]) is not int or type(msg["v"]) is not bool:
        raise BadMessage("a malformed sample message")
    try:
        msg["s"] = decode(float, msg["s"], "s")
    except DecodeError as exc:
        raise BadMessage(f"a sample that is not a number ({exc})") from None
    return msg


def _bare(msg: dict[str, Any]) -> dict[str, Any]:
    _keys(msg)
    return msg


def _result(msg: dict[str, Any]) -> dict[str, Any]:
    _keys(msg, "result", "fatal")
    if type(msg["fatal"]) is not bool:
        raise BadMessage("a result whose 'fatal' is not a boolean")
    try:
        result = decode(ImplResult, msg["result"], "result")
    except (DecodeError, RecursionError) as exc:
        raise BadMessage(f"a malformed result: {str(exc)[:200]}") from None
    msg["result"] = capped(result)
    return msg


def capped(result: ImplResult) -> ImplResult:
    """``result`` with its message cut to MAX_TEXT_CHARS (saying so)."""
    if len(result.message) <= MAX_TEXT_CHARS:
        return result
    cut = len(result.message) - MAX_TEXT_CHARS
    return dataclasses.replace(result, message=result.message[:MAX_TEXT_CHARS] + f"... ({cut} characters truncated)")


_CHECKS = {"ready": _ready, "progress": _progress, "value": _value, "turn": _bare, "timed": _bare,
           "result": _result}
