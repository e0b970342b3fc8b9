"""What a profile's replay passes cost against the size of the profiled program: the baseline of a task with a
``rows`` size (softmax by default) at its benchmark size and with a quarter and a sixteenth of its rows, each
profiled twice with the sections and metrics in use (``ncu.SECTIONS``, ``ncu.METRICS`` and the summary's) and twice
with one metric (one pass). The table gives each run's wall, the replay passes ncu reports and the profiled
program's launches under ncu (its warm-up and the passes).

    python bench/profile_scale.py [TASK]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]
from sandbox import GPUSandbox, load_candidate, load_task  # noqa: E402
from sandbox.plumbing.tools import run_tool  # noqa: E402
from sandbox.profile import ncu  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from profile_cost import PASSES, command, profiled_program  # noqa: E402


def measure(task) -> None:
    """Each size's runs, one line as each ends, then the table."""
    cand = load_candidate(task.baseline_path)
    out = []
    with GPUSandbox() as sb:
        prof = sb.profiler
        exe = prof.config.ncu or ncu.find_ncu()
        if not exe:
            print("no ncu")
            return
        _, info, cubin = sb.builder.build(task, cand)
        env = prof._profile_env()
        full = ncu.METRICS + ncu.SUMMARY_METRICS
        for scale in (1, 4, 16):
            sizes = dict(task.spec.sizes.benchmark)
            sizes["rows"] = sizes["rows"] // scale
            _, names, count, skip, work, target = profiled_program(prof, task, cand, info, cubin, sizes, "pe-")
            cwd = work / "cwd"
            variants = [("full", ncu.SECTIONS, full), ("duration", (), ("gpu__time_duration.sum",))]
            _, _, alone = run_tool(target, cwd, env, 300)
            print(f"scale 1/{scale} {sizes}: program alone {alone:.2f} s", flush=True)
            for name, secs, mets in variants:
                for _ in range(2):
                    cmd = command(exe, names, skip, count, work / "r", target, secs, mets)
                    code, log, s = run_tool(cmd, cwd, env, 300)
                    passes = "+".join(PASSES.findall(log)) or f"?{code}"
                    split = json.loads((work / "target.json").read_text()).get("split_s", {})
                    row = dict(scale=scale, variant=name, wall=round(s, 2), passes=passes,
                               launches=round(split.get("launches", -1), 2),
                               split={k: round(v, 2) for k, v in split.items()})
                    out.append(row)
                    print(row, flush=True)
            shutil.rmtree(work, ignore_errors=True)
    print("\n| scale | variant | wall s | passes | launches s |\n|---|---|---|---|---|")
    for r in out:
        print(f"| 1/{r['scale']} | {r['variant']} | {r['wall']} | {r['passes']} | {r['launches']} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", nargs="?", default="softmax", help="a task whose sizes have rows (default softmax)")
    args = ap.parse_args(argv)
    from sandbox.tasks.task import TaskError

    try:
        task = load_task(args.task)
    except TaskError as exc:
        ap.error(str(exc).splitlines()[0])
    if "rows" not in task.spec.sizes.benchmark:
        ap.error(f"{task.name}'s benchmark size has no rows: {task.spec.sizes.benchmark}")
    measure(task)
    return 0


if __name__ == "__main__":
    sys.exit(main())
