"""How much a GPU gets through, side by side with Kernel Tuner, in one run on one GPU.

Three parts, each printed as a table as soon as it is done (``--parts`` picks them, in this order):

- ``search``: configurations per hour of kernelwright's screened search and of Kernel Tuner's brute force on the
  same kernels and spaces (``bench/vs_kernel_tuner.py``'s cases and protocol: row_sum 24, softmax_tuned 144,
  sgemm_blocked 243 configurations), with where each tool's seconds went and the GPU's noise that screening
  measured at its set-up.
- ``optimize``: ``kernelwright optimize`` with no model, as a user runs it (a new process, the CLI), on the
  24-point row-sum space (a task folder whose starting kernel is bench/candidates/row_sum_vec.cu, knobs only,
  exhaustive, no profiling, the winner sanitized and checked at the held-out sizes), against Kernel Tuner's whole
  process for the same 24 configurations (imports, CUDA context, inputs and the tune, in a new process). The run's
  events give where its wall time went, and its summary which leaders the claim's held-out check set aside.
- ``candidates``: LLM-style candidates (whole kernels, each new code, evaluated in full: every check size against
  the reference, the full timing protocol, a profile of each new best) at a memory-bound suite task's benchmark
  size (``--task``: softmax, 1 GiB in and 1 GiB out; or row_sum, 2 GiB in and 128 KiB out), handed to the loop as
  a model's answers would be (``--parallel`` requests open). Reports candidates per GPU-hour, the GPU's busy share
  of the wall time (the GPU worker's correctness and timing stages, the reference worker's comparisons and the
  profiles, each on the GPU and one at a time, over the phase's wall; the phase starts once the baseline is
  evaluated and profiled), what a profile of a new best took, the loop's own seconds between evaluations, and per
  candidate where the workers' correctness stages and reference comparisons went (every request to the worker
  processes logged).

    python bench/throughput.py                                  # every part
    python bench/throughput.py --parts candidates --task row_sum --json out.json
    python bench/throughput.py --parts optimize,candidates --json out.json

Needs a CUDA device; ``search`` and ``optimize`` need Kernel Tuner (``pip install -e ".[kerneltuner]"``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import vs_kernel_tuner as vkt  # noqa: E402

PARTS = ("search", "optimize", "candidates")
ROW_SUM = ROOT / "bench" / "candidates" / "row_sum_vec.cu"


# ---- search --------------------------------------------------------------------------------------------


def search_part(cases: list[str], finalists: int) -> list[dict]:
    from sandbox import GPUSandbox

    rows = []
    with tempfile.TemporaryDirectory(prefix="kw-throughput-") as folder, GPUSandbox() as sb:
        for name in cases:
            row = vkt.run_case(name, vkt.CASES[name], sb, Path(folder), 0.2, 20, finalists)
            row["noise"] = dict(sb.screener.noise)
            rows.append(row)
    print("\n## Configurations per hour, both tools (search)")
    vkt.print_rows(rows, 0.2, 20)
    print("\n| case | kernelwright: proposing (compiles) s | screening s | of which the GPU's own s | "
          "set-up s | noise of a paired ratio | Kernel Tuner s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        kw, noise = r["kernelwright"], list(r["noise"].values())
        print(f"| {r['case']} | {kw['propose_s']:.2f} | {kw['screen_s']:.2f} | {kw['screen_gpu_s']:.2f} | "
              f"{kw['setup_s']:.2f} | {noise[-1] if noise else float('nan'):.4f} | "
              f"{r['kernel_tuner']['seconds']:.2f} |")
    return rows


# ---- optimize, end to end ---------------------------------------------------------------------------------


def row_sum_task(folder: Path, start: dict[str, str] | None = None) -> Path:
    """The row-sum case's task (rows=16384, cols=8192) with row_sum_vec.cu as its starting kernel: the 24-point
    space a user brings. ``start``: knob values the run starts from (each moved to the front of its knob's list;
    the space is the same)."""
    task = vkt.case_task(vkt.CASES["row_sum"], folder)
    task.baseline_path.write_text(start_at(ROW_SUM.read_text(), start or {}))
    return task.folder


def knob_values(text: str) -> dict[str, str]:
    """``BLOCK=512,VEC=2`` as a mapping (empty for an empty text); ValueError naming an item that is not
    KNOB=VALUE."""
    pairs = [kv.strip() for kv in text.split(",") if kv.strip()]
    bad = [kv for kv in pairs if "=" not in kv]
    if bad:
        raise ValueError(f"{bad[0]!r} is not KNOB=VALUE")
    return dict(kv.split("=", 1) for kv in pairs)


def start_at(source: str, start: dict[str, str]) -> str:
    """``source`` with each knob of ``start`` listing the given value first (a knob's first value is where a run
    starts); ValueError naming a knob or value the kernel does not have."""
    lines = source.splitlines(keepends=True)
    for knob, value in start.items():
        at = next((i for i, line in enumerate(lines) if re.match(rf"{re.escape(knob)}\s*=\s*\[", line)), None)
        if at is None:
            raise ValueError(f"the kernel has no knob {knob!r}")
        values = [v.strip() for v in lines[at].split("[", 1)[1].rsplit("]", 1)[0].split(",")]
        if value not in values:
            raise ValueError(f"knob {knob} has no value {value!r} (it has {', '.join(values)})")
        values.remove(value)
        lines[at] = f"{knob} = [{', '.join([value, *values])}]\n"
    return "".join(lines)


RUN_CONFIG = """profile = "none"

