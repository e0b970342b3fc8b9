"""What a winner's held-out check costs, size by size, and what a sandbox's start, first use and close cost.

    python bench/claim_parts.py [--start BLOCK=1024] [--leader BLOCK=512]

On the row-sum space of ``bench/throughput.py``'s optimize part (its task folder, its starting kernel), one GPU
sandbox in this process: the time to open it, the start's evaluation at the benchmark size twice (the first pays
what a sandbox's first evaluation pays: the IPC probe, the harness's kernels, the stages' first use), a leader's at
the benchmark size, then the leader at each held-out size twice, as the claim's held-out check evaluates it. Each
row gives the evaluation's wall and its parts (compile, the correctness stage's GPU seconds, the reference's, the
timing stage's), the timing stage's rounds, candidate launches and parts, then the sandbox's close. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="BLOCK=1024", help="knob values the task's starting kernel lists first")
    ap.add_argument("--leader", default="BLOCK=512", help="knob values of the leader to check")
    args = ap.parse_args(argv)
    import throughput as tp

    with tempfile.TemporaryDirectory(prefix="claim-parts-") as name:
        folder = Path(name)
        try:
            task_dir = tp.row_sum_task(folder, tp.knob_values(args.start))
            (folder / "leader.cu").write_text(tp.start_at(tp.ROW_SUM.read_text(), tp.knob_values(args.leader)))
        except ValueError as exc:
            ap.error(str(exc))
        return measure(task_dir, folder / "leader.cu", args)


def measure(task_dir: Path, leader_path: Path, args) -> int:
    from sandbox import GPUSandbox, load_candidate, load_task

    task = load_task(task_dir)
    start, leader = load_candidate(task.baseline_path), load_candidate(leader_path)
    t0 = time.perf_counter()
    try:
        sb = GPUSandbox()
    except RuntimeError as exc:
        print(f"error: {exc}: bench/claim_parts.py needs a CUDA device", file=sys.stderr)
        return 3
    opened = time.perf_counter() - t0
    rows = [("the start, benchmark size (the sandbox's first evaluation)", start, None),
            ("the start, benchmark size, again", start, None), ("the leader, benchmark size", leader, None)]
    for again in ("", ", again"):
        rows += [(f"the leader, held-out {size}{again}", leader, size) for size in task.spec.sizes.heldout]
    print(f"start {args.start}, leader {args.leader}; GPUSandbox() opened in {opened:.2f} s\n")
    print("| evaluation | status | wall s | compile s | checks GPU s | reference s | timing GPU s | rounds | "
          "candidate launches | the timing stage's parts s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with sb:
        for what, cand, sizes in rows:
            t1 = time.perf_counter()
            r = sb.evaluate(task, cand, sizes=sizes)
            wall, c, t = time.perf_counter() - t1, r.cost, r.timing
            print(f"| {what} | {r.status.value} | {wall:.3f} | {c.compile_s:.3f} | {c.check_gpu_s:.3f} | "
                  f"{c.reference_s:.3f} | {c.time_gpu_s:.3f} | {t.rounds if t else '-'} | "
                  f"{t.candidate_launches if t else '-'} | {parts(r.env.timing_split_s)} |")
        t1 = time.perf_counter()
    print(f"\nthe sandbox's close: {time.perf_counter() - t1:.2f} s")
    return 0


def parts(split: dict | None) -> str:
    """The timing stage's seconds per part (``env.timing_split_s``), the larger first, those over 5 ms."""
    kept = sorted(((v, k) for k, v in (split or {}).items() if v >= 0.005), reverse=True)
    return ", ".join(f"{k} {v:.3f}" for v, k in kept) or "-"


if __name__ == "__main__":
    sys.exit(main())
