"""The program Nsight Compute profiles: ``python -m sandbox.worker.profile_target REQUEST.json``, or, started
ahead of its request, ``python -m sandbox.worker.profile_target --wait SPARE.json`` (``wait_then_run``).

Like a GPU worker, it runs only trusted host code: it loads the candidate's cubin, allocates guarded
inputs and outputs at the requested sizes, generates the inputs from a seed, runs the resolved plan
``warmup`` times and then once more (the run ncu profiles), and writes its status as JSON to
``status_file``: ``ran``, ``launch_error`` or ``crashed``, with the error, and where its seconds went
(``split_s``: imports, CUDA context and harness, module load, guarded buffers, inputs, launches).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def run(req: dict) -> dict:
    """The request in one go: start up, then profile (``profiled``)."""
    split, t = {}, [time.perf_counter()]
    from .harness import Harness, Poisoned

    _lap(split, t, "imports")
    try:
        h = Harness(req["arch"], Path(req["harness_cubin"]).read_bytes())
        h.sync()
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    _lap(split, t, "context")
    return profiled(h, req, split, t, ranged=False)


def wait_then_run(spare: dict) -> dict:
    """A run started ahead (``sandbox.host.profiler``'s spare): up to the CUDA context and the harness, then wait
    for the request file ``spare["go"]`` (written whole, by a rename) for at most ``spare["wait_s"]`` seconds and
    while the process ``spare["owner"]`` that started it lives, and
    profile it with the profiled launches between ``cudaProfilerStart`` and ``cudaProfilerStop`` (ncu knew no
    kernel names when it started). Its seconds are those from the request on; ``waited`` says how long it idled."""
    import json

    split, t = {}, [time.perf_counter()]
    from .harness import Harness, Poisoned

    try:
        h = Harness(spare["arch"], Path(spare["harness_cubin"]).read_bytes())
        h.sync()
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    go, deadline = Path(spare["go"]), time.monotonic() + spare["wait_s"]
    polls = 0
    while not go.exists():
        polls += 1
        if time.monotonic() > deadline or (polls % 100 == 0 and not _alive(spare["owner"])):
            return {"status": "unused"}
        time.sleep(0.002)
    waited = time.perf_counter() - t[0]
    t[0] = time.perf_counter()
    status = profiled(h, json.loads(go.read_text()), split, t, ranged=True)
    status["waited_s"] = round(waited, 3)
    return status


def profiled(h, req: dict, split: dict, t: list, ranged: bool) -> dict:
    """Load the cubin, allocate guarded buffers, generate the inputs, run the plan ``warmup`` times and once more
    (``ranged``: that last run inside a profiler range)."""
    from .harness import LaunchFailed, Poisoned, generate_into

    try:
        loaded = h.load(Path(req["cubin"]).read_bytes(), req["plan"])
        _lap(split, t, "load")
        ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["inputs"]}
        outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]}
        scratch = loaded.alloc_scratch()
        h.sync()
        _lap(split, t, "buffers")
        generate_into(h, ins, req["inputs"], req["seed"])
        arrays = {n: b.view for n, b in {**ins, **outs}.items()}
        h.sync()
        # the generator's temporaries go back to the device: ncu saves and restores the process's device memory
        # around every replay pass of the profiled kernel, and memory the pool merely holds would be copied too
        h.cp.get_default_memory_pool().free_all_blocks()
        _lap(split, t, "inputs")
        for _ in range(req["warmup"]):
            loaded.launch(arrays, scratch)
        if ranged:
            h.sync()
            h.cp.cuda.profiler.start()
        loaded.launch(arrays, scratch)
        h.sync()
        if ranged:
            h.cp.cuda.profiler.stop()
        _lap(split, t, "launches")
    except LaunchFailed as exc:
        return {"status": "launch_error", "error": str(exc)}
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return {"status": "ran", "launches": (req["warmup"] + 1) * len(req["plan"]["launches"]), "split_s": split}


def _alive(pid: int) -> bool:
    """Whether the process that started this run still runs (a run whose sandbox is gone ends)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _lap(split: dict, t: list, part: str) -> None:
    now = time.perf_counter()
    split[part] = round(now - t[0], 4)
    t[0] = now


def main(argv: list[str]) -> int:
    from .harness import serve_request

    if argv[:1] == ["--wait"]:   # a spare: its status file is named by its own request
        import json

        spare = json.loads(Path(argv[1]).read_text())
        status = wait_then_run(spare)
        Path(spare["status_file"]).write_text(json.dumps(status))
        return 0 if status["status"] == "ran" else 1
    return serve_request(argv, run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
