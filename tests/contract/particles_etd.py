"""Contract entries for ETD (jaxsample.particles.etd): a tiny balanced, score-guided system, and
the Laplace preconditioner it can be given (a BFGS fit on a 2-D Gaussian)."""

import jax
import jax.numpy as jnp

import jaxsample
from contract import KEY, BadInput, Entry
from jaxsample.particles import laplace_preconditioner


def _logdensity(x):
    return -0.5 * jnp.sum(x**2)


def _start(key, dtype):
    return 2.0 * jax.random.normal(key, (8, 2), dtype)


def _score(x):
    return -x


def _algorithm(key_init, dtype, epsilon):
    alg = jaxsample.etd(_logdensity, score_fn=_score, num_proposals=3, epsilon=epsilon,
                        tolerance=1e-3)
    return alg, alg.init(_start(key_init, dtype))


def _run(key, dtype, epsilon):
    key_init, key_run = jax.random.split(key)
    return jaxsample.run(key_run, *_algorithm(key_init, dtype, epsilon), 3)


def _build(dtype):
    return lambda key: _run(key, dtype, 0.1)


def _hyper(dtype):
    # the same structure as _build: one compilation of run serves both
    return lambda key, epsilon: _run(key, dtype, epsilon)


_X0 = jnp.ones((6, 2))


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
    note="epsilon is the traced hyper-parameter; proposal_step, step_fraction, "
         "mutation_step_size, rho, score_clip and tolerance are traced the same way.",
), Entry(
    name="particles.etd/laplace_preconditioner",
    module="jaxsample.particles.etd",
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
