"""kernels.linalg (shrunk covariance, safe Cholesky, norm clipping, effective rank) and
kernels.logspace.temper_to_ess."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample.kernels import linalg, logspace


def test_ledoit_wolf_is_a_shrinkage_of_the_sample_covariance(dtype):
    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute():
        x = (jax.random.normal(jax.random.key(0), (40, 6), dtype)
             * jnp.arange(1, 7, dtype=dtype)[None])
        return x, linalg.ledoit_wolf(x), linalg.ledoit_wolf(x, 0.0)

    x, cov, unshrunk = compute()
    assert cov.dtype == dtype
    # the estimate is a convex combination of S and mu*I with lambda in [0, 1]
    xc = np.asarray(x, np.float64) - np.asarray(x, np.float64).mean(0)
    s = xc.T @ xc / 40
    mu = np.trace(s) / 6
    off = np.asarray(cov, np.float64) - s
    lam = off[0, 1] / (0 - s[0, 1])
    assert 0 <= lam <= 1
    np.testing.assert_allclose(cov, lam * mu * np.eye(6) + (1 - lam) * s,
                               rtol=1e-4 if dtype == jnp.float32 else 1e-10, atol=1e-5)
    np.testing.assert_allclose(unshrunk, s, rtol=1e-4, atol=1e-5)


def test_safe_cholesky_exact_and_fallback(dtype):
    a = np.asarray([[4.0, 2.0], [2.0, 3.0]])
    indefinite = np.asarray([[1.0, 2.0], [2.0, 1.0]])
    both = jax.jit(lambda a, b: (linalg.safe_cholesky(a), linalg.safe_cholesky(b)))(
        jnp.asarray(a, dtype), jnp.asarray(indefinite, dtype))
    (factor, fell_back), (bad_factor, bad_fell_back) = jax.device_get(both)
    assert not bool(fell_back)
    np.testing.assert_allclose(factor @ factor.T, a, rtol=1e-5)
    assert bool(bad_fell_back) and np.all(np.isfinite(bad_factor))


@pytest.mark.parametrize("lower", [True, False])
def test_triangular_inverse_solves_every_row(dtype, lower):
    d = 6
    a = jax.random.normal(jax.random.key(3), (d, d), dtype)
    factor = jnp.linalg.cholesky(a @ a.T + d * jnp.eye(d, dtype=dtype))
    factor = factor if lower else factor.T
    inverse = linalg.triangular_inverse(factor, lower=lower)
    assert inverse.dtype == dtype
    x = jax.random.normal(jax.random.key(4), (50, d), dtype)
    u = x @ inverse.T
    # the rows solve factor @ u_i = x_i to round-off (cond(factor) is O(1) here)
    tol = 50 * jnp.finfo(dtype).eps * float(jnp.max(jnp.abs(x)))
    np.testing.assert_allclose(np.asarray(u @ factor.T), np.asarray(x), atol=tol)
    reference = jax.scipy.linalg.solve_triangular(factor, x.T, lower=lower).T
    np.testing.assert_allclose(np.asarray(u), np.asarray(reference), atol=tol)


def test_clip_by_norm():
    v = jnp.array([[3.0, 4.0], [0.3, 0.4]])
    np.testing.assert_allclose(linalg.clip_by_norm(v, jnp.asarray(1.0)),
                               [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    np.testing.assert_array_equal(linalg.clip_by_norm(v, jnp.asarray(0.0)), v)


def test_effective_rank_scale_free_and_collapse():
    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute():
        x = jax.random.normal(jax.random.key(1), (300, 5))
        line = jnp.outer(jnp.linspace(-1, 1, 50), jnp.ones(5))
        return (linalg.effective_rank(x), linalg.effective_rank(1e-6 * x),
                linalg.effective_rank(line), linalg.effective_rank(jnp.ones((10, 5))))

    r, r_scaled, r_line, r_constant = compute()
    assert 4.5 < float(r) <= 5.0
    np.testing.assert_allclose(r_scaled, r, rtol=1e-3)
    np.testing.assert_allclose(r_line, 1.0, rtol=1e-4)
    assert float(r_constant) == 0.0


@pytest.mark.parametrize("min_ess", [1.5, 10.0, 50.0])
def test_temper_to_ess_hits_the_target(min_ess, dtype):
    log_w = jax.random.normal(jax.random.key(2), (100,), dtype) * 8.0
    log_w = log_w.at[3].set(-jnp.inf)
    tempered, beta = jax.jit(logspace.temper_to_ess)(log_w, min_ess)
    assert tempered.dtype == dtype and bool(jnp.isneginf(tempered[3]))
    ess = float(jnp.exp(logspace.log_ess(tempered)))
    if float(beta) < 1:
        assert ess >= min_ess * (1 - 1e-3)
        # maximal beta: a little more and the ESS falls below the target
        hotter = jnp.where(jnp.isfinite(log_w), (float(beta) * 1.01) * log_w, -jnp.inf)
        assert float(jnp.exp(logspace.log_ess(hotter))) < min_ess * 1.01
        np.testing.assert_allclose(jax.nn.logsumexp(tempered), 0.0, atol=1e-5)
    else:
        assert ess >= min_ess and tempered is not None
        np.testing.assert_array_equal(tempered, log_w)
