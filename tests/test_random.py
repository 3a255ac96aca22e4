"""bz.random: counter-based (Threefry-2x32) keys, reproducible and lazy.

Distribution checks use fixed keys, so they are deterministic; their thresholds
are several standard errors wide.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import braze as bz
from braze.arrays import elementwise as ew
from braze.graph.ops import threefry2x32


def test_threefry_matches_the_published_known_answers() -> None:
    # Random123's known-answer tests for threefry2x32 with 20 rounds.
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for key, ctr, want in cases:
        a, b = threefry2x32(np.array(key, np.uint32), np.array([ctr[0]], np.uint32),
                            np.array([ctr[1]], np.uint32))
        assert (int(a[0]), int(b[0])) == want


def test_same_key_same_numbers_different_keys_different_numbers() -> None:
    k0, k1 = bz.random.key(0), bz.random.key(1)
    a = bz.random.uniform(shape=(64,), key=k0).tolist()
    assert a == bz.random.uniform(shape=(64,), key=k0).tolist()
    assert a != bz.random.uniform(shape=(64,), key=k1).tolist()


def test_split_gives_independent_keys() -> None:
    keys = bz.random.split(bz.random.key(7), 4)
    assert keys.shape == (4, 2) and keys.dtype == bz.uint32
    draws = [tuple(bz.random.bits((8,), key=keys[i]).tolist()) for i in range(4)]
    assert len(set(draws)) == 4


def test_global_seed_is_reproducible() -> None:
    bz.random.seed(123)
    a = bz.random.normal((16,)).tolist()
    b = bz.random.normal((16,)).tolist()
    bz.random.seed(123)
    assert bz.random.normal((16,)).tolist() == a
    assert a != b  # the state advances between calls


def test_random_ops_are_lazy() -> None:
    x = bz.random.normal((10000, 10000), key=bz.random.key(0))
    assert x._node.data is None and x.shape == (10000, 10000) and x.dtype == bz.float32


@pytest.mark.parametrize("dtype", [bz.float16, bz.bfloat16, bz.float32, bz.float64])
def test_uniform_range_dtype_and_moments(dtype) -> None:
    x = bz.random.uniform(-2.0, 3.0, (200_000,), dtype=dtype, key=bz.random.key(1))
    v = np.asarray(x).astype(np.float64)
    assert x.dtype == dtype
    assert v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.02
    assert abs(v.var() - 25 / 12) < 0.05


def test_uniform_never_returns_high_even_after_rounding() -> None:
    x = bz.random.uniform(0.0, 1.0, (100_000,), dtype=bz.bfloat16, key=bz.random.key(5))
    assert float(bz.max(x)) < 1.0


def test_uniform_is_spread_evenly() -> None:
    v = np.asarray(bz.random.uniform(shape=(100_000,), key=bz.random.key(2)))
    counts, _ = np.histogram(v, bins=10, range=(0, 1))
    assert np.all(np.abs(counts - 10_000) < 500)  # ~5 sigma


@pytest.mark.parametrize("dtype", [bz.float32, bz.float64, bz.bfloat16])
def test_normal_moments_and_params(dtype) -> None:
    x = bz.random.normal((200_000,), dtype=dtype, loc=1.5, scale=2.0, key=bz.random.key(3))
    v = np.asarray(x).astype(np.float64)
    assert x.dtype == dtype
    assert abs(v.mean() - 1.5) < 0.03
    assert abs(v.std() - 2.0) < 0.03
    assert np.isfinite(v).all()
    # tails: P(|z| > 2) = 4.55 %
    assert abs(np.mean(np.abs(v - 1.5) > 4.0) - 0.0455) < 0.005


def test_normal_with_array_loc_broadcasts() -> None:
    loc = bz.asarray([0.0, 100.0])
    x = bz.random.normal((5000, 2), loc=loc, key=bz.random.key(4))
    m = np.asarray(x).mean(axis=0)
    assert abs(m[0]) < 0.1 and abs(m[1] - 100) < 0.1


def test_randint_covers_the_range_uniformly() -> None:
    x = bz.random.randint(-3, 4, (70_000,), key=bz.random.key(8))
    v = np.asarray(x)
    assert x.dtype == bz.int32
    assert v.min() == -3 and v.max() == 3
    counts = np.bincount(v + 3)
    assert np.all(np.abs(counts - 10_000) < 500)


def test_randint_with_64_bit_range() -> None:
    x = bz.random.randint(0, 2**40, (1000,), dtype=bz.int64, key=bz.random.key(9))
    v = np.asarray(x)
    assert v.min() >= 0 and v.max() < 2**40 and v.max() > 2**38


def test_bernoulli_probability() -> None:
    x = bz.random.bernoulli(0.3, (100_000,), key=bz.random.key(10))
    assert x.dtype == bz.bool
    assert abs(np.asarray(x).mean() - 0.3) < 0.01
    p = bz.asarray([0.0, 1.0])
    assert bz.random.bernoulli(p, key=bz.random.key(0)).tolist() == [False, True]


def test_categorical_follows_the_probabilities() -> None:
    probs = np.array([0.1, 0.2, 0.7])
    logits = bz.log(bz.asarray(probs, dtype=bz.float32))
    s = bz.random.categorical(logits, num_samples=50_000, key=bz.random.key(11))
    assert s.shape == (50_000,)
    freq = np.bincount(np.asarray(s), minlength=3) / 50_000
    np.testing.assert_allclose(freq, probs, atol=0.01)
    batch = bz.random.categorical(bz.zeros((4, 6)), axis=1, key=bz.random.key(0))
    assert batch.shape == (4,) and batch.dtype == bz.int64
    shaped = bz.random.categorical(bz.zeros((4, 6)), shape=(3, 4), key=bz.random.key(0))
    assert shaped.shape == (3, 4)


@pytest.mark.parametrize("call, match", [
    (lambda: bz.random.uniform(key=bz.random.key(0).astype(bz.int32)), "key must be a uint32"),
    (lambda: bz.random.uniform(1.0, 0.0), "low < high"),
    (lambda: bz.random.randint(5, 5), "low < high"),
    (lambda: bz.random.randint(0, 1000, dtype=bz.int8), "does not fit int8"),
    (lambda: bz.random.normal((2,), dtype=bz.int32), "real floating"),
    (lambda: bz.random.bernoulli(1.5), r"\[0, 1\]"),
    (lambda: bz.random.split(bz.random.key(0), 0), "positive"),
    (lambda: bz.random.uniform(shape=(2, -1)), "negative"),
    (lambda: bz.random.categorical(bz.zeros(3), shape=(2,), num_samples=2), "at most one"),
])
def test_bad_arguments_raise_at_the_call(call, match) -> None:
    with pytest.raises((TypeError, ValueError, OverflowError), match=match):
        call()


# ---------------------------------------------------------------- fused draws (issue 14)
# (each test runs under every backend through conftest's module fixture; the CUDA and
# Metal code of the threefry records runs in tests/test_cuda_emulator.py's corpus)
def _packed(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    return hi.astype(np.uint64) << np.uint64(32) | lo.astype(np.uint64)


@functools.cache
def _threefry_cases() -> tuple[np.ndarray, ...]:
    """Random keys and counters (some past 2**32) and the reference's words, one key
    at a time (built once for every backend)."""
    rng = np.random.default_rng(14)
    n = 4099
    keys = rng.integers(0, 2**32, (n, 2), dtype=np.uint32)
    c_hi = rng.integers(0, 2**32, n, dtype=np.uint32)
    c_hi[:8] = 0  # the counters a draw uses, and some past 2**32
    c_lo = rng.integers(0, 2**32, n, dtype=np.uint32)
    want = np.empty((2, n), np.uint32)
    for i in range(n):  # the reference takes one key
        a, b = threefry2x32(keys[i], c_hi[i:i + 1], c_lo[i:i + 1])
        want[:, i] = a[0], b[0]
    return keys, c_hi, c_lo, want


def test_threefry_records_match_the_reference_on_every_backend() -> None:
    """The elementwise records (the generated kernel's bz_threefry2x32, MLX's lowering)
    give the numpy reference's words on random keys and counters, hi words included."""
    keys, c_hi, c_lo, want = _threefry_cases()
    k = bz.asarray(_packed(keys[:, 0], keys[:, 1]))
    c = bz.asarray(_packed(c_hi, c_lo))
    x0 = np.asarray(ew.threefry2x32_x0(k, c))
    x1 = np.asarray(ew.threefry2x32_x1(k, c))
    # one key broadcast against many counters, as a draw's kernel has it
    one = np.asarray(ew.threefry2x32_x1(k[:1], c))
    np.testing.assert_array_equal(x0, want[0])
    np.testing.assert_array_equal(x1, want[1])
    a, b = threefry2x32(keys[0], c_hi, c_lo)
    np.testing.assert_array_equal(one, b)


