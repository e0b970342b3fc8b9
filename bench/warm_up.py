"""Does the short warm-up move a speedup? The baseline timed against itself, with the whole warm-up and with the
short one, on one GPU.

A timing stage warms up the baseline and the vendor with 3 launches only where the GPU worker timed them at the
same sizes in a stage that ended less than ``WARM_AGAIN_S`` (1 s) before (``sandbox.worker.rounds.Recent``);
otherwise each gets at least 20 ms of device time. This script evaluates each task's baseline as the candidate
``--pairs`` times two ways, in alternation in one sandbox: right after the evaluation before (the short warm-up),
and after a pause longer than ``WARM_AGAIN_S`` (the whole warm-up). A bias of the short warm-up would show as a
speedup over the baseline (or the vendor) away from the whole warm-up's, beyond the runs' spread.

    python bench/warm_up.py [--tasks vector_add,softmax,row_sum] [--pairs 4]

Prints one table per task (each evaluation: the warm-up it got, read from its warm-up launches per implementation,
and the speedups with their 95% intervals) and one summary row per task and warm-up (the median speedup over the
baseline and over the vendor). A baseline whose whole warm-up is 3 launches anyway (20 ms reached in 3) counts as
short both ways.
Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run(tasks: list[str], pairs: int) -> list[dict]:
    from sandbox import GPUSandbox, load_candidate, load_task
    from sandbox.worker.timing import WARM_AGAIN_S

    rows = []
    with GPUSandbox() as sb:
        for name in tasks:
            task = load_task(name)
            cand = load_candidate(task.baseline_path)
            sb.evaluate(task, cand)   # the baseline's correctness stage, the workers' first use at this size
            print(f"\n## {name}: the baseline as the candidate\n")
            print("| # | warm-up | warm-up launches | rounds | over the baseline | over the vendor |")
            print("|---|---|---|---|---|---|")
            for i in range(2 * pairs):
                whole = i % 2 == 1
                if whole:
                    time.sleep(WARM_AGAIN_S + 0.5)
                r = sb.evaluate(task, cand)
                if r.timing is None:
                    raise SystemExit(f"{name}: the baseline did not time: {r.status.value}: {r.error}")
                sp = r.timing.speedup
                row = dict(task=name, warm_up=kind_of(r.timing.warm_up_launches), launches=r.timing.warm_up_launches,
                           rounds=r.timing.rounds, **{k: (v.value, v.low, v.high) for k, v in sp.items()})
                rows.append(row)
                text = {k: f"{v.value:.4f}x [{v.low:.4f}, {v.high:.4f}]" for k, v in sp.items()}
                print(f"| {i} | {row['warm_up']} | {row['launches']} | {row['rounds']} | "
                      f"{text.get('baseline', '-')} | {text.get('vendor', '-')} |")
    return rows


def kind_of(launches: dict[str, int]) -> str:
    """The warm-up an evaluation got, from what its stage ran (not from the pause before it: other work of the
    sandbox between two evaluations, such as its first measurement of the GPU's ceilings, can outlast
    ``WARM_AGAIN_S`` too): ``short`` where the baseline had the minimum only."""
    from sandbox.worker.timing import WARM_UP_MIN

    return "short" if launches.get("baseline") == WARM_UP_MIN else "whole"


def summary(rows: list[dict]) -> None:
    print("\n| task | warm-up | evaluations | over the baseline, median (min, max) | "
          "over the vendor, median (min, max) |")
    print("|---|---|---|---|---|")
    for task in dict.fromkeys(r["task"] for r in rows):
        for kind in ("short", "whole"):
            got = [r for r in rows if r["task"] == task and r["warm_up"] == kind]
            cells = []
            for impl in ("baseline", "vendor"):
                v = [r[impl][0] for r in got if impl in r]
                cells.append(f"{statistics.median(v):.4f}x ({min(v):.4f}, {max(v):.4f})" if v else "-")
            print(f"| {task} | {kind} | {len(got)} | {cells[0]} | {cells[1]} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="vector_add,softmax,row_sum", help="comma-separated suite tasks")
    ap.add_argument("--pairs", type=int, default=4, help="evaluations of each warm-up per task")
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    from sandbox import load_task
    from sandbox.tasks.task import TaskError

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for name in tasks:
        try:
            if not load_task(name).has_baseline:
                ap.error(f"--tasks: {name} has no CUDA baseline to time against itself")
        except TaskError as exc:
            ap.error(f"--tasks: {str(exc).splitlines()[0]}")
    if not tasks:
        ap.error("--tasks names no task")
    summary(run(tasks, args.pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
