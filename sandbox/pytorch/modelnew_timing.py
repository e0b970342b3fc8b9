"""Timing and the kernel census of a ModelNew solution, in the confined process (sandbox.pytorch.modelnew_run).

``interleave`` times the solution beside PyTorch eager and ``torch.compile`` at the benchmark size: rounds in a
shuffled order of implementations, each call after an L2 flush, on a rotating set of inputs (enough sets that their
inputs are twice the L2, at most four), each call measured two ways: CUDA events on the current stream (what
KernelBench times) and the wall time to a device-wide synchronisation (which includes work left on other streams
or graphs). Every timed output of the solution is compared with eager's for the same inputs, computed after it;
no correct output is held, in the judge or in memory the allocator reuses, while the solution runs; after the first
pass over the sets each round draws its inputs anew. On the CPU (no device) both are the wall time.

``census`` says which kernels ran during ``forward`` (torch.profiler's kernel names and device times) and what
share of the device time was in kernels the solution declared in its own CUDA source.
"""

from __future__ import annotations

import random
import statistics
import time

L2_FALLBACK = 50 << 20


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def baselines(model, names: list[str], tf32_mode: str) -> tuple[dict, dict]:
    """{name: fn(args) -> outputs} for eager and torch.compile, and {name: why not} for those that cannot run."""
    import torch

    from .runtime import tf32

    def eager(args):
        with torch.no_grad(), tf32(tf32_mode):
            return model(*args)

    fns, unavailable = {"eager": eager}, {}
    if "compile" in names:
        compiled = torch.compile(model)

        def comp(args):
            with torch.no_grad(), tf32(tf32_mode):
                return compiled(*args)
        fns["compile"] = comp
    return fns, unavailable


