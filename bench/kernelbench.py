"""The field's table on imported PyTorch problems: fast_p against eager and against torch.compile.

    python bench/kernelbench.py DIR --model M --base-url URL [--iterations 5] [--budget-gpu-s 120]
                                [--torch-tf32 off|default|on] [--out table.md]

DIR holds task folders made by ``kernelwright import`` (or KernelBench-format .py problem files, which are
imported into ``--traces``/tasks first; a problem the importer refuses is listed with the reason and counts as
not correct). Every imported problem is optimized by ``kernelwright batch`` (one run per problem, the budgets
per problem); the batch is resumable: the same command again, or ``--resume``, skips finished problems and
continues the others. Then it prints, over **every problem given** (imported or not):

- problems correct: a candidate passed every check (with ``--sandbox compile-only`` nothing runs, so the
  table says how many compiled instead);
- fast_p for p in 0, 0.5, 0.8, 1, 1.2, 1.5, 2 against PyTorch eager and against torch.compile, both ways:
  KernelBench's rule (correct, and the mean baseline time over the mean candidate time above p) and ours
  (correct, and the speedup interval's **low end** above p: a point estimate above p is not enough);
- the TF32 mode eager and torch.compile were timed in (``--torch-tf32``: off, the default here, is float32
  arithmetic; ``default`` is PyTorch's defaults, cuDNN convolutions in TF32, as KernelBench times eager);
- the geometric mean speedup of the winners over the correct problems, with a 95% bootstrap interval over
  problems;
- tokens, dollars and GPU-seconds per problem (mean and total), and the problems refused at import.
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

PS = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0)
AGAINST = ("eager", "compile")
RULES = {"mean": "KernelBench's rule (mean speedup > p)", "interval": "interval low end > p"}
TF32_NAMES = {"off": "TF32 off (float32 arithmetic)",
              "default": "PyTorch's default TF32 settings (cuDNN convolutions in TF32, matmuls not; as KernelBench)",
              "on": "TF32 on (matmuls and convolutions)"}
REFUSED = "refused.json"   # in --traces/tasks: problem file name -> why the importer refused it


@dataclass
class Problem:
    """One problem's outcome: its winner's speedup intervals (value, low, high) by baseline name."""

    name: str
    state: str                      # done, error, not run, refused (at import)
    correct: bool = False
    compiled: bool = False
    speedups: dict | None = None
    mean_speedups: dict | None = None   # baseline name -> mean baseline time over mean candidate time (KernelBench's)
    tf32: str | None = None             # the TF32 mode the PyTorch baselines were timed in
    tokens: int = 0
    usd: float = 0.0
    gpu_s: float = 0.0
    simulated: bool = False
    winner: str | None = None
    note: str = ""


def fast_p(problems: list[Problem], against: str, p: float, rule: str = "interval") -> float:
    """Share of all problems given that are correct and faster than ``p`` times the baseline ``against``: by
    ``rule`` ``interval``, the low end of the speedup's interval clears ``p``; by ``mean`` (KernelBench's), the
    mean baseline time over the mean candidate time does."""
    if not problems:
        return 0.0
    return sum(1 for x in problems if x.correct and _speedup(x, against, rule) > p) / len(problems)


def _speedup(x: Problem, against: str, rule: str) -> float:
    if rule == "mean":
        return (x.mean_speedups or {}).get(against, -math.inf)
    s = (x.speedups or {}).get(against)
    return s[1] if s else -math.inf


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
           "refused": {x.name: x.note for x in problems if x.state == "refused"},
           "tf32": sorted({x.tf32 for x in problems if x.tf32}),
           "simulated": any(x.simulated for x in problems), "fast_p": {}, "geomean": {},
           "tokens": sum(x.tokens for x in problems), "usd": sum(x.usd for x in problems),
           "gpu_s": sum(x.gpu_s for x in problems)}
    for against in AGAINST:
        out["fast_p"][against] = {rule: {p: fast_p(problems, against, p, rule) for p in PS} for rule in RULES}
        values = [x.speedups[against][0] for x in correct if x.speedups and against in x.speedups]
        out["geomean"][against] = (geomean_ci(values), len(values))
    return out


def _interval(s) -> str:
    return f"{s[0]:.3f}x [{s[1]:.3f}, {s[2]:.3f}]" if s else "-"


def tf32_line(recorded: list[str], configured: str | None) -> str:
    """Which TF32 mode eager and torch.compile were timed in: as the results record it, else as configured."""
    if len(recorded) > 1:
        return "PyTorch eager and torch.compile timed in MIXED TF32 modes: " + ", ".join(recorded)
    if recorded:
        return f"PyTorch eager and torch.compile timed with {TF32_NAMES[recorded[0]]}"
    mode = configured or "off"
    return f"PyTorch eager and torch.compile to be timed with {TF32_NAMES[mode]} (no problem was timed)"


def render(problems: list[Problem], title: str, configured_tf32: str | None = None) -> str:
    """The table as Markdown."""
    s = summarize(problems)
    n = s["problems"] or 1
    refused = s["refused"]
    lines = [f"### {title}" + (" (SIMULATED: no figure here was measured)" if s["simulated"] else ""), "",
             f"problems given: {s['problems']} (imported {s['problems'] - len(refused)}, refused at import "
             f"{len(refused)}); every share below is of all {s['problems']}"]
    if s["correct"] == 0 and s["compiled"]:
        lines.append(f"problems compiled: {s['compiled']} of {s['problems']} (nothing ran: correctness and speed unknown)")
    else:
        lines.append(f"problems correct: {s['correct']} of {s['problems']} ({100 * s['correct'] / n:.0f}%)")
    lines.append(tf32_line(s["tf32"], configured_tf32))
    lines += ["", "| fast_p | " + " | ".join(f"p = {p:g}" for p in PS) + " |", "|---|" + "---|" * len(PS)]
    for against in AGAINST:
        for rule, words in RULES.items():
            lines.append(f"| vs PyTorch {against}, {words} | "
                         + " | ".join(f"{100 * s['fast_p'][against][rule][p]:.0f}%" for p in PS) + " |")
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
    if refused:
        lines += ["", f"refused at import (counted as not correct): {len(refused)}"]
        lines += [f"- {name}: {why}" for name, why in refused.items()]
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
        timing = result.get("timing") or {}
        x.winner, x.correct = best["id"], result["status"] == "ok"
        x.speedups = {k: (v["value"], v["low"], v["high"]) for k, v in (timing.get("speedup") or {}).items()}
        x.mean_speedups = mean_speedups(timing)
        x.tf32 = timing.get("torch_tf32")
    return x


def mean_speedups(timing: dict) -> dict[str, float]:
    """KernelBench's speedup: the mean of a baseline's timed samples over the mean of the candidate's."""
    impls = timing.get("impls") or {}
    cand = (impls.get("candidate") or {}).get("samples_ms")
    if not cand:
        return {}
    mean = lambda xs: sum(xs) / len(xs)
    return {name: mean(v["samples_ms"]) / mean(cand) for name, v in impls.items()
            if name != "candidate" and v.get("samples_ms") and mean(cand) > 0}


