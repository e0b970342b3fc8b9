"""Outputs handed from the GPU worker to the reference process as .npy files (small ones, or all where CUDA
IPC does not work between the workers): written straight into the file's memory map from a device array, read
back memory-mapped (empty arrays by a plain load)."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.worker.harness import save
from sandbox.worker.reference import _load


class DeviceLike:
    """Stands in for a CuPy array: ``get(out=...)`` copies into a given host array, as cupy.ndarray.get does."""

    def __init__(self, host: np.ndarray):
        self._host = host
        self.size, self.dtype, self.shape, self.flags = host.size, host.dtype, host.shape, host.flags
        self.nbytes = host.nbytes
        self.copied_into = None

    def get(self, out=None):
        if out is None:
            return self._host.copy()
        out[...] = self._host
        self.copied_into = out
        return out


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8"])
def test_a_device_array_is_written_into_the_files_memory_map_and_read_back_exactly(tmp_path, dtype):
    host = (np.arange(3 * 257) % 251).astype(dtype).reshape(3, 257)
    dev = DeviceLike(host)
    path = save(dev, tmp_path / "out.npy")
    assert isinstance(dev.copied_into, np.memmap)  # the direct path, not a temporary host array
    back = _load(path)
    assert isinstance(back, np.memmap) and back.dtype == host.dtype and np.array_equal(back, host)
    assert np.array_equal(np.load(path), host)  # an ordinary .npy file


def test_host_arrays_and_empty_arrays_are_saved_and_loaded_too(tmp_path):
    host = np.linspace(0, 1, 10, dtype=np.float64)
    assert np.array_equal(_load(save(host, tmp_path / "h.npy")), host)
    empty = DeviceLike(np.zeros((0, 4), dtype=np.float32))
    back = _load(save(empty, tmp_path / "e.npy"))
    assert back.shape == (0, 4) and empty.copied_into is None


def test_small_outputs_and_outputs_without_ipc_are_handed_over_as_files(tmp_path):
    from sandbox.worker.harness import IPC_MIN_BYTES, hand_over

    small = DeviceLike(np.ones(16, dtype=np.float32))
    assert hand_over(None, small, tmp_path / "s.npy", ipc=True) == str(tmp_path / "s.npy")
    large = DeviceLike(np.ones(IPC_MIN_BYTES // 4, dtype=np.float32))
    assert hand_over(None, large, tmp_path / "l.npy", ipc=False) == str(tmp_path / "l.npy")
    assert np.array_equal(np.load(tmp_path / "l.npy"), np.ones(IPC_MIN_BYTES // 4, dtype=np.float32))
