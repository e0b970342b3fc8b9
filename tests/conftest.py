"""Test groups: CPU tests run everywhere; tests marked ``gpu`` need a CUDA device and skip cleanly without one;
tests marked ``slow`` (searches over many seeds, a resume after every event of a run) run only with ``--slow``
(CI runs them as a step of their own: ``python -m pytest -q --slow -m slow``)."""

from __future__ import annotations

import functools
import os

# One BLAS thread for the whole test process: its NumPy work is on small arrays, for which OpenBLAS's threads only
# wait for each other (the search's Gaussian-process model limits itself to one thread as well, in the product).
# Set before anything imports NumPy; worker subprocesses get a scrubbed environment of their own.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    """Probe in a child process, so the test process itself never creates a CUDA context."""
    probe = "import cupy; import sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 1)"
    try:
        return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--slow"):
        skip_slow = pytest.mark.skip(reason="slow test: run with --slow (CI runs them in a step of their own)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
    if any("gpu" in item.keywords for item in items) and not gpu_available():
        skip = pytest.mark.skip(reason="no CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _device_memory_handed_back(request):
    """After each GPU test, what the test process's own CuPy pool and PyTorch cache hold unused goes back to the
    device. A few GPU tests use the device in the test process (a comparison of 2**28 elements, an exported module
    run under PyTorch); one that needs more than half of the device's memory may follow them in the same run."""
    yield
    if "gpu" not in request.keywords:
        return
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()


@pytest.fixture(scope="session")
def compiled_kernels(tmp_path_factory) -> Path:
    """One folder of compiled kernels for the session's private caches, as a user's runs share theirs: entries are
    keyed by source, options, architecture and compiler version, so a kernel one test compiled is the same for
    the next; compiling every kernel again in each test's cache took minutes of the suite."""
    return tmp_path_factory.mktemp("cubins")


def private_cache(folder: Path, cubins: Path) -> Path:
    """A cache folder of its own (best-known kernels, device ceilings) whose compiled kernels are ``cubins``."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "cubins").is_symlink():   # a fixture and the test it serves may both ask for the same folder
        (folder / "cubins").symlink_to(cubins, target_is_directory=True)
    return folder


@pytest.fixture
def kw(tmp_path, compiled_kernels):
    """``kw("optimize", ...)`` runs the kernelwright CLI in a subprocess, as a user would: from the checkout,
    with no ``OPENAI_*`` variables and a private cache (its compiled kernels shared by the session). Keyword
    arguments add environment variables; ``kw.env`` is the environment it uses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    cache = private_cache(tmp_path / "cache", compiled_kernels)
    env.update(KERNELWRIGHT_CACHE_DIR=str(cache), COLUMNS="200")

    def run(*args, timeout=150, **extra_env):
        return subprocess.run([sys.executable, "-m", "agent", *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env={**env, **extra_env})
    run.env = env
    return run


@pytest.fixture(scope="session")
def kernelbench_task(tmp_path_factory):
    """``kernelbench_task("5_gemm_bias_gelu_scale")``: the task folder the importer writes for that problem of
    tests/fixtures/kernelbench, imported once per session (an import runs the problem under PyTorch: seconds each).
    Shared: a test that changes the task works on a copy. Skips without the torch extra."""
    pytest.importorskip("torch")
    from sandbox.pytorch.importer import import_problem

    folders: dict[str, Path] = {}

    def folder(stem: str) -> Path:
        if stem not in folders:
            source = ROOT / "tests" / "fixtures" / "kernelbench" / f"{stem}.py"
            folders[stem] = import_problem(source, tmp_path_factory.mktemp(stem)).folder
        return folders[stem]
    return folder
