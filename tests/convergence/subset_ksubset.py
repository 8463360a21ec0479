"""Conditional Poisson fits (fit_weights, correlated_k_subset) against the enumerated law.

Targets: marginals ``x`` on m = 8 items, k = 3 (C(8, 3) = 56 subsets), each the inclusion
probabilities of a conditional Poisson law with log-weights ``N(0, 1.2²)`` computed by
enumeration in float64 (NumPy), so an exact fit exists. Everything runs at the defaults (float32,
the dtype's default tolerance ``10⁻⁴``) except ``max_iterations``.

* ``fit_weights``: ``max_i |π_i(θ) − x_i|`` of the returned θ, with π enumerated in float64 (not
  the library's DP), one target per seed; deterministic, so the floor is 0 and ``atol`` is the
  default tolerance (the stopping rule's target).
* ``correlated_k_subset`` (its default ``"cp"`` rounding): one target; the TV between the
  empirical law of 4 000 draws per seed and the maximum-entropy law with marginals x (the
  enumerated law the target came from); the floor is the same TV for 4 000 exact multinomial
  draws.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry, multinomial_tv_floor, tv_counts

M, K = 8, 3
SUBSETS = np.array(list(itertools.combinations(range(M), K)))
DEFAULT_TOLERANCE = 1e-4               # fit_weights' float32 default
BUDGETS = (1, 4, 50)                   # max_iterations; 50 is the default


def law(theta: np.ndarray) -> np.ndarray:
    """``P(A) ∝ Π_{i∈A} e^{θ_i}`` on ``SUBSETS``, enumerated in float64."""
    log_mass = np.asarray(theta, np.float64)[SUBSETS].sum(axis=1)
    probs = np.exp(log_mass - log_mass.max())
    return probs / probs.sum()


def marginals(probs: np.ndarray) -> np.ndarray:
    """Inclusion probabilities of a law on ``SUBSETS``."""
    pi = np.zeros(M)
    np.add.at(pi, SUBSETS.ravel(), np.repeat(probs, K))
    return pi


def _target(seed: int) -> tuple[np.ndarray, np.ndarray]:
    probs = law(np.random.default_rng(seed).normal(scale=1.2, size=M))
    return marginals(probs), probs


# --- fit_weights: a target per seed ----------------------------------------------------------

@functools.cache
def _fit_batch(max_iterations):
    from jaxsample import subset

    return jax.jit(jax.vmap(lambda x: subset.fit_weights(x, K,
                                                         max_iterations=max_iterations)[0]))


def _fit_error(budget, keys) -> np.ndarray:
    seeds = [int(jax.random.randint(k, (), 0, 2**31 - 1)) for k in keys]
    targets = np.stack([_target(s)[0] for s in seeds])
    thetas = np.asarray(_fit_batch(budget)(jnp.asarray(targets, jnp.float32)), np.float64)
    return np.asarray([np.abs(marginals(law(t)) - x).max()
                       for t, x in zip(thetas, targets, strict=True)])


# --- correlated_k_subset: one target, the law of its draws -----------------------------------

ROUND_X, ROUND_LAW = _target(20261244)
NUM_DRAWS = 4_000
_INDEX = np.full(2**M, -1)
_INDEX[(2 ** SUBSETS).sum(axis=1)] = np.arange(len(SUBSETS))


@functools.cache
def _round_batch(max_iterations):
    from jaxsample import subset

    x = jnp.asarray(ROUND_X, jnp.float32)

    def one(key):
        return subset.correlated_k_subset(key, x, K, max_iterations=max_iterations)[0]

    # only the keys are batched: the fit runs once
    return jax.jit(lambda keys: jax.vmap(jax.vmap(one))(
        jax.vmap(lambda k: jax.random.split(k, NUM_DRAWS))(keys)))


def _round_error(budget, keys) -> np.ndarray:
    masks = np.asarray(_round_batch(budget)(keys))               # (seeds, draws, m)
    errors = []
    for seed_masks in masks:
        index = _INDEX[seed_masks @ (2 ** np.arange(M))]
        assert np.all(index >= 0), "a draw is not a 3-subset"
        errors.append(tv_counts(np.bincount(index, minlength=len(SUBSETS)), ROUND_LAW))
    return np.asarray(errors)


ENTRIES = [
    Entry(name="subset.fit_weights/enumerated-marginals", covers=("subset.fit_weights",),
          problem="m = 8, k = 3: marginals of a random conditional Poisson law (log-weights "
                  "N(0, 1.2²)), max|π(θ) − x| of the fitted θ with π enumerated in float64",
          knob="max_iterations", budgets=BUDGETS,
          error=_fit_error,
          floor=lambda keys: np.zeros(len(keys)),
          floor_formula="0 (an exact fit exists); atol = the float32 default tolerance 1e-4",
          atol=DEFAULT_TOLERANCE),
    Entry(name="subset.correlated_k_subset/enumerated-law",
          covers=("subset.correlated_k_subset",),
          problem=f"m = 8, k = 3, one random conditional Poisson target, {NUM_DRAWS} draws per "
                  "seed: TV of the subsets' law against the enumerated maximum-entropy law",
          knob="max_iterations", budgets=BUDGETS,
          error=_round_error,
          floor=lambda keys: multinomial_tv_floor(keys, ROUND_LAW, NUM_DRAWS),
          floor_formula=f"the same TV for {NUM_DRAWS} exact multinomial draws of the "
                        "enumerated law"),
]
