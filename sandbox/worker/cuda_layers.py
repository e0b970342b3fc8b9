"""Which confinement layers CUDA can start under on this machine: ``python -m sandbox.worker.cuda_layers choose``.

The confined process that runs problem and solution code (sandbox.worker.problem_child) leaves the host's network
namespace and confines itself with Landlock before any of that code runs. On some machines a CUDA driver cannot
start inside a new user namespace, or needs a device file beyond ``/dev/nvidia*``; a solution judged on the GPU
there would crash at its first CUDA call, whatever it does. ``choose`` (run once per host process by
``sandbox.pytorch.confined``, where a GPU is present) starts CUDA in a child confined each way in turn, strongest
first (``ORDER``), and prints the first that works as JSON (``{"flag": "10", "note": ""}``):

1. a new network namespace, Landlock with the GPU's device files writable (the confinement everywhere else);
2. the same without the network namespace (TCP is then denied by Landlock alone, and sockets by what
   ``problem_child.confine`` adds);
3. and 4. the two above with every file under ``/dev`` writable (reading the rest of the machine stays denied).

The first under which CUDA starts is used, and the confinement record of every call says which it was. Where
none is, calls keep the strongest and a GPU call fails with the reason, never unconfined.
"""

from __future__ import annotations

import ctypes
import glob
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .problem_child import confine, flags, grants, leave_network

# What starting CUDA reads beyond a Python process's own folders: the driver's libraries and its files in /proc, /sys.
DRIVER_READ = ("/usr", "/lib", "/lib64", "/opt", "/etc/ld.so.cache", "/proc", "/sys")
# The layers tried, strongest first, as the flag the confined process takes: network namespace, whole /dev writable.
ORDER = ("10", "00", "11", "01")


def describe(flag: str) -> str:
    netns, whole_dev = flags([flag], 0)
    return ("a network namespace" if netns else "no network namespace") + (
        ", every file under /dev writable" if whole_dev else "")


def choose() -> dict:
    """The first flag of ``ORDER`` under which a confined child starts CUDA, and a note where it is not the first."""
    tried = []
    for flag in ORDER:
        try:
            with tempfile.TemporaryDirectory() as home:
                done = subprocess.run([sys.executable, "-m", "sandbox.worker.cuda_layers", flag, home],
                                      capture_output=True, text=True, timeout=120)
            lines = done.stdout.strip().splitlines()
            outcome = lines[-1] if lines else f"exited {done.returncode}: {done.stderr.strip()[-200:]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            outcome = f"the probe failed: {exc}"
        if outcome == "cuInit 0":
            note = f"CUDA starts here only with {describe(flag)} (tried first: {'; '.join(tried)})" if tried else ""
            return {"flag": flag, "note": note}
        tried.append(f"{describe(flag)}: {outcome}")
    return {"flag": ORDER[0], "note": "CUDA starts under no confinement tried here: " + "; ".join(tried)}


def main(argv: list[str]) -> None:
    """Start CUDA in this process confined as ``argv[1]`` says; print ``cuInit N`` or why it could not try."""
    if argv[1] == "choose":
        print(json.dumps(choose()))
        return
    netns, whole_dev = flags(argv, 1)
    if netns:
        why = leave_network()
        if why:
            print(f"no network namespace: {why}")
            return
    write = grants(sorted(glob.glob("/dev/nvidia*")), whole_dev)
    state = confine(Path(argv[2]), list(DRIVER_READ), write)   # a folder the caller removes
    if not state.get("landlock") and "Landlock unavailable" not in state.get("reason", ""):
        print(f"confinement failed: {state.get('reason')}")
        return
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        print(f"no CUDA driver: {exc}")
        return
    print(f"cuInit {int(lib.cuInit(0))}")


if __name__ == "__main__":
    main(sys.argv)
