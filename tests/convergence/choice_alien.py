"""Alien-space tilted sampling (tilted_sample) against the enumerated tilted law.

A world of 8 atoms, sets of 3 (56 sets), a random symmetric coherence matrix (entries
``N(0, 0.8²)``) and 3 communities with ``N(0, 1.5²)`` logits, the default exponents ``a = b = 1``:
the law ``π(x) ∝ p̃_coh(x)·A(x)^{-1}`` is enumerated in float64 with NumPy. The error is the TV
distance between the empirical law of the draws and ``π``; the floor is the same TV for exact
multinomial draws of the same number.

* ``method="exact"`` (the default) at growing ``num_samples``.
* ``method="sir"`` at growing ``num_proposals`` (2 000 draws each; the largest budget is the
  default ``max(64·n, 4096)``): SIR's law approaches ``π`` as ``m`` grows, so its TV falls to the
  floor of 2 000 exact draws.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from convergence import Entry, multinomial_tv_floor, tv_counts

NUM_ATOMS, SIZE, NUM_COMMUNITIES = 8, 3, 3
_RNG = np.random.default_rng(20261209)
_UPPER = np.triu(_RNG.normal(scale=0.8, size=(NUM_ATOMS, NUM_ATOMS)))
COHERENCE = _UPPER + np.triu(_UPPER, 1).T
AVAILABILITY = _RNG.normal(scale=1.5, size=(NUM_COMMUNITIES, NUM_ATOMS))
SETS = np.array(list(itertools.combinations(range(NUM_ATOMS), SIZE)))


def _law() -> np.ndarray:
    coherence = sum(COHERENCE[SETS[:, i], SETS[:, j]]
                    for i in range(SIZE) for j in range(i, SIZE))
    log_p = AVAILABILITY - scipy.special.logsumexp(AVAILABILITY, axis=1, keepdims=True)
    availability = scipy.special.logsumexp(log_p[:, SETS].sum(axis=-1), axis=0) - np.log(
        NUM_COMMUNITIES)
    return scipy.special.softmax(coherence - availability)


LAW = _law()
_PLACES = NUM_ATOMS ** np.arange(SIZE)[::-1]
_INDEX = np.full(NUM_ATOMS**SIZE, -1)
_INDEX[SETS @ _PLACES] = np.arange(len(SETS))


def _tv(draws) -> np.ndarray:
    """TV of each seed's draws ``(seeds, n, L)`` (ascending atoms) against the exact law."""
    index = _INDEX[np.asarray(draws) @ _PLACES]
    assert np.all(index >= 0), "a draw is not a set of distinct ascending atoms"
    return np.asarray([tv_counts(np.bincount(i, minlength=len(SETS)), LAW) for i in index])


def _draw(keys, **kwargs):
    from jaxsample import choice

    coherence = jnp.asarray(COHERENCE, jnp.float32)
    availability = jnp.asarray(AVAILABILITY, jnp.float32)
    draws, _ = jax.vmap(lambda k: choice.tilted_sample(k, coherence, availability, **kwargs))(
        keys)
    return draws


EXACT_BUDGETS = (500, 5_000, 50_000)  # num_samples
SIR_SAMPLES = 2_000
SIR_BUDGETS = (500, 8_000, 128_000)  # num_proposals; 128 000 = the default 64·num_samples

ENTRIES = [
    Entry(name="choice.tilted_sample/exact-enumerated", covers=("choice.tilted_sample",),
          problem="C(8, 3) = 56 sets, random pairwise coherence and 3 communities, a = b = 1: "
                  "TV of the draws' law against the enumerated law",
          knob="num_samples", budgets=EXACT_BUDGETS,
          error=lambda budget, keys: _tv(_draw(keys, num_samples=budget)),
          floor=lambda keys: multinomial_tv_floor(keys, LAW, EXACT_BUDGETS[-1]),
          floor_formula="the same TV for num_samples exact multinomial draws"),
    Entry(name="choice.tilted_sample/sir-proposals", covers=("choice.tilted_sample",),
          problem=f"the same law by method='sir', {SIR_SAMPLES} draws: TV against the "
                  "enumerated law as num_proposals grows",
          knob="num_proposals", budgets=SIR_BUDGETS,
          error=lambda budget, keys: _tv(_draw(keys, num_samples=SIR_SAMPLES, method="sir",
                                               num_proposals=budget)),
          floor=lambda keys: multinomial_tv_floor(keys, LAW, SIR_SAMPLES),
          floor_formula=f"the same TV for {SIR_SAMPLES} exact multinomial draws"),
]
