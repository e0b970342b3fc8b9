"""Honest, with its parameters named its own way (``scale``, ``shift``): given the drawn values by shape."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.shape = tuple(normalized_shape)
        self.scale = nn.Parameter(torch.ones(self.shape))
        self.shift = nn.Parameter(torch.zeros(self.shape))

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.scale, self.shift)
