"""Best-of-N Monte Carlo (bon_simulate, default ``method="maxima"``) against the closed form.

Correct rewards ``Gumbel(0.4, 1)``, incorrect ``GPD(0, 0.8, 0.15)`` (a heavier, Pareto-type tail),
``p = 0.35``, ``N = 50``: the exact accuracy ``a`` comes from :func:`jaxsample.risk.bon_accuracy`
(its quadrature error estimate is asserted below 1e-5). The error is ``|â − a|``; the floor is the
same statistic for ``num_trials`` exact Bernoulli(a) trials (``|Bin(T, a)/T − a|``), i.e. what a
perfect simulator scores.
"""

from __future__ import annotations

import jax
import numpy as np

from convergence import Entry

P_CORRECT, N = 0.35, 50
BUDGETS = (1_000, 10_000, 100_000)  # num_trials


def _laws():
    from jaxsample.risk import GPD, Gumbel

    return Gumbel(0.4, 1.0), GPD(0.0, 0.8, 0.15)


def _exact() -> float:
    from jaxsample import risk

    accuracy, info = risk.bon_accuracy(N, P_CORRECT, *_laws())
    assert float(info.error_estimate) < 1e-5, float(info.error_estimate)
    return float(accuracy)


def _error(budget, keys):
    from jaxsample import risk

    correct, incorrect = _laws()
    accuracy, _ = jax.vmap(lambda k: risk.bon_simulate(k, N, P_CORRECT, correct, incorrect,
                                                       num_trials=budget))(keys)
    return np.abs(np.asarray(accuracy, float) - _exact())


def _floor(keys):
    exact, top = _exact(), BUDGETS[-1]
    out = []
    for k in keys:
        rng = np.random.default_rng(int(jax.random.randint(k, (), 0, 2**31 - 1)))
        out.append(abs(rng.binomial(top, exact) / top - exact))
    return np.asarray(out)


ENTRIES = [
    Entry(name="risk.bon_simulate/gumbel-vs-gpd", covers=("risk.bon_simulate",),
          problem=f"Acc({N}) with p = {P_CORRECT}, correct Gumbel(0.4, 1), incorrect "
                  "GPD(0, 0.8, 0.15); exact value by bon_accuracy's quadrature",
          knob="num_trials", budgets=BUDGETS, error=_error, floor=_floor,
          floor_formula="|Bin(T, a)/T - a| for T exact Bernoulli(a) trials, a the exact accuracy",
          atol=1e-5),
]