[tune]
strategy = "exhaustive"
flags = false
finalists = 3
"""


def optimize_part(folder: Path, sandbox: str, repeat: int = 1, start: dict[str, str] | None = None) -> list[dict]:
    """Both tools' whole processes, one after the other, ``repeat`` times: the first pair on this machine's caches as
    they are (on a fresh machine: kernelwright measures the GPU's ceilings and compiles its stages' kernels once,
    CuPy compiles Kernel Tuner's), the next ones as a user's later runs find them."""
    from agent.trace.events import read_events
    from agent.trace.records import Summary

    task_dir = row_sum_task(folder, start)
    config = folder / "run.toml"
    config.write_text(RUN_CONFIG)
    rows = []
    for i in range(repeat):
        kt = _timed([sys.executable, str(Path(__file__).resolve()), "--kt-process", str(task_dir)]) \
            if sandbox != "fake" else dict(wall_s=float("nan"), stdout=json.dumps(dict(tune_s=float("nan"),
                                                                                       configurations=0, best=None)))
        traces, run_id = folder / "traces", f"throughput{i}"
        kw = _timed([sys.executable, "-m", "agent", "optimize", str(task_dir), "--config", str(config), "--traces",
                     str(traces), "--quiet", "--json", "--run-id", run_id, "--sandbox", sandbox])
        printed = json.loads(kw["stdout"])
        summary = Summary.model_validate({k: v for k, v in printed.items() if k not in ("screened", "not_winner")})
        out = dict(kernel_tuner=dict(wall_s=kt["wall_s"], **json.loads(kt["stdout"].strip().splitlines()[-1])),
                   kernelwright=dict(wall_s=kw["wall_s"], timeline=_timeline(events := read_events(traces / run_id)),
                                     **_outside(events, kw),
                                     totals=summary.totals.model_dump(mode="json") if summary.totals else None,
                                     tuning=[t.model_dump(mode="json") for t in summary.claim.searches],
                                     best=summary.best.speedup.model_dump() if summary.best and summary.best.speedup
                                     else None, claim=_claim(summary)))
        out["ratio"] = out["kernelwright"]["wall_s"] / out["kernel_tuner"]["wall_s"]
        _print_optimize(out, i, start)
        rows.append(out)
    return rows


def _timed(cmd: list[str]) -> dict:
    """The process's wall seconds and output, with when it started and ended (the clock of a trace's events)."""
    started, t0 = time.time(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return dict(wall_s=wall, stdout=proc.stdout, started=started, ended=time.time())


def _outside(events, run: dict) -> dict:
    """The process's seconds outside its run's trace: before the trace began (the interpreter, the imports, the
    sandbox's start) and after its last event (the sandbox's close, the exit)."""
    begun = events[0].t - events[0].wall_s
    return dict(before_trace_s=begun - run["started"], after_trace_s=run["ended"] - events[-1].t)


def _claim(summary) -> dict:
    """What the claim checked after the search: the leaders set aside at a held-out size (id, and the sizes it was
    evaluated at before that), and the winner's held-out sizes (``summary``: a ``Summary``)."""
    claim = summary.claim
    return dict(set_aside=[dict(id=f.id, sizes_checked=len(f.rows)) for f in claim.set_aside],
                winner_sizes=len(claim.rows or []), winner=summary.best.id if summary.best else None)


