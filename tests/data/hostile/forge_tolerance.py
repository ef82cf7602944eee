"""Loosens the tolerance table when imported (before the worker builds its checker), then returns
a result far outside the workload's tolerance. Must be caught: the table is not its to change."""

import torch

import solbench.measure.worker

solbench.measure.worker.tolerance_for = lambda *args, **kwargs: (1e30, 1e30, None)


def loose_tolerance(x, w, residual):
    return torch.addmm(residual, x, w.T) + 1.0
