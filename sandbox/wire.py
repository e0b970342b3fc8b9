"""What crosses the pipe between the trusted host and a worker process (``sandbox.worker.main``): one frozen
record per message. A reviewer of the sandbox's security story reads this file to know everything a worker that
ran candidate code can hand back: data only, never a callable.

Each request names the reply it gets, or ``WorkerError``:

- ``DescribeDevice`` -> ``DeviceInfo``; ``MeasureCeilings`` -> ``MeasuredCeilings`` (GPU role)
- ``Confinement`` -> ``ConfinementReport``; ``Compile`` -> ``Compiled`` (compile role)
- ``CheckTrials`` -> ``Checked``: correctness trials, two runs each (GPU role)
- ``Time`` -> ``Timed``, or ``StageFailed`` (the A/B timing stage, GPU role)
- ``IpcProbe`` -> ``IpcSent`` (GPU role); ``IpcRead`` -> ``IpcSum`` (reference role)
- ``Compare`` -> ``OutputsCompared``; ``Compares`` -> ``Compared`` (reference role)
- ``ScreenSetup`` -> ``ScreenReady``; ``Screen`` -> ``ScreenBatch``, or ``WorkerError(setup_lost=True)`` (GPU role)
- ``ProfileLaunches`` (under ncu), ``SanitizeCases`` (under compute-sanitizer) -> ``TargetRan``: the programs a tool
  runs, started with a ``TargetStart`` (and a ``WaitAhead`` where started ahead of the request), each a JSON file

Every record checks its fields' types when it is made (``WireError`` names the record and the field); the
worker and ``WorkerProcess.call`` refuse anything that is not a request or a reply. Payloads that other modules
define and check (input and output specs of ``sandbox.tasks.inputs``, resolved launch plans of
``sandbox.candidates.plan``, compile reports of ``sandbox.judging.result.CompileInfo``, device facts of
``sandbox.plumbing.envinfo``) travel as plain dicts.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import types
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Union


class WireError(TypeError):
    """A message made with a field of the wrong type, or something that is no message where one is due."""


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fits(value, hint) -> bool:
    """Whether ``value`` has the type ``hint`` (containers down to their items where those are typed)."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    return isinstance(value, origin or hint)


def _name(hint) -> str:
    plain = typing.get_origin(hint) is None and isinstance(hint, type)
    return hint.__name__ if plain else str(hint).replace("typing.", "").replace("sandbox.wire.", "")


@dataclass(frozen=True)
class Message:
    """A record that crosses the pipe; its fields are checked against their types when it is made."""

    def __post_init__(self):
        for name, hint in _hints(type(self)).items():
            value = getattr(self, name)
            if not _fits(value, hint):
                raise WireError(f"{type(self).__name__}.{name} must be {_name(hint)}, not {type(value).__name__}: "
                                f"{value!r:.80}")


class Request(Message):
    """A message from the host to a worker."""


class Reply(Message):
    """A message from a worker to the host."""

    @property
    def ok(self) -> bool:
        """Whether the worker did what was asked (every reply but ``WorkerError``)."""
        return True


def checked(message, kind: type[Message]) -> Message:
    """``message`` if it is a ``kind`` (``Request`` or ``Reply``), else one ``WireError`` naming what came instead."""
    if not isinstance(message, kind):
        raise WireError(f"expected a {kind.__name__} (sandbox.wire), got {type(message).__name__}: {message!r:.80}")
    return message


# ---- shared parts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessCode(Message):
    """The device harness (``sandbox/worker/harness.cu``) compiled for ``arch``, and its kernels' lowered names."""

    arch: str
    cubin: bytes
    names: dict[str, str] | None = None


@dataclass(frozen=True)
class WorkerError(Reply):
    """The request failed in the worker. ``poisoned``: the CUDA context is broken and the worker exits;
    ``setup_lost``: no screening is set up with the request's id; ``task_error``: the task's own reference failed."""

    error: str
    traceback: str = ""
    poisoned: bool = False
    setup_lost: bool = False
    task_error: bool = False

    @property
    def ok(self) -> bool:
        return False


