"""NVRTC compilation through NVIDIA's ``cuda-bindings``: no GPU or driver needed.

``compile_source`` turns a candidate into a cubin plus a per-kernel resource report parsed from
ptxas' verbose output. Results are cached by content (source, options, arch, NVRTC version,
kernel names); the cubin's own hash lets callers drop duplicates that compile to the same binary.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import time
from functools import lru_cache
from pathlib import Path

from ..judging.result import CompileInfo, KernelResources
from ..plumbing.files import atomic_write, cache_dir
from . import approx_ptx
from .candidate import Candidate
from .cubin import code_hash, kernel_params

DEFAULT_ARCH = "sm_90"
BASE_OPTIONS = ("-std=c++17", "--ptxas-options=-v", "-lineinfo")
LOG_LIMIT = 20_000


MISSING_NVRTC = ("NVRTC is not installed (no cuda-bindings): pip install \"kernelwright[cuda13]\" for a CUDA 13 driver "
                 "or \"kernelwright[cuda12]\" for a CUDA 12 one (from a checkout: pip install -e \".[cuda13]\")")


def _nvrtc_module():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise RuntimeError(MISSING_NVRTC) from None
    return nvrtc


@lru_cache(maxsize=1)
def nvrtc_version() -> str:
    nvrtc = _nvrtc_module()
    err, major, minor = nvrtc.nvrtcVersion()
    _check(err, "nvrtcVersion")
    return f"{major}.{minor}"


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """Folders holding the CUDA headers that candidates may include (pip wheels first, then CUDA_HOME)."""
    roots: list[Path] = []
    try:
        import nvidia

        for base in nvidia.__path__:
            roots += sorted(Path(base).glob("cu*/include"))
    except ImportError:
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            roots.append(Path(os.environ[env]) / "include")
    roots.append(Path("/usr/local/cuda/include"))
    wanted = ("cuda_fp16.h", "crt/mma.h", "nv/target", "cuda/std/type_traits")  # the last: cooperative groups, cuda/barrier
    found: list[str] = []
    for header in wanted:
        for root in roots:
            hit = next((d for d in (root, root / "cccl") if (d / header).is_file()), None)
            if hit:
                if str(hit) not in found:
                    found.append(str(hit))
                break
    return tuple(found)


def _check(err, what: str) -> None:
    nvrtc = _nvrtc_module()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")


def build_options(candidate: Candidate, arch: str) -> list[str]:
    opts = [f"-arch={arch}", *BASE_OPTIONS, *candidate.flags]
    opts += [f"-D{k}={v}" for k, v in sorted(candidate.defines().items())]
    opts += [f"-I{d}" for d in include_dirs()]
    return opts


def cache_key(source: str, options: list[str], arch: str, names: list[str]) -> str:
    h = hashlib.sha256()
    portable = [o for o in options if not o.startswith("-I")]  # header paths differ per machine
    for part in (source, "\0".join(portable), arch, nvrtc_version(), "\0".join(names)):
        h.update(part.encode("utf-8", "surrogatepass") + b"\x01")  # a lone surrogate hashes too
    return h.hexdigest()


def compile_source(candidate: Candidate, arch: str = DEFAULT_ARCH, use_cache: bool = True) -> tuple[CompileInfo, bytes | None]:
    """Compile ``candidate``; returns (info, cubin). A compile error is a value: ``info.ok`` is False."""
    options = build_options(candidate, arch)
    # Name expressions are not macro-expanded by NVRTC: write knob values into template arguments.
    expanded = {launch.kernel: expand_names(launch.kernel, candidate.defines()) for launch in candidate.launches}
    names = sorted(set(expanded.values()))
    key = cache_key(candidate.source, options, arch, names)
    entry = cache_dir() / "cubins" / key[:2] / key
    cached = read_entry(entry) if use_cache else None
    if cached is not None:
        info, cubin = cached
        # an entry written before the PTX was read (no ``approx``) or traced is compiled again
        read = info.approx is not None and (not info.approx or info.approx_traced is not None or info.trace_error)
        if not info.ok or (read and cubin and hashlib.sha256(cubin).hexdigest() == info.cubin_sha256):
            update = {"cached": True, "code_hash": info.code_hash or (code_hash(cubin) if cubin else None),
                      "params": info.params or (_params(info.lowered_names, cubin) if cubin else {})}
            return info.model_copy(update=update), cubin
    info, cubin = nvrtc_compile(candidate.source, options, arch, names)
    if info.ok:
        info.lowered_names = {k: info.lowered_names[v] for k, v in expanded.items()}
        back = {v: k for k, v in expanded.items()}
        info.kernels = {back.get(n, n): r.model_copy(update={"name": back.get(n, n)}) for n, r in info.kernels.items()}
        info.params = _params(info.lowered_names, cubin)
        info.approx = [a.model_copy(update={"function": back.get(a.function, a.function)}) for a in info.approx or []]
        if info.approx_traced is not None:
            info.approx_traced = [a.model_copy(update={"function": back.get(a.function, a.function)})
                                  for a in info.approx_traced]
    if use_cache:
        write_entry(entry, info, cubin)
    return info, cubin


def write_entry(entry: Path, info: CompileInfo, cubin: bytes | None) -> None:
    """A compile kept under ``entry`` (a path without suffix): the cubin first, then the report, so that where the
    report is, the cubin is whole (``read_entry``)."""
    if cubin is not None:
        atomic_write(entry.with_suffix(".cubin"), cubin)
    atomic_write(entry.with_suffix(".json"), info.model_dump_json())


def read_entry(entry: Path) -> tuple[CompileInfo, bytes | None] | None:
    """A cache entry, or None where there is none or it cannot be read (torn, or written by another version of
    kernelwright whose record has other fields): such an entry is compiled again and overwritten."""
    try:
        info = CompileInfo.model_validate_json(entry.with_suffix(".json").read_text())
        return info, (entry.with_suffix(".cubin").read_bytes() if info.ok else None)
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def _params(lowered: dict[str, str], cubin: bytes) -> dict[str, list[int]]:
    """Each plan kernel's parameter sizes, from the cubin (absent where it cannot be read)."""
    try:
        by_lowered = kernel_params(cubin)
    except (ValueError, struct.error, IndexError):
        return {}
    return {name: by_lowered[low] for name, low in lowered.items() if low in by_lowered}


