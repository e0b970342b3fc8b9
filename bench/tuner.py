"""The tuner's search against exhaustive search, on a GPU, with the evaluations cached for replay.

For each case (a suite task, or a richer tunable candidate from bench/candidates/, with its space
of knobs x compiler flags), every configuration is compiled (in parallel) and keyed by its machine
code and launch plan; each distinct configuration is then measured once on the GPU. The default
protocol is the sandbox's screening (sandbox/host/screener.py: batches in one GPU process, the output
checked against the checked baseline's before and after timing, 15 interleaved A/B rounds with a
cold L2, about a tenth of a second per configuration); --protocol sandbox runs the full evaluation
for each (reference at every check size; seconds per configuration). The exhaustive best is then
evaluated in full by the sandbox (its reference checks, its timing) to confirm it. Every
measurement goes into a JSON cache (--cache) as soon as it is taken, so an interrupted run resumes
where it stopped, and the strategies are compared by replaying the cached objective (simulation
mode, as in Kernel Tuner): the exhaustive best is the best cached value; the default strategy,
random sampling and the Bayesian strategy each get 20% of the exhaustive evaluations (duplicates are
free for all) and are replayed over many seeds, spending no GPU time.

    python bench/tuner.py                       # measure what the cache lacks, then compare
    python bench/tuner.py --time-limit 500      # stop measuring after 500 s (resume later)
    python bench/tuner.py --replay              # no GPU: compare on the cache alone
    python bench/tuner.py --dry-run             # no GPU: compile every case, count its space (cache unchanged)
    python bench/tuner.py --replay --kernel-tuner   # and Kernel Tuner's strategies on the same cache
                                                    # (optional extra: pip install -e ".[kerneltuner]")
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from agent.tune.search import INF, minimize  # noqa: E402
from agent.tune.proposer import tuner_search  # noqa: E402
from agent.tune.space import TuningSpace, flag_groups  # noqa: E402
from sandbox import CompileOnlySandbox, SandboxConfig, Status, load_candidate, load_task  # noqa: E402
from sandbox.candidates.compiler import nvrtc_version  # noqa: E402
from sandbox.candidates.plan import identity  # noqa: E402
from sandbox.plumbing.files import atomic_write  # noqa: E402

import kernel_tuner_sim as kts  # noqa: E402  (bench/, beside this file; Kernel Tuner itself is imported on use)
from tuner_tables import print_strategy_table, print_table  # noqa: E402  (bench/, beside this file)

SCHEMA = 1
PROTOCOLS = ("screen", "sandbox")
OUR_STRATEGIES = ("default", "random", "bayes")  # replayed; the first table sets default against random
DEFAULT_CACHE = ROOT / "bench" / "results" / "tuner_points.json"


@dataclasses.dataclass(frozen=True)
class Case:
    task: str
    candidate: str | None     # None: the task's baseline.cu
    flags: bool               # search the compiler-option catalogue too


CASES = {  # the spaces of over 100 distinct configurations first
    "softmax_tuned": Case("softmax", "bench/candidates/softmax_tuned.cu", False),
    "histogram_tuned": Case("histogram", "bench/candidates/histogram_tuned.cu", False),
    "sgemm_blocked": Case("sgemm", "bench/candidates/sgemm_blocked.cu", False),
    "transpose_tuned": Case("transpose", "bench/candidates/transpose_tuned.cu", False),
    "vector_add": Case("vector_add", None, True),
    "softmax": Case("softmax", None, True),
    "sgemm": Case("sgemm", None, True),
}


def _bench_config(thorough: bool) -> SandboxConfig:
    """The sandbox protocol per configuration. By default: the fewest trials per check size that draw every
    listed distribution, the benchmark-size output checked in full for each before timing, every launch of the
    candidate in the timing stage compared with the baseline's output for the same inputs (none compared with
    the reference as well), 10 to 20 A/B rounds; --thorough: the sandbox's defaults.
    The screening protocol uses none of these (see sandbox/host/screener.py); the confirming evaluation of an
    exhaustive best uses the sandbox's defaults."""
    if thorough:
        return SandboxConfig(vendor=False)
    return SandboxConfig(vendor=False, trials_per_check_size=1, timing_budget_s=0.1, min_rounds=10, max_rounds=20,
                         full_checks=0)


