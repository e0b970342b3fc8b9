"""Test groups: CPU tests run everywhere; tests marked ``gpu`` need a CUDA device and skip cleanly without one."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    """Probe in a child process, so the test process itself never creates a CUDA context."""
    probe = "import cupy; import sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 1)"
    try:
        return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not gpu_available():
        skip = pytest.mark.skip(reason="no CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
