"""What Ray adds to each evaluation: the same candidates judged by one sandbox in this process and by a
``RaySandbox`` with one GPU actor, alternating, each judged as the agent's loop judges it (compile, then
evaluate; with Ray the compile is a CPU task and the evaluation a call to the actor).

    python bench/ray_overhead.py                       # GPU sandbox, vector_add's baseline, 6 evaluations a side
    python bench/ray_overhead.py --sandbox fake        # no GPU: the fake sandbox on a local cluster with fake GPUs
    python bench/ray_overhead.py --task softmax --evaluations 4 --sizes rows=4096,cols=4096

It prints, per side, the median wall time per candidate (compile + evaluate, as the driver sees it), the
evaluation's own wall time inside the sandbox, the paired difference (Ray minus local, per candidate) with its
range, the round trip of an empty call to the actor, and the one-time cost of starting each side. Both sides
hold the GPU at once but evaluate one after the other, never together.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.cli.app import BadInput, parse_sizes  # noqa: E402
from sandbox import SandboxConfig, load_candidate, load_task, open_sandbox  # noqa: E402
from sandbox.tasks.task import TaskError  # noqa: E402


def judge_once(sandbox, task, cand, sizes) -> tuple[float, float, str]:
    """(driver wall s, the evaluation's own wall s, status) of compile + evaluate."""
    t0 = time.perf_counter()
    compiled = sandbox.compile(task, cand)
    result = sandbox.evaluate(task, cand, sizes=sizes) if compiled.status.value == "compiled" else compiled
    return time.perf_counter() - t0, result.cost.wall_s, result.status.value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sandbox", default="gpu", choices=["gpu", "fake"])
    ap.add_argument("--task", default="vector_add")
    ap.add_argument("--evaluations", type=int, default=6, help="candidates judged on each side")
    ap.add_argument("--sizes", help="timed size, e.g. n=1048576 (default: the task's benchmark size)")
    ap.add_argument("--address", default="local", help="Ray address (default: a local instance for this bench)")
    args = ap.parse_args()
    from sandbox.cluster import RaySandbox

    task = load_task(args.task)
    try:
        sizes = parse_sizes(args.sizes, task)
    except (BadInput, TaskError) as exc:
        ap.error(str(exc))
    cand = load_candidate(task.baseline_path)
    config = SandboxConfig()
    t0 = time.perf_counter()
    local = open_sandbox(args.sandbox, config)
    start_local = time.perf_counter() - t0
    t0 = time.perf_counter()
    ray_sb = RaySandbox(args.sandbox, config, address=args.address, gpus=1)
    start_ray = time.perf_counter() - t0
    try:
        for sb in (local, ray_sb):  # warm: the baseline checked, workers started, ceilings measured
            judge_once(sb, task, cand, sizes)
        rows = {"local": [], "ray": []}
        for i in range(args.evaluations):
            order = (("local", local), ("ray", ray_sb)) if i % 2 == 0 else (("ray", ray_sb), ("local", local))
            for name, sb in order:
                rows[name].append(judge_once(sb, task, cand, sizes))
        actor = next(iter(ray_sb.pool.actors.values())).handle
        trips = []
        for _ in range(20):
            t0 = time.perf_counter()
            ray_sb.ray.get(actor.hello.remote())
            trips.append(time.perf_counter() - t0)
    finally:
        ray_sb.close()
        local.close()
    diffs = [r[0] - l[0] for l, r in zip(rows["local"], rows["ray"])]
    print(f"ray_overhead: {args.sandbox} sandbox, task {task.name}, {args.evaluations} evaluations a side"
          f"{' at ' + args.sizes if args.sizes else ' at the benchmark size'}; statuses "
          f"{sorted({r[2] for side in rows.values() for r in side})}")
    print("| side | per candidate, driver (median s) | evaluation inside the sandbox (median s) | start-up s |")
    print("|---|---|---|---|")
    for name, start in (("local", start_local), ("ray", start_ray)):
        print(f"| {name} | {statistics.median(r[0] for r in rows[name]):.3f} | "
              f"{statistics.median(r[1] for r in rows[name]):.3f} | {start:.1f} |")
    print(f"Ray adds per evaluation: median {statistics.median(diffs) * 1e3:.1f} ms "
          f"(paired, {min(diffs) * 1e3:.1f} to {max(diffs) * 1e3:.1f} ms); "
          f"an empty call to the actor: median {statistics.median(trips) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