def collect(batch_dir: Path | None, refused: dict[str, str] | None = None) -> list[Problem]:
    """Every problem given: the batch's, then those refused at import (not run, not correct)."""
    problems = []
    if batch_dir is not None and (batch_dir / "batch.json").is_file():
        info = json.loads((batch_dir / "batch.json").read_text())
        results = info.get("results", {})
        problems = [read_problem(Path(t).name, batch_dir / Path(t).name, results.get(t)) for t in info["tasks"]]
    ran = {x.name for x in problems}
    return problems + [Problem(name, "refused", note=why) for name, why in (refused or {}).items() if name not in ran]


def task_folders(src: Path, traces: Path, run_import: bool = True) -> tuple[list[Path], dict[str, str]]:
    """Task folders in ``src``; .py problems there are imported into ``traces/tasks`` (once) and used instead.
    Also the problems the importer refused: task name -> its reason (kept in ``traces/tasks/refused.json``, so a
    resumed batch or ``--table-only`` lists them too; with ``run_import`` False nothing is imported)."""
    folders = sorted(p for p in src.iterdir() if (p / "task.toml").is_file())
    problems = sorted(p for p in src.glob("*.py") if not p.name.startswith("_"))
    out = traces / "tasks"
    known = _read_refused(out)
    done = lambda p: (out / _task_name(p) / "task.toml").is_file()
    todo = [p for p in problems if not done(p)]
    if todo and run_import:
        _import(todo, out)                       # all at once; then one by one those it did not import, for the reason
        for p in (p for p in todo if not done(p)):
            known[p.name] = _import([p], out) or "not imported"
        known = {k: v for k, v in known.items() if not done(src / k)}
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f".{REFUSED}.tmp"
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        tmp.replace(out / REFUSED)
    folders += sorted(out / _task_name(p) for p in problems if done(p))
    refused = {_task_name(p): known.get(p.name, "not imported") for p in problems if not done(p)}
    return folders, refused


