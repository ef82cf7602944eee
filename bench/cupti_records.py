"""What CUPTI records one graph-launch check produces, and what reading them costs per record.

    PYTHONPATH=. python3 bench/cupti_records.py

One process, one GPU: GraphLaunch over the o_proj decode call (torch.addmm at 16 tokens, hidden
4096, bf16) on two input sets, with this process's tracer's callback replaced by one that keeps the
raw records. Prints the records per kind and the twelve commonest API records by name, what a
record object is (type, public attributes), and the host microseconds per record of three ways to
read the fields a check needs (kind, start, correlation id): the record's properties, ``int()`` or
``ptr`` plus a ctypes view of the CUPTI struct, and whether they agree. Host costs of the harness on
the machine as found; no timed result of solbench.
"""

from __future__ import annotations

import collections
import ctypes
import time

import torch

from solbench.device import cupti
from solbench.device.timer import GraphLaunch


class _Api(ctypes.Structure):  # CUpti_ActivityAPI (cupti_activity.h)
    _fields_ = [("kind", ctypes.c_uint32), ("cbid", ctypes.c_uint32), ("start", ctypes.c_uint64),
                ("end", ctypes.c_uint64), ("process_id", ctypes.c_uint32), ("thread_id", ctypes.c_uint32),
                ("correlation_id", ctypes.c_uint32), ("return_value", ctypes.c_uint32)]


def main() -> None:
    from cupti import cupti as module

    sets = []
    for _ in range(2):
        x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
        r = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
        sets.append((r, x, w))
    launches = [lambda s=s: torch.addmm(*s) for s in sets]
    for fn in launches:
        fn()
    trace = cupti.tracer()
    GraphLaunch(torch, launches, trace)  # warm
    lines: list[str] = []
    # the records are read inside the callback: their memory is CUPTI's buffer, given back after it
    module.activity_register_callbacks(trace._requested, lambda acts: lines.extend(_census(module, trace, acts)))
    torch.cuda.synchronize()
    t = time.perf_counter()
    GraphLaunch(torch, launches, trace)
    print(f"one GraphLaunch, its records read by this census: {(time.perf_counter() - t) * 1e3:.2f} ms")
    print("\n".join(lines))


def _census(module, trace, kept) -> list[str]:
    if not kept:
        return []
    out = [f"a buffer of {len(kept)} records"]
    kinds = collections.Counter(int(a.kind) for a in kept)
    names = {int(k): k.name for k in module.ActivityKind}
    out.append("records per kind: " + ", ".join(f"{names.get(k, k)} {n}" for k, n in kinds.most_common()))
    api_kinds = (int(module.ActivityKind.RUNTIME), int(module.ActivityKind.DRIVER))
    api = [a for a in kept if int(a.kind) in api_kinds]
    by_name: collections.Counter = collections.Counter()
    for a in api:
        domain = (module.CallbackDomain.RUNTIME_API if int(a.kind) == api_kinds[0]
                  else module.CallbackDomain.DRIVER_API)
        try:
            by_name[module.get_callback_name(domain, int(a.cbid))] += 1
        except Exception as exc:
            by_name[f"cbid {int(a.cbid)} ({type(exc).__name__})"] += 1
    out.append("API records by name: " + ", ".join(f"{k} {n}" for k, n in by_name.most_common(14)))
    if not api:
        return out
    sample = api[0]
    out.append(f"record type: {[c.__module__ + '.' + c.__qualname__ for c in type(sample).__mro__]}")
    out.append(f"public attributes: {[n for n in dir(sample) if not n.startswith('__')][:40]}")

    def per_record(read) -> float:
        t = time.perf_counter()
        for a in api:
            read(a)
        return (time.perf_counter() - t) * 1e6 / len(api)

    def props(a):
        return int(a.kind), int(a.start), int(a.correlation_id)

    rows = [("properties (kind, start, correlation_id)", per_record(props), True)]
    for label, address in (("int(record)", int), ("record.ptr", lambda a: a.ptr)):
        try:
            def view(a, address=address):
                s = _Api.from_address(int(address(a)))
                return s.kind, s.start, s.correlation_id
            agree = all(view(a) == props(a) for a in api)
            rows.append((f"{label} + ctypes CUpti_ActivityAPI", per_record(view), agree))
        except Exception as exc:
            rows.append((f"{label}: {type(exc).__name__}: {exc}"[:100], float("nan"), False))
    t = time.perf_counter()
    trace._completed(kept)
    rows.append(("the tracer's own parse of every record (_completed)", (time.perf_counter() - t) * 1e6 / len(kept),
                 True))
    out.append("µs per record  agrees  way")
    out += [f"{us:12.2f}  {agree!s:6}  {label}" for label, us, agree in rows]
    return out


if __name__ == "__main__":
    main()
