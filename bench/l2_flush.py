"""The L2 flush's bias: a read-only row sum timed after each way of emptying the L2, side by side.

    python bench/l2_flush.py [--rounds 30] [--sizes-mb 67,537,2147]

A memset of twice the L2 (the sandbox's old flush) leaves up to an L2 of dirty lines that the timed
launch must write back while it reads; the sandbox's flush reads a zeroed buffer of twice the L2
(``l2_flush_read`` in harness.cu), so the timed launch starts on clean lines. The row sum reads
float32[rows, 16384] and writes one float per row. Columns: median milliseconds over the
rounds (each round runs every flush in a shuffled order), and the memset's bias over the read flush.
"read 8x" (a read of eight times the L2) shows whether twice the L2 is enough to evict everything.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROW_SUM = r"""
extern "C" __global__ void row_sum(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[256];
    const float* row = x + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) s += row[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = red[0];
}
"""
COLS = 16384


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30, help="rounds per size (every flush once per round)")
    ap.add_argument("--sizes-mb", default="67,537,2147", help="comma-separated matrix sizes in MB (16384 columns)")
    args = ap.parse_args(argv)
    if args.rounds < 3:
        ap.error("--rounds must be at least 3")
    try:
        sizes = [float(s) for s in args.sizes_mb.split(",")]
    except ValueError:
        ap.error(f"--sizes-mb: expected numbers, got {args.sizes_mb!r}")
    if not sizes or min(sizes) <= 0:
        ap.error("--sizes-mb: sizes must be positive")
    from device_harness import harness_or_say

    opened = harness_or_say("bench/l2_flush.py")
    if opened is None:
        return 3
    import cupy as cp

    from sandbox.worker.guards import L2Flush

    h, _ = opened
    rng = random.Random(0)
    stream, l2, sms = h.stream, h.l2_bytes, h.sms
    read8 = L2Flush(cp, h.function, stream, sms, l2, rng, factor=8)
    junk = cp.empty(2 * l2, dtype=cp.uint8)

    def memset(value: int) -> None:
        cp.cuda.runtime.memsetAsync(junk.data.ptr, value & 0xFF, junk.nbytes, stream.ptr)

    flushes = {"none": lambda r: None, "memset 2x (old)": memset, "read 2x (new)": lambda r: h.flush_l2(),
               "read 8x": lambda r: read8()}
    kernel = cp.RawKernel(ROW_SUM, "row_sum")
    start, end = cp.cuda.Event(), cp.cuda.Event()
    print(f"L2 {l2 / 2**20:.0f} MiB, {sms} SMs; read-only row sum of float32[rows, {COLS}]; median ms over "
          f"{args.rounds} rounds\n")
    print("| MB | rows | " + " | ".join(flushes) + " | memset over read |")
    print("|---|---|" + "---|" * (len(flushes) + 1))
    for mb in sizes:
        rows = max(1, int(mb * 1e6 / (4 * COLS)))
        x = cp.random.RandomState(1).standard_normal((rows, COLS), dtype=cp.float32)
        y = cp.empty(rows, dtype=cp.float32)
        times = {name: [] for name in flushes}
        for r in range(args.rounds + 1):  # round 0 warms up
            order = list(flushes)
            rng.shuffle(order)
            for name in order:
                flushes[name](r)
                start.record(stream)
                kernel((rows,), (256,), (x, y, cp.int32(COLS)), stream=stream)
                end.record(stream)
                end.synchronize()
                if r:
                    times[name].append(cp.cuda.get_elapsed_time(start, end))
        med = {name: statistics.median(t) for name, t in times.items()}
        bias = 100 * (med["memset 2x (old)"] / med["read 2x (new)"] - 1)
        print(f"| {rows * COLS * 4 / 1e6:.0f} | {rows} | " + " | ".join(f"{med[n]:.4f}" for n in flushes)
              + f" | {bias:+.1f}% |", flush=True)
        del x, y
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
