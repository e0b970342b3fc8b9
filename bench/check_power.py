"""What fraction of wrong outputs each output test catches, and how often honest outputs fail it.

    python bench/check_power.py [--tasks vector_add,hgemm] [--trials 20]      # GPU: benchmark sizes, CuPy
    python bench/check_power.py --cpu [--tasks ...] [--trials 5]               # NumPy, at each task's largest check size

For each task, inputs from its first distribution, the float64 reference, and a baseline output (the
vendor library's on a GPU, the reference rounded to the output dtype with --cpu). Candidate outputs are
honest ones (the reference rounded; every element off by half its tolerance, one sign) and wrong ones
(all zero, half precision, every k-th element zero, a constant bias, one wrong element). Each is judged
against the baseline's by:

- the old fingerprint (one random-weighted sum, bound by the summed per-element tolerances; replaced),
- an elementwise comparison of 2^16 random elements (exact probability of a catch),
- 4 random-sign projections bound by 8 sqrt(sum t_i^2),
- every element compared (with the same per-element bound t_i),
- the sandbox's test: every element and the projections, in one pass (on a GPU, harness.cu's kernel).

A cell is the share of trials (fresh keys) that flagged the output; "n/a" where a kind does not apply.
On a GPU it also prints what the sandbox's test costs per launch at each benchmark size.
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.judging import agreement as ag  # noqa: E402
from sandbox.tasks.inputs import input_specs  # noqa: E402
from sandbox.tasks.task import load_task, suite_names  # noqa: E402
from sandbox.worker.harness import reference_inputs  # noqa: E402

SAMPLE = 1 << 16
TESTS = ("old fingerprint", "2^16 sample", "projections", "every element", "sandbox (both)")


OLD_FINGERPRINT_CU = r"""
#include <cuda_fp16.h>
__device__ unsigned long long mix64(unsigned long long x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; return x ^ (x >> 33);
}
template <typename T> __device__ double as_double(T v) { return (double)v; }
template <> __device__ double as_double<__half>(__half v) { return (double)__half2float(v); }
template <typename T>
__global__ void fingerprint(const T* y, long long n, unsigned long long key, double* out) {
    double s = 0.0, a = 0.0, w1 = 0.0, nan = 0.0, pinf = 0.0, ninf = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        double v = as_double(y[i]);
        double w = (double)(mix64((unsigned long long)i ^ key) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        if (isnan(v)) nan += 1.0;
        else if (isinf(v)) { if (v > 0) pinf += 1.0; else ninf += 1.0; }
        else { s += w * v; a += fabs(w) * fabs(v); w1 += fabs(w); }
    }
    double vals[6] = {s, a, w1, nan, pinf, ninf};
    for (int k = 0; k < 6; ++k) {
        double v = vals[k];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if ((threadIdx.x & 31) == 0 && v != 0.0) atomicAdd(out + k, v);
    }
}
"""


def old_fingerprint(xp, y, key: int) -> list[float]:
    """The replaced fingerprint (on a GPU, the replaced harness kernel itself)."""
    if xp is not np:
        return _old_fingerprint_device(xp, y, key)
    return _old_fingerprint_numpy(y, key)


def _old_fingerprint_device(cp, y, key: int) -> list[float]:
    from sandbox.tasks.dtypes import DTYPES

    out = cp.zeros(6, dtype=cp.float64)
    n = int(y.size)
    grid = max(1, min(math.ceil(n / 256), 132 * 8))
    kernel = _old_module(cp).get_function(f"fingerprint<{DTYPES[y.dtype.name].ctype}>")
    kernel((grid,), (256,), (y.reshape(-1), np.int64(n), np.uint64(key), out))
    return out.get().tolist()


@functools.cache
def _old_module(cp):
    from sandbox.tasks.dtypes import DTYPES

    names = [f"fingerprint<{d.ctype}>" for d in DTYPES.values()]
    return cp.RawModule(code=OLD_FINGERPRINT_CU, options=("-std=c++17",), name_expressions=names)


def _old_fingerprint_numpy(y, key: int) -> list[float]:
    """The replaced fingerprint: weights in [-1, 1) keyed by ``key``; sums over finite elements, non-finite counts."""
    xp = np
    v = y.reshape(-1).astype(xp.float64)
    w = (ag.mix64(xp, xp.arange(v.size, dtype=xp.uint64) ^ xp.uint64(key)) >> xp.uint64(11)).astype(xp.float64)
    w = w * (2.0 / 9007199254740992.0) - 1.0
    fin = xp.isfinite(v)
    vf = xp.where(fin, v, 0.0)
    wf = xp.where(fin, w, 0.0)
    return [float((wf * vf).sum()), float((xp.abs(wf) * xp.abs(vf)).sum()), float(xp.abs(wf).sum()),
            float(xp.isnan(v).sum()), float((v == xp.inf).sum()), float((v == -xp.inf).sum())]


def old_fingerprint_fails(fc: list[float], fb: list[float], atol: float, rtol: float) -> bool:
    if fc[3:] != fb[3:]:
        return True
    bound = 1.05 * (atol * (fc[2] + fb[2]) + rtol * (fc[1] + fb[1])) + 1e-11 * (fc[1] + fb[1]) + 1e-300
    return abs(fc[0] - fb[0]) > bound


def _to_bf16(xp, x):
    """Round float32 values to bfloat16 (nearest even), returned as float32."""
    bits = x.astype(xp.float32).view(xp.uint32)
    with np.errstate(over="ignore"):
        rounded = (bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))) & xp.uint32(0xFFFF0000)
    return rounded.view(xp.float32)


def _half(xp, x, dtype: str):
    """One precision class down: float32 -> float16, float16 -> bfloat16 (as the original dtype)."""
    if dtype == "float16":
        return _to_bf16(xp, x.astype(xp.float32)).astype(xp.float16)
    return x.astype(xp.float16).astype(x.dtype)


def candidates(xp, task, sizes, ins, ref, dtype: str, atol: float, rtol: float, out: str):
    """(label, output or None when the kind does not apply, whether it is wrong)."""
    is_float = np.dtype(dtype).kind == "f"
    n = int(ref.size)
    tol = atol + rtol * xp.abs(ref)
    rms = float(xp.sqrt((ref.astype(xp.float64) ** 2).mean())) if n else 0.0
    scalars = {s.name: s.value for s in task.spec.scalars}
    yield "honest: the reference, rounded", ref.astype(dtype), False
    yield "honest: half its tolerance off, one sign", (ref + 0.5 * tol).astype(dtype) if is_float else None, False
    yield "wrong: all zero", xp.zeros(ref.shape, dtype=dtype), True
    yield "wrong: output in half precision", _half(xp, ref.astype(dtype), dtype) if is_float else None, True
    floats = {k: v for k, v in ins.items() if v.dtype.kind == "f"}
    if is_float and floats:
        lowered = {k: (_half(xp, v, v.dtype.name) if k in floats else v) for k, v in ins.items()}
        again = task.reference_module().reference(xp, **lowered, **sizes, **scalars)[out]
        yield "wrong: inputs in half precision", xp.asarray(again).astype(dtype), True
    else:
        yield "wrong: inputs in half precision", None, True
    for k in (2, 64, 4096, 1 << 20):
        c = None
        if n >= 2 * k:
            c = ref.astype(dtype).reshape(-1).copy()
            c[::k] = 0
            c = c.reshape(ref.shape)
        yield f"wrong: every {k}{'nd' if k == 2 else 'th'} element zero", c, True
    step = 1.0 if not is_float or atol == rtol == 0 else 2.0 * (atol + rtol * rms)
    yield "wrong: constant bias, 2x the tolerance at the rms (ints: 1)", (ref + step).astype(dtype), True
    inside = (ref + 0.5 * atol).astype(dtype) if is_float and atol > 0 else None
    yield "not wrong: constant bias of atol / 2", inside, False
    c = ref.astype(dtype).reshape(-1).copy()
    i = n // 3
    t_i = float(tol.reshape(-1)[i])
    c[i] = (ref.reshape(-1)[i] + (100.0 * t_i if t_i > 0 else 1.0)).astype(dtype)
    yield "wrong: one element off by 100x its tolerance (ints: 1)", c.reshape(ref.shape), True


class NumpyTester:
    """The sandbox's test in NumPy or CuPy (sandbox/judging/agreement.py)."""

    def __init__(self, xp, b, atol, rtol):
        self.xp, self.b, self.atol, self.rtol = xp, b, atol, rtol

    def __call__(self, c, key: int) -> ag.Agreement:
        return ag.agree(self.xp, c, self.b, self.atol, self.rtol, key)