def _timeline(events) -> list[tuple[str, float]]:
    """(what, the run's wall seconds when it was recorded) for the run's events (``read_events``) that mark its
    stages."""
    marks, screens = [], 0
    for e in events:
        if e.kind == "evaluation":
            c, t = e.result.cost, e.result.timing
            rounds = "" if t is None else f" in {t.rounds} rounds" + (
                f", {t.candidate_launches} launches" if t.candidate_launches is not None else "")
            marks.append((f"evaluated {e.candidate_id} ({e.status}; its wall {c.wall_s:.2f} s: compile {c.compile_s:.2f}, "
                          f"checks {c.check_gpu_s:.2f}, reference {c.reference_s:.2f}, timing {c.time_gpu_s:.2f}{rounds})",
                          e.wall_s))
        elif e.kind == "screen":
            screens += len(e.configurations)
            marks.append((f"screened {len(e.configurations)} (total {screens})", e.wall_s))
        elif e.kind == "sanitize":
            tools = ", ".join(f"{t.tool} {t.seconds:.2f} s" + (f" [its program: {_parts(t.program_s)}]"
                                                                  if t.program_s else "") for t in e.report.tools)
            marks.append((f"sanitized {e.candidate_id} ({e.report.status}: {tools}; wall {e.report.wall_s:.2f} s)", e.wall_s))
        elif e.kind in ("phase", "stop", "end"):
            marks.append((f"phase {e.name}" if e.kind == "phase" else
                          "end (after the claim's held-out check and sanitizer, and the summary)" if e.kind == "end"
                          else e.kind, e.wall_s))
    return marks


def _parts(seconds: dict) -> str:
    """Where seconds went, part by part, in the order given."""
    return ", ".join(f"{k} {v:.2f}" for k, v in seconds.items())


def _speedup_text(speedup: dict | None) -> str:
    """The claim's speedup over the start configuration, with its interval; "no claim" where the run made none."""
    if not speedup:
        return "no claim"
    return f"{speedup['value']:.3f}x [{speedup['low']:.3f}, {speedup['high']:.3f}] over the start"


