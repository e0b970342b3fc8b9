"""The program Nsight Compute profiles: ``python -m sandbox.profile.target REQUEST.json``.

Like a GPU worker, it runs only trusted host code: it loads the candidate's cubin, allocates guarded
inputs and outputs at the requested sizes, generates the inputs from a seed, runs the resolved plan
``warmup`` times and then once more (the run ncu profiles), and writes its status as JSON to
``status_file``: ``ran``, ``launch_error`` or ``crashed``, with the error.
"""

from __future__ import annotations

import sys
from pathlib import Path


def run(req: dict) -> dict:
    from ..worker.harness import Harness, LaunchFailed, Poisoned, generate_into

    try:
        h = Harness(req["arch"], Path(req["harness_cubin"]).read_bytes())
        loaded = h.load(Path(req["cubin"]).read_bytes(), req["plan"])
        ins = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["inputs"]}
        outs = {s["name"]: h.alloc(s["dtype"], s["shape"]) for s in req["outputs"]}
        scratch = loaded.alloc_scratch()
        generate_into(h, ins, req["inputs"], req["seed"])
        arrays = {n: b.view for n, b in {**ins, **outs}.items()}
        h.sync()
        for _ in range(req["warmup"] + 1):
            loaded.launch(arrays, scratch)
        h.sync()
    except LaunchFailed as exc:
        return {"status": "launch_error", "error": str(exc)}
    except Poisoned as exc:
        return {"status": "crashed", "error": str(exc)}
    return {"status": "ran", "launches": (req["warmup"] + 1) * len(req["plan"]["launches"])}


if __name__ == "__main__":
    from ..worker.harness import serve_request

    sys.exit(serve_request(sys.argv[1:], run))
