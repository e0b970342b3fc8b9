"""Profiling a candidate's launch plan with Nsight Compute, and the diagnosis that comes of it.

``GPUSandbox.profile(task, candidate, result=None, parent_profile=None)`` (from ``ProfileMixin``)
compiles the candidate (cached), resolves its plan at the benchmark size and runs ``ncu`` on
``python -m sandbox.profile_target``: that program allocates the inputs, runs the plan a few times to
warm up, then once more; ncu skips the warm-up launches (``--launch-skip``) and profiles exactly the
plan's launches (``--launch-count``), with real clocks (``--clock-control none``) and a fixed set of
sections and metrics. It returns a JSON-ready dict:

- ``status``: ``ok``; ``unavailable`` (no GPU, no ncu, or no permission to read counters: said once
  in ``notice``, then remembered, so later calls cost nothing); ``failed`` (this candidate could not
  be profiled: the reason says why); ``skipped`` (it does not compile or its plan does not resolve);
- ``kernels``: per launch, in plan order: ``kernel``, ``share_pct`` of the profiled time, the flat
  ``summary`` of its counters (``sandbox.counters``) and ncu's ``rules`` (OPT/WRN hints with
  estimated speedups);
- ``diagnosis`` (short text, for ``Entry.diagnosis`` and prompts) and ``diagnosis_data`` (the same as a
  dict: bound, roofline, issues, changes, resources), from ``sandbox.diagnosis``;
- ``seconds``: wall time of the ncu runs, also added to ``result.cost.profile_gpu_s``.

Counters never feed the timing: the timed numbers come from the timing stage alone.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from . import ncu
from .counters import summarize
from .diagnosis import diagnose

OUTPUT_LIMIT = 200_000


class ProfileConfig(BaseModel):
    """Limits of one profiling run. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(180.0, gt=0, description="Wall-clock limit of the ncu run, and of each page import.")
    warmup_rounds: int = Field(2, ge=0, description="Whole-plan runs before the profiled one (skipped by ncu).")
    ncu: str | None = Field(None, description="Path to ncu; default: $KERNELWRIGHT_NCU, PATH, then the usual folders.")


def outcome(status: str, reason: str = "", seconds: float = 0.0, **extra) -> dict:
    """A profile without counters (``unavailable``, ``failed``, ``skipped``): the same keys as a full one."""
    return {"status": status, "reason": reason, "notice": "", "kernels": [], "seconds": seconds, **extra}


def unavailable(reason: str, notice: bool = True) -> dict:
    return outcome("unavailable", reason, notice=reason if notice else "")