def _print_optimize(out: dict, i: int, start: dict[str, str] | None = None) -> None:
    kt, kw = out["kernel_tuner"], out["kernelwright"]
    where = f", starting at {', '.join(f'{k}={v}' for k, v in start.items())}" if start else ""
    print(f"\n## optimize with no model on the 24-point row-sum space{where}, as a user runs it (pair {i + 1})")
    print("\n| | wall s | configurations | best |")
    print("|---|---|---|---|")
    print(f"| Kernel Tuner, whole process (imports, context, inputs, tune {kt['tune_s']:.2f} s) | {kt['wall_s']:.2f} | "
          f"{kt['configurations']} | {kt['best']} |")
    tuning = (kw["tuning"] or [{}])[0]
    print(f"| kernelwright optimize (the CLI, a new process) | {kw['wall_s']:.2f} | {tuning.get('screened')} screened, "
          f"{tuning.get('evaluated_in_full')} in full | {_speedup_text(kw['best'])} |")
    print(f"\nratio kernelwright / Kernel Tuner: **{out['ratio']:.2f}x** the wall time\n")
    print("| the run's events | wall s |\n|---|---|")
    for what, t in kw["timeline"]:
        print(f"| {what} | {t:.2f} |")
    claim = kw["claim"]
    aside = ", ".join(f"{a['id']} (at {a['sizes_checked']} size{'s' if a['sizes_checked'] != 1 else ''})"
                      for a in claim["set_aside"]) or "none"
    print(f"\nThe claim's held-out check: leaders set aside {aside}; the winner {claim['winner'] or '-'} checked at "
          f"{claim['winner_sizes']} sizes")
    print(f"\nThe process outside its run's trace: {kw['before_trace_s']:.2f} s before it began (the interpreter, the "
          f"imports, the sandbox's start), {kw['after_trace_s']:.2f} s after its last event (the sandbox's close, the exit)")


def kt_process(task_dir: str) -> int:
    """Kernel Tuner's whole process for the row-sum space (run in a new process by ``optimize_part``)."""
    import kernel_tuner_live as klive

    from sandbox import load_candidate, load_task

    task = load_task(task_dir)
    spec = klive.spec(task, load_candidate(ROW_SUM))
    run = klive.tune(task, spec, inputs=lambda: vkt.kt_inputs(task))
    print(json.dumps(dict(tune_s=run.seconds, configurations=run.tried, failed=run.failed, best=run.best)))
    return 0


# ---- LLM-style candidates --------------------------------------------------------------------------------


class Answers:
    """A model stand-in: each request is answered with the next candidate of a list (whole kernels, each new code)."""

    name = "answers"

    def __init__(self, candidates):
        self.candidates = list(candidates)

    def propose(self, request):
        from agent.protocols import Proposal

        if not self.candidates:
            return []
        cand = self.candidates.pop(0)
        return [Proposal(cand, [request.baseline.id] if request.baseline else [], "model", note=cand.label)]

    def observe(self, entry):
        pass


def softmax_answers(n: int):
    """``n`` distinct softmax kernels, none of them the baseline itself: the suite's baseline at its other knob
    values and bench/candidates/softmax_tuned.cu at several, under several compiler options."""
    from sandbox import load_candidate, load_task

    base = load_candidate(load_task("softmax").baseline_path)
    tuned = load_candidate(ROOT / "bench" / "candidates" / "softmax_tuned.cu")
    pool = [base.with_knobs({"BLOCK": b}) for b in base.knobs["BLOCK"] if b != base.defines()["BLOCK"]]
    pool += [tuned.with_knobs(dict(THREADS=t, VEC=v, ONLINE=o, UNROLL=u, WARP_PER_ROW=w))
             for t in (256, 512) for v in (1, 2, 4) for o in (0, 1) for u in (1, 4) for w in (0, 1)]
    return _under_flags(pool, n)


def row_sum_answers(n: int):
    """``n`` distinct row-sum kernels, none of them the baseline itself: the suite's baseline at its other block
    sizes and bench/candidates/row_sum_vec.cu (vector loads, warp shuffles) at every point of its space, under
    several compiler options (27 kernels, 54 builds)."""
    from sandbox import load_candidate, load_task

    base = load_candidate(load_task("row_sum").baseline_path)
    vec = load_candidate(ROW_SUM)
    pool = [base.with_knobs({"BLOCK": b}) for b in base.knobs["BLOCK"] if b != base.defines()["BLOCK"]]
    pool += [vec.with_knobs(dict(BLOCK=b, VEC=v)) for v in vec.knobs["VEC"] for b in vec.knobs["BLOCK"]]
    return _under_flags(pool, n)


