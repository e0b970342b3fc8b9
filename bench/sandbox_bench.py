"""Sandbox throughput and repeatability on a GPU.

Throughput: evaluate a stream of small candidates (the vector_add baseline with its knob values,
and honest variants) at a small benchmark size, end to end (compile, checks, A/B timing), and
report evaluated candidates per GPU-hour with the time split by stage.

Repeatability: measure the same kernel in two separate sandboxes (fresh worker processes) and
compare the medians.

At the benchmark size (--at-benchmark TASK): evaluate the task's baseline at each of its knob values
with the sandbox's default settings, as a model's candidate is evaluated, and split each evaluation's wall time
(compile, the correctness stage's launches, the reference worker, the timing stage, the rest), then each stage
inside its worker (the correctness stage, the reference worker, the timing stage: seconds per part); --profile
also profiles each with Nsight Compute, as a run profiles a new best.

    python bench/sandbox_bench.py [--candidates 40] [--size 1048576] [--task softmax]
    python bench/sandbox_bench.py --at-benchmark softmax [--candidates 4] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task

ROOT = Path(__file__).resolve().parent.parent


def throughput(n_candidates: int, size: int) -> dict:
    task = load_task("vector_add")
    base = load_candidate(task.baseline_path)
    honest = load_candidate(ROOT / "tests" / "cheats" / "honest_vectorized.cu")
    variants = [base.with_knobs({"BLOCK": b}) for b in base.knobs["BLOCK"]]
    variants += [honest.with_knobs({"BLOCK": b}) for b in honest.knobs["BLOCK"]]
    flags = [(), ("--extra-device-vectorization",), ("--ptxas-options=-O2",), ("--fmad=false",), ("--restrict",)]
    stream = []
    while len(stream) < n_candidates:
        for f in flags:
            for v in variants:
                stream.append(v.with_flags(f))
    stream = stream[:n_candidates]
    split = dict(compile=0.0, check=0.0, time=0.0, other=0.0)
    statuses = {}
    with GPUSandbox(SandboxConfig(timing_budget_s=0.02, max_rounds=20)) as sb:
        sb.evaluate(task, base, sizes={"n": size})  # baseline checked, workers warm
        t0 = time.perf_counter()
        for cand in stream:
            r = sb.evaluate(task, cand, sizes={"n": size})
            statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
            split["compile"] += r.cost.compile_s
            split["check"] += r.cost.check_gpu_s
            split["time"] += r.cost.time_gpu_s
            split["other"] += max(0.0, r.cost.wall_s - r.cost.compile_s - r.cost.check_gpu_s - r.cost.time_gpu_s)
        wall = time.perf_counter() - t0
    return dict(n=len(stream), wall=wall, per_hour=len(stream) / wall * 3600, split=split, statuses=statuses)


def at_benchmark(task_name: str, n_candidates: int, profile: bool = False) -> tuple[list[dict], dict]:
    """Default-settings evaluations of the baseline's knob values at the benchmark size, one row each (and with
    ``profile``, an Nsight Compute profile of each, as a run profiles a new best); and how outputs travelled."""
    task = load_task(task_name)
    base = load_candidate(task.baseline_path)
    name, values = next(iter(base.knobs.items()), (None, ()))
    stream = [base.with_knobs({name: v}) for v in values][:n_candidates] if name else [base]
    rows = []
    with GPUSandbox(SandboxConfig()) as sb:
        sb.evaluate(task, base)  # the baseline checked, ceilings measured, workers warm
        for cand in stream:
            checks_before, reference_before = dict(sb.check_split_s), dict(sb.referee.split_s)
            t0 = time.perf_counter()
            r = sb.evaluate(task, cand)
            wall = time.perf_counter() - t0
            c = r.cost
            row = dict(config=" ".join(f"{k}={v}" for k, v in cand.defines().items()) or "defaults",
                       status=r.status.value, rounds=r.timing.rounds if r.timing else 0, wall=wall,
                       compile=c.compile_s, check=c.check_gpu_s, time=c.time_gpu_s, reference=c.reference_s,
                       other=max(0.0, wall - c.compile_s - c.check_gpu_s - c.time_gpu_s - c.reference_s),
                       timing_split=r.env.timing_split_s or {},
                       hold=r.env.launch_hold.model_dump() if r.env.launch_hold else {},
                       check_split=_since(sb.check_split_s, checks_before),
                       reference_split=_since(sb.referee.split_s, reference_before))
            if profile:
                prof = sb.profile(task, cand, result=r)
                row.update(profile=prof.seconds, profile_status=prof.status, profile_split=prof.stage_seconds,
                           program_split=prof.program_seconds, pages=prof.pages or "-")
            rows.append(row)
        transport = dict(ipc=sb.referee.ipc, why_not=sb.referee.ipc_error)
    return rows, transport


def _since(now: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in now.items() if v - before.get(k, 0.0) > 0}


def _split_table(title: str, rows: list[dict], key: str, note=None) -> None:
    """One table of seconds per part (``key`` of each row), parts as columns, ``other`` last."""
    parts = sorted({k for r in rows for k in r[key]}, key=lambda k: (k == "other", k))
    if not parts:
        return
    print(f"\n{title} (seconds per part):")
    print("| configuration | " + " | ".join(parts) + (" | " + note[0] if note else "") + " |")
    print("|---|" + "---|" * (len(parts) + bool(note)))
    for r in rows:
        print(f"| {r['config']} | " + " | ".join(f"{r[key].get(k, 0.0):.3f}" for k in parts)
              + (f" | {note[1](r)}" if note else "") + " |")


def repeatability(task_name: str, runs: int = 2) -> list[float]:
    task = load_task(task_name)
    cand = load_candidate(task.baseline_path)
    medians = []
    for _ in range(runs):
        with GPUSandbox(SandboxConfig(timing_budget_s=1.0, min_rounds=30, max_rounds=100, target_ci=0.0, vendor=False)) as sb:
            r = sb.evaluate(task, cand)
            assert r.status is Status.ok, r.summary()
            medians.append(r.timing.impls["candidate"].median_ms)
    return medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--size", type=int, default=1 << 20, help="vector_add n for the throughput stream")
    ap.add_argument("--task", default="softmax", help="task whose baseline is measured twice")
    ap.add_argument("--at-benchmark", metavar="TASK", help="only: evaluations at TASK's benchmark size, split by stage")
    ap.add_argument("--profile", action="store_true", help="with --at-benchmark: profile each candidate too (ncu)")
    args = ap.parse_args()

    if args.at_benchmark:
        rows, transport = at_benchmark(args.at_benchmark, args.candidates, args.profile)
        how = "CUDA IPC handles" if transport["ipc"] else f"files (no IPC: {transport['why_not'] or 'refused'})"
        print(f"\n{args.at_benchmark} at its benchmark size, default sandbox settings (seconds per evaluation; large "
              f"outputs reached the reference worker by {how}):")
        extra = " profile | ncu run / imports |" if args.profile else ""
        print("| configuration | status | rounds | wall | compile | check launches | reference | timing stage | other |"
              + extra)
        print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.profile else ""))
        for r in rows:
            line = (f"| {r['config']} | {r['status']} | {r['rounds']} | {r['wall']:.2f} | {r['compile']:.2f} | "
                    f"{r['check']:.2f} | {r['reference']:.2f} | {r['time']:.2f} | {r['other']:.2f} |")
            if args.profile:
                split = r.get("profile_split") or {}
                line += (f" {r['profile']:.2f} ({r['profile_status']}, pages {r['pages']}) | "
                         f"{split.get('profile', 0):.2f} / "
                         f"{split.get('import', 0):.2f} |")
            print(line)
        walls = sorted(r["wall"] for r in rows)
        print(f"median wall {statistics.median(walls):.2f} s over {len(rows)} evaluations"
              + (f"; median profile {statistics.median(r['profile'] for r in rows):.2f} s" if args.profile else ""))
        _split_table("the correctness stage inside the GPU worker", rows, "check_split")
        _split_table("the reference worker (the correctness stage's and the timing stage's full comparisons)", rows,
                     "reference_split")
        if args.profile:
            _split_table("the profiled program under Nsight Compute", rows, "program_split")
        _split_table("the timing stage inside the GPU worker (launches held: sandbox.worker.guards.StreamHold)", rows,
                     "timing_split", ("holds (ran out)",
                                      lambda r: f"{r['hold'].get('held', 0)} ({r['hold'].get('ran_out', 0)})"))
        return

    tp = throughput(args.candidates, args.size)
    print(f"\nthroughput: {tp['n']} candidates (vector_add, n={args.size}) in {tp['wall']:.1f} s "
          f"-> {tp['per_hour']:.0f} evaluated candidates per GPU-hour; statuses {tp['statuses']}")
    print("| stage | seconds | share |")
    print("|---|---|---|")
    for k, v in tp["split"].items():
        print(f"| {k} | {v:.2f} | {100 * v / tp['wall']:.1f}% |")

    med = repeatability(args.task)
    spread = abs(med[0] - med[1]) / statistics.mean(med) * 100
    print(f"\nrepeatability ({args.task} baseline, benchmark size, two separate sandboxes):")
    print("| run | median ms |")
    print("|---|---|")
    for i, m in enumerate(med, 1):
        print(f"| {i} | {m:.4f} |")
    print(f"difference between the medians: {spread:.2f}%")


if __name__ == "__main__":
    main()
