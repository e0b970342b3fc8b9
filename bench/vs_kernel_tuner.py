"""kernelwright's built-in search against Kernel Tuner on the same GPU, the same kernels and the same knob spaces.

For each case, in one run:
- Kernel Tuner 1.5 (the optional extra ``kerneltuner``; in this process, CuPy backend, no isolation, its default
  7 iterations per configuration, no output verification) tunes the whole space by brute force;
- kernelwright screens the whole space (``strategy = "exhaustive"``, knobs only, as optimize's search does:
  compiles in a pool ahead of the GPU, batches in one GPU worker process, every run of every configuration
  compared on the device with the task baseline's output, interleaved A/B rounds with a cold L2), then
  evaluates its best screened configurations in full (``--finalists``, 3 by default: every check size, the
  full timing protocol);
- the best configuration each found is evaluated in full by the sandbox (one and the same protocol for both;
  one already evaluated in full as the start or a finalist keeps that evaluation).

It prints configurations per hour for both (every configuration the tool timed, compile failures left out, over
the search's wall time: for kernelwright from the first compile to the last screening, after the
starting configuration's full evaluation, which also warms the sandbox; for Kernel Tuner the tune_kernel call,
after a CUDA context exists), their ratio, the finalists' time apart, the re-measured bests, and the gap to the
exhaustive best of kernelwright's default and bayes strategies replayed at 20% of the space on the screened
values (over many seeds; no GPU time).

    python bench/vs_kernel_tuner.py                              # row_sum (24), softmax_tuned (144), sgemm_blocked (243)
    python bench/vs_kernel_tuner.py --cases row_sum,softmax_tuned --json out.json
    python bench/vs_kernel_tuner.py --finalists 1 --max-seconds 150 --json out.json   # bounded: see below

Bounding the run: ``--finalists N`` evaluates fewer screened configurations in full (each full evaluation checks
every check size and runs the full timing protocol: seconds, not milliseconds); ``--max-seconds S`` starts no
case once S seconds have passed (the cases run in the order given, and the ones left out are named). Each case's
rows are printed, and written to ``--json``, as soon as it is done, so a run cut short keeps what it measured.

Cases: row_sum is bench/candidates/row_sum_vec.cu (block size x vector width: 24 configurations) on the row_sum
task at rows=16384, cols=8192; softmax_tuned and sgemm_blocked are bench/candidates/ on the softmax and sgemm
tasks at their benchmark sizes. Needs a CUDA device and Kernel Tuner (``pip install -e ".[kerneltuner]"``; on a
machine without a package index, from a folder of wheels: ``pip install --no-index --no-deps --find-links DIR
kernel_tuner python-constraint2 xmltodict jsonschema jsonschema-specifications referencing rpds-py``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import kernel_tuner_live as klive  # noqa: E402
import kernel_tuner_sim as kts  # noqa: E402
from agent.protocols import Entry, ProposalRequest  # noqa: E402
from agent.tune.proposer import TunerProposer, objective, tuner_search  # noqa: E402
from agent.tune.search import INF, minimize  # noqa: E402
from sandbox import load_candidate, load_task  # noqa: E402
from sandbox.tasks.task import Task  # noqa: E402

INSTALL = ('pip install -e ".[kerneltuner]" (without a package index, from a folder of wheels: pip install '
           "--no-index --no-deps --find-links DIR kernel_tuner python-constraint2 xmltodict jsonschema "
           "jsonschema-specifications referencing rpds-py)")


@dataclass(frozen=True)
class Case:
    task: str
    candidate: str
    benchmark: dict | None = None    # another benchmark size for the task
    valid: Callable[[dict], bool] | None = None  # the kernel's static_asserts, as a Kernel Tuner user restricts them


def _sgemm_threads_ok(p: dict) -> bool:
    """sgemm_blocked.cu's static_asserts: the tiles divide, and a block has 32..1024 threads."""
    return (p["BM"] % p["TM"] == 0 and p["BN"] % p["TN"] == 0
            and 32 <= (p["BM"] // p["TM"]) * (p["BN"] // p["TN"]) <= 1024)


CASES = {"row_sum": Case("row_sum", "bench/candidates/row_sum_vec.cu", {"rows": 16384, "cols": 8192}),
         "softmax_tuned": Case("softmax", "bench/candidates/softmax_tuned.cu"),
         "sgemm_blocked": Case("sgemm", "bench/candidates/sgemm_blocked.cu", valid=_sgemm_threads_ok)}


def case_task(case: Case, folder: Path) -> Task:
    """The case's task; with another benchmark size, a copy of the suite's task folder that says so."""
    task = load_task(case.task)
    if case.benchmark is None:
        return task
    copy = folder / case.task
    shutil.copytree(task.folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    toml = copy / "task.toml"
    size = ", ".join(f"{k} = {v}" for k, v in case.benchmark.items())
    text, n = re.subn(r"^benchmark = .*$", f"benchmark = {{ {size} }}", toml.read_text(), count=1, flags=re.M)
    if n != 1:
        raise SystemExit(f"{toml}: no benchmark line to change")
    toml.write_text(text)
    return load_task(copy)


def kernelwright(sb, task: Task, cand, finalists: int = 3) -> dict:
    """The exhaustive screened search and its finalists, timed apart; the full evaluation of the start first (the
    compile workers start meanwhile, as ``optimize`` and ``tune`` start them)."""
    sb.warm()
    start = Entry("e0", cand, sb.evaluate(task, cand), [], "start", 0)
    tuner = TunerProposer(strategy="exhaustive", flags=False, sandbox=sb, finalists=finalists)
    entries, screened_gpu, search_s, split = [start], 0.0, None, dict(propose=0.0, screen=0.0)
    setup_before = _setup_s(sb)
    t0 = time.perf_counter()
    while True:
        t1 = time.perf_counter()
        proposals = tuner.propose(ProposalRequest(task, [start], None, start, [], sb.device, len(entries)))
        split["propose"] += time.perf_counter() - t1
        if not proposals:
            break
        screen = [p for p in proposals if p.stage == "screen"]
        if screen:
            t1 = time.perf_counter()
            for p, s in zip(screen, sb.screen(task, [p.candidate for p in screen])):
                screened_gpu += s.gpu_s
                tuner.observe_screened(p, s)
            split["screen"] += time.perf_counter() - t1
            continue
        search_s = search_s if search_s is not None else time.perf_counter() - t0
        for p in proposals:
            entry = Entry(f"e{len(entries)}", p.candidate, sb.evaluate(task, p.candidate), p.parent_ids, p.origin, 0)
            entries.append(entry)
            tuner.observe(entry)
    total = time.perf_counter() - t0
    search_s = total if search_s is None else search_s
    [source] = tuner.sources
    summary = source.summary("exhaustive")
    best = min(entries, key=lambda e: (objective(e.result), e is not start))
    return dict(source=source, summary=summary, search_s=search_s, finalists_s=total - search_s,
                covered=len(source.search.memory.values) - 1, screened=summary["screened"], screen_gpu_s=screened_gpu,
                start_s=start.result.cost.wall_s, best=best.candidate.defines(), finalists=summary["finalists"],
                propose_s=split["propose"], screen_s=split["screen"], setup_s=_setup_s(sb) - setup_before,
                evaluated={_knobs(e.candidate.defines()): e.result for e in entries})


def _setup_s(sb) -> float:
    """Seconds the sandbox's screener spent setting screenings up (a fake sandbox has none)."""
    screener = getattr(sb, "screener", None)
    return screener.setup_s if screener is not None else 0.0


def _knobs(knobs: dict) -> tuple:
    return tuple(sorted(knobs.items()))


def replay(space, start, key_of: Callable, value_of: Callable, fraction: float, seeds: int) -> dict:
    """kernelwright's strategies at ``fraction`` of the space, replayed on measured values, as the tuner runs
    them: ``key_of(point)`` is the point's code (None where it did not compile: free, as in a run; points with
    one code share one measurement), ``value_of(key)`` its screened time relative to the baseline (INF: did not
    run)."""
    truth = min(v for v in (value_of(k) for k in map(key_of, space.points()) if k is not None) if v < INF)
    budget = max(1, math.ceil(fraction * space.size))
    out = {}
    for strategy in ("default", "bayes"):
        gaps = []
        for seed in range(seeds):
            search = tuner_search(space, strategy, budget, seed, start)
            minimize(search, key_of, value_of)
            gaps.append(100 * (search.best[1] / truth - 1))
        out[strategy] = dict(budget=budget, mean_gap=statistics.mean(gaps), worst_gap=max(gaps),
                             within_2=sum(g <= 2.0 for g in gaps) / len(gaps))
    return out


def _value_of(source) -> Callable:
    return lambda key: source.shared.values.get(key, INF)


def screened_values(source) -> list[list]:
    """Every point of the space: [knobs, the code's key (None: no compile), screened value (None: INF)]."""
    value_of, out = _value_of(source), []
    for point in source.tspace.space.points():
        key = source.key_of(point)
        value = value_of(key) if key is not None else INF
        out.append([source.tspace.candidate_at(point).defines(), key, value if value < INF else None])
    return out


def replay_saved(row: dict, fraction: float, seeds: int) -> dict:
    """``replay`` on the values a run saved (``--json``): no GPU."""
    from agent.tune.space import TuningSpace

    tspace = TuningSpace(load_candidate(ROOT / CASES[row["case"]].candidate), ())
    saved = {_knobs(knobs): (key, INF if v is None else v) for knobs, key, v in row["kernelwright"]["values"]}
    keys = {p: saved[_knobs(tspace.candidate_at(p).defines())][0] for p in tspace.space.points()}
    values = {key: v for key, v in saved.values() if key is not None}
    return replay(tspace.space, tspace.start, keys.__getitem__, values.__getitem__, fraction, seeds)


def remeasure(sb, task: Task, cand, knobs: dict | None, evaluated: dict | None = None) -> dict | None:
    """A configuration evaluated in full by the sandbox: median ms with its interval, speedup over the baseline.
    One this run already evaluated in full (the start, a finalist) keeps that evaluation: the same protocol."""
    if knobs is None:
        return None
    r = (evaluated or {}).get(_knobs(knobs)) or sb.evaluate(task, cand.with_knobs(knobs))
    if not r.ok:
        return dict(knobs=knobs, status=r.status.value, error=r.error[:200])
    t, s = r.timing.impls["candidate"], r.speedup("baseline")
    return dict(knobs=knobs, status="ok", ms=t.median_ms, ms_ci=[t.ci_ms.low, t.ci_ms.high],
                speedup=[s.value, s.low, s.high])


def kt_inputs(task: Task):
    """The benchmark-size inputs, generated on the device as the sandbox generates them, as host arrays."""
    import cupy

    from sandbox.tasks.inputs import generate_all, input_specs

    specs = input_specs(task, task.spec.sizes.benchmark, 0)
    return {name: array.get() for name, array in generate_all(cupy, specs, 12345).items()}


def run_case(name: str, case: Case, sb, folder: Path, fraction: float, seeds: int, finalists: int = 3) -> dict:
    t0 = time.perf_counter()
    task = case_task(case, folder)
    cand = load_candidate(ROOT / case.candidate)
    spec = klive.restricted(klive.spec(task, cand), case.valid)
    print(f"[{name}] Kernel Tuner {kts.version()} brute force over {klive.configurations(spec)} configurations",
          flush=True)
    kt = klive.tune(task, spec, inputs=lambda: kt_inputs(task))
    print(f"[{name}] Kernel Tuner: {kt.tried} configurations in {kt.seconds:.1f} s ({kt.failed} failed)", flush=True)
    kw = kernelwright(sb, task, cand, finalists)
    print(f"[{name}] kernelwright: {kw['covered']} configurations ({kw['screened']} screened) in {kw['search_s']:.1f} s "
          f"(proposing, compiles included: {kw['propose_s']:.2f} s; screening {kw['screen_s']:.2f} s, of which the "
          f"set-up {kw['setup_s']:.2f} s and the screened configurations' own GPU time {kw['screen_gpu_s']:.2f} s), "
          f"finalists {kw['finalists_s']:.1f} s", flush=True)
    kt_best = remeasure(sb, task, cand, kt.best, kw["evaluated"])
    kw_best = remeasure(sb, task, cand, kw["best"], kw["evaluated"])
    row = dict(case=name, task=task.name, sizes=task.spec.sizes.benchmark, space=kw["source"].tspace.space.size,
               kernel_tuner=dict(version=kts.version(), configurations=kt.tried, failed=kt.failed, seconds=kt.seconds,
                                 per_hour=3600 * (kt.tried - kt.failed) / kt.seconds, best=kt.best,
                                 best_ms_own=kt.best_ms,
                                 remeasured=kt_best),
               kernelwright=dict(configurations=kw["covered"], screened=kw["screened"], seconds=kw["search_s"],
                                 per_hour=3600 * kw["screened"] / kw["search_s"],
                                 screen_gpu_s=kw["screen_gpu_s"], finalists_s=kw["finalists_s"], start_s=kw["start_s"],
                                 propose_s=kw["propose_s"], screen_s=kw["screen_s"], setup_s=kw["setup_s"],
                                 finalists=kw["finalists"], best=kw["best"], remeasured=kw_best,
                                 values=screened_values(kw["source"]),
                                 replay=replay(kw["source"].tspace.space, kw["source"].tspace.start,
                                               kw["source"].key_of, _value_of(kw["source"]), fraction, seeds)))
    row["ratio"] = row["kernelwright"]["per_hour"] / row["kernel_tuner"]["per_hour"]
    row["case_s"] = time.perf_counter() - t0
    print(f"[{name}] done in {row['case_s']:.0f} s", flush=True)
    return row


def _ms(m: dict | None) -> str:
    if m is None:
        return "-"
    if m["status"] != "ok":
        return f"{m['status']}"
    v, lo, hi = m["speedup"]
    return f"{m['ms']:.4g} ms, {v:.3f}x [{lo:.3f}, {hi:.3f}]"


def print_rows(rows: list[dict], fraction: float, seeds: int) -> None:
    print("\n| case | space | Kernel Tuner configs / s / per hour | kernelwright configs (screened) / s / per hour | "
          "ratio | kernelwright finalists s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        kt, kw = r["kernel_tuner"], r["kernelwright"]
        print(f"| {r['case']} | {r['space']} | {kt['configurations']} / {kt['seconds']:.1f} / {kt['per_hour']:,.0f} | "
              f"{kw['configurations']} ({kw['screened']}) / {kw['seconds']:.1f} / {kw['per_hour']:,.0f} | "
              f"**{r['ratio']:.2f}x** | {kw['finalists_s']:.1f} |")
    print(f"\nBest configuration each found, evaluated in full by the sandbox (median, speedup over the task's baseline "
          f"with its 95% interval); kernelwright's strategies replayed at {fraction:.0%} of the space on the screened "
          f"values ({seeds} seeds: mean gap to the exhaustive best / worst seed / seeds within 2%):")
    print("\n| case | Kernel Tuner best | kernelwright best | default@20% | bayes@20% |")
    print("|---|---|---|---|---|")
    for r in rows:
        kt, kw = r["kernel_tuner"], r["kernelwright"]
        cfg = lambda k: " ".join(f"{a}={b}" for a, b in (k or {}).items())  # noqa: E731
        rep = [f"{d['mean_gap']:.2f}% / {d['worst_gap']:.1f}% / {d['within_2']:.0%}" for d in kw["replay"].values()]
        print(f"| {r['case']} | {cfg(kt['best'])}: {_ms(kt['remeasured'])} | {cfg(kw['best'])}: {_ms(kw['remeasured'])} "
              f"| {rep[0]} | {rep[1]} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from: {', '.join(CASES)}")
    ap.add_argument("--fraction", type=float, default=0.2, help="budget of the replayed strategies, share of the space")
    ap.add_argument("--seeds", type=int, default=50, help="seeds of each replayed strategy")
    ap.add_argument("--finalists", type=int, default=3, help="screened configurations kernelwright evaluates in full")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no case once this many seconds have passed (the cases left out are named)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON to this file (after every case)")
    ap.add_argument("--replay", type=Path, metavar="JSON",
                    help="no GPU: replay the strategies on the screened values a run wrote with --json, print its tables")
    args = ap.parse_args(argv)
    if args.replay:
        return replay_file(args.replay, args.fraction, args.seeds)
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown} (known: {', '.join(CASES)})")
    if args.finalists < 1 or (args.max_seconds is not None and args.max_seconds <= 0):
        ap.error("--finalists must be at least 1 and --max-seconds above 0")
    if kts.version() is None:
        print(f"error: Kernel Tuner is not installed, and this bench runs it: {INSTALL}", file=sys.stderr)
        return 2
    import cupy

    cupy.zeros(1).sum()  # this process's CUDA context (Kernel Tuner's) exists before anything is timed
    from sandbox import GPUSandbox

    rows, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kw-vs-kt-") as folder, GPUSandbox() as sb:
        print(f"GPU: {sb.device.get('gpu')} ({sb.arch}), driver {sb.device.get('driver')}", flush=True)
        for i, name in enumerate(names):
            if args.max_seconds is not None and time.perf_counter() - t0 >= args.max_seconds:
                print(f"not run, {args.max_seconds:g} s passed: {', '.join(names[i:])}", flush=True)
                break
            rows.append(run_case(name, CASES[name], sb, Path(folder), args.fraction, args.seeds, args.finalists))
            print_rows(rows[-1:], args.fraction, args.seeds)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1, default=str))
    if len(rows) > 1:
        print("\nAll cases:")
        print_rows(rows, args.fraction, args.seeds)
    print(f"\n{len(rows)} of {len(names)} cases in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


def replay_file(path: Path, fraction: float, seeds: int) -> int:
    try:
        rows = json.loads(path.read_text())
        for row in rows:
            row["kernelwright"]["replay"] = replay_saved(row, fraction, seeds)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {path}: not a --json file of this bench with screened values ({type(exc).__name__}: {exc})",
              file=sys.stderr)
        return 2
    print_rows(rows, fraction, seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
