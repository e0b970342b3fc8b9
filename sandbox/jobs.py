"""The evaluation contract's records: a ``Job`` (one compile or evaluation handed to a sandbox) and what became of
it, one of four typed outcomes, the same whether one local sandbox or a GPU of a Ray cluster ran it:

- ``Evaluated(result)``: the sandbox returned a ``Result`` (a compile error or a wrong kernel is a result too);
- ``Invalid(reason)``: the candidate cannot be judged at all (a plan that does not fit the task);
- ``Failed(reason)``: the sandbox itself failed (a worker broke twice, the task is broken): the run stops;
- ``Lost(reasons)``: the GPU that ran it was lost twice (a cluster only): only this candidate is skipped.

``compile_job`` and ``evaluate_job`` turn one sandbox call into an outcome; ``OneSlot`` is a local sandbox's
single slot: ``submit`` queues a job, ``wait`` runs the queued jobs on the caller's thread, evaluations first. A cluster
(``sandbox.cluster.RaySandbox``) runs the same jobs on its actors, ``slots`` of them at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Union

from .candidates.candidate import CandidateError
from .tasks.task import TaskError

if TYPE_CHECKING:
    from .candidates.candidate import Candidate
    from .judging.result import Result
    from .tasks.task import Task

ATTEMPTS = 2   # a sandbox that breaks on one candidate is given one more try before it counts as failed


@dataclass(frozen=True)
class Evaluated:
    result: Result


@dataclass(frozen=True)
class Invalid:
    reason: str


@dataclass(frozen=True)
class Failed:
    reason: str


@dataclass(frozen=True)
class Lost:
    reasons: tuple[str, ...]


Outcome = Union[Evaluated, Invalid, Failed, Lost]


@dataclass(eq=False)
class Job:
    """One call handed to a sandbox: ``op`` is ``compile``, ``evaluate`` or (on a cluster) another actor method;
    ``tag`` is the caller's own handle on it; ``outcome`` is set when ``done``."""

    op: str
    tag: Any = None
    outcome: Any = None
    done: bool = False


def compile_job(sandbox, task: Task, candidate: Candidate) -> Evaluated | Invalid:
    """A compile as an outcome: a ``Result`` (compiled, a compile error, a plan that cannot launch), or ``Invalid``.
    Any other exception is the sandbox's own and propagates."""
    try:
        return Evaluated(sandbox.compile(task, candidate))
    except CandidateError as exc:
        return Invalid(str(exc))


def evaluate_job(sandbox, task: Task, candidate: Candidate, sizes: dict[str, int] | None = None,
                 timing: bool = True) -> Evaluated | Invalid | Failed:
    """An evaluation as an outcome; a sandbox that raised ``RuntimeError`` (a worker that broke) is tried once
    more, and a second failure, like a broken task, is ``Failed`` with the first line of its message."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return Evaluated(sandbox.evaluate(task, candidate, sizes, timing))
        except CandidateError as exc:
            return Invalid(str(exc))
        except TaskError as exc:
            return Failed(_first_line(exc))
        except RuntimeError as exc:
            if attempt == ATTEMPTS:
                return Failed(_first_line(exc))
    raise AssertionError("unreachable")


@dataclass
class OneSlot:
    """A local sandbox's one slot: jobs wait in submission order and run, one after the other on the caller's
    thread, when ``wait`` is called (so a caller decides what to submit next only after it has seen what came
    back, exactly as if it had called the sandbox itself)."""

    queued: list[tuple[Job, Callable[[], Outcome]]] = field(default_factory=list)

    def submit(self, job: Job, run: Callable[[], Outcome]) -> Job:
        self.queued.append((job, run))
        return job

    def wait(self) -> list[Job]:
        """Run every queued job, evaluations first, then compiles (each in submission order); the jobs, done (none
        when nothing was queued: nothing else can finish). A compile starts when it is submitted (``prefetch``)
        and its job only waits for it, so a compile submitted just before an evaluation runs beside that
        evaluation, not ahead of it."""
        done, self.queued = self.queued, []
        for job, run in sorted(done, key=lambda queued: queued[0].op == "compile"):
            job.outcome, job.done = run(), True
        return [job for job, _ in done]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
