"""Contract entries for parallel tempering (jaxsample.mcmc.tempering).

Three rungs on a 1-D double well; the MALA step size at β = 1 is the traced hyper-parameter.
"""

import jax.numpy as jnp

import jaxsample
from contract import BadInput, Entry
from jaxsample.mcmc import parallel_tempering


def _logdensity(x):
    return -jnp.sum((x**2 - 1) ** 2) / 0.2


def _start(dtype, step_size=0.02):
    alg = parallel_tempering(_logdensity, inverse_temperatures=[1.0, 0.4, 0.1],
                             step_size=step_size)
    return alg, alg.init(jnp.ones(2, dtype))


def _run(key, dtype, step_size):
    return jaxsample.run(key, *_start(dtype, step_size), 5)


ENTRIES = [Entry(
    name="mcmc.tempering",
    module="jaxsample.mcmc.tempering",
    build=lambda dtype: lambda key: _run(key, dtype, 0.02),
    covers=("mcmc.parallel_tempering",),
    hyper=lambda dtype: lambda key, step_size: _run(key, dtype, step_size),
    hyper_values=(0.01, 0.02),
    start=_start,
    bad_inputs=(
        BadInput(lambda: parallel_tempering(_logdensity, inverse_temperatures=[0.5, 0.1],
                                            step_size=0.1), ValueError, "inverse_temperatures"),
        BadInput(lambda: parallel_tempering(_logdensity, inverse_temperatures=[1.0, 0.5],
                                            step_size=-0.1), ValueError, "step_size"),
        BadInput(lambda: parallel_tempering(_logdensity, inverse_temperatures=[1.0, 0.5],
                                            step_size=0.1).init(jnp.ones((3, 2))),
                 ValueError, "position"),
    ),
)]
