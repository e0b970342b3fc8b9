"""The correctness stage of a ModelNew solution, in the confined process (sandbox.pytorch.modelnew_run).

At every check size, held-out size and the benchmark size, for every input distribution of the task, the
solution's ``ModelNew`` (built as KernelBench builds it: the same seed as ``Model``, the task's init inputs;
``Model``'s parameters and buffers copied in where names and shapes agree) is compared with ``Model`` run in
float64 on the same inputs, with the task's tolerance. The references of a size are computed only once the
solution's calls there are over, so that no correct output exists in the process while it runs. On the way it
watches for what this format is known to hide:

- inputs written: every input's bits before and after every call;
- state across calls: one instance per size is called on every trial at that size in a shuffled order, half of
  them with new values written into the same tensors, and on a copy of a trial's inputs with one element changed
  at a random place (a cache keyed on a pointer, a shape or a sample of the contents then answers from another
  call: a wrong output, caught);
- work outside the timed region: the output is snapshot as soon as ``forward`` returns (ordered on the current
  stream) and compared with itself after a device-wide synchronisation;
- precision: a wrong output is compared again with ``Model`` on inputs and parameters rounded to TF32 (to nearest
  and truncated) and run in half precision, and the verdict says which it matches;
- sizes: a size where the solution raises (an assertion, a shape error) is recorded as refused, not wrong;
- plain outputs: ``forward`` must return plain tensors (``torch.Tensor`` itself, or a ``Parameter``, with no
  attribute of their own that shadows one of the class) in a plain tuple or list. A tensor subclass's ``__torch_function__``, or a method set on
  the tensor itself (``out.detach = ...``), would run inside the judge's comparisons with the reference beside it
  and could answer "no difference"; such an output is ``rejected`` (``NotPlain``) before anything reads it.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

from ..tasks.dtypes import to_compute
from ..tasks.inputs import distribution_count, generate, input_seed, input_specs
from .modelnew_tamper import Tampered


KEEP_ON_DEVICE_BYTES = 1 << 30   # a size's references above this are kept in host memory


class NotPlain(Exception):
    """``forward`` returned something other than plain tensors in a plain tuple or list (``plain_outputs``)."""


def plain_outputs(value) -> list:
    """``forward``'s return value as a list of its tensors, read without running any of the solution's code: only
    an exact ``tuple`` or ``list`` is unpacked, and every item must be exactly ``torch.Tensor`` (or
    ``torch.nn.Parameter``, whose ``__torch_function__`` is PyTorch's own) with no attribute of its own that shadows
    one of the class (a mark PyTorch leaves, as ``torch.compile``'s ``_dynamo_*``, shadows nothing); else ``NotPlain``
    naming what it was."""
    import torch

    items = list(value) if type(value) in (tuple, list) else [value]
    for i, o in enumerate(items):
        kind = type(o)
        if kind is not torch.Tensor and kind is not torch.nn.Parameter:
            raise NotPlain(f"forward() output {i} is a {kind.__module__}.{kind.__qualname__}, not a plain "
                           "torch.Tensor in a plain tuple or list: its methods would run inside the judge's "
                           "comparisons, which compare plain tensors only")
        shadowing = sorted(str(name) for name in o.__dict__ if not isinstance(name, str) or hasattr(kind, name))
        if shadowing:
            names = ", ".join(shadowing)[:120]
            raise NotPlain(f"forward() output {i} carries attributes of its own ({names}): set on the tensor, they "
                           "would run in place of its methods inside the judge's comparisons")
    return items


def forward_of(new, args: list, guard=None) -> list:
    """``new(*args)`` without gradients, as its list of plain tensors (``plain_outputs``); ``guard`` (a watch's,
    ``modelnew_tamper.Watch.guard``) runs as soon as it returns, before anything reads its outputs."""
    import torch

    with torch.no_grad():
        out = new(*args)
    _guarded(guard)
    return plain_outputs(out)


def _guarded(guard) -> None:
    """Run ``guard`` (``Tampered`` where the solution's code that just ran changed what the judge relies on)."""
    if guard is not None:
        guard()


@dataclass
class Stage:
    """What the correctness stage found."""

    checks: list[dict] = field(default_factory=list)
    holds_at: list[str] = field(default_factory=list)
    refused_at: dict[str, str] = field(default_factory=dict)
    failure: dict | None = None          # {status, error, detail, verdict?}: the first failure, which ends the stage
    inputs_written: list[dict] = field(default_factory=list)
    escaped: list[dict] = field(default_factory=list)
    calls: int = 0
    precision: str = ""
    drawn: dict[str, list[str]] = field(default_factory=dict)   # size label -> parameters given drawn values there
    undrawn: list[str] = field(default_factory=list)   # parameters the task draws that ModelNew has no counterpart for
    drawn_wrong: list[str] = field(default_factory=list)   # where it was wrong with drawn parameters (and only there)


def labelled(task, benchmark: dict | None = None) -> list[tuple[str, dict]]:
    sizes = task.spec.sizes
    out = [(f"check[{i}]", s) for i, s in enumerate(sizes.check)]
    out += [(f"heldout[{i}]", s) for i, s in enumerate(sizes.heldout)]
    return out + [("benchmark", dict(benchmark or sizes.benchmark))]


def build_pair(rt, ns: dict, sizes: dict, device: str, seed: int, guard=None):
    """(Model, ModelNew, forward args) at ``sizes``, both modules built from ``seed`` as KernelBench builds them;
    ``guard`` runs after each step that runs the solution's code (its constructor, its ``to``, its parameters)."""
    import torch

    _guarded(guard)   # also before: a finalizer of the solution's, run when the judge dropped something, is code too
    model, args = rt.problem.build(rt.overrides(sizes), device, seed)
    problem_ns = rt.problem.namespace(rt.overrides(sizes))
    with torch.device(device):
        torch.manual_seed(seed)
        new = ns["ModelNew"](*problem_ns["get_init_inputs"]())
    _guarded(guard)
    new = new.to(device)
    _guarded(guard)
    adopt_state(model, new)
    _guarded(guard)
    return model, new, args


def adopt_state(model, new) -> None:
    """``Model``'s parameters and buffers copied into ``ModelNew`` where a name and shape agree."""
    import torch

    theirs = {**dict(new.named_parameters()), **dict(new.named_buffers())}
    with torch.no_grad():
        for name, t in {**dict(model.named_parameters()), **dict(model.named_buffers())}.items():
            mine = theirs.get(name)
            if mine is not None and mine.shape == t.shape and mine.dtype == t.dtype:
                mine.copy_(t)


def trial_args(task, rt, args: list, sizes: dict, k: int, seed: int, device: str) -> tuple[list, str]:
    """The forward arguments of trial ``k``: each input drawn from its ``k``-th distribution (the problem's own
    ``get_inputs()`` for ``module``), and the distributions' names."""
    import numpy as np
    import torch

    specs = {s["name"]: s for s in input_specs(task, sizes, k)}
    out, names = [], []
    for i, (name, a) in enumerate(zip(rt.spec.arguments, args)):
        spec = specs.get(name)
        if spec is None or not isinstance(a, torch.Tensor) or spec["dist"] == "module":
            out.append(a)
            if spec is not None:
                names.append(f"{name}: module")
            continue
        drawn = to_compute(np, generate(np, spec, input_seed(seed, i)), spec["dtype"])
        out.append(torch.from_numpy(np.ascontiguousarray(drawn)).to(device=device, dtype=a.dtype).reshape(a.shape))
        names.append(f"{name}: {spec['dist']}")
    return out, ", ".join(names)


def reference(model, args: list, mode: str = "float64") -> list:
    """``Model`` on ``args`` in float64 (the reference); in half precision (``half``); or in float64 with every
    float32 input and parameter first rounded to TF32's 10-bit mantissa, to nearest (``tf32``) or truncated
    (``tf32_truncated``): what a matrix product in TF32 with float32 accumulation computes, to its accumulation."""
    import torch

    from .problem import run_forward

    m = copy.deepcopy(model)
    if mode == "half":
        m, cast = m.half(), (lambda t: t.half())
    else:
        rounding = {"tf32": True, "tf32_truncated": False}.get(mode)
        if rounding is not None:
            with torch.no_grad():
                for t in [*m.parameters(), *m.buffers()]:
                    if t.dtype == torch.float32:
                        t.copy_(to_tf32(t, rounding))
        m = m.double()
        cast = (lambda t: to_tf32(t, rounding).double()) if rounding is not None else (lambda t: t.double())
    call = [cast(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    return [o.double() for o in run_forward(m, call)]


def to_tf32(t, nearest: bool = True):
    """A float32 tensor rounded to TF32 (10 mantissa bits): to nearest, ties away, or truncated."""
    import torch

    if t.dtype != torch.float32:
        return t
    bits = t.contiguous().view(torch.int32)
    if nearest:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32).reshape(t.shape)


def compare(got, expected, atol: float, rtol: float, spread: float) -> dict:
    """``sandbox.judging.compare.compare``'s rule and record, in torch on the output's device."""
    import torch

    if tuple(got.shape) != tuple(expected.shape):
        return dict(passed=False, mismatches=got.numel(), max_abs_error=None, max_rel_error=None, first_mismatch=None,
                    note=f"shape {tuple(got.shape)} != reference shape {tuple(expected.shape)}")
    e = expected.double().reshape(-1)
    g = got.detach().to(e.device).double().reshape(-1)
    fin = e[torch.isfinite(e)]
    if spread and fin.numel() >= 2:
        atol = max(atol, spread * float(fin.std(unbiased=False)))
    g_nan, e_nan, g_inf, e_inf = torch.isnan(g), torch.isnan(e), torch.isinf(g), torch.isinf(e)
    finite = ~(g_nan | e_nan | g_inf | e_inf)
    diff = torch.where(finite, (g - e).abs(), torch.zeros_like(g))
    bad = (g_nan != e_nan) | (g_inf != e_inf) | (g_inf & e_inf & (torch.sign(g) != torch.sign(e)))
    bad |= finite & (diff > atol + rtol * e.abs())
    mismatches = int(bad.sum())
    denom = e.abs()
    rel = torch.where(finite & (denom > 0), diff / torch.where(denom > 0, denom, torch.ones_like(denom)),
                      torch.zeros_like(diff))
    first = None
    if mismatches:
        flat = int(torch.argmax(bad.to(torch.uint8)))
        index, rest = [], flat
        for dim in reversed(got.shape):
            index.append(rest % dim)
            rest //= dim
        first = dict(index=index[::-1], got=float(g[flat]), expected=float(e[flat]))
    nan_not_ref = int((g_nan & ~e_nan).sum())
    return dict(passed=mismatches == 0, mismatches=mismatches, max_abs_error=float(diff.max()) if g.numel() else 0.0,
                max_rel_error=float(rel.max()) if g.numel() else 0.0, first_mismatch=first,
                note=f"{nan_not_ref} NaN where the reference is a number" if nan_not_ref else "")


def _bits(t):
    import torch

    if t.dtype == torch.bool:
        return t.detach().clone()
    return t.detach().contiguous().view(-1).view(torch.uint8).clone()


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def call_watched(new, args: list, device: str, stage: Stage, label: str, guard=None) -> list:
    """``new(*args)`` with its inputs' bits compared before and after, and its outputs snapshot as soon as it
    returns (stream-ordered) and compared after a device-wide synchronisation."""
    import torch

    _guarded(guard)
    before = [_bits(a) if isinstance(a, torch.Tensor) else None for a in args]
    outs = forward_of(new, args, guard)
    early = [o.detach().clone() for o in outs]
    _sync(device)
    stage.calls += 1
    for i, (a, b) in enumerate(zip(args, before)):
        if b is not None and not torch.equal(_bits(a), b):
            changed = int((_bits(a) != b).sum())
            stage.inputs_written.append({"label": label, "input": i, "bytes_changed": changed})
    for i, (o, e) in enumerate(zip(outs, early)):
        same = torch.equal(o.contiguous().view(-1).view(torch.uint8), e.contiguous().view(-1).view(torch.uint8))
        if not same:
            stage.escaped.append({"label": label, "output": i,
                                  "note": "the output changed after forward returned (work on another stream or graph "
                                          "still running when the current stream was done)"})
    return outs


def precision_of(model, args: list, outs: list, ref: list, tolerances: list, device: str) -> str:
    """Which lower precision a wrong output matches best ('TF32' or 'half precision'), with the evidence; '' if
    none: it matches where its error against that computation is at most a quarter of its error against float64,
    and that computation itself errs by at least half as much."""
    outs = [o.detach().double().to(r.device) for o, r in zip(outs, ref)]
    worst = max(float((o - r).abs().max()) for o, r in zip(outs, ref))
    best = None
    for mode in ("tf32", "tf32_truncated", "half"):
        try:
            low = [lo.to(r.device) for lo, r in zip(reference(model, args, mode), ref)]
        except (RuntimeError, TypeError):
            continue
        err = max(float((o - r).abs().max()) for o, r in zip(outs, low))
        low_err = max(float((lo - r).abs().max()) for lo, r in zip(low, ref))
        if err <= 0.25 * worst and low_err >= 0.5 * worst and (best is None or err < best[1]):
            best = (mode, err, low_err)
    if best is None:
        return ""
    mode, err, low_err = best
    name = {"tf32": "TF32 (inputs rounded to nearest)", "tf32_truncated": "TF32 (inputs truncated)",
            "half": "half precision"}[mode]
    return (f"its outputs match the module run in {name} (max error {err:.3g} against it, {worst:.3g} against "
            f"float64; {name} itself errs by {low_err:.3g}): {name.split(' (')[0]} arithmetic for a float32 task")


def correctness(task, rt, ns: dict, device: str, per_check_size: int = 2, rng: random.Random | None = None,
                benchmark: dict | None = None, heldout: bool = True, guard=None) -> Stage:
    """Run the stage; the first wrong output, written input, escaped work or change to the judging process
    (``guard``, run as soon as any of the solution's code returns) ends it."""
    rng = rng or random.SystemRandom()
    stage = Stage()
    tolerances = [task.output_tolerance(name) for name in rt.spec.outputs]
    for label, sizes in labelled(task, benchmark):
        if label.startswith("heldout") and not heldout:
            continue
        count = distribution_count(task) if label == "benchmark" else max(per_check_size, distribution_count(task))
        seeds = [rng.getrandbits(31) for _ in range(count)]
        try:
            trials = _trials(task, rt, ns, sizes, seeds, device, stage, label, guard)
        except Exception as exc:
            if _fails_the_stage(exc, stage, label, label):
                return stage
            continue
        new, cases = trials
        order = list(range(len(cases))) * 2
        rng.shuffle(order)
        calls, refused = _calls(new, cases, order, device, stage, label, sizes, guard)
        if calls is None:
            return stage
        del new
        if not _compared(task, rt, ns, sizes, seeds, device, stage, label, cases, calls, tolerances, guard):
            return stage   # a wrong output, even before a call it refused
        if not refused:
            stage.holds_at.append(label)
    return stage


def _calls(new, cases: list[dict], order: list[int], device: str, stage: Stage, label: str, sizes: dict, guard=None):
    """Every call of the size, in ``order``, before any reference exists: ([(call number, trial, where, outputs
    kept)], whether a call was refused: the calls before it), or (None, True) where the stage ends (a written input,
    escaped work, a sticky error). No correct output is held while the solution runs, so none can be read from the
    judge."""
    import torch

    shared = [a.clone() if isinstance(a, torch.Tensor) else a for a in cases[0]["args"]]
    limit = KEEP_ON_DEVICE_BYTES // max(1, len(order))
    out = []
    for n, k in enumerate(order):
        case = cases[k]
        args = case["args"]
        if n % 2:   # the same tensors as other calls, new values: a cache keyed on the pointer answers wrong
            for s, a in zip(shared, args):
                if isinstance(s, torch.Tensor):
                    s.copy_(a)
            args = shared
        where = f"{label}#{k} ({_sizes(sizes)}; {case['dists']})"
        try:
            outs = call_watched(case.get("new", new), args, device, stage, where, guard)
        except Exception as exc:
            return (None, True) if _fails_the_stage(exc, stage, label, where) else (out, True)
        if stage.inputs_written:
            w = stage.inputs_written[0]
            stage.failure = dict(status="rejected", verdict="inputs_written",
                                 error=f"{w['label']}: input {w['input']} was written by forward "
                                       f"({w['bytes_changed']} bytes changed)", detail="")
            return None, True
        if stage.escaped:
            stage.failure = dict(status="rejected", verdict="outside_timed_region",
                                 error=f"{stage.escaped[0]['label']}: {stage.escaped[0]['note']}", detail="")
            return None, True
        kept = [o.detach().clone() for o in outs]
        if sum(o.numel() * o.element_size() for o in kept) > limit:
            kept = [o.cpu() for o in kept]
        out.append((n, k, where, kept))
    return out, False


def _compared(task, rt, ns, sizes, seeds, device, stage: Stage, label: str, cases: list[dict], calls: list,
              tolerances: list, guard=None) -> bool:
    """Each trial's reference computed (once its calls are over) and compared with the outputs of its calls;
    False where a wrong output ends the stage."""
    _guarded(guard)   # the instance was just dropped: its finalizers have run
    for k, case in enumerate(cases):
        mine = [c for c in calls if c[1] == k]
        if not mine:
            continue
        case["ref"] = _kept(reference(case["model"], case["args"]))
        for n, _, where, outs in mine:
            results = [(name, compare(o, r, tol.atol, tol.rtol, tol.spread))
                       for name, o, r, tol in zip(rt.spec.outputs, outs, case["ref"], tolerances)]
            for name, found in results:
                stage.checks.append(dict(sizes=dict(sizes), label=f"{label}#{k}" + (" same tensors" if n % 2 else ""),
                                         output=name, distribution=case["dists"], **found))
            wrong = next(((name, found) for name, found in results if not found["passed"]), None)
            if len(outs) != len(rt.spec.outputs):
                wrong = ("(outputs)", dict(note=f"forward returned {len(outs)} outputs, the task has "
                                                f"{len(rt.spec.outputs)}", first_mismatch=None))
            if wrong is not None and case.get("drawn"):
                # wrong with drawn parameters: a flag with the evidence, not a failure (a solution may derive state
                # from its parameters when it is built, as folding a norm into a weight does); a wrong output on the
                # module's own values, in the trials beside it, still fails the stage
                name, found = wrong
                stage.drawn_wrong.append(f"{where}: output {name!r}: {_mismatch(found)}")
                break
            if wrong is not None:
                name, found = wrong
                stage.precision = precision_of(case["model"], case["args"], outs, case["ref"], tolerances, device) \
                    if len(outs) == len(case["ref"]) else ""
                verdict = "precision" if stage.precision else "state_across_calls" if _fresh_is_right(
                    rt, ns, sizes, device, seeds[0], case, tolerances, guard) else ""
                why = " (a new instance is right on the same inputs: state kept across calls)" \
                    if verdict == "state_across_calls" else ""
                stage.failure = dict(status="wrong", verdict=verdict,
                                     error=f"{where}: output {name!r} is wrong{why}: {_mismatch(found)}",
                                     detail=stage.precision)
                return False
        case["ref"] = None
    return True


def _fails_the_stage(exc: Exception, stage, label: str, where: str) -> bool:
    """A solution's exception at ``label``: a sticky CUDA error or running out of memory ends the stage (True);
    anything else is a size the solution refuses, noted, and the stage goes on to the next size (False). An output
    that is not a plain tensor (``NotPlain``) or a change to the judging process (``Tampered``) ends it too,
    ``rejected``."""
    if isinstance(exc, (NotPlain, Tampered)):
        stage.failure = dict(status="rejected", verdict="tampering", error=f"{where}: {exc}", detail="")
        return True
    if _sticky(exc) or _out_of_memory(exc):
        status = "too_large" if _out_of_memory(exc) else "crashed"
        stage.failure = dict(status=status, error=f"{where}: {_line(exc)}", detail="")
        return True
    stage.refused_at[label] = f"{type(exc).__name__}: {_line(exc)}"
    return False


def _trials(task, rt, ns, sizes, seeds, device, stage: Stage, label: str, guard=None):
    """One ``Model`` and one ``ModelNew`` at ``sizes`` (from the first seed), and a case per seed: the forward
    arguments ``get_inputs()`` draws from it (redrawn from the trial's distribution); its float64 reference is
    computed only once the solution's calls at the size are over (``_compared``). A trial that draws the module's
    parameters has a pair of its own, given them (``modelnew_params``)."""
    import torch

    from .modelnew_params import give, trial_parameters, unmatched

    model, new, _ = build_pair(rt, ns, sizes, device, seeds[0], guard)
    problem_ns = rt.problem.namespace(rt.overrides(sizes))
    cases = []
    for k, seed in enumerate(seeds):
        with torch.device(device):
            torch.manual_seed(seed)
            module_args = list(problem_ns["get_inputs"]())
        args, dists = trial_args(task, rt, module_args, sizes, k, seed, device)
        drawn = trial_parameters(task, rt, sizes, k, seed)
        missing = unmatched(model, new, drawn) if drawn else []
        _guarded(guard)
        stage.undrawn += [n for n in missing if n not in stage.undrawn]
        if drawn and not missing:   # else the trial runs on the module's own values
            own_model, own_new, _ = build_pair(rt, ns, sizes, device, seeds[0], guard)
            give(own_model, own_new, drawn)
            _guarded(guard)
            names = [name for _, name in drawn.values()]
            given = stage.drawn.setdefault(label, [])
            given += [n for n in names if n not in given]
            cases.append(dict(model=own_model, new=own_new, drawn=drawn, args=args,
                              dists=dists + "; " + ", ".join(f"{n}: drawn" for n in names)))
            if any(a is not b for a, b in zip(args, module_args)):
                # the same arguments with the module's own parameters too: a wrong answer on an input variant is
                # never put down to the parameters drawn beside it
                cases.append(dict(model=model, args=args, dists=dists))
            continue
        cases.append(dict(model=model, args=args, dists=dists))
    near = perturbed(cases[0]["args"], seeds[-1])
    cases.append(dict(model=model, args=near, dists=cases[0]["dists"] + " (one element changed)"))
    return new, cases


def _kept(ref: list) -> list:
    """References kept for the size's calls: in host memory where they are large (a trial's float64 outputs at a
    large benchmark size, several trials at once, would crowd the device)."""
    if sum(r.numel() for r in ref) * 8 > KEEP_ON_DEVICE_BYTES:
        return [r.cpu() for r in ref]
    return ref


def perturbed(args: list, seed: int) -> list:
    """``args`` with one element of each floating tensor, at a random place, given a new value: a cache keyed on a
    sample of the contents (a corner, a strided few) answers from the call before."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel():
            a = a.clone()
            flat = a.view(-1)
            i = int(torch.randint(flat.numel(), (1,), generator=g))
            flat[i] = flat[i] + 1.0 + flat[i].abs()
        out.append(a)
    return out


def _fresh_is_right(rt, ns, sizes, device, seed, case, tolerances, guard=None) -> bool:
    """Whether a new instance, given the same inputs in new tensors, answers right where the instance that had
    been called before answered wrong: then the wrong answer came from state kept across calls."""
    import torch

    from .modelnew_params import give

    case["ref"] = None   # no reference while the new instance runs; computed again after it
    try:
        model, fresh, _ = build_pair(rt, ns, sizes, device, seed, guard)
        if case.get("drawn"):
            give(model, fresh, case["drawn"])
            _guarded(guard)
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in case["args"]]
        outs = forward_of(fresh, args, guard)
        _sync(device)
    except Tampered:
        raise
    except Exception:
        return False
    finally:
        case["ref"] = _kept(reference(case["model"], case["args"]))
    return len(outs) == len(case["ref"]) and all(
        compare(o, r, t.atol, t.rtol, t.spread)["passed"] for o, r, t in zip(outs, case["ref"], tolerances))


def _mismatch(found: dict) -> str:
    if found.get("first_mismatch") is None:
        return found.get("note") or "mismatch"
    f = found["first_mismatch"]
    return (f"{found['mismatches']} elements differ (max abs error {found['max_abs_error']:.3g}); "
            f"first at {f['index']}: "
            f"got {f['got']:.7g}, expected {f['expected']:.7g}")


def _sizes(sizes: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _sticky(exc: BaseException) -> bool:
    text = str(exc)
    return "CUDA error" in text or "illegal memory access" in text or "device-side assert" in text


def _out_of_memory(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower()