@dataclass(frozen=True)
class Tolerance(Message):
    """An output's tolerance: |c - r| <= atol + rtol |r|, ``atol`` grown to ``spread`` times the standard deviation
    of the expected output where ``spread`` is set (``sandbox.judging.compare.spread_atol``)."""

    atol: float
    rtol: float
    spread: float = 0.0


def tolerances(task) -> dict[str, Tolerance]:
    """A task's tolerance per output (its own, else its dtype's), as the workers receive them."""
    return {o.name: Tolerance(t.atol, t.rtol, t.spread) for o in task.spec.outputs for t in [task.output_tolerance(o)]}


# ---- the device, the compiler ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DescribeDevice(Request):
    """What device is this (the first request of a GPU sandbox)."""


@dataclass(frozen=True)
class DeviceInfo(Reply):
    """Static facts about the worker's CUDA device (``sandbox.plumbing.envinfo.device_info``)."""

    info: dict[str, Any]


@dataclass(frozen=True)
class MeasureCeilings(Request):
    """Measure the device's copy bandwidth and arithmetic rates (``sandbox.worker.ceilings``)."""


@dataclass(frozen=True)
class MeasuredCeilings(Reply):
    """Rates in bytes or FLOPs per second, and the ``method`` that measured them."""

    values: dict[str, Any]


@dataclass(frozen=True)
class Confinement(Request):
    """Whether the compile worker confined itself (Landlock), and if not, why."""


@dataclass(frozen=True)
class ConfinementReport(Reply):
    """``read`` and ``write``: the folders a confined compile worker may still reach; ``seccomp``: what its socket
    filter denies (empty: no filter)."""

    confined: bool
    reason: str = ""
    landlock_abi: int | None = None
    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    seccomp: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Compile(Request):
    """One candidate's source with its flags and knobs, compiled by NVRTC for ``arch``."""

    source: str
    flags: list[str]
    knobs: dict[str, Any]
    arch: str
    cache: bool = True


@dataclass(frozen=True)
class Compiled(Reply):
    """``info``: the compile report (``CompileInfo``'s fields, host folders replaced); ``cubin``: None on failure."""

    info: dict[str, Any]
    cubin: bytes | None


# ---- correctness -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial(Message):
    """One correctness trial: the plan run twice at ``sizes`` on inputs generated from ``seed``."""

    label: str
    sizes: dict[str, int]
    plan: dict[str, Any]
    inputs: list[dict]
    outputs: list[dict]
    seed: int


@dataclass(frozen=True)
class CheckTrials(Request):
    """Correctness trials of ``cubin``; outputs handed over in ``data_dir`` (or by CUDA IPC where ``ipc``)."""

    harness: HarnessCode
    cubin: bytes
    trials: list[Trial]
    data_dir: str
    hash_seed: int
    ipc: bool = False


@dataclass(frozen=True)
class TrialRun(Message):
    """One trial in the GPU worker: ``status`` ``ran`` (then ``files``: run label -> output name -> what was handed
    over; ``identical``: the two runs agree bitwise) or the status it ended with and why. ``gpu_s``: the trial's
    seconds in the GPU worker (its buffers, inputs, launches, guards and hand-over: ``split_s``)."""

    label: str
    status: str
    error: str = ""
    detail: str = ""
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    identical: bool = True
    input_hashes: dict[str, int] = field(default_factory=dict)
    gpu_s: float = 0.0
    split_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Checked(Reply):
    """The trials in order, up to the first that did not run."""

    trials: list[TrialRun]


