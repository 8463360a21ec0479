"""The shared validation layer: messages name the argument; traced values pass through."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample import _checks as checks


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: checks.check_array("x", "abc"), TypeError, "x must be an array"),
        (lambda: checks.check_array("x", np.zeros(3), ndim=2), ValueError, "x must have 2"),
        (lambda: checks.check_array("x", np.zeros((3, 2)), shape=(None, 3)), ValueError,
         r"x must have shape \(\?, 3\)"),
        (lambda: checks.check_array("x", np.zeros(3, np.int32)), TypeError, "x must be floating"),
        (lambda: checks.check_array("x", np.array([1.0, np.nan]), finite=True), ValueError,
         "x must be finite"),
        (lambda: checks.check_array("x", np.zeros((1, 2)), min_rows=2), ValueError,
         "x needs at least 2 rows"),
        (lambda: checks.check_int("num_steps", 0, 1), ValueError, "num_steps must be >= 1"),
        (lambda: checks.check_int("num_steps", 2.0, 1), TypeError, "num_steps must be a Python"),
        (lambda: checks.check_number("step_size", -1.0), ValueError, "step_size must be finite"),
        (lambda: checks.check_hyperparameter("epsilon", 0.0), ValueError, "epsilon"),
        (lambda: checks.check_hyperparameter("epsilon", np.ones(2)), ValueError,
         "epsilon must be a scalar"),
        (lambda: checks.check_choice("mode", "Greedy", ("greedy",)), ValueError, "mode must be"),
        (lambda: checks.check_callable("fn", 3), TypeError, "fn must be callable"),
        (lambda: checks.check_key("key", None), TypeError, "key must be a PRNG key"),
        (lambda: checks.check_key("key", jnp.zeros(3)), TypeError, "key must be a PRNG key"),
    ],
)
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_hyperparameter_is_float64_array_or_tracer():
    value = checks.check_hyperparameter("epsilon", 0.1)
    assert isinstance(value, np.ndarray) and value.dtype == np.float64 and value == 0.1
    seen = []
    jax.vmap(lambda h: seen.append(checks.check_hyperparameter("h", h)) or h)(jnp.ones(2))
    assert isinstance(seen[0], jax.core.Tracer)
    assert not checks.is_concrete(seen[0]) and checks.is_concrete(value)


def test_checks_skip_values_under_jit():
    @jax.jit
    def f(x):
        # finiteness cannot be checked on a tracer: the check passes it through
        return checks.check_array("x", x, finite=True)

    assert bool(jnp.isnan(f(jnp.array([jnp.nan]))[0]))
    assert checks.check_key("key", jax.random.PRNGKey(0)).shape == (2,)
