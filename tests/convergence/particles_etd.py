"""Convergence of ETD's defaults and of its Laplace preconditioner, on a correlated Gaussian.

ETD (every option at its default: score-free, 25 proposals, ensemble preconditioner, balanced
Sinkhorn) with 64 particles started at ``N(0, 0.1² I)`` on the correlated Gaussian of the MCMC
entries (its own tests use N(0, I), ill-conditioned diagonal Gaussians and posteriors), budget the
``num_steps`` of :func:`jaxsample.run`; the whitened mean + covariance error against 128 exact
draws. :func:`laplace_preconditioner` on a 3-D correlated Gaussian whose mode and covariance are
known: the error is the whitened distance of the mode plus the relative Frobenius error of
``chol cholᵀ``; deterministic (floor 0), BFGS's default tolerance 1e-6 gives ``atol`` 1e-3.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from convergence import Entry
from convergence.mcmc_mala import exact_floor, gaussian_logdensity, moment_error
from jaxsample.particles import laplace_preconditioner

NUM_PARTICLES = 64


def _etd_error(budget, keys_):
    alg = jaxsample.etd(gaussian_logdensity)

    def one(key):
        k_start, k_run = jax.random.split(key)
        state = alg.init(0.1 * jax.random.normal(k_start, (NUM_PARTICLES, 2)))
        return jaxsample.run(k_run, alg, state, budget)[0].positions

    x = np.asarray(jax.jit(jax.vmap(one))(keys_))
    return np.asarray([moment_error(xi) for xi in x])


MODE3 = np.array([0.5, -1.0, 2.0])
COV3 = np.array([[1.0, 0.6, 0.2], [0.6, 2.0, -0.5], [0.2, -0.5, 0.5]])


def _laplace_error(budget, keys_):
    precision = jnp.asarray(np.linalg.inv(COV3), jnp.float32)

    def logpi(x):
        u = x - jnp.asarray(MODE3, jnp.float32)
        return -0.5 * u @ precision @ u

    fit, _ = laplace_preconditioner(logpi, jnp.zeros(3), max_iterations=budget)
    chol = np.linalg.cholesky(COV3)
    mode_err = np.linalg.norm(np.linalg.solve(chol, np.asarray(fit.mode) - MODE3))
    c = np.asarray(fit.chol, float)
    cov_err = np.linalg.norm(c @ c.T - COV3) / np.linalg.norm(COV3)
    return np.full(len(keys_), mode_err + cov_err)


ENTRIES = [
    Entry(
        name="particles.etd/correlated-gaussian",
        covers=("particles.etd",),
        problem=("N((1, −0.5), [[2, 0.9], [0.9, 1]]), 64 particles from N(0, 0.1² I); "
                 "whitened mean + covariance error"),
        knob="num_steps",
        budgets=(1, 4, 32),
        error=_etd_error,
        floor=lambda keys_: exact_floor(keys_, NUM_PARTICLES),
        floor_formula="the same statistic of 64 exact draws",
    ),
    Entry(
        name="particles.laplace_preconditioner/correlated-gaussian-3d",
        covers=("particles.laplace_preconditioner",),
        problem=("a 3-D correlated Gaussian (known mode and covariance) from 0; whitened mode "
                 "error + relative covariance error of chol cholᵀ"),
        knob="max_iterations",
        budgets=(1, 4, 100),
        error=_laplace_error,
        floor=lambda keys_: np.zeros(len(keys_)),
        floor_formula="0 (a known optimum); atol 1e-3 for BFGS's tolerance 1e-6",
        atol=1e-3,
    ),
]
