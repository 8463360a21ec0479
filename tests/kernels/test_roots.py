"""kernels.roots.bisect: float and integer brackets, elementwise under vmap, jit."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.kernels.roots import bisect


def test_float_root_to_bracket_width(dtype):
    target = jnp.asarray([0.3, 2.0, 7.5], dtype)
    lo, hi = jax.jit(lambda t: bisect(lambda x: x**3 < t, jnp.zeros_like(t), 10 + jnp.zeros_like(t),
                                      num_iterations=40))(target)
    assert lo.dtype == dtype
    np.testing.assert_allclose(hi, np.cbrt(np.asarray(target, np.float64)),
                               rtol=10 * float(jnp.finfo(dtype).eps), atol=10 / 2**40)
    assert bool(jnp.all(lo <= hi))


def test_integer_smallest_meeting_a_target():
    for target in (1, 17, 99, 100):
        _, hi = bisect(lambda n, target=target: n < target, jnp.asarray(0), jnp.asarray(100),
                       num_iterations=7)
        assert int(hi) == target


def test_vmap_matches_loop():
    ts = jnp.linspace(0.1, 3.0, 5)
    fn = lambda t: bisect(lambda x: jnp.exp(x) < t, jnp.asarray(-5.0), jnp.asarray(5.0),
                          num_iterations=30)[1]
    np.testing.assert_allclose(jax.vmap(fn)(ts), [fn(t) for t in ts], rtol=1e-6)