def _pt(point) -> str:
    return ",".join(map(str, point))


class CaseRun:
    """One case: its tuning space, compile keys and measurements (backed by the cache's entry)."""

    def __init__(self, name: str, case: Case, entry: dict, arch: str, protocol: str, replay: bool = False):
        self.name = name
        self.task = load_task(case.task)
        path = ROOT / case.candidate if case.candidate else self.task.baseline_path
        cand = load_candidate(path)
        self.candidate = dataclasses.replace(cand, label=path.stem)
        self.tspace = TuningSpace(self.candidate, flag_groups(self.task, case.flags))
        self.space = self.tspace.space
        envelope = dict(task_fingerprint=self.task.fingerprint, nvrtc=nvrtc_version(), arch=arch,
                        candidate=hashlib.sha256(cand.source.encode()).hexdigest()[:16],
                        dims={n: [str(c) for c in ch] for n, ch in zip(self.space.names, self.space.choices)},
                        protocol=protocol)
        if replay and entry.get("envelope"):
            # replaying compiles nothing: the cache's own compiler, arch and protocol hold, the space must match
            stored = {"protocol": "sandbox", **entry["envelope"]}  # entries from before screening: the sandbox's
            envelope.update(nvrtc=stored.get("nvrtc"), arch=stored.get("arch"), protocol=stored["protocol"])
            if stored != envelope:
                raise SystemExit(f"{name}: the cached entry is for another task version, candidate or space; "
                                 "measure it again (without --replay)")
            envelope = entry["envelope"]
        if entry.get("envelope") != envelope:
            entry.clear()
            entry.update(envelope=envelope, keys={}, compile_status={}, measured={}, gpu=None)
        self.entry = entry

    @property
    def protocol(self) -> str:
        """How the cached values were measured (entries from before screening: the sandbox's)."""
        return self.entry["envelope"].get("protocol", "sandbox")

    @property
    def keys(self) -> dict:
        return self.entry["keys"]

    @property
    def measured(self) -> dict:
        return self.entry["measured"]

    def compiled_all(self) -> bool:
        return len(self.keys) == self.space.size

    def distinct(self) -> list[str]:
        """Keys in first-seen order of the points (the start first)."""
        order = [_pt(self.tspace.start)] + [_pt(p) for p in self.space.points()]
        return list(dict.fromkeys(k for p in order if (k := self.keys.get(p))))

    def key_at(self, point) -> str | None:
        """The identity (sandbox.candidates.plan.identity) of a configuration; None if it failed to compile."""
        return self.keys.get(_pt(point))

    def representative(self, key: str):
        for p in [self.tspace.start, *self.space.points()]:
            if self.keys.get(_pt(p)) == key:
                return p
        raise KeyError(key)

    def complete(self) -> bool:
        return self.compiled_all() and all(k in self.measured for k in self.distinct())

    def value(self, key: str) -> float:
        """Time relative to the baseline timed A/B in the same measurement (drift cancels); inf if failed."""
        m = self.measured[key]
        return m["relative"] if m["status"] == "ok" and m["relative"] is not None else INF

    def ms(self, key: str) -> float:
        m = self.measured[key]
        return m["ms"] if m["status"] == "ok" and m["ms"] is not None else INF


