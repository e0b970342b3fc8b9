"""A kernel that does not compile (an undeclared name): a compile error with nvcc's log."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void broken_kernel(float* y) { y[threadIdx.x] = undeclared_value; }
torch::Tensor run(torch::Tensor x) { broken_kernel<<<1, 32>>>(x.data_ptr<float>()); return x; }
"""
ext = load_inline(name="kw_broken", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=cuda_source,
                  functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()

    def forward(self, x):
        return ext.run(x)
