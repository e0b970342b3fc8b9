"""Profiling a candidate's launch plan with Nsight Compute, and the diagnosis that comes of it.

``Profiler.profile(task, candidate, result=None, parent_profile=None)`` (``GPUSandbox.profile`` hands
over to it) compiles the candidate (cached), resolves its plan at the benchmark size and runs ``ncu`` on
``python -m sandbox.worker.profile_target``: that program allocates the inputs, runs the plan a few times to
warm up, then once more; ncu skips the warm-up launches (``--launch-skip``) and profiles exactly the
plan's launches (``--launch-count``), with real clocks (``--clock-control none``) and a fixed set of
sections and metrics. It builds a flat dict (what ``sandbox.profile.diagnosis`` reads) and returns it as a
``sandbox.judging.result.Profile``:

- ``status``: ``ok``; ``unavailable`` (no GPU, no ncu, or no permission to read counters: said once
  in ``notice``, then remembered, so later calls cost nothing); ``failed`` (this candidate could not
  be profiled: the reason says why); ``skipped`` (it does not compile or its plan does not resolve);
- ``kernels``: per launch, in plan order: ``kernel``, ``share_pct`` of the profiled time, the flat
  ``summary`` of its counters (``sandbox.profile.counters``) and ncu's ``rules`` (OPT/WRN hints with
  estimated speedups);
- ``diagnosis`` (short text, for ``Entry.diagnosis`` and prompts) and ``diagnosis_data`` (the same as a
  dict: bound, roofline, issues, changes, resources), from ``sandbox.profile.diagnosis``;
- ``started_ahead``: the next profiling run is started ahead and waits for its request (``ProfileConfig.ahead``;
  ncu with ``--profile-from-start off``, the program up to its CUDA context): when a run that will profile begins
  (``start_ahead``), and again each time one is handed its request, so a profile pays only for its launches and
  its report; a run that ended or that ncu refused is set aside;
- ``seconds``: wall time of the ncu runs, also added to ``result.cost.profile_gpu_s``; ``stage_seconds`` splits
  it into the profiling run and the report's page imports, ``program_seconds`` the profiled program's own parts
  (under ncu: imports, CUDA context, module load, buffers, inputs, launches with their replays).

Counters never feed the timing: the timed numbers come from the timing stage alone.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from ..candidates.plan import PlanError, resolve
from ..judging.result import Profile, Status
from ..plumbing import tempdirs
from ..plumbing.files import cache_dir
from ..plumbing.hostpaths import redact
from ..plumbing.tools import StartedAhead, run_tool, scrubbed_env, start_ahead
from ..profile import ncu
from ..profile.counters import summarize
from ..profile.diagnosis import diagnose
from ..tasks.inputs import input_specs, output_specs
from ..tasks.keyed import new_seed
from ..wire import ProfileLaunches, TargetRan, TargetStart, WaitAhead, to_json, written


# The metrics named beside the sections, by ``Profiler._metrics``: every one the summary reads, the base set where
# ncu refuses one of those, none where it refuses one of the base set too.
METRIC_LEVELS = (ncu.METRICS + ncu.SUMMARY_METRICS, ncu.METRICS, ())


class ProfileConfig(BaseModel):
    """Limits of one profiling run. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(180.0, gt=0, description="Wall-clock limit of the ncu run, and of each page import.")
    warmup_rounds: int = Field(2, ge=0, description="Whole-plan runs before the profiled one (skipped by ncu).")
    ncu: str | None = Field(None, description="Path to ncu; default: $KERNELWRIGHT_NCU, PATH, then the usual folders.")
    ahead: bool = Field(True, description="After each profile, start the next profiling run (ncu, the program, its "
                        "CUDA context) so that it waits, idle, for the next request: a profile then pays only for "
                        "its launches and its report. Its CUDA context stays on the GPU meanwhile.")


def outcome(status: str, reason: str = "", seconds: float = 0.0, **extra) -> dict:
    """A profile without counters (``unavailable``, ``failed``, ``skipped``): the same keys as a full one (host
    folders in ``reason`` replaced: sandbox.plumbing.hostpaths)."""
    return {"status": status, "reason": redact(reason), "notice": "", "kernels": [], "seconds": seconds, **extra}


def unavailable(reason: str, notice: bool = True) -> dict:
    return outcome("unavailable", reason, notice=redact(reason) if notice else "")


