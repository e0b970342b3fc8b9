"""The worker-side stages: correctness trials and A/B timing (GPU role), and reference comparison
(reference role). Each returns a plain dict; the orchestrator turns it into a ``Result``."""

from __future__ import annotations

import math
import random
import re
import time
from pathlib import Path

import numpy as np

from .device import (
    Harness,
    LaunchFailed,
    Poisoned,
    generate_into,
    poison_outputs,
    reference_inputs,
    save,
)
from .stats import settled


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label)


def _violations(h: Harness, groups: dict[str, dict], before: dict, seed: int) -> list[str]:
    """Guard bands of every buffer, and input hashes against ``before``."""
    problems = []
    for kind, buffers in groups.items():
        for name, buf in buffers.items():
            lo, hi = buf.guards_intact()
            if not bool(lo):
                problems.append(f"out-of-bounds write: the guard band below {kind} {name!r} was overwritten")
            if not bool(hi):
                problems.append(f"out-of-bounds write: the guard band above {kind} {name!r} was overwritten")
    for name, digest in before.items():
        if int(groups["input"][name].data_hash(seed).get()[0]) != int(digest.get()[0]):
            problems.append(f"input {name!r} was modified by the kernel (inputs are read-only)")
    return problems


def run_checks(h: Harness, req: dict) -> dict:
    """Correctness trials: fresh guarded buffers, seeded inputs, poisoned outputs, two runs each."""
    cp = h.cp
    data_dir = Path(req["data_dir"])
    trials = req["trials"]
    out = []
    try:
        loaded = h.load(req["cubin"], trials[0]["plan"])
    except LaunchFailed as exc:
        return {"ok": True, "trials": [dict(label=trials[0]["label"], status="launch_error", error=f"loading the module: {exc}")]}
    for t in trials:
        try:
            result = _trial(h, loaded.with_plan(t["plan"]), t, data_dir, req["hash_seed"])
        except LaunchFailed as exc:
            result = dict(label=t["label"], status="launch_error", error=str(exc))
        except Poisoned as exc:
            raise Poisoned(f"{t['label']} {t['sizes']}: {exc}") from None
        out.append(result)
        if result["status"] != "ran":
            break
        cp.get_default_memory_pool().free_all_blocks()
    return {"ok": True, "trials": out}


def _trial(h: Harness, loaded, t: dict, data_dir: Path, hash_seed: int) -> dict:
    cp = h.cp
    ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in t["inputs"]}
    outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in t["outputs"]}
    scratch = loaded.alloc_scratch()
    generate_into(h, ins, t["inputs"], t["seed"])
    before = {n: b.data_hash(hash_seed) for n, b in ins.items()}
    arrays = {n: b.view for n, b in {**ins, **outs}.items()}
    files, first, gpu_s = {}, {}, 0.0
    for run in (1, 2):
        poison_outputs(outs, t["outputs"], second=run == 2)
        loaded.poison_scratch(scratch)
        h.sync()
        t0 = time.perf_counter()
        loaded.launch(arrays, scratch)
        h.sync()
        gpu_s += time.perf_counter() - t0
        problems = _violations(h, {"input": ins, "output": outs, "scratch": scratch}, before, hash_seed)
        if problems:
            return dict(label=t["label"], status="rejected", error=problems[0], detail="\n".join(problems))
        if run == 1:
            files["run1"] = {n: save(b.view, data_dir / f"{_safe(t['label'])}-run1-{n}.npy") for n, b in outs.items()}
            first = {n: b.view.copy() for n, b in outs.items()}
    identical = all(bool(cp.array_equal(first[n].view(cp.uint8), outs[n].view.view(cp.uint8))) for n in outs)
    if not identical:  # the second run is compared with the reference only when it differs from the first
        files["run2"] = {n: save(b.view, data_dir / f"{_safe(t['label'])}-run2-{n}.npy") for n, b in outs.items()}
    hashes = {n: int(d.get()[0]) for n, d in before.items()}
    return dict(label=t["label"], status="ran", files=files, identical=identical, input_hashes=hashes, gpu_s=gpu_s)