def _outs(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _input_bytes(args: list) -> int:
    import torch

    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def interleave(fns: dict, make_args, device: str, tolerances: list, rounds: int, budget_s: float,
               rng: random.Random | None = None, protect: set[int] = frozenset(), guard=None) -> dict:
    """Time ``fns`` ({name: fn(args)}, ``candidate`` among them) interleaved; ``make_args(i)`` draws input set i;
    ``protect`` holds the storages (of the modules' parameters and buffers) that an output may share and that are
    never overwritten.

    No correct output exists in the process while the solution runs: eager's answer for a round is computed after
    the solution's call (untimed) and compared with it, and every output the judge drops is overwritten first
    (``poison``), so neither the judge's frames nor a block the allocator hands out again holds one. After the first
    pass over the sets, each round draws its set anew (``make_args`` with a new index), so that no two rounds see
    the same values: a cache keyed on the tensors or on their contents answers from a call before, and is wrong.
    ``guard`` (the watch's, ``modelnew_tamper.Watch.guard``) runs after every call of the candidate and before every
    timed call, outside the timed regions: a change the solution made for eager's next call (in its call, or in a
    finalizer run when its output was dropped) is seen first."""
    import torch

    from .modelnew_checks import _guarded, compare

    rng = rng or random.SystemRandom()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size if device == "cuda" else L2_FALLBACK
    first = make_args(0)
    per_set = max(1, _input_bytes(first))
    sets_wanted = min(4, max(2, -(-2 * l2 // per_set)))
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        sets_wanted = max(1, min(sets_wanted, int(0.25 * free // per_set)))
    sets = [first] + [make_args(i) for i in range(1, sets_wanted)]
    keep = set(protect) | _storages(sets)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    unavailable = {}
    for name in list(fns):   # warm-up, untimed: torch.compile compiles here
        try:
            for s in sets[:2]:
                out = fns[name](s)
                if name == "candidate":
                    _guarded(guard)
                poison(out, keep)
                del out
            _sync(device)
        except Exception as exc:
            if name == "candidate" or name == "eager":
                raise
            unavailable[name] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            del fns[name]
    samples = {name: [] for name in fns}
    walls = {name: [] for name in fns}
    set_of_round: list[int] = []
    wrong = None
    start = time.perf_counter()
    r = 0
    while r < rounds and (r < 5 or time.perf_counter() - start < budget_s):
        k = r % len(sets)
        if r >= len(sets):
            sets[k] = make_args(r)
            keep = set(protect) | _storages(sets)
        order = list(fns)
        rng.shuffle(order)
        for name in order:
            _guarded(guard)   # before eager too: a finalizer of the solution's runs when its output is dropped
            flush.zero_()
            _sync(device)
            ms, wall_ms, out = _one(fns[name], sets[k], device)
            if name == "candidate":
                _guarded(guard)
            samples[name].append(ms)
            walls[name].append(wall_ms)
            if name == "candidate" and wrong is None:
                expected = fns["eager"](sets[k])
                for i, (o, e, tol) in enumerate(zip(_outs(out), _outs(expected), tolerances)):
                    found = compare(o, e, 2 * tol.atol, 2 * tol.rtol, 2 * tol.spread)
                    if not found["passed"]:
                        wrong = dict(round=r, output=i, **found)
                        break
                poison(expected, keep)
                del expected
            poison(out, keep)
            del out
        set_of_round.append(k)
        r += 1
    return dict(samples_ms=samples, wall_ms=walls, set_of_round=set_of_round, rounds=r, rotating_sets=len(sets),
                unavailable=unavailable, wrong=wrong, l2_bytes=int(l2))


def _storages(sets: list) -> set[int]:
    import torch

    return {t.untyped_storage().data_ptr() for s in sets for t in s if isinstance(t, torch.Tensor)}


def poison(value, keep: set[int]) -> None:
    """Overwrite the outputs in ``value`` (NaN; integers and booleans inverted) before they are dropped, except
    those that share storage with a tensor in ``keep`` (an input a module returns or writes)."""
    import torch

    for o in _outs(value):
        if not isinstance(o, torch.Tensor) or o.untyped_storage().data_ptr() in keep or not o.numel():
            continue
        o = o.detach()
        if o.is_floating_point() or o.is_complex():
            o.fill_(float("nan"))
        elif o.dtype == torch.bool:
            o.logical_not_()
        else:
            o.bitwise_not_()


def _one(fn, args, device: str):
    import torch

    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        out = fn(args)
        end.record()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        return start.elapsed_time(end), wall, out
    t0 = time.perf_counter()
    out = fn(args)
    wall = (time.perf_counter() - t0) * 1e3
    return wall, wall, out


def escaped_gap(timed: dict) -> dict | None:
    """Evidence of work outside the timed region: the solution's wall time to a device-wide synchronisation exceeds
    its event time by much more than eager's does; None where it does not."""
    gaps = {name: statistics.median(w - s for w, s in zip(timed["wall_ms"][name], timed["samples_ms"][name]))
            for name in ("candidate", "eager")}
    event = statistics.median(timed["samples_ms"]["candidate"])
    excess = gaps["candidate"] - gaps["eager"]
    if excess > max(event, 0.02):
        return dict(event_ms=event, gap_ms=gaps["candidate"], eager_gap_ms=gaps["eager"])
    return None


def census(new, args: list, kernels: tuple[str, ...], device: str, modules: list, calls: int = 3) -> dict:
    """The kernels that ran during ``calls`` forwards, by device time, and the share in the solution's own."""
    import torch

    if device != "cuda":
        return _cpu_census(new, args, modules, calls)
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            new(*args)
        torch.cuda.synchronize()
    by_name: dict[str, float] = {}
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            us = e.time_range.end - e.time_range.start
            by_name[e.name] = by_name.get(e.name, 0.0) + us
    total = sum(by_name.values())
    own = {n: t for n, t in by_name.items() if is_own(n, kernels)}
    ranked = sorted(by_name.items(), key=lambda item: -item[1])
    return dict(kernels=[dict(name=n[:200], us=round(t / calls, 3), own=n in own) for n, t in ranked[:20]],
                total_us=total / calls, own_share=(sum(own.values()) / total) if total else 0.0,
                launched=len(by_name), how="torch.profiler (CUPTI) kernel names")


def is_own(name: str, kernels: tuple[str, ...]) -> bool:
    """Whether a profiler's kernel name is one of the solution's ``__global__`` functions."""
    base = name.split("(", 1)[0].split("<", 1)[0].strip()
    base = base.rsplit("::", 1)[-1].rsplit(" ", 1)[-1]
    return base in kernels


def _cpu_census(new, args: list, modules: list, calls: int) -> dict:
    """On the CPU: the time spent in functions of the extension modules the solution built (each wrapped while the
    forwards run) against the time of the forwards."""
    import torch

    spent = {}
    saved = []

    def wrap(module, attr, fn):
        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[attr] = spent.get(attr, 0.0) + (time.perf_counter() - t0) * 1e6
        return timed

    for module in modules:
        for attr in dir(module):
            fn = getattr(module, attr)
            if not attr.startswith("_") and callable(fn) and type(fn).__name__ == "builtin_function_or_method":
                saved.append((module, attr, fn))
                setattr(module, attr, wrap(module, attr, fn))
    try:
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(calls):
                new(*args)
        total = (time.perf_counter() - t0) * 1e6
    finally:
        for module, attr, fn in saved:
            setattr(module, attr, fn)
    own = sum(spent.values())
    return dict(kernels=[dict(name=n, us=round(t / calls, 3), own=True) for n, t in sorted(spent.items())],
                total_us=total / calls, own_share=min(1.0, own / total) if total else 0.0, launched=len(spent),
                how="time in the functions of the extension modules it built (CPU)")