def _under_flags(pool, n: int):
    # ptxas at -O1 gives new machine code for every kernel here (the other options often give the same: a known
    # build, skipped as a duplicate, not evaluated)
    flags = [(), ("--ptxas-options=-O1",), ("--extra-device-vectorization",)]
    out = [c.with_flags(f) for f in flags for c in pool][:n]
    return [dataclasses.replace(c, label=f"answer{i}") for i, c in enumerate(out)]


ANSWERS = {"softmax": softmax_answers, "row_sum": row_sum_answers}   # memory-bound suite tasks


class Spans:
    """The sandbox's evaluations and profiles as (start, end) on this process's clock, for what the loop leaves idle
    between them: their methods wrapped for the length of a ``with`` block."""

    def __init__(self, cls):
        self.cls, self.spans = cls, []   # (method, start, end), in seconds since the epoch as the trace's events

    def __enter__(self):
        self.saved = {name: getattr(self.cls, name) for name in ("evaluate", "profile")}
        for name, real in self.saved.items():
            def timed(sb, *args, _real=real, _name=name, **kwargs):
                t0 = time.time()
                try:
                    return _real(sb, *args, **kwargs)
                finally:
                    self.spans.append((_name, t0, time.time()))
            setattr(self.cls, name, timed)
        return self

    def __exit__(self, *exc):
        for name, real in self.saved.items():
            setattr(self.cls, name, real)

    def idle(self, start: float, end: float) -> list[float]:
        """The gaps between consecutive spans that lie in [start, end]."""
        inside = sorted((a, b) for _, a, b in self.spans if a >= start and b <= end)
        return [max(0.0, b0 - a1) for (_, a1), (b0, _) in zip(inside, inside[1:])]


