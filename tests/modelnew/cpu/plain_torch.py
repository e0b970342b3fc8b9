"""All PyTorch: correct, and no kernel of its own."""
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper
    def forward(self, x):
        return torch.clamp(x * torch.sigmoid(x), min=self.lower, max=self.upper)
