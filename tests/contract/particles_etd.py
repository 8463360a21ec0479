"""Contract entries for ETD (jaxsample.particles.etd): a tiny balanced, score-guided system (its
helpers are shared by the entries of ETD's option objects, particles_options.py and
particles_preconditioners.py)."""

import jax
import jax.numpy as jnp

import jaxsample
from contract import KEY, BadInput, Entry
from jaxsample.particles import Sinkhorn


def _logdensity(x):
    return -0.5 * jnp.sum(x**2)


def _start(key, dtype):
    return 2.0 * jax.random.normal(key, (8, 2), dtype)


def _score(x):
    return -x


def _algorithm(key_init, dtype, epsilon, **options):
    alg = jaxsample.etd(_logdensity, score_fn=_score, num_proposals=3, epsilon=epsilon,
                        sinkhorn=Sinkhorn(tolerance=1e-3), **options)
    return alg, alg.init(_start(key_init, dtype))


def _run(key, dtype, epsilon, **options):
    key_init, key_run = jax.random.split(key)
    return jaxsample.run(key_run, *_algorithm(key_init, dtype, epsilon, **options), 3)


def _build(dtype):
    return lambda key: _run(key, dtype, 0.1)


def _hyper(dtype):
    # the same structure as _build: one compilation of run serves both
    return lambda key, epsilon: _run(key, dtype, epsilon)


_X0 = jnp.ones((6, 2))


ENTRIES = [Entry(
    name="particles.etd",
    module="jaxsample.particles.etd",
    build=_build,
    covers=("particles.etd",),
    hyper=_hyper,
    hyper_values=(0.1, 0.3),
    iterative=True,
    start=lambda dtype: _algorithm(KEY, dtype, 0.1),
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: jaxsample.etd(_logdensity, num_proposals=0), ValueError,
                 "num_proposals"),
        BadInput(lambda: jaxsample.etd(_logdensity, epsilon=0.0), ValueError, "epsilon"),
        BadInput(lambda: jaxsample.etd(_logdensity, step_fraction=1.5), ValueError,
                 "step_fraction"),
        BadInput(lambda: jaxsample.etd(_logdensity, coupling="exact"), ValueError, "coupling"),
        BadInput(lambda: jaxsample.etd("not a function"), TypeError, "logdensity_fn"),
        BadInput(lambda: jaxsample.etd(_logdensity).init(_X0.at[1, 1].set(jnp.nan)),
                 ValueError, "position"),
        BadInput(lambda: jaxsample.etd(_logdensity).init(_X0[0]), ValueError, "position"),
        BadInput(lambda: jaxsample.etd(lambda x: -0.5 * x**2).init(_X0), ValueError,
                 "logdensity_fn"),
    ),
    note="epsilon is the traced hyper-parameter; proposal_step, step_fraction, score_clip and "
         "the option objects' floats are traced the same way (their own entries trace one "
         "each).",
)]
