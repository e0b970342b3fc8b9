"""The program Nsight Compute profiles: ``python -m sandbox.worker.profile_target REQUEST.json``.

Like a GPU worker, it runs only trusted host code: it loads the candidate's cubin, allocates guarded
inputs and outputs at the requested sizes, generates the inputs from a seed, runs the resolved plan
``warmup`` times and then once more (the run ncu profiles), and writes its status as JSON to
``status_file``: ``ran``, ``launch_error`` or ``crashed``, with the error, and where its seconds went
(``split_s``: imports, CUDA context and harness, module load, guarded buffers, inputs, launches).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def run(req: dict) -> dict:
    split, t = {}, time.perf_counter()

    def lap(part: str) -> None:
        nonlocal t
        now = time.perf_counter()
        split[part] = round(now - t, 4)
        t = now

    from .harness import Harness, LaunchFailed, Poisoned, generate_into

    lap("imports")
    try:
        h = Harness(req["arch"], Path(req["harness_cubin"]).read_bytes())
        h.sync()
        lap("context")
        loaded = h.load(Path(req["cubin"]).read_bytes(), req["plan"])
        lap("load")
        ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["inputs"]}
        outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]}
        scratch = loaded.alloc_scratch()
        h.sync()
        lap("buffers")
        generate_into(h, ins, req["inputs"], req["seed"])
        arrays = {n: b.view for n, b in {**ins, **outs}.items()}
        h.sync()
        # the generator's temporaries go back to the device: ncu saves and restores the process's device memory
        # around every replay pass of the profiled kernel, and memory the pool merely holds would be copied too
        h.cp.get_default_memory_pool().free_all_blocks()
        lap("inputs")
        for _ in range(req["warmup"] + 1):
            loaded.launch(arrays, scratch)
        h.sync()
        lap("launches")
    except LaunchFailed as exc:
        return {"status": "launch_error", "error": str(exc)}
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return {"status": "ran", "launches": (req["warmup"] + 1) * len(req["plan"]["launches"]), "split_s": split}


if __name__ == "__main__":
    from .harness import serve_request

    sys.exit(serve_request(sys.argv[1:], run))
