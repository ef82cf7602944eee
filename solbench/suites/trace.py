"""Traced cost and shapes of a case: the reference run on the meta device (no memory, no compute).

    probe(spec, case, base_dir) -> (case with every shape filled in, Cost(source="traced"))

What is counted (the reference's own execution, op by op, through ``__torch_dispatch__``):

    tensor FLOPs   ``torch.utils.flop_counter.FlopCounterMode``: 2 x multiply-accumulates of every
                   matmul, convolution and attention op (its registry); the convolutions' share
                   apart (``conv_flops``: the ``torch`` fp32 peak policy prices them at TF32)
    vector FLOPs   one per element of the largest tensor an elementwise or reduction op reads or
                   writes (an element count, not an instruction count: softmax counts its elements
                   once, not five times); views, copies, casts, concatenations, gathers and factory
                   ops move data and count none
    fused bytes    inputs + parameters and buffers (tensors an op reads that are neither inputs
                   nor made by an earlier op) + outputs, each once
    unfused bytes  every op's tensors read and written (views and aliases excluded)

A traced cost counts what the reference executes: dense triangular matmuls, unmasked causal
attention, untouched pages of a paged KV cache. It can exceed the least work a kernel must do, so
solbench applies no INVALID floor to it (:mod:`solbench.analysis.scoring`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from solbench.errors import ConfigError
from solbench.impls.registry import resolve
from solbench.measure.runner import params_for
from solbench.measure.tensors import as_outputs, upcast
from solbench.results.model import Cost
from solbench.workload.cases import Case, TensorShape
from solbench.workload.schema import DTYPE_BYTES, WorkloadSpec

_aten = torch.ops.aten
# data movement and allocation: bytes, no FLOPs
_MOVES = {_aten._to_copy, _aten.copy_, _aten.clone, _aten.empty, _aten.empty_like, _aten.empty_strided,
          _aten.zeros, _aten.zeros_like, _aten.ones, _aten.ones_like, _aten.full, _aten.full_like, _aten.fill_,
          _aten.rand, _aten.randn, _aten.randint, _aten.rand_like, _aten.randn_like, _aten.normal_,
          _aten.uniform_, _aten.bernoulli_, _aten.new_empty, _aten.new_zeros, _aten.new_ones, _aten.new_full,
          _aten.lift_fresh, _aten.lift_fresh_copy, _aten.cat, _aten.stack, _aten.index_select, _aten.gather,
          _aten.constant_pad_nd, _aten.arange, _aten.scalar_tensor, _aten.repeat, _aten.expand_copy,
          _aten.index, _aten.slice_scatter, _aten.select_scatter, _aten.flip, _aten.roll, _aten.tril, _aten.triu,
          _aten.masked_fill, _aten.zero_, _aten.embedding, _aten._unsafe_view, _aten.alias, _aten.detach}

# ops that return an alias of their input without being flagged a view (func.is_view): no bytes move
_ALIASES = {_aten._unsafe_view.default}


class _Work(TorchDispatchMode):
    """Counts vector work, bytes moved, and the parameters an op reads that nobody made."""

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        super().__init__()
        self.vector = 0.0
        self.unfused = 0.0
        self.external = 0  # bytes of parameters and buffers
        self._seen: set[int] = {id(t) for t in inputs.values() if isinstance(t, torch.Tensor)}
        self._keep: list[torch.Tensor] = [t for t in inputs.values() if isinstance(t, torch.Tensor)]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        ins = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        for t in ins:  # a parameter read only through a view (Linear's weight.t()) is read all the same
            if id(t) not in self._seen:
                self._seen.add(id(t))
                self._keep.append(t)
                self.external += _nbytes(t)
        if func.is_view or func in _ALIASES:
            self._produced(out)
            return out
        outs = self._produced(out)
        self.unfused += sum(_nbytes(t) for t in ins + outs)
        packet = func.overloadpacket
        if packet not in flop_registry and packet not in _MOVES:
            self.vector += max((t.numel() for t in ins + outs), default=0)
        return out

    def _produced(self, out: Any) -> list[torch.Tensor]:
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        for t in outs:
            self._seen.add(id(t))
            self._keep.append(t)
        return outs


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def dtype_name(dtype: torch.dtype) -> str:
    """A torch dtype as a workload dtype name; ConfigError for one solbench does not know."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise ConfigError(f"dtype {name} is not supported (known: {', '.join(DTYPE_BYTES)})")
    return name


