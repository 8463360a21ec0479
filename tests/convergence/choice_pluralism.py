"""Value priorities: the conditional-logit fits (fit_value_priorities,
bootstrap_value_priorities) against the exact penalised maximiser, and sample_choices against
its exact law.

The fits: 3 options, 3 principles, 60 dilemmas with Gaussian annotations, choices drawn from
``θ = (1.5, −0.5, 0.8)``. An estimator's error against the truth is sampling error no iteration
cap changes, so the error is ``max_p |θ̂_p − θ*_p|`` against the exact minimiser ``θ*`` of the
same convex penalised objective (float64 BFGS with its analytic gradient to ``gtol = 1e-12``).
The floor is 0; ``atol = 2e-3``: the fit stops when successive iterates move by less than
``tolerance·(1 + |θ|) = 1e-4·(1 + |θ|)`` in float32, and the objective's round-off limits any
float32 minimiser to ``sqrt(2ε|f|/f'') ≈ 1e-3`` (``|f| ≈ 1``, ``f'' ≳ 0.2`` per decision).
For the bootstrap, the error also counts 1 unless every resampled fit met its criterion
(``info.solver``), at the default 200 resamples.

sample_choices: 6 dilemmas x 4 options under fixed priorities; per-dilemma TV of the empirical
law of ``num_samples`` draws against the exact softmax; the floor is that TV for exact
multinomial draws.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.special

from convergence import Entry, multinomial_tv_floor, tv_counts

NUM_DILEMMAS, NUM_OPTIONS, THETA = 60, 3, np.array([1.5, -0.5, 0.8])
L2 = 1.0  # the default penalty
ATOL = 2e-3
FIT_BUDGETS = (1, 4, 100)  # max_iterations; 100 is the default


def _seed(key) -> int:
    return int(jax.random.randint(key, (), 0, 2**31 - 1))


@functools.cache
def _problem(seed: int):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(NUM_DILEMMAS, NUM_OPTIONS, THETA.size))
    logits = features @ THETA
    probs = scipy.special.softmax(logits, axis=-1)
    choices = np.array([rng.choice(NUM_OPTIONS, p=p) for p in probs])
    return features, choices


def _exact(features, choices) -> np.ndarray:
    """The exact minimiser of the penalised negative log-likelihood per decision."""
    onehot = np.eye(NUM_OPTIONS)[choices]

    def objective(theta):
        logits = features @ theta
        log_probs = logits - scipy.special.logsumexp(logits, axis=-1, keepdims=True)
        value = (-np.sum(onehot * log_probs) + 0.5 * L2 * theta @ theta) / choices.size
        grad = (np.einsum("jk,jkp->p", np.exp(log_probs) - onehot, features)
                + L2 * theta) / choices.size
        return value, grad

    best = scipy.optimize.minimize(objective, np.zeros(THETA.size), jac=True, method="BFGS",
                                   options=dict(gtol=1e-12, maxiter=1000))
    return best.x


def _data(keys):
    problems = [_problem(_seed(k)) for k in keys]
    features = np.stack([f for f, _ in problems])
    choices = np.stack([c for _, c in problems])
    exact = np.stack([_exact(f, c) for f, c in problems])
    return jnp.asarray(features, jnp.float32), jnp.asarray(choices, jnp.int32), exact


def _fit_error(budget, keys):
    from jaxsample import choice

    features, choices, exact = _data(keys)
    theta, _ = jax.vmap(lambda c, f: choice.fit_value_priorities(
        c, f, max_iterations=budget))(choices, features)
    return np.abs(np.asarray(theta, float) - exact).max(axis=1)


def _bootstrap_error(budget, keys):
    from jaxsample import choice

    features, choices, exact = _data(keys)
    theta, info = jax.vmap(lambda k, c, f: choice.bootstrap_value_priorities(
        k, c, f, max_iterations=budget))(keys, choices, features)
    failed = ~np.asarray(info.solver.converged)
    return np.abs(np.asarray(theta, float) - exact).max(axis=1) + failed


def _zeros(keys):
    return np.zeros(len(keys))


# sample_choices: fixed annotations and priorities, the exact law in float64
_CHOICE_FEATURES = np.random.default_rng(20261207).normal(size=(6, 4, 3))
_CHOICE_THETA = np.array([0.9, -1.2, 0.4])
_CHOICE_LAW = scipy.special.softmax(_CHOICE_FEATURES @ _CHOICE_THETA, axis=-1)
SAMPLE_BUDGETS = (300, 3_000, 30_000)  # num_samples


def _sample_error(budget, keys):
    from jaxsample import choice

    features = jnp.asarray(_CHOICE_FEATURES, jnp.float32)
    draws, _ = jax.vmap(lambda k: choice.sample_choices(
        k, jnp.asarray(_CHOICE_THETA, jnp.float32), features, num_samples=budget))(keys)
    draws = np.asarray(draws)  # (seeds, n, J)
    counts = (draws[..., None] == np.arange(4)).sum(axis=1)  # (seeds, J, K)
    return np.asarray([tv_counts(c, _CHOICE_LAW) for c in counts])


def _sample_floor(keys):
    return multinomial_tv_floor(keys, _CHOICE_LAW, SAMPLE_BUDGETS[-1])


_PROBLEM = (f"conditional logit, {NUM_DILEMMAS} dilemmas x {NUM_OPTIONS} options, theta = "
            f"{tuple(THETA.tolist())}, l2 = {L2}: max |theta - theta*| against the exact penalised "
            "maximiser of the same choices")
_FLOOR = ("0: the exact maximiser (float64 BFGS, gtol 1e-12); atol 2e-3 = the float32 fit's "
          "stopping rule and sqrt(2 eps32 |f| / f'') resolution")

ENTRIES = [
    Entry(name="choice.fit_value_priorities/exact-optimum",
          covers=("choice.fit_value_priorities",), problem=_PROBLEM, knob="max_iterations",
          budgets=FIT_BUDGETS, error=_fit_error, floor=_zeros, floor_formula=_FLOOR, atol=ATOL),
    Entry(name="choice.bootstrap_value_priorities/exact-optimum",
          covers=("choice.bootstrap_value_priorities",),
          problem=_PROBLEM + "; + 1 unless all 200 resampled fits met their criterion",
          knob="max_iterations", budgets=FIT_BUDGETS, error=_bootstrap_error, floor=_zeros,
          floor_formula=_FLOOR, atol=ATOL),
    Entry(name="choice.sample_choices/softmax-law", covers=("choice.sample_choices",),
          problem="6 dilemmas x 4 options, fixed priorities: per-dilemma TV of the draws' law "
                  "against the exact softmax",
          knob="num_samples", budgets=SAMPLE_BUDGETS, error=_sample_error, floor=_sample_floor,
          floor_formula="the same TV for num_samples exact multinomial draws per dilemma"),
]