def compile_case(run: CaseRun, arch: str, workers: int, save) -> None:
    todo = [p for p in run.space.points() if _pt(p) not in run.keys]
    if not todo:
        return
    local = threading.local()
    sandboxes: list[CompileOnlySandbox] = []
    lock = threading.Lock()

    def one(point):
        if not hasattr(local, "sb"):
            local.sb = CompileOnlySandbox(arch=arch)
            with lock:
                sandboxes.append(local.sb)
        cand = run.tspace.candidate_at(point)
        result = local.sb.compile(run.task, cand)
        key = identity(run.task, cand, result.compile) if result.status is Status.compiled else None
        status = result.status.value if result.status is not Status.compiled else ("compiled" if key else "launch_error")
        return point, key, status

    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(workers) as pool:
            for i, (point, key, status) in enumerate(pool.map(one, todo), 1):
                run.keys[_pt(point)] = key
                if status != "compiled":
                    run.entry["compile_status"][_pt(point)] = status
                if i % 200 == 0:
                    save()
    finally:
        for sb in sandboxes:
            sb.close()
    save()
    print(f"[{run.name}] compiled {len(todo)} configurations in {time.perf_counter() - t0:.0f} s "
          f"({len(run.distinct())} distinct)", flush=True)


def measure_case(run: CaseRun, sandbox, deadline: float, save, rounds: int) -> bool:
    """Measure the distinct configurations the cache lacks; False if the deadline stopped it."""
    env = sandbox.device
    gpu = dict(gpu=env.get("gpu"), driver=env.get("driver"), cuda=env.get("cuda_runtime"))
    if run.entry.get("gpu") not in (None, gpu):
        run.entry["measured"] = {}
    run.entry["gpu"] = gpu
    todo = [k for k in run.distinct() if k not in run.measured]
    if todo:
        print(f"[{run.name}] measuring {len(todo)} distinct configurations ({run.protocol} protocol)", flush=True)
    if run.protocol == "screen":
        return _screen_case(run, sandbox, todo, deadline, save, rounds)
    return _evaluate_case(run, sandbox, todo, deadline, save)


def _screen_case(run: CaseRun, sandbox, todo: list[str], deadline: float, save, rounds: int) -> bool:
    t0, done, chunk = time.monotonic(), 0, 32
    while done < len(todo):
        if time.monotonic() > deadline:
            print(f"[{run.name}] time limit: {len(todo) - done} configurations left to measure", flush=True)
            return False
        keys = todo[done:done + chunk]
        points = [run.representative(k) for k in keys]
        found = sandbox.screen(run.task, [run.tspace.candidate_at(p) for p in points], rounds=rounds)
        for key, point, s in zip(keys, points, found):
            run.measured[key] = dict(status=s.status, ms=s.ms, relative=s.relative, config=run.tspace.describe(point),
                                     gpu_s=s.gpu_s, wall_s=s.gpu_s + s.compile_s, error=s.error[:200])
        done += len(keys)
        save()
        per = (time.monotonic() - t0) / done
        statuses = dict(Counter(s.status for s in found))
        print(f"[{run.name}] screened {done}/{len(todo)} ({per:.2f} s each, about {per * (len(todo) - done):.0f} s "
              f"left; last batch: {statuses})", flush=True)
    return True


def _evaluate_case(run: CaseRun, sandbox, todo: list[str], deadline: float, save) -> bool:
    from agent.tune.proposer import objective

    t0 = time.monotonic()
    for i, key in enumerate(todo, 1):
        if time.monotonic() > deadline:
            print(f"[{run.name}] time limit: {len(todo) - i + 1} configurations left to measure", flush=True)
            return False
        point = run.representative(key)
        cand = run.tspace.candidate_at(point)
        r = sandbox.evaluate(run.task, cand)
        t = r.timing.impls.get("candidate") if r.timing else None
        run.measured[key] = dict(status=r.status.value, ms=t.median_ms if t and r.ok else None,
                                 relative=objective(r) if r.ok else None, config=run.tspace.describe(point),
                                 gpu_s=r.cost.gpu_s, wall_s=r.cost.wall_s, error=r.error[:200])
        save()
        if i % 10 == 0 or i == len(todo):
            per = (time.monotonic() - t0) / i
            print(f"[{run.name}] measured {i}/{len(todo)} (last: {r.status.value}; {per:.1f} s each, "
                  f"about {per * (len(todo) - i):.0f} s left)", flush=True)
    return True


