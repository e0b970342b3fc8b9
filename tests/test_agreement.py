"""The agreement test's arithmetic (sandbox/judging/agreement.py), on NumPy: honest pairs at the edge of the
tolerance pass, wrong outputs of any size fail, the keyed streams match harness.cu's layout."""

from __future__ import annotations

import math
import numpy as np
import pytest

from sandbox.judging import agreement as ag

KEYS = [0x9E3779B97F4A7C15 * (k + 1) % 2**64 for k in range(200)]


def _edge_pair(n: int, atol: float, rtol: float, dtype=np.float64, seed: int = 0):
    """Reference r, and c, b each off by exactly the task's tolerance, in opposite directions."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=n)
    tol = atol + rtol * np.abs(r)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return r, (r + sign * tol).astype(dtype), (r - sign * tol).astype(dtype)


def test_the_scaled_tolerance_admits_two_outputs_each_at_the_edge_of_the_task_tolerance():
    r, c, b = _edge_pair(100_000, atol=1e-6, rtol=1e-3)
    found = ag.agree(np, c, b, 1e-6, 1e-3, KEYS[0])
    assert found.violations == 0 and found.verdict() == ""
    a2, r2 = ag.scaled_tolerance(1e-6, 1e-3)
    assert a2 == pytest.approx(2e-6 / 0.999) and r2 == pytest.approx(2e-3 / 0.999)
    assert ag.scaled_tolerance(0.0, 1.0) == (math.inf, math.inf)


def test_honest_pairs_stay_far_inside_the_projection_bound_for_every_key():
    # every |c_i - b_i| equals twice the tolerance, signs fixed: the worst an honest pair can do
    r, c, b = _edge_pair(200_000, atol=1e-5, rtol=1e-4)
    ratios = []
    for key in KEYS:
        found = ag.agree(np, c, b, 1e-5, 1e-4, key)
        assert found.violations == 0
        ratios += [abs(s) / math.sqrt(found.sum_t2) for s in found.sums]
    # Hoeffding: P(ratio > 8) <= 2 exp(-32); 800 draws of a sub-Gaussian ratio stay below ~4.5
    assert max(ratios) < 4.5
    assert ag.false_alarm() == pytest.approx(4 * 2 * math.exp(-32))


@pytest.mark.parametrize("n", [1, 7, 1000, 1 << 20])
def test_an_all_zero_output_fails_every_element_and_every_projection_at_any_size(n):
    rng = np.random.default_rng(1)
    b = rng.normal(0, 30, size=n).astype(np.float16)  # an FP16 GEMM-like output
    found = ag.agree(np, np.zeros_like(b), b, 1e-2, 1e-3, KEYS[3])
    assert found.violations == int((np.abs(b.astype(np.float64)) > 0.02 / 0.999 + 2e-3 / 0.999 * np.abs(b.astype(np.float64))).sum())
    if n >= 1000:
        assert found.projection_failures() == list(range(ag.PROJECTIONS))
    assert found.verdict().startswith(f"{found.violations} of {n} elements")


def test_projections_alone_catch_a_wrong_output_that_they_were_not_told_about():
    b = np.random.default_rng(2).uniform(-1, 1, size=1 << 18).astype(np.float32)
    c = (b * np.float32(0.99)).astype(np.float32)  # 1% low everywhere: far beyond rtol 1e-5
    found = ag.agree(np, c, b, 1e-9, 1e-5, KEYS[5])
    assert found.projection_failures() == list(range(ag.PROJECTIONS))
    assert "projection" in ag.Agreement(found.n, 0, None, found.sum_t2, found.sums).verdict()


def test_one_wrong_element_among_a_million_is_found_with_its_index():
    b = np.random.default_rng(3).normal(size=1 << 20).astype(np.float32)
    c = b.copy()
    c[777_777] += 1.0
    found = ag.agree(np, c, b, 1e-6, 1e-5, KEYS[7])
    assert (found.violations, found.first) == (1, 777_777)


def test_non_finite_values_must_match_the_baseline_exactly():
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    b = np.array([1.0, nan, inf, -inf, 2.0, inf], dtype=np.float32)
    c = np.array([1.0, nan, inf, -inf, 2.0, inf], dtype=np.float32)
    assert ag.agree(np, c, b, 0.0, 1e-5, KEYS[0]).violations == 0
    for i, value in [(0, nan), (1, 1.0), (2, -inf), (4, inf), (5, nan)]:
        wrong = c.copy()
        wrong[i] = value
        found = ag.agree(np, wrong, b, 0.0, 1e-5, KEYS[0])
        assert (found.violations, found.first) == (1, i), (i, value)


def test_integer_outputs_with_an_exact_tolerance_compare_every_bit():
    b = np.arange(-5000, 5000, dtype=np.int32)
    c = b.copy()
    assert ag.agree(np, c, b, 0, 0, KEYS[0]).violations == 0
    c[4321] += 1
    found = ag.agree(np, c, b, 0, 0, KEYS[0])
    assert (found.violations, found.first, found.sum_t2) == (1, 4321, 0.0)
    assert found.projection_failures() == list(range(ag.PROJECTIONS))  # bound 0: any difference is beyond it
    assert ag.exact("int32", 0, 0) and not ag.exact("float32", 0, 0) and not ag.exact("int32", 1, 0)


def test_the_keyed_streams_follow_harness_cu_word_layout():
    values = np.array([0, 1, 2**63, 2**64 - 1, 0x1234567890ABCDEF], dtype=np.uint64)
    assert [int(v) for v in ag.mix64(np, values)] == [ag.mix64_int(int(v)) for v in values]
    # float16: four elements per 8-byte word, each taking its own 16 bits of the word's mask
    k1, k2 = 0xDEADBEEF12345678, 0x0F0F0F0F0F0F0F0F
    word = ag.mix64_int(1 ^ k1) ^ k2
    assert ag.mask_value(0, 6, 2, k1, k2) == (word >> 32) & 0xFFFF
    assert ag.mask_value(ag.mask_value(0xABCD, 6, 2, k1, k2), 6, 2, k1, k2) == 0xABCD
    # signs: element j of a word takes bits [4j, 4j + 4) of mix64(word ^ key)
    neg = ag.sign_bits(np, 8, 2, key=KEYS[1])
    h = ag.mix64_int(1 ^ KEYS[1])
    assert [bool(neg[k, 6]) for k in range(4)] == [bool((h >> (8 + k)) & 1) for k in range(4)]


def test_the_harness_compiles_with_every_kernel_the_worker_looks_up_and_is_kept_for_the_next_sandbox(
        tmp_path, monkeypatch):
    from sandbox.host.gpu import HARNESS_NAMES, compile_harness

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    cubin, lowered = compile_harness("sm_90")
    assert cubin and set(HARNESS_NAMES) == set(lowered)
    assert set(ag.DEVICE_NAMES) | {"l2_flush_read", "hash_words", "hash_many", "bands_differ", "hold_stream",
                                  "fill_pattern", "seal_compared", "random_bands"} == set(HARNESS_NAMES)
    [kept] = (tmp_path / "harness").glob("*.cubin")
    assert kept.read_bytes() == cubin and compile_harness("sm_90") == (cubin, lowered)
    kept.with_suffix(".json").write_text("{torn")                 # an unreadable entry is compiled again
    assert compile_harness("sm_90") == (cubin, lowered)
    assert compile_harness("sm_80")[0] != cubin                   # another arch, another entry
    assert len(list((tmp_path / "harness").glob("*.cubin"))) == 2


def _imported(atol: float, spread: float = 2e-4, cuda_baseline: bool = False):
    """The parts of an imported task the agreement's tolerance reads: one float32 output, PyTorch eager as the
    baseline (or a CUDA one)."""
    from types import SimpleNamespace

    from sandbox.tasks.task_spec import Tolerance

    out = SimpleNamespace(name="out", dtype="float32")
    return SimpleNamespace(spec=SimpleNamespace(outputs=[out]), has_baseline=cuda_baseline,
                           output_tolerance=lambda o: Tolerance(atol=atol, rtol=1e-4, spread=spread))


def _gemm_chain(a, w, bias, order: str):
    """level2/95's Matmul_Add_Swish_Tanh_GELU_Hardtanh in float32, the matmul summed in one of two orders."""
    if order == "blas":
        x = a @ w
    else:   # 64 partial sums of 128 terms each, added last to first
        x = np.zeros((a.shape[0], w.shape[1]), np.float32)
        for j in reversed(range(0, a.shape[1], 128)):
            x = (x + a[:, j:j + 128] @ w[j:j + 128]).astype(np.float32)
    x = x + bias
    x = x * (1 / (1 + np.exp(-x)))
    x = np.tanh(x)
    x = 0.5 * x * (1 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x ** 3)))
    return np.clip(x, -1, 1).astype(np.float32)


