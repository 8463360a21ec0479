"""Contract entries for learned trajectory termination (jaxsample.mcmc.stopping).

A stopped MALA chain batch (σ = 0.3, cap 4) on a 2-D Gaussian; the MALA step size is the traced
hyper-parameter (it lives in the wrapped algorithm's step pytree).
"""

import jax.numpy as jnp
import numpy as np

from contract import BadInput, Entry
from jaxsample.mcmc import adaptive_stop, mala, sample_until_stopped


def _logdensity(x):
    return -0.5 * jnp.sum(x * x)


def _stop(x):
    return 0.3


def _run(key, dtype, step_size):
    wrapped = adaptive_stop(mala(_logdensity, step_size=step_size), _stop, max_steps=4)
    start = jnp.asarray(np.linspace(-1.0, 1.0, 6).reshape(3, 2), dtype)
    return sample_until_stopped(key, wrapped, start)


def _build(dtype):
    return lambda key: _run(key, dtype, 0.5)


def _hyper(dtype):
    return lambda key, step_size: _run(key, dtype, step_size)


_ALG = mala(_logdensity, step_size=0.5)

ENTRIES = [Entry(
    name="mcmc.stopping",
    module="jaxsample.mcmc.stopping",
    build=_build,
    hyper=_hyper,
    hyper_values=(0.3, 0.5),
    bad_inputs=(
        BadInput(lambda: adaptive_stop(_ALG, _stop, max_steps=0), ValueError, "max_steps"),
        BadInput(lambda: adaptive_stop(_ALG, 0.3, max_steps=3), TypeError, "stop_prob_fn"),
        BadInput(lambda: mala(_logdensity, step_size=-1.0), ValueError, "step_size"),
        BadInput(lambda: sample_until_stopped(None, adaptive_stop(_ALG, _stop, max_steps=2),
                                              np.zeros((2, 2))), TypeError, "key"),
    ),
    note="lengths and truncation flags are integers/bools compared exactly; the step size of "
         "the wrapped MALA is the traced float.",
)]