def replay(run: CaseRun, strategy: str, budget: int, seed: int) -> tuple[str, int]:
    """One seeded search on the cached objective, as the tuner runs it: (key of the best found, evaluations)."""
    search = tuner_search(run.space, strategy, budget, seed, run.tspace.start)
    minimize(search, lambda p: run.keys[_pt(p)], run.value)
    return run.keys[_pt(search.best[0])], search.evaluations


def confirm(run: CaseRun, sandbox) -> None:
    """Evaluate the exhaustive best in full (reference checks at every size, the sandbox's timing)."""
    best_key = min(run.distinct(), key=run.value)
    if run.entry.get("confirmed", {}).get("key") == best_key:
        return
    cand = run.tspace.candidate_at(run.representative(best_key))
    saved, sandbox.config = sandbox.config, SandboxConfig(vendor=False)
    try:
        r = sandbox.evaluate(run.task, cand)
    finally:
        sandbox.config = saved
    s = r.speedup("baseline") if r.ok else None
    run.entry["confirmed"] = dict(key=best_key, status=r.status.value, error=r.error[:200],
                                  ms=r.timing.impls["candidate"].median_ms if r.ok else None,
                                  speedup=[s.value, s.low, s.high] if s else None, gpu_s=r.cost.gpu_s)
    print(f"[{run.name}] exhaustive best evaluated in full: {r.status.value}"
          + (f", {run.entry['confirmed']['ms']:.4f} ms, {s.value:.3f}x [{s.low:.3f}, {s.high:.3f}] vs the baseline"
             if s else f" ({r.error[:160]})"), flush=True)


def _summary(run: CaseRun, best: float, found: list[tuple[str, int]]) -> dict:
    """Mean time, gaps to the exhaustive best and evaluations of one strategy's seeded runs."""
    gaps = [100 * (run.value(k) / best - 1) for k, _ in found]
    return dict(mean_ms=statistics.mean(run.ms(k) for k, _ in found), mean_gap=statistics.mean(gaps),
                worst_gap=max(gaps), within_5=sum(g <= 5 for g in gaps) / len(gaps),
                mean_evaluations=statistics.mean(e for _, e in found))


