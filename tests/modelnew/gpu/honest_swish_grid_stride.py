"""Honest: a grid-stride loop over the elements, the grid sized to the device."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void swish_clamp_strided(const float* __restrict__ x, float* __restrict__ y, long n, float lo, float hi) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = fminf(fmaxf(v / (1.0f + expf(-v)), lo), hi);
    }
}

torch::Tensor swish_clamp(torch::Tensor x, double lo, double hi) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    if (n == 0) return y;
    int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    long blocks = (n + 255) / 256;
    if (blocks > 8L * sms) blocks = 8L * sms;
    swish_clamp_strided<<<(unsigned)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n, (float)lo, (float)hi);
    return y;
}
"""
cpp_source = "torch::Tensor swish_clamp(torch::Tensor x, double lo, double hi);"
ext = load_inline(name="kw_swish_clamp_strided", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["swish_clamp"])


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        return ext.swish_clamp(x, self.lower, self.upper)
