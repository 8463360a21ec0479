"""Tests of jaxsample.kernels.resolvent: quadrature rules, resolvent, quantiser, baselines."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from jaxsample.kernels import resolvent as R

_U64 = float(np.finfo(np.float64).eps) / 2


def _scalar_error(rule, lam):
    r = np.sum(rule.weights * rule.taus / (1 + rule.taus * lam[:, None]), axis=1)
    return np.max(np.abs(r * np.sqrt(lam) - 1))


@pytest.mark.parametrize("kappa", [10.0, 1e2, 1e4, 1e6, 1e8])
@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-10])
@pytest.mark.parametrize("lambda_min", [1e-3, 1.0, 1e3])
def test_sinc_rule_scalar_error_on_log_grid(kappa, tol, lambda_min):
    # The three error parts (discretisation, two tails) each take ~tol: the notes' budget is 2 tol.
    rule = R.sinc_rule(lambda_min, kappa * lambda_min, tol)
    lam = lambda_min * np.geomspace(1.0, kappa, 4001)
    assert _scalar_error(rule, lam) <= 2 * tol
    assert np.all(np.diff(rule.taus) < 0)


def test_elliptic_rule_meets_tol_by_its_bound_on_log_grids():
    # max |r(lam) sqrt(lam) - 1| <= 4 exp(-2 pi N K'/K) <= tol with N from the bound; the float64
    # evaluation of r adds ~N u (a few 1e-15). The grid includes both ends, where the pole pairs
    # of the periodic integrand merge (the worst case of the bound).
    for tol in (1e-2, 1e-3, 1e-6, 1e-8, 1e-10):
        for kappa in (1.0, 1.0 + 1e-6, 2.0, 10.0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12, 1e14):
            for lambda_min in (1e-3, 1.0, 1e3):
                rule = R.elliptic_rule(lambda_min, kappa * lambda_min, tol)
                lam = lambda_min * np.geomspace(1.0, kappa, 2001)
                assert _scalar_error(rule, lam) <= tol + 20 * len(rule.taus) * _U64
                assert np.all(np.diff(rule.taus) < 0) and np.all(rule.weights > 0)


def test_elliptic_node_count_is_the_bound_and_nodes_are_symmetric():
    # the measured prototype: 6/10/13/17, 8/13/17/22, 10/15/21/27 nodes
    expected = {1e-6: [6, 10, 13, 17], 1e-8: [8, 13, 17, 22], 1e-10: [10, 15, 21, 27]}
    for tol, counts in expected.items():
        assert [R.elliptic_num_nodes(1.0, k, tol) for k in (1e2, 1e4, 1e6, 1e8)] == counts
    for kappa, tol in ((1e4, 1e-6), (1e9, 1e-9)):
        rule = R.elliptic_rule(1.0, kappa, tol)
        n = len(rule.taus)
        big_k, small_k = scipy.special.ellipkm1(1 / kappa), scipy.special.ellipk(1 / kappa)
        bound = 4 * np.exp(-2 * np.pi * small_k / big_k * np.array([n, n - 1]))
        assert bound[0] <= tol < bound[1]  # the fewest nodes the bound allows
        # mu_j mu_{N+1-j} = lam_min lam_max (the rule covers [1, 1/p], p = 1 - fl(1 - 1/kappa)
        # rounded down, within u kappa of kappa), and it is exact at the geometric midpoint
        np.testing.assert_allclose(1 / (rule.taus * rule.taus[::-1]), kappa, rtol=4 * kappa * _U64)
        assert np.all(1 / (rule.taus * rule.taus[::-1]) >= kappa * (1 - 1e-14))
        mid = math.sqrt(kappa)
        assert abs(np.sum(rule.weights / (mid + 1 / rule.taus)) * mid**0.5 - 1) <= tol
    assert len(R.elliptic_rule(2.0, 2.0, 1e-12).taus) == 1  # one node is exact for kappa = 1


def test_elliptic_needs_3x_fewer_queries_than_sinc_and_300x_fewer_than_chebyshev():
    # the goals on node counts (float64 accuracy is the sampler's,
    # tests/gaussian/test_gaussian.py)
    for kappa in (1e2, 1e4, 1e6, 1e8, 1e10):
        elliptic = R.elliptic_num_nodes(1.0, kappa, 1e-6)
        assert len(R.sinc_rule(1.0, kappa, 1e-6).taus) >= 3 * elliptic
    chebyshev = len(R.chebyshev_inverse_sqrt(1.0, 1e6, 1e-6)) - 1
    assert chebyshev >= 300 * R.elliptic_num_nodes(1.0, 1e6, 1e-6)
    # K ~ log(16 kappa)/2, K' -> pi/2: about 0.28 log(4/tol) more nodes per decade of kappa
    for tol in (1e-6, 1e-10):
        counts = np.array([R.elliptic_num_nodes(1.0, 10.0**k, tol) for k in range(2, 15)])
        per_decade = math.log(10) * math.log(4 / tol) / (2 * math.pi**2)
        assert abs((counts[-1] - counts[0]) / 12 - per_decade) <= 0.2


def test_inverse_sqrt_rational_matches_host_rule(dtype):
    rule = R.sinc_rule(1.0, 1e4, 1e-3)
    lam = np.geomspace(1.0, 1e4, 64)
    host = np.sum(rule.weights * rule.taus / (1 + rule.taus * lam[:, None]), axis=1)
    r = R.inverse_sqrt_rational(jnp.asarray(lam, dtype).reshape(8, 8), rule.weights, rule.taus)
    assert r.dtype == dtype and r.shape == (8, 8)
    rtol = 10 * float(jnp.finfo(dtype).eps) * len(rule.taus)
    np.testing.assert_allclose(np.asarray(r).ravel(), host, rtol=rtol)


def test_sinc_node_count_grows_by_a_constant_per_decade():
    # q = k_hi - k_lo + 1 with k_hi - k_lo = (1/2)log(kappa)/h + const: each decade adds
    # (1/2) ln 10 / h nodes, up to one for the floor/ceil rounding.
    for tol in (1e-3, 1e-6, 1e-10):
        h = R.sinc_step(tol)
        per_decade = 0.5 * math.log(10) / h
        counts = np.array([len(R.sinc_rule(1.0, 10.0**k, tol).taus) for k in range(0, 13)])
        steps = np.diff(counts)
        assert np.all(steps >= math.floor(per_decade))
        assert np.all(steps <= math.ceil(per_decade) + 1)
        predicted = (0.5 * math.log(1e12) + 2 * math.log(2 / (math.pi * tol))) / h
        assert abs(counts[-1] - predicted) <= 3


def test_chebyshev_degree_grows_like_sqrt_kappa():
    degrees = [len(R.chebyshev_inverse_sqrt(1.0, kappa, 1e-6)) - 1 for kappa in (1e2, 1e4, 1e6)]
    # n ~ (sqrt(kappa)/2) log(c/tol): a factor 10 per factor 100 in kappa, asymptotically.
    assert 8.0 <= degrees[1] / degrees[0] <= 11.0
    assert 9.5 <= degrees[2] / degrees[1] <= 10.5


@pytest.mark.parametrize("kappa", [1.0, 30.0, 1e4])
def test_chebyshev_degree_is_minimal_and_meets_tol(kappa):
    tol = 1e-6
    coefficients = R.chebyshev_inverse_sqrt(1.0, kappa, tol)
    lam = np.geomspace(1.0, kappa, 20001)
    x = np.clip((2 * lam - kappa - 1) / max(kappa - 1, 1e-300), -1, 1)

    def error(c):
        return np.max(np.abs(np.polynomial.chebyshev.chebval(x, c) * np.sqrt(lam) - 1))

    assert error(coefficients) <= tol * (1 + 1e-6)
    if len(coefficients) > 1:  # one degree less misses the tolerance somewhere
        assert error(coefficients[:-1]) > tol


def test_chebyshev_tol_below_float64_evaluation_raises():
    # the series' float64 evaluation errs by ~u sqrt(kappa) (5e-13 here): the search stops
    # after two doublings instead of growing without bound
    with pytest.raises(ValueError, match="tol = 1e-15 cannot be confirmed"):
        R.chebyshev_inverse_sqrt(1.0, 1e4, 1e-15)


def test_chebyshev_apply_equals_scalar_series(dtype):
    lam = np.geomspace(1.0, 100.0, 7)
    coefficients = R.chebyshev_inverse_sqrt(1.0, 100.0, 1e-4)
    z = np.linspace(-1.0, 1.0, 7)
    y = R.chebyshev_apply(
        lambda v: jnp.asarray(lam, dtype) * v, jnp.asarray(z, dtype), coefficients, 1.0, 100.0
    )
    expected = np.polynomial.chebyshev.chebval((2 * lam - 101.0) / 99.0, coefficients) * z
    assert y.dtype == dtype
    atol = 1e3 * float(jnp.finfo(dtype).eps)
    np.testing.assert_allclose(np.asarray(y), expected, atol=atol)


def _spd(rng, eigenvalues):
    d = len(eigenvalues)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q, (q * eigenvalues) @ q.T


def test_resolvent_identity_float64(x64):
    # R_tau v = tau v + tau^2 s_tau(m + v): the cancellation costs ~u(1 + tau lam_max), at most
    # 1.1e-16 * 501 here, so 1e-12 leaves a factor ~20 for the matrix products.
    rng = np.random.default_rng(0)
    lam = rng.uniform(0.05, 0.5, 8)
    q, _ = _spd(rng, lam)
    m = rng.standard_normal(8)
    mean = jnp.asarray(m)

    def score(x, tau):
        return -jnp.asarray(q) @ (lam / (1 + tau * lam) * (jnp.asarray(q).T @ (x - mean)))

    v = jnp.asarray(rng.standard_normal(8))
    x0 = jnp.asarray(rng.standard_normal(8) * 3)
    for tau in np.geomspace(1e-3, 1e3, 9):
        exact = (q * (tau / (1 + tau * lam))) @ q.T @ np.asarray(v)
        known = R.resolvent(score, v, tau, mean)
        shifted = R.resolvent(score, v, tau, x0, score(x0, jnp.float64(tau)))
        for got in (known, shifted):
            assert got.dtype == jnp.float64
            assert np.linalg.norm(np.asarray(got) - exact) <= 1e-12 * np.linalg.norm(exact)


def test_resolvent_preserves_dtype(dtype):
    lam = jnp.asarray([1.0, 3.0], dtype)
    score = lambda x, tau: -(lam / (1 + tau * lam)) * x
    out = R.resolvent(score, jnp.ones(2, dtype), 0.5, jnp.zeros(2, dtype))
    assert out.dtype == dtype
    np.testing.assert_allclose(np.asarray(out), 1 / (np.asarray(lam) + 2.0), rtol=1e-6)


@pytest.mark.parametrize("bits", [3, 8])
def test_dithered_quantizer_error_is_uniform_and_independent(x64, bits):
    # Schuchman: e = Q(v + D) - D - v ~ U[-step/2, step/2] whatever v in range. For n draws the
    # sample mean has s.e. step/sqrt(12 n) and the sample variance s.e.
    # sqrt((E e^4 - sigma^4)/n) = step^2 sqrt(1/80 - 1/144)/sqrt(n); 5 sigma each.
    n, bound = 50_000, 2.5
    step = bound / (2 ** (bits - 1) - 1)
    inputs = np.array([-bound, -0.73 * bound, -0.1 * step, 0.0, 0.31 * step, 0.5 * bound, bound])
    v = jnp.asarray(np.repeat(inputs[:, None], n, axis=1))
    v_hat, codes = R.dithered_quantize(jax.random.key(1), v, jnp.float64(bound), bits)
    error = np.asarray(v_hat - v)
    assert np.max(np.abs(error)) <= step / 2 * (1 + 1e-9)
    assert np.max(np.abs(np.asarray(codes))) <= 2 ** (bits - 1) - 1
    mean_se = step / math.sqrt(12 * n)
    var_se = step**2 * math.sqrt(1 / 80 - 1 / 144) / math.sqrt(n)
    assert np.all(np.abs(error.mean(axis=1)) <= 5 * mean_se)
    assert np.all(np.abs(error.var(axis=1) - step**2 / 12) <= 5 * var_se)
    # no correlation with a random input spread over the range: |corr| <= 5/sqrt(n)
    u = jax.random.uniform(jax.random.key(2), (n,), jnp.float64, -bound, bound)
    u_hat, _ = R.dithered_quantize(jax.random.key(3), u, jnp.float64(bound), bits)
    corr = np.corrcoef(np.asarray(u), np.asarray(u_hat - u))[0, 1]
    assert abs(corr) <= 5 / math.sqrt(n)


def test_dithered_quantizer_dtype_and_zero_bound(dtype):
    v = jnp.zeros((2, 3), dtype)
    bound = jnp.asarray([[0.0], [1.0]], dtype)
    v_hat, codes = R.dithered_quantize(jax.random.key(0), v, bound, 4)
    assert v_hat.dtype == dtype and codes.dtype == jnp.int32
    assert np.all(np.isfinite(np.asarray(v_hat)))
    np.testing.assert_array_equal(np.asarray(v_hat[0]), 0.0)


def test_lanczos_exact_at_full_krylov_and_on_breakdown(x64):
    rng = np.random.default_rng(3)
    lam = np.geomspace(1.0, 1e3, 12)
    q, precision = _spd(rng, lam)
    z = jnp.asarray(rng.standard_normal(12))
    lanczos = jax.jit(R.lanczos_inverse_sqrt, static_argnums=(0, 2))
    exact = (q * lam**-0.5) @ q.T @ np.asarray(z)
    y = lanczos(lambda v: jnp.asarray(precision) @ v, z, 12)
    assert y.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(y), exact, rtol=1e-9, atol=1e-12)
    # three distinct eigenvalues: the Krylov space is invariant after 3 steps; 8 steps stay exact
    lam3 = np.repeat([1.0, 5.0, 40.0], 4)
    q3, precision3 = _spd(rng, lam3)
    y3 = lanczos(lambda v: jnp.asarray(precision3) @ v, z, 8)
    exact3 = (q3 * lam3**-0.5) @ q3.T @ np.asarray(z)
    np.testing.assert_allclose(np.asarray(y3), exact3, rtol=1e-9, atol=1e-12)


def test_lanczos_meets_the_krylov_bound_in_float32():
    # For f(A) b from n Lanczos steps, ||f(A) b - ||b|| V f(T) e_1|| <= 2 ||b|| E_{n-1}, with
    # E_{n-1} the best uniform error of a degree n-1 polynomial for f on the spectrum; the
    # Chebyshev interpolant bounds it. Whitened, the error gains at most sqrt(lambda_max);
    # float32 adds ~1e-5 (40-dimensional, reorthogonalised).
    dtype, kappa, steps = jnp.float32, 1e2, 20
    lam = jnp.asarray(np.geomspace(1.0, kappa, 40), dtype)
    z = jnp.asarray(np.random.default_rng(4).standard_normal(40), dtype)
    y = jax.jit(R.lanczos_inverse_sqrt, static_argnums=(0, 2))(lambda v: lam * v, z, steps)
    assert y.dtype == dtype
    error = float(jnp.linalg.norm(jnp.sqrt(lam) * y - z) / jnp.linalg.norm(z))
    f = lambda x: (((kappa - 1) * x + kappa + 1) / 2) ** -0.5  # lambda^{-1/2} on [-1, 1]
    nodes = np.cos(np.pi * (np.arange(steps) + 0.5) / steps)
    interpolant = np.polynomial.chebyshev.Chebyshev.fit(nodes, f(nodes), steps - 1)
    grid = np.linspace(-1, 1, 20001)
    best = np.max(np.abs(interpolant(grid) - f(grid)))
    assert error <= 2 * math.sqrt(kappa) * best + 1e-4
