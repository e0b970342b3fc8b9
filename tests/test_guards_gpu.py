"""The harness kernels that guard a measurement, on a real device: the agreement test finds what its NumPy
definition finds (every dtype, non-finite values, odd sizes), masks hide and restore a stored output, the L2
flush reads what it claims."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sandbox.judging import agreement as ag

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device():
    import cupy as cp

    from sandbox.host.gpu import compile_harness
    from sandbox.worker.harness import Harness

    major, minor = cp.cuda.Device().compute_capability[0], cp.cuda.Device().compute_capability[1:]
    arch = f"sm_{major}{minor}"
    cubin, lowered = compile_harness(arch)
    return cp, Harness(arch, cubin, lowered)


CASES = [("float32", 1e-6, 1e-5), ("float16", 1e-2, 1e-3), ("float64", 0.0, 1e-12), ("int32", 0, 0),
         ("int64", 0, 0), ("uint8", 0, 0), ("int8", 1, 0), ("uint32", 0, 0)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype,atol,rtol", CASES)
@pytest.mark.parametrize("n", [1, 7, 1001, 1 << 20])
def test_the_device_test_finds_what_its_numpy_definition_finds(device, dtype, atol, rtol, n):
    cp, h = device
    rng = np.random.default_rng(n)
    if np.dtype(dtype).kind == "f":
        b = rng.normal(0, 3, n).astype(dtype)
        if n > 10:
            b[[1, 3, 5]] = [np.nan, np.inf, -np.inf]
        c = (b.astype(np.float64) * (1 + rtol * rng.uniform(-0.9, 0.9, n))).astype(dtype)
    else:
        info = np.iinfo(dtype)
        b = rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(dtype)
        c = b.copy()
    wrong = c.copy()
    wrong[n // 2] = wrong[n // 2] + np.array(7, dtype=dtype)
    test = h.agreement
    keys = test.new_keys()
    masked = cp.asarray(b)
    test.mask(masked, keys)
    assert n < 8 or not bool(cp.array_equal(masked, cp.asarray(b), equal_nan=True)), "the mask changed nothing"
    for cand in (c, wrong):
        key = random.getrandbits(64)
        got = test.agree(cp.asarray(cand), masked, keys, atol, rtol, key)
        want = ag.agree(np, cand, b, atol, rtol, key)
        assert (got.violations, got.first) == (want.violations, want.first)
        assert got.sum_t2 == pytest.approx(want.sum_t2, rel=1e-9, abs=1e-300)
        assert got.sums == pytest.approx(want.sums, rel=1e-9, abs=1e-9 * (1 + np.sqrt(want.sum_t2)))
    assert test.unmasked(masked, keys, n // 2) == pytest.approx(b[n // 2].item(), nan_ok=True)
    test.mask(masked, keys)
    assert bool(cp.array_equal(masked, cp.asarray(b), equal_nan=True)), "masking twice must restore the output"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8", "float64"])
def test_the_device_test_reads_an_output_at_any_alignment_as_its_numpy_definition(device, dtype):
    """The whole buffer (its last 8-byte word partial) and a view one element into it (not 8-byte aligned where an
    element is smaller) both give what the NumPy definition gives; a mask on the view hides and restores it."""
    cp, h = device
    n = 4099
    rng = np.random.default_rng(3)
    exact_bits = np.dtype(dtype).kind == "u"
    atol, rtol = (0, 0) if exact_bits else (1e-3, 1e-3)
    base = (rng.integers(0, 255, n + 1) if exact_bits else rng.normal(0, 3, n + 1)).astype(dtype)
    test = h.agreement
    for offset in (0, 1):
        b = base[offset:n]
        wrong = b.copy()
        wrong[-1] = wrong[-1] + np.array(7, dtype=dtype)   # the last element: a partial word
        masked = cp.asarray(base)[offset:n]
        cand = cp.zeros(n + 1, dtype=dtype)[offset:n]
        keys = test.new_keys()
        test.mask(masked, keys)
        for c in (b, wrong):
            cand[...] = cp.asarray(c)
            key = random.getrandbits(64)
            got = test.agree(cand, masked, keys, atol, rtol, key)
            want = ag.agree(np, c, b, atol, rtol, key)
            assert (got.violations, got.first) == (want.violations, want.first), (offset, got, want)
            assert got.sum_t2 == pytest.approx(want.sum_t2, rel=1e-9, abs=1e-300)
            assert got.sums == pytest.approx(want.sums, rel=1e-9, abs=1e-9 * (1 + np.sqrt(want.sum_t2)))
        assert test.unmasked(masked, keys, len(b) - 1) == b[-1].item()
        test.mask(masked, keys)
        assert bool(cp.array_equal(masked, cp.asarray(b))), "masking twice must restore the output"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dtype,atol,rtol", [("float32", 1e-6, 1e-5), ("float16", 1e-2, 1e-3), ("int32", 0, 0)])
def test_an_output_is_compared_again_unless_it_repeats_one_compared_under_the_same_seal(device, dtype, atol, rtol):
    """With ``Repeats``, an output that is bit for bit the last one compared under them is not compared again, and
    nothing else is let through: a changed element, an output left from before another baseline output was stored
    (new ``Repeats``), seals copied from those or written by hand, a timed launch's (no ``Repeats``). An output
    that failed is sealed too (the stage ends at it, so what repeats it later is never the verdict)."""
    cp, h = device
    n = 1 << 16
    rng = np.random.default_rng(11)
    b = (rng.integers(-1000, 1000, n) if dtype == "int32" else rng.normal(0, 3, n)).astype(dtype)
    test = h.agreement
    keys = test.new_keys()
    masked = cp.asarray(b)
    test.mask(masked, keys)
    good, wrong = cp.asarray(b), cp.asarray(b)
    wrong[n // 3] += 7

    def check(c, reps):
        return test.agree(c, masked, keys, atol, rtol, random.getrandbits(64), reps)

    reps = test.repeats()
    first = check(good, reps)
    assert not first.repeated and first.verdict() == "" and first.sum_t2 >= 0
    again = check(good.copy(), reps)          # the same bits in another buffer
    assert again.repeated and again.verdict() == "" and again.violations == 0
    bad = check(wrong, reps)
    assert not bad.repeated and bad.violations == 1 and bad.first == n // 3
    assert check(wrong, reps).repeated        # sealed although it failed: the stage ended at the one before
    assert not check(good, reps).repeated     # the seal is the last output's
    assert check(good, reps).repeated
    timed = check(good, None)                 # a timed launch's output: no Repeats
    assert not timed.repeated and timed.verdict() == ""

    fresh = test.repeats()                    # another stored baseline output: nothing carries over
    assert not check(good, fresh).repeated
    old = test.repeats()
    check(good, old)
    forged = test.repeats()
    forged.seen[...] = old.seen               # the words of another seal, copied
    assert not check(good, forged).repeated
    forged.seen[1] = forged.seen[0]           # a seal written by hand
    assert not check(good, forged).repeated
    assert check(good, forged).repeated       # once compared, sealed under its own keys


@pytest.mark.timeout(60)
def test_an_output_of_part_words_is_compared_every_time(device):
    """An output that cannot be hashed as whole 4-byte words in place (an odd count of float16 values) is compared
    in full at every launch: never ``repeated``."""
    cp, h = device
    b = np.linspace(-3, 3, 1001).astype(np.float16)
    test = h.agreement
    keys = test.new_keys()
    masked = cp.asarray(b)
    test.mask(masked, keys)
    reps = test.repeats()
    for _ in range(3):
        found = test.agree(cp.asarray(b), masked, keys, 1e-2, 1e-3, random.getrandbits(64), reps)
        assert not found.repeated and found.verdict() == ""


def _hash_definition(words: np.ndarray, seed: int) -> int:
    """The input hash's definition in NumPy: 32-bit words taken two at a time as 8-byte units (an odd count's last
    word alone), sum over j of mix64(mix64(j ^ seed) + u_j), modulo 2^64."""
    w = words.astype(np.uint64)
    if w.size % 2:
        w = np.append(w, np.uint64(0))
    units = w[0::2] | (w[1::2] << np.uint64(32))
    j = np.arange(units.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        terms = ag.mix64(np, ag.mix64(np, j ^ np.uint64(seed)) + units)
    return int(terms.sum(dtype=np.uint64))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 1001, (1 << 20) + 3])
def test_the_input_hash_is_its_definition_at_any_alignment_and_grid(device, count):
    """The hash of a buffer's words is the NumPy definition's, whether the words start 16-byte aligned or 4, 8 or 12
    bytes past it, and whatever the grid; a one-bit change in the first, the second or the last word changes it."""
    cp, h = device
    rng = np.random.default_rng(count)
    words = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    want = _hash_definition(words, 99)
    kernel = h.function("hash_words")
    for shift in (0, 1, 2, 3):
        room = cp.zeros(count + 4, dtype=cp.uint32)
        view = room[shift: shift + count]
        view[...] = cp.asarray(words)
        for grid in (1, 7, 1056):
            out = cp.zeros(1, dtype=cp.uint64)
            kernel((grid,), (256,), (view, np.int64(count), np.uint64(99), out), stream=h.stream)
            h.sync()
            assert int(out.get()[0]) == want, (shift, grid)
    assert int(h.hash_array(cp.asarray(words), 99).get()[0]) == want
    assert int(h.hash_array(cp.asarray(words), 100).get()[0]) != want
    for at in sorted({0, min(1, count - 1), count - 1}):
        changed = words.copy()
        changed[at] ^= np.uint32(1 << 31)
        assert int(h.hash_array(cp.asarray(changed), 99).get()[0]) != want, at


@pytest.mark.timeout(120)
def test_the_l2_flush_reads_twice_the_l2_and_writes_nothing(device):
    cp, h = device
    assert h.flush_l2() == 2 * h.l2_bytes
    h.sync()
    assert int(h._flush._out.get()[0]) == 0


def _timed(cp, h, host_latency_s: float, hold) -> float:
    """Event time of one small harness kernel, with ``host_latency_s`` of host work between the start event and
    the launch (what Python, argument packing and the driver spend), with or without a stream hold."""
    import time

    words = cp.arange(4096, dtype=cp.uint32)
    out = cp.zeros(1, dtype=cp.uint64)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    h.sync()
    if hold is not None:
        hold.hold()
    try:
        start.record(h.stream)
        time.sleep(host_latency_s)
        h.function("hash_words")((16,), (256,), (words, np.int64(words.size), np.uint64(7), out), stream=h.stream)
        end.record(h.stream)
    finally:
        if hold is not None:
            hold.release()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end)


@pytest.mark.timeout(120)
def test_the_stream_hold_keeps_host_latency_out_of_a_timed_launch(device):
    cp, h = device
    unheld = [_timed(cp, h, 0.002, None) for _ in range(5)]
    held = [_timed(cp, h, 0.002, h.hold) for _ in range(5)]
    assert min(unheld) >= 1.9, f"without the hold the 2 ms of host work is timed: {unheld}"
    assert max(held) < 0.5, f"with the hold the kernel alone is timed: {held}"
    assert not h.hold.ran_out()


@pytest.mark.timeout(120)
def test_a_hold_the_host_does_not_release_in_time_ends_on_its_limit_and_says_so(device):
    from sandbox.worker.guards import StreamHold

    cp, h = device
    short = StreamHold(cp, h.function, h.stream, limit_ns=5_000_000)
    _timed(cp, h, 0.05, short)
    assert short.ran_out() and short.ran_outs == 1
    _timed(cp, h, 0.0, short)
    assert not short.ran_out()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["first element", "last element", "guard band above", "odd byte count"])
def test_a_fence_names_a_guarded_buffer_written_anywhere_while_it_stood(device, where):
    from sandbox.worker.guards import Fence

    cp, h = device
    bufs = {f"input 'a' of rotating set {i}": h.alloc("float32", (1000,)) for i in range(3)}
    odd = h.alloc("uint8", (7,))
    fence = Fence(h, 99)
    fence.raise_({**{k: b.raw for k, b in bufs.items()}, "the kept copy": odd.view})
    assert fence.broken() == []
    target = bufs["input 'a' of rotating set 1"]
    if where == "first element":
        target.view[0] = cp.nan
    elif where == "last element":
        target.view.view(cp.uint32)[-1] ^= 1   # one bit: the random contents may be a NaN or too large for += 1
    elif where == "guard band above":
        target.raw[target.lo + target.nbytes + 3] ^= 1
    else:
        odd.view[6] ^= 1
    expected = "the kept copy" if where == "odd byte count" else "input 'a' of rotating set 1"
    assert fence.broken("a launch wrote outside its own buffers") == [
        f"{expected} was overwritten: a launch wrote outside its own buffers"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n, at", [(1, 0), (7, 3), (4096, 0), (65536 + 259, 5)])
def test_a_guard_bands_bytes_are_their_definition_in_the_band_and_its_copy_at_any_alignment(device, n, at):
    from sandbox.worker.harness import Guarded, band_bytes

    cp, h = device
    raw, copy = cp.zeros(n + 16, dtype=cp.uint8), cp.zeros(n, dtype=cp.uint8)
    h.random_bands(raw[at:at + n], copy, seed=0xC0FFEE ^ n)
    want = band_bytes(np, n, 0xC0FFEE ^ n)
    assert (copy.get() == want).all() and (raw[at:at + n].get() == want).all()
    assert not raw[:at].get().any() and not raw[at + n:].get().any()       # nothing written outside the band
    if n >= 4096:
        assert len(set(want.tolist())) > 200 and not (band_bytes(np, n, 1) == want).all()
    g = Guarded(h, "float32", (n,))                                        # a buffer's bands and their copies
    assert all(bool((g.raw[a:a + k] == c).all()) for a, k, c in g.band_spans())
    assert not bool((g.guard_lo[:64] == Guarded(h, "float32", (n,)).guard_lo[:64]).all())


@pytest.mark.timeout(120)
def test_one_launch_hashes_many_arrays_exactly_as_one_launch_each(device):
    cp, h = device
    rng = cp.random.default_rng(5)
    arrays = [rng.integers(0, 255, n, dtype=cp.uint8) for n in (4, 8, 1 << 22, 1000, 12, (1 << 20) + 4)]
    arrays += [cp.zeros(0, dtype=cp.float32), rng.integers(0, 255, 7, dtype=cp.uint8),   # empty; not whole words
               rng.standard_normal((64, 33), dtype=cp.float32)]
    many = h.hash_arrays(arrays, 1234).tolist()
    one = [int(h.hash_array(a, 1234).get()[0]) for a in arrays]
    assert many == one
    assert h.hash_arrays(arrays[5:8], 1234).tolist() == one[5:8]   # a few: one launch each, the same values
    assert len(set(many[:6])) == 6 and many[6] == 0
    assert h.hash_arrays(arrays, 1235).tolist() != many   # keyed by the seed
