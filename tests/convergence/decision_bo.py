"""Spherical linear BO (``SphericalLinearBO``, ask/tell; ``run``'s ``num_iterations``): the
best-found gap to a known optimum.

The objective is noisy and linear on the sphere, ``y = aᵀu + ε``, ``ε ~ N(0, 0.05²)``, in
D = 5 with a fixed ``a`` (‖a‖ = 2; the method's tests use D = 3 and 6, noise-free or quadratic
objectives): its maximum on S⁴ is ‖a‖ at ``a/‖a‖``. The error is ``‖a‖ − max_t aᵀu_t`` over the
points evaluated, with the *noise-free* value (the best observed y is biased upward by the
noise), i.e. the simple regret of the best point found. The model and the loop run at their
defaults (prior_scale 1, noise 0.1, Thompson sampling, evidence refits every 10 iterations).

Iteration ``t`` of ``run`` draws with ``fold_in(key, t)`` and nothing in the loop depends on
``num_iterations`` (no trust region by default; refits at fixed iteration numbers), so the first
T iterations of a run are bit for bit the T-iteration run: one run at the largest budget gives
every budget's best-so-far (one compilation; tests/decision/test_bo.py checks the prefix identity).

The floor is 0 (the optimum is attained only in the limit); ``atol = 0.01·‖a‖``: the best point
within 1% of the optimum's value (an angle of 8° to ``a``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry

_DIM = 5
_A = np.array([1.2, -0.4, 0.8, 0.0, -1.2])
_A = 2.0 * _A / np.linalg.norm(_A)
_NOISE = 0.05


_BUDGETS = (8, 32, 128)


@functools.cache
def _best_so_far(keys_bytes: bytes) -> np.ndarray:
    from jaxsample.decision import SphericalLinearBO

    keys = jax.random.wrap_key_data(jnp.asarray(np.frombuffer(keys_bytes, np.uint32)
                                                .reshape(-1, 2)))
    a = jnp.asarray(_A, jnp.float32)

    def one(key):
        key_run, key_noise = jax.random.split(key)

        def objective(u):  # (1, D) points; noise from the point itself, so runs stay pure
            seed = jax.random.fold_in(key_noise, jax.lax.bitcast_convert_type(u[0, 0],
                                                                              jnp.int32))
            return u @ a + _NOISE * jax.random.normal(seed, (u.shape[0],))

        bo = SphericalLinearBO(_DIM)
        _, trace = bo.run(key_run, objective, bo.init(jnp.float32), _BUDGETS[-1])
        return jnp.linalg.norm(a) - jax.lax.cummax(trace.points[:, 0] @ a)

    return np.asarray(jax.jit(jax.vmap(one))(keys), float)


def _error(budget, keys):
    return _best_so_far(np.asarray(jax.random.key_data(keys)).tobytes())[:, budget - 1]


ENTRIES = [
    Entry(
        name="decision.bo/noisy-linear-s4",
        covers=("decision.SphericalLinearBO",),
        problem="y = a.u + N(0, 0.05^2) on S^4, |a| = 2; the error is |a| - max_t a.u_t over the "
                "evaluated points (the best point's noise-free simple regret)",
        knob="num_iterations",
        budgets=_BUDGETS,
        error=_error,
        floor=lambda keys: np.zeros(len(keys)),
        floor_formula="0 (the optimum a/|a| is approached, not attained); atol = 0.01 |a|",
        atol=0.02,
    ),
]
