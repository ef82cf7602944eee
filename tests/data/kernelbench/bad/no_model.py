import torch


def get_inputs():
    return [torch.rand(4, 4)]


def get_init_inputs():
    return []
