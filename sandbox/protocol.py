"""``Sandbox``: the seam between the agent and everything that touches CUDA, every member the agent uses.

The sandboxes (``host/compile_only``, ``host/fake``, ``host/gpu``, ``cluster/pool``) subclass it, so an ability one
of them lacks has an answer here: ``prefetch`` and the ``warm`` methods do nothing, ``describe`` and ``usage`` have nothing to say,
``screen`` says it cannot (``can_screen`` is False). The evaluation contract is the same for one GPU and many:
``submit_compile`` / ``submit_evaluate`` hand a job over, ``wait`` returns the jobs done with their typed outcomes
(``sandbox.jobs``), and ``slots`` says how many run at once. A local sandbox has one slot: its jobs run on the
caller's thread when it waits (``jobs.OneSlot``); a cluster overrides the three to run them on its GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .candidates.candidate import Candidate
    from .jobs import Job, OneSlot
    from .judging.result import Profile, Result
    from .judging.sanitizer_report import SanitizeReport
    from .tasks.task import Task


@runtime_checkable
class Sandbox(Protocol):
    kind: str                  # "gpu", "compile-only" or "fake"
    device: dict               # the environment fingerprint of the device (``gpu`` None without one)
    slots: int = 1             # jobs that run at once
    can_screen: bool = False   # whether ``screen`` measures anything

    def compile(self, task: Task, candidate: Candidate) -> Result:
        """Status ``compiled``, ``compile_error`` or ``launch_error``; a ``CandidateError`` for a plan that cannot
        fit the task."""
        ...

    def evaluate(self, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None,
                 timing: bool = True) -> Result: ...

    def evaluate_alone(self, task: Task, candidate: Candidate) -> Result:
        """``evaluate`` at the benchmark size once nothing else of this sandbox is in flight on its GPU: the re-time of
        a headline claim (``agent.claims.retime``). A local sandbox runs one job at a time, on the caller's thread,
        so nothing else is in flight between two calls."""
        return self.evaluate(task, candidate)

    def profile(self, task: Task, candidate: Candidate, result: Result | None = None,
                parent_profile: Profile | None = None) -> Profile:
        """Nsight Compute's profile and diagnosis, or why there is none."""
        ...

    def sanitize(self, task: Task, candidate: Candidate) -> SanitizeReport:
        """compute-sanitizer's report, or why there is none."""
        ...

    def close(self) -> None: ...

    def screen(self, task: Task, candidates: list[Candidate], **kwargs) -> list:
        """Each candidate's ``Screened`` time relative to the baseline's, in order (where ``can_screen``)."""
        raise NotImplementedError(f"a {self.kind} sandbox cannot screen")

    def prefetch(self, task: Task, candidates: list[Candidate]) -> None:
        """Start compiling ``candidates`` where that can run ahead of the compiles asked for; else nothing."""

    def warm(self) -> None:
        """Start, in the background, what a search's many compiles will need (every compile worker), so that its
        first configurations do not wait for processes to start; nothing where there is nothing to start."""

    def warm_profiler(self) -> None:
        """Start, in the background, a profiling run for a run that will profile (its first profile then pays no
        start-up: ``sandbox.host.profiler.Profiler.start_ahead``); nothing where there is nothing to start."""

    def warm_sanitizer(self, tools: tuple[str, ...]) -> None:
        """Start, in the background, a run of each of compute-sanitizer's ``tools`` for the next ``sanitize`` (it then
        pays no start-up: ``sandbox.host.sanitizer.Sanitizer.start_ahead``); nothing where there is nothing to
        start."""

    def describe(self) -> dict | None:
        """What run.json records of where the run measured beyond ``device`` (a cluster's GPUs); None here."""
        return None

    def usage(self) -> dict:
        """How busy the sandbox's GPUs were (a cluster's ``wall_s`` and ``busy_s``); nothing here."""
        return {}

    def submit_compile(self, task: Task, candidate: Candidate, tag: Any = None) -> Job:
        """Queue the compile job; where compiles run ahead (``prefetch``), this one starts now, so that it runs
        while the jobs queued before it (another candidate's evaluation) do."""
        from .jobs import Job, compile_job

        self.prefetch(task, [candidate])
        return _one_slot(self).submit(Job("compile", tag), lambda: compile_job(self, task, candidate))

    def submit_evaluate(self, task: Task, candidate: Candidate, tag: Any = None, sizes: dict[str, int] | None = None,
                        timing: bool = True) -> Job:
        from .jobs import Job, evaluate_job

        return _one_slot(self).submit(Job("evaluate", tag), lambda: evaluate_job(self, task, candidate, sizes, timing))

    def wait(self, timeout: float = 0.5) -> list[Job]:
        """The jobs done since the last call, each with its ``outcome``; a local sandbox runs them now (and never
        waits: nothing else is running), a cluster waits up to ``timeout`` seconds for one to finish."""
        return _one_slot(self).wait()


def _one_slot(sandbox: Sandbox) -> OneSlot:
    """A local sandbox's slot, made on first use (the sandboxes' own constructors need not know of it)."""
    from .jobs import OneSlot

    return vars(sandbox).setdefault("_slot", OneSlot())
