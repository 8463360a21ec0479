"""Convergence of the particle baselines: σ-CFDM's Euler flow and BlackJAX SVGD.

σ-CFDM at ``smoothing = 0`` is the exact closed-form flow of the empirical law: its endpoint is
uniform over the training points, so the statistic is the TV between that uniform law and the
histogram of 2 000 samples assigned to their nearest point (8 points of a skewed 2-D set; the
tests use Gaussian data), budget ``num_steps``; floor: 2 000 exact uniform draws.
SVGD (defaults: Adam at 0.1, RBF kernel at the median heuristic) on the correlated Gaussian of
the MCMC entries with 100 particles from ``N(0, 0.1² I)``, budget ``num_steps``; the whitened
moment error against 100 exact draws.
"""

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry, multinomial_tv_floor, tv_counts
from convergence.mcmc_mala import exact_floor, gaussian_logdensity, moment_error
from jaxsample.particles import cfdm_sample, svgd

POINTS = np.array([[0.0, 0.0], [1.0, 0.2], [2.5, -0.5], [-1.0, 1.5], [0.5, 2.0],
                   [-2.0, -1.0], [1.5, 1.5], [3.0, 1.0]])
NUM_SAMPLES = 2000
_UNIFORM = np.full(len(POINTS), 1.0 / len(POINTS))


def _cfdm_error(budget, keys_):
    run = jax.jit(jax.vmap(lambda k: cfdm_sample(k, jnp.asarray(POINTS, jnp.float32),
                                                 num_samples=NUM_SAMPLES, smoothing=0.0,
                                                 num_steps=budget)[0]))
    x = np.asarray(run(keys_))
    out = []
    for xi in x:
        nearest = np.argmin(((xi[:, None, :] - POINTS[None]) ** 2).sum(-1), axis=1)
        out.append(tv_counts(np.bincount(nearest, minlength=len(POINTS)), _UNIFORM))
    return np.asarray(out)


NUM_PARTICLES = 100


def _svgd_error(budget, keys_):
    def one(k):
        x0 = 0.1 * jax.random.normal(k, (NUM_PARTICLES, 2))
        return svgd(gaussian_logdensity, x0, num_steps=budget)[0]

    x = np.asarray(jax.jit(jax.vmap(one))(keys_))
    return np.asarray([moment_error(xi) for xi in x])


ENTRIES = [
    Entry(
        name="particles.cfdm_sample/memorising-flow",
        covers=("particles.cfdm_sample",),
        problem=("smoothing 0 on 8 points of a skewed 2-D set (the exact endpoint: uniform on "
                 "them); TV of 2 000 samples' nearest-point histogram"),
        knob="num_steps",
        budgets=(4, 16, 64),
        error=_cfdm_error,
        floor=lambda keys_: multinomial_tv_floor(keys_, _UNIFORM, NUM_SAMPLES),
        floor_formula="TV of 2 000 exact uniform draws over the 8 points",
    ),
    Entry(
        name="particles.svgd/correlated-gaussian",
        covers=("particles.svgd",),
        problem=("N((1, −0.5), [[2, 0.9], [0.9, 1]]), 100 particles from N(0, 0.1² I); "
                 "whitened mean + covariance error"),
        knob="num_steps",
        budgets=(25, 100, 400),
        error=_svgd_error,
        floor=lambda keys_: exact_floor(keys_, NUM_PARTICLES),
        floor_formula="the same statistic of 100 exact draws",
        requires=("blackjax",),
    ),
]