def test_two_correct_float32_gemms_with_k_8192_in_other_summation_orders_agree():
    from sandbox.judging.compare import spread_atol

    rng = np.random.default_rng(5)
    k = 8192
    a = rng.normal(size=(64, k)).astype(np.float32)
    w = rng.uniform(-1, 1, size=(k, 512)).astype(np.float32) / np.float32(math.sqrt(k) / 4)
    bias = rng.uniform(-0.5, 0.5, size=512).astype(np.float32)
    base, cand = _gemm_chain(a, w, bias, "blas"), _gemm_chain(a, w, bias, "chunks")
    assert not np.array_equal(base, cand)   # the orders do differ
    tight = 1e-7   # a tolerance that one implementation meets where the import measured it, not two at K = 8192
    task = _imported(tight)
    atol, rtol, spread = ag.agreement_tolerances(task)["out"]
    assert spread == ag.HONEST_SPREAD["float32"] and atol == tight and rtol == 1e-4
    grown = spread_atol(np, base, atol, spread)   # as the worker grows it on the baseline's output
    assert ag.agree(np, cand, base, grown, rtol, KEYS[1]).verdict() == ""
    assert ag.agree(np, cand, base, tight, rtol, KEYS[1]).violations > 0   # the task's own bound, twice, is too tight
    for wrong in (np.zeros_like(base), np.full_like(base, base.mean()), _gemm_chain(a, w, bias * 0, "blas")):
        assert ag.agree(np, wrong, base, grown, rtol, KEYS[2]).verdict() != ""


def test_the_honest_spread_of_the_agreement_is_the_imports_cap():
    from sandbox.pytorch.numerics import CAP

    assert ag.HONEST_SPREAD == {k: min(v, 0.05) for k, v in CAP.items()}   # a Tolerance's spread is at most 0.05
    integer = _imported(0.0, spread=0.0)
    integer.spec.outputs[0].dtype = "int64"
    assert ag.agreement_tolerances(integer)["out"] == [0.0, 1e-4, 0.0]


def test_a_cuda_baseline_checked_at_every_size_keeps_twice_the_tasks_tolerance():
    """The sandbox checks a task's CUDA baseline against the reference at the benchmark size: both sides are
    within the tolerance there, and the bound stays as tight as that allows (a half-precision-late cheat on a
    hand-written sgemm must still disagree)."""
    assert ag.agreement_tolerances(_imported(1e-5, spread=0.0, cuda_baseline=True))["out"] == [1e-5, 1e-4, 0.0]
