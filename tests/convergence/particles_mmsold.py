"""Convergence of MM-SOLD, its naive baseline, its start and its large-particle limit, in d = 1.

The problem (MM-SOLD's tests use 2-D Gaussian data and circles): 10 fixed points of a skewed,
bimodal 1-D set, KDE bandwidth ``σ_g = 0.3``, smoothing ``s = 0.2``. MM-SOLD's documented target
is the tilted law ``p* ∝ e^{−V − λu − Λu²/2}`` of its large-particle limit, which
:func:`exact_tilt` computes by quadrature (float64, moment error below 1e-9); the naive
smoothed Langevin baseline targets ``e^{−V}`` itself (``ExactTiltInfo.naive_log_density``). The
statistic: the TV between 16 equal-probability bins of the reference law and the histogram of
2 048 particles after ``num_steps``, started from a unimodal Gaussian with the KDE's mean and
variance (``step_size`` has no default: 0.02, a tenth of the explicit step's stability bound
``2σ_g²/Σ*``); its floor is the same TV of 2 048 exact draws of the binned
law. At B = 2 048 MM-SOLD's finite-B bias and the Leimkuhler–Matthews discretisation bias
(O(h²)) are far below that floor, so the defaults must reach it.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from convergence import Entry, multinomial_tv_floor, tv_counts
from jaxsample.particles import exact_tilt, mmsold, plugin_tilt, sample_kde, smoothed_langevin

DATA = np.array([-2.1, -1.8, -1.6, -1.5, -1.2, 0.6, 0.9, 1.0, 1.4, 2.3])[:, None]
BANDWIDTH, SMOOTHING, STEP_SIZE = 0.3, 0.2, 0.02
NUM_PARTICLES, NUM_BINS = 2048, 16
START_MEAN, START_SD = float(DATA.mean()), float(np.sqrt(DATA.var() + BANDWIDTH**2))

with jax.enable_x64(True):
    _TILT, _REF = exact_tilt(jnp.asarray(DATA, jnp.float64), bandwidth=BANDWIDTH,
                             smoothing=SMOOTHING, grid_size=801)
    GRID = np.asarray(_REF.grid[:, 0])
    TILTED = np.exp(np.asarray(_REF.log_density))
    NAIVE = np.exp(np.asarray(_REF.naive_log_density))
    TILT_MOMENT_ERROR = float(_REF.moment_error)


def _bins(density):
    """Inner edges of ``NUM_BINS`` equal-probability bins of a density on ``GRID``."""
    cdf = np.cumsum(density)
    cdf /= cdf[-1]
    return np.interp(np.arange(1, NUM_BINS) / NUM_BINS, cdf, GRID)


_EQUAL = np.full(NUM_BINS, 1.0 / NUM_BINS)


def _particle_error(constructor, density):
    edges = _bins(density)
    alg = constructor(jnp.asarray(DATA, jnp.float32), bandwidth=BANDWIDTH, smoothing=SMOOTHING,
                      step_size=STEP_SIZE)

    def run(num_steps):
        def one_seed(key):
            k_start, k_noise, k_run = jax.random.split(key, 3)
            # a unimodal start with the target's first two moments: the bimodal shape must
            # be reached by the dynamics (sample_kde would start next to it)
            start = START_MEAN + START_SD * jax.random.normal(k_start, (NUM_PARTICLES, 1))
            state = alg.init(start, rng_key=k_noise)
            return jaxsample.run(k_run, alg, state, num_steps)[0].positions[:, 0]

        return jax.jit(jax.vmap(one_seed))

    def error(budget, keys_):
        x = np.asarray(run(budget)(keys_))
        return np.asarray([tv_counts(np.bincount(np.searchsorted(edges, xi),
                                                 minlength=NUM_BINS), _EQUAL) for xi in x])

    return error


def _kde_error(budget, keys_):
    """sample_kde against its exact law: the KDE's 16 equal-probability bins."""
    kde = np.exp(-0.5 * (GRID[:, None] - DATA[None, :, 0]) ** 2 / BANDWIDTH**2).sum(1)
    edges = _bins(kde)
    out = []
    for k in keys_:
        x, _ = sample_kde(k, jnp.asarray(DATA, jnp.float32), num_samples=budget,
                          bandwidth=BANDWIDTH)
        out.append(tv_counts(np.bincount(np.searchsorted(edges, np.asarray(x)[:, 0]),
                                         minlength=NUM_BINS), _EQUAL))
    return np.asarray(out)


