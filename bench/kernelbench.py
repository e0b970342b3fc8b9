"""The field's table on imported PyTorch problems: fast_p against eager and against torch.compile.

    python bench/kernelbench.py DIR --model M --base-url URL [--iterations 5] [--budget-gpu-s 120] [--out table.md]

DIR holds task folders made by ``kernelwright import`` (or KernelBench-format .py problem files, which are
imported into ``--traces``/tasks first). Every problem is optimized by ``kernelwright batch`` (one run per
problem, the budgets per problem); the batch is resumable: the same command again, or ``--resume``, skips
finished problems and continues the others. Then it prints, over all problems:

- problems correct: a candidate passed every check (with ``--sandbox compile-only`` nothing runs, so the
  table says how many compiled instead);
- fast_p for p = 1.0, 1.2, 1.5, 2.0 against PyTorch eager and against torch.compile: the share of all
  problems whose winner is correct and whose speedup interval's **low end** clears p (a point estimate
  above p is not enough);
- the geometric mean speedup of the winners over the correct problems, with a 95% bootstrap interval over
  problems;
- tokens, dollars and GPU-seconds per problem (mean and total).
Simulated runs (``--sandbox fake``) are computed the same way and marked SIMULATED.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PS = (1.0, 1.2, 1.5, 2.0)
AGAINST = ("eager", "compile")


@dataclass
class Problem:
    """One problem's outcome: its winner's speedup intervals (value, low, high) by baseline name."""

    name: str
    state: str                      # done, error, not run
    correct: bool = False
    compiled: bool = False
    speedups: dict | None = None
    tokens: int = 0
    usd: float = 0.0
    gpu_s: float = 0.0
    simulated: bool = False
    winner: str | None = None
    note: str = ""


def fast_p(problems: list[Problem], against: str, p: float) -> float:
    """Share of all problems that are correct and whose speedup interval's low end clears ``p``."""
    if not problems:
        return 0.0
    hits = sum(1 for x in problems if x.correct and x.speedups and against in x.speedups and x.speedups[against][1] > p)
    return hits / len(problems)


def geomean_ci(values: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float, float] | None:
    """Geometric mean with a percentile bootstrap interval over the values (problems); None without values."""
    logs = [math.log(v) for v in values if v > 0]
    if not logs:
        return None
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(logs, k=len(logs))) / len(logs) for _ in range(resamples))
    lo, hi = means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))]
    return math.exp(sum(logs) / len(logs)), math.exp(lo), math.exp(hi)


def summarize(problems: list[Problem]) -> dict:
    """Everything the table prints, as numbers."""
    n = len(problems)
    correct = [x for x in problems if x.correct]
    out = {"problems": n, "correct": len(correct), "compiled": sum(x.compiled for x in problems),
           "simulated": any(x.simulated for x in problems), "fast_p": {}, "geomean": {},
           "tokens": sum(x.tokens for x in problems), "usd": sum(x.usd for x in problems),
           "gpu_s": sum(x.gpu_s for x in problems)}
    for against in AGAINST:
        out["fast_p"][against] = {p: fast_p(problems, against, p) for p in PS}
        values = [x.speedups[against][0] for x in correct if x.speedups and against in x.speedups]
        out["geomean"][against] = (geomean_ci(values), len(values))
    return out


def _interval(s) -> str:
    return f"{s[0]:.3f}x [{s[1]:.3f}, {s[2]:.3f}]" if s else "-"


def render(problems: list[Problem], title: str) -> str:
    """The table as Markdown."""
    s = summarize(problems)
    n = s["problems"] or 1
    lines = [f"### {title}" + (" (SIMULATED: no figure here was measured)" if s["simulated"] else ""), ""]
    if s["correct"] == 0 and s["compiled"]:
        lines.append(f"problems compiled: {s['compiled']} of {s['problems']} (nothing ran: correctness and speed unknown)")
    else:
        lines.append(f"problems correct: {s['correct']} of {s['problems']} ({100 * s['correct'] / n:.0f}%)")
    lines += ["", "| fast_p (interval low end > p) | " + " | ".join(f"p = {p}" for p in PS) + " |",
              "|---|" + "---|" * len(PS)]
    for against in AGAINST:
        lines.append(f"| vs PyTorch {against} | " + " | ".join(f"{100 * s['fast_p'][against][p]:.0f}%" for p in PS) + " |")
    lines.append("")
    for against in AGAINST:
        g, count = s["geomean"][against]
        lines.append(f"geometric mean speedup vs {against} over {count} correct problems: "
                     + (f"{g[0]:.3f}x [{g[1]:.3f}, {g[2]:.3f}] (95% bootstrap over problems)" if g else "-"))
    lines.append(f"per problem: {s['tokens'] / n:,.0f} tokens, ${s['usd'] / n:.4f}, {s['gpu_s'] / n:.2f} GPU-s"
                 f"{' (simulated)' if s['simulated'] else ''} (totals {s['tokens']:,} tokens, ${s['usd']:.4f}, "
                 f"{s['gpu_s']:.2f} GPU-s)")
    lines += ["", "| problem | state | winner | vs eager [95%] | vs compile [95%] | tokens | $ | GPU-s | note |",
              "|---|---|---|---|---|---|---|---|---|"]
    for x in problems:
        sp = x.speedups or {}
        lines.append(f"| {x.name} | {x.state}{' (correct)' if x.correct else ''} | {x.winner or '-'} | "
                     f"{_interval(sp.get('eager'))} | {_interval(sp.get('compile'))} | {x.tokens:,} | {x.usd:.4f} | "
                     f"{x.gpu_s:.2f} | {x.note.replace('|', '/')[:80]} |")
    return "\n".join(lines) + "\n"


