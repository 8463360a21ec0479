"""Contract entries for MALA (jaxsample.mcmc.mala), the MCMC family's base kernel.

One chain on a 3-D Gaussian written over a dict position (the pytree path); the step size is the
traced hyper-parameter.
"""

import jax.numpy as jnp
import numpy as np

import jaxsample
from contract import BadInput, Entry
from jaxsample.mcmc import mala


def _logdensity(p):
    return -0.5 * (jnp.sum(p["a"] ** 2) + p["b"] ** 2)


def _start(dtype):
    return {"a": jnp.asarray([0.5, -0.5], dtype), "b": jnp.asarray(1.0, dtype)}


def _start_state(dtype, step_size=0.5):
    alg = mala(_logdensity, step_size=step_size)
    return alg, alg.init(_start(dtype))


def _run(key, dtype, step_size):
    return jaxsample.run(key, *_start_state(dtype, step_size), 5)


ENTRIES = [Entry(
    name="mcmc.mala",
    module="jaxsample.mcmc.mala",
    build=lambda dtype: lambda key: _run(key, dtype, 0.5),
    covers=("mcmc.mala",),
    hyper=lambda dtype: lambda key, step_size: _run(key, dtype, step_size),
    hyper_values=(0.3, 0.5),
    start=_start_state,
    bad_inputs=(
        BadInput(lambda: mala(_logdensity, step_size=0.0), ValueError, "step_size"),
        BadInput(lambda: mala(3.0, step_size=0.5), TypeError, "logdensity_fn"),
        BadInput(lambda: mala(_logdensity, step_size=0.5, score_fn="grad"), ValueError,
                 "score_fn"),
        BadInput(lambda: mala(_logdensity, step_size=0.5).init(
            {"a": np.array([np.nan, 0.0]), "b": np.float32(0.0)}), ValueError, "position"),
        BadInput(lambda: mala(lambda p: jnp.log(p["b"]), step_size=0.5).init(
            {"b": jnp.asarray(-1.0)}), ValueError, "logdensity_fn"),
    ),
)]
