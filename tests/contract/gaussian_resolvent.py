"""Contract entry: the smoothed-score Gaussian sampler (``jaxsample.gaussian.resolvent``)."""

import jax.numpy as jnp

from contract import KEY, BadInput, Entry
from jaxsample.gaussian import resolvent

_LAM = (1.0, 3.0, 10.0)
_SPECTRUM = dict(lambda_min=1.0, lambda_max=10.0, tol=1e-3)


def _mean(dtype):
    return jnp.asarray([0.5, -1.0, 2.0], dtype)


def _dense(dtype):
    mean = _mean(dtype)
    oracle = resolvent.SmoothedScoreOracle(jnp.diag(jnp.asarray(_LAM, dtype)), mean)
    return lambda key: resolvent.sample(key, oracle, mean=mean, num_samples=4, **_SPECTRUM)


def _dithered(dtype):
    mean = _mean(dtype)
    oracle = resolvent.SmoothedScoreOracle(jnp.diag(jnp.asarray(_LAM, dtype)), mean)
    z = jnp.asarray([[1.0, -0.5, 0.25], [0.0, 2.0, -1.0]], dtype)
    return lambda key: resolvent.transform_noise(key, oracle, z, mean=mean, bits=6, **_SPECTRUM)


def _call(**change):
    mean = _mean(jnp.float32)
    oracle = resolvent.SmoothedScoreOracle(jnp.diag(jnp.asarray(_LAM)), mean)
    kwargs = dict(mean=mean, num_samples=2, **_SPECTRUM) | change
    key = kwargs.pop("key", KEY)
    return lambda: resolvent.sample(key, oracle, **kwargs)


_NOTE = ("sample(key, smoothed_score_fn, *, mean | dim, lambda_min, lambda_max, tol, "
         "num_samples, bits=None, rule='elliptic') -> (x, GaussianInfo). No traced "
         "hyper-parameter: lambda_min, lambda_max, tol and rule fix the number of quadrature "
         "levels (a static shape); the precision and the mean are arrays inside the oracle "
         "pytree, so a new precision of the same shape reuses the compilation "
         "(tests/gaussian/test_gaussian.py). The matrix-free oracle (lineax CG in every query) "
         "is tested there, not here: its compilations would double this entry's cost.")

ENTRIES = [
    Entry(
        name="gaussian.resolvent",
        module="jaxsample.gaussian.resolvent",
        build=_dense,
        covers=("gaussian.sample",),
        bad_inputs=(
            BadInput(_call(num_samples=0), ValueError, "num_samples"),
            BadInput(_call(num_samples=2.0), TypeError, "num_samples"),
            BadInput(_call(lambda_min=0.0), ValueError, "lambda_min"),
            BadInput(_call(lambda_min=20.0), ValueError, "lambda_max"),
            BadInput(_call(tol=1.5), ValueError, "tol"),
            BadInput(_call(bits=1), ValueError, "bits"),
            BadInput(_call(bits="many"), ValueError, "bits"),
            BadInput(_call(rule="gauss"), ValueError, "rule"),
            BadInput(_call(mean=jnp.zeros((3, 1))), ValueError, "mean"),
            BadInput(_call(mean=jnp.zeros(3, jnp.int32)), TypeError, "mean"),
            BadInput(_call(mean=None), ValueError, "dim"),
            BadInput(_call(key=None), TypeError, "key"),
            BadInput(lambda: resolvent.SmoothedScoreOracle(lambda v: v[:1], jnp.zeros(3)),
                     ValueError, "matvec"),
            BadInput(lambda: resolvent.SmoothedScoreOracle(lambda v: v, jnp.zeros(3),
                                                           tolerance=0.0),
                     ValueError, "tolerance"),
            BadInput(lambda: resolvent.SmoothedScoreOracle(lambda v: v, jnp.zeros(3),
                                                           max_iterations=0),
                     ValueError, "max_iterations"),
        ),
        note=_NOTE,
    ),
    Entry(
        name="gaussian.resolvent/transform_noise_bits",
        module="jaxsample.gaussian.resolvent",
        build=_dithered,
        covers=("gaussian.transform_noise",),
        bad_inputs=(
            BadInput(lambda: resolvent.transform_noise(
                None, resolvent.SmoothedScoreOracle(jnp.eye(3), jnp.zeros(3)), jnp.ones((1, 3)),
                **_SPECTRUM), TypeError, "key"),
            BadInput(lambda: resolvent.transform_noise(
                KEY, resolvent.SmoothedScoreOracle(jnp.eye(3), jnp.zeros(3)), jnp.ones(3),
                **_SPECTRUM), ValueError, "z must have 2"),
        ),
        note="the given-noise map with 6-bit dithered answers: the key drives the dither only; "
             "no traced hyper-parameter (as above)",
    ),
]