def read_problem(name: str, run_dir: Path, row: dict | None) -> Problem:
    """A problem's outcome from its run folder (summary.json and the winner's result.json)."""
    summary_file = run_dir / "summary.json"
    if not summary_file.is_file():
        state = (row or {}).get("state", "not run")
        return Problem(name, state, note=str((row or {}).get("stop") or ""))
    summary = json.loads(summary_file.read_text())
    t = summary["totals"]
    counts = summary.get("counts") or {}
    x = Problem(name, "done", compiled=counts.get("compiled", 0) > 0 or counts.get("ok", 0) > 0,
                tokens=t["tokens"], usd=t["usd"], gpu_s=t["gpu_s"], simulated=bool(summary.get("simulated")),
                note=str(summary.get("stop_reason") or ""))
    best = summary.get("best")
    if best:
        result = json.loads((run_dir / "candidates" / best["id"] / "result.json").read_text())
        speed = (result.get("timing") or {}).get("speedup") or {}
        x.winner, x.correct = best["id"], result["status"] == "ok"
        x.speedups = {k: (v["value"], v["low"], v["high"]) for k, v in speed.items()}
    return x


def collect(batch_dir: Path) -> list[Problem]:
    info = json.loads((batch_dir / "batch.json").read_text())
    results = info.get("results", {})
    return [read_problem(Path(t).name, batch_dir / Path(t).name, results.get(t)) for t in info["tasks"]]


def task_folders(src: Path, traces: Path) -> list[Path]:
    """Task folders in ``src``; .py problems there are imported into ``traces/tasks`` (once) and used instead."""
    folders = sorted(p for p in src.iterdir() if (p / "task.toml").is_file())
    problems = sorted(p for p in src.glob("*.py") if not p.name.startswith("_"))
    if problems:
        out = traces / "tasks"
        todo = [p for p in problems if not (out / _task_name(p) / "task.toml").is_file()]
        if todo:
            code = subprocess.call([sys.executable, "-m", "agent", "import", *map(str, todo), "-o", str(out)], cwd=ROOT)
            if code not in (0, 2):
                raise SystemExit(code)
        folders += sorted(out / _task_name(p) for p in problems if (out / _task_name(p) / "task.toml").is_file())
    return folders


def _task_name(path: Path) -> str:
    from sandbox.pytorch.importer import task_name

    return task_name(path)


BATCH_FLAGS = ("model", "base_url", "api_key_env", "iterations", "budget_tokens", "budget_usd", "budget_gpu_s",
               "budget_wall_s", "sandbox", "config", "price_in", "price_out", "ray_address", "ray_gpus")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="folder of imported task folders (or of KernelBench-format .py problems)")
    ap.add_argument("--model", help="model name on the endpoint")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint")
    ap.add_argument("--api-key-env", help="environment variable holding the API key")
    ap.add_argument("--iterations", type=int, default=5, help="model requests per problem (default 5)")
    ap.add_argument("--budget-tokens", type=int, help="tokens per problem")
    ap.add_argument("--budget-usd", type=float, help="dollars per problem")
    ap.add_argument("--budget-gpu-s", type=float, help="GPU-seconds per problem")
    ap.add_argument("--budget-wall-s", type=float, help="wall seconds per problem")
    ap.add_argument("--price-in", type=float, help="USD per million prompt tokens")
    ap.add_argument("--price-out", type=float, help="USD per million completion tokens")
    ap.add_argument("--sandbox", help="auto, gpu, compile-only or fake")
    ap.add_argument("--config", type=Path, help="run config (TOML)")
    ap.add_argument("--traces", type=Path, default=Path("traces/kernelbench"), help="folder for the batch and its runs")
    ap.add_argument("--batch-id", default=None, help="batch folder name (default: the problem folder's name)")
    ap.add_argument("--ray-address", help="spread the problems' evaluations over this Ray cluster (auto, ray://HOST:10001)")
    ap.add_argument("--ray-gpus", type=int, help="through Ray, on at most this many GPUs (a local Ray instance)")
    ap.add_argument("--tune", action="store_true", help="sweep each winner's knobs and flags after the model phase")
    ap.add_argument("--table-only", action="store_true", help="print the table of an existing batch; run nothing")
    ap.add_argument("--out", type=Path, help="also write the table (Markdown) to this file")
    args = ap.parse_args(argv)
    if not args.dir.is_dir():
        ap.error(f"{args.dir}: not a folder")
    args.traces = args.traces.resolve()
    if args.config:
        args.config = args.config.resolve()
    batch_dir = args.traces / (args.batch_id or args.dir.resolve().name)
    if not args.table_only:
        flags = []
        for key in BATCH_FLAGS:
            value = getattr(args, key)
            if value is not None:
                flags += [f"--{key.replace('_', '-')}", str(value)]
        if (batch_dir / "batch.json").is_file():
            cmd = ["batch", "--resume", str(batch_dir), "--traces", str(args.traces), "--quiet"]
        else:
            tasks = task_folders(args.dir, args.traces)
            if not tasks:
                ap.error(f"{args.dir}: no task folders and no .py problems")
            cmd = ["batch", *(str(t.resolve()) for t in tasks), "--batch-id", batch_dir.name, "--traces",
                   str(args.traces), "--quiet", *([] if args.tune else ["--no-tune"]), *flags]
        code = subprocess.call([sys.executable, "-m", "agent", *cmd], cwd=ROOT)
        if code not in (0, 1):
            return code
    if not (batch_dir / "batch.json").is_file():
        ap.error(f"{batch_dir}: no batch to tabulate")
    text = render(collect(batch_dir), f"{batch_dir.name}: {args.model or 'recorded model'}")
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
