"""CuPy kernels carried from worker to worker: only what trusted processes compiled reaches the seed."""

from __future__ import annotations

import pytest

from sandbox.host import kernel_cache
from sandbox.host.pool import WorkerProcess
from sandbox.wire import CheckTrials, DescribeDevice, HarnessCode, Impl, ScreenCandidate, Screen, Trial

HARNESS = HarnessCode("sm_90", b"harness code")
BASELINE, CANDIDATE = b"the task's baseline", b"someone else's kernel"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _check(cubin: bytes) -> CheckTrials:
    trial = Trial(label="check[0]", sizes={"n": 1}, plan={}, inputs=[], outputs=[], seed=1)
    return CheckTrials(harness=HARNESS, cubin=cubin, trials=[trial], data_dir="/nowhere", hash_seed=2)


def test_every_bytes_value_of_a_request_counts_as_code_however_deep():
    screen = Screen(setup_id=1, candidates=[ScreenCandidate(key=0, cubin=CANDIDATE, plan={"extra": [b"x"]})],
                    rounds=5, order_seed=3, min_rounds=3)
    assert sorted(kernel_cache.cubins(screen)) == sorted([CANDIDATE, b"x"])
    assert sorted(kernel_cache.cubins(_check(BASELINE))) == sorted([HARNESS.cubin, BASELINE])
    assert kernel_cache.cubins(DescribeDevice()) == []
    assert kernel_cache.cubins(Impl(task_folder="/t")) == []


def test_a_gpu_worker_stays_trusted_only_while_it_is_given_trusted_code(cache):
    worker = WorkerProcess("gpu", root=cache)
    worker.trust(HARNESS.cubin)
    worker._note_code(DescribeDevice())
    worker._note_code(_check(BASELINE))
    assert worker.tainted                                   # the baseline was not trusted yet
    worker.tainted = False
    worker.trust(BASELINE)
    worker._note_code(_check(BASELINE))
    assert not worker.tainted
    worker._note_code(_check(CANDIDATE))
    assert worker.tainted
    worker._note_code(_check(BASELINE))
    assert worker.tainted                                   # for the rest of the process's life
    reference = WorkerProcess("reference", root=cache)      # loads no code: bytes it gets are data
    reference._note_code(_check(CANDIDATE))
    assert not reference.tainted


def test_a_new_worker_starts_from_the_seed_and_only_a_trusted_one_adds_to_it(cache):
    seed = kernel_cache.seed()
    (seed / "known.cubin").write_bytes(b"compiled before")
    private = cache / "home" / "cache"                      # a worker's private cache folder
    private.mkdir(parents=True)
    assert kernel_cache.seed_into(private) == 1 and (private / "known.cubin").read_bytes() == b"compiled before"
    (private / "new.cubin").write_bytes(b"compiled now")
    (private / "tmpab12").write_bytes(b"half written")      # CuPy's temp file before its rename: not a kernel
    worker = WorkerProcess("gpu", root=cache)
    worker.home = cache / "home"                            # as if started
    worker.tainted = True
    worker._harvest()
    assert not (seed / "new.cubin").exists()                # a tainted worker's kernels never reach the seed
    worker.tainted = False
    worker._harvest()
    assert (seed / "new.cubin").read_bytes() == b"compiled now" and not (seed / "tmpab12").exists()
    assert kernel_cache.harvest(private) == 0               # nothing new


@pytest.mark.timeout(120)
def test_a_started_worker_has_the_seed_in_its_private_cache_and_a_fresh_trust(cache):
    (kernel_cache.seed() / "known.cubin").write_bytes(b"compiled before")
    worker = WorkerProcess("reference", root=cache)
    try:
        worker.tainted = True
        worker._start()
        assert (worker.home / "cache" / "known.cubin").read_bytes() == b"compiled before"
        assert not worker.tainted
    finally:
        worker.close()
