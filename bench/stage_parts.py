"""What each step of the timing stage costs on this GPU, at a task's benchmark size.

    python bench/stage_parts.py [--task softmax] [--reps 20]

The timing stage (``sandbox/worker/timing.py``) surrounds every launch of the candidate with checks: its outputs
poisoned before, the guard bands and the input hashes after, the agreement test with the baseline's output. Each
step here is the sandbox's own code on guarded buffers at the benchmark size, run ``--reps`` times back to back:
its device time (CUDA events around the repetitions), the host's time to queue it (nothing waited for) and the
wall time with the device's work done. Then the launch paths of the stage put together: a checked launch (warm-up
and timed rounds: flush, hold, events, checks read at once), and an untimed launch (checks queued, read in
batches). A step whose wall is well above its device time is bound by the host.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax", help="a suite task; its baseline stands in for the candidate")
    ap.add_argument("--reps", type=int, default=20, help="repetitions of each step")
    ap.add_argument("--stage", type=int, default=0, metavar="N",
                    help="also run the whole timing stage N times in this process (the baseline as the candidate, "
                         "default sandbox settings) and print its parts and where the host's time went (cProfile)")
    args = ap.parse_args(argv)
    if args.reps < 2:
        ap.error("--reps must be at least 2")
    from sandbox import load_task
    from sandbox.tasks.task import TaskError

    try:
        task = load_task(args.task)
    except TaskError as exc:
        ap.error(str(exc).splitlines()[0])
    from device_harness import baseline_or_say, harness_or_say

    opened = harness_or_say("bench/stage_parts.py")
    if opened is None:
        return 3
    h, compiled = opened
    built = baseline_or_say(task, h.arch)
    if built is None:
        return 3
    cand, info, cubin = built
    step_table(h, task, cand, info, cubin, args.reps)
    h.release_cached()   # the table's buffers, freed on its return, back to the device
    if args.stage:
        whole_stage(h, task, cand, info, cubin, compiled, args.stage)
    return 0


def step_table(h, task, cand, info, cubin: bytes, reps: int) -> None:
    """Each step of the stage ``reps`` times on guarded buffers at the benchmark size, a table row each."""
    import cupy as cp

    from sandbox.candidates.plan import resolve
    from sandbox.tasks.inputs import input_specs, output_specs
    from sandbox.worker.checks import queue_violations, violations, violations_in
    from sandbox.wire import tolerances
    from sandbox.worker.harness import generate_into, poison_outputs

    bench = task.spec.sizes.benchmark
    specs, out_specs = input_specs(task, bench, 0), output_specs(task, bench)
    loaded = h.load(cubin, resolve(task, cand, info, bench))
    ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in specs}
    generate_into(h, ins, specs, 1)
    seed = 12345
    before = {n: h.hash_array(b.view, seed) for n, b in ins.items()}
    outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in out_specs}
    base = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in out_specs}
    arrays = {n: b.view for n, b in {**ins, **outs}.items()}
    scratch = loaded.alloc_scratch()
    loaded.launch({n: b.view for n, b in {**ins, **base}.items()}, scratch)
    checks = h.agreement
    keys = {n: checks.new_keys() for n in base}
    for n, b in base.items():
        checks.mask(b.view, keys[n])
    tol = tolerances(task)
    groups = {"input": ins, "output": outs, "scratch": scratch}
    rng = random.Random(0)
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def agree_queued():
        return {n: checks.queue(b.view, base[n].view, keys[n], tol[n].atol, tol[n].rtol, rng.getrandbits(64))
                for n, b in outs.items()}

    def timed_launch():
        h.flush_l2()
        h.hold.hold()
        try:
            start.record(h.stream)
            loaded.launch(arrays, scratch)
            end.record(h.stream)
        finally:
            h.hold.release()
        end.synchronize()

    def checked_launch():  # warm-up and timed rounds: poison, flush, hold, launch, checks read at once
        poison_outputs(outs, out_specs, second=False)
        timed_launch()
        violations(h, groups, before, seed)
        for n, b in outs.items():
            checks.agree(b.view, base[n].view, keys[n], tol[n][0], tol[n][1], rng.getrandbits(64))

    batch: list = []
    vendor = getattr(task.reference_module(), "vendor", None)

    def untimed_launch():  # checks queued behind the launch, read 16 launches at a time
        poison_outputs(outs, out_specs, second=False)
        loaded.launch(arrays, scratch)
        batch.append((queue_violations(h, groups, before, seed), agree_queued()))
        if len(batch) == 16:
            flush_batch()

    def flush_batch():
        if batch:
            parts = [p for q, rows in batch for p in (q.values, *rows.values())]
            host = cp.concatenate(parts).get()
            violations_in(batch[0][0], host[: batch[0][0].values.size].tolist())
            batch.clear()

    steps = [
        ("generate one input set", lambda: generate_into(h, ins, specs, rng.getrandbits(32))),
        ("hash the inputs", lambda: [h.hash_array(b.view, seed) for b in ins.values()]),
        ("poison the outputs", lambda: poison_outputs(outs, out_specs, second=False)),
        ("L2 flush", h.flush_l2),
        ("the kernel (baseline) launched", lambda: loaded.launch(arrays, scratch)),
        ("guard bands + input hashes, queued", lambda: queue_violations(h, groups, before, seed)),
        ("agreement test, queued", agree_queued),
        ("mask a baseline output", lambda: [checks.mask(b.view, keys[n]) for n, b in base.items()]),
        *([("the vendor's call", lambda: vendor(cp, **{n: b.view for n, b in ins.items()}, **task.env(bench),
                                                **{x.name: x.value for x in task.spec.scalars}))]
          if vendor else []),
        ("timed launch (flush, hold, events, wait)", timed_launch),
        ("checked launch (warm-up, timed rounds)", checked_launch),
        ("untimed launch (checks read 16 at a time)", untimed_launch),
    ]
    bytes_in = sum(b.nbytes for b in ins.values())
    bytes_out = sum(b.nbytes for b in outs.values())
    print(f"{task.name} at its benchmark size {bench}: inputs {bytes_in / 2**30:.2f} GiB, outputs "
          f"{bytes_out / 2**30:.2f} GiB; ms per repetition over {reps} (the untimed launch over whole batches of 16)\n")
    print("| step | device ms | host ms to queue | wall ms |")
    print("|---|---|---|---|")
    for label, step in steps:
        # warm: CuPy compiles its kernels on first use; the untimed launch a whole batch of them (its read-back
        # joins 16 launches' checks, a shape of its own), and it is measured over whole batches, as the stage runs it
        batched = step is untimed_launch
        for _ in range(16 if batched else 1):
            step()
        flush_batch()
        h.sync()
        n = -(-reps // 16) * 16 if batched else reps
        queued = []
        start_all, end_all = cp.cuda.Event(), cp.cuda.Event()
        start_all.record(h.stream)
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            step()
            queued.append(time.perf_counter() - t)
        flush_batch()
        end_all.record(h.stream)
        end_all.synchronize()
        wall = time.perf_counter() - t0
        device = cp.cuda.get_elapsed_time(start_all, end_all) / n
        print(f"| {label} | {device:.3f} | {1e3 * statistics.median(queued):.3f} | "
              f"{1e3 * wall / n:.3f} |", flush=True)


def whole_stage(h, task, cand, info, cubin: bytes, compiled: tuple, n: int) -> None:
    """The timing stage as the GPU worker runs it, ``n`` times, under cProfile after the first."""
    import cProfile
    import pstats
    import tempfile

    from sandbox.candidates.plan import resolve
    from sandbox.host.config import SandboxConfig
    from sandbox.host.timing import timing_request
    from sandbox.wire import HarnessCode, Timed
    from sandbox.worker.timing import run_timing

    bench = task.spec.sizes.benchmark
    plan = resolve(task, cand, info, bench)
    rng = random.Random(1)
    harness = HarnessCode(*compiled)   # what this process's Harness was built from
    prof = cProfile.Profile()
    print(f"\nthe whole timing stage, {n} times (the baseline as the candidate):\n")
    print("| run | rounds | candidate launches | seconds | parts |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as data:
        for i in range(n):
            req = timing_request(task, bench, cubin, plan, (cand, info, cubin), SandboxConfig(), rng, harness,
                                 True, data)
            t0 = time.perf_counter()
            if i:
                prof.enable()
            reply = run_timing(h, req)
            prof.disable()
            took = time.perf_counter() - t0
            if not isinstance(reply, Timed):
                print(f"| {i} | failed: {reply} |")
                continue
            parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(reply.split_s.items(), key=lambda kv: -kv[1]))
            print(f"| {i} | {reply.rounds} | {reply.launches} | {took:.3f} | {parts} |", flush=True)
            h.handed.clear()  # the copies kept for the reference worker (by IPC handle): none reads them here
    print("\nwhere the host's time went (cProfile over the runs after the first, by own time):\n")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    sys.exit(main())
