"""bz.random: counter-based (Threefry-2x32) keys, reproducible and lazy.

Distribution checks use fixed keys, so they are deterministic; their thresholds
are several standard errors wide.
"""

from __future__ import annotations

import numpy as np
import pytest

import braze as bz
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
