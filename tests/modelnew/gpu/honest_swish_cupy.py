"""Honest: the elementwise kernel as a CuPy RawKernel, launched on PyTorch's current stream."""
import cupy as cp
import torch
import torch.nn as nn

kernel = cp.RawKernel(r"""
extern "C" __global__ void swish_clamp_raw(const float* x, float* y, long long n, float lo, float hi) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = fminf(fmaxf(v / (1.0f + expf(-v)), lo), hi);
    }
}
""", "swish_clamp_raw")


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                kernel(((n + 255) // 256,), (256,), (cp.from_dlpack(x), cp.from_dlpack(y), cp.int64(n),
                                                    cp.float32(self.lower), cp.float32(self.upper)))
        return y
