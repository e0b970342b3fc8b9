"""Honest, with its parameters kept as its own ``self.bias`` and ``self.weight`` (declared in that order) where the
module has ``ln.weight`` and ``ln.bias``: each is given its drawn values by its last name part."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.shape = tuple(normalized_shape)
        self.bias = nn.Parameter(torch.zeros(self.shape))
        self.weight = nn.Parameter(torch.ones(self.shape))

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.weight, self.bias)