class Profiler:
    """Profiles one sandbox's candidates with ncu. Its own state: what ncu refused here (then it is not run
    again), whether the extra metrics are accepted, ncu's version, and a private home folder for the runs.

    ``build(task, candidate)`` gives the sandbox's (cached) compile: (Result, CompileInfo, cubin).
    ``harness_cubin`` is the device harness of a GPU sandbox; without one there is no GPU to profile on."""

    def __init__(self, build: Callable, kind: str, arch: str, harness_cubin: bytes | None = None,
                 config: ProfileConfig | None = None):
        self.build, self.kind, self.arch, self.harness_cubin = build, kind, arch, harness_cubin
        self.config = config or ProfileConfig()
        self._refused: str | None = None     # why ncu cannot profile here, once known
        self._notice_given = False
        self._metrics = 0                     # 0: ncu accepts every metric named, 1: only the base set, 2: none
        self._printed = True                  # ncu prints the details page into a log file (else: imports)
        self._version: str | None = None
        self._home: Path | None = None
        self._cleanup = None
        self._spare: StartedAhead | None = None     # the next profiling run, started ahead (``ProfileConfig.ahead``)

    def profile(self, task, candidate, result=None, parent_profile: Profile | None = None,
                sizes: dict[str, int] | None = None, save_to: Path | None = None) -> Profile:
        """Profile ``candidate`` at ``sizes`` (default: the benchmark size) and diagnose it.

        ``result`` (the candidate's evaluated Result) adds the measured roofline to the diagnosis,
        receives the profiling seconds in ``cost.profile_gpu_s`` and the profile in ``profile``.
        ``parent_profile`` (the parent's earlier return value) adds counter deltas. ``save_to``
        keeps ncu's report and CSV pages in that folder."""
        sizes = dict(sizes or task.spec.sizes.benchmark)
        built = self.build(task, candidate)  # cached: the cubin to profile and the resources to report
        prof = self._profile(task, candidate, built, sizes, save_to)
        prof["sizes"] = sizes
        if result is not None:
            result.cost.profile_gpu_s += prof["seconds"]
            cand = result.timing.impls.get("candidate") if result.timing else None
            if cand:
                prof["timing"] = {"median_ms": cand.median_ms, "pct_of_roofline": cand.pct_of_roofline}
        diag = diagnose(task, result, prof, parent_profile.model_dump() if parent_profile else None,
                        compile_info=built[1])
        prof["diagnosis"], prof["diagnosis_data"] = diag.text, diag.data
        record = Profile.model_validate(prof)
        if result is not None:
            result.profile = record
        return record

    def close(self) -> None:
        self._close_spare()
        if self._cleanup is not None:
            self._cleanup()

    # ---- internals ---------------------------------------------------------------------------

    def _profile(self, task, candidate, built: tuple, sizes: dict, save_to: Path | None) -> dict:
        """``built``: what ``build`` returned for the candidate (result, compile info, cubin)."""
        if self.harness_cubin is None:
            said, self._notice_given = self._notice_given, True
            return unavailable(f"{self.kind} sandbox: no GPU to profile on", notice=not said)
        if self._refused:
            return unavailable(self._refused, notice=False)
        exe = self.config.ncu or ncu.find_ncu()
        if not exe:
            return self._give_up("ncu not found (looked at $KERNELWRIGHT_NCU, PATH, /opt/nvidia/nsight-compute/*/, "
                                 "/usr/local/cuda/bin)")
        if not os.access(exe, os.X_OK):
            return self._give_up(f"ncu at {exe} is not an executable file")
        compile_result, info, cubin = built
        if compile_result.status is not Status.compiled:
            return outcome("skipped", f"{compile_result.status.value}: {compile_result.error}")
        try:
            plan = resolve(task, candidate, info, sizes)
        except PlanError as exc:
            return outcome("skipped", f"plan: {exc}")
        work = Path(tempfile.mkdtemp(prefix="run-", dir=self._profile_home()))
        try:
            return self._run_ncu(exe, task, plan, cubin, sizes, work, save_to)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _give_up(self, reason: str) -> dict:
        self._refused = reason
        return unavailable(reason)

    def _profile_home(self) -> Path:
        if self._home is None:
            home = tempdirs.make("profile")
            (home / "tmp").mkdir()
            self._home = home
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(home), True)
        return self._home

    def start_ahead(self) -> None:
        """Start a profiling run ahead of the first request (``ProfileConfig.ahead``), for a run that will profile:
        its start-up runs beside what comes first (the baseline's evaluation), and the first profile pays only for
        its launches and report too. Nothing where no profile can run here, or one is started already."""
        if not self.config.ahead or self._spare is not None or self.harness_cubin is None or self._refused:
            return
        exe = self.config.ncu or ncu.find_ncu()
        if exe and os.access(exe, os.X_OK):
            self._spare = self._start_spare(exe)

    def _run_ncu(self, exe: str, task, plan: dict, cubin: bytes, sizes: dict, work: Path, save_to: Path | None) -> dict:
        spare, self._spare = self._spare, None
        found = None
        if spare is not None:
            # the next run starts as soon as this one has its request, beside its replays: two new bests in a row
            # then find it up (its start-up, about as long as a profile, would otherwise be waited for)
            found = self._on_spare(spare, exe, task, plan, cubin, sizes, save_to, then=lambda: self._start_next(exe))
        if found is None:   # set aside: one started beside it was started with what it had, so it goes too
            self._close_spare()
            found = self._run_now(exe, task, plan, cubin, sizes, work, save_to)
        if found["status"] == "unavailable":
            self._close_spare()
        else:
            self._start_next(exe)
        return found

    def _start_next(self, exe: str) -> None:
        if self.config.ahead and self._spare is None:
            self._spare = self._start_spare(exe)

    def _close_spare(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    # ---- a run started ahead ----------------------------------------------------------------

    def _start_spare(self, exe: str) -> StartedAhead | None:
        """Start the next profiling run ahead of its request: ncu, the interpreter, the imports and the CUDA context
        come up now, while the loop goes on, and the next profile pays only for its own launches and report
        (``ahead.serve``: ``profile_target --wait``). None where it cannot start."""
        work = Path(tempfile.mkdtemp(prefix="spare-", dir=self._profile_home()))
        (work / "harness.cubin").write_bytes(self.harness_cubin)
        metrics, printed = METRIC_LEVELS[self._metrics], self._printed

        def cmd(spare_json: Path) -> list[str]:
            target = [sys.executable, "-m", "sandbox.worker.profile_target", "--wait", str(spare_json)]
            return ncu.profile_command(exe, None, 0, 0, work / "report", target, metrics,
                                       work / "ncu.log" if printed else None)

        begin = TargetStart(self.arch, str(work / "harness.cubin"), str(work / "target.json"))
        return start_ahead(cmd, work, self._profile_env(),
                           lambda go, wait_s, owner: to_json(begin, WaitAhead(go, wait_s, owner)))

    def _on_spare(self, spare: StartedAhead, exe: str, task, plan: dict, cubin: bytes, sizes: dict,
                  save_to: Path | None, then: Callable[[], None] | None = None) -> dict | None:
        """Profile on the run started ahead; None where it cannot be used (it ended, or ncu refused something it was
        started with), and the caller profiles the usual way. ``then`` runs once the request is handed over."""
        try:
            if not spare.waiting:
                return None
            work = spare.work
            (work / "candidate.cubin").write_bytes(cubin)
            spare.hand_over(to_json(self._launches(task, plan, sizes, work)))
            if then is not None:
                then()
            code, output, seconds = spare.finish(self.config.timeout_s)
            output += _read_text(work / "ncu.log")
            if ncu.unknown_option(output) or ncu.unknown_metric(output):
                return None
            return self._finish(exe, code, output, seconds, work, plan, save_to, spare=True)
        finally:
            spare.close()

    # ---- a run started now --------------------------------------------------------------------

    def _run_now(self, exe: str, task, plan: dict, cubin: bytes, sizes: dict, work: Path, save_to: Path | None) -> dict:
        cfg = self.config
        target = self._target(task, plan, cubin, sizes, work)
        names = [launch["func"] for launch in plan["launches"]]
        count = len(names)
        report, log = work / "report", work / "ncu.log"
        seconds = 0.0
        # every metric the summary reads named (the printed page then holds them all); where ncu refuses a name,
        # the base set, then none (the sections alone)
        for level in range(self._metrics, len(METRIC_LEVELS)):
            metrics = METRIC_LEVELS[level]
            for printed in ((True, False) if self._printed else (False,)):
                log.unlink(missing_ok=True)
                cmd = ncu.profile_command(exe, names, cfg.warmup_rounds * count, count, report, target, metrics,
                                          log if printed else None)
                code, output, spent = run_tool(cmd, work / "cwd", self._profile_env(), cfg.timeout_s)
                output += _read_text(log)
                seconds += spent
                if not (printed and ncu.unknown_option(output)):
                    break
                self._printed = False  # an ncu without the options that print the page into a log: imports
            if not (metrics and ncu.unknown_metric(output)):
                break
            self._metrics = level + 1
        return self._finish(exe, code, output, seconds, work, plan, save_to)

    def _finish(self, exe: str, code: int | None, output: str, seconds: float, work: Path, plan: dict,
                save_to: Path | None, spare: bool = False) -> dict:
        """The profile a finished ncu run in ``work`` left: its report, its printed page, the program's status."""
        cfg = self.config
        log, report = work / "ncu.log", work / "report"
        if code is None:
            return _failed(f"ncu passed its {cfg.timeout_s:.0f} s limit and was killed", output, seconds)
        denied = ncu.no_permission(output)
        if denied:
            found = self._give_up(f"ncu may not read the GPU's performance counters here: {denied}")
            found["seconds"] = seconds
            return found
        ended = written(work / "target.json", TargetRan)
        if ended is not None and ended.status != "ran":
            return _failed(f"the profiled run ended with {ended.status}: {ended.error}", output, seconds)
        rep = report.with_suffix(".ncu-rep")
        if not rep.is_file():
            return _failed(f"ncu wrote no report (exit code {code})", output, seconds)
        profiled_s = seconds
        pages = {"details": _read_text(log)}
        rows = ncu.launches_from_details(pages["details"]) if self._metrics == 0 and self._printed else []
        source = "printed by the run" if rows else "imported"   # where the profile's numbers came from
        if not rows or save_to is not None:
            # the page is not in the log (or not every metric is named on it), or the pages are to be kept as an
            # import prints them (sections by label, and every metric): import them from the report, the two
            # exports side by side (each is a whole ncu start-up)
            t0 = time.perf_counter()
            with ThreadPoolExecutor(2) as pool:
                done = {page: pool.submit(run_tool, ncu.import_command(exe, rep, page), work / "cwd",
                                          self._profile_env(), cfg.timeout_s, keep_stdout_only=True)
                        for page in ("details", "raw")}
            seconds += time.perf_counter() - t0
            for page, future in done.items():
                code, pages[page], _ = future.result()
                if code != 0:
                    return _failed(f"ncu --import --page {page} failed (exit code {code})", pages[page], seconds)
            rows = rows or ncu.launches(pages["raw"], pages["details"])
        if not rows:
            return _failed("ncu profiled no launch of the plan's kernels", output, seconds)
        if spare and len(rows) != len(plan["launches"]):
            return _failed(f"ncu profiled {len(rows)} launches in the profiler range, the plan has "
                           f"{len(plan['launches'])}", output, seconds)
        if save_to is not None:
            save_to.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rep, save_to / "ncu.ncu-rep")
            for page, text in pages.items():
                (save_to / f"ncu-{page}.csv").write_text(text)
        return dict(outcome("ok", seconds=seconds), tool=self._ncu_version(exe), kernels=kernels_from(rows, plan),
                    messages=ncu.messages(output)[:10],
                    stage_seconds={"profile": round(profiled_s, 3), "import": round(seconds - profiled_s, 3)},
                    pages=source, program_seconds=ended.split_s if ended is not None else {},
                    started_ahead=spare)

    def _target(self, task, plan: dict, cubin: bytes, sizes: dict, work: Path) -> list[str]:
        """Write the profiled program's request into ``work``; return its command line."""
        (work / "cwd").mkdir()  # ncu reads config.ncu-cfg from its working directory: keep it empty
        (work / "candidate.cubin").write_bytes(cubin)
        (work / "harness.cubin").write_bytes(self.harness_cubin)
        begin = TargetStart(self.arch, str(work / "harness.cubin"), str(work / "target.json"))
        (work / "request.json").write_text(to_json(begin, self._launches(task, plan, sizes, work)))
        return [sys.executable, "-m", "sandbox.worker.profile_target", str(work / "request.json")]

    def _launches(self, task, plan: dict, sizes: dict, work: Path) -> ProfileLaunches:
        """The profiled program's request: the candidate's cubin in ``work``, the plan on fresh inputs."""
        return ProfileLaunches(str(work / "candidate.cubin"), plan, input_specs(task, sizes, 0),
                               output_specs(task, sizes), new_seed(),
                               self.config.warmup_rounds)

    def _profile_env(self) -> dict[str, str]:
        # CuPy's own kernels (input generation) are cached across runs; candidate code arrives as a cubin
        return scrubbed_env(self._profile_home(), cache_dir() / "cupy")

    def _ncu_version(self, exe: str) -> str:
        if self._version is None:
            code, text, _ = run_tool([exe, "--version"], self._profile_home(), self._profile_env(), 60)
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            self._version = lines[-1] if code == 0 and lines else "ncu"
        return self._version


def kernels_from(rows: list[dict], plan: dict) -> list[dict]:
    """Per profiled launch, in plan order: its name in the plan, share of the time, summary, rules."""
    rows = sorted(rows, key=lambda r: r["id"])
    summaries = [summarize(r["metrics"]) for r in rows]
    total = sum(s.get("duration_ns", 0.0) for s in summaries)
    out = []
    for i, (row, s) in enumerate(zip(rows, summaries)):
        launch = plan["launches"][i] if i < len(plan["launches"]) else {}
        share = 100.0 * s.get("duration_ns", 0.0) / total if total else 100.0 / len(rows)
        out.append(dict(launch=i, kernel=launch.get("kernel", row["kernel"]), ncu_name=row["kernel"],
                        share_pct=share, summary=s, rules=row["rules"]))
    return out


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _failed(reason: str, output: str, seconds: float) -> dict:
    said = ncu.messages(output)
    tail = said[-5:] if said else [line for line in output.strip().splitlines()[-5:]]
    return outcome("failed", reason, seconds, detail=redact("\n".join(tail)))
