"""Correctness trials in the GPU worker: fresh guarded buffers, seeded inputs, poisoned outputs, two runs
each; guard bands and input hashes checked after every launch (``violations``, also used by timing and
screening). Each trial's outcome is a ``TrialRun`` (sandbox.wire); the orchestrator has the outputs handed over
(``harness.hand_over``) compared with the reference."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..tasks.dtypes import np_dtype
from ..wire import CheckTrials, Checked, Trial, TrialRun
from .guards import Fence
from .harness import Harness, LaunchFailed, Poisoned, generate_into, hand_over, poison_outputs
from .memory_plan import gib, is_out_of_memory, margin
from .stopwatch import Stopwatch


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label)


def same_bytes(xp, a, b) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes (NaN payloads included; a scalar, a 0-d
    array, too: its dtype cannot be viewed as bytes until it is flattened). ``xp``: cupy, or numpy."""
    return bool(xp.array_equal(a.reshape(-1).view(xp.uint8), b.reshape(-1).view(xp.uint8)))


@dataclass
class QueuedViolations:
    """The tests of ``violations`` queued on the device, not yet read: ``values`` (a device vector) holds the guard
    bands' verdicts (nonzero: broken), then the inputs' hashes now, then as they were (``before``)."""

    where: list[tuple[str, str, str]]
    names: list[str]
    values: object


def queue_violations(h: Harness, groups: dict[str, dict], before: dict, seed: int) -> QueuedViolations:
    """Guard bands of every buffer (one launch for all: ``Harness.bands_broken``), and input hashes against
    ``before``: every test queued on the device, in stream order behind the launch it checks; ``violations_in``
    reads the verdicts once they are on the host."""
    where, buffers = [], []
    for kind, group in groups.items():
        for name, buf in group.items():
            buffers.append(buf)
            where += [(kind, name, "below"), (kind, name, "above")]
    names = list(before)
    digests = [groups["input"][name].data_hash(seed) for name in names]
    parts = [h.bands_broken(buffers)] + [d.ravel() for d in digests] + [before[name].ravel() for name in names]
    return QueuedViolations(where, names, h.cp.concatenate(parts))


def violations_in(queued: QueuedViolations, values: list[int]) -> list[str]:
    """The problems ``queued`` found, from its ``values`` as read to the host."""
    where, names = queued.where, queued.names
    problems = [f"out-of-bounds write: the guard band {side} {kind} {name!r} was overwritten"
                for (kind, name, side), broken in zip(where, values) if broken]
    hashes = values[len(where):]
    for i, name in enumerate(names):
        if hashes[i] != hashes[len(names) + i]:
            problems.append(f"input {name!r} was modified by the kernel (inputs are read-only)")
    return problems


def violations(h: Harness, groups: dict[str, dict], before: dict, seed: int) -> list[str]:
    """Guard bands of every buffer, and input hashes against ``before``: every test on the device, then one
    transfer of the verdicts to the host (a launch's checks wait on the GPU once, not once per buffer)."""
    queued = queue_violations(h, groups, before, seed)
    return violations_in(queued, queued.values.get().tolist())


def run_checks(h: Harness, req: CheckTrials) -> Checked:
    """Correctness trials: fresh guarded buffers, seeded inputs, poisoned outputs, two runs each."""
    data_dir = Path(req.data_dir)
    trials = req.trials
    out = []
    try:
        loaded = h.load(req.cubin, trials[0].plan)
    except LaunchFailed as exc:
        return Checked([TrialRun(trials[0].label, "launch_error", error=f"loading the module: {exc}")])
    for t in trials:
        try:
            result = _trial(h, loaded.with_plan(t.plan), t, data_dir, req.hash_seed, req.ipc)
        except LaunchFailed as exc:
            result = TrialRun(t.label, "launch_error", error=str(exc))
        except Poisoned as exc:
            raise Poisoned(f"{t.label} {t.sizes}: {exc}") from None
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            result = TrialRun(t.label, "too_large",
                              error=f"the device ran out of memory for this trial ({type(exc).__name__}: {first})")
        out.append(result)
        if result.status != "ran":
            break
        h.release_cached()
    return Checked(out)


def trial_bytes(t: Trial, scratch_bytes: int, ipc: bool) -> int:
    """Device memory of one trial: its inputs, outputs, the first run's copy (and its hand-over copy by IPC),
    the scratch, and the inputs' generation (as large again as the inputs, twice)."""
    size = lambda specs: sum(int(np.prod(s["shape"], dtype=np.int64)) * np_dtype(s["dtype"]).itemsize for s in specs)
    return 3 * size(t.inputs) + (3 if ipc else 2) * size(t.outputs) + scratch_bytes


def _trial(h: Harness, loaded, t: Trial, data_dir: Path, hash_seed: int, ipc: bool) -> TrialRun:
    cp = h.cp
    scratch_bytes = sum(s["count"] * np_dtype(s["dtype"]).itemsize for s in loaded.plan["scratch"])
    need, free = trial_bytes(t, scratch_bytes, ipc), h.free_bytes()
    if need > free - margin(free):
        return TrialRun(t.label, "too_large", error=f"the trial does not fit in device memory at this size: "
                    f"it needs {gib(need)} (inputs, outputs, their copies, scratch, the inputs' generation) and "
                    f"{gib(free - margin(free))} of the {gib(free)} free can be used")
    watch = Stopwatch(h.sync)  # where the trial's seconds go
    with watch("buffers"):
        ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in t.inputs}
        outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in t.outputs}
        scratch = loaded.alloc_scratch()
    with watch("inputs"):
        generate_into(h, ins, t.inputs, t.seed)
        before = {n: b.data_hash(hash_seed) for n, b in ins.items()}
    arrays = {n: b.view for n, b in {**ins, **outs}.items()}
    files, first = {}, {}
    kept = Fence(h, hash_seed)   # the first run's outputs, which the second is compared with
    for run in (1, 2):
        with watch("buffers"):
            poison_outputs(outs, t.outputs, second=run == 2)
            loaded.poison_scratch(scratch)
        with watch("launches"):
            loaded.launch(arrays, scratch)
        with watch("guards"):
            problems = violations(h, {"input": ins, "output": outs, "scratch": scratch}, before, hash_seed)
            if run == 2:
                problems += kept.broken("the second run wrote outside its own buffers")
        if problems:
            return TrialRun(t.label, "rejected", error=problems[0], detail="\n".join(problems))
        if run == 1:
            with watch("hand-over"):
                files["run1"] = {n: hand_over(h, b.view, data_dir / f"{_safe(t.label)}-run1-{n}.npy", ipc)
                                 for n, b in outs.items()}
                first = {n: b.view.copy() for n, b in outs.items()}
                kept.raise_({f"the copy of output {n!r} from the first run": a for n, a in first.items()})
    with watch("hand-over"):
        identical = all(same_bytes(cp, first[n], outs[n].view) for n in outs)
        if not identical:  # the second run is compared with the reference only when it differs from the first
            files["run2"] = {n: hand_over(h, b.view, data_dir / f"{_safe(t.label)}-run2-{n}.npy", ipc)
                             for n, b in outs.items()}
        hashes = {n: int(d.get()[0]) for n, d in before.items()}
    return TrialRun(t.label, "ran", files=files, identical=identical, input_hashes=hashes,
                    gpu_s=sum(watch.seconds.values()), split_s=dict(watch.seconds))




class Violation(Exception):
    """A rule broken while ``impl`` ran (a guard band or an input overwritten); ``problems`` says which."""

    def __init__(self, impl: str, problems: list[str]):
        super().__init__(problems[0])
        self.impl, self.problems = impl, problems