def expand_names(name: str, defines: dict[str, int]) -> str:
    """A kernel name (``name<BLOCK, 4>``) with the knobs' values in place of their macro names."""
    return re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", lambda m: str(defines.get(m.group(0), m.group(0))), name)


def nvrtc_compile(source: str, options: list[str], arch: str, names: list[str]) -> tuple[CompileInfo, bytes | None]:
    """One NVRTC compile of ``source`` with ``options`` for ``arch``, uncached: its report and cubin (None when it
    failed), and the lowered names of ``names``. ``compile_source`` is the cached road for candidates."""
    nvrtc = _nvrtc_module()
    t0 = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode("utf-8", "backslashreplace"), b"candidate.cu", 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        for name in names:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, name.encode())
            _check(err, "nvrtcAddNameExpression")
        encoded = [o.encode() for o in options]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        # NVRTC writes into the buffer it is given: a fresh bytearray, never a bytes object (``b" " * 1`` is
        # CPython's shared one-byte b" ", and a compile with an empty log would turn it into b"\0" for the
        # whole process: every later b" ".decode() gives "\0", which broke importing torch after a compile).
        buf = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = bytes(buf).rstrip(b"\0 ").decode(errors="replace")
        base = dict(arch=arch, nvrtc_version=nvrtc_version(), options=options, seconds=time.perf_counter() - t0)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return CompileInfo(ok=False, log=_trim(log), **base), None
        lowered = {}
        for name in names:
            err, low = nvrtc.nvrtcGetLoweredName(prog, name.encode())
            _check(err, "nvrtcGetLoweredName")
            lowered[name] = low.decode()
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize")
        buf = bytearray(size)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, buf)
        _check(err, "nvrtcGetCUBIN")
        cubin = bytes(buf)
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        _check(err, "nvrtcGetPTXSize")
        buf = bytearray(size)
        (err,) = nvrtc.nvrtcGetPTX(prog, buf)
        _check(err, "nvrtcGetPTX")
        approx = approx_ptx.scan(bytes(buf).rstrip(b"\0").decode(errors="replace"))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    kernels, gmem = parse_ptxas(log)
    by_lowered = {v: k for k, v in lowered.items()}
    approx = [a.model_copy(update={"function": by_lowered.get(a.function, a.function)}) for a in approx]
    traced, trace_error = trace_approx(source, options, arch) if approx else (None, "")
    if traced is not None:
        traced = [a.model_copy(update={"function": by_lowered.get(a.function, a.function)}) for a in traced]
    kernels = {by_lowered.get(k, k): r.model_copy(update={"name": by_lowered.get(k, k)}) for k, r in kernels.items()}
    info = CompileInfo(ok=True, log=_trim(log), cubin_sha256=hashlib.sha256(cubin).hexdigest(),
                       code_hash=code_hash(cubin), global_bytes=gmem, kernels=kernels, lowered_names=lowered, approx=approx,
                       approx_traced=traced, trace_error=trace_error, **base)
    info.seconds = time.perf_counter() - t0
    return info, cubin


