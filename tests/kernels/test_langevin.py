"""Tests of the shared Metropolis-adjusted Langevin step (kernels.langevin)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample.kernels import langevin

# jitted once per drift function: eager op-by-op dispatch would dominate the test time
mala_step = jax.jit(langevin.mala_step, static_argnums=4)

_COV = np.array([[1.0, 0.8], [0.8, 2.0]])
_PRECISION = np.linalg.inv(_COV)
_CLIP = 0.5


def _fn(z, dtype):
    """log N(z; 0, Σ) and a clipped score (norm <= 0.5): a drift that is not the score."""
    precision = jnp.asarray(_PRECISION, dtype)
    score = -z @ precision
    logp = 0.5 * jnp.sum(score * z, axis=-1)
    norm = jnp.linalg.norm(score, axis=-1, keepdims=True)
    return logp, score * jnp.minimum(jnp.ones_like(norm), _CLIP / norm)


@functools.partial(jax.jit, static_argnames=("num_steps", "corrected"))
def _chains(key, z, beta, *, num_steps, corrected=True):
    fn = functools.partial(_fn, dtype=z.dtype)
    logp, drift = fn(z)
    h = jnp.asarray(0.6, z.dtype)

    def body(carry, k):
        z, logp, drift = carry
        if corrected:
            move = langevin.mala_step(k, z, logp, drift, fn, h, inverse_temperature=beta)
            return (move.position, move.logdensity, move.drift), jnp.mean(move.acceptance_rate)
        # the same proposal accepted always (ULA with the clipped drift): the power check
        z = z + h * beta * drift + jnp.sqrt(2 * h) * jax.random.normal(k, z.shape, z.dtype)
        return (z,) + fn(z), jnp.ones((), z.dtype)

    (z, _, _), rate = jax.lax.scan(body, (z, logp, drift), jax.random.split(key, num_steps))
    return z, jnp.mean(rate)


def _z_scores(samples, cov):
    """z-scores of the sample mean and the sample covariance entries of iid N(0, cov) draws.

    ``Var(S_ij) = (Σ_ii Σ_jj + Σ_ij²)/n`` for Gaussian draws with known zero mean.
    """
    n = samples.shape[0]
    mean = samples.mean(axis=0)
    z_mean = mean / np.sqrt(np.diag(cov) / n)
    second = samples.T @ samples / n
    sd = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    z_cov = (second - cov) / sd
    return np.concatenate([z_mean, z_cov[np.triu_indices(2)]])


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_any_drift_leaves_the_target_invariant(dtype, beta):
    # 20 000 independent chains started at exact draws of π^β = N(0, Σ/β), 10 steps each with a
    # clipped drift (not the score) and a step where acceptance is far from 1. If π^β is
    # invariant the end points are iid N(0, Σ/β): five z-scores, each |z| < 4.4 (two-sided
    # p = 1e-5; family-wise < 1e-4).
    n = 20_000
    cov = _COV / beta
    start = jax.random.normal(jax.random.key(0), (n, 2), dtype) @ jnp.asarray(
        np.linalg.cholesky(cov).T, dtype)
    z, rate = _chains(jax.random.key(1), start, jnp.asarray(beta, dtype), num_steps=10)
    assert z.dtype == dtype
    assert 0.2 < float(rate) < 0.95  # the correction is active
    assert np.max(np.abs(_z_scores(np.asarray(z, np.float64), cov))) < 4.4
    # power: the uncorrected chain with the same drift and step drifts away from π^β
    biased, _ = _chains(jax.random.key(1), start, jnp.asarray(beta, dtype), num_steps=10,
                        corrected=False)
    assert np.max(np.abs(_z_scores(np.asarray(biased, np.float64), cov))) > 10


def test_nonfinite_proposals_are_rejected_and_flagged():
    def fn(z):
        first = z[..., 0]
        # +inf right of 0.5, NaN left of -0.5, a NaN drift above 0.5 on the second coordinate
        logp = jnp.where(first > 0.5, jnp.inf, jnp.where(first < -0.5, jnp.nan, -first**2))
        drift = jnp.where((z[..., 1:] > 0.5), jnp.nan, -z)
        return logp, drift

    z = jnp.zeros((2000, 2))
    move = mala_step(jax.random.key(0), z, *fn(z), fn, 0.5)
    logp_new, drift_new = fn(z + 0.0 + jnp.sqrt(1.0) * jax.random.normal(
        jax.random.split(jax.random.key(0))[0], z.shape))
    expected_bad = ~(jnp.isfinite(logp_new) & jnp.all(jnp.isfinite(drift_new), axis=-1))
    assert bool(jnp.any(expected_bad)) and bool(jnp.any(~expected_bad))
    np.testing.assert_array_equal(move.nonfinite, expected_bad)
    assert not bool(jnp.any(move.is_accepted & move.nonfinite))
    assert bool(jnp.all(move.acceptance_rate[move.nonfinite] == 0))
    assert bool(jnp.all(jnp.isfinite(move.position))) and bool(jnp.all(jnp.isfinite(move.drift)))
    assert bool(jnp.any(move.is_accepted))


def test_zero_drift_is_random_walk_metropolis():
    # b = 0: the proposal is symmetric, so log α is the density ratio alone
    fn = lambda z: (-0.5 * jnp.sum(z**2, axis=-1), jnp.zeros_like(z))
    z = jnp.ones((500, 3))
    move = mala_step(jax.random.key(3), z, *fn(z), fn, 0.3)
    proposal = z + jnp.sqrt(0.6) * jax.random.normal(jax.random.split(jax.random.key(3))[0],
                                                     z.shape)
    ratio = fn(proposal)[0] - fn(z)[0]
    np.testing.assert_allclose(move.acceptance_rate, jnp.exp(jnp.minimum(ratio, 0.0)),
                               rtol=1e-5, atol=1e-7)


def test_one_point_and_per_point_step_sizes():
    fn = lambda z: (-0.5 * jnp.sum(z**2, axis=-1), -z)
    point = jnp.ones(3)
    move = mala_step(jax.random.key(0), point, *fn(point), fn, 0.5)
    assert move.position.shape == (3,) and move.is_accepted.shape == ()
    batch = jnp.ones((4, 3))
    move = mala_step(jax.random.key(0), batch, *fn(batch), fn, jnp.array([0.1, 0.2, 0.3, 0.4]),
                     inverse_temperature=jnp.array([1.0, 0.5, 0.3, 0.1]))
    assert move.position.shape == (4, 3) and move.acceptance_rate.shape == (4,)