# ---- timing ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Impl(Message):
    """One implementation timed: a compiled kernel (``cubin`` and its resolved ``plan``), the task's vendor
    function (``task_folder``), or a PyTorch baseline (``torch``: ``eager`` or ``compile``, in ``tf32`` mode)."""

    cubin: bytes | None = None
    plan: dict[str, Any] | None = None
    task_folder: str | None = None
    torch: str | None = None
    tf32: str = "off"


@dataclass(frozen=True)
class RoundLimits(Message):
    """When the timed rounds stop (``sandbox.worker.rounds.round_cap`` and ``enough``)."""

    budget_ms: float
    min_rounds: int
    max_rounds: int
    target_ci: float
    wall_cap_s: float


@dataclass(frozen=True)
class Time(Request):
    """The A/B timing stage at one size (``sandbox.worker.timing``); ``primary`` is the implementation every
    candidate launch is compared with; ``launches_to`` the candidate's launch count drawn by the host."""

    harness: HarnessCode
    impls: dict[str, Impl]
    sizes: dict[str, int]
    scalars: dict[str, Any]
    input_variants: list[list[dict]]
    outputs: list[dict]
    tolerance: dict[str, Tolerance]
    seed: int
    order_seed: int
    hash_seed: int
    limits: RoundLimits
    launches_to: int
    full_checks: int
    data_dir: str
    primary: str = "baseline"
    ipc: bool = False


@dataclass(frozen=True)
class KeptLaunch(Message):
    """A candidate launch drawn for the full comparison with the reference: where its outputs went, and the
    inputs it ran on (``seed``, and which of the request's ``input_variants``)."""

    launch: int
    phase: str
    seed: int
    variant: int
    files: dict[str, Any]


@dataclass(frozen=True)
class Clocks(Message):
    """NVML's clocks, temperature and power: read as the stage began and ended, and summarised over the timed
    rounds (reading -> median, min, max, samples)."""

    start: dict[str, Any]
    end: dict[str, Any]
    timed: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Timed(Reply):
    """The stage ran: per implementation its event times (``samples``) and host wall times, the rotating set of
    each round, the launches kept for the reference, the clocks, where the seconds went."""

    rounds: int
    round_cap: int
    sets: int
    set_of_round: list[int]
    flush_bytes: int
    samples: dict[str, list[float]]
    walls: dict[str, list[float]]
    full: list[KeptLaunch]
    launches: int
    clocks: Clocks
    gpu_s: float
    unavailable: dict[str, str]
    launch_hold: dict[str, Any]
    split_s: dict[str, float]
    memory: dict[str, Any]
    repeated: int = 0   # candidate launches whose outputs repeated, bit for bit, ones compared on the same inputs
    warm_up: dict[str, int] = field(default_factory=dict)   # each implementation's warm-up launches
    orders: list[list[str]] = field(default_factory=list)   # each round's launches, in the order they ran
    persisting_l2: dict[str, Any] = field(default_factory=dict)   # the L2 state put back (worker.persisting_l2)


@dataclass(frozen=True)
class StageFailed(Reply):
    """The timing stage ended early: ``status`` (a ``Status`` value, or ``infrastructure`` where an implementation
    other than the candidate broke a rule), the implementation at fault, and why."""

    status: str
    impl: str
    error: str
    detail: str = ""


# ---- outputs handed over by CUDA IPC -----------------------------------------------------------------------


@dataclass(frozen=True)
class IpcProbe(Request):
    """Hand a known pattern over as outputs are (``harness.hand_over``)."""

    harness: HarnessCode


@dataclass(frozen=True)
class IpcSent(Reply):
    """``entry``: the pattern's handle, None where IPC does not work here (``error`` says why); ``sum``: its sum."""

    entry: dict[str, Any] | None
    sum: int = 0
    error: str = ""


@dataclass(frozen=True)
class IpcRead(Request):
    """Read the pattern a GPU worker handed over."""

    entry: dict[str, Any]


@dataclass(frozen=True)
class IpcSum(Reply):
    sum: int


