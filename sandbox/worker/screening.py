"""Screening in the GPU worker: many candidates against one baseline on the same inputs (the host side
is ``sandbox.host.screener``)."""

from __future__ import annotations

import random
import time

from ..judging.compare import spread_atol
from ..judging.stats import pair_noise, relative_time, screening_stop
from ..wire import Screen, ScreenBatch, ScreenCandidate, ScreenedRun, ScreenSetup
from .checks import Violation, violations
from .harness import Harness, LaunchFailed, generate_into, poison_outputs


NOISE_ROUNDS = 8   # rounds of the baseline against itself that measure the noise, once per set-up


class Screening:
    """The worker's screening state: many candidates against one baseline on the same inputs.

    Set up once per screening (``ScreenSetup``): two input sets at the benchmark size (the task's
    first two distributions), guarded output buffers, the baseline loaded and its outputs on both sets
    kept, masked, as the expected values (the orchestrator checked the baseline against the reference).
    The set-up also times the baseline against itself, which gives the noise of a paired ratio on this GPU now.
    Per candidate of a ``Screen`` batch: a poisoned-output run on set 0, a warm-up run on set 1, interleaved A/B
    rounds against the baseline with a cold L2 (fewer where the ratio is settled, or clearly worse than the best
    so far, sooner the quieter the GPU: ``_one``), and a last run on set 1; every run of the candidate is compared
    on the device with the baseline's output for its set (``sandbox.judging.agreement``), guard bands and input
    hashes checked. A candidate that breaks a rule (a guard band or an input overwritten) is rejected and
    the state rebuilt, so the next candidate starts clean."""

    def __init__(self, h: Harness, req: ScreenSetup):
        self.h, self.req, self.id = h, req, req.setup_id
        self.rng = random.Random(req.hash_seed)  # sign keys; each screen request reseeds it
        self._build()

    def _build(self) -> None:
        h, req = self.h, self.req
        cp = h.cp
        self.sets = self.outs = self.expected = None
        cp.get_default_memory_pool().free_all_blocks()
        variants = req.inputs
        self.sets = [{s["name"]: h.alloc(s["dtype"], s["shape"]) for s in variants[0]} for _ in range(2)]
        for k, ins in enumerate(self.sets):
            generate_into(h, ins, variants[k % len(variants)], req.seed + k)
        self.hashes = [{n: b.data_hash(req.hash_seed) for n, b in ins.items()} for ins in self.sets]
        self.outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req.outputs}
        self.base = h.load(req.baseline.cubin, req.baseline.plan)
        self.base_scratch = self.base.alloc_scratch()
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()
        self.expected = []  # per set: output name -> (masked copy of the baseline's output, its keys)
        self.atols: dict[tuple, float] = {}  # (set, output) -> atol (grown to the baseline output's spread)
        for k in range(2):
            self.run(self.base, self.base_scratch, k)
            stored = {}
            for n, b in self.outs.items():
                tol = req.tolerance[n]
                self.atols[(k, n)] = spread_atol(cp, b.view, tol.atol, tol.spread)
                keys = h.agreement.new_keys()
                copy = b.view.copy()
                h.agreement.mask(copy, keys)
                stored[n] = (copy, keys)
            self.expected.append(stored)
        # the baseline's output against itself: a self-check of the test and the masks
        problem = self.check(1, "setup (the baseline's output compared with itself)")
        if problem:
            raise RuntimeError(problem)
        self.noise = self._noise()

    def _noise(self) -> float:
        """The spread of a paired ratio on this GPU now (``stats.pair_noise``): the baseline timed against itself
        in ``NOISE_ROUNDS`` rounds as candidates are timed (cold L2, both input sets). It sizes how soon a
        candidate far slower than the best may stop (``stats.screening_stop``)."""
        ratios = []
        for r in range(NOISE_ROUNDS):
            a = self.run(self.base, self.base_scratch, r % 2, flush=True)
            b = self.run(self.base, self.base_scratch, r % 2, flush=True)
            ratios.append(a / b)
        return pair_noise(ratios)

    def run(self, loaded, scratch, k: int, flush: bool = False) -> float:
        h = self.h
        poison_outputs(self.outs, self.req.outputs, second=False)
        loaded.poison_scratch(scratch)
        if flush:
            h.flush_l2()
        arrays = {n: b.view for n, b in {**self.sets[k], **self.outs}.items()}
        hold = h.hold  # the launch is queued in full before its start event runs (guards.StreamHold)
        if hold is not None:
            hold.hold()
        try:
            self.start.record(h.stream)
            loaded.launch(arrays, scratch)
            self.end.record(h.stream)
        finally:
            if hold is not None:
                hold.release()
        h.sync()
        groups = {"input": self.sets[k], "output": self.outs, "scratch": scratch}
        problems = violations(h, groups, self.hashes[k], self.req.hash_seed)
        if problems:
            raise Violation("candidate", problems)
        if loaded is self.base:  # its intermediate results are no answer for a candidate to find
            loaded.poison_scratch(scratch, every=True)
        return h.cp.cuda.get_elapsed_time(self.start, self.end)

    def check(self, k: int, when: str) -> str:
        """The agreement test of the output buffers with the baseline's output on set ``k`` ("" if they agree)."""
        checks = self.h.agreement
        for spec in self.req.outputs:
            name = spec["name"]
            masked, keys = self.expected[k][name]
            rtol = self.req.tolerance[name].rtol
            verdict = checks.agree(self.outs[name].view, masked, keys, self.atols[(k, name)], rtol,
                                   self.rng.getrandbits(64)).verdict()
            if verdict:
                return f"{when}: output {name!r} disagrees with the baseline's: {verdict}"
        return ""

    def screen(self, req: Screen) -> ScreenBatch:
        self.rng = random.Random(req.order_seed)
        stop_above = req.stop_above
        results = []
        for c in req.candidates:
            t0 = time.perf_counter()
            rec = dict(key=c.key, status="ok", error="", samples=[], baseline_samples=[], stopped="")
            try:
                self._one(c, req, stop_above, rec)
            except Violation as v:
                rec.update(status="rejected", error=v.problems[0], samples=[], baseline_samples=[])
                self._build()
            except LaunchFailed as exc:
                rec.update(status="launch_error", error=str(exc), samples=[], baseline_samples=[])
            rec["gpu_s"] = time.perf_counter() - t0
            if rec["status"] == "ok" and rec["stopped"] != "slower":  # a measured candidate sets the bar for the next
                bar = relative_time(rec["samples"], rec["baseline_samples"]) * req.margin
                stop_above = bar if stop_above is None else min(stop_above, bar)
            results.append(ScreenedRun(**rec))
        return ScreenBatch(results)

    def _one(self, c: ScreenCandidate, req: Screen, stop_above: float | None, rec: dict) -> None:
        """Every run of the candidate is checked before anything else writes the output buffers. The timed
        rounds end at ``rounds``, or after ``min_rounds`` once the median of the candidate's time over the
        baseline's (paired by round) is settled within ``target``, or is surely above ``stop_above`` (a
        candidate clearly slower than the best screened so far: after fewer rounds where it is far above, by the
        measured noise); the last run follows either way. The warm-up runs the candidate alone: the baseline
        ran moments before, for the candidate before it or the set-up."""
        loaded = self.h.load(c.cubin, c.plan)
        scratch = loaded.alloc_scratch()
        cand, base = ("samples", loaded, scratch), ("baseline_samples", self.base, self.base_scratch)
        steps = [("first run", 0, [cand], False)]
        steps.append(("warm-up run", 1, [cand], False))
        steps += [(f"timed round {r}", r % 2, [cand, base], True) for r in range(req.rounds)]
        last = ("last run (other inputs, after the timed rounds)", 1, [cand], False)
        min_rounds, target = req.min_rounds, req.target
        for when, k, impls, timed in steps:
            if not self._run_step(when, k, impls, timed, loaded, rec):
                return
            if timed and len(rec["samples"]) < req.rounds:
                ratios = [a / b for a, b in zip(rec["samples"], rec["baseline_samples"])]
                rec["stopped"] = screening_stop(ratios, min_rounds, target, stop_above, self.noise)
                if rec["stopped"]:
                    break
        self._run_step(*last, loaded, rec)

    def _run_step(self, when: str, k: int, impls: list, timed: bool, loaded, rec: dict) -> bool:
        """One step in a shuffled order; False when the candidate's output was wrong (``rec`` says why)."""
        impls = impls[:]
        self.rng.shuffle(impls)
        for field, impl, scr in impls:
            ms = self.run(impl, scr, k, flush=len(impls) > 1)
            if impl is loaded:
                wrong = self.check(k, when)
                if wrong:
                    rec.update(status="wrong", error=wrong, samples=[], baseline_samples=[], stopped="")
                    return False
            if timed:
                rec[field].append(ms)
        return True
