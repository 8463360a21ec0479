"""Contract entry for the Laplace fit (jaxsample.particles.laplace): BFGS on a 2-D Gaussian."""

import jax.numpy as jnp

from contract import BadInput, Entry
from jaxsample.particles import laplace_preconditioner


def _logdensity(x):
    return -0.5 * jnp.sum(x**2)


def _laplace(dtype, center):
    def logdensity(x):
        return -0.5 * jnp.sum((x - center) ** 2 / jnp.asarray([4.0, 1.0], dtype))

    return laplace_preconditioner(logdensity, jnp.zeros(2, dtype), max_iterations=20)


def _laplace_build(dtype):
    def fn(key):
        del key  # a deterministic fit
        return _laplace(dtype, jnp.asarray(1.0, dtype))

    return fn


def _laplace_hyper(dtype):
    def fn(key, center):
        del key
        return _laplace(dtype, center)

    return fn


ENTRIES = [Entry(
    name="particles.etd/laplace_preconditioner",
    module="jaxsample.particles.laplace",
    build=_laplace_build,
    covers=("particles.laplace_preconditioner",),
    hyper=_laplace_hyper,
    hyper_values=(0.5, 1.0),
    exact_ints=False,
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: laplace_preconditioner(_logdensity, jnp.zeros((2, 2))), ValueError,
                 "position"),
        BadInput(lambda: laplace_preconditioner(_logdensity, jnp.zeros(2), max_iterations=0),
                 ValueError, "max_iterations"),
        BadInput(lambda: laplace_preconditioner("logpdf", jnp.zeros(2)), TypeError,
                 "logdensity_fn"),
    ),
    note="laplace_preconditioner(logdensity_fn, position) -> (LaplaceFit, LaplaceInfo), a BFGS "
         "fit (deterministic: the key is unused) on a 2-D Gaussian whose centre, closed over by "
         "logdensity_fn, is traced; BFGS stops at a tolerance (rtol 1e-3, iteration counts not "
         "compared)",
)]
