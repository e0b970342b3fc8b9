"""What drawing one input costs on this GPU, by distribution, with this checkout's code and, beside it, another
revision's.

    python bench/input_draws.py [--rows 32768] [--cols 8192] [--against REV] [--reps 10]

Every timing round of the timing stage draws a fresh input set (``sandbox.tasks.inputs``) into the round's
buffers. This times one float32 input of rows x cols drawn into a buffer, for each kind the stage draws on a GPU in
place (normal with an offset, as softmax's "large" inputs; uniform; wide), then the kinds drawn only at check and
held-out sizes (rows, ties, kinks: by array expressions, not one pass): device ms (CUDA events, median of ``--reps``)
and the write rate. ``--against REV``: the same draws by ``sandbox/tasks/inputs.py`` as it is at git revision REV
(before the keyed generator: ``--against 249e55b``; a kind REV does not know is left blank). It also checks that a
draw into a buffer has the bits of a new array, that a uniform draw stays in its bounds, and that the device draw
has the bits of the NumPy definition on the host (on the first million elements).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = {"normal": dict(offset=40.0, scale=2.0), "uniform": dict(low=-1.0, high=2.0, offset=0.0),
         "wide": dict(offset=0.0, scale=1.0), "rows": dict(scale=3.0), "ties": dict(scale=1.0),
         "kinks": dict(offset=0.0)}
TIMED = ("normal", "uniform", "wide")   # the kinds a timed round draws


def module_at(rev: str):
    """``sandbox/tasks/inputs.py`` at git revision ``rev`` (or the file at that path, for a checkout without its
    history), imported as a module of its own."""
    try:
        text = Path(rev).read_text() if Path(rev).is_file() else subprocess.run(["git", "show", f"{rev}:sandbox/tasks/inputs.py"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ValueError(f"cannot read sandbox/tasks/inputs.py at {rev!r}: "
                         f"{(getattr(exc, 'stderr', '') or str(exc)).strip()}") from None
    with tempfile.TemporaryDirectory() as folder:   # executed once imported: the file is not needed after
        path = Path(folder) / "inputs_at_rev.py"
        path.write_text(text.replace("from .dtypes import", "from sandbox.tasks.dtypes import")
                        .replace("from . import keyed", "from sandbox.tasks import keyed"))
        spec = importlib.util.spec_from_file_location("inputs_at_rev", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def draw_into(module, cp, spec: dict, seed: int, buf) -> None:
    """The draw as the GPU worker of that code made it: in place where ``generate`` takes an array, else a new
    array copied into the buffer."""
    if "out" in inspect.signature(module.generate).parameters:
        module.generate(cp, spec, seed, buf)
    else:
        buf[...] = module.generate(cp, spec, seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=32768, help="rows of the input (softmax's benchmark: 32768)")
    ap.add_argument("--cols", type=int, default=8192, help="columns of the input (softmax's benchmark: 8192)")
    ap.add_argument("--against", metavar="REV", help="also time the draws of this git revision's code (or of an "
                    "inputs.py file at this path)")
    ap.add_argument("--reps", type=int, default=10, help="repetitions of each draw")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.cols < 1 or args.reps < 1:
        ap.error("--rows, --cols and --reps must be at least 1")
    try:
        other = module_at(args.against) if args.against else None
    except ValueError as exc:
        ap.error(str(exc))
    try:
        import cupy as cp

        cp.cuda.Device().synchronize()
    except Exception as exc:  # no CuPy, no device
        print(f"error: {type(exc).__name__}: {exc}: bench/input_draws.py needs a CUDA device", file=sys.stderr)
        return 3
    import numpy as np

    from sandbox.tasks import inputs
    from sandbox.worker.ceilings import _time as event_s   # median CUDA-event seconds after a warm-up

    shape = [args.rows, args.cols]
    gib = args.rows * args.cols * 4 / 2**30
    print(f"one float32 input of {args.rows} x {args.cols} ({gib:.2f} GiB) drawn into a buffer; device ms, median "
          f"of {args.reps}")
    head = "| kind | this checkout ms | GB/s written |" + (f" at {args.against} ms | this / that |" if other else "")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for kind, params in KINDS.items():
        spec = dict(name="x", dtype="float32", shape=shape, dist=kind, kind=kind, low=-1.0, high=1.0, scale=1.0,
                    offset=0.0)
        spec.update(params)
        buf = cp.empty(shape, cp.float32)
        ms = 1e3 * event_s(cp, lambda: inputs.generate(cp, spec, 12345, buf), args.reps)
        row = f"| {kind} | {ms:.3f} | {gib * 2**30 / ms / 1e6:.0f} |"
        if other is not None and kind in TIMED:
            before = 1e3 * event_s(cp, lambda: draw_into(other, cp, spec, 12345, buf), args.reps)
            row += f" {before:.3f} | {ms / before:.2f}x |"
        elif other is not None:
            row += " | |"
        print(row)
        new = inputs.generate(cp, spec, 777)
        inputs.generate(cp, spec, 777, buf)
        if not bool((new == buf).all()):
            print(f"error: a {kind} draw into a buffer differs from a new array's", file=sys.stderr)
            return 1
        if kind == "uniform" and not (params["low"] <= float(buf.min()) and float(buf.max()) <= params["high"]):
            print(f"error: a uniform draw left [{params['low']}, {params['high']}]", file=sys.stderr)
            return 1
        small = dict(spec, shape=[1 << 20])
        host, device = inputs.generate(np, small, 777), inputs.generate(cp, small, 777).get()
        if not np.array_equal(host.view(np.uint32), device.view(np.uint32)):
            print(f"error: a {kind} draw on the device differs from its NumPy definition", file=sys.stderr)
            return 1
        del new, buf
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