class Requests:
    """Every request the sandbox's worker processes answered, as (reply, start, seconds), the start in seconds since the
    epoch as the trace's events: ``WorkerProcess.call`` wrapped for the length of a ``with`` block."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __enter__(self):
        from sandbox.host.pool import WorkerProcess

        self.real = real = WorkerProcess.call

        def call(worker, request, timeout, _calls=self.calls):
            t0, p0 = time.time(), time.perf_counter()
            reply = real(worker, request, timeout)
            _calls.append((reply, t0, time.perf_counter() - p0))
            return reply

        WorkerProcess.call = call
        return self

    def __exit__(self, *exc):
        from sandbox.host.pool import WorkerProcess

        WorkerProcess.call = self.real


def _trial_kind(label: str) -> str:
    if label.startswith(("benchmark", "size")):
        return "the benchmark size"
    return "the check sizes" if label.startswith("check[") else "kept timing launches"


def worker_split(calls: list[tuple], start: float, end: float, candidates: int) -> dict:
    """Per candidate, in ms, from the requests that began within [start, end]: the GPU worker's correctness stages
    (their wall, and each kind of trial's own seconds and parts) and the reference worker's comparisons (those of
    correctness stages, those of the timing stage's kept launches: wall and parts). ``calls``: ``Requests.calls``."""
    from sandbox.wire import Checked, Compared

    rows: dict[str, dict] = {}

    def add(where: str, seconds: float, parts: dict) -> None:
        row = rows.setdefault(where, {"ms": 0.0, "parts": Counter()})
        row["ms"] += 1e3 * seconds / candidates
        row["parts"].update({k: 1e3 * v / candidates for k, v in parts.items()})

    for reply, t0, seconds in calls:
        if not start <= t0 <= end:
            continue
        if isinstance(reply, Checked):
            add("GPU worker: correctness stages", seconds, {})
            for trial in reply.trials:
                add(f"GPU worker: their trials at {_trial_kind(trial.label)}", trial.gpu_s, trial.split_s)
        elif isinstance(reply, Compared):
            kinds = {_trial_kind(t.label) for t in reply.trials}
            what = "the timing stage's kept launches" if kinds == {"kept timing launches"} else "correctness stages"
            add(f"reference worker: {what}", seconds, reply.split_s)
    return {where: {"ms": row["ms"], "parts": dict(row["parts"].most_common())} for where, row in rows.items()}


def candidates_part(folder: Path, n: int, parallel: int, sandbox: str, fake_eval_s: float = 0.0,
                    task: str = "softmax") -> dict:
    import agent
    from sandbox.host.fake import FakeSandbox
    from sandbox.host.gpu import GPUSandbox

    answers = ANSWERS[task](n)
    t0 = time.perf_counter()
    simulated = FakeSandbox.evaluate
    if sandbox == "fake" and fake_eval_s > 0:   # a simulated evaluation that takes as long as a GPU's would
        def slow(sb, *args, **kwargs):
            time.sleep(fake_eval_s)
            return simulated(sb, *args, **kwargs)
        FakeSandbox.evaluate = slow
    try:
        with Spans(GPUSandbox if sandbox == "gpu" else FakeSandbox) as spans, Requests() as requests:
            run = agent.optimize(task, proposer=Answers(answers), traces=folder / "traces", progress=False,
                                 sandbox=sandbox, config={"budget": {"iterations": len(answers)}, "parallel": parallel,
                                                          "tune": {"enabled": False}, "sanitize": {"enabled": False}})
    finally:
        FakeSandbox.evaluate = simulated
    wall = time.perf_counter() - t0
    from agent.trace.events import read_events
    from agent.trace.records import Summary

    events = read_events(run.path)
    timeline = _timeline(events)
    evaluated = [e for e in run.entries if e.origin != "baseline"]
    base = next(e for e in run.entries if e.origin == "baseline")
    base_profile_s = base.result.cost.profile_gpu_s
    # The phase starts once the baseline is settled: evaluated, then profiled (the first prompt's profile, taken
    # before its evaluation is recorded), and ends when the last candidate is recorded. What the run does after (the
    # held-out check of its leaders) is a cost of the run, not of its candidates, and is reported beside.
    stamps = [e.t for e in events if e.kind == "evaluation"]
    profiled = [b for name, _, b in spans.spans if name == "profile"]
    start = max([stamps[0]] + profiled[:1])
    phase_s, finish_s = stamps[-1] - start, max(e.t for e in events) - stamps[-1]
    gpu = sum(e.result.cost.check_gpu_s + e.result.cost.time_gpu_s + e.result.cost.reference_s
              + e.result.cost.profile_gpu_s for e in evaluated)
    profiles = [e.result.cost.profile_gpu_s for e in evaluated if e.result.cost.profile_gpu_s > 0]
    ahead = sum(1 for e in evaluated if e.result.profile is not None and e.result.profile.started_ahead)
    walls = [e.result.cost.wall_s for e in evaluated]
    out = dict(task=task, candidates=len(evaluated),
               statuses=dict(Counter(e.result.status.value for e in evaluated)), run_wall_s=wall,
               phase_s=phase_s, per_gpu_hour=3600 * len(evaluated) / phase_s, busy=gpu / phase_s,
               evaluation_wall_median_s=statistics.median(walls) if walls else None,
               profiles=len(profiles), profile_s=profiles, profiles_started_ahead=ahead, parallel=parallel,
               baseline=timeline[0][0], baseline_profile_s=base_profile_s)
    print(f"\n## LLM-style candidates on {task} at its benchmark size ({parallel} requests open)")
    print("\n| candidates | statuses | phase wall s | per GPU-hour | GPU busy | evaluation wall (median) s | "
          "profiles of a new best: n (started ahead), median s, max s |")
    print("|---|---|---|---|---|---|---|")
    prof = f"{len(profiles)} ({ahead}), {statistics.median(profiles):.2f}, {max(profiles):.2f}" if profiles else "0"
    print(f"| {out['candidates']} | {out['statuses']} | {phase_s:.1f} | {out['per_gpu_hour']:,.0f} | {out['busy']:.0%} | "
          f"{out['evaluation_wall_median_s']:.2f} | {prof} |")
    bp = base.result.profile
    parts = ""
    if bp is not None and bp.seconds > 0:
        parts = (f" ({'started ahead' if bp.started_ahead else 'started then'}; the program's parts: "
                 + _parts(bp.program_seconds or {}) + ")")
    print(f"\nBefore the phase (run wall {wall:.1f} s in all): {out['baseline']}, then its profile "
          f"{base_profile_s:.2f} s{parts}. After it: {finish_s:.2f} s (the held-out check of the leaders, the summary)")
    if profiled:
        print(f"The baseline's profile ended {stamps[0] - profiled[0]:+.3f} s before its evaluation was recorded")
    out["finish_s"] = finish_s
    out["split"] = _candidate_split(evaluated, phase_s)
    gaps = spans.idle(start, stamps[-1])
    if gaps:
        print(f"\nThe loop between one evaluation or profile and the next (the GPU slot idle): median "
              f"{statistics.median(gaps):.3f} s, max {max(gaps):.3f} s, sum {sum(gaps):.2f} s over {len(gaps)}")
    out["gaps_s"] = gaps
    out["workers"] = worker_split(requests.calls, start, stamps[-1], len(evaluated))
    if out["workers"]:
        print("\nThe workers' correctness stages and reference comparisons begun in the phase, per candidate:\n")
        print("| where | ms | its parts, ms |")
        print("|---|---|---|")
        for where, row in out["workers"].items():
            parts = ", ".join(f"{k} {v:.1f}" for k, v in row["parts"].items())
            print(f"| {where} | {row['ms']:.1f} | {parts} |")
    return out


def _candidate_split(evaluated, phase_s: float) -> dict:
    """Where the candidates' seconds went: each cost's median and sum, the timing stage's parts and the profiles'
    parts (summed), against the phase's wall."""
    costs = {k: [getattr(e.result.cost, k) for e in evaluated]
             for k in ("wall_s", "compile_s", "check_gpu_s", "reference_s", "time_gpu_s", "profile_gpu_s")}
    timing, profile = Counter(), Counter()
    for e in evaluated:
        timing.update(e.result.env.timing_split_s or {})
        if e.result.profile is not None:
            profile.update({f"stage {k}": v for k, v in e.result.profile.stage_seconds.items()})
            profile.update({f"program {k}": v for k, v in e.result.profile.program_seconds.items()})
    timed = [e.result.timing for e in evaluated if e.result.timing is not None]
    kinds = ("rounds", "candidate_launches", "repeated_launches")
    counts = {k: [getattr(t, k) for t in timed if getattr(t, k) is not None] for k in kinds}
    for t in timed:   # each implementation's warm-up launches (a baseline or vendor timed just before: 3)
        for name, n in (t.warm_up_launches or {}).items():
            counts.setdefault(f"warm_up_{name}", []).append(n)
    print(f"\nWhere the candidates' seconds went (phase wall {phase_s:.1f} s; timing stages: "
          + ", ".join(f"{k} median {statistics.median(v):g}, sum {sum(v)}" for k, v in counts.items() if v) + "):\n")
    print("| cost | median s | sum s |")
    print("|---|---|---|")
    for k, v in costs.items():
        print(f"| {k} | {statistics.median(v) if v else 0:.3f} | {sum(v):.2f} |")
    for title, parts in (("timing stage", timing), ("profiles", profile)):
        if parts:
            print(f"\n{title}, summed: " + _parts(dict(parts.most_common())))
    profiled = [(e.id, e.result.profile) for e in evaluated
                if e.result.profile is not None and e.result.profile.seconds > 0]
    if profiled:
        print("\nEach profile: its seconds, the profiled program's parts (launches: the warm-up and ncu's replay passes "
              "of the profiled one), and the rest (ncu's report and the program's exit):\n")
        print("| candidate | s | started ahead | the program's parts | the rest s |")
        print("|---|---|---|---|---|")
        for cid, prof in profiled:
            parts = prof.program_seconds or {}
            print(f"| {cid} | {prof.seconds:.2f} | {'yes' if prof.started_ahead else 'no'} | "
                  + _parts(parts)
                  + f" | {prof.seconds - sum(parts.values()):.2f} |")
    return dict(costs=costs, timing=dict(timing), profile=dict(profile), counts=counts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from: {', '.join(PARTS)}")
    ap.add_argument("--cases", default=",".join(vkt.CASES), help="the search part's cases")
    ap.add_argument("--finalists", type=int, default=1, help="screened configurations evaluated in full per case")
    ap.add_argument("--candidates", type=int, default=48, help="LLM-style candidates")
    ap.add_argument("--repeat", type=int, default=2, help="pairs of whole processes in the optimize part")
    ap.add_argument("--start", metavar="KNOB=V,...", default="",
                    help="the optimize part's run starts at these knob values (the same space; from a slower start "
                         "its leaders are re-checked at the held-out sizes and the one that passes is sanitized)")
    ap.add_argument("--task", default="softmax", choices=sorted(ANSWERS),
                    help="the candidates part's task (a memory-bound suite task; its answers: see *_answers)")
    ap.add_argument("--parallel", type=int, default=4, help="requests open at once in the candidates part")
    ap.add_argument("--sandbox", default="gpu", help="the optimize and candidates parts' sandbox (fake: a dry run "
                    "of this script, simulated figures)")
    ap.add_argument("--fake-eval-s", type=float, default=0.0, metavar="S",
                    help="with --sandbox fake: each simulated evaluation takes S seconds, as a GPU's would (the "
                         "candidates part then shows the loop's own waits)")
    ap.add_argument("--json", type=Path, help="also write every part's figures to this file")
    ap.add_argument("--cprofile", type=Path, metavar="FILE",
                    help="also write a cProfile of this process (the loop, the orchestrator) to FILE")
    ap.add_argument("--kt-process", metavar="TASK_DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.kt_process:
        return kt_process(args.kt_process)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [p for p in parts if p not in PARTS] + [c for c in cases if c not in vkt.CASES]
    if unknown:
        ap.error(f"unknown parts or cases {unknown} (parts: {', '.join(PARTS)}; cases: {', '.join(vkt.CASES)})")
    if min(args.candidates, args.parallel, args.finalists, args.repeat) < 1:
        ap.error("--candidates, --parallel, --finalists and --repeat must be at least 1")
    if args.fake_eval_s < 0 or (args.fake_eval_s and args.sandbox != "fake"):
        ap.error("--fake-eval-s takes seconds (at least 0), with --sandbox fake only")
    try:
        start = knob_values(args.start)
        start_at(ROW_SUM.read_text(), start)
    except ValueError as exc:
        ap.error(f"--start {args.start!r}: {exc} (give KNOB=VALUE pairs separated by commas)")
    out, t0 = {}, time.perf_counter()
    prof = None
    if args.cprofile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    with tempfile.TemporaryDirectory(prefix="kw-throughput-") as folder:
        for part in parts:
            if part == "search":
                out[part] = search_part(cases, args.finalists)
            elif part == "optimize":
                out[part] = optimize_part(Path(folder), args.sandbox, args.repeat, start)
            else:
                out[part] = candidates_part(Path(folder), args.candidates, args.parallel, args.sandbox,
                                            args.fake_eval_s, args.task)
            if args.json:
                args.json.write_text(json.dumps(out, indent=1, default=str))
    if prof is not None:
        prof.disable()
        prof.dump_stats(args.cprofile)
    print(f"\n{len(parts)} parts in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
