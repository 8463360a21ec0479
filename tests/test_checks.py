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


def test_check_fn_output_probes_once_and_names_shapes():
    one = jax.ShapeDtypeStruct((3,), jnp.float32)
    two = (one, jax.ShapeDtypeStruct((), jnp.float32))
    out = checks.check_fn_output("score_fn", lambda x: -x, one, (3,))
    assert out.shape == (3,) and out.dtype == jnp.float32
    checks.check_fn_output("fn", lambda x, t: t * x, two, (3,), dtype=jnp.float32)
    with pytest.raises(ValueError, match=r"score_fn must map input of shape \(3,\) to shape "
                                         r"\(3,\), got shape \(1,\)"):
        checks.check_fn_output("score_fn", lambda x: x[:1], one, (3,))
    with pytest.raises(ValueError, match=r"fn must map input of shape \(3,\) and \(\) to shape "
                                         r"\(3,\), got tuple"):
        checks.check_fn_output("fn", lambda x, t: (x, t), two, (3,))
    with pytest.raises(ValueError, match="it failed on such input: .*boom"):
        checks.check_fn_output("fn", lambda x: (_ for _ in ()).throw(RuntimeError("boom")),
                               one, (3,))
    with pytest.raises(TypeError, match="fn must return a floating array, got dtype int32"):
        checks.check_fn_output("fn", lambda x: x.astype(jnp.int32), one, (3,))
    with pytest.raises(TypeError, match="fn must return dtype float16"):
        checks.check_fn_output("fn", lambda x: x, one, (3,), dtype=jnp.float16)
    with pytest.raises(TypeError, match="fn must be callable"):
        checks.check_fn_output("fn", 3, one, (3,))


def test_check_simplex_and_stochastic_matrix():
    laws = np.array([[[0.2, 0.8], [1.0, 0.0]], [[0.5, 0.5], [0.3, 0.7]]], np.float32)
    assert checks.check_simplex("transitions", laws).shape == (2, 2, 2)
    with pytest.raises(ValueError, match="p must be nonnegative, got minimum -0.5"):
        checks.check_simplex("p", np.array([1.5, -0.5]))
    with pytest.raises(ValueError, match="p must sum to 1 along its last axis, got a sum of 1.1"):
        checks.check_simplex("p", laws * np.array([1.0, 1.1], np.float32)[:, None, None])
    with pytest.raises(ValueError, match="p must be finite"):
        checks.check_simplex("p", np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match=r"p must have shape \(3\)"):
        checks.check_simplex("p", np.full(2, 0.5), shape=(3,))
    # the tolerance is 4K eps32 (5e-4 here): a float32 normalisation passes (also cast to
    # float64), 1e-3 off does not
    w = np.random.default_rng(0).exponential(size=1000).astype(np.float32)
    p = w / w.sum(dtype=np.float32)
    checks.check_simplex("p", p)
    checks.check_simplex("p", p.astype(np.float64))
    with pytest.raises(ValueError, match="sum to 1"):
        checks.check_simplex("p", p + np.float32(1e-3 / 1000))
    # under jit the values are tracers: only the static checks run
    jax.jit(lambda q: checks.check_simplex("p", q))(jnp.array([2.0, 3.0]))

    assert checks.check_stochastic_matrix("transition", np.eye(3), size=3).shape == (3, 3)
    with pytest.raises(ValueError, match=r"transition must be a square \(n, n\) matrix"):
        checks.check_stochastic_matrix("transition", np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match=r"transition must have shape \(2, 2\)"):
        checks.check_stochastic_matrix("transition", np.eye(3), size=2)
    with pytest.raises(ValueError, match="transition must sum to 1"):
        checks.check_stochastic_matrix("transition", np.eye(2) * 1.2)


def test_common_float_dtype(x64):
    f32, f64 = jnp.zeros(2, jnp.float32), jnp.zeros(2, jnp.float64)
    assert checks.common_float_dtype(a=f32, b=1.0, c=jnp.arange(3)) == jnp.float32
    assert checks.common_float_dtype(a={"x": f64, "y": f64}, b=jnp.asarray(0.5)) == jnp.float64
    assert checks.common_float_dtype(n=3, k=jnp.arange(2)) == jnp.float64  # the default
    with pytest.raises(TypeError, match="floating arguments must share one dtype, got "
                                        "a: float32, b: float64"):
        checks.common_float_dtype(a=f32, b=(f64,))


@pytest.mark.parametrize(
    ("kwargs", "value", "match"),
    [
        (dict(lower=0), [1.0, -2.0], r"w must be >= 0, got values in \[-2, 1\]"),
        (dict(lower=0, lower_inclusive=False, finite=True), 0.0,
         "w must be finite and > 0, got 0"),
        (dict(upper=1, upper_inclusive=False), [0.5, 1.0], "w must be < 1"),
        (dict(lower=0, upper=1, finite=True), [0.2, np.inf],
         r"w must be finite and in \[0, 1\], got values in \[0.2, inf\]"),
        (dict(lower=0, upper=1, lower_inclusive=False), [0.0, 0.5], r"w must be in \(0, 1\]"),
        # NaN meets no bound, finite or not
        (dict(lower=0), [np.nan, 1.0], "w must be >= 0, got NaN entries"),
        (dict(integer_valued=True), [1.0, 2.5], "w must hold whole numbers, got 2.5"),
        (dict(shape=()), [1.0, 2.0], r"w must be a scalar, got shape \(2,\)"),
    ],
)
def test_bounds_and_whole_numbers_name_the_argument(kwargs, value, match):
    with pytest.raises(ValueError, match=match):
        checks.check_array("w", np.asarray(value), kind="numeric", **kwargs)


def test_bounds_and_whole_numbers_pass_valid_values():
    counts = checks.check_array("c", np.array([0.0, 3.0]), lower=0, integer_valued=True)
    assert counts.dtype == jnp.float32
    checks.check_array("c", np.array([0, 3]), kind="integer", lower=0, upper=3,
                       integer_valued=True)
    checks.check_array("p", 1.0, shape=(), lower=0, upper=1)
    # infinities are whole numbers and meet a lower bound when finite is not asked for
    checks.check_array("x", np.array([np.inf, 2.0]), lower=0, integer_valued=True)


def test_value_checks_are_skipped_under_jit():
    @jax.jit
    def f(x):
        return checks.check_array("x", x, lower=0, upper=1, integer_valued=True, finite=True)

    np.testing.assert_array_equal(f(jnp.array([-1.5, 2.0])), [-1.5, 2.0])
    jax.vmap(lambda q: checks.check_simplex("p", q))(jnp.ones((2, 3)))


def test_probability_vectors_are_check_simplex():
    """A probability vector (or a batch of them) is check_simplex: the argument is named."""
    with pytest.raises(ValueError, match="initial must be nonnegative"):
        checks.check_simplex("initial", np.array([1.2, -0.2]))
    with pytest.raises(ValueError, match="initial must sum to 1 along its last axis"):
        checks.check_simplex("initial", np.array([[0.5, 0.5], [0.6, 0.6]]))
    assert checks.check_simplex("initial", np.array([[0.5, 0.5], [0.0, 1.0]])).shape == (2, 2)