def run_timing(h: Harness, req: dict) -> dict:
    """Interleaved A/B rounds: fresh inputs per round, cold L2, events around the whole plan."""
    cp = h.cp
    data_dir = Path(req["data_dir"])
    rng = random.Random(req["order_seed"])
    sizes, scalars = req["sizes"], req["scalars"]
    variants = req["input_variants"]
    loaded, vendor = {}, {}
    for name, spec in req["impls"].items():
        if "cubin" in spec:
            try:
                loaded[name] = h.load(spec["cubin"], spec["plan"])
            except LaunchFailed as exc:
                return {"ok": True, "status": "launch_error", "impl": name, "error": str(exc)}
        else:
            from .task import load_reference

            vendor[name] = load_reference(Path(spec["task_folder"]) / "reference.py").vendor
    names = list(req["impls"])
    set_bytes = sum(int(np.prod(s["shape"])) * np.dtype(s["dtype"]).itemsize for s in variants[0])
    n_sets = int(min(64, max(2, math.ceil(2 * h.l2_bytes / max(set_bytes, 1)))))
    sets = [{s["name"]: h.alloc(s["dtype"], s["shape"]) for s in variants[0]} for _ in range(n_sets)]
    outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]}
    scratch = {n: l.alloc_scratch() for n, l in loaded.items()}
    start, end = cp.cuda.Event(), cp.cuda.Event()
    hash_seed = req["hash_seed"]

    def one(name: str, ins: dict, before: dict, flush_value: int) -> tuple[float, float, dict]:
        arrays = {n: b.view for n, b in {**ins, **outs}.items()}
        poison_outputs(outs, req["outputs"], second=False)
        if name in loaded:
            loaded[name].poison_scratch(scratch[name])
        h.flush_l2(flush_value)
        h.sync()
        t0 = time.perf_counter()
        start.record(h.stream)
        if name in loaded:
            loaded[name].launch(arrays, scratch[name])
            produced = {n: outs[n].view for n in outs}
        else:
            produced = vendor[name](cp, **{n: b.view for n, b in ins.items()}, **sizes, **scalars)
        end.record(h.stream)
        try:
            end.synchronize()
        except Exception as exc:
            raise h.classify(exc) from None
        wall = (time.perf_counter() - t0) * 1e3
        ms = cp.cuda.get_elapsed_time(start, end)
        launches[name] += 1
        groups = {"input": ins, "output": outs, "scratch": scratch.get(name, {})}
        problems = _violations(h, groups, before, hash_seed) if name in loaded else []
        if problems:
            raise _Violation(name, problems)
        return ms, wall, produced

    clocks_start = _clocks()
    launches = {n: 0 for n in names}
    samples = {n: [] for n in names}
    walls = {n: [] for n in names}
    prints = {n: [] for n in names}
    full = []
    t_begin = time.perf_counter()
    try:
        # warm-up: every implementation, at least 3 launches and 20 ms
        ins = sets[0]
        generate_into(h, ins, variants[0], req["seed"])
        before = {n: b.data_hash(hash_seed) for n, b in ins.items()}
        for name in names:
            spent, count = 0.0, 0
            while count < 3 or (spent < 20.0 and count < 200):
                ms, _, _ = one(name, ins, before, count)
                spent, count = spent + ms, count + 1
        r = 0
        while True:
            seed = (req["seed"] * 6364136223846793005 + r + 1) % (2**63)
            variant = r % len(variants)
            ins = sets[r % n_sets]
            generate_into(h, ins, variants[variant], seed)
            before = {n: b.data_hash(hash_seed) for n, b in ins.items()}
            key = rng.getrandbits(63)
            order = names[:]
            rng.shuffle(order)
            for name in order:
                ms, wall, produced = one(name, ins, before, r)
                samples[name].append(ms)
                walls[name].append(wall)
                prints[name].append({n: h.fingerprint(produced[n], key).get().tolist() for n in outs})
                if name == "candidate" and r in req["full_rounds"]:
                    files = {n: save(outs[n].view, data_dir / f"timed-{r}-{n}.npy") for n in outs}
                    full.append(dict(round=r, seed=seed, variant=variant, files=files))
            r += 1
            if r >= req["min_rounds"] and _enough(req, samples, time.perf_counter() - t_begin):
                break
        # a last, hidden check after all timed launches and at least min_launches in all: behaviour that
        # changes late is caught, however early the rounds stopped
        while launches["candidate"] < req["min_launches"]:  # on the last round's inputs, untimed
            one("candidate", ins, before, launches["candidate"])
        seed = (req["seed"] * 6364136223846793005 + 10**9 + r) % (2**63)
        ins = sets[r % n_sets]
        generate_into(h, ins, variants[0], seed)
        before = {n: b.data_hash(hash_seed) for n, b in ins.items()}
        one("candidate", ins, before, r)
        files = {n: save(outs[n].view, data_dir / f"timed-final-{n}.npy") for n in outs}
        full.append(dict(round=r, seed=seed, variant=0, files=files))
    except _Violation as v:
        status = "rejected" if v.impl == "candidate" else "infrastructure"
        return {"ok": True, "status": status, "impl": v.impl, "error": v.problems[0], "detail": "\n".join(v.problems)}
    except LaunchFailed as exc:
        return {"ok": True, "status": "launch_error", "impl": "candidate", "error": str(exc)}
    return {"ok": True, "status": "ran", "rounds": len(samples["candidate"]), "sets": n_sets,
            "flush_bytes": 2 * h.l2_bytes, "samples": samples, "walls": walls, "fingerprints": prints,
            "full": full, "clocks_start": clocks_start, "clocks_end": _clocks(),
            "gpu_s": time.perf_counter() - t_begin}


