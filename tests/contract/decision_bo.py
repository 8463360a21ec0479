"""Contract entry: spherical linear BO (``jaxsample.decision.bo``), one tell and one batch ask."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample.decision import SphericalLinearBO

_DIM = 6  # the shapes of tests/decision/test_bo.py (shared compilations)
_X = np.random.default_rng(0).normal(size=(_DIM + 1, _DIM))
_Y = _X @ np.linspace(-1.0, 1.0, _DIM) / np.linalg.norm(_X, axis=1)


def _fn(dtype, noise=0.1):
    def fn(key, noise=noise):
        bo = SphericalLinearBO(_DIM, noise=noise, radius=2.0)
        state = bo.tell(bo.init(dtype), jnp.asarray(_X, dtype), jnp.asarray(_Y, dtype))
        points = bo.ask(key, state)
        return points, state

    return fn


def _hyper(dtype):
    return lambda key, h: _fn(dtype)(key, noise=h)


_BO = SphericalLinearBO(_DIM)
_STATE = _BO.init(jnp.float32)
_E = np.eye(_DIM, dtype=np.float32)[:2]

ENTRIES = [
    Entry(
        name="decision.bo",
        module="jaxsample.decision.bo",
        build=_fn,
        covers=("decision.SphericalLinearBO",),
        hyper=_hyper,
        hyper_values=(0.1, 0.3),
        bad_inputs=(
            BadInput(lambda: SphericalLinearBO(1), ValueError, "dim"),
            BadInput(lambda: SphericalLinearBO(3, noise=0.0), ValueError, "noise"),
            BadInput(lambda: SphericalLinearBO(3, prior_scale=-1.0), ValueError, "prior_scale"),
            BadInput(lambda: _BO.tell(_STATE, _E, np.array([1.0, np.nan])), ValueError, "y"),
            BadInput(lambda: _BO.tell(_STATE, np.ones((2, 3)), np.ones(2)), ValueError, "x"),
            BadInput(lambda: _BO.tell(_STATE, np.zeros((2, _DIM)), np.ones(2)), ValueError,
                     "zero row"),
            BadInput(lambda: _BO.tell(_STATE, _E, np.ones(3)), ValueError, "y must have"),
            BadInput(lambda: _BO.ask(KEY, _STATE, acquisition="ei"), ValueError, "acquisition"),
            BadInput(lambda: _BO.ask(KEY, _STATE, acquisition="ucb", trust_region=0.3),
                     ValueError, "trust_region"),
            BadInput(lambda: _BO.ask(KEY, _STATE, trust_region=4.0), ValueError,
                     "trust_region angle"),
            BadInput(lambda: _BO.ask(None, _STATE), TypeError, "key"),
        ),
        note="fn(key) builds the model (noise traced), tells D + 1 points and asks a Thompson "
             "point; the info is the BOState (its nonfinite flag). The trust region, the exact "
             "posterior, the closed-form acquisitions and the loop are tested in "
             "tests/decision/test_bo.py",
    ),
]
