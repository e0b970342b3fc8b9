"""A float32 matrix product whose inputs are first rounded to TF32 (10 mantissa bits): what TF32 tensor cores do."""
import torch
import torch.nn as nn


def tf32(t):
    return ((t.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32).reshape(t.shape)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(tf32(A), tf32(B))