def _exact_tilt_error(budget, keys_):
    """The moment error of the returned tilted law, recomputed from its grid density: the
    criterion ``exact_tilt`` solves for (deterministic: the same value for every key)."""
    tilt, info = exact_tilt(jnp.asarray(DATA, jnp.float32), bandwidth=BANDWIDTH,
                            smoothing=SMOOTHING, max_iterations=budget)
    p = np.exp(np.asarray(info.log_density, float)) * float(info.cell_volume)
    z = np.asarray(info.grid, float)[:, 0]
    mean_target = DATA.mean()
    var_target = DATA.var() + BANDWIDTH**2
    mean = (p * z).sum() / p.sum()
    var = (p * (z - mean_target) ** 2).sum() / p.sum()
    err = max(abs(mean - mean_target), abs(var - var_target))
    return np.full(len(keys_), err)


_PLUGIN_REF = None


def _plugin_error(budget, keys_):
    """Distance of the quadrature plug-in tilt at ``budget`` nodes to the one at 64 nodes
    (the estimand: the plug-in tilt with the exact smoothed potential)."""
    global _PLUGIN_REF
    with jax.enable_x64(True):
        data = jnp.asarray(DATA, jnp.float64)
        if _PLUGIN_REF is None:
            _PLUGIN_REF = plugin_tilt(keys_[0], data, bandwidth=BANDWIDTH, smoothing=SMOOTHING,
                                      num_quadrature=64)[0]
        tilt, _ = plugin_tilt(keys_[0], data, bandwidth=BANDWIDTH, smoothing=SMOOTHING,
                              num_quadrature=budget)
        err = float(jnp.abs(tilt.linear - _PLUGIN_REF.linear).max()
                    + jnp.abs(tilt.quadratic - _PLUGIN_REF.quadratic).max())
    return np.full(len(keys_), err)


def _zeros(keys_):
    return np.zeros(len(keys_))


_PROBLEM = ("10 points of a bimodal 1-D set, σ_g = 0.3, s = 0.2, 2 048 particles from the "
            "KDE's N(mean, var) (unimodal)")
_FLOOR = "TV of 2 048 exact draws of the 16 equal-probability bins (multinomial, p = 1/16)"

ENTRIES = [
    Entry(
        name="particles.mmsold/bimodal-1d",
        covers=("particles.mmsold",),
        problem=_PROBLEM + "; TV against the exact tilted law p* (exact_tilt, float64)",
        knob="num_steps",
        budgets=(2, 20, 200),
        error=_particle_error(mmsold, TILTED),
        floor=lambda keys_: multinomial_tv_floor(keys_, _EQUAL, NUM_PARTICLES),
        floor_formula=_FLOOR,
    ),
    Entry(
        name="particles.smoothed_langevin/bimodal-1d",
        covers=("particles.smoothed_langevin",),
        problem=_PROBLEM + "; TV against e^{−V} (its target; exact_tilt's naive density)",
        knob="num_steps",
        budgets=(2, 20, 200),
        error=_particle_error(smoothed_langevin, NAIVE),
        floor=lambda keys_: multinomial_tv_floor(keys_, _EQUAL, NUM_PARTICLES),
        floor_formula=_FLOOR,
    ),
    Entry(
        name="particles.sample_kde/bimodal-1d",
        covers=("particles.sample_kde",),
        problem="the Gaussian KDE of the 10 points (σ_g = 0.3); TV of 16 equal-probability bins",
        knob="num_samples",
        budgets=(256, 1024, 4096),
        error=_kde_error,
        floor=lambda keys_: multinomial_tv_floor(keys_, _EQUAL, 4096),
        floor_formula="TV of 4 096 exact draws of the 16 equal-probability bins",
    ),
    Entry(
        name="particles.exact_tilt/bimodal-1d",
        covers=("particles.exact_tilt",),
        problem=("the tilt matching the KDE's mean and variance (float32); max abs moment error "
                 "of the returned grid law"),
        knob="max_iterations",
        budgets=(1, 2, 50),
        error=_exact_tilt_error,
        floor=_zeros,
        floor_formula="0 (a known optimum); atol 1e-4, ten times float32's default tol",
        atol=1e-4,
    ),
    Entry(
        name="particles.plugin_tilt/bimodal-1d",
        covers=("particles.plugin_tilt",),
        problem=("the plug-in Stein tilt with Gauss–Hermite smoothing (float64); max abs "
                 "distance to the 64-node tilt"),
        knob="num_quadrature",
        budgets=(2, 8, 32),
        error=_plugin_error,
        floor=_zeros,
        floor_formula="0 (the estimand: the quadrature limit); atol 1e-6",
        atol=1e-6,
    ),
]
