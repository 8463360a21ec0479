"""Contract entries for MM-SOLD (jaxsample.particles.mmsold): a tiny chunked 2-D system; its
start (``sample_kde``) and its large-particle limit (``plugin_tilt``, ``exact_tilt`` on a 9 × 9
grid)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from contract import KEY, BadInput, Entry
from jaxsample.particles import exact_tilt, plugin_tilt, sample_kde

_DATA = np.random.default_rng(0).standard_normal((12, 2))


def _data(dtype):
    return jnp.asarray(_DATA, dtype)


def _algorithm(key_start, dtype, step_size):
    data = _data(dtype)
    key_start, key_noise = jax.random.split(key_start)
    alg = jaxsample.mmsold(data, bandwidth=0.3, smoothing=0.2, num_smoothing_samples=2,
                           step_size=step_size, chunk_size=4)
    start, _ = sample_kde(key_start, data, num_samples=6, bandwidth=0.3)
    return alg, alg.init(start, rng_key=key_noise)


def _run(key, dtype, step_size):
    key_start, key_run = jax.random.split(key)
    return jaxsample.run(key_run, *_algorithm(key_start, dtype, step_size), 3)


def _build(dtype):
    return lambda key: _run(key, dtype, 0.05)


def _hyper(dtype):
    return lambda key, step_size: _run(key, dtype, step_size)


def _alg(**kwargs):
    return jaxsample.mmsold(_DATA, **({"bandwidth": 0.3, "smoothing": 0.1, "step_size": 0.01}
                                      | kwargs))


def _kde(dtype):
    return lambda key: sample_kde(key, _data(dtype), num_samples=5, bandwidth=0.3)


def _kde_hyper(dtype):
    return lambda key, bandwidth: sample_kde(key, _data(dtype), num_samples=5,
                                             bandwidth=bandwidth)


def _plugin(dtype):
    return lambda key: plugin_tilt(key, _data(dtype), bandwidth=0.3, smoothing=0.2,
                                   num_smoothing_samples=4, chunk_size=4)


def _plugin_hyper(dtype):
    return lambda key, smoothing: plugin_tilt(key, _data(dtype), bandwidth=0.3,
                                              smoothing=smoothing, num_smoothing_samples=4,
                                              chunk_size=4)


def _exact(dtype):
    # deterministic: the key is unused
    return lambda key: exact_tilt(_data(dtype)[:6], bandwidth=0.5, smoothing=0.2, grid_size=9,
                                  num_quadrature=3, max_iterations=8)


def _exact_hyper(dtype):
    return lambda key, smoothing: exact_tilt(_data(dtype)[:6], bandwidth=0.5, smoothing=smoothing,
                                             grid_size=9, num_quadrature=3, max_iterations=8)


ENTRIES = [Entry(
    name="particles.mmsold",
    module="jaxsample.particles.mmsold",
    build=_build,
    covers=("particles.mmsold", "particles.sample_kde"),
    hyper=_hyper,
    hyper_values=(0.02, 0.05),
    iterative=True,
    start=lambda dtype: _algorithm(KEY, dtype, 0.05),
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
), Entry(
    name="particles.mmsold/sample_kde",
    module="jaxsample.particles.mmsold",
    build=_kde,
    covers=("particles.sample_kde",),
    hyper=_kde_hyper,
    hyper_values=(0.1, 0.3),
    bad_inputs=(
        BadInput(lambda: sample_kde(None, _DATA, num_samples=3, bandwidth=0.3), TypeError, "key"),
        BadInput(lambda: sample_kde(jax.random.key(0), _DATA, num_samples=0, bandwidth=0.3),
                 ValueError, "num_samples"),
    ),
), Entry(
    name="particles.tilt/plugin",
    module="jaxsample.particles.mmsold",
    build=_plugin,
    covers=("particles.plugin_tilt",),
    hyper=_plugin_hyper,
    hyper_values=(0.1, 0.2),
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: plugin_tilt(None, _DATA, bandwidth=0.3, smoothing=0.1), TypeError,
                 "key"),
        BadInput(lambda: plugin_tilt(jax.random.key(0), _DATA, bandwidth=0.3, smoothing=-1.0),
                 ValueError, "smoothing"),
    ),
), Entry(
    name="particles.tilt/exact",
    module="jaxsample.particles.mmsold",
    build=_exact,
    covers=("particles.exact_tilt",),
    hyper=_exact_hyper,
    hyper_values=(0.1, 0.2),
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: exact_tilt(np.ones((4, 3)), bandwidth=0.3, smoothing=0.1), ValueError,
                 "d <= 2"),
        BadInput(lambda: exact_tilt(_DATA, bandwidth=0.3, smoothing=0.1, grid_size=2),
                 ValueError, "grid_size"),
    ),
    note="deterministic (the key is unused); a reference Newton solve, tiny grid",
)]
