"""The driver's side of the GPU actors: ``ActorJob`` (one call to make on some GPU) and ``GpuActors`` (the actors of
one GPU model, which of them is free, and what to do when one is lost).

Ray places the actors (``num_gpus=1`` each) and runs their calls; ``GpuActors`` only hands each job to a free
actor in the order the jobs came, so that one GPU runs one thing at a time (an evaluation's timing never
shares its GPU). A lost actor (its process killed, its node gone) costs only the job it was running: the job
goes back to the front of the queue once, a replacement actor is asked of Ray, and a job lost twice comes back
as ``Lost(reasons)`` (``sandbox.jobs``).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..jobs import Failed, Job, Lost

if TYPE_CHECKING:
    from .actor import Hello
START_TIMEOUT_S = 600.0   # a replacement actor that has not answered by then no longer holds up a run
ATTEMPTS = 2              # a job runs at most twice when actors are lost under it


@dataclass(eq=False)
class ActorJob(Job):
    """One call: ``op`` is an actor method (``evaluate``, ``profile``, ``screen``, ...) or ``compile`` (a CPU
    task). ``outcome`` is what came back (the method's return value), or ``Lost`` / ``Failed``."""

    args: tuple = ()
    prefer: str | None = None      # an actor's name: run there when it is free
    sync: bool = False             # a call the driver waits for itself (not returned by ``wait``)
    attempts: int = 0
    lost: list[str] = field(default_factory=list)
    actor: str | None = None
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    finished_at: float | None = None


@dataclass
class Actor:
    name: str
    handle: Any
    where: dict
    busy: ActorJob | None = None
    busy_s: float = 0.0


class GpuActors:
    """The live actors of the chosen model, the jobs waiting for one, and the replacements being started."""

    def __init__(self, ray, remote_cls, kind: str, config: dict, model: tuple, lost_errors: tuple):
        self.ray, self.remote_cls, self.kind, self.config, self.model = ray, remote_cls, kind, config, model
        self.lost_errors = lost_errors
        self.actors: dict[str, Actor] = {}
        self.queue: deque[ActorJob] = deque()
        self.running: dict[Any, ActorJob] = {}          # ObjectRef -> job
        self.starting: dict[Any, tuple[str, Any, float]] = {}   # hello ref -> (name, handle, since)
        self.lost_log: list[dict] = []
        self._serial = 0

    # ---- actors ------------------------------------------------------------------------------

    def new_actor(self) -> tuple[str, Any, Any]:
        """Ask Ray for one more actor: (its name, its handle, the ref of its ``hello``)."""
        name = f"gpu-{self._serial}"
        self._serial += 1
        handle = self.remote_cls.remote(self.kind, self.config)
        return name, handle, handle.hello.remote()

    def add(self, name: str, handle, hello: Hello) -> None:
        self.actors[name] = Actor(name, handle, hello.where)

    def _lose(self, actor: Actor, reason: str) -> None:
        """Forget a lost actor and ask Ray for a replacement (of the same model, checked when it answers)."""
        self.actors.pop(actor.name, None)
        self.lost_log.append({"actor": actor.name, "where": actor.where, "reason": reason, "at": time.time()})
        try:
            self.ray.kill(actor.handle)
        except Exception:  # already gone
            pass
        name, handle, ref = self.new_actor()
        self.starting[ref] = (name, handle, time.monotonic())

    # ---- jobs --------------------------------------------------------------------------------

    def submit(self, job: ActorJob, front: bool = False) -> None:
        (self.queue.appendleft if front else self.queue.append)(job)
        self.dispatch()

    def dispatch(self) -> None:
        """Hand waiting jobs to free actors, in order; a job that prefers a busy actor takes another free one."""
        while self.queue:
            free = [a for a in self.actors.values() if a.busy is None]
            if not free:
                return
            job = self.queue.popleft()
            actor = next((a for a in free if a.name == job.prefer), free[0])
            job.actor, job.started_at, actor.busy = actor.name, time.monotonic(), job
            self.running[getattr(actor.handle, job.op).remote(*job.args)] = job

    def refs(self) -> list:
        """What to wait on: the running calls and the replacements starting."""
        self.check_alive()
        return list(self.running) + list(self.starting)

    def collect(self, ready: list) -> list[ActorJob]:
        """Take the finished calls among ``ready`` (other refs are ignored); the jobs that finished, lost twice
        included. Free actors then take the next jobs."""
        finished = []
        for ref in ready:
            if ref in self.starting:
                self._started(ref)
            elif ref in self.running:
                job = self._finished(ref)
                if job is not None:
                    finished.append(job)
        self.dispatch()
        return finished

    def _finished(self, ref) -> ActorJob | None:
        job = self.running.pop(ref)
        actor = self.actors.get(job.actor)
        now = time.monotonic()
        try:
            outcome = self.ray.get(ref)
        except self.lost_errors as exc:
            if actor is not None:
                self._lose(actor, _first_line(exc))
            job.attempts += 1
            job.lost.append(f"{job.actor}: {_first_line(exc)}")
            if job.attempts < ATTEMPTS:
                self.queue.appendleft(job)
                return None
            outcome = Lost(tuple(job.lost))
        except Exception as exc:  # the actor's method raised: a bug, reported as the sandbox failing
            outcome = Failed(f"{type(exc).__name__}: {_first_line(exc)}")
        if actor is not None:
            actor.busy = None
            actor.busy_s += now - (job.started_at or now)
        job.outcome, job.done, job.finished_at = outcome, True, now
        return job

    def _started(self, ref) -> None:
        name, handle, _ = self.starting.pop(ref)
        try:
            hello = self.ray.get(ref)
        except Exception as exc:
            self.lost_log.append({"actor": name, "where": None, "reason": f"replacement did not start: {_first_line(exc)}",
                                  "at": time.time()})
            return
        from .connect import model_of

        if model_of(hello) != self.model:
            self.lost_log.append({"actor": name, "where": hello.where, "at": time.time(),
                                  "reason": f"replacement landed on another model ({hello.device.get('gpu')}): not used"})
            self.ray.kill(handle)
            return
        self.add(name, handle, hello)

    def check_alive(self) -> None:
        """Every actor lost and no replacement coming: a RuntimeError, which ends the run cleanly."""
        if self.actors or not (self.queue or self.running):
            return
        now = time.monotonic()
        if not self.starting or all(now - since > START_TIMEOUT_S for _, _, since in self.starting.values()):
            from .connect import ClusterError

            reasons = "; ".join(f"{e['actor']}: {e['reason']}" for e in self.lost_log[-3:])
            raise ClusterError(f"no GPU actor is left to evaluate on ({reasons})")

    def close(self) -> None:
        """Let each actor close its sandbox (its worker processes and folders), then end them all."""
        refs = [a.handle.close.remote() for a in self.actors.values()]
        try:
            self.ray.wait(refs, num_returns=len(refs), timeout=30)
        except Exception:  # an actor already gone
            pass
        for actor in list(self.actors.values()):
            try:
                self.ray.kill(actor.handle)
            except Exception:
                pass
        for _, handle, _ in self.starting.values():
            try:
                self.ray.kill(handle)
            except Exception:
                pass
        self.actors.clear()
        self.starting.clear()
        self.running.clear()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]
