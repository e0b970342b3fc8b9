"""Host latency in a timed launch: the sandbox's old way of timing against the stream hold, side by side.

    python bench/launch_hold.py [--task vector_add] [--sizes n=65536,n=1048576,n=16777216] [--rounds 50]

The old way synchronised after the L2 flush, then recorded the start event and launched: the GPU sat idle
between the two while the host packed the arguments and went through the launch path, and that wait was
timed with the kernel. The sandbox now queues a one-thread hold kernel first (``guards.StreamHold``), so the
whole launch is queued before its start event runs. The kernel is the task's baseline launched through the
sandbox's own path (``harness.Loaded``) at each size; each round times it once each way, in a shuffled order,
after an L2 flush. Columns: median ms each way, their difference (the host latency the old way timed), and
that difference as a share of the held time: what the old way added to every figure, and so how much it pulled
a speedup toward 1.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="vector_add", help="a suite task whose baseline is timed")
    ap.add_argument("--sizes", default="n=65536;n=1048576;n=16777216",
                    help="sizes separated by ';', each as the CLI takes them (name=value,...)")
    ap.add_argument("--rounds", type=int, default=50, help="rounds per size (each way once per round)")
    args = ap.parse_args(argv)
    if args.rounds < 3:
        ap.error("--rounds must be at least 3")
    from agent.cli.app import BadInput, parse_sizes
    from sandbox import load_task
    from sandbox.tasks.task import TaskError

    try:
        task = load_task(args.task)
        sizes = [parse_sizes(part, task) for part in args.sizes.split(";")]
    except (BadInput, TaskError, ValueError) as exc:
        ap.error(str(exc).splitlines()[0])
    from device_harness import baseline_or_say, harness_or_say

    opened = harness_or_say("bench/launch_hold.py")
    if opened is None:
        return 3
    import cupy as cp

    h, _ = opened
    if h.hold is None:
        print(f"error: the stream hold cannot be set up here: {h.hold_error}", file=sys.stderr)
        return 3
    from sandbox.tasks.inputs import input_specs, output_specs
    from sandbox.candidates.plan import resolve
    from sandbox.worker.harness import generate_into

    built = baseline_or_say(task, h.arch)
    if built is None:
        return 3
    cand, info, cubin = built
    rng = random.Random(0)
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def timed(loaded, arrays, scratch, held: bool) -> float:
        h.flush_l2()
        if held:
            h.hold.hold()
        else:
            h.sync()
        try:
            start.record(h.stream)
            loaded.launch(arrays, scratch)
            end.record(h.stream)
        finally:
            if held:
                h.hold.release()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end)

    print(f"{task.name}'s baseline through the sandbox's launch path; median ms over {args.rounds} rounds\n")
    print("| sizes | synchronised, then launched (old) | held (now) | old minus held, µs | share of held |")
    print("|---|---|---|---|---|")
    for s in sizes:
        loaded = h.load(cubin, resolve(task, cand, info, s))
        ins = {spec["name"]: h.alloc(spec["dtype"], spec["shape"]) for spec in input_specs(task, s, 0)}
        generate_into(h, ins, input_specs(task, s, 0), 1)
        outs = {spec["name"]: h.alloc(spec["dtype"], spec["shape"]) for spec in output_specs(task, s)}
        arrays = {n: b.view for n, b in {**ins, **outs}.items()}
        scratch = loaded.alloc_scratch()
        times = {True: [], False: []}
        for r in range(args.rounds + 1):  # round 0 warms up
            ways = [True, False]
            rng.shuffle(ways)
            for held in ways:
                ms = timed(loaded, arrays, scratch, held)
                if r:
                    times[held].append(ms)
        old, new = statistics.median(times[False]), statistics.median(times[True])
        label = ",".join(f"{k}={v}" for k, v in s.items())
        print(f"| {label} | {old:.4f} | {new:.4f} | {1e3 * (old - new):.1f} | {100 * (old - new) / new:+.1f}% |",
              flush=True)
        del ins, outs, arrays, scratch
        cp.get_default_memory_pool().free_all_blocks()
    if h.hold.ran_outs:
        print(f"\n{h.hold.ran_outs} of {h.hold.held} holds ran out before the host released them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
