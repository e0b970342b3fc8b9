"""One entry to every sandbox kind: ``open_sandbox("auto" | "gpu" | "compile-only" | "fake", config)``."""

from __future__ import annotations

from .compile_only import CompileOnlySandbox
from .config import SANDBOX_KINDS, SandboxConfig
from .fake import FakeSandbox
from .gpu import GPUSandbox
from .pool import WorkerDied, WorkerTimeout


def open_sandbox(kind: str = "auto", config: SandboxConfig | None = None):
    """``gpu``, ``compile-only``, ``fake`` (real compiles, simulated runs) or ``auto`` (a GPU sandbox where a
    device answers, else compile-only). A ``gpu`` sandbox without a usable device is a RuntimeError."""
    if kind == "compile-only":
        return CompileOnlySandbox(config)
    if kind == "fake":
        return FakeSandbox(config)
    if kind == "gpu":
        return GPUSandbox(config)
    if kind != "auto":
        raise ValueError(f"unknown sandbox kind {kind!r} (expected {', '.join(SANDBOX_KINDS)})")
    try:
        return GPUSandbox(config)
    except (RuntimeError, WorkerDied, WorkerTimeout) as exc:
        box = CompileOnlySandbox(config)
        box.instead_of_gpu = (str(exc).strip().splitlines() or ["no CUDA device answered"])[0]
        return box