def compare(run: CaseRun, fraction: float, seeds: int, kt_strategies=()) -> dict:
    distinct = run.distinct()
    best_key = min(distinct, key=run.value)
    best = run.value(best_key)
    budget = max(1, math.ceil(fraction * len(distinct)))
    row = dict(case=run.name, task=run.task.name, space=run.space.size, evaluations=len(distinct), budget=budget,
               failed=sum(run.value(k) == INF for k in distinct), compile_failed=len(run.entry["compile_status"]),
               best_ms=run.ms(best_key), best_config=run.measured[best_key]["config"],
               start_ms=run.ms(run.keys[_pt(run.tspace.start)]),
               gpu_s=sum(m["gpu_s"] for m in run.measured.values()),
               wall_s=sum(m["wall_s"] for m in run.measured.values()),
               protocol=run.protocol, confirmed=run.entry.get("confirmed"))
    for strategy in OUR_STRATEGIES:
        row[strategy] = _summary(run, best, [replay(run, strategy, budget, seed) for seed in range(seeds)])
    if kt_strategies:
        with tempfile.TemporaryDirectory(prefix="kw-kt-") as folder:
            case = kts.SimulatedCase(run, Path(folder))
            row["kernel_tuner"] = {s: _summary(run, best, [case.replay(s, budget, seed) for seed in range(seeds)])
                                   for s in kt_strategies}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from: {', '.join(CASES)}")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="JSON file of compiled keys and measurements")
    ap.add_argument("--time-limit", type=float, default=math.inf, help="stop measuring after this many seconds")
    ap.add_argument("--fraction", type=float, default=0.2, help="budget of the strategies, share of exhaustive")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--workers", type=int, default=8, help="parallel compile processes")
    ap.add_argument("--protocol", choices=PROTOCOLS, default="screen",
                    help="screen (batched, output checked against the baseline's) or sandbox (a full evaluation each)")
    ap.add_argument("--rounds", type=int, default=15, help="A/B rounds per configuration (screen protocol)")
    ap.add_argument("--thorough", action="store_true", help="sandbox protocol: the sandbox's default checks and timing")
    ap.add_argument("--replay", action="store_true", help="no GPU: compare strategies on the cache alone")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: compile every case and count its space")
    ap.add_argument("--kernel-tuner", nargs="?", const=",".join(kts.STRATEGIES), default="", metavar="STRATEGIES",
                    help="also replay Kernel Tuner's strategies on the cache (comma-separated; default: "
                         f"{', '.join(kts.STRATEGIES)}); needs {kts.INSTALL}")
    args = ap.parse_args(argv)
    if args.rounds < 5:
        ap.error(f"--rounds must be at least 5 (got {args.rounds})")
    kt_strategies = [s.strip() for s in args.kernel_tuner.split(",") if s.strip()]
    if kt_strategies:
        if kts.version() is None:
            ap.error(f"--kernel-tuner needs Kernel Tuner, an optional extra: {kts.INSTALL}")
        from kernel_tuner.interface import strategy_map

        unknown = [s for s in kt_strategies if s not in strategy_map]
        if unknown:
            ap.error(f"--kernel-tuner: unknown strategies {unknown} (Kernel Tuner {kts.version()} has: "
                     f"{', '.join(sorted(strategy_map))})")
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown} (known: {', '.join(CASES)})")
    started = time.monotonic()
    data = json.loads(args.cache.read_text()) if args.cache.is_file() else {}
    if data.get("schema") != SCHEMA:
        data = {"schema": SCHEMA, "cases": {}}
    data["about"] = ("kernelwright bench/tuner.py: compile keys and one GPU measurement per distinct configuration; "
                     "strategies are compared by replaying these values")

    def save():  # a dry run or a replay leaves the cache as it was (another compiler would reset its entries)
        if not (args.dry_run or args.replay):
            atomic_write(args.cache, json.dumps(data, indent=1, sort_keys=True))

    sandbox = None
    arch = "sm_90"
    if not (args.replay or args.dry_run):
        from sandbox import GPUSandbox

        sandbox = GPUSandbox(_bench_config(args.thorough))
        arch = sandbox.arch
        print(f"GPU: {sandbox.device.get('gpu')} ({arch}), driver {sandbox.device.get('driver')}, "
              f"NVRTC {nvrtc_version()}", flush=True)
    elif args.replay:
        arch = next((c.get("envelope", {}).get("arch") for c in data["cases"].values() if c.get("envelope")), arch)
    rows = []
    try:
        for name in names:
            run = CaseRun(name, CASES[name], data["cases"].setdefault(name, {}), arch, args.protocol, replay=args.replay)
            if sandbox is not None and time.monotonic() > started + args.time_limit and not run.complete():
                print(f"[{name}] not started: the time limit has passed")
                continue
            if not args.replay:
                compile_case(run, arch, args.workers, save)
            if args.dry_run:
                fails = {}
                for s in run.entry["compile_status"].values():
                    fails[s] = fails.get(s, 0) + 1
                print(f"{name}: {run.space.size} configurations ({' x '.join(str(len(c)) for c in run.space.choices)}), "
                      f"{len(run.distinct())} distinct, failing before a run: {fails or 'none'}")
                continue
            if sandbox is not None and measure_case(run, sandbox, started + args.time_limit, save, args.rounds):
                confirm(run, sandbox)
                save()
            if run.complete():
                rows.append(compare(run, args.fraction, args.seeds, kt_strategies))
            else:
                left = sum(k not in run.measured for k in run.distinct()) if run.compiled_all() else "?"
                print(f"[{name}] incomplete ({left} distinct configurations not measured): not compared")
    finally:
        if sandbox is not None:
            sandbox.close()
    if rows:
        print_table(rows, args.fraction, args.seeds)
        print_strategy_table(rows, args.fraction, args.seeds, OUR_STRATEGIES, kt_strategies)
    print(f"\ncache: {args.cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