class ProfileMixin:
    """Adds ``profile`` to a sandbox (it uses the sandbox's ``kind``, ``arch`` and ``_compile``)."""

    profile_config: ProfileConfig = ProfileConfig()

    def profile(self, task, candidate, result=None, parent_profile: dict | None = None,
                sizes: dict[str, int] | None = None, save_to: Path | None = None) -> dict:
        """Profile ``candidate`` at ``sizes`` (default: the benchmark size) and diagnose it.

        ``result`` (the candidate's evaluated Result) adds the measured roofline to the diagnosis,
        receives the profiling seconds in ``cost.profile_gpu_s`` and the profile in ``profile``.
        ``parent_profile`` (the parent's earlier return value) adds counter deltas. ``save_to``
        keeps ncu's report and CSV pages in that folder."""
        sizes = dict(sizes or task.spec.sizes.benchmark)
        compiled = self._compile(task, candidate)  # cached: the cubin to profile and the resources to report
        prof = self._profile(task, candidate, compiled, sizes, save_to)
        prof["sizes"] = sizes
        if result is not None:
            result.cost.profile_gpu_s += prof["seconds"]
            cand = result.timing.impls.get("candidate") if result.timing else None
            if cand:
                prof["timing"] = {"median_ms": cand.median_ms, "pct_of_roofline": cand.pct_of_roofline}
        diag = diagnose(task, result, prof, parent_profile, compile_info=compiled[1])
        prof["diagnosis"], prof["diagnosis_data"] = diag.text, diag.data
        if result is not None:
            result.profile = prof
        return prof

    # ---- internals ---------------------------------------------------------------------------

    def _profile(self, task, candidate, compiled: tuple, sizes: dict, save_to: Path | None) -> dict:
        """``compiled``: what ``_compile`` returned for the candidate (result, compile info, cubin)."""
        from .plan import PlanError, resolve
        from .result import Status

        kind = getattr(self, "kind", "")
        if kind != "gpu":
            return unavailable(f"{kind} sandbox: no GPU to profile on", notice=not self._said_once())
        known = getattr(self, "_ncu_unavailable", None)
        if known:
            return unavailable(known, notice=False)
        exe = self.profile_config.ncu or ncu.find_ncu()
        if not exe:
            return self._give_up("ncu not found (looked at $KERNELWRIGHT_NCU, PATH, /opt/nvidia/nsight-compute/*/, "
                                 "/usr/local/cuda/bin)")
        if not os.access(exe, os.X_OK):
            return self._give_up(f"ncu at {exe} is not an executable file")
        compile_result, info, cubin = compiled
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

    def _said_once(self) -> bool:
        said = getattr(self, "_profile_notice_given", False)
        self._profile_notice_given = True
        return said

    def _give_up(self, reason: str) -> dict:
        self._ncu_unavailable = reason
        return unavailable(reason)

    def _profile_home(self) -> Path:
        home = getattr(self, "_profile_dir", None)
        if home is None:
            home = Path(tempfile.mkdtemp(prefix="kw-profile-"))
            os.chmod(home, 0o700)
            (home / "tmp").mkdir()
            self._profile_dir = home
            weakref.finalize(self, shutil.rmtree, str(home), True)
        return home

    def _run_ncu(self, exe: str, task, plan: dict, cubin: bytes, sizes: dict, work: Path, save_to: Path | None) -> dict:
        cfg = self.profile_config
        target = self._target(task, plan, cubin, sizes, work)
        names = [launch["func"] for launch in plan["launches"]]
        count = len(names)
        report = work / "report"
        seconds = 0.0
        for with_metrics in ((True, False) if getattr(self, "_ncu_metrics", True) else (False,)):
            cmd = ncu.profile_command(exe, names, cfg.warmup_rounds * count, count, report, target, metrics=with_metrics)
            code, output, spent = _run(cmd, work / "cwd", self._profile_env(), cfg.timeout_s)
            seconds += spent
            refused = ncu.unknown_metric(output)
            if not (with_metrics and refused):
                break
            self._ncu_metrics = False
        if code is None:
            return _failed(f"ncu passed its {cfg.timeout_s:.0f} s limit and was killed", output, seconds)
        denied = ncu.no_permission(output)
        if denied:
            found = self._give_up(f"ncu may not read the GPU's performance counters here: {denied}")
            found["seconds"] = seconds
            return found
        status = _read_json(work / "target.json")
        if status.get("status") not in (None, "ran"):
            return _failed(f"the profiled run ended with {status['status']}: {status.get('error', '')}", output, seconds)
        rep = report.with_suffix(".ncu-rep")
        if not rep.is_file():
            return _failed(f"ncu wrote no report (exit code {code})", output, seconds)
        # the two page exports read the same report: run them side by side (each is a whole ncu start-up)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            done = {page: pool.submit(_run, ncu.import_command(exe, rep, page), work / "cwd", self._profile_env(),
                                      cfg.timeout_s, keep_stdout_only=True) for page in ("details", "raw")}
        seconds += time.perf_counter() - t0
        pages = {}
        for page, future in done.items():
            code, pages[page], _ = future.result()
            if code != 0:
                return _failed(f"ncu --import --page {page} failed (exit code {code})", pages[page], seconds)
        rows = ncu.launches(pages["raw"], pages["details"])
        if not rows:
            return _failed("ncu profiled no launch of the plan's kernels", output, seconds)
        if save_to is not None:
            save_to.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rep, save_to / "ncu.ncu-rep")
            for page, text in pages.items():
                (save_to / f"ncu-{page}.csv").write_text(text)
        return dict(outcome("ok", seconds=seconds), tool=self._ncu_version(exe), kernels=kernels_from(rows, plan),
                    messages=ncu.messages(output)[:10])

    def _target(self, task, plan: dict, cubin: bytes, sizes: dict, work: Path) -> list[str]:
        """Write the profiled program's request into ``work``; return its command line."""
        from .inputs import input_specs, output_specs

        (work / "cwd").mkdir()  # ncu reads config.ncu-cfg from its working directory: keep it empty
        (work / "candidate.cubin").write_bytes(cubin)
        (work / "harness.cubin").write_bytes(self._harness_cubin)
        request = dict(arch=self.arch, cubin=str(work / "candidate.cubin"), harness_cubin=str(work / "harness.cubin"),
                       plan=plan, inputs=input_specs(task, sizes, 0), outputs=output_specs(task, sizes),
                       seed=random.SystemRandom().getrandbits(62), warmup=self.profile_config.warmup_rounds,
                       status_file=str(work / "target.json"))
        (work / "request.json").write_text(json.dumps(request))
        return [sys.executable, "-m", "sandbox.profile_target", str(work / "request.json")]

    def _profile_env(self) -> dict[str, str]:
        from .compiler import cache_dir
        from .pool import PASS_ENV

        home = self._profile_home()
        env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
        # CuPy's own kernels (input generation) are cached across runs; candidate code arrives as a cubin
        env.update(HOME=str(home), TMPDIR=str(home / "tmp"), CUPY_CACHE_DIR=str(cache_dir() / "cupy"),
                   PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        return env

    def _ncu_version(self, exe: str) -> str:
        version = getattr(self, "_ncu_version_text", None)
        if version is None:
            code, text, _ = _run([exe, "--version"], self._profile_home(), self._profile_env(), 60)
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            version = self._ncu_version_text = lines[-1] if code == 0 and lines else "ncu"
        return version


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


def _failed(reason: str, output: str, seconds: float) -> dict:
    said = ncu.messages(output)
    tail = said[-5:] if said else [line for line in output.strip().splitlines()[-5:]]
    return outcome("failed", reason, seconds, detail="\n".join(tail))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _run(cmd: list[str], cwd: Path, env: dict, timeout: float, keep_stdout_only: bool = False) -> tuple[int | None, str, float]:
    """(exit code or None on timeout, output, seconds); the process group is killed on timeout."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err if keep_stdout_only else subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return 127, f"==ERROR== cannot run {cmd[0]}: {exc}", time.perf_counter() - t0
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            code = None
        text = _read(out, None if keep_stdout_only else OUTPUT_LIMIT)
        if keep_stdout_only and code != 0:
            text += _read(err, OUTPUT_LIMIT)
    return code, text, time.perf_counter() - t0


def _read(f, tail: int | None) -> str:
    """The whole file, or its last ``tail`` bytes (a candidate's printf may flood the output)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0 if tail is None else max(0, size - tail))
    return f.read().decode(errors="replace")
