"""Random inputs for a case, and output comparison against the reference (torch)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from solbench.results.model import Correctness
from solbench.workload.cases import Case, TensorShape

# Defaults when a workload sets none: |out - ref| <= atol + rtol * |ref| elementwise.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "bfloat16": (2e-2, 2e-2),
    "float16": (1e-2, 1e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
    # whole numbers are exact: rtol 1e-2 passed an int32 result of 100 or more off by one
    **dict.fromkeys(("int8", "int16", "int32", "int64", "uint8", "bool"), (0.0, 0.0)),
}
# Any other case dtype (a packed FP4 case)
FALLBACK_TOLERANCE = (1e-2, 1e-2)


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a workload dtype name."""
    return getattr(torch, name)  # type: ignore[no-any-return]


def make_inputs(case: Case, device: str, seed: int,
                generator: Callable[..., Mapping[str, Any]] | None = None,
                fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fresh random inputs (normal, never zeros) for one case, reproducible from ``seed``.

    Drawn on the device itself (a CPU generator would take seconds for the largest cases, once
    per implementation and input set); the same seed gives the same inputs on the same kind of
    device. With a workload's input ``generator``, it draws them:
    ``generator(params, device, torch_generator, **fixed)`` returns every input by name; torch's
    global generators are seeded with ``seed`` while it runs (and given back as found after), so
    one that draws without ``torch_generator`` is reproducible too.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    if generator is None:
        return {t.name: _random(t, gen, device) for t in case.inputs}
    with torch.random.fork_rng(devices=rng_devices(device)):
        torch.manual_seed(seed)
        drawn = dict(generator(dict(case.scope), device, gen, **(fixed or {})))
    wanted = [t.name for t in case.inputs] + list(case.scalars)
    missing = [n for n in wanted if n not in drawn]
    if missing:
        raise ValueError(f"the input generator gave no {', '.join(missing)}")
    return {**{n: drawn[n] for n in wanted}, **{k: v for k, v in drawn.items() if k not in wanted}}


def rng_devices(device: str) -> list[int]:
    """The GPUs whose global generators a draw on ``device`` uses, for ``torch.random.fork_rng``: the
    one it names, or the current one where it names none (``cuda``: a worker's own GPU); none off CUDA."""
    where = torch.device(device)
    if where.type != "cuda":
        return []
    return [torch.cuda.current_device() if where.index is None else where.index]


def _random(t: TensorShape, gen: torch.Generator, device: str) -> torch.Tensor:
    dtype = torch_dtype(t.dtype)
    if dtype in PACKED:  # random bytes: every byte is two valid FP4 values (no NaN or inf in e2m1)
        bits = torch.randint(0, 256, t.shape, generator=gen, dtype=torch.uint8, device=device)
        return (bits & 0x77 if t.positive else bits).view(dtype)  # positive: both sign bits clear
    if not dtype.is_floating_point:
        low = 0 if t.positive else -8
        return torch.randint(low, 8, t.shape, generator=gen, dtype=torch.int64, device=device).to(dtype)
    x = torch.randn(t.shape, generator=gen, dtype=torch.float32, device=device)
    if t.positive:
        x.abs_()
    return (x.mul_(t.std).add_(t.mean)).to(dtype)


def upcast(inputs: Mapping[str, Any], dtype: str) -> dict[str, Any]:
    """Floating tensor inputs narrower than the reference dtype converted to it ("declared": left
    as drawn); other inputs (packed FP4 pairs too) unchanged. Never narrowed: a float64 case's reference, under the
    default float32, runs in float64 (in float32 it was off by more than float64's tolerance)."""
    if dtype == "declared":
        return dict(inputs)
    target = torch_dtype(dtype)
    return {k: v.to(target) if isinstance(v, torch.Tensor) and v.is_floating_point()
            and v.dtype.itemsize < target.itemsize and v.dtype not in PACKED else v for k, v in inputs.items()}


# Packed dtypes torch cannot convert (nor fill, nor compare): drawn as random bytes, passed to the
# reference as drawn (it unpacks them itself); outputs are compared by the values they hold (values)
PACKED = {getattr(torch, "float4_e2m1fn_x2", torch.bool)} - {torch.bool}


def values(t: torch.Tensor) -> torch.Tensor:
    """A packed FP4 tensor as the float32 values it holds, each byte's low nibble then its high (the last
    dimension doubled); any other tensor as it is. A nibble is e2m1: a sign bit, two exponent bits and a
    mantissa bit (0, 0.5, 1, 1.5, 2, 3, 4, 6), computed, with no table an implementation could rewrite."""
    if t.dtype not in PACKED:
        return t
    b = t.view(torch.uint8)
    n = torch.stack([b & 0xF, b >> 4], -1).reshape(*t.shape[:-1], -1)
    e, m = ((n >> 1) & 3).float(), (n & 1).float()
    magnitude = torch.where(e == 0, m / 2, (1 + m / 2) * 2 ** (e - 1))
    return torch.where(n >= 8, -magnitude, magnitude)


def as_outputs(value: Any, names: Sequence[str], *, strict: bool = True,
               returns: str | None = None) -> tuple[torch.Tensor, ...]:
    """Normalize what an implementation returned to a tuple in declared-output order.

    Only a tensor, a plain ``dict`` (by output name), or a ``tuple``/``list`` (a named tuple too)
    holding tensors: the outputs must exist when the call returns. A lazy mapping or a generator
    would compute them here, after the timed window closed; it is a TypeError, as a wrong type.
    ``strict=False`` (a reference's outputs, never timed) also takes any mapping and iterable.
    ``returns`` (the workload's ``returns``): that structure only, as the reference returns it
    (KernelBench rejects a ModelNew returning ``(t,)`` where Model returns ``t``); another is a TypeError.
    """
    if returns is not None:
        want = "a tensor" if returns == "tensor" else f"a {returns} of {len(names)}"
        got = _structure(value)
        if got != want:
            raise TypeError(f"returned {got} where the reference returns {want} ({', '.join(names)})")
    if isinstance(value, torch.Tensor):
        value = (value,)
    elif type(value) is dict or (not strict and isinstance(value, Mapping)):
        missing = [n for n in names if n not in value]
        if missing:
            keys = ", ".join(repr(k) for k in list(value)[:8]) or "none"
            raise TypeError(f"expected {len(names)} tensor output(s) ({', '.join(names)}), got a dict without "
                            f"{', '.join(missing)} (its keys: {keys})")
        value = tuple(value[n] for n in names)
    elif strict and not _eager_sequence(value):
        raise TypeError(f"expected {len(names)} tensor output(s) ({', '.join(names)}) as a tensor, tuple, list "
                        f"or dict, got {type(value).__module__}.{type(value).__qualname__} (outputs must exist "
                        "when the call returns)")
    value = tuple(value)
    if len(value) != len(names) or not all(isinstance(v, torch.Tensor) for v in value):
        raise TypeError(f"expected {len(names)} tensor output(s) ({', '.join(names)}), "
                        f"got {type(value).__name__} of {len(value)}")
    return value


def _structure(value: Any) -> str:
    """What a call returned, in words (``a tensor``, ``a tuple of 2``, ``a dict``), read without
    calling anything the value's class defines."""
    if isinstance(value, torch.Tensor):
        return "a tensor"
    for kind in (tuple, list):
        if isinstance(value, kind):
            return f"a {kind.__name__} of {kind.__len__(value)}"
    cls = type(value)
    return f"a {cls.__qualname__}" if cls.__module__ == "builtins" else f"a {cls.__module__}.{cls.__qualname__}"


def _eager_sequence(value: Any) -> bool:
    """A list, or a tuple whose items are stored (a named tuple, not a class computing them)."""
    if type(value) is list:
        return True
    cls = type(value)
    return isinstance(value, tuple) and all(getattr(cls, m) is getattr(tuple, m)
                                            for m in ("__iter__", "__getitem__", "__len__"))


def poison_allocator(case: Case, device: str) -> None:
    """Fill cached allocator blocks of the outputs' sizes with NaN, so unwritten elements fail.

    On CUDA the caching allocator hands the freed NaN blocks to the implementation's next
    allocations of those sizes. On the CPU this is best effort.
    """
    blocks = [torch.full(t.shape, float("nan"), dtype=torch_dtype(t.dtype), device=device)
              for t in case.outputs if torch_dtype(t.dtype).is_floating_point and torch_dtype(t.dtype) not in PACKED]
    del blocks


@dataclass(frozen=True)
class Bounds:
    """The tolerance an output is checked against (see :class:`solbench.workload.schema.Tolerance`)."""

    atol: float
    rtol: float
    rel_l2: float | None = None
    matched_ratio: float | None = None
    error_cap: float | None = None
    # a default tolerance (the workload sets none): integer and boolean outputs compared exactly (an
    # argmax's indices of a bfloat16 case, off by one at 50 and above, passed its 2e-2)
    exact_integers: bool = False


def compare(out: Sequence[torch.Tensor], ref: Sequence[torch.Tensor], case: Case,
            rtol: float, atol: float, rel_l2: float | None, bounds: Bounds | None = None) -> Correctness:
    """Check shapes, dtypes, NaN/Inf and tolerances of every output.

    Elementwise ``|out - ref| <= atol + rtol * |ref|`` holds for every element, or, with
    ``matched_ratio``, for at least that fraction of them (and then no error above ``error_cap``).
    """
    b = bounds or Bounds(atol, rtol, rel_l2)
    worst_abs, worst_l2 = 0.0, 0.0
    for o, r, t in zip(out, ref, case.outputs, strict=True):
        if tuple(o.shape) != t.shape:
            return _fail(b, f"{t.name}: shape {tuple(o.shape)} != {t.shape}")
        if o.dtype != torch_dtype(t.dtype):
            return _fail(b, f"{t.name}: dtype {o.dtype} != {t.dtype}")
        if o.device.type != r.device.type:  # a CPU result on a GPU run: it was moved to the reference's before
            return _fail(b, f"{t.name}: on device {o.device.type}, the inputs' and the reference's is {r.device.type}")
        o, r = values(o), values(r)
        ob = replace(b, atol=0.0, rtol=0.0) if b.exact_integers and not o.is_floating_point() else b
        bad, max_err, n_over, l2, far = _errors(o.detach().reshape(-1), r.detach().reshape(-1), ob)
        if bad:
            return _fail(b, f"{t.name}: {bad} NaN/Inf element(s) (unwritten or overflow)")
        worst_abs, worst_l2 = max(worst_abs, max_err), max(worst_l2, l2)
        detail = _outside(t.name, n_over, tuple(o.shape), ob, max_err, far)
        if detail and (b.matched_ratio is None or 1 - n_over / max(o.numel(), 1) < b.matched_ratio):
            return Correctness(False, worst_abs, worst_l2, b.atol, b.rtol, detail)
        if b.error_cap is not None and max_err > b.error_cap:
            return Correctness(False, worst_abs, worst_l2, b.atol, b.rtol,
                               f"{t.name}: max abs err {max_err:.3g} > error cap {b.error_cap:g}")
        if b.rel_l2 is not None and l2 > b.rel_l2:
            return Correctness(False, worst_abs, worst_l2, b.atol, b.rtol,
                               f"{t.name}: relative L2 error {l2:.3g} > {b.rel_l2:g}")
    return Correctness(True, worst_abs, worst_l2, b.atol, b.rtol)


# Elements compared at a time: the fp64 copies of one chunk take 128 MiB each, so a 1.6 G-element
# output (KernelBench's elementwise problems) is checked without tens of GB of temporaries.
CHUNK = 1 << 24


def _errors(o: torch.Tensor, r: torch.Tensor, b: Bounds) -> tuple[int, float, int, float, tuple[int, float, float]]:
    """(non-finite outputs, max abs error, elements outside tolerance, relative L2 error, and the
    element farthest outside its bound: its index, value and the reference's) of two flat tensors,
    in fp64, chunk by chunk. Where the reference is infinite, the same infinity is equal (excluded
    from the errors) and any other value is outside the bound (``rtol * inf`` would pass a finite
    one). The largest error alone can belong to an element within its bound (a large reference
    value), so the worst element is the one whose error most exceeds ``atol + rtol * |ref|``.

    The sums stay on the device and are read once at the end: a 2 G-element output is 128 chunks,
    and a read per statistic per chunk was 640 waits for the device (each a record to parse while
    the CUPTI timer collects)."""
    zero = torch.zeros((), dtype=torch.float64, device=o.device)
    bad, max_err, n_over, sq_err, sq_ref = zero.clone(), zero.clone(), zero.clone(), zero.clone(), zero.clone()
    excess, at, got, want = zero - float("inf"), zero.clone(), zero.clone(), zero.clone()
    for start in range(0, o.numel(), CHUNK):
        o64 = o[start:start + CHUNK].to(torch.float64)
        r64 = r[start:start + CHUNK].to(o.device, torch.float64)
        same = r64.isinf() & (o64 == r64)
        o64, r64 = torch.where(same, 0.0, o64), torch.where(same, 0.0, r64)
        bad += (~torch.isfinite(o64)).sum()
        err = (o64 - r64).abs()
        if err.numel():
            max_err = torch.fmax(max_err, err.max())  # a NaN error (a NaN reference) is not a maximum
        sq_err += err.square().sum()
        sq_ref += r64.square().sum()
        bound = torch.where(r64.isinf(), 0.0, b.atol + b.rtol * r64.abs())
        over = err > bound
        n_over += over.sum()
        if err.numel():  # the first element farthest outside its bound (ties: the earliest)
            beyond = err - bound
            i = beyond.argmax()
            further = beyond[i] > excess
            excess = torch.where(further, beyond[i], excess)
            at = torch.where(further, (i + start).to(torch.float64), at)
            got, want = torch.where(further, o64[i], got), torch.where(further, r64[i], want)
    n_bad, worst, n_out, se, sr, index, value, expected = torch.stack(
        [bad, max_err, n_over, sq_err, sq_ref, at, got, want]).tolist()
    return int(n_bad), worst, int(n_out), (se ** 0.5) / max(sr ** 0.5, 1e-30), (int(index), value, expected)


def nans(t: torch.Tensor) -> tuple[int, tuple[int, ...]]:
    """(NaN elements of ``t``, the index of the first; () where none), chunk by chunk as the
    check reads outputs, read from the device once."""
    if t.dtype in PACKED or not t.is_floating_point():  # no NaN (and, FP4, no isnan kernel)
        return 0, ()
    flat = t.detach().reshape(-1)
    count = torch.zeros((), dtype=torch.int64, device=flat.device)
    first = torch.full((), -1, dtype=torch.int64, device=flat.device)
    for start in range(0, flat.numel(), CHUNK):
        isnan = flat[start:start + CHUNK].isnan()
        count += isnan.sum()
        first = torch.where((first < 0) & isnan.any(), start + isnan.to(torch.uint8).argmax(), first)
    n, at = torch.stack([count, first]).tolist()
    return int(n), unravel(int(at), tuple(t.shape)) if n else ()


def unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    """The index of element ``flat`` of a contiguous tensor of ``shape``."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size) if size else (flat, 0)
        index.append(i)
    return tuple(reversed(index))


def _fail(b: Bounds, detail: str) -> Correctness:
    return Correctness(False, float("nan"), float("nan"), b.atol, b.rtol, detail)


def _outside(name: str, n_over: int, shape: tuple[int, ...], b: Bounds, max_err: float,
             far: tuple[int, float, float]) -> str:
    """What an output outside its tolerance says: how many elements, the largest error, and the
    element farthest outside its bound (``far``: flat index, value, reference's value)."""
    if not n_over:
        return ""
    numel = math.prod(shape)
    index, got, expected = far
    allowed = b.atol + b.rtol * abs(expected) if math.isfinite(expected) else 0.0  # an infinity: itself only
    worst = (f"worst {name}{list(unravel(index, shape))} = {got:.6g} where the reference has {expected:.6g}, "
             f"off by {abs(got - expected):.3g} > {allowed:.3g} allowed")
    ratio = f"; {1 - n_over / numel:.4f} matched < {b.matched_ratio:g} required" if b.matched_ratio else ""
    return (f"{name}: {n_over} of {numel} elements outside atol={b.atol:g} rtol={b.rtol:g} "
            f"(max abs err {max_err:.3g}; {worst}){ratio}")
