"""compute-sanitizer memcheck and racecheck on a candidate, before it may be declared a winner.

``Sanitizer.sanitize`` (behind ``GPUSandbox.sanitize(task, candidate)``) resolves the candidate's plan at
the task's smallest non-trivial check sizes (every size symbol at least 2: odd sizes that run the
tails in seconds under the tools' slowdown), then runs ``python -m sandbox.worker.sanitize_target`` under
``compute-sanitizer --tool T`` once per tool, each in a process of its own with a scrubbed environment,
a private folder and a wall-clock limit (its process group is killed past it). The tools run side by side:
their verdicts do not depend on timing, each run is mostly its own start-up (the tool, the interpreter, a
CUDA context), and the sizes are small, so a winner waits for the slowest tool, not for their sum. A run that will
sanitize starts each tool's run ahead of its request (``start_ahead``), so that start-up is paid beside the
held-out check instead of after it. The target gives
every array an allocation of its own, so memcheck's bounds are the arrays' bounds. Each run's
verdict joins the tool's summary with the target's status (sandbox.judging.sanitizer_report).

memcheck finds out-of-bounds and misaligned accesses to global, local and shared memory and
hardware exceptions; racecheck finds shared-memory hazards (it does not see races on global
memory). A clean verdict covers the sizes that ran, nothing more.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from ..candidates.plan import PlanError, resolve
from ..judging.result import Status
from ..judging.sanitizer_report import DEFAULT_TOOLS, SanitizeReport, overall, verdict
from ..plumbing import tempdirs
from ..plumbing.files import cache_dir
from ..plumbing.hostpaths import redact
from ..plumbing.tools import StartedAhead, find_tool, run_tool, scrubbed_env, start_ahead
from ..tasks.inputs import input_specs, output_specs
from ..tasks.keyed import new_seed
from ..wire import SanitizeCase, SanitizeCases, TargetRan, TargetStart, WaitAhead, to_json, written

SANITIZER_GLOBS = ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda-*/bin/compute-sanitizer",
                   "/usr/local/cuda*/compute-sanitizer/compute-sanitizer", "/opt/nvidia/compute-sanitizer/compute-sanitizer")
ERROR_EXIT = 86
PRINT_LIMIT = 20


def find_sanitizer() -> str | None:
    """``$KERNELWRIGHT_COMPUTE_SANITIZER``, then ``compute-sanitizer`` on PATH, then the usual install folders."""
    return find_tool("compute-sanitizer", "KERNELWRIGHT_COMPUTE_SANITIZER", SANITIZER_GLOBS)


def sanitize_sizes(task, count: int = 2) -> list[dict[str, int]]:
    """The ``count`` check sizes with every symbol >= 2 that move the fewest bytes (all sizes if none qualify)."""
    sizes = [dict(s) for s in task.spec.sizes.check]
    candidates = [s for s in sizes if all(v >= 2 for v in s.values())] or sizes
    return sorted(candidates, key=lambda s: (task.bytes(s), sorted(s.items())))[:count]


def command(exe: str, tool: str, target: list[str]) -> list[str]:
    return [exe, "--tool", tool, "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no",
            "--report-api-errors", "no", "--error-exitcode", str(ERROR_EXIT), *target]


class Sanitizer:
    """Held by a GPU sandbox: ``build`` compiles (cached), ``arch`` and the harness cubin serve the target."""

    def __init__(self, build: Callable, arch: str, harness_cubin: bytes, executable: str | None = None):
        self.build, self.arch, self.harness_cubin = build, arch, harness_cubin
        self.exe = executable or find_sanitizer()
        self._home: Path | None = None
        self._version: str | None = None
        self._spares: dict[str, StartedAhead] = {}   # tool -> its run started ahead of the next request

    def start_ahead(self, tools=DEFAULT_TOOLS) -> None:
        """Start each tool's run ahead of its request: the tool, the interpreter, the imports and the CUDA context
        under the tool come up now, beside what the caller does meanwhile (a run's held-out check), and the next
        ``sanitize`` pays only for its cases (``ahead.serve``: ``sanitize_target --wait``). Nothing without the tool."""
        if not self.exe:
            return
        for tool in tools:
            if tool not in self._spares:
                spare = self._start_spare(tool)
                if spare is not None:
                    self._spares[tool] = spare

    def sanitize(self, task, candidate, tools=DEFAULT_TOOLS, check_sizes: int = 2, timeout_s: float = 300.0) -> SanitizeReport:
        """Run each of ``tools`` on ``candidate`` at the task's ``check_sizes`` smallest non-trivial check sizes."""
        if not self.exe:
            return SanitizeReport(status="unavailable", reason="no compute-sanitizer (looked at "
                                  "$KERNELWRIGHT_COMPUTE_SANITIZER, PATH, /usr/local/cuda*/)")
        compile_result, info, cubin = self.build(task, candidate)
        if compile_result.status is not Status.compiled:
            return SanitizeReport(status="skipped", reason=f"{compile_result.status.value}: {compile_result.error}")
        sizes = sanitize_sizes(task, check_sizes)
        try:
            plans = [resolve(task, candidate, info, s) for s in sizes]
        except PlanError as exc:
            return SanitizeReport(status="skipped", reason=f"plan: {exc}", sizes=sizes)
        work = Path(tempfile.mkdtemp(prefix="run-", dir=self.home()))
        t0 = time.perf_counter()
        try:
            (work / "candidate.cubin").write_bytes(cubin)
            (work / "harness.cubin").write_bytes(self.harness_cubin)
            cases = [SanitizeCase(p, input_specs(task, s, 0), output_specs(task, s)) for s, p in zip(sizes, plans)]
            with ThreadPoolExecutor(len(tools) + 1) as pool:   # every tool, and the version asked once, at once
                version = pool.submit(self.version)
                runs = [pool.submit(self._tool, tool, cases, work, timeout_s) for tool in tools]
                verdicts = [run.result() for run in runs]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return SanitizeReport(status=overall(verdicts), sizes=sizes, tools=verdicts, tool_version=version.result(),
                              wall_s=time.perf_counter() - t0)

    def _tool(self, tool: str, cases: list[SanitizeCase], work: Path, timeout_s: float):
        spare = self._spares.pop(tool, None)
        if spare is not None:
            try:
                if spare.waiting:   # else it ended (it is not waited for): the tool runs the usual way
                    (spare.work / "candidate.cubin").write_bytes((work / "candidate.cubin").read_bytes())
                    spare.hand_over(to_json(SanitizeCases(str(spare.work / "candidate.cubin"), cases,
                                                          new_seed())))
                    code, output, seconds = spare.finish(timeout_s)
                    return self._verdict(tool, code, output, spare.work / "status.json", seconds, timeout_s)
            finally:
                spare.close()
        status_file, cwd = work / f"{tool}.status.json", work / f"cwd-{tool}"
        cwd.mkdir()
        begin = TargetStart(self.arch, str(work / "harness.cubin"), str(status_file))
        request = SanitizeCases(str(work / "candidate.cubin"), cases, new_seed())
        (work / f"{tool}.json").write_text(to_json(begin, request))
        target = [sys.executable, "-m", "sandbox.worker.sanitize_target", str(work / f"{tool}.json")]
        code, output, seconds = run_tool(command(self.exe, tool, target), cwd, self.env(), timeout_s)
        return self._verdict(tool, code, output, status_file, seconds, timeout_s)

    def _verdict(self, tool: str, code: int | None, output: str, status_file: Path, seconds: float, timeout_s: float):
        """One tool's verdict from its run, started ahead or not: its output without the sandbox's home folder,
        and the status the target wrote."""
        return verdict(tool, code, redact(output, {str(self.home()): "<sanitizer>"}), written(status_file, TargetRan),
                       seconds, timeout_s)

    def _start_spare(self, tool: str) -> StartedAhead | None:
        work = Path(tempfile.mkdtemp(prefix=f"spare-{tool}-", dir=self.home()))
        (work / "harness.cubin").write_bytes(self.harness_cubin)

        def cmd(spare_json: Path) -> list[str]:
            return command(self.exe, tool, [sys.executable, "-m", "sandbox.worker.sanitize_target", "--wait",
                                            str(spare_json)])

        begin = TargetStart(self.arch, str(work / "harness.cubin"), str(work / "status.json"))
        return start_ahead(cmd, work, self.env(),
                           lambda go, wait_s, owner: to_json(begin, WaitAhead(go, wait_s, owner)))

    def home(self) -> Path:
        if self._home is None:
            self._home = tempdirs.make("sanitize")
            (self._home / "tmp").mkdir()
            weakref.finalize(self, shutil.rmtree, str(self._home), True)
        return self._home

    def close(self) -> None:
        for spare in self._spares.values():
            spare.close()
        self._spares = {}
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def env(self) -> dict[str, str]:
        # CuPy's own kernels (input generation) are cached across runs; candidate code arrives as a cubin
        return scrubbed_env(self.home(), cache_dir() / "cupy")

    def version(self) -> str:
        if self._version is None:
            code, text, _ = run_tool([self.exe, "--version"], self.home(), self.env(), 60)
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            self._version = lines[-1] if code == 0 and lines else "compute-sanitizer"
        return self._version