def meta_inputs(spec: WorkloadSpec, case: Case, base_dir: Path | None, device: str = "meta") -> dict[str, Any]:
    """The case's inputs on the meta device: the input generator's (on "meta"), else empty tensors
    of the declared shapes. On a real ``device``: drawn as a run draws them (seed 0)."""
    gen = spec.input_generator
    if device != "meta":
        from solbench.measure.tensors import make_inputs

        return make_inputs(case, device, 0, resolve(gen.fn, base_dir) if gen is not None else None,
                           gen.params if gen is not None else None)
    if gen is None:
        return {t.name: torch.empty(t.shape, dtype=getattr(torch, t.dtype), device="meta") for t in case.inputs}
    fn = resolve(gen.fn, base_dir)
    return dict(fn(dict(case.scope), "meta", torch.Generator().manual_seed(0), **gen.params))


def probe_on(spec: WorkloadSpec, case: Case, base_dir: Path | None, device: str) -> tuple[Case, Cost, str]:
    """:func:`probe` on the meta device; where the reference cannot run there (it reads a value with
    ``.item()``, or launches a Triton or CUDA kernel of its own), again with real inputs on
    ``device`` (the same counts: the dispatcher sees the same ops). Returns the device it traced on
    too. What the last attempt raised propagates."""
    try:
        return (*probe(spec, case, base_dir), "meta")
    except ConfigError:
        raise
    except Exception:
        if device == "meta":
            raise
    return (*probe(spec, case, base_dir, device), device)


def probe(spec: WorkloadSpec, case: Case, base_dir: Path | None, device: str = "meta") -> tuple[Case, Cost]:
    """The case with traced shapes and dtypes filled in, and its traced cost (module docstring).

    Raises whatever the generator or the reference raises (the caller names the workload).
    """
    inputs = meta_inputs(spec, case, base_dir, device)
    tensors_in, scalars = _split_inputs(spec, case, inputs)
    reference = resolve(spec.reference, base_dir)
    ref_inputs = {**upcast(inputs, spec.reference_dtype), **spec.reference_params}
    counter = FlopCounterMode(display=False)
    work = _Work(ref_inputs)
    with torch.no_grad(), counter, work:
        value = reference(**ref_inputs, **params_for(reference, case.params, ref_inputs, case.scope))
    names = [t.name for t in case.outputs]
    outs = as_outputs(value, names)
    outputs = tuple(_filled(t, o) for t, o in zip(case.outputs, outs, strict=True))
    filled = dataclasses.replace(case, inputs=tensors_in, outputs=outputs, scalars=scalars,
                                 extra_bytes=work.external)
    fused = float(sum(t.nbytes for t in filled.inputs + filled.outputs) + work.external)
    cost = Cost(case.dtype, float(counter.get_total_flops()), work.vector, fused, work.unfused, source="traced",
                conv_flops=conv_flops(counter))
    return filled, cost


def conv_flops(counter: FlopCounterMode) -> float:
    """The convolutions' share of what ``counter`` counted (its ops named ``*convolution*``)."""
    counts = counter.get_flop_counts().get("Global", {})
    return float(sum(n for op, n in counts.items() if "convolution" in str(op)))


def _split_inputs(spec: WorkloadSpec, case: Case, inputs: Mapping[str, Any]) -> tuple[tuple[TensorShape, ...],
                                                                                       tuple[str, ...]]:
    shapes = []
    for t in case.inputs:
        value = inputs.get(t.name)
        if not isinstance(value, torch.Tensor):
            raise ConfigError(f"input {t.name!r}: the input generator gave {type(value).__name__}, not a tensor")
        shapes.append(_filled(t, value))
    declared = {t.name for t in case.inputs}
    scalars = tuple(k for k, v in inputs.items() if k not in declared and not isinstance(v, torch.Tensor))
    extra = [k for k, v in inputs.items() if k not in declared and isinstance(v, torch.Tensor)]
    if extra:
        raise ConfigError(f"the input generator gave tensors the workload does not declare: {', '.join(extra)}")
    return tuple(shapes), scalars


def _filled(t: TensorShape, value: torch.Tensor) -> TensorShape:
    """``t`` with the traced shape and dtype (a declared shape must match what was traced)."""
    shape, dtype = tuple(int(d) for d in value.shape), dtype_name(value.dtype)
    if not t.traced:
        if shape != t.shape:
            raise ConfigError(f"{t.name}: traced shape {shape} differs from the declared {t.shape}")
        return t
    return dataclasses.replace(t, shape=shape, dtype=dtype, traced=False)