class DeviceTester:
    """The sandbox's test on the GPU: the baseline output masked once, harness.cu's kernel per output and key."""

    def __init__(self, checks, b, atol, rtol):
        self.checks, self.atol, self.rtol = checks, atol, rtol
        self.keys = checks.new_keys()
        self.masked = b.copy()
        checks.mask(self.masked, self.keys)

    def __call__(self, c, key: int) -> ag.Agreement:
        return self.checks.agree(c, self.masked, self.keys, self.atol, self.rtol, key)

    def cost_ms(self, c, repeats: int = 5) -> float:
        """Median device time of one launch's test at this size: mask the stored output, then compare."""
        cp = self.checks.cp
        stream = self.checks.stream
        start, mid, end = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(repeats):
            self.checks.mask(self.masked, self.keys)  # unmasked again, untimed
            start.record(stream)
            self.checks.mask(self.masked, self.keys)
            mid.record(stream)
            self.checks.agree(c, self.masked, self.keys, self.atol, self.rtol, 1)
            end.record(stream)
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return sorted(times)[len(times) // 2]


def judge(xp, tester, b_prints: dict, c, atol, rtol, keys: list[int]) -> list[float]:
    """Share of trials each test flags ``c`` (in TESTS order); ``b_prints``: the baseline's old fingerprint per key."""
    n = int(c.size)
    v = fp = proj = both = 0
    for key in keys:
        found = tester(c, key)
        v = found.violations
        failed = bool(found.projection_failures())
        proj += failed
        both += failed or v > 0
        fp += old_fingerprint_fails(old_fingerprint(xp, c, key), b_prints[key], atol, rtol)
    sample = 1.0 - (1.0 - v / n) ** SAMPLE if n else 0.0
    t = len(keys)
    return [fp / t, sample, proj / t, float(v > 0), both / t]


def pct(x: float) -> str:
    if x == 0:
        return "0%"
    if x == 1:
        return "100%"
    return f"{100 * x:.3g}%"


def run_task(xp, name: str, cpu: bool, trials: int, rng, checks=None) -> tuple[list[str], str]:
    task = load_task(name)
    sizes = task.spec.sizes.benchmark if not cpu else max(
        task.spec.sizes.check, key=lambda s: sum(math.prod(task.shape(t, s)) for t in task.spec.inputs + task.spec.outputs))
    specs = input_specs(task, sizes, 0)
    ins = reference_inputs(xp, specs, rng.getrandbits(31))
    scalars = {s.name: s.value for s in task.spec.scalars}
    module = task.reference_module()
    ref_all = module.reference(xp, **ins, **task.env(sizes), **scalars)
    vendor = module.vendor(xp, **ins, **task.env(sizes), **scalars) if not cpu and hasattr(module, "vendor") else None
    lines, cost = [], ""
    for spec in task.spec.outputs:
        tol = task.output_tolerance(spec)
        ref = xp.asarray(ref_all[spec.name])
        b = xp.ascontiguousarray(xp.asarray(vendor[spec.name]).astype(spec.dtype)) if vendor else ref.astype(spec.dtype)
        tester = DeviceTester(checks, b, tol.atol, tol.rtol) if checks else NumpyTester(xp, b, tol.atol, tol.rtol)
        where = f"{name} {spec.name} {spec.dtype}[{'x'.join(map(str, ref.shape))}], atol {tol.atol:g}, rtol {tol.rtol:g}"
        base = "the vendor's output" if vendor else "the reference rounded"
        lines += [f"### {where} (baseline: {base})", "", "| output | " + " | ".join(TESTS) + " |",
                  "|---|" + "---|" * len(TESTS)]
        keys = [rng.getrandbits(64) for _ in range(trials)]
        b_prints = {key: old_fingerprint(xp, b, key) for key in keys}
        for label, c, _wrong in candidates(xp, task, sizes, ins, ref, spec.dtype, tol.atol, tol.rtol, spec.name):
            cells = ["n/a"] * len(TESTS) if c is None else [
                pct(x) for x in judge(xp, tester, b_prints, xp.ascontiguousarray(c), tol.atol, tol.rtol, keys)]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
        if checks:
            c = xp.ascontiguousarray(ref.astype(spec.dtype))
            cost += f"| {name} {spec.name} | {c.nbytes / 1e6:.1f} | {tester.cost_ms(c):.3f} |\n"
    return lines, cost


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="NumPy at each task's largest check size (no GPU needed)")
    ap.add_argument("--tasks", help="comma-separated tasks (default: the whole suite)")
    ap.add_argument("--trials", type=int, help="keys per output and test (default: 20 on a GPU, 5 with --cpu)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the inputs and keys")
    args = ap.parse_args(argv)
    names = args.tasks.split(",") if args.tasks else suite_names()
    unknown = [t for t in names if t not in suite_names()]
    if unknown:
        ap.error(f"unknown tasks {', '.join(unknown)} (suite tasks: {', '.join(suite_names())})")
    trials = args.trials or (5 if args.cpu else 20)
    if trials < 1:
        ap.error("--trials must be at least 1")
    rng = random.Random(args.seed)
    checks = None
    if args.cpu:
        xp = np
    else:
        try:
            import cupy as xp
            from device_harness import device_harness

            checks = device_harness()[0].agreement
        except Exception as exc:  # no CuPy, no device
            print(f"error: {type(exc).__name__}: {exc}: without a GPU, use --cpu", file=sys.stderr)
            return 3
    t0 = time.perf_counter()
    print(f"# Output tests: share of {trials} trials that flag each output "
          f"({'NumPy, largest check size' if args.cpu else 'GPU, benchmark size'})\n")
    costs = ""
    for name in names:
        lines, cost = run_task(xp, name, args.cpu, trials, rng, checks)
        print("\n".join(lines), flush=True)
        costs += cost
        if not args.cpu:
            xp.get_default_memory_pool().free_all_blocks()
    if costs:
        print("### The sandbox's test per launch at the benchmark size (mask the baseline's output, compare)\n")
        print("| task output | MB | ms |\n|---|---|---|\n" + costs)
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