# ---- comparisons with the reference ------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareTask(Message):
    """What the trials of one comparison share: the task's folder (its reference.py), scalars and tolerances.
    ``harness``: to hash regenerated inputs against the GPU worker's (``cupy`` backend only)."""

    task_folder: str
    scalars: dict[str, Any]
    tolerance: dict[str, Tolerance]
    hash_seed: int = 0
    harness: HarnessCode | None = None
    backend: str = "cupy"


@dataclass(frozen=True)
class RunOutputs(Message):
    """One run of a trial: output name -> what was handed over (a ``.npy`` path or a CUDA IPC entry)."""

    label: str
    files: dict[str, Any]


@dataclass(frozen=True)
class CompareTrial(Message):
    """A trial's inputs regenerated from ``seed``, the reference computed, each run's outputs compared with it;
    ``input_hashes``: the GPU worker's hashes of the inputs, to check the regeneration."""

    label: str
    sizes: dict[str, int]
    inputs: list[dict]
    outputs: list[dict]
    seed: int
    runs: list[RunOutputs]
    input_hashes: dict[str, int] | None = None


@dataclass(frozen=True)
class Compare(Request):
    task: CompareTask
    trial: CompareTrial


@dataclass(frozen=True)
class Compares(Request):
    """Every trial of a stage, in order, up to the first with a failed check."""

    task: CompareTask
    trials: list[CompareTrial]


@dataclass(frozen=True)
class OutputCheck(Message):
    """One output of one run against the reference (``sandbox.judging.compare.compare``'s statistics)."""

    output: str
    run: str
    passed: bool
    mismatches: int
    max_abs_error: float | None
    max_rel_error: float | None
    first_mismatch: dict[str, Any] | None
    note: str = ""
    bias: dict[str, Any] | None = None   # the signed error's statistics (``compare.bias_stats``)


@dataclass(frozen=True)
class OutputsCompared(Reply):
    checks: list[OutputCheck]
    seconds: float
    split_s: dict[str, float]


@dataclass(frozen=True)
class TrialChecks(Message):
    label: str
    checks: list[OutputCheck]


@dataclass(frozen=True)
class Compared(Reply):
    trials: list[TrialChecks]
    seconds: float
    split_s: dict[str, float]


# ---- screening ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScreenSetup(Request):
    """The screening state of one task: two input sets, the baseline's outputs on each (``setup_id`` names it)."""

    harness: HarnessCode
    setup_id: int
    baseline: Impl
    inputs: list[list[dict]]
    outputs: list[dict]
    tolerance: dict[str, Tolerance]
    seed: int
    hash_seed: int


@dataclass(frozen=True)
class ScreenReady(Reply):
    """The screening state is set up; ``noise``: the spread of the baseline timed against itself (``stats.pair_noise``)."""

    setup_id: int
    noise: float


@dataclass(frozen=True)
class ScreenCandidate(Message):
    key: int
    cubin: bytes
    plan: dict[str, Any]


@dataclass(frozen=True)
class Screen(Request):
    """A batch of candidates screened against the set-up ``setup_id`` (``sandbox.worker.screening``)."""

    setup_id: int
    candidates: list[ScreenCandidate]
    rounds: int
    order_seed: int
    min_rounds: int
    target: float = 0.0
    margin: float = 1.1
    stop_above: float | None = None


@dataclass(frozen=True)
class ScreenedRun(Message):
    """One candidate's screening in the worker: ``samples`` and ``baseline_samples`` paired by round."""

    key: int
    status: str
    error: str = ""
    samples: list[float] = field(default_factory=list)
    baseline_samples: list[float] = field(default_factory=list)
    stopped: str = ""
    gpu_s: float = 0.0


@dataclass(frozen=True)
class ScreenBatch(Reply):
    results: list[ScreenedRun]


# ---- the programs a tool runs (profile_target under ncu, sanitize_target under compute-sanitizer) -----------
# They are started by the tool, not by the pool: a request and a reply each travel as a JSON file (``to_json``).