def _enough(req: dict, samples: dict[str, list[float]], elapsed: float) -> bool:
    """Stop adding rounds: the candidate's time budget, the round or wall cap is reached, or the
    candidate's and the baseline's medians are already known to within ``target_ci``."""
    if sum(samples["candidate"]) >= req["budget_ms"] or len(samples["candidate"]) >= req["max_rounds"]:
        return True
    if elapsed >= req["wall_cap_s"]:
        return True
    return all(settled(samples[name], req["target_ci"]) for name in ("candidate", "baseline"))


class _Violation(Exception):
    def __init__(self, impl: str, problems: list[str]):
        super().__init__(problems[0])
        self.impl, self.problems = impl, problems


def _clocks() -> dict:
    from .envinfo import clocks

    return clocks()


def run_compare(req: dict) -> dict:
    """Reference role: regenerate the inputs from the seed, compute the reference, compare each run."""
    from .compare import compare
    from .task import load_reference

    xp = _xp(req.get("backend", "cupy"))
    t0 = time.perf_counter()
    module = load_reference(Path(req["task_folder"]) / "reference.py")
    ins = reference_inputs(xp, req["inputs"], req["seed"])
    if req.get("input_hashes") and xp.__name__ == "cupy":
        h = Harness(req["arch"], req["harness_cubin"])
        for name, expected in req["input_hashes"].items():
            if int(h.hash_array(ins[name], req["hash_seed"]).get()[0]) != expected:
                return {"ok": False, "error": f"regenerated input {name!r} differs from the worker's (infrastructure fault)"}
    expected = module.reference(xp, **ins, **req["sizes"], **req["scalars"])
    checks = []
    for spec in req["outputs"]:
        name = spec["name"]
        if name not in expected:
            return {"ok": False, "error": f"reference() returned no output {name!r} (got {sorted(expected)})"}
        ref = xp.asarray(expected[name])
        if tuple(ref.shape) != tuple(spec["shape"]):
            return {"ok": False, "error": f"reference() output {name!r} has shape {tuple(ref.shape)}, the task says {tuple(spec['shape'])}"}
        atol, rtol = req["tolerance"][spec["dtype"]]
        for run in req["runs"]:
            got = xp.asarray(_load(run["files"][name]))
            stats = compare(xp, got, ref, atol, rtol)
            checks.append(dict(output=name, run=run["label"], **stats))
    return {"ok": True, "checks": checks, "seconds": time.perf_counter() - t0}


