"""The SMC peer of the benches (bench/smc_peer.py): its evaluation counts are the calls made."""

import doctest
import pathlib
import sys

import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import smc_peer  # noqa: E402

CALLS = {"density": 0, "gradient": 0}


def _bump(name, point):
    """One per point: ``point`` is an operand, so under ``vmap`` the callback runs per row."""
    jax.debug.callback(lambda _: CALLS.__setitem__(name, CALLS[name] + 1), point)


@jax.custom_jvp
def _logdensity(x):
    _bump("density", x)
    return -0.5 * jnp.sum(jnp.square(x - 1.0))


@_logdensity.defjvp
def _logdensity_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    _bump("gradient", x)
    return -0.5 * jnp.sum(jnp.square(x - 1.0)), -jnp.sum((x - 1.0) * t)


@pytest.mark.parametrize("kernel", ["mala", "hmc"])
def test_counts_are_the_calls_the_run_makes(kernel):
    """The reported counts equal the test density's own per-row callbacks (a value with a
    gradient is one density and one gradient), and the run reaches λ = 1."""
    x0 = jax.random.normal(jax.random.key(0), (6, 2))
    jax.effects_barrier()
    CALLS.update(density=0, gradient=0)
    x, info = smc_peer.adaptive_tempered_smc(jax.random.key(1), _logdensity, x0, kernel=kernel,
                                             num_mcmc_steps=2, num_integration_steps=3)
    jax.effects_barrier()
    assert info["reached_one"] and info["final_temperature"] == 1.0
    assert info["gradient_evals"] == CALLS["gradient"] > 0
    assert info["density_evals"] == CALLS["density"] + CALLS["gradient"]
    assert x.shape == (6, 2) and bool(jnp.all(jnp.isfinite(x)))


def test_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="kernel"):
        smc_peer.adaptive_tempered_smc(jax.random.key(0), _logdensity, jnp.zeros((4, 2)),
                                       kernel="nuts")


def test_docstring_example():
    assert doctest.testmod(smc_peer).failed == 0
