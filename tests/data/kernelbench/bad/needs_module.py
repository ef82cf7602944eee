"""A KernelBench-format problem that imports a module this machine lacks (tests: exit 2, one line)."""

import solbench_no_such_module  # noqa: F401
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
