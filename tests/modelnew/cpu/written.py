"""Writes its answer into its input (torch.relu_-style): the input's bits change."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        return x.mul_(torch.sigmoid(x)).clamp_(self.lower, self.upper)
