"""A/B timing in the GPU worker: the candidate, the baseline and the vendor interleaved in a shuffled
order every round, fresh inputs per round, a cold L2, CUDA events around the whole plan, every timed
output fingerprinted, sampled rounds and a last hidden round saved for the reference comparison."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import numpy as np

from ..envinfo import clocks
from ..stats import settled
from ..task_reference import load_reference
from .checks import Violation, violations
from .harness import Harness, LaunchFailed, generate_into, poison_outputs, save


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
        problems = violations(h, groups, before, hash_seed) if name in loaded else []
        if problems:
            raise Violation(name, problems)
        return ms, wall, produced

    clocks_start = clocks()
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
    except Violation as v:
        status = "rejected" if v.impl == "candidate" else "infrastructure"
        return {"ok": True, "status": status, "impl": v.impl, "error": v.problems[0], "detail": "\n".join(v.problems)}
    except LaunchFailed as exc:
        return {"ok": True, "status": "launch_error", "impl": "candidate", "error": str(exc)}
    return {"ok": True, "status": "ran", "rounds": len(samples["candidate"]), "sets": n_sets,
            "flush_bytes": 2 * h.l2_bytes, "samples": samples, "walls": walls, "fingerprints": prints,
            "full": full, "clocks_start": clocks_start, "clocks_end": clocks(),
            "gpu_s": time.perf_counter() - t_begin}


def _enough(req: dict, samples: dict[str, list[float]], elapsed: float) -> bool:
    """Stop adding rounds: the candidate's time budget, the round or wall cap is reached, or the
    candidate's and the baseline's medians are already known to within ``target_ci``."""
    if sum(samples["candidate"]) >= req["budget_ms"] or len(samples["candidate"]) >= req["max_rounds"]:
        return True
    if elapsed >= req["wall_cap_s"]:
        return True
    return all(settled(samples[name], req["target_ci"]) for name in ("candidate", "baseline"))




