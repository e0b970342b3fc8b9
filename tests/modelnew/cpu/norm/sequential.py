"""Honest, and no more accurate than a plain GPU kernel: two passes (mean, then the squared deviations), each a
thread's sequential float32 sum over a stretch of 64 elements, the stretches' sums then added together."""
import torch
import torch.nn as nn


def _sum(v, n):
    flat = v.reshape(v.shape[0], -1)
    pad = (-flat.shape[1]) % 64
    flat = torch.nn.functional.pad(flat, (0, pad)).reshape(flat.shape[0], -1, 64)
    return flat.cumsum(dim=-1)[..., -1].sum(dim=-1)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        k = self.ln.weight.dim()
        lead = x.shape[:x.dim() - k]
        rows = x.reshape(-1, self.ln.weight.numel())
        n = rows.shape[1]
        mean = (_sum(rows, n) / n).unsqueeze(1)
        var = (_sum((rows - mean) ** 2, n) / n).unsqueeze(1)
        out = (rows - mean) * torch.rsqrt(var + self.ln.eps)
        return out.reshape(*lead, *self.ln.weight.shape) * self.ln.weight + self.ln.bias
