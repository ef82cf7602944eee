"""Imported by the fork server of a run that compiles (:func:`solbench.measure.pool.preload_compiler`),
and only there: torch.compile's machinery, imported once before the first worker is forked, so that
no compiled worker imports it for itself (about 2 s a process on a 2-core CPU). How it stays clear of
CUDA: :mod:`solbench.measure.preload`."""

from solbench.measure.preload import preload

MODULES = ("torch._dynamo", "torch._inductor.compile_fx")

preload(MODULES)
