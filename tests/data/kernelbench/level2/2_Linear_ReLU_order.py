import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear then ReLU; a solution that creates its layers in another order still gets these weights."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.first = nn.Linear(in_features, out_features)
        self.second = nn.Linear(out_features, out_features)

    def forward(self, x):
        return torch.relu(self.second(torch.relu(self.first(x))))


batch_size = 32
in_features = 64
out_features = 64


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
