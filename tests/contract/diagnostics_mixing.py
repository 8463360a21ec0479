"""Contract entries for the mixing diagnostics (``jaxsample.diagnostics.mixing``).

First-passage steps of a Gaussian random walk (keyed: the chains run through
``jaxsample.run_until``; the walk's step scale is the traced float of the algorithm's step
pytree), and the spectral gap of a double well's SQRA generator (deterministic; the temperature is
traced), with the other closed forms of the module at the same temperature.
"""

import jax
import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import SamplingAlgorithm
from jaxsample.core import Step
from jaxsample.diagnostics import mixing


def _walk_kernel(key, x, *, scale):
    return x + scale * jax.random.normal(key, x.shape, x.dtype), {}


def _walk(scale):
    return SamplingAlgorithm(init=lambda x: x, step=Step(_walk_kernel, scale=scale))


def _hits(x):
    return jnp.abs(x[0]) > 1.0


def _build(dtype):
    def fn(key):
        steps, info = mixing.first_passage_steps(key, _walk(jnp.asarray(0.5, dtype)),
                                                 jnp.zeros((4, 1), dtype), _hits, max_steps=200)
        # the steps are integers: cast them so the registry's float check has a leaf to read
        return jnp.asarray(steps, dtype), info

    return fn


def _hyper(dtype):
    def fn(key, scale):
        return mixing.first_passage_steps(key, _walk(scale), jnp.zeros((4, 1), dtype), _hits,
                                          max_steps=200)

    return fn


_X = np.linspace(-2.0, 2.0, 81)


_LABELS = (np.arange(20) % 3 == 0).astype(np.int32)  # 7 draws in mode 1, 13 in mode 0


def _gap(dtype, temperature):
    """The double well's closed forms, all at one traced temperature: one program."""
    x = jnp.asarray(_X, dtype)
    potential, dx = (x**2 - 1) ** 2, x[1] - x[0]
    (diag, off), _ = mixing.fp_generator(potential, temperature, dx)
    rates, rates_info = mixing.rate_matrix(potential, temperature, dx)
    one = jnp.asarray(1.0, dtype)
    return (mixing.spectral_gap(diag, off, k=2),
            (rates, rates_info),
            mixing.mfpt(rates, x > 0.5),  # into the right well
            mixing.kramers_rate(0 * one, one, 8 * one, -4 * one, temperature),
            mixing.exact_mode_weights(potential, temperature, x, jnp.zeros(1, dtype)),
            mixing.mode_weights(_LABELS, num_modes=2))


def _gap_build(dtype):
    def fn(key):
        del key  # a closed form
        return _gap(dtype, jnp.asarray(0.5, dtype))

    return fn


def _gap_hyper(dtype):
    def fn(key, temperature):
        del key
        return _gap(dtype, temperature)

    return fn


ENTRIES = [
    Entry(
        name="diagnostics.mixing/first_passage",
        module="jaxsample.diagnostics.mixing",
        build=_build,
        covers=("diagnostics.mixing.first_passage_steps",),
        hyper=_hyper,
        hyper_values=(0.3, 0.6),
        exact_ints=True,
        bad_inputs=(
            BadInput(lambda: mixing.first_passage_steps(None, _walk(0.5), np.zeros((2, 1)),
                                                        _hits, max_steps=5), TypeError, "key"),
            BadInput(lambda: mixing.first_passage_steps(KEY, _walk(0.5), np.zeros((2, 1)),
                                                        _hits, max_steps=0), ValueError,
                     "max_steps"),
            BadInput(lambda: mixing.first_passage_steps(KEY, _walk(0.5), np.zeros((2, 1)), 3,
                                                        max_steps=5), TypeError, "in_target_fn"),
        ),
        note="first_passage_steps(key, algorithm, initial_positions, in_target_fn, *, "
             "max_steps) -> (steps, FirstPassageInfo); steps are compared exactly",
    ),
    Entry(
        name="diagnostics.mixing/spectral_gap",
        module="jaxsample.diagnostics.mixing",
        build=_gap_build,
        covers=("diagnostics.mixing.fp_generator", "diagnostics.mixing.spectral_gap",
                "diagnostics.mixing.rate_matrix", "diagnostics.mixing.mfpt",
                "diagnostics.mixing.kramers_rate", "diagnostics.mixing.exact_mode_weights",
                "diagnostics.mixing.mode_weights"),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=_gap_hyper,
        hyper_values=(0.5, 1.0),
        exact_ints=False,
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: mixing.fp_generator(np.array([1.0]), 0.5, 0.1), ValueError,
                     "potential"),
            BadInput(lambda: mixing.spectral_gap(np.ones(4), np.ones(2)), ValueError, "offdiag"),
            BadInput(lambda: mixing.mode_weights(np.zeros(3, np.int32), num_modes=0),
                     ValueError, "num_modes"),
            BadInput(lambda: mixing.mfpt(np.zeros((3, 3)), np.zeros(3, bool)), ValueError,
                     "target_mask"),
            BadInput(lambda: mixing.kramers_rate(0.0, 1.0, np.eye(2), 1.0, 0.5), ValueError,
                     "hess_min and hess_saddle"),
            BadInput(lambda: mixing.exact_mode_weights(_X, 0.5, _X[:5], np.zeros(1)),
                     ValueError, "grid"),
            BadInput(lambda: mixing.rate_matrix(_X, -1.0, 0.05), ValueError, "temperature"),
        ),
        note="the double well's closed forms at one temperature (the key is unused): "
             "fp_generator then spectral_gap, rate_matrix, mfpt into the right well, "
             "kramers_rate, exact_mode_weights and mode_weights, one program returning a tuple "
             "of (value, Info); the temperature is traced",
    ),
]
