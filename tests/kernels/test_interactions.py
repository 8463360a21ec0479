"""Tests of jaxsample.kernels.interactions: KDE scores, KNN estimator, Lyapunov."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from jaxsample.kernels import interactions
from jaxsample.kernels.interactions import antithetic_normal

# jitted once per shape: eager op-by-op dispatch would dominate the test time
kde_score = jax.jit(interactions.kde_score, static_argnames=("chunk_size",))
smoothed_kde_score = jax.jit(interactions.smoothed_kde_score, static_argnames=("chunk_size",))
knn_smoothed_kde_score = jax.jit(interactions.knn_smoothed_kde_score,
                                 static_argnames=("num_neighbours", "num_remainder",
                                                  "chunk_size"))
symmetric_lyapunov_solve = jax.jit(interactions.symmetric_lyapunov_solve)

Z = 5.0


def _tol(dtype):
    return 1e-10 if dtype == jnp.float64 else 2e-4


def _problem(dtype, num_particles=12, num_data=30, dim=3, num_samples=6):
    keys = jax.random.split(jax.random.key(0), 3)
    z = jax.random.normal(keys[0], (num_particles, dim), dtype)
    data = jax.random.normal(keys[1], (num_data, dim), dtype)
    noise = antithetic_normal(keys[2], num_particles, num_samples, dim, dtype)
    return z, data, noise


def _log_kde(z, data, bandwidth):
    sq = jnp.sum(jnp.square(z[None, :] - data), axis=1)
    return jax.nn.logsumexp(-sq / (2 * bandwidth**2))


def test_kde_score_is_gradient_of_log_kde(dtype):
    z, data, _ = _problem(dtype)
    expected = jax.jit(jax.vmap(jax.grad(_log_kde), in_axes=(0, None, None)))(z, data, 0.7)
    got = kde_score(z, data, 0.7)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=_tol(dtype), atol=_tol(dtype))


def test_smoothed_score_is_mean_of_shifted_kde_scores(dtype):
    z, data, noise = _problem(dtype)
    s = 0.4
    shifted = z[:, None, :] + s * noise
    per_draw = kde_score(shifted.reshape(-1, z.shape[1]), data, 0.7).reshape(shifted.shape)
    # grad U(z + s eps) averaged: the z-dependence of (k - (z + s eps)) averages to (k - z)
    expected = jnp.mean(per_draw, axis=1)  # antithetic: mean(eps) = 0 exactly
    got = smoothed_kde_score(z, data, 0.7, s, noise)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=_tol(dtype), atol=10 * _tol(dtype))


def test_zero_smoothing_is_kde_score(dtype):
    z, data, noise = _problem(dtype)
    np.testing.assert_allclose(smoothed_kde_score(z, data, 0.5, 0.0, noise),
                               kde_score(z, data, 0.5), rtol=_tol(dtype), atol=_tol(dtype))


def test_single_training_point_gives_exact_quadratic_score(dtype):
    z, data, noise = _problem(dtype, num_samples=4)
    point = data[:1]
    got = smoothed_kde_score(z, point, 0.3, 0.8, noise)
    np.testing.assert_allclose(got, (point - z) / 0.09, rtol=_tol(dtype), atol=_tol(dtype))


def test_antithetic_noise():
    eps = antithetic_normal(jax.random.key(3), 5, 8, 2, jnp.float32)
    assert eps.shape == (5, 8, 2) and eps.dtype == jnp.float32
    np.testing.assert_array_equal(eps[:, :4], -eps[:, 4:])


@pytest.mark.parametrize("chunk_size", [5, 40])  # uneven last chunk; one chunk > B
def test_chunked_equals_dense(x64, chunk_size):
    dtype = jnp.float64
    z, data, noise = _problem(dtype)
    key = jax.random.key(9)
    np.testing.assert_allclose(
        smoothed_kde_score(z, data, 0.6, 0.3, noise, chunk_size=chunk_size),
        smoothed_kde_score(z, data, 0.6, 0.3, noise), rtol=_tol(dtype), atol=_tol(dtype))
    np.testing.assert_allclose(
        knn_smoothed_kde_score(key, z, data, 0.6, 0.3, noise, num_neighbours=5,
                               num_remainder=7, chunk_size=chunk_size),
        knn_smoothed_kde_score(key, z, data, 0.6, 0.3, noise, num_neighbours=5,
                               num_remainder=7), rtol=_tol(dtype), atol=_tol(dtype))


def test_chunking_bounds_memory():
    """Compiled temp memory of the chunked path is a few chunk-sized logit buffers, whatever B.

    (The dense path's temp size is backend dependent: XLA:CPU may fuse the small-d matmul into
    the softmax loops and report almost none, so only the chunked bound is asserted.)
    """
    num_data, dim, num_samples, chunk = 500, 2, 4, 50
    data = jax.ShapeDtypeStruct((num_data, dim), jnp.float32)

    def temp_bytes(num_particles):
        z = jax.ShapeDtypeStruct((num_particles, dim), jnp.float32)
        noise = jax.ShapeDtypeStruct((num_particles, num_samples, dim), jnp.float32)
        fn = jax.jit(lambda z, e, x: smoothed_kde_score(z, x, 0.1, 0.1, e, chunk_size=chunk))
        return fn.lower(z, noise, data).compile().memory_analysis().temp_size_in_bytes

    chunk_logits_bytes = 4 * chunk * num_samples * num_data
    small, large = temp_bytes(1000), temp_bytes(8000)
    assert large <= 3 * chunk_logits_bytes  # never B * M * n = 64 MB here
    assert large - small <= 7000 * num_samples * dim * 4  # only O(B d) growth at most


def test_knn_equals_exact_when_it_covers_the_data(x64):
    dtype = jnp.float64
    z, data, noise = _problem(dtype)
    exact = smoothed_kde_score(z, data, 0.6, 0.3, noise)
    for num_neighbours in (1, 10, 30):
        got = knn_smoothed_kde_score(jax.random.key(1), z, data, 0.6, 0.3, noise,
                                     num_neighbours=num_neighbours,
                                     num_remainder=30 - num_neighbours)
        np.testing.assert_allclose(got, exact, rtol=10 * _tol(dtype), atol=10 * _tol(dtype))


def test_knn_error_shrinks_with_remainder(x64):
    """Mean squared error over 200 particles decreases with K_rem; K_nn + K_rem = n is exact.

    For K_rem in (5, 60, 150) the expected MSE is estimated over 8 independent remainder draws
    (seeds); each decrease is a paired difference across seeds, required to exceed Z = 5 of its
    standard error from the spread across seeds (studentised, 7 degrees of freedom: if the
    expected MSE did not decrease, this would pass with probability < 1.6e-3). The expected
    decrease is large: sampling without replacement scales the variance like 1/K_rem − 1/280,
    a factor ~15 from 5 to 60 and ~4 from 60 to 150. With K_rem = 280 the remainder is every
    other centre with weight 1, so the estimate equals the exact one to round-off for every seed.
    """
    z, data, noise = _problem(jnp.float64, num_particles=200, num_data=300, dim=2)
    exact = smoothed_kde_score(z, data, 0.5, 0.2, noise)
    seeds = 8

    def estimate(seed, num_remainder):
        return knn_smoothed_kde_score(jax.random.key(seed), z, data, 0.5, 0.2, noise,
                                      num_neighbours=20, num_remainder=num_remainder)

    for seed in range(seeds):
        np.testing.assert_allclose(estimate(seed, 280), exact, rtol=1e-10, atol=1e-10)
    mse = np.array([[float(jnp.mean(jnp.square(estimate(seed, k) - exact)))
                     for seed in range(seeds)] for k in (5, 60, 150)])
    assert np.all(mse > 1e-12), mse  # the approximate cases are not exact
    for larger_error, smaller_error in zip(mse[:-1], mse[1:], strict=True):
        diff = larger_error - smaller_error
        se = diff.std(ddof=1) / seeds**0.5
        assert diff.mean() > Z * se, (mse.mean(axis=1), diff.mean(), se)


def test_lyapunov_solve_matches_scipy(dtype):
    key_a, key_q = jax.random.split(jax.random.key(4))
    m = jax.random.normal(key_a, (4, 4), dtype)
    a = m @ m.T + 0.5 * jnp.eye(4, dtype=dtype)
    q = jax.random.normal(key_q, (4, 4), dtype)
    q = q + q.T
    x = symmetric_lyapunov_solve(a, q)
    assert x.dtype == dtype
    np.testing.assert_allclose(x, x.T, atol=_tol(dtype))
    np.testing.assert_allclose(a @ x + x @ a, q, atol=100 * _tol(dtype))
    expected = scipy.linalg.solve_continuous_lyapunov(np.asarray(a, np.float64),
                                                      np.asarray(q, np.float64))
    np.testing.assert_allclose(x, expected, rtol=100 * _tol(dtype), atol=100 * _tol(dtype))


def test_kernels_jit_and_vmap():
    dtype = jnp.float32
    z, data, noise = _problem(dtype)
    fn = jax.jit(lambda z, e: smoothed_kde_score(z, data, 0.6, 0.3, e, chunk_size=5))
    np.testing.assert_allclose(fn(z, noise), smoothed_kde_score(z, data, 0.6, 0.3, noise),
                               rtol=_tol(dtype), atol=_tol(dtype))
    batched = jax.vmap(lambda z, e: smoothed_kde_score(z, data, 0.6, 0.3, e))(
        jnp.stack([z, 2 * z]), jnp.stack([noise, noise]))
    np.testing.assert_allclose(batched[1], smoothed_kde_score(2 * z, data, 0.6, 0.3, noise),
                               rtol=_tol(dtype), atol=_tol(dtype))