def _import(paths: list[Path], out: Path, timeout_s: float = 600.0) -> str:
    """Run ``kernelwright import`` (problem code runs in its own process); the last line it wrote to stderr."""
    cmd = [sys.executable, "-m", "agent", "import", *map(str, paths), "-o", str(out)]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s * len(paths))
    except subprocess.TimeoutExpired:
        return f"the import did not finish in {timeout_s * len(paths):.0f} s"
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1][:300] if done.returncode and lines else (f"exit code {done.returncode}" if done.returncode else "")


def _read_refused(out: Path) -> dict[str, str]:
    try:
        return dict(json.loads((out / REFUSED).read_text()))
    except (OSError, ValueError):
        return {}


def _task_name(path: Path) -> str:
    from sandbox.pytorch.importer import task_name

    return task_name(path)


BATCH_FLAGS = ("model", "base_url", "api_key_env", "iterations", "budget_tokens", "budget_usd", "budget_gpu_s",
               "budget_wall_s", "sandbox", "config", "price_in", "price_out", "ray_address", "ray_gpus", "torch_tf32")


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
    ap.add_argument("--torch-tf32", choices=("off", "default", "on"),
                    help="TF32 in the timed PyTorch eager and torch.compile: off (default; float32 arithmetic), default "
                         "(PyTorch's defaults: cuDNN convolutions in TF32, as KernelBench times eager), on; the "
                         "candidate's tolerance is the same in every mode")
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
    refused: dict[str, str] = {}
    if args.table_only or (batch_dir / "batch.json").is_file():
        _, refused = task_folders(args.dir, args.traces, run_import=False)
    if not args.table_only:
        flags = []
        for key in BATCH_FLAGS:
            value = getattr(args, key)
            if value is not None:
                flags += [f"--{key.replace('_', '-')}", str(value)]
        if (batch_dir / "batch.json").is_file():
            cmd = ["batch", "--resume", str(batch_dir), "--traces", str(args.traces), "--quiet"]
        else:
            tasks, refused = task_folders(args.dir, args.traces)
            if not tasks and not refused:
                ap.error(f"{args.dir}: no task folders and no .py problems")
            cmd = ["batch", *(str(t.resolve()) for t in tasks), "--batch-id", batch_dir.name, "--traces",
                   str(args.traces), "--quiet", *([] if args.tune else ["--no-tune"]), *flags] if tasks else []
        code = subprocess.call([sys.executable, "-m", "agent", *cmd], cwd=ROOT) if cmd else 0
        if code not in (0, 1):
            return code
    if not (batch_dir / "batch.json").is_file() and not refused:
        ap.error(f"{batch_dir}: no batch to tabulate")
    text = render(collect(batch_dir, refused), f"{batch_dir.name}: {args.model or 'recorded model'}",
                  args.torch_tf32 or _configured_tf32(batch_dir))
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


def _configured_tf32(batch_dir: Path) -> str | None:
    """The TF32 mode a batch was started (or last resumed) with, from its batch.json."""
    try:
        info = json.loads((batch_dir / "batch.json").read_text())
    except (OSError, ValueError):
        return None
    for part in ("overrides", "base"):
        mode = ((info.get(part) or {}).get("sandbox_options") or {}).get("torch_tf32")
        if mode:
            return mode
    return None


if __name__ == "__main__":
    sys.exit(main())
