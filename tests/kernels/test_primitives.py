"""Tests of the shared kernel primitives: pairwise distances, row chunking, log-space helpers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample.kernels import chunking, logspace, pairwise

# jitted once: eager op-by-op dispatch would dominate the test time
median_scale = jax.jit(pairwise.median_scale, static_argnames=("max_entries", "exclude_diagonal"))


def _clouds(dtype, n, m, seeds):
    """Two point clouds far from the origin (where the expanded form cancels) and their squared
    distances by direct differences."""
    x = jax.random.normal(jax.random.key(seeds[0]), (n, 3), dtype) + 100
    y = jax.random.normal(jax.random.key(seeds[1]), (m, 3), dtype) + 100
    return x, y, jnp.sum((x[:, None] - y[None]) ** 2, axis=-1)


def test_sq_distances_match_direct_differences(dtype):
    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute():
        x, y, direct = _clouds(dtype, 7, 5, (0, 1))
        return direct, pairwise.sq_distances(x, y, centre=jnp.mean(x, axis=0)), jnp.min(
            pairwise.sq_distances(x, x))

    direct, got, self_min = compute()
    assert got.dtype == dtype and got.shape == (7, 5)
    # centring removes the cancellation of the expanded form far from the origin
    tol = 1e-4 if dtype == jnp.float32 else 1e-10
    np.testing.assert_allclose(got, direct, rtol=tol, atol=tol)
    assert float(self_min) >= 0


def test_nearest_matches_argmin_of_direct_differences(dtype):
    @jax.jit
    def compute():
        x, y, direct = _clouds(dtype, 40, 9, (2, 3))
        # exact ties go to the smallest index, as jnp.argmin's do
        ties = pairwise.nearest(jnp.zeros((1, 2), dtype),
                                jnp.array([[1, 0], [0, 1], [0, -1]], dtype))
        return direct, pairwise.nearest(x, y, centre=jnp.mean(y, axis=0)), ties

    direct, (index, d2), (tie_index, tie_d2) = jax.device_get(compute())
    assert index.dtype == jnp.int32 and d2.dtype == dtype
    np.testing.assert_array_equal(index, np.argmin(direct, axis=1))
    tol = 1e-4 if dtype == jnp.float32 else 1e-10
    np.testing.assert_allclose(d2, np.min(direct, axis=1), rtol=tol, atol=tol)
    assert tie_index.tolist() == [0] and tie_d2.tolist() == [1.0]


def test_median_scale_exact_and_strided():
    x = jnp.arange(6.0)[:, None]
    y = jnp.arange(4.0)[:, None] + 0.5
    exact = np.median((np.arange(6.0)[:, None] - np.arange(4.0)[None] - 0.5) ** 2)
    assert float(median_scale(x, y)) == pytest.approx(exact)
    iu = np.triu_indices(6, 1)
    pairs = ((np.arange(6.0)[:, None] - np.arange(6.0)[None]) ** 2)[iu]
    assert float(median_scale(x, exclude_diagonal=True)) == pytest.approx(
        np.median(pairs))
    a = jax.random.normal(jax.random.key(0), (3000, 2))
    b = jax.random.normal(jax.random.key(1), (3000, 2))
    # the strided median (45 x 45 pairs) of |x - y|^2 for independent N(0, I_2) clouds estimates
    # 4 ln 2 (|x - y|^2 / 2 is chi-square_2); 45 independent rows and columns give a relative
    # standard error of the median below 5%, so 20% is > 4 SE
    assert float(median_scale(a, b)) == pytest.approx(4 * np.log(2), rel=0.2)


@pytest.mark.parametrize("chunk_size", [None, 7])
def test_map_rows_equals_dense_with_ragged_blocks(chunk_size):
    x = jax.random.normal(jax.random.key(0), (20, 4))
    y = jax.random.normal(jax.random.key(1), (9, 4))

    def fn(rows, weights):
        d = pairwise.sq_distances(rows, y)
        return {"lse": jax.nn.logsumexp(-d, axis=1) * weights, "arg": jnp.argmin(d, axis=1)}

    w = jnp.linspace(1.0, 2.0, 20)

    @jax.jit
    def dense(x, w):
        d = pairwise.sq_distances(x, y)
        return fn(x, w), jnp.sum(jnp.exp(-d)), jax.nn.logsumexp(-d)

    @jax.jit
    def chunked(x, w):
        return (
            chunking.map_rows(fn, x, w, chunk_size=chunk_size),
            chunking.sum_rows(lambda r: jnp.sum(jnp.exp(-pairwise.sq_distances(r, y)), 1), x,
                              chunk_size=chunk_size),
            chunking.logsumexp_rows(lambda r: jax.nn.logsumexp(-pairwise.sq_distances(r, y), 1),
                                    x, chunk_size=chunk_size),
        )

    got, total, lse = chunked(x, w)
    expected, expected_total, expected_lse = dense(x, w)
    np.testing.assert_allclose(got["lse"], expected["lse"], rtol=1e-6)
    np.testing.assert_array_equal(got["arg"], expected["arg"])
    np.testing.assert_allclose(total, expected_total, rtol=1e-5)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-5)


def test_chunked_reduction_memory_is_bounded_under_grad():
    """Forward and reverse passes of a chunked (n x m) log-sum-exp never hold n x m entries."""
    n, m, d, chunk = 4096, 4096, 8, 128
    y = jnp.zeros((m, d))

    def loss(x, chunk_size):
        return chunking.logsumexp_rows(
            lambda r: jax.nn.logsumexp(-pairwise.sq_distances(r, y), axis=1), x,
            chunk_size=chunk_size)

    x = jax.ShapeDtypeStruct((n, d), jnp.float32)
    full = n * m * 4
    for fn in (loss, jax.grad(loss)):
        compiled = jax.jit(fn, static_argnums=1).lower(x, chunk).compile()
        temp = compiled.memory_analysis().temp_size_in_bytes
        assert temp < full / 8, (fn, temp, full)
    dense = jax.jit(jax.grad(loss), static_argnums=1).lower(x, None).compile()
    assert dense.memory_analysis().temp_size_in_bytes >= full  # the check can fail


def test_ragged_chunks_do_not_copy_the_operand():
    """n % chunk_size != 0 inside a loop: the blocks are read in place (no (n, d) copy)."""
    x = jax.ShapeDtypeStruct((100_000, 64), jnp.float32)
    a = jax.ShapeDtypeStruct((64,), jnp.float32)
    operand = 100_000 * 64 * 4

    def loop(x, a, chunk_size):
        def body(t, total):
            return total + chunking.map_rows(lambda rows: rows @ a, x, chunk_size=chunk_size)
        return jax.lax.fori_loop(0, 3, body, jnp.zeros(x.shape[0]))

    for chunk_size in (4096, 5000):  # ragged, even
        compiled = jax.jit(loop, static_argnums=2).lower(x, a, chunk_size).compile()
        assert compiled.memory_analysis().temp_size_in_bytes < operand / 8, chunk_size


def test_log_normalize_and_ess():
    log_w = jnp.log(jnp.array([1.0, 1.0, 2.0, 0.0]))
    normalised, log_ess = jax.jit(lambda v: (logspace.log_normalize(v), logspace.log_ess(v)))(
        log_w)
    np.testing.assert_allclose(np.exp(normalised), [0.25, 0.25, 0.5, 0.0])
    # Kish ESS = (sum w)^2 / sum w^2 = 16 / 6
    assert float(np.exp(log_ess)) == pytest.approx(16 / 6, rel=1e-6)


def test_segment_logsumexp_against_dense():
    values = jnp.array([0.0, 1.0, -jnp.inf, 3.0, 700.0])
    seg = jnp.array([0, 0, 1, 2, 2])
    got = np.asarray(jax.jit(lambda v, s: logspace.segment_logsumexp(v, s, 4))(values, seg))
    assert got[1] == -jnp.inf and got[3] == -jnp.inf
    np.testing.assert_allclose(got[0], np.logaddexp(0.0, 1.0), rtol=1e-6)
    np.testing.assert_allclose(got[2], 700.0, rtol=1e-6)


def _log1mexp_reference(a):
    """float64 reference: ``log(−expm1(a))`` near 0 (exact there), ``−Σ e^{ka}/k`` (80 terms, a
    truncation below 1e-24 relative for ``e^a <= 1/2``) elsewhere: independent of the kernel."""
    x = np.exp(a)
    series = -sum(x**k / k for k in range(1, 81))
    return np.where(a > -np.log(2), np.log(-np.expm1(np.minimum(a, -1e-300))), series)


def test_log1mexp_is_accurate_in_both_branches(dtype):
    a = -np.logspace(-20, np.log10(60), 41)

    @jax.jit
    def compute(a):
        return (logspace.log1mexp(a), logspace.log1mexp(jnp.zeros((), dtype)),
                logspace.log1mexp(jnp.asarray(-50.0, dtype)),
                jax.grad(logspace.log1mexp)(jnp.asarray(-50.0, dtype)))

    got, at_zero, at_minus_50, grad = compute(jnp.asarray(a, dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, _log1mexp_reference(a), rtol=4 * float(jnp.finfo(dtype).eps))
    assert float(at_zero) == -np.inf
    # the one-branch forms each fail at one end: log(-expm1(-50)) and log1p(-exp(-1e-9)) round
    assert float(at_minus_50) < 0
    np.testing.assert_allclose(grad, -np.exp(-50.0), rtol=1e-5)


def test_logaddexp_matches_jnp_and_has_a_zero_gradient_at_two_empty_terms():
    a = jnp.array([0.0, -3.0, 700.0, -jnp.inf, 5.0])
    b = jnp.array([1.0, -jnp.inf, 699.0, -jnp.inf, 5.0])

    @jax.jit
    def compute(a, b):
        return (logspace.logaddexp(a, b), jnp.logaddexp(a, b),
                jax.vmap(jax.grad(logspace.logaddexp, argnums=(0, 1)))(a, b),
                jax.vmap(jax.grad(jnp.logaddexp, argnums=(0, 1)))(a, b))

    value, reference, ours, theirs = compute(a, b)
    np.testing.assert_allclose(value, reference, rtol=1e-6)
    finite = np.isfinite(np.asarray(a)) | np.isfinite(np.asarray(b))
    host_a, host_b = np.asarray(a, np.float64)[finite], np.asarray(b, np.float64)[finite]
    for g, h, exact in zip(ours, theirs, (1 / (1 + np.exp(host_b - host_a)),
                                          1 / (1 + np.exp(host_a - host_b))), strict=True):
        np.testing.assert_allclose(np.asarray(g)[finite], exact, rtol=1e-6)
        assert np.isnan(np.asarray(h)[3]) and float(g[3]) == 0.0