SHAPES = [(), (1,), (5,), (7, 3), (2, 1, 5), (0,), (4, 0, 2), (3, 4, 5), (3, 300),
          (2, 3, 256), (5, 1, 300), (4, 257, 1)]


def test_fused_bits_equal_the_whole_array_reference() -> None:
    """A fused draw's bits (flat-index counters, word per half) are random_bits_ref's."""
    from braze.arrays import random as R
    from braze.graph.ops import random_bits_ref

    rng = np.random.default_rng(0)
    for shape in SHAPES:
        kd = rng.integers(0, 2**32, 2, dtype=np.uint32)
        for k in (bz.asarray(kd), bz.asarray(kd) + 0):  # a key with data, a lazy one
            np.testing.assert_array_equal(np.asarray(R.bits(shape, key=k)),
                                          random_bits_ref(kd, shape=shape))
            raw = random_bits_ref(kd, shape=shape + (2,))
            wide = raw[..., 0].astype(np.uint64) << np.uint64(32) | raw[..., 1]
            np.testing.assert_array_equal(np.asarray(R.bits(shape, 8, key=k)), wide)
            for width in (4, 8):
                whole = np.asarray(R._bits_op((2,) + shape, width, k))
                a, b = R._pair(shape, width, k)
                np.testing.assert_array_equal(np.asarray(a), whole[0])
                np.testing.assert_array_equal(np.asarray(b), whole[1])


