"""kernels.resampling: the categorical law (chi-square), batched rows, zero-mass categories, legacy
keys, the inverse CDF shared with pre-drawn uniforms, and the blocked cumulative sum under it."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from jaxsample.kernels import resampling

# jitted once: eager op-by-op dispatch would dominate the test time
categorical = jax.jit(resampling.categorical, static_argnums=2)


def test_categorical_law_chi_square():
    """Counts of 20 000 inverse-CDF draws against the law (chi-square, p > 1e-4 to pass)."""
    probs = np.array([0.0, 0.05, 0.15, 0.3, 0.0, 0.5])
    log_w = jnp.log(jnp.asarray(probs)) + 3.0  # unnormalised, with -inf entries
    draws = np.asarray(categorical(jax.random.key(0), log_w, 20_000))
    counts = np.bincount(draws, minlength=6)
    assert counts[0] == 0 and counts[4] == 0
    keep = probs > 0
    p_value = scipy.stats.chisquare(counts[keep], 20_000 * probs[keep]).pvalue
    assert p_value > 1e-4


def test_categorical_batched_rows_and_single_draws(dtype):
    logits = jax.random.normal(jax.random.key(1), (3, 2, 10), dtype)
    draws = categorical(jax.random.key(2), logits, 5)
    assert draws.shape == (5, 3, 2) and draws.dtype == jnp.int32
    assert bool(jnp.all((draws >= 0) & (draws < 10)))
    assert categorical(jax.random.key(2), logits, None).shape == (3, 2)
    # a row whose mass sits on one category always returns it
    point = jnp.full((4, 6), -jnp.inf, dtype).at[:, 2].set(0.0)
    assert categorical(jax.random.key(3), point, 7).tolist() == [[2] * 4] * 7


def test_legacy_key_draws_what_the_new_style_key_draws():
    log_w = jnp.log(jnp.array([0.1, 0.2, 0.7]))
    np.testing.assert_array_equal(categorical(jax.random.PRNGKey(4), log_w, 50),
                                  categorical(jax.random.key(4), log_w, 50))


def test_inverse_cdf_brackets_and_zero_mass():
    """``F_{j-1} <= u F_K < F_j`` on unnormalised weights; a uniform whose scaled value rounds up
    to the total returns the last category with mass, never a zero-mass one."""
    weights = jnp.array([[2.0, 0.0, 6.0, 0.0], [0.0, 1.0, 1.0, 2.0]])
    u = jnp.array([[0.0, 0.0], [0.2499, 0.2499], [0.25, 0.25], [0.9999, 0.9999], [1.0, 1.0]])
    np.testing.assert_array_equal(resampling.inverse_cdf(weights, u),
                                  [[0, 1], [0, 1], [2, 2], [2, 3], [2, 3]])
    assert resampling.inverse_cdf(weights[0], jnp.asarray(0.5)).shape == ()
    # the vectorised count finds the same categories as the binary search
    np.testing.assert_array_equal(resampling.inverse_cdf(weights, u, method="compare_all"),
                                  resampling.inverse_cdf(weights, u))


def test_cumulative_sum_equals_cumsum_at_every_block_boundary(dtype):
    """Lengths around the block (16) and its powers (one, two and three levels of recursion),
    with leading batch axes, against a float64 running sum. Each output adds at most 16
    positive terms per level of the recursion, so its error is below 16 eps of the total per
    level (the worst case; a wrong offset or block order errs by O(1))."""
    cumsum = jax.jit(resampling.cumulative_sum)
    for k in (1, 15, 16, 17, 255, 256, 257, 4097):
        x = np.random.default_rng(k).random((2, 3, k))
        out = np.asarray(cumsum(jnp.asarray(x, dtype)), np.float64)
        expected = np.cumsum(x.astype(dtype), axis=-1, dtype=np.longdouble)
        assert out.shape == x.shape and cumsum(jnp.asarray(x, dtype)).dtype == dtype
        levels = max(1, int(np.ceil(np.log(k) / np.log(16))))
        tol = 16 * levels * np.finfo(dtype).eps
        assert np.max(np.abs(out - expected) / expected[..., -1:]) <= tol, k
