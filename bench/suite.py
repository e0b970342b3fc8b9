"""The task suite on a GPU: every baseline and vendor library timed at its benchmark size, against the roofline.

    python bench/suite.py [TASK ...] [--out suite.md] [--budget 0.25]

Each task's baseline is evaluated by the GPU sandbox (checked at every check size and the benchmark size, then
timed interleaved with the vendor library, L2 flushed before every repetition). One row per task: benchmark
size, baseline and vendor median times with 95% intervals, each as a percentage of the roofline floor (the
task's bytes and FLOPs at the device's measured ceilings), and which side of the roofline bounds the task.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sandbox import GPUSandbox, SandboxConfig, Status, load_candidate, load_task
from sandbox.plumbing.files import atomic_write
from sandbox.tasks.task import TaskError, describe_sizes, suite_names

COLUMNS = ("task", "category", "benchmark size", "baseline ms [95%]", "vendor ms [95%]",
           "baseline % roofline", "vendor % roofline", "bound")


def _ms(impl) -> str:
    return f"{impl.median_ms:.4g} [{impl.ci_ms.low:.4g}, {impl.ci_ms.high:.4g}]" if impl else "-"


def _pct(impl) -> str:
    return f"{impl.pct_of_roofline:.1f}%" if impl and impl.pct_of_roofline is not None else "-"


def row(sb: GPUSandbox, name: str) -> tuple[list[str], str]:
    """The table row of one task, and a note (empty when the baseline is ok)."""
    task = load_task(name)
    head = [name, task.spec.category, describe_sizes(task.spec.sizes.benchmark)]
    try:
        result = sb.evaluate(task, load_candidate(task.baseline_path))
    except (TaskError, RuntimeError) as exc:  # a baseline that is not ok, or a vendor or reference that failed
        return head + ["failed", "-", "-", "-", "-"], f"{name}: {exc}"
    if result.status is not Status.ok:
        return head + [result.status.value, "-", "-", "-", "-"], f"{name}: {result.summary()}"
    t = result.timing
    base, vendor = t.impls.get("baseline"), t.impls.get("vendor")
    return head + [_ms(base), _ms(vendor), _pct(base), _pct(vendor), t.bound or "-"], ""


def markdown(rows: list[list[str]], preamble: list[str]) -> str:
    lines = preamble + ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*", help="suite tasks to run (default: all)")
    ap.add_argument("--out", help="also write the table as markdown to this file")
    ap.add_argument("--budget", type=float, default=0.25, help="seconds of baseline GPU time after which timing may stop")
    args = ap.parse_args(argv)
    known = suite_names()
    unknown = [t for t in args.tasks if t not in known]
    if unknown:
        ap.error(f"unknown tasks {', '.join(unknown)} (suite tasks: {', '.join(known)})")
    if args.budget <= 0:
        ap.error("--budget must be positive")

    console = Console()
    config = SandboxConfig(check_timeout_s=600, time_timeout_s=600, timing_budget_s=args.budget)
    rows, notes = [], []
    t0 = time.perf_counter()
    try:
        sandbox = GPUSandbox(config)
    except RuntimeError as exc:
        console.print(f"[bold red]error:[/] {exc}: bench/suite.py needs a CUDA device", highlight=False)
        return 3
    with sandbox as sb:
        for name in args.tasks or known:
            console.print(f"[dim]{name}...[/]")
            r, note = row(sb, name)
            rows.append(r)
            if note:
                notes.append(note)
        device, ceilings = sb.device, sb.ceilings
    preamble = [
        f"GPU: {device.get('gpu')} (driver {device.get('driver')}, CUDA {device.get('cuda_runtime')}, "
        f"NVRTC {device.get('nvrtc')}, CuPy {device.get('cupy')})",
        f"Ceilings measured on this GPU: copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, "
        f"read-only {(ceilings.get('read_bytes_per_s') or 0) / 1e12:.2f} TB/s (memory roofline: the higher), "
        f"FP32 {ceilings['fp32_flops'] / 1e12:.1f} TFLOP/s, FP16 tensor {ceilings['fp16_tensor_flops'] / 1e12:.0f} TFLOP/s",
        f"Command: python bench/suite.py {' '.join(argv if argv is not None else sys.argv[1:])} "
        f"({time.perf_counter() - t0:.0f} s, {time.strftime('%Y-%m-%d')})",
    ]
    table = Table(title="task suite: baseline and vendor at the benchmark size")
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*r)
    for line in preamble:
        console.print(line, highlight=False)
    console.print(table)
    for note in notes:
        console.print(f"[red]{note}[/]", highlight=False)
    if args.out:
        atomic_write(Path(args.out), markdown(rows, preamble) + "".join(f"\n{n}\n" for n in notes))
        console.print(f"markdown table written to {args.out}")
    return 1 if notes else 0


if __name__ == "__main__":
    sys.exit(main())
