"""Honest: the mean over dimension 1 of a 3-D tensor, one thread per output column, coalesced over columns."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void mean_dim1(const float* __restrict__ x, float* __restrict__ y, long rows, long cols, long batch) {
    long c = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long b = blockIdx.y;
    if (c >= cols || b >= batch) return;
    const float* p = x + b * rows * cols + c;
    float acc = 0.0f;
    for (long r = 0; r < rows; ++r) acc += p[r * cols];
    y[b * cols + c] = acc / (float)rows;
}

torch::Tensor mean1(torch::Tensor x) {
    auto xc = x.contiguous();
    long batch = xc.size(0), rows = xc.size(1), cols = xc.size(2);
    auto y = torch::empty({batch, 1, cols}, xc.options());
    if (y.numel() == 0) return y;
    dim3 grid((unsigned)((cols + 127) / 128), (unsigned)batch);
    mean_dim1<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows,
                                                                   cols, batch);
    return y;
}
"""
ext = load_inline(name="kw_mean_dim1", cpp_sources="torch::Tensor mean1(torch::Tensor x);", cuda_sources=cuda_source,
                  functions=["mean1"])


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        assert dim == 1
        self.dim = dim

    def forward(self, x):
        return ext.mean1(x)
