"""An extension that does not compile: a compile error with the compiler's log."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="swish_does_not_compile", cpp_sources="torch::Tensor swish(torch::Tensor x) { return x + ; }",
                  functions=["swish"])


class ModelNew(nn.Module):
    def __init__(self, lower, upper):
        super().__init__()

    def forward(self, x):
        return ext.swish(x)
