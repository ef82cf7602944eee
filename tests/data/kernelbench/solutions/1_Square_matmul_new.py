import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """An honest solution: the matmul through torch.mm."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.mm(A, B)
