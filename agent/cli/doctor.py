"""``kernelwright doctor``: what this machine has (CUDA extra, NVRTC, headers, CuPy, GPU, driver, ncu,
compute-sanitizer, Kernel Tuner) and what each part enables."""

from __future__ import annotations

import json
import subprocess

from .app import app, console
from .exits import epilog
from .options import json_flag
from .tables import Col, fit

DoctorJson = json_flag("Print the rows as JSON instead of a table.")
EXTRA_HINT = 'pip install -e ".[cuda13]" (CUDA 13 driver) or -e ".[cuda12]" (CUDA 12 driver)'


def _tool_version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


def _extra_row() -> tuple[str, str, str]:
    from sandbox.plumbing.envinfo import cuda_extra

    x = cuda_extra()
    enables = "NVRTC, CUDA headers and CuPy for one CUDA major version"
    if not x["active"]:
        return "CUDA extra", f"none installed: {EXTRA_HINT}", enables
    parts = ", ".join(f"{d} {v}" for d, v in x["installed"].get(x["active"], {}).items())
    status = f"{x['active']} active (cuda-bindings {x['cuda_bindings']}" + (f", {parts})" if parts else ")")
    others = sorted(set(x["installed"]) - {x["active"]})
    if others:
        status += f"; {', '.join(others)} also installed: keep one extra"
    if x["cupy"] and x["cupy"] != x["active"]:
        status += f"; CuPy is for {x['cupy']}: candidates would compile with one CUDA and run with the other"
    return "CUDA extra", status, enables


def _confinement_row() -> tuple[str, str, str]:
    """Whether the compile worker could confine itself (Landlock), asked of a compile worker."""
    from sandbox import confinement

    state = confinement()
    if state.confined:
        sockets = "; no sockets (seccomp)" if state.seccomp else ""
        return ("compile confinement",
                f"Landlock ABI {state.landlock_abi}: reads only CUDA headers, Python, libraries{sockets}",
                "an #include that the source filter missed cannot read a host file")
    return ("compile confinement", f"none ({state.reason})", "the source filter alone keeps host files out")


def _problem_confinement_row() -> tuple[str, str, str]:
    """The layers a problem's (or a solution's) Python code runs under, as a probe process applied them."""
    import sys

    try:
        out = subprocess.run([sys.executable, "-m", "sandbox.worker.problem_child", "--layers"], capture_output=True,
                             text=True, timeout=60)
        state = json.loads(out.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return "problem confinement", f"unknown (the probe failed: {exc})", "-"
    parts = [f"network: {state.get('network', '?')}"]
    parts.append(f"Landlock ABI {state['landlock_abi']} ({', '.join(state.get('landlock_covers', []))})"
                 if state.get("landlock") else f"no Landlock ({state.get('reason', '?')})")
    parts.append("seccomp: no sockets, ptrace or io_uring" if state.get("seccomp")
                 else f"no seccomp ({state.get('seccomp_reason', '?')})")
    return ("problem confinement", "; ".join(parts),
            "PyTorch problem code cannot reach keys, files, sockets (Unix pathname ones included) or other processes")


def _modelnew_row() -> tuple[str, str, str]:
    """What building a ModelNew solution (load_inline / load) needs: nvcc, ninja and a host C++ compiler."""
    from sandbox.pytorch.modelnew import toolchain

    found = toolchain()
    missing = [name for name, path in found.items() if path is None]
    status = "; ".join(f"{name} {path or 'missing'}" for name, path in found.items())
    if missing:
        status += (f" (missing: {', '.join(missing)}; pip install ninja gives ninja, the CUDA toolkit nvcc, the system "
                   "package g++ a host compiler)")
    return ("ModelNew toolchain", status, "kernelwright judge of KernelBench-format solutions that build CUDA with "
                                         "load_inline (without it: their builds are compile errors)")


def _gpu_rows() -> list[tuple[str, str, str]]:
    from sandbox import NoDevice, probe_device

    try:
        d = probe_device()
    except NoDevice as exc:
        from .app import device_problem

        return [("GPU", f"none ({device_problem(str(exc))[:120]})",
                 "without one: tasks, check-task, compile, compile-only runs and --sandbox fake "
                 "(eval, optimize)")]
    return [("GPU", f"{d['gpu']} ({d['arch']}, {d['sms']} SMs, {d['memory_bytes'] / 2**30:.0f} GiB, "
                    f"L2 {d['l2_bytes'] >> 20} MiB)", "correctness checks, timing, eval, optimize with measurements"),
            ("driver", f"{d.get('driver')} (CUDA driver API {d['cuda_driver_api']})", "loads the cubins NVRTC makes"),
            ("CUDA runtime", d["cuda_runtime"], "CuPy's runtime")]


def rows() -> list[dict]:
    """Every component: what was found, and what it enables."""
    from sandbox.candidates.compiler import include_dirs, nvrtc_version
    from sandbox.plumbing.envinfo import installed_version, software
    from sandbox.host.sanitizer import find_sanitizer
    from sandbox.profile.ncu import find_ncu

    sw = software()
    out = [("Python", sw["python"], "runs kernelwright"), _extra_row()]
    try:
        nvrtc = nvrtc_version()
        heads = include_dirs()
        out.append(("NVRTC", f"found {nvrtc}", "compile checks and resource reports, with or without a GPU"))
        out.append(("CUDA headers", ", ".join(heads) if heads else "missing",
                    "cuda_fp16.h, mma.h, cooperative groups in candidates"))
    except Exception as exc:
        out.append(("NVRTC", f"missing ({type(exc).__name__}: {exc})", f"nothing compiles: {EXTRA_HINT}"))
    out.append(("CuPy", sw["cupy"] or "missing", "runs candidates, references and vendor libraries on the GPU"))
    out += _gpu_rows()
    ncu = find_ncu()
    out.append(("ncu", (_tool_version([ncu, "--version"]) or "found") if ncu else "missing",
                "profiler counters and diagnoses in prompts (without it: timing and resources only)"))
    san = find_sanitizer()
    out.append(("compute-sanitizer", (_tool_version([san, "--version"]) or "found") if san else "missing",
                "memcheck and racecheck of each run's winner before it is declared (without it: 'not sanitized')"))
    out.append(_confinement_row())
    out.append(_problem_confinement_row())
    out.append(_modelnew_row())
    for component, dist, extra, enables in (
            ("Kernel Tuner", "kernel_tuner", "kerneltuner", "its search strategies beside ours in bench/tuner.py --kernel-tuner"),
            ("PyTorch", "torch", "torch", "kernelwright import of PyTorch problems, their float64 references, eager and "
                                          "torch.compile baselines, export --torch"),
            ("Ray", "ray", "ray", "optimize and batch --ray: evaluations spread over a cluster's GPUs, one sandbox actor "
                                  "per GPU")):
        out.append((component, installed_version(dist) or f'missing (optional: pip install -e ".[{extra}]")', enables))
    return [dict(component=c, status=s, enables=e) for c, s, e in out]



@app.command(epilog=epilog(OK="always: the table says what is missing and what that costs"))
def doctor(as_json: DoctorJson = False):
    """Say what this machine has (CUDA extra, GPU, driver, NVRTC, CuPy, ncu, compute-sanitizer, confinement) and what
    each enables."""
    found = rows()
    if as_json:
        print(json.dumps(found, indent=2))
        return
    cols = [Col("component"), Col("status", wrap=True), Col("what it enables", wrap=True)]
    console.print(fit(cols, [[r["component"], r["status"], r["enables"]] for r in found], console.width,
                      title="kernelwright doctor"))
