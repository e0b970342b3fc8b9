"""Inputs a kernel cannot derive from the part it reads.

The test, stated: an attacker knows the generator's algorithm but not the trial's seed, and reads the first megabyte
of an input (262,144 float32 values). From it, it fits a predictor of the rest: (1) the seed-recovery attack, a
lookup table from the first values drawn under every seed it can enumerate to that seed, then the rest drawn under
the seed found; (2) a linear predictor of each value from the 16 before it, least squares on the first megabyte; (3) a
next-word predictor on the bits (the most frequent top bit after each top byte). On the rest of the input, each must
agree with the true values no better than chance. The same attack (1) predicts the old generator's rest exactly: its
seeds had 32 bits and its element i under seed s was element 0 under seed s + i. The table here enumerates 2^16
seeds to run in a second; against the old 32-bit seeds the same code with 2^32 entries is the attack that worked.
"""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.tasks import inputs, keyed

MB = 1 << 18             # float32 values in a megabyte
REST = 1 << 18           # values predicted after it
G, C = 0x9E3779B97F4A7C15, 0x632BE59BD9B4E019
U64 = np.uint64


def old_uniform(seed: int, n: int, start: int = 0) -> np.ndarray:
    """The old device uniform draw (top 24 bits of SplitMix64 of seed * G + C + i * G), as integers."""
    with np.errstate(over="ignore"):
        x = U64((seed * G + C) % 2**64) + np.arange(start, start + n, dtype=U64) * U64(G)
        x = (x ^ (x >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> U64(27))) * U64(0x94D049BB133111EB)
        x ^= x >> U64(31)
    return (x >> U64(40)).astype(np.int64)


def new_uniform(seed: int, n: int) -> np.ndarray:
    """The new uniform draw of one input under ``seed``, as the 24-bit integers the values are made of."""
    spec = dict(name="x", dtype="float32", shape=[n], dist="uniform", kind="uniform", low=0.0, high=1.0, scale=1.0,
                offset=0.0)
    return (inputs.generate(np, spec, seed).astype(np.float64) * 2**24).astype(np.int64)


def table_attack(first: np.ndarray, draw, guesses: range, rest: int) -> np.ndarray | None:
    """Attack (1): the seed among ``guesses`` whose first 4 values match, and the rest drawn under it (None: no
    seed matched)."""
    table = {tuple(draw(s, 4)): s for s in guesses}
    seed = table.get(tuple(first[:4]))
    return None if seed is None else draw(seed, len(first) + rest)[len(first):]


def linear_r2(x: np.ndarray, lags: int = 16) -> float:
    """Attack (2): R^2 on the rest of a least-squares predictor of x[i] from x[i-16..i-1] fitted on the first MB."""
    v = x.astype(np.float64) / 2**24 - 0.5
    rows = np.lib.stride_tricks.sliding_window_view(v, lags + 1)
    fit, test = rows[:MB - lags], rows[MB:]
    a = np.c_[fit[:, :-1], np.ones(len(fit))]
    coef, *_ = np.linalg.lstsq(a, fit[:, -1], rcond=None)
    pred = np.c_[test[:, :-1], np.ones(len(test))] @ coef
    return 1.0 - float(((test[:, -1] - pred) ** 2).mean() / test[:, -1].var())


def next_bit_agreement(x: np.ndarray) -> float:
    """Attack (3): the share of the rest's top bits guessed right from the top byte of the value before."""
    byte, bit = (x >> 16) & 0xFF, (x >> 23) & 1
    ones = np.bincount(byte[:MB - 1], weights=bit[1:MB], minlength=256)
    seen = np.bincount(byte[:MB - 1], minlength=256)
    guess = (ones * 2 > seen).astype(np.int64)
    return float((guess[byte[MB - 1:-1]] == bit[MB:]).mean())


def chance_band(n: int) -> float:
    return 4.0 * 0.5 / np.sqrt(n)   # four standard deviations of a share of n fair coin flips


def test_the_old_generator_is_predicted_exactly_from_its_first_values_by_a_seed_table():
    secret = 40_961   # inside the 2^16 the table enumerates; the old seeds had 32 bits
    x = old_uniform(secret, MB + REST)
    assert np.array_equal(old_uniform(secret + 5, 1), x[5:6]), "element i of seed s is element 0 of seed s + i"
    predicted = table_attack(x[:MB], old_uniform, range(1 << 16), REST)
    assert predicted is not None and np.array_equal(predicted, x[MB:])


def test_the_new_generator_defeats_the_seed_table_a_linear_and_a_next_bit_predictor():
    seed = keyed.new_seed()
    assert seed.bit_length() <= keyed.SEED_BITS and keyed.SEED_BITS >= 128
    x = new_uniform(seed, MB + REST)
    assert table_attack(x[:MB], new_uniform, range(1 << 12), REST) is None   # the seed is out of reach
    # a table over the small seeds the old draws used: the best guess agrees with the rest at chance (1 in 2^24)
    guess = new_uniform(int(np.argmax([new_uniform(s, 1)[0] == x[0] for s in range(1 << 12)])), MB + REST)
    assert (guess[MB:] == x[MB:]).mean() < 1e-4
    assert abs(((guess[MB:] >> 23) == (x[MB:] >> 23)).mean() - 0.5) < chance_band(REST)
    assert abs(linear_r2(x)) < 1e-3
    assert abs(next_bit_agreement(x) - 0.5) < chance_band(REST)


