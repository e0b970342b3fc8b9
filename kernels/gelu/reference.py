"""Reference (float64) and vendor implementation for gelu (tanh approximation)."""

import math

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_fused = {}


def reference(xp, *, x, n):
    v = x.astype(xp.float64)
    return {"y": 0.5 * v * (1.0 + xp.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))}


def vendor(xp, *, x, n):
    if "gelu" not in _fused:
        import numpy as np

        k, c, half, one = (np.float32(v) for v in (SQRT_2_OVER_PI, 0.044715, 0.5, 1.0))
        _fused["gelu"] = xp.fuse(lambda v: half * v * (one + xp.tanh(k * (v + c * v * v * v))))
    return {"y": _fused["gelu"](x)}
