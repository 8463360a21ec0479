"""Contract entry for the Gaussian baselines (``jaxsample.gaussian.baselines``).

The three peers of the resolvent sampler on the resolvent entry's 3-D diagonal precision, in one
program: an exact Cholesky draw, Lanczos (3 steps) and Chebyshev (on the same spectrum bounds).
"""

import jax
import jax.numpy as jnp

from contract import KEY, BadInput, Entry
from jaxsample import gaussian

_LAM = (1.0, 3.0, 10.0)
_SPECTRUM = dict(lambda_min=1.0, lambda_max=10.0, tol=1e-3)


def _baselines(dtype):
    lam = jnp.asarray(_LAM, dtype)
    mean = jnp.asarray([0.5, -1.0, 2.0], dtype)

    def score(x):
        return -lam * (x - mean)

    def fn(key):
        k1, k2, k3 = jax.random.split(key, 3)
        return (gaussian.cholesky_sample(k1, jnp.diag(lam), mean=mean, num_samples=4),
                gaussian.lanczos_sample(k2, score, mean=mean, num_steps=3, num_samples=4),
                gaussian.chebyshev_sample(k3, score, mean=mean, num_samples=4, **_SPECTRUM))

    return fn


def _score(x):
    return -x


ENTRIES = [
    Entry(
        name="gaussian.baselines",
        module="jaxsample.gaussian.baselines",
        build=_baselines,
        covers=("gaussian.cholesky_sample", "gaussian.lanczos_sample",
                "gaussian.chebyshev_sample"),
        info=lambda outputs: tuple(info for _, info in outputs),
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: gaussian.cholesky_sample(KEY, jnp.eye(3), mean=jnp.zeros(2),
                                                      num_samples=2), ValueError, "mean"),
            BadInput(lambda: gaussian.lanczos_sample(KEY, _score, mean=jnp.zeros(3),
                                                     num_steps=0, num_samples=2), ValueError,
                     "num_steps"),
            BadInput(lambda: gaussian.chebyshev_sample(None, _score, mean=jnp.zeros(3),
                                                       num_samples=2, **_SPECTRUM), TypeError,
                     "key"),
        ),
        note="cholesky_sample, lanczos_sample and chebyshev_sample, 4 draws each: one program, a "
             "tuple of (draws, GaussianInfo); keyed, with the legacy-key case. No traced float: "
             "the spectrum bounds and tol fix the number of Chebyshev terms (a static shape), "
             "as for the resolvent sampler",
    ),
]
