"""Correct: its op is registered with torch.library.custom_op (with a fake), as a PyTorch user ships a kernel."""
import torch
import torch.nn as nn


@torch.library.custom_op("kw_probe::swish_clamp", mutates_args=())
def swish_clamp(x: torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    return torch.clamp(x * torch.sigmoid(x), min=lower, max=upper)


@swish_clamp.register_fake
def _(x, lower, upper):
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        return swish_clamp(x, self.lower, self.upper)