@dataclass(frozen=True)
class TargetStart(Message):
    """What a tool's target program comes up with: the device harness (a ``.cubin`` file) compiled for ``arch``,
    and the file it writes its ``TargetRan`` to."""

    arch: str
    harness_cubin: str
    status_file: str


@dataclass(frozen=True)
class WaitAhead(Message):
    """A target program started ahead of its request waits for the file ``go`` while the process ``owner`` that
    started it lives, at most ``wait_s`` seconds (``sandbox.worker.ahead``)."""

    go: str
    wait_s: float
    owner: int


@dataclass(frozen=True)
class ProfileLaunches(Request):
    """The launches ncu profiles: the plan run ``warmup`` times and once more, on inputs generated from ``seed``
    (``cubin``: the candidate's ``.cubin`` file)."""

    cubin: str
    plan: dict[str, Any]
    inputs: list[dict]
    outputs: list[dict]
    seed: int
    warmup: int


@dataclass(frozen=True)
class SanitizeCase(Message):
    """One size compute-sanitizer watches: its resolved plan, inputs and outputs."""

    plan: dict[str, Any]
    inputs: list[dict]
    outputs: list[dict]


@dataclass(frozen=True)
class SanitizeCases(Request):
    """Each case run once under the tool, on exact allocations (``cubin``: the candidate's ``.cubin`` file)."""

    cubin: str
    cases: list[SanitizeCase]
    seed: int


@dataclass(frozen=True)
class TargetRan(Reply):
    """How a target program's request ended: ``ran`` (then ``split_s``: where its seconds went), ``launch_error``,
    ``crashed`` (with the ``error``), or ``unused`` (a run started ahead that no request reached)."""

    status: str
    error: str = ""
    split_s: dict[str, float] = field(default_factory=dict)
    launches: int = 0
    cases: int = 0


def to_json(*records: Message) -> str:
    """The fields of ``records`` in one JSON object (records inside them as objects)."""
    merged: dict[str, Any] = {}
    for record in records:
        merged.update(dataclasses.asdict(record))
    return json.dumps(merged)


def from_json(text: str, *kinds: type[Message]) -> tuple:
    """One record per kind, each made from its fields of the JSON object in ``text``; a key that none of them has,
    or a missing or mistyped field, is a ``WireError``."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise WireError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise WireError(f"expected a JSON object, got {type(obj).__name__}")
    known = {f.name for kind in kinds for f in dataclasses.fields(kind)}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise WireError(f"{' + '.join(k.__name__ for k in kinds)} has no field {', '.join(unknown)}")
    return tuple(_record(kind, obj) for kind in kinds)


def written(path, kind: type[Message]) -> Message | None:
    """The ``kind`` a program wrote as JSON to the file ``path``; None where it wrote none, or nothing readable."""
    try:
        with open(path) as f:
            return from_json(f.read(), kind)[0]
    except (OSError, WireError):
        return None


def _record(kind: type[Message], obj: dict) -> Message:
    hints = _hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        if f.name in obj:
            values[f.name] = _decoded(obj[f.name], hints[f.name])
    try:
        return kind(**values)
    except TypeError as exc:
        if isinstance(exc, WireError):
            raise
        raise WireError(f"{kind.__name__}: {exc}") from None


def _decoded(value, hint):
    """A JSON value as ``hint`` wants it: records (and lists of them) made from their objects."""
    if isinstance(hint, type) and issubclass(hint, Message) and isinstance(value, dict):
        return _record(hint, value)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list and args and isinstance(args[0], type) and issubclass(args[0], Message):
        return [_decoded(v, args[0]) for v in value] if isinstance(value, list) else value
    return value


# Every record of this module (the tests round-trip each through pickle).
RECORDS = tuple(c for c in list(globals().values()) if isinstance(c, type) and dataclasses.is_dataclass(c)
                and issubclass(c, Message) and c not in (Message, Request, Reply))