def _load(path: str):
    """A saved output, memory-mapped (read once, straight from the page cache); empty arrays cannot be mapped."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError:
        return np.load(path, allow_pickle=False)


def _xp(backend: str):
    if backend == "cupy":
        import cupy

        return cupy
    return np


class Screening:
    """The worker's screening state: many candidates against one baseline on the same inputs.

    Set up once per screening (``op: screen_setup``): two input sets at the benchmark size, guarded
    output buffers, the baseline loaded and its outputs on both sets kept as the expected values (the
    orchestrator checked the baseline against the reference). Per candidate (``op: screen``): a
    poisoned-output run on set 0 compared with the baseline's output (task tolerance, guard bands,
    input hashes), interleaved A/B rounds against the baseline with a cold L2, then a last poisoned
    run on set 1 compared again (behaviour that changes after the first run is caught). A candidate
    that breaks a rule (a guard band or an input overwritten) is rejected and the state rebuilt, so
    the next candidate starts clean."""

    def __init__(self, h: Harness, req: dict):
        self.h, self.req, self.id = h, req, req["setup_id"]
        self._build()

    def _build(self) -> None:
        h, req = self.h, self.req
        cp = h.cp
        self.sets = self.outs = self.expected = None
        cp.get_default_memory_pool().free_all_blocks()
        specs = req["inputs"]
        self.sets = [{s["name"]: h.alloc(s["dtype"], s["shape"]) for s in specs} for _ in range(2)]
        for k, ins in enumerate(self.sets):
            generate_into(h, ins, specs, req["seed"] + k)
        self.hashes = [{n: b.data_hash(req["hash_seed"]) for n, b in ins.items()} for ins in self.sets]
        self.outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]}
        self.base = h.load(req["baseline"]["cubin"], req["baseline"]["plan"])
        self.base_scratch = self.base.alloc_scratch()
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()
        self.expected = []
        for k in range(2):
            self.run(self.base, self.base_scratch, k)
            self.expected.append({n: b.view.copy() for n, b in self.outs.items()})
        # the baseline's output against itself: a self-check, and CuPy compiles the comparison's kernels
        # here, in the setup's time limit, not in the first candidate's
        problem = self.check(1, "setup (the baseline's output compared with itself)")
        if problem:
            raise RuntimeError(problem)

    def run(self, loaded, scratch, k: int, flush: int | None = None) -> float:
        h = self.h
        poison_outputs(self.outs, self.req["outputs"], second=False)
        loaded.poison_scratch(scratch)
        if flush is not None:
            h.flush_l2(flush)
        arrays = {n: b.view for n, b in {**self.sets[k], **self.outs}.items()}
        self.start.record(h.stream)
        loaded.launch(arrays, scratch)
        self.end.record(h.stream)
        h.sync()
        groups = {"input": self.sets[k], "output": self.outs, "scratch": scratch}
        problems = _violations(h, groups, self.hashes[k], self.req["hash_seed"])
        if problems:
            raise _Violation("candidate", problems)
        return h.cp.cuda.get_elapsed_time(self.start, self.end)

    def check(self, k: int, when: str) -> str:
        from .compare import compare

        for spec in self.req["outputs"]:
            atol, rtol = self.req["tolerance"][spec["dtype"]]
            found = compare(self.h.cp, self.outs[spec["name"]].view, self.expected[k][spec["name"]], atol, rtol)
            if not found["passed"]:
                first = found["first_mismatch"] or {}
                return (f"{when}: output {spec['name']!r} differs from the baseline's: {found['mismatches']} mismatches"
                        + (f", first at {first['index']}: got {first['got']}, expected {first['expected']}" if first else "")
                        + (f"; {found['note']}" if found["note"] else ""))
        return ""

    def screen(self, req: dict) -> dict:
        rng = random.Random(req["order_seed"])
        results = []
        for c in req["candidates"]:
            t0 = time.perf_counter()
            rec = dict(key=c["key"], status="ok", error="", samples=[], baseline_samples=[])
            try:
                self._one(c, req["rounds"], rng, rec)
            except _Violation as v:
                rec.update(status="rejected", error=v.problems[0], samples=[], baseline_samples=[])
                self._build()
            except LaunchFailed as exc:
                rec.update(status="launch_error", error=str(exc), samples=[], baseline_samples=[])
            rec["gpu_s"] = time.perf_counter() - t0
            results.append(rec)
        return {"ok": True, "results": results}

    def _one(self, c: dict, rounds: int, rng: random.Random, rec: dict) -> None:
        loaded = self.h.load(c["cubin"], c["plan"])
        scratch = loaded.alloc_scratch()
        self.run(loaded, scratch, 0)
        wrong = self.check(0, "first run")
        if wrong:
            rec.update(status="wrong", error=wrong)
            return
        for w in range(2):  # warm-up
            self.run(loaded, scratch, w % 2, w)
            self.run(self.base, self.base_scratch, w % 2, w)
        for r in range(rounds):
            pair = [("samples", loaded, scratch), ("baseline_samples", self.base, self.base_scratch)]
            rng.shuffle(pair)
            for field, impl, scr in pair:
                rec[field].append(self.run(impl, scr, r % 2, r))
        self.run(loaded, scratch, 1)
        wrong = self.check(1, "last run (other inputs, after the timed rounds)")
        if wrong:
            rec.update(status="wrong", error=wrong, samples=[], baseline_samples=[])
