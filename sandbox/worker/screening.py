"""Screening in the GPU worker: many candidates against one baseline on the same inputs (the host side
is ``sandbox.host.screener``)."""

from __future__ import annotations

import random
import time

from ..compare import compare
from .checks import Violation, violations
from .harness import Harness, LaunchFailed, generate_into, poison_outputs


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
        problems = violations(h, groups, self.hashes[k], self.req["hash_seed"])
        if problems:
            raise Violation("candidate", problems)
        return h.cp.cuda.get_elapsed_time(self.start, self.end)

    def check(self, k: int, when: str) -> str:
        for spec in self.req["outputs"]:
            atol, rtol = self.req["tolerance"][spec["name"]]
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
            except Violation as v:
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
