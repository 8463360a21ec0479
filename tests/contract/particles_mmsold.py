"""Contract entries for MM-SOLD (jaxsample.particles.mmsold): a tiny chunked 2-D system."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from contract import BadInput, Entry
from jaxsample.particles import sample_kde

_DATA = np.random.default_rng(0).standard_normal((12, 2))


def _data(dtype):
    return jnp.asarray(_DATA, dtype)


def _run(key, dtype, step_size):
    data = _data(dtype)
    key_start, key_noise, key_run = jax.random.split(key, 3)
    alg = jaxsample.mmsold(data, bandwidth=0.3, smoothing=0.2, num_smoothing_samples=2,
                           step_size=step_size, chunk_size=4)
    state = alg.init(sample_kde(key_start, data, 6, bandwidth=0.3), rng_key=key_noise)
    return jaxsample.run(key_run, alg, state, 3)


def _build(dtype):
    return lambda key: _run(key, dtype, 0.05)


def _hyper(dtype):
    return lambda key, step_size: _run(key, dtype, step_size)


def _alg(**kwargs):
    return jaxsample.mmsold(_DATA, **({"bandwidth": 0.3, "smoothing": 0.1, "step_size": 0.01}
                                      | kwargs))


ENTRIES = [Entry(
    name="particles.mmsold",
    module="jaxsample.particles.mmsold",
    build=_build,
    hyper=_hyper,
    hyper_values=(0.02, 0.05),
    iterative=True,
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: _alg(bandwidth=0.0), ValueError, "bandwidth"),
        BadInput(lambda: _alg(step_size=float("nan")), ValueError, "step_size"),
        BadInput(lambda: _alg(smoothing="big"), TypeError, "smoothing"),
        BadInput(lambda: _alg(num_smoothing_samples=3), ValueError, "num_smoothing_samples"),
        BadInput(lambda: _alg(integrator="rk4"), ValueError, "integrator"),
        BadInput(lambda: _alg(chunk_size=0), ValueError, "chunk_size"),
        BadInput(lambda: jaxsample.mmsold(np.ones((5, 2), np.int32), bandwidth=0.3,
                                          smoothing=0.1, step_size=0.01), TypeError, "data"),
        BadInput(lambda: _alg().init(_DATA[:2]), ValueError, r"B >= d \+ 1"),
    ),
    note="step_size is the traced hyper-parameter; bandwidth and smoothing are traced the "
         "same way (the moment targets are recomputed from the traced bandwidth).",
)]