def test_no_shift_relates_elements_chunks_inputs_or_rounds():
    """Element i under one key is not element 0 under any nearby key, and the keys of consecutive chunks, inputs
    and rounds differ by no constant."""
    seed = keyed.new_seed()
    x = keyed.words(np, keyed.derive(seed, 0, "uniform"), 64)
    for nearby in (seed + 1, seed + 5, seed - 1):
        w = keyed.words(np, keyed.derive(nearby, 0, "uniform"), 64)
        assert not np.intersect1d(x, w).size
    chunks = [keyed.derive(seed, c, "uniform") for c in range(4)]
    rounds = [keyed.derive(inputs.round_seed(seed, r), 0, "uniform") for r in range(4)]
    ins = [inputs.input_seed(seed, i) for i in range(4)]
    for keys in (chunks, rounds):
        steps = {tuple((b - a) % 2**32 for a, b in zip(k0, k1)) for k0, k1 in zip(keys, keys[1:])}
        assert len(steps) == len(keys) - 1
    assert len({(b - a) % 2**128 for a, b in zip(ins, ins[1:])}) == len(ins) - 1


def test_philox_matches_its_published_known_answers():
    """Random123's known-answer vectors for Philox-4x32-10: counter and key all zeros, then all ones."""
    zero, ones = np.zeros(1, np.uint32), np.full(1, 0xFFFFFFFF, np.uint32)
    assert [int(w[0]) for w in keyed.philox(np, zero, zero, (0, 0, 0, 0))] == [
        0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert [int(w[0]) for w in keyed.philox(np, ones, ones, (0xFFFFFFFF,) * 4)] == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


@pytest.mark.parametrize("kind", ["normal", "uniform", "rows", "ties", "near_one", "kinks", "int"])
def test_each_kind_repeats_from_its_seed_and_changes_with_it(kind):
    spec = dict(name="x", dtype="float32", shape=[33, 65], dist=kind, kind=kind, low=-2, high=3, scale=1.0,
                offset=0.0)
    a = inputs.generate(np, spec, 7)
    assert np.array_equal(a, inputs.generate(np, spec, 7)) and not np.array_equal(a, inputs.generate(np, spec, 8))


def test_the_normal_draw_is_standard_normal():
    # a fixed seed: a test at the 1% level on a fresh seed would fail one run in a hundred
    z = np.sort(keyed.normal32(np, keyed.derive(20261207, "t"), 1 << 20).astype(np.float64))
    from math import erf, sqrt

    cdf = 0.5 * (1.0 + np.vectorize(erf)(z / sqrt(2.0)))
    ks = float(np.abs(cdf - np.arange(1, z.size + 1) / z.size).max())
    assert ks < 1.63 / np.sqrt(z.size), ks   # Kolmogorov-Smirnov at the 1% level
    assert abs(z.mean()) < 0.005 and abs(z.std() - 1) < 0.005


def test_the_rows_kind_gives_each_row_its_own_centre_and_spread():
    spec = dict(name="x", dtype="float32", shape=[256, 512], dist="rows", kind="rows", scale=1.0, offset=0.0)
    x = inputs.generate(np, spec, keyed.new_seed()).astype(np.float64)
    centres, spreads = np.median(x, axis=1), x.std(axis=1)
    uniform_std = 2 * inputs.ROW_CENTRE / np.sqrt(12)   # the centres' spread at the smallest scale factor, 1
    assert centres.std() > 0.8 * uniform_std and spreads.max() / spreads.min() > 4
    assert (np.abs(centres) < 20).mean() > 0.3   # rows near any fixed threshold a kernel might key on
    ties = inputs.generate(np, dict(spec, dist="ties", kind="ties"), 3)
    assert ((ties == ties.max(axis=1, keepdims=True)).sum(axis=1) > 20).all()   # clustered maxima in every row


def test_the_device_kernels_compile_without_fused_multiply_adds():
    """The device draw must round every product and sum as NumPy does: NVRTC (no GPU needed) compiles its source
    with the options the draw uses, and the PTX holds no fused multiply-add."""
    from sandbox.candidates.compiler import _nvrtc_module

    nvrtc = _nvrtc_module()
    err, prog = nvrtc.nvrtcCreateProgram(keyed.device_source().encode(), b"keyed.cu", 0, [], [])
    opts = [b"--fmad=false", b"-std=c++17", b"-arch=compute_90"]   # as keyed._kernels, for sm_90
    (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    assert status == nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, size = nvrtc.nvrtcGetPTXSize(prog)
    buf = bytearray(size)
    nvrtc.nvrtcGetPTX(prog, buf)
    nvrtc.nvrtcDestroyProgram(prog)
    ptx = bytes(buf).decode(errors="replace")
    assert ".entry kw_uniform_f32" in ptx and ".entry kw_normal_f32" in ptx
    assert "fma." not in ptx and ".approx" not in ptx
