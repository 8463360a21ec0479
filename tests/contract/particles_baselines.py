"""Contract entries for the particle baselines (``jaxsample.particles.baselines``).

The peers MM-SOLD is compared with, each at the smallest size that runs its code path:
conditional flow matching with smoothing (CFDM) and SVGD in one program (both one-shot), and the
smoothed Langevin sampler (iterative, through ``jaxsample.run``) on the MM-SOLD entry's data.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from contract import KEY, BadInput, Entry
from jaxsample.particles import cfdm_sample, smoothed_langevin, svgd

_DATA = np.random.default_rng(0).standard_normal((12, 2))


def _logdensity(x):
    return -0.5 * jnp.sum(x**2)


def _one_shot(dtype, smoothing):
    def fn(key):
        key_cfdm, key_start = jax.random.split(key)
        start = jax.random.normal(key_start, (6, 2), dtype)
        return (cfdm_sample(key_cfdm, jnp.asarray(_DATA, dtype), num_samples=4,
                            smoothing=smoothing, num_steps=3, num_smoothing_samples=2),
                svgd(_logdensity, start, num_steps=3))

    return fn


def _langevin_start(key_noise, dtype, step_size):
    data = jnp.asarray(_DATA, dtype)
    alg = smoothed_langevin(data, bandwidth=0.3, smoothing=0.2, num_smoothing_samples=2,
                            step_size=step_size, chunk_size=4)
    return alg, alg.init(data[:6], rng_key=key_noise)


def _langevin(key, dtype, step_size):
    key_noise, key_run = jax.random.split(key)
    return jaxsample.run(key_run, *_langevin_start(key_noise, dtype, step_size), 3)


ENTRIES = [
    Entry(
        name="particles.baselines/cfdm_svgd",
        module="jaxsample.particles.baselines",
        build=lambda dtype: _one_shot(dtype, jnp.asarray(0.1, dtype)),
        covers=("particles.cfdm_sample", "particles.svgd"),
        requires=("blackjax",),  # svgd runs BlackJAX's (the test extra)
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=lambda dtype: lambda key, smoothing: _one_shot(dtype, smoothing)(key),
        hyper_values=(0.1, 0.3),
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: cfdm_sample(None, _DATA, num_samples=2, smoothing=0.1), TypeError,
                     "key"),
            BadInput(lambda: cfdm_sample(KEY, _DATA, num_samples=2, smoothing=0.1, num_steps=1),
                     ValueError, "num_steps"),
            BadInput(lambda: svgd(_logdensity, _DATA[:1], num_steps=3), ValueError, "position"),
            BadInput(lambda: svgd(_logdensity, _DATA, num_steps=3, keep_every=2), ValueError,
                     "keep_every"),
        ),
        note="cfdm_sample (4 draws, 3 steps) and svgd (6 particles, 3 Adam steps, "
             "deterministic given its start, drawn from the key): one program, a tuple of "
             "(value, Info); CFDM's smoothing is traced",
    ),
    Entry(
        name="particles.baselines/smoothed_langevin",
        module="jaxsample.particles.baselines",
        build=lambda dtype: lambda key: _langevin(key, dtype, 0.05),
        covers=("particles.smoothed_langevin",),
        hyper=lambda dtype: lambda key, step_size: _langevin(key, dtype, step_size),
        hyper_values=(0.02, 0.05),
        iterative=True,
        start=lambda dtype: _langevin_start(KEY, dtype, 0.05),
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: smoothed_langevin(_DATA, bandwidth=0.0, smoothing=0.1,
                                               step_size=0.01), ValueError, "bandwidth"),
            BadInput(lambda: smoothed_langevin(_DATA, bandwidth=0.3, smoothing=0.1,
                                               step_size=-0.01), ValueError, "step_size"),
        ),
        note="6 particles, 3 steps, chunked (chunk_size=4); the step size is traced and two "
             "values share one compilation of run",
    ),
]
