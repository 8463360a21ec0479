"""Tests of jaxsample.risk.best_of_n and jaxsample.kernels.extremes.

Exact identities are checked to round-off; Monte Carlo comparisons use z-tests at |z| < 4.5
(two-sided p ≈ 7e-6 each), with the binomial standard error of the simulated accuracy.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from jaxsample import risk
from jaxsample.kernels import extremes
from jaxsample.risk import GPD, Empirical, Gumbel, Normal

Z = 4.5
N_GRID = np.array([1.0, 4.0, 16.0, 256.0, 4096.0, 1e6, 1e9, 1e12])  # one shape: one compile


def _accuracy(p, correct, incorrect, n=N_GRID):
    acc, info = risk.bon_accuracy(jnp.asarray(n), p, correct, incorrect)
    assert not bool(info.nonfinite)
    return np.asarray(acc), np.asarray(info.error_estimate)


def _reference(n, p, correct, incorrect, lo, hi):
    """N p ∫ f_c G^{N−1} dx by adaptive quadrature in x (SciPy), float64."""
    def integrand(x):
        log_g = np.logaddexp(np.log(p) + correct.logcdf(x), np.log1p(-p) + incorrect.logcdf(x))
        return np.exp(np.log(n) + np.log(p) + correct.logpdf(x) + (n - 1) * log_g)
    return scipy.integrate.quad(integrand, lo, hi, limit=500, epsabs=1e-13, epsrel=1e-12)[0]


def test_laws_are_consistent():
    """Every law's cdf + sf = 1, density = d cdf/dx, bracket encloses the level, and the chunked
    empirical law equals the dense one; each check is one jitted call, not an eager op loop."""
    h = 1e-4  # central difference of the cdf: error ~h²·f'''/6

    def check(law, x, log_sf):
        # each function evaluated once on all its points: a third of the program to compile
        n, m = x.shape[0], log_sf.shape[0]
        log_cdf = law.logcdf(jnp.concatenate([x, x + h, x - h]))
        lo, hi = law.bracket(log_sf)
        sf_all = law.logsf(jnp.concatenate([x, lo, hi]))
        sf, sf_lo, sf_hi = sf_all[:n], sf_all[n:n + m], sf_all[n + m:]
        density = (jnp.exp(log_cdf[n:2 * n]) - jnp.exp(log_cdf[2 * n:])) / (2 * h)
        return (jnp.exp(log_cdf[:n]) + jnp.exp(sf), density - jnp.exp(law.logpdf(x)), sf_lo,
                sf_hi, sf)

    with jax.enable_x64(True):
        x = np.linspace(0.05, 4.0, 9)
        log_sf = np.asarray([-0.01, -1.0, -5.0, -30.0])
        scores = np.random.default_rng(0).normal(size=50)
        for law in (Normal(0.5, 1.5), Gumbel(0.2, 0.7), GPD(0.0, 1.0, 0.3), GPD(0.0, 2.0, -0.2),
                    Empirical(scores)):
            total, density_error, sf_lo, sf_hi, sf = jax.device_get(
                jax.jit(check)(law, jnp.asarray(x), jnp.asarray(log_sf)))
            np.testing.assert_allclose(total, 1.0, atol=1e-13)
            np.testing.assert_allclose(density_error, 0.0, atol=1e-7)
            assert np.all(sf_lo >= log_sf - 1e-9) and np.all(sf_hi <= log_sf + 1e-9)
            if law.exact_quantile:
                np.testing.assert_allclose(sf_lo, log_sf, rtol=1e-10)
        chunked = jax.jit(lambda law, x: law.logsf(x))(Empirical(scores, chunk_size=4),
                                                       jnp.asarray(x))
        np.testing.assert_allclose(chunked, sf, rtol=1e-12)  # sf: the dense Empirical's, last


def test_n_one_gives_p_and_equal_laws_give_p(x64):
    acc, _ = _accuracy(0.3, Normal(1.0, 1.2), Normal(0.0, 1.0), n=N_GRID[:1] * np.ones(8))
    np.testing.assert_allclose(acc, 0.3, atol=1e-14)
    acc, _ = _accuracy(0.3, Normal(0.4, 2.0), Normal(0.4, 2.0))
    np.testing.assert_allclose(acc, 0.3, atol=1e-14)
    acc, _ = _accuracy(0.7, GPD(1.0, 2.0, 0.5), GPD(1.0, 2.0, 0.5))
    np.testing.assert_allclose(acc, 0.7, atol=1e-14)


def test_quadrature_matches_adaptive_reference(x64):
    cases = [
        (Normal(1.0, 1.2), Normal(0.0, 1.0), scipy.stats.norm(1, 1.2), scipy.stats.norm(0, 1),
         (-20.0, 30.0)),
        (Normal(1.0, 1.0), Normal(0.0, 1.5), scipy.stats.norm(1, 1), scipy.stats.norm(0, 1.5),
         (-20.0, 30.0)),
        (GPD(0.0, 1.0, 0.0), GPD(math.log(3.0), 1.0, 0.0), scipy.stats.expon(0, 1),
         scipy.stats.expon(math.log(3.0), 1), (0.0, 60.0)),
    ]
    for correct, incorrect, ref_c, ref_w, (lo, hi) in cases:
        acc, error = _accuracy(0.3, correct, incorrect)
        for n, value in zip(N_GRID[:6], acc[:6], strict=True):
            assert abs(value - _reference(n, 0.3, ref_c, ref_w, lo, hi)) < 1e-10
        assert np.all(error < 1e-12)


def test_quadrature_matches_monte_carlo(x64):
    """Direct simulation (all N rewards drawn) at N = 4, maxima by inversion at N = 4096."""
    correct, incorrect = Normal(1.0, 1.0), Normal(0.0, 1.5)
    acc, _ = _accuracy(0.3, correct, incorrect)
    mc, info = risk.bon_simulate(jax.random.key(0), 4, 0.3, correct, incorrect,
                                 num_trials=40_000, method="direct")
    assert abs(float(mc) - acc[1]) < Z * float(info.standard_error)
    mc, info = risk.bon_simulate(jax.random.key(1), 4096, 0.3, correct, incorrect,
                                 num_trials=40_000)
    assert abs(float(mc) - acc[4]) < Z * float(info.standard_error)
    assert not bool(info.nonfinite)


def test_float32_matches_float64():
    acc32, _ = risk.bon_accuracy(jnp.asarray(N_GRID, jnp.float32), jnp.float32(0.3),
                                 Normal(1.0, 1.0), Normal(0.0, 1.5))
    assert acc32.dtype == jnp.float32
    with jax.enable_x64(True):
        acc64, _ = _accuracy(0.3, Normal(1.0, 1.0), Normal(0.0, 1.5))
    np.testing.assert_allclose(acc32, acc64, atol=2e-5)


def test_regime_limits(x64):
    p = 0.3
    # σ_c > σ_w: correct tail dominates, Acc → 1 (polynomially)
    acc, _ = _accuracy(p, Normal(1.0, 1.2), Normal(0.0, 1.0))
    assert np.all(np.diff(acc) > 0) and acc[-1] > 0.999
    # σ_c < σ_w, μ_c > μ_w: rises, peaks at a finite N, then falls to 0
    acc, _ = _accuracy(p, Normal(1.0, 1.0), Normal(0.0, 1.5))
    best = int(np.argmax(acc))
    assert 0 < best < len(acc) - 1 and acc[best] > p and acc[-1] < 1e-3
    # equal variances, μ_c > μ_w: h increasing, so Acc non-decreasing (→ 1 slower than any power)
    acc, _ = _accuracy(p, Normal(1.0, 1.0), Normal(0.0, 1.0))
    assert np.all(np.diff(acc) >= -1e-14) and 0.95 < acc[-1] < 1
    # critical: shifted exponentials with survival ratio a : b = 1 : 3 → pa/(pa + (1 − p)b)
    acc, _ = _accuracy(p, GPD(0.0, 1.0, 0.0), GPD(math.log(3.0), 1.0, 0.0))
    assert abs(acc[-1] - p / (p + (1 - p) * 3)) < 1e-12
    # critical: Pareto tails of equal index ξ, c = (s_c/s_w)^{1/ξ}
    acc, _ = _accuracy(p, GPD(0.0, 2.0, 0.5), GPD(0.0, 1.0, 0.5))
    c = 2.0 ** (1 / 0.5)
    assert abs(acc[-1] - p * c / (p * c + 1 - p)) < 1e-5


def test_pool_accuracy_equals_brute_force_over_subsets(x64):
    scores = np.array([0.3, 1.2, 1.2, -0.5, 2.0, 0.3, 0.9])
    labels = np.array([1, 0, 1, 0, 0, 1, 1])
    expected = []
    for n in range(1, 8):
        wins = []
        for subset in itertools.combinations(range(7), n):
            top = max(scores[list(subset)])
            tied = [i for i in subset if scores[i] == top]
            wins.append(np.mean(labels[tied]))  # ties broken uniformly at random
        expected.append(np.mean(wins))
    acc, info = risk.bon_pool_accuracy(scores, labels, jnp.arange(1.0, 8.0))
    assert not bool(info.nonfinite)
    np.testing.assert_allclose(acc, expected, atol=1e-13)


def test_gpd_fit_matches_scipy_and_its_standard_errors(x64):
    rng = np.random.default_rng(3)
    fit = jax.jit(extremes.gpd_fit)
    for shape in (-0.3, 0.0, 0.4):
        y = scipy.stats.genpareto.rvs(shape, scale=2.0, size=2000, random_state=rng)
        ours = fit(jnp.asarray(y))
        c, _, scale = scipy.stats.genpareto.fit(y, floc=0)
        reference = scipy.stats.genpareto.logpdf(y, c, 0, scale).sum()
        assert bool(ours.solver.converged)
        assert float(ours.log_likelihood) >= reference - 1e-6
        assert abs(float(ours.log_likelihood) - scipy.stats.genpareto.logpdf(
            y, float(ours.shape), 0, float(ours.scale)).sum()) < 1e-8
        assert abs(float(ours.shape) - c) < 1e-3 and abs(float(ours.scale) / scale - 1) < 1e-3
        # recovery within the asymptotic standard errors
        assert abs(float(ours.shape) - shape) < Z * float(ours.shape_se)
        assert abs(math.log(float(ours.scale) / 2.0)) < Z * float(ours.log_scale_se)
        # the closed-form standard errors against the observed information (finite differences)
        def nll(v, y=y):
            return -scipy.stats.genpareto.logpdf(y, v[0], 0, math.exp(v[1])).sum()
        v0, h = np.array([float(ours.shape), math.log(float(ours.scale))]), 1e-4
        hessian = np.empty((2, 2))
        for i, j in itertools.product(range(2), range(2)):
            e_i, e_j = np.eye(2)[i] * h, np.eye(2)[j] * h
            hessian[i, j] = (nll(v0 + e_i + e_j) - nll(v0 + e_i - e_j) - nll(v0 - e_i + e_j)
                             + nll(v0 - e_i - e_j)) / (4 * h * h)
        se = np.sqrt(np.diag(np.linalg.inv(hessian)))
        np.testing.assert_allclose([float(ours.shape_se), float(ours.log_scale_se)], se,
                                   rtol=0.15)


def test_tail_regime_classifies_the_three_regimes(x64):
    rng = np.random.default_rng(4)
    size = 4000
    heavy = scipy.stats.genpareto.rvs(0.5, size=size, random_state=rng)
    light = scipy.stats.genpareto.rvs(0.1, size=size, random_state=rng)
    regime, info = risk.tail_regime(heavy, light)
    assert regime == "correct-dominant" and float(info.limit_accuracy) == 1.0
    assert bool(info.solver.converged) and not bool(info.nonfinite)
    assert int(info.solver.num_iterations) == int(info.correct.solver.num_iterations) + int(
        info.incorrect.solver.num_iterations)
    assert risk.tail_regime(light, heavy)[0] == "incorrect-dominant"
    # equal index 1/2, scales 2 : 1: critical with limit share·c/(share·c + 1 − share)
    wide = scipy.stats.genpareto.rvs(0.5, scale=2.0, size=size, random_state=rng)
    narrow = scipy.stats.genpareto.rvs(0.5, scale=1.0, size=size, random_state=rng)
    regime, info = risk.tail_regime(wide, narrow, p_correct=0.3)
    assert regime == "critical"
    truth = 0.3 * 4 / (0.3 * 4 + 0.7)
    assert abs(float(info.limit_accuracy) - truth) < 0.1
    # Gaussians: the wider incorrect class wins
    correct = rng.normal(1.0, 1.0, size)
    incorrect = rng.normal(0.0, 1.5, size)
    assert risk.tail_regime(correct, incorrect)[0] == "incorrect-dominant"
    assert risk.tail_regime(incorrect, correct)[0] == "correct-dominant"


def test_tail_tension_and_the_hazard_gap_identity(x64):
    # d/du log q(u) = ω_w(u)(λ_w(u) − λ_c(u)), q = p F̄_c/Ḡ, exact for any laws
    p, correct, incorrect = 0.3, Normal(1.0, 1.0), Normal(0.0, 1.5)

    def log_q(u):
        return jnp.log(p) + correct.logsf(u) - jnp.logaddexp(
            jnp.log(p) + correct.logsf(u), jnp.log1p(-p) + incorrect.logsf(u))

    def rhs(u):
        hazard = lambda law: jnp.exp(law.logpdf(u) - law.logsf(u))  # noqa: E731
        omega = jnp.exp(jnp.log1p(-p) + incorrect.logsf(u) - jnp.logaddexp(
            jnp.log(p) + correct.logsf(u), jnp.log1p(-p) + incorrect.logsf(u)))
        return omega * (hazard(incorrect) - hazard(correct))

    u = jnp.linspace(-1.0, 6.0, 8)
    np.testing.assert_allclose(*jax.jit(lambda u: (jax.vmap(jax.grad(log_q))(u), rhs(u)))(u),
                               rtol=1e-9, atol=1e-12)
    # on samples: the wider incorrect class makes more samples hurt in the tail; a wider
    # correct class makes them help
    rng = np.random.default_rng(5)
    n = jnp.asarray([100.0, 1e4, 1e6])
    labels = np.arange(10_000) < 3000
    hurt = np.where(labels, rng.normal(1.0, 1.0, 10_000), rng.normal(0.0, 1.5, 10_000))
    gap, out = risk.tail_tension(hurt, labels, n=n)
    assert not bool(out.nonfinite) and not np.any(np.asarray(out.helps))
    np.testing.assert_array_equal(np.asarray(out.helps), np.asarray(gap) > 0)
    assert bool(out.solver.converged)
    assert np.all(np.diff(np.asarray(out.accuracy)) < 0)
    helps = np.where(labels, rng.normal(1.0, 1.5, 10_000), rng.normal(0.0, 1.0, 10_000))
    _, out = risk.tail_tension(helps, labels, n=n)
    assert np.all(np.asarray(out.helps)) and np.all(np.diff(np.asarray(out.accuracy)) > 0)


def test_bad_inputs_raise_clear_errors(x64):
    with pytest.raises(ValueError, match="scores must be finite"):
        Empirical(np.array([0.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="correct must be finite"):
        risk.tail_regime(np.array([0.0, np.inf] * 20), np.zeros(40))
    with pytest.raises(ValueError, match="labels must be 0"):
        risk.tail_tension(np.arange(10.0), np.array([0, 1, 2] + [0] * 7))
    with pytest.raises(ValueError, match="labels must be 0"):
        risk.bon_pool_accuracy(np.arange(4.0), np.array([0.5, 1, 0, 1]), 2)
    with pytest.raises(ValueError, match="p_correct must be in"):
        risk.bon_accuracy(4, 1.5, Normal(0.0, 1.0), Normal(0.0, 1.0))
    with pytest.raises(ValueError, match="n must be finite and >= 1"):
        risk.bon_accuracy(0, 0.5, Normal(0.0, 1.0), Normal(0.0, 1.0))
    with pytest.raises(TypeError, match="incorrect must be a reward law"):
        risk.bon_accuracy(4, 0.5, Normal(0.0, 1.0), scipy.stats.norm())
    with pytest.raises(ValueError, match="sd must be finite and > 0"):
        Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="n must be <= the pool size"):
        risk.bon_pool_accuracy(np.arange(4.0), np.array([0, 1, 0, 1]), 5)
    with pytest.raises(ValueError, match="fewer than min_exceedances"):
        risk.tail_regime(np.zeros(4000), np.arange(4000.0))


# ----------------------------------------------------------------------------------------------
# statuses that tell the truth: a GPD fit on the edge of its search is reported


def test_gpd_fit_on_the_edge_of_its_search_is_not_successful():
    rng = np.random.default_rng(5)
    # tied excesses (two values): the maximum is pressed against the constraint ξ >= −1
    tied = extremes.gpd_fit(jnp.asarray(rng.integers(1, 3, 400), jnp.float32))
    assert float(tied.shape) < -0.999 and not bool(tied.solver.converged)
    # ξ = 10 lies past the profile grid (v = log(1 + θ·max y) <= 24)
    heavy = extremes.gpd_fit(jnp.asarray(rng.pareto(0.1, 400), jnp.float32))
    assert not bool(heavy.solver.converged) and not bool(heavy.nonfinite)
    # an exponential sample is an interior optimum
    inner = extremes.gpd_fit(jnp.asarray(rng.exponential(size=400), jnp.float32))
    assert bool(inner.solver.converged)


def test_tail_fits_on_the_edge_are_reported_under_jit_and_warned_eagerly():
    rng = np.random.default_rng(6)
    # the correct class's rewards take three values (a coarse grader): above the pooled 0.6
    # quantile (1.0) its excesses are tied at 1 and 2, and its GPD fit sits on ξ = −1
    correct = rng.integers(1, 4, 2000).astype(float)
    incorrect = rng.normal(size=2000) - 0.5
    scores = jnp.asarray(np.concatenate([correct, incorrect]), jnp.float32)
    labels = jnp.arange(4000) < 2000
    settings = dict(threshold_quantile=0.6)
    _, info = jax.jit(lambda s, l: risk.tail_tension(s, l, n=jnp.asarray([10.0]), **settings))(
        scores, labels)
    assert not bool(info.correct.solver.converged) and not bool(info.solver.converged)
    with pytest.warns(RuntimeWarning, match="tail_tension's GPD tail fits did not succeed"):
        risk.tail_tension(scores, labels, n=jnp.asarray([10.0]), **settings)
    with pytest.warns(RuntimeWarning, match="tail_regime's GPD tail fits did not succeed"):
        _, info = risk.tail_regime(jnp.asarray(correct, jnp.float32),
                                   jnp.asarray(incorrect, jnp.float32), **settings)
    assert not bool(info.solver.converged)