def _draws(key):
    return [bz.random.uniform(-2, 3, (37, 5), key=key),
            bz.random.uniform(shape=(301,), dtype=bz.float64, key=key),
            bz.random.normal((3, 100), key=key), bz.random.normal((33,), bz.float64, key=key),
            bz.random.normal((64,), loc=1.0, scale=2.0, key=key),
            bz.random.randint(-5, 7, (50,), key=key), bz.random.bernoulli(0.3, (40,), key=key),
            bz.random.gumbel((9, 9), key=key), bz.random.exponential(2.0, (70,), key=key),
            bz.random.split(key, 3), bz.random.permutation(20, key=key)]


def test_fused_draws_give_the_values_of_the_whole_array_op(monkeypatch) -> None:
    """Every distribution draws the same values as through the whole-array op."""
    from braze.arrays import random as R

    key = bz.random.key(2024)
    fused = [np.asarray(x) for x in _draws(key)]
    monkeypatch.setattr(R, "_FUSED_LIMIT", 0)
    whole = [np.asarray(x) for x in _draws(key)]
    for a, b in zip(fused, whole):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_a_draw_its_transform_and_the_ops_after_it_are_one_kernel() -> None:
    key = bz.random.key(0)
    for fn in (lambda: bz.random.uniform(shape=(1000, 2), key=key) * 2.0 + 1.0,
               lambda: bz.exp(bz.random.normal((4096,), key=key))):
        report = bz.explain(fn)
        assert report.num_kernels == 1, str(report)
        ops = report.kernels[0].ops
        assert "threefry2x32_x0" in ops and "random_bits" not in ops


def test_the_random_helpers_are_in_every_dialect() -> None:
    from braze.backends.cpu import codegen as cpu_codegen
    from braze.backends.cuda import codegen as cuda_codegen
    from braze.backends.metal import codegen as metal_codegen
    from braze.graph.compiler import compile_graph

    s, _ = compile_graph([bz.random.normal((300,), key=bz.random.key(1))._node])
    (k,) = s.kernels
    for gen in (cpu_codegen, cuda_codegen, metal_codegen):
        src = gen.generate(k).source
        assert "bz_threefry2x32(uint64_t key, uint64_t counter)" in src
        assert "bz_threefry2x32_x0((uint64_t)" in src and "bz_threefry2x32_x1((uint64_t)" in src