TRACE_OPTIONS = ("-G", "-U__CUDACC_DEBUG__")   # every function apart, and nothing in the source can tell


def trace_approx(source: str, options: list[str], arch: str) -> tuple[list | None, str]:
    """The approximate instructions of ``source`` traced to the functions that hold them (``approx_ptx.trace``), by
    a second compile that keeps every function apart, to PTX only; (None, why) where that compile fails."""
    nvrtc = _nvrtc_module()
    virtual = arch.replace("sm_", "compute_")
    opts = [o for o in options if not o.startswith(("-arch=", "--ptxas-options", "-lineinfo"))]
    encoded = [o.encode() for o in (f"-arch={virtual}", *opts, *TRACE_OPTIONS)]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"candidate.cu", 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            err, size = nvrtc.nvrtcGetProgramLogSize(prog)
            buf = bytearray(size)
            nvrtc.nvrtcGetProgramLog(prog, buf)
            first = bytes(buf).rstrip(b"\0 ").decode(errors="replace").strip().splitlines()[:1]
            return None, f"the compile that traces approximate instructions failed: {first[0] if first else status}"
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        _check(err, "nvrtcGetPTXSize")
        buf = bytearray(size)
        (err,) = nvrtc.nvrtcGetPTX(prog, buf)
        _check(err, "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return approx_ptx.trace(bytes(buf).rstrip(b"\0").decode(errors="replace")), ""


def _trim(log: str) -> str:
    return log if len(log) <= LOG_LIMIT else log[:LOG_LIMIT] + f"\n... [{len(log) - LOG_LIMIT} more characters]"


_NOTE = re.compile(r"^(\S.*\(\d+\): )?note #\d+(-D)?:", re.I)


def condense_log(log: str, notes_per_error: int = 3) -> str:
    """The compiler's log with at most ``notes_per_error`` notes after each error (an overload error lists
    every candidate function it tried: dozens of lines that hide the next error), and a count of the rest."""
    out: list[str] = []
    dropped = kept = 0
    in_note = False
    for line in log.splitlines():
        if _NOTE.match(line):
            in_note = kept >= notes_per_error
            if in_note:
                dropped += 1
            else:
                kept += 1
                out.append(line)
            continue
        if in_note and line.startswith((" ", "\t")):
            continue  # the dropped note's source line and caret
        in_note = False
        if dropped:
            out.append(f"... [{dropped} more notes like these]")
            dropped = 0
        if not line.startswith((" ", "\t")):
            kept = 0
        out.append(line)
    if dropped:
        out.append(f"... [{dropped} more notes like these]")
    return "\n".join(out)


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_GMEM = re.compile(r"ptxas info\s*:\s*(\d+) bytes gmem")


def parse_ptxas(log: str) -> tuple[dict[str, KernelResources], int]:
    """Per-kernel registers, spills, stack, shared and constant memory from ``ptxas -v`` text."""
    kernels: dict[str, KernelResources] = {}
    current: str | None = None
    gmem = 0
    for line in log.splitlines():
        if m := _GMEM.search(line):
            gmem += int(m.group(1))
        if m := _ENTRY.search(line):
            current = m.group(1)
            kernels[current] = KernelResources(name=current)
            continue
        if current is None:
            continue
        k = kernels[current]
        if m := _PROPS.search(line):
            k.stack_frame, k.spill_stores, k.spill_loads = (int(x) for x in m.groups())
        elif m := _USED.search(line):
            k.registers = int(m.group(1))
            rest = m.group(2)
            if b := re.search(r"used (\d+) barriers", rest):
                k.barriers = int(b.group(1))
            if s := re.search(r"(\d+) bytes smem", rest):
                k.static_shared = int(s.group(1))
            k.constant = sum(int(c) for c in re.findall(r"(\d+) bytes cmem\[\d+\]", rest))
    return kernels, gmem
