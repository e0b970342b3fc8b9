"""The environment fingerprint: which GPU, driver, runtime and compiler produced a number.

Runs inside a GPU worker (device queries) or anywhere (software versions). NVML supplies clocks;
where it is missing the clocks are absent, never guessed.
"""

from __future__ import annotations

import platform
import statistics
import sys
from importlib import metadata

from ..judging.environment import READINGS



def installed_version(dist: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def software() -> dict:
    from ..candidates.compiler import nvrtc_version

    cupy = next((v for v in map(installed_version, ("cupy-cuda13x", "cupy-cuda12x", "cupy")) if v), None)
    try:
        nvrtc = nvrtc_version()
    except Exception as exc:  # NVRTC missing is reported, not fatal
        nvrtc = f"unavailable ({type(exc).__name__})"
    return {"python": platform.python_version(), "kernelwright": installed_version("kernelwright") or "checkout",
            "nvrtc": nvrtc, "cupy": cupy, "cuda_bindings": installed_version("cuda-bindings"), "host": platform.node(),
            "platform": sys.platform}


# What each of kernelwright's CUDA extras installs that tells them apart (pyproject.toml: cuda12, cuda13).
EXTRAS = {"cuda13": ("cupy-cuda13x", "nvidia-cuda-nvrtc"), "cuda12": ("cupy-cuda12x", "nvidia-cuda-nvrtc-cu12")}


def cuda_extra() -> dict:
    """Which CUDA extra is installed and active: ``active`` is the CUDA major of ``cuda-bindings`` (the NVRTC that
    compiles), ``cupy`` the CUDA major of the installed CuPy; ``installed`` lists each extra with its packages."""
    installed = {}
    for extra, dists in EXTRAS.items():
        found = {d: v for d in dists if (v := installed_version(d))}
        if extra == "cuda13" and not (found.get("nvidia-cuda-nvrtc") or "").startswith("13"):
            found.pop("nvidia-cuda-nvrtc", None)
        if found:
            installed[extra] = found
    bindings = installed_version("cuda-bindings")
    active = f"cuda{bindings.split('.')[0]}" if bindings else None
    cupy = "cuda13" if installed_version("cupy-cuda13x") else "cuda12" if installed_version("cupy-cuda12x") else None
    return {"active": active, "cuda_bindings": bindings, "cupy": cupy, "installed": installed}


def device_info() -> dict:
    """Static facts about the current CUDA device (call only in a GPU worker)."""
    import cupy as cp

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    uuid = props.get("uuid")
    if isinstance(uuid, bytes):
        uuid = uuid.hex()
    attrs = dev.attributes
    info = {
        "gpu": name,
        "uuid": uuid,
        "pci_bus_id": dev.pci_bus_id,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "arch": f"sm_{props['major']}{props['minor']}",
        "sms": int(attrs["MultiProcessorCount"]),
        "l2_bytes": int(attrs["L2CacheSize"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "shared_per_block_optin": int(attrs.get("MaxSharedMemoryPerBlockOptin", 0)),
        "shared_per_sm": int(attrs.get("MaxSharedMemoryPerMultiprocessor", 0)),
        "max_clock_mhz": int(attrs["ClockRate"]) // 1000 if "ClockRate" in attrs else None,
        "driver": _driver_version(),
        "cuda_driver_api": _fmt(cp.cuda.runtime.driverGetVersion()),
        "cuda_runtime": _fmt(cp.cuda.runtime.runtimeGetVersion()),
        **software(),
    }
    info["clocks_at_start"] = clocks()  # an idle GPU's: what timing ran at is ClockSampler's
    return info


def _fmt(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _nvml_handle():
    import pynvml
    import cupy as cp

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByPciBusId(cp.cuda.Device().pci_bus_id)


def _driver_version() -> str | None:
    try:
        pynvml, _ = _nvml_handle()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        return None


def _read(pynvml, h) -> dict:
    return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": round(pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 1)}


def clocks() -> dict:
    """Current SM and memory clocks, temperature and power (NVML); empty where NVML is unavailable."""
    try:
        return _read(*_nvml_handle())
    except Exception:
        return {}


class ClockSampler:
    """The clocks, temperature and power read through NVML after each timed launch, so that a result says what
    its timed rounds ran at (a worker's start finds an idle GPU: 345 MHz where the rounds ran at 1980)."""

    def __init__(self):
        try:
            self._nvml = _nvml_handle()
        except Exception:
            self._nvml = None
        self.readings: dict[str, list[float]] = {k: [] for k in READINGS}

    def sample(self) -> None:
        if self._nvml is None:
            return
        try:
            for key, value in _read(*self._nvml).items():
                self.readings[key].append(value)
        except Exception:  # NVML stopped answering: the readings taken stand
            self._nvml = None

    def summary(self) -> dict:
        """{reading: {median, min, max, samples}} for every reading taken; empty without NVML."""
        return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "samples": len(v)}
                for k, v in self.readings.items() if v}
