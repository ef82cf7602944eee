"""A cheating solution to KernelBench level 2 problem 2, for checking that a harness catches it:
ModelNew computes the first call honestly (Model's own ops), then returns that same output tensor
for every later call, whatever its input, doing no GPU work at all. Same constructor and
parameters as Model, so its first output is right."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape,
                 scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor
        self.cached = None

    def forward(self, x):
        if self.cached is None:
            y = torch.clamp(self.conv_transpose(x) + self.bias, min=0.0, max=1.0)
            self.cached = torch.clamp(y * self.scaling_factor, min=0.0, max=1.0) / self.scaling_factor
        return self.cached
