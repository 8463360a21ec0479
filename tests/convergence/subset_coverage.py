"""Stable maximum coverage (max_coverage_relaxation, stable_max_coverage) against an exactly
solved relaxation.

The problems: random incidences ``B`` (each element in each set with probability 0.3) with
element weights ``U(0.5, 2)``, ``k = 3``. The exact answer is the regularised
relaxation's optimum ``Φ* = max_{x ∈ Δ_k} Σ_e w_e min(1, (Bx)_e) + reg·H(x)``, found by
minimising its smooth convex dual ``D(τ) = Σ_e w_e (1 − τ_e) + ψ(Bᵀ(w ⊙ τ))`` over the box
``τ ∈ [0, 1]^n`` with SciPy's L-BFGS-B in float64 (NumPy, independent of the library's mirror
ascent), and certified by its primal ``x* = Π(Bᵀ(w ⊙ τ*) / reg)``: ``D(τ*) − Φ(x*) <= 10⁻⁶·Φ*``
(about ``10⁻⁸`` here), checked at import.

* ``max_coverage_relaxation`` (``reg = 0.4``): the relative suboptimality ``(Φ* − Φ(x)) / Φ*``
  of the returned ``x`` (evaluated in float64), one random 30 × 9 instance per seed, at growing
  ``num_steps`` caps; deterministic, so the floor is 0 and ``atol`` is the default relative-gap
  tolerance ``10⁻³`` (the stopping rule bounds exactly this quantity), plus the certificate's
  ``10⁻⁶``.
* ``stable_max_coverage`` (``reg = 2``, where ``x*`` lies in (0.14, 0.86)): one 24 × 7
  instance; the rounding's law is the conditional Poisson (maximum-entropy) law on the
  C(7, 3) = 35 subsets with marginals ``x*``, enumerated. The error
  is the TV between the empirical law of 4 000 draws per seed and that law; the floor is the
  same TV for 4 000 exact multinomial draws.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

from convergence import Entry, multinomial_tv_floor, tv_counts

K, REG, DENSITY = 3, 0.4, 0.3         # REG: the relaxation entry's
CERTIFICATE = 1e-6          # relative primal-dual gap of the exact solve


def _kl_project(log_y: np.ndarray, k: int) -> np.ndarray:
    """``x = min(1, c·y)`` with ``Σx = k`` (iterated capping, as exact as the sum)."""
    capped = np.zeros(log_y.shape, bool)
    while True:
        free = log_y[~capped]
        top = free.max()
        shift = np.log(k - capped.sum()) - top - np.log(np.exp(free - top).sum())
        grown = capped | (shift + log_y > 0)
        if np.array_equal(grown, capped):
            return np.minimum(np.exp(shift + log_y), 1.0)
        capped = grown


def _entropy(x: np.ndarray) -> float:
    x = x[x > 0]
    return float(-np.sum(x * np.log(x)))


def objective(incidence, weights, reg, x) -> float:
    """``Φ(x) = Σ_e w_e min(1, (Bx)_e) + reg·H(x)`` in float64."""
    x = np.asarray(x, np.float64)
    return float(weights @ np.minimum(1, incidence @ x)) + reg * _entropy(x)


def exact_relaxation(incidence, weights, reg, k=K) -> tuple[float, np.ndarray]:
    """``(Φ*, x*)`` by L-BFGS-B on the dual, certified by the primal-dual gap."""
    incidence = np.asarray(incidence, np.float64)
    weights = np.asarray(weights, np.float64)

    def dual(tau):
        g = incidence.T @ (weights * tau)
        x = _kl_project(g / reg, k)
        value = np.sum(weights * (1 - tau)) + g @ x + reg * _entropy(x)
        return value, weights * (incidence @ x) - weights

    n = incidence.shape[0]
    result = optimize.minimize(dual, np.full(n, 0.5), jac=True, method="L-BFGS-B",
                               bounds=[(0, 1)] * n,
                               options=dict(ftol=1e-15, gtol=1e-12, maxiter=10_000))
    x = _kl_project(incidence.T @ (weights * result.x) / reg, k)
    upper, lower = float(result.fun), objective(incidence, weights, reg, x)
    assert -1e-12 * upper <= upper - lower <= CERTIFICATE * upper, (upper, lower)
    return upper, x


# --- max_coverage_relaxation: a random instance per seed ------------------------------------

RELAX_SHAPE = (30, 9)
RELAX_BUDGETS = (4, 32, 1024)          # num_steps caps; these solves stop near 100-300 steps


def _instance(key) -> tuple[np.ndarray, np.ndarray]:
    return _seeded_instance(int(jax.random.randint(key, (), 0, 2**31 - 1)))


@functools.cache
def _seeded_instance(seed):
    rng = np.random.default_rng(seed)
    incidence = rng.random(RELAX_SHAPE) < DENSITY
    incidence[rng.integers(RELAX_SHAPE[0]), :] = True       # no set is empty
    weights = rng.uniform(0.5, 2.0, RELAX_SHAPE[0])
    return incidence, weights, exact_relaxation(incidence, weights, REG)[0]


@functools.cache
def _relax_batch(num_steps):
    from jaxsample import subset

    def one(incidence, weights):
        return subset.max_coverage_relaxation(incidence, K, reg=REG, weights=weights,
                                              num_steps=num_steps)

    return jax.jit(jax.vmap(one))


def _relaxation_error(budget, keys) -> np.ndarray:
    instances = [_instance(k) for k in keys]
    incidence = jnp.asarray(np.stack([b for b, _, _ in instances]), jnp.float32)
    weights = jnp.asarray(np.stack([w for _, w, _ in instances]), jnp.float32)
    xs, _ = _relax_batch(budget)(incidence, weights)
    errors = []
    for (b, w, best), x in zip(instances, np.asarray(xs, np.float64), strict=True):
        errors.append((best - objective(b.astype(float), w, REG, x)) / best)
    return np.asarray(errors)


# --- stable_max_coverage: one instance, the rounding's law ----------------------------------

_RNG = np.random.default_rng(20261244)
STABLE_INCIDENCE = _RNG.random((24, 7)) < DENSITY
STABLE_WEIGHTS = _RNG.uniform(0.5, 2.0, 24)
STABLE_REG = 2.0                        # x* in (0.14, 0.86): every subset has mass
SUBSETS = np.array(list(itertools.combinations(range(7), K)))
NUM_DRAWS = 4_000
STABLE_BUDGETS = (2, 16, 1024)          # num_steps caps; the solve stops near 100 steps


def _conditional_poisson_law(x: np.ndarray) -> np.ndarray:
    """The maximum-entropy law on ``SUBSETS`` with marginals x: exact-coordinate iterations on
    the enumerated law, to ``max|π − x| < 1e-12``; sets with ``x_i = 1`` (the relaxation's
    capped sets) are in every subset of positive mass."""
    forced = x >= 1 - 1e-12
    allowed = forced[SUBSETS].sum(axis=1) == forced.sum()
    free = ~forced
    safe = np.where(free, x, 0.5)
    target = np.where(free, np.log(safe) - np.log1p(-safe), 0.0)
    theta = target.copy()
    for _ in range(500):
        log_mass = np.where(allowed, theta[SUBSETS].sum(axis=1), -np.inf)
        probs = np.exp(log_mass - log_mass.max())
        probs /= probs.sum()
        pi = np.zeros(x.size)
        np.add.at(pi, SUBSETS.ravel(), np.repeat(probs, K))
        if np.abs(pi - x).max() < 1e-12:
            return probs
        theta += np.where(free, 0.5 * (target - np.log(np.where(free, pi, 0.5))
                                       + np.log1p(-np.where(free, pi, 0.5))), 0.0)
    raise AssertionError("the enumerated fit did not converge")


_, STABLE_X = exact_relaxation(STABLE_INCIDENCE, STABLE_WEIGHTS, STABLE_REG)
STABLE_LAW = _conditional_poisson_law(STABLE_X)
_INDEX = np.full(2**7, -1)
_INDEX[(2 ** SUBSETS).sum(axis=1)] = np.arange(len(SUBSETS))


@functools.cache
def _stable_batch(num_steps):
    from jaxsample import subset

    incidence = jnp.asarray(STABLE_INCIDENCE)
    weights = jnp.asarray(STABLE_WEIGHTS, jnp.float32)

    def one(key):
        return subset.stable_max_coverage(key, incidence, K, reg=STABLE_REG, weights=weights,
                                          num_steps=num_steps)[0]

    # the draw keys are the only batched input: the relaxation and the fit are solved once
    return jax.jit(lambda keys: jax.vmap(jax.vmap(one))(
        jax.vmap(lambda k: jax.random.split(k, NUM_DRAWS))(keys)))


def _stable_error(budget, keys) -> np.ndarray:
    masks = np.asarray(_stable_batch(budget)(keys))           # (seeds, draws, m)
    errors = []
    for seed_masks in masks:
        index = _INDEX[seed_masks @ (2 ** np.arange(7))]
        assert np.all(index >= 0), "a draw is not a 3-subset"
        errors.append(tv_counts(np.bincount(index, minlength=len(SUBSETS)), STABLE_LAW))
    return np.asarray(errors)


ENTRIES = [
    Entry(name="subset.max_coverage_relaxation/exact-dual",
          covers=("subset.max_coverage_relaxation",),
          problem="random 30 x 9 incidences (density 0.3, weights U(0.5, 2)), k = 3, reg = 0.4: "
                  "relative suboptimality (Φ* − Φ(x)) / Φ* against the optimum of the dual "
                  "solved by L-BFGS-B in float64",
          knob="num_steps", budgets=RELAX_BUDGETS,
          error=_relaxation_error,
          floor=lambda keys: np.zeros(len(keys)),
          floor_formula="0 (an optimum); atol = the default relative-gap tolerance 1e-3 plus "
                        "the exact solve's certificate 1e-6",
          atol=1e-3 + CERTIFICATE),
    Entry(name="subset.stable_max_coverage/rounding-law",
          covers=("subset.stable_max_coverage",),
          problem=f"a 24 x 7 incidence, k = 3, reg = 2, {NUM_DRAWS} draws per seed: TV of the "
                  "subsets' law against the conditional Poisson law with the exact relaxed "
                  "marginals x* (35 subsets, enumerated)",
          knob="num_steps", budgets=STABLE_BUDGETS,
          error=_stable_error,
          floor=lambda keys: multinomial_tv_floor(keys, STABLE_LAW, NUM_DRAWS),
          floor_formula=f"the same TV for {NUM_DRAWS} exact multinomial draws of the "
                        "enumerated law"),
]
