"""Convergence of the MCMC base kernels: MALA and parallel tempering on a correlated Gaussian.

The problem: ``N(μ, Σ)`` in d = 2 with ``μ = (1, −0.5)``, ``Σ = [[2, 0.9], [0.9, 1]]``
(correlation 0.64; the kernels' own tests use N(0, I) and double wells), 1 000 independent chains
started at ``N(0, 0.1² I)`` (far too narrow: the chains must grow their spread), budget = the
``num_steps`` of :func:`jaxsample.run`. The statistic is affine-invariant: with ``L`` the Cholesky
factor of ``Σ``, ``‖L⁻¹(x̄ − μ)‖ + ‖L⁻¹(Ĉ − Σ)L⁻ᵀ‖_F`` of the chains' final positions; its floor
is the same statistic of 1 000 exact draws. ``step_size`` has no default: 0.5 (about a quarter of
the largest variance, acceptance near 0.8).
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from convergence import Entry
from jaxsample.mcmc import mala, parallel_tempering

MEAN = np.array([1.0, -0.5])
COV = np.array([[2.0, 0.9], [0.9, 1.0]])
NUM_CHAINS = 1000
STEP_SIZE = 0.5


def moment_error(x) -> float:
    """``‖L⁻¹(x̄ − μ)‖ + ‖L⁻¹(Ĉ − Σ)L⁻ᵀ‖_F`` of the rows of ``x``."""
    x = np.asarray(x, float)
    chol = np.linalg.cholesky(COV)
    mean_err = np.linalg.solve(chol, x.mean(0) - MEAN)
    c = np.cov(x, rowvar=False)
    w = np.linalg.solve(chol, np.linalg.solve(chol, c - COV).T)
    return float(np.linalg.norm(mean_err) + np.linalg.norm(w))


def gaussian_logdensity(x):
    precision = jnp.asarray(np.linalg.inv(COV), x.dtype)
    u = x - jnp.asarray(MEAN, x.dtype)
    return -0.5 * u @ precision @ u


def exact_floor(keys_, num=NUM_CHAINS):
    chol = np.linalg.cholesky(COV)
    out = []
    for k in keys_:
        z = np.asarray(jax.random.normal(k, (num, 2)), float)
        out.append(moment_error(MEAN + z @ chol.T))
    return np.asarray(out)


def _chains(alg, position_of, num_steps):
    def one_seed(key):
        k_start, k_run = jax.random.split(key)
        x0 = 0.1 * jax.random.normal(k_start, (NUM_CHAINS, 2))
        states = jax.vmap(alg.init)(x0)
        final, _ = jax.vmap(lambda k, s: jaxsample.run(k, alg, s, num_steps))(
            jax.random.split(k_run, NUM_CHAINS), states)
        return position_of(final)

    return jax.jit(jax.vmap(one_seed))


def _error(alg, position_of):
    def error(budget, keys_):
        x = _chains(alg, position_of, budget)(keys_)
        return np.asarray([moment_error(xi) for xi in np.asarray(x)])
    return error


_FLOOR = "the same statistic of 1 000 exact draws of N(μ, Σ) (numpy Cholesky transform)"
_PROBLEM = ("N((1, −0.5), [[2, 0.9], [0.9, 1]]), 1 000 chains from N(0, 0.1² I); "
            "whitened mean error + whitened covariance error (Frobenius)")

ENTRIES = [
    Entry(
        name="mcmc.mala/correlated-gaussian",
        covers=("mcmc.mala",),
        problem=_PROBLEM + "; step_size 0.5",
        knob="num_steps",
        budgets=(8, 32, 128),
        error=_error(mala(gaussian_logdensity, step_size=STEP_SIZE),
                     lambda s: s.position),
        floor=exact_floor,
        floor_formula=_FLOOR,
    ),
    Entry(
        name="mcmc.parallel_tempering/correlated-gaussian",
        covers=("mcmc.parallel_tempering",),
        problem=_PROBLEM + "; rung 0 of the ladder β = (1, 0.5, 0.25), step_size 0.5",
        knob="num_steps",
        budgets=(8, 32, 128),
        error=_error(parallel_tempering(gaussian_logdensity,
                                        inverse_temperatures=jnp.array([1.0, 0.5, 0.25]),
                                        step_size=STEP_SIZE),
                     lambda s: s.position[:, 0, :]),
        floor=exact_floor,
        floor_formula=_FLOOR,
    ),
]
