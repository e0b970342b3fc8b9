"""Does kernelwright scale with GPUs? The same work through Ray on 1, 2, 4... GPUs of one machine.

    python bench/ray_scaling.py --gpus 1 2 4 --tasks gelu softmax rmsnorm layernorm row_sum transpose gemv histogram \\
        --wall-s 240 --space sgemm --space-wall-s 600 --out bench/results/ray_scaling.json
    python bench/ray_scaling.py --gpus 1 2 --sandbox fake --tasks vector_add gelu --wall-s 20   # the path, on a CPU
    python bench/ray_scaling.py --table g1.json g2.json g4.json   # one table from runs made in separate calls

For each GPU count N it runs ``kernelwright batch TASKS --ray --ray-gpus N`` with the built-in search (each task
stopped by ``--wall-s``), then ``kernelwright optimize SPACE`` on one large space (``--space-wall-s``), and prints
per configuration: fully checked candidates per hour (evaluations over the runs' own wall time, Ray's start-up
left out), GPU utilisation (NVML's utilisation of the N GPUs, sampled every half second, and the actors' own
evaluation time over wall time x N), and each task's winner with its interval. Winners whose intervals do not
overlap across GPU counts are flagged. The targets: 2 GPUs at least 1.8x the candidates per hour of one, 4 GPUs
at least 3.5x, each claim measured on one GPU (``measured_on`` in every result). Needs a machine with that many
GPUs (and the ``ray`` extra).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class GpuSampler:
    """Mean NVML utilisation (%) of GPUs 0..n-1 while it runs; None where NVML is unavailable."""

    def __init__(self, n: int):
        self.n, self.samples, self._stop = n, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.n)]
        except Exception:  # no NVML here (a CPU machine, the fake sandbox)
            return
        while not self._stop.wait(0.5):
            self.samples.append(sum(pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles) / self.n)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


def kw(*args: str) -> None:
    out = subprocess.run([sys.executable, "-m", "agent", *args], cwd=ROOT)
    if out.returncode not in (0, 1):
        raise SystemExit(f"kernelwright {' '.join(args[:2])}: exit code {out.returncode}")


def measure(run_dirs: list[Path]) -> dict:
    """Evaluations, wall seconds, the actors' evaluation seconds and each winner, from the runs' traces."""
    from agent.trace.events import EvaluationEvent, read_events
    from agent.trace.records import Summary

    evaluations, wall, busy, winners = 0, 0.0, 0.0, {}
    for run in run_dirs:
        if not (run / "summary.json").is_file():
            raise SystemExit(f"{run}: the run did not finish (no summary.json); its output is above")
        summary = Summary.model_validate_json((run / "summary.json").read_text())
        evaluations += summary.totals.evaluations
        wall += summary.totals.wall_s
        busy += sum(e.result.cost.wall_s for e in read_events(run) if isinstance(e, EvaluationEvent))
        best = summary.best
        winners[summary.task.name] = ({"id": best.id, "value": best.speedup.value, "low": best.speedup.low,
                                       "high": best.speedup.high} if best and best.speedup else None)
    return {"evaluations": evaluations, "wall_s": round(wall, 1), "busy_s": round(busy, 1), "winners": winners}


def run_config(n: int, args, traces: Path) -> dict:
    common = ["--ray", "--ray-gpus", str(n), "--sandbox", args.sandbox, "--no-sanitize", "--quiet", "--traces", str(traces)]
    row: dict = {"gpus": n}
    with GpuSampler(n) as batch_util:
        kw("batch", *args.tasks, "--budget-wall-s", str(args.wall_s), "--batch-id", f"batch-g{n}", *common)
    row["batch"] = measure([traces / f"batch-g{n}" / Path(t).name for t in args.tasks])
    row["batch"]["nvml_util"] = batch_util.mean
    if args.space:
        with GpuSampler(n) as space_util:
            kw("optimize", args.space, "--budget-wall-s", str(args.space_wall_s), "--run-id", f"space-g{n}", *common)
        row["space"] = measure([traces / f"space-g{n}"])
        row["space"]["nvml_util"] = space_util.mean
    return row


def overlap(a: dict | None, b: dict | None) -> bool:
    return a is None or b is None or (a["low"] <= b["high"] and b["low"] <= a["high"])


def report(rows: list[dict]) -> list[str]:
    lines = ["| work | GPUs | candidates | wall s | candidates/hour | x one GPU | NVML util % | actors busy % |",
             "|---|---|---|---|---|---|---|---|"]
    flags = []
    for work in ("batch", "space"):
        first = next((r[work] for r in rows if work in r), None)
        for r in rows:
            m = r.get(work)
            if m is None:
                continue
            rate = m["evaluations"] / m["wall_s"] * 3600 if m["wall_s"] else 0.0
            base = first["evaluations"] / first["wall_s"] * 3600 if first and first["wall_s"] else 0.0
            util = f"{m['nvml_util']:.0f}" if m["nvml_util"] is not None else "-"
            busy = 100 * m["busy_s"] / (m["wall_s"] * r["gpus"]) if m["wall_s"] else 0.0
            lines.append(f"| {work} | {r['gpus']} | {m['evaluations']} | {m['wall_s']:.0f} | {rate:.0f} | "
                         f"{rate / base if base else 0:.2f} | {util} | {busy:.0f} |")
            for task, win in m["winners"].items():
                for other in rows:
                    theirs = other.get(work, {}).get("winners", {}).get(task)
                    if other["gpus"] > r["gpus"] and not overlap(win, theirs):
                        flags.append(f"{work} {task}: the winner on {r['gpus']} GPU(s) {win} and on {other['gpus']} "
                                     f"{theirs} do not overlap")
    lines.append("winners: " + ("every task's winners overlap across GPU counts" if not flags else "; ".join(flags)))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--tasks", nargs="+", default=["gelu", "softmax", "rmsnorm", "layernorm", "row_sum", "transpose",
                                                   "gemv", "histogram"])
    ap.add_argument("--wall-s", type=float, default=240, help="wall budget per batch task")
    ap.add_argument("--space", default="sgemm", help="task whose large space the search explores ('' to skip)")
    ap.add_argument("--space-wall-s", type=float, default=600)
    ap.add_argument("--sandbox", default="gpu", choices=["gpu", "fake"])
    ap.add_argument("--traces", type=Path, default=Path("traces") / f"ray-scaling-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--out", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--table", type=Path, nargs="+", help="print one table from the --out files of earlier calls; run nothing")
    args = ap.parse_args()
    if args.table:
        print("\n".join(report(sorted((r for f in args.table for r in json.loads(f.read_text())), key=lambda r: r["gpus"]))))
        return
    rows = [run_config(n, args, args.traces.resolve()) for n in args.gpus]
    print(f"ray_scaling: {args.sandbox} sandbox, traces in {args.traces}")
    print("\n".join(report(rows)))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
