"""Convergence entries of the Gaussian samplers (``jaxsample.gaussian``): the smoothed-score
(resolvent) sampler, its given-noise map, and the Chebyshev, Lanczos and Cholesky baselines.

One problem with an exact answer that the family's tests do not use: N(m, Λ⁻¹) in d = 5 with a
rotated precision of spectrum {1, 2.7, 7.1, 18.8, 50} (κ = 50) and a mean of size 2. The
statistic is the whitened mean-and-covariance error of a batch of draws,
``‖Ĉ_w − I‖_F + ‖m̂_w‖`` with ``y = Λ^{1/2}(x − m)``, and its floor the same statistic of as many
exact draws ``m + Λ^{-1/2} z``. Budgets: ``num_samples`` where it is the only knob (the resolvent
sampler at ``tol = 1e-3``, Chebyshev, Cholesky: the error must fall with the floor and meet it),
``bits`` per coordinate of the answers for the given-noise map (dithered answers add noise that
must vanish as bits grow) and ``num_steps`` for Lanczos (exact at d steps).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry
from jaxsample import gaussian

DIM = 5
_rng = np.random.default_rng(20261207)
_Q, _ = np.linalg.qr(_rng.standard_normal((DIM, DIM)))
_LAM = np.geomspace(1.0, 50.0, DIM)
PRECISION = (_Q * _LAM) @ _Q.T
PRECISION = 0.5 * (PRECISION + PRECISION.T)
SQRT_PRECISION = (_Q * np.sqrt(_LAM)) @ _Q.T
INV_SQRT = (_Q / np.sqrt(_LAM)) @ _Q.T
MEAN = 2.0 * _rng.standard_normal(DIM) / np.sqrt(DIM)
SPECTRUM = dict(lambda_min=1.0, lambda_max=50.0, tol=1e-3)
FIXED_SAMPLES = 4096


def _error(x):
    y = (x - jnp.asarray(MEAN, x.dtype)[None]) @ jnp.asarray(SQRT_PRECISION, x.dtype)
    centred = y - y.mean(0)[None]
    cov = centred.T @ centred / (y.shape[0] - 1)
    return jnp.linalg.norm(cov - jnp.eye(DIM, dtype=y.dtype)) + jnp.linalg.norm(y.mean(0))


def _floor(num_samples):
    def floor(keys):
        def one(key):
            z = jax.random.normal(key, (num_samples, DIM))
            return _error(jnp.asarray(MEAN, z.dtype)[None] + z @ jnp.asarray(INV_SQRT, z.dtype))
        return np.asarray(jax.jit(jax.vmap(one))(keys))
    return floor


def _oracle():
    return gaussian.SmoothedScoreOracle(jnp.asarray(PRECISION, jnp.float32),
                                        jnp.asarray(MEAN, jnp.float32))


def _batched(draw):
    """``error(budget, keys)`` from ``draw(key, budget) -> samples``, one jit over the keys."""
    def error(budget, keys):
        return np.asarray(jax.jit(jax.vmap(lambda k: _error(draw(k, budget))))(keys))
    return error


def _resolvent(key, num_samples):
    return gaussian.sample(key, _oracle(), mean=jnp.asarray(MEAN, jnp.float32),
                           num_samples=num_samples, **SPECTRUM)[0]


def _transform(key, bits):
    noise, dither = jax.random.split(key)
    z = jax.random.normal(noise, (FIXED_SAMPLES, DIM))
    return gaussian.transform_noise(dither, _oracle(), z, mean=jnp.asarray(MEAN, jnp.float32),
                                    bits=bits, **SPECTRUM)[0]


def _score(x):
    return -jnp.asarray(PRECISION, x.dtype) @ (x - jnp.asarray(MEAN, x.dtype))


def _chebyshev(key, num_samples):
    return gaussian.chebyshev_sample(key, _score, mean=jnp.asarray(MEAN, jnp.float32),
                                     num_samples=num_samples, **SPECTRUM)[0]


def _lanczos(key, num_steps):
    return gaussian.lanczos_sample(key, _score, mean=jnp.asarray(MEAN, jnp.float32),
                                   num_steps=num_steps, num_samples=FIXED_SAMPLES)[0]


def _cholesky(key, num_samples):
    return gaussian.cholesky_sample(key, jnp.asarray(PRECISION, jnp.float32),
                                    mean=jnp.asarray(MEAN, jnp.float32),
                                    num_samples=num_samples)[0]


_SIZES = (256, 1024, 4096)
_PROBLEM = ("N(m, Λ⁻¹), d = 5, rotated precision with spectrum geomspace(1, 50), ‖m‖ ≈ 2; "
            "exact answer: the Gaussian itself")
_FORMULA = ("‖Ĉ_w − I‖_F + ‖m̂_w‖ (y = Λ^{1/2}(x − m)) of as many exact draws m + Λ^{-1/2} z "
            "as the largest budget")

ENTRIES = [
    Entry(
        name="gaussian.sample/rotated-kappa-50",
        covers=("gaussian.sample",),
        problem=_PROBLEM + "; tol = 1e-3, exact answers (bits=None), the elliptic rule",
        knob="num_samples",
        budgets=_SIZES,
        error=_batched(_resolvent),
        floor=_floor(_SIZES[-1]),
        floor_formula=_FORMULA,
    ),
    Entry(
        name="gaussian.transform_noise/bits",
        covers=("gaussian.transform_noise",),
        problem=_PROBLEM + f"; {FIXED_SAMPLES} noise rows, tol = 1e-3, dithered b-bit answers",
        knob="bits",
        budgets=(3, 6, 12),
        error=_batched(_transform),
        floor=_floor(FIXED_SAMPLES),
        floor_formula=_FORMULA,
    ),
    Entry(
        name="gaussian.chebyshev_sample/rotated-kappa-50",
        covers=("gaussian.chebyshev_sample",),
        problem=_PROBLEM + "; tol = 1e-3",
        knob="num_samples",
        budgets=_SIZES,
        error=_batched(_chebyshev),
        floor=_floor(_SIZES[-1]),
        floor_formula=_FORMULA,
    ),
    Entry(
        name="gaussian.lanczos_sample/steps",
        covers=("gaussian.lanczos_sample",),
        problem=_PROBLEM + f"; {FIXED_SAMPLES} samples (exact at num_steps = d)",
        knob="num_steps",
        budgets=(1, 3, 5),
        error=_batched(_lanczos),
        floor=_floor(FIXED_SAMPLES),
        floor_formula=_FORMULA,
    ),
    Entry(
        name="gaussian.cholesky_sample/rotated-kappa-50",
        covers=("gaussian.cholesky_sample",),
        problem=_PROBLEM,
        knob="num_samples",
        budgets=_SIZES,
        error=_batched(_cholesky),
        floor=_floor(_SIZES[-1]),
        floor_formula=_FORMULA,
    ),
]
