"""Honest, with two parameters of one shape named its own way (``gamma``, ``beta``): which is the weight cannot be
told, so neither is given drawn values (a wrong guess would make it wrong)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.shape = tuple(normalized_shape)
        self.beta = nn.Parameter(torch.zeros(self.shape))
        self.gamma = nn.Parameter(torch.ones(self.shape))

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.gamma, self.beta)
