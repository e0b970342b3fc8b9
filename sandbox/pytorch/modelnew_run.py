"""A ModelNew solution judged end to end inside the confined problem process: ``judge`` is what the host calls
through ``sandbox.pytorch.confined.call`` (sandbox.pytorch.modelnew_judge), never in kernelwright's own process.

Build (sandbox.pytorch.modelnew_load), the correctness stage with its watches (sandbox.pytorch.modelnew_checks),
then at the benchmark size the kernel census and the interleaved timing against eager and torch.compile
(sandbox.pytorch.modelnew_timing). The reply is JSON: what each part found and the seconds it took; the host turns
it into a ``Result`` with one verdict line per check of this format.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time

from .modelnew_tamper import Tampered, Watch, _sealed, describe


def judge(task_folder: str, source: str, key: str, kernels: list[str], extensions_dir: str, options: dict) -> dict:
    import torch

    from ..tasks.task import load_task
    from .modelnew_checks import correctness, labelled
    from .modelnew_load import load_solution
    from .runtime import TorchRuntime

    _private_caches()
    device = options.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    reply: dict = dict(device=device, split_s={}, builds=[], verdicts={})
    if device == "cuda":
        reply["gpu"] = torch.cuda.get_device_name(0)
    printed = os.path.join(os.environ.get("HOME", "."), "solution_stdout.log")
    saved_fd = os.dup(1)
    os.dup2(os.open(printed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
    try:
        task = load_task(task_folder)
        rt = TorchRuntime(task)
        if device == "cpu" and not options.get("benchmark"):
            options = {**options, "benchmark": cpu_benchmark(task), "heldout": False}
            reply["benchmark_note"] = (f"judged on the CPU at the largest check size {options['benchmark']} in place "
                                       "of the benchmark size, and not at the held-out sizes: CPU timings, which say "
                                       "nothing of a GPU")
        rng = random.SystemRandom()
        for _, sizes in labelled(task, options.get("benchmark")):   # every namespace the judgement uses, made now
            rt.problem.namespace(rt.overrides(sizes))
        # the watch's check and the verdict it gives are sealed copies, taken before any of the solution's code runs
        watch = Watch(rt.problem)
        check, guard, tampered = watch.check, watch.guard, _sealed(sys.modules[__name__])["_tampered"]
        del watch
        built = load_solution(source, key, extensions_dir, float(options.get("build_deadline_s", 600)))
        reply["split_s"]["build"] = built.seconds
        reply["builds"] = built.builds
        reply["swallowed"] = built.swallowed
        if built.ns is None:
            if not tampered(check, reply):   # a refused call that ended its module is that call's verdict
                reply.update(status="timeout" if built.timed_out else "compile_error", error=built.error,
                             detail=built.log)
            return reply
        if tampered(check, reply):
            return reply
        t0 = time.perf_counter()
        try:
            stage = correctness(task, rt, built.ns, device, int(options.get("per_check_size", 2)), rng,
                                options.get("benchmark"), bool(options.get("heldout", True)), guard)
        except Tampered:
            tampered(check, reply)
            return reply
        except Exception as exc:   # ModelNew's own code failing outside a size's calls
            reply.update(status="crashed", error=f"{type(exc).__name__}: {_line(exc)}")
            return reply
        reply["split_s"]["checks"] = time.perf_counter() - t0
        if tampered(check, reply):
            return reply
        reply.update(checks=stage.checks, holds_at=stage.holds_at, refused_at=stage.refused_at, calls=stage.calls,
                     inputs_written=stage.inputs_written, escaped=stage.escaped, precision=stage.precision,
                     drawn=stage.drawn, undrawn=stage.undrawn, drawn_wrong=stage.drawn_wrong)
        if stage.failure is not None:
            reply.update(status=stage.failure["status"], error=stage.failure["error"],
                         detail=stage.failure.get("detail", ""), failed_verdict=stage.failure.get("verdict", ""))
            if reply["failed_verdict"] == "tampering":
                reply["tampered"] = [stage.failure["error"]]
            return reply
        if "benchmark" not in stage.holds_at:
            reply.update(status="crashed", error=f"benchmark: it raised {stage.refused_at.get('benchmark', '')}")
            return reply
        if not options.get("timing", True):
            reply.setdefault("status", "ok")
            return reply
        t0 = time.perf_counter()
        try:
            _timing(task, rt, built, kernels, device, options, reply, rng, guard)
        except Tampered:
            pass   # named by the check below
        reply["split_s"]["timing"] = time.perf_counter() - t0
        tampered(check, reply)
        reply.setdefault("status", "ok")
        return reply
    finally:
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        reply["printed"] = _head(printed)


def _tampered(check, reply: dict) -> bool:
    """Whether the solution changed the PyTorch it is judged by (``modelnew_tamper``; ``check`` is its watch's
    ``check``): then the reply says so, and that ends the judgement whatever else it found."""
    changes = check()
    if changes:
        reply.update(status="rejected", failed_verdict="tampering", error=describe(changes), tampered=changes)
    return bool(changes)


def _private_caches() -> None:
    """torch.compile's, Triton's and CuPy's caches and the temp folder in this call's own folder, the one it may
    write."""
    import tempfile

    home = os.environ.get("HOME", ".")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(home, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(home, "triton")
    os.environ["CUPY_CACHE_DIR"] = os.path.join(home, "cupy")
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"   # compiles in this process: no pool of workers to reach
    tempfile.tempdir = None   # TMPDIR was set for this call after the process that forked it had read its own


def cpu_benchmark(task) -> dict[str, int]:
    """The size a judgement on the CPU times: the task's largest check size (a KernelBench benchmark size holds
    gigabytes, and its float64 reference on a CPU runs for minutes or out of memory)."""
    return dict(max(task.spec.sizes.check, key=lambda s: math.prod(s.values()) if s else 0))


def _timing(task, rt, built, kernels, device, options, reply, rng, guard) -> None:
    import torch

    from .modelnew_checks import NotPlain, build_pair, plain_outputs
    from .modelnew_timing import baselines, census, escaped_gap, interleave

    sizes = dict(options.get("benchmark") or task.spec.sizes.benchmark)
    seed = rng.getrandbits(31)
    model, new, args = build_pair(rt, built.ns, sizes, device, seed, guard)
    model.train(new.training)
    reply["census"] = census(new, args, tuple(kernels), device, built.modules)
    guard()
    problem_ns = rt.problem.namespace(rt.overrides(sizes))

    def make_args(i):
        if i == 0:
            return args
        with torch.device(device):
            torch.manual_seed(seed + 1000 * i)
            return list(problem_ns["get_inputs"]())

    def candidate(a):
        with torch.no_grad():
            return plain_outputs(new(*a))

    names = [b for b in rt.spec.baselines if b in options.get("baselines", rt.spec.baselines)]
    fns, unavailable = baselines(model, names, options.get("tf32", "off"))
    tolerances = [task.output_tolerance(name) for name in rt.spec.outputs]
    owned = {x.untyped_storage().data_ptr() for m in (model, new) for x in (*m.parameters(), *m.buffers())}
    guard()
    try:
        timed = interleave({"candidate": candidate, **fns}, make_args, device, tolerances,
                           int(options.get("rounds", 30)), float(options.get("budget_s", 20.0)), rng, owned, guard)
    except NotPlain as exc:
        reply.update(status="rejected", failed_verdict="tampering", error=f"timing: {exc}", tampered=[str(exc)])
        return
    timed["unavailable"].update(unavailable)
    timed["sizes"] = sizes
    reply["timing"] = timed
    if timed["wrong"] is not None:
        w = timed["wrong"]
        reply.update(status="wrong", error=f"timed round {w['round']}: output {rt.spec.outputs[w['output']]!r} differs "
                                           f"from eager's by more than twice the task's tolerance "
                                           f"({w['mismatches']} elements, max abs error {w['max_abs_error']:.3g})",
                     failed_verdict="state_across_calls")
        return
    gap = escaped_gap(timed) if device == "cuda" else None
    if gap is not None:
        reply["escaped_timing"] = gap
        reply.update(status="rejected", failed_verdict="outside_timed_region",
                     error=f"work outside the timed region: {gap['gap_ms']:.3g} ms between the end of its events and "
                           f"the device going idle (eager: {gap['eager_gap_ms']:.3g} ms), for {gap['event_ms']:.3g} ms "
                           "timed")


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _head(path: str, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def build_only(source: str, key: str, extensions_dir: str, deadline_s: float) -> dict:
    """Execute the solution's module (its builds filling its cache) and nothing else: a build run ahead of its
    judgement, on another core, while the GPU judges another solution."""
    from .modelnew_load import load_solution

    _private_caches()
    printed = os.path.join(os.environ.get("HOME", "."), "solution_stdout.log")
    saved_fd = os.dup(1)
    os.dup2(os.open(printed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
    try:
        built = load_solution(source, key, extensions_dir, deadline_s)
    finally:
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
    return dict(ok=built.ns is not None, error=built.error, seconds=built.seconds, builds=built.builds)
