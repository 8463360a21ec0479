"""Convergence of the stopped chain: :func:`adaptive_stop` with the exact rule on a finite chain.

The problem: a Metropolis random walk on 8 states (±1 on a cycle, lazy 1/2) with the target
``π ∝ (1, 2, 4, 3, 1, 0.5, 2, 6)``, started from ``p₀ ∝ (6, 3, 1, 1, 1, 1, 1, 1)`` (the kernel's
own tests use a 30-state bimodal chain). The stopping probabilities are the exact minimal-flow
rule ``σ* = π/G*`` from :func:`optimal_stop_tabular` (float64), so the terminal law is exactly
``π``; the budget is :func:`jaxsample.run`'s ``num_steps`` and the error the TV between ``π`` and
the histogram of 4 000 chains' positions after that many steps (a chain still running counts
where it is). The floor: TV of 4 000 exact categorical draws of ``π``. ``max_steps`` (the cap)
is set far beyond the budgets so it never binds.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from convergence import Entry, multinomial_tv_floor, tv_counts
from jaxsample.mcmc import adaptive_stop, optimal_stop_tabular

NUM_STATES = 8
PI = np.array([1, 2, 4, 3, 1, 0.5, 2, 6], float)
PI /= PI.sum()
P0 = np.array([6, 3, 1, 1, 1, 1, 1, 1], float)
P0 /= P0.sum()
NUM_CHAINS = 4000


def _kernel():
    k = np.zeros((NUM_STATES, NUM_STATES))
    for i in range(NUM_STATES):
        for j in ((i + 1) % NUM_STATES, (i - 1) % NUM_STATES):
            k[i, j] = 0.25 * min(1.0, PI[j] / PI[i])
        k[i, i] = 1.0 - k[i].sum()
    return k


KERNEL = _kernel()
with jax.enable_x64(True):
    _SIGMA, _INFO = optimal_stop_tabular(jnp.asarray(KERNEL), jnp.asarray(P0), jnp.asarray(PI))
SIGMA = np.asarray(_SIGMA, np.float32)
EXPECTED_LENGTH = float(_INFO.expected_length)


def _tabular_walk():
    """The kernel as a one-chain SamplingAlgorithm over an int32 state."""
    log_k = jnp.log(jnp.asarray(KERNEL, jnp.float32))

    def step(key, state):
        return jax.random.categorical(key, log_k[state]).astype(jnp.int32), {}

    return jaxsample.SamplingAlgorithm(lambda x: jnp.asarray(x, jnp.int32), step)


_WRAPPED = adaptive_stop(_tabular_walk(), lambda x: jnp.asarray(SIGMA)[x], max_steps=100_000)


def _run(num_steps):
    def one_seed(key):
        k_start, k_run = jax.random.split(key)
        x0 = jax.random.categorical(k_start, jnp.log(jnp.asarray(P0, jnp.float32)),
                                    shape=(NUM_CHAINS,))
        states = jax.vmap(_WRAPPED.init)(x0)
        final, _ = jax.vmap(lambda k, s: jaxsample.run(k, _WRAPPED, s, num_steps))(
            jax.random.split(k_run, NUM_CHAINS), states)
        return final.inner

    return jax.jit(jax.vmap(one_seed))


def _error(budget, keys_):
    x = np.asarray(_run(budget)(keys_))
    return np.asarray([tv_counts(np.bincount(xi, minlength=NUM_STATES), PI) for xi in x])


ENTRIES = [
    Entry(
        name="mcmc.adaptive_stop/exact-rule-8-state-walk",
        covers=("mcmc.adaptive_stop",),
        problem=("lazy Metropolis walk on an 8-cycle, π ∝ (1, 2, 4, 3, 1, 0.5, 2, 6) from "
                 f"p₀ ∝ (6, 3, 1, 1, 1, 1, 1, 1), exact σ* (E[L*] = {EXPECTED_LENGTH:.1f}); TV of "
                 "4 000 chains' positions after num_steps"),
        knob="num_steps",
        budgets=(8, 64, 512),
        error=_error,
        floor=lambda keys_: multinomial_tv_floor(keys_, PI, NUM_CHAINS),
        floor_formula="TV of 4 000 exact categorical draws of π against π",
    ),
]

NO_BUDGET = {
    "mcmc.sample_multilevel": (
        "max_steps caps each level's moves (a truncation guard reported as StopInfo.truncated); "
        "the terminal law is set by the trained net, whose budget is train_stopping's num_steps"),
}
