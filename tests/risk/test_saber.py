"""Tests of jaxsample.risk.saber and jaxsample.kernels.betabinomial: closed forms, fits, budgets.

Statistical tests use z-tests at |z| < 4.5 (two-sided p ≈ 7e-6 per comparison) with standard
errors from the Monte Carlo variance or, for the MLE, the observed information.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats

from jaxsample import RESULTS, risk
from jaxsample.kernels import betabinomial as bb

Z = 4.5


def test_betaln_value_and_gradient_accuracy(x64):
    # SciPy's digamma is accurate to ~1e-15 here; its betaln to ~1e-9 (the reference is the
    # looser side of the comparison)
    a = np.array([0.05, 0.3, 2.0, 7.9, 9.99, 10.01, 50.0, 0.2])
    b = np.array([0.5, 8.0, 200.0, 8.0, 0.5, 3.0, 900.0, 1e5])
    value = bb.betaln(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(value, scipy.special.betaln(a, b), rtol=1e-8, atol=1e-8)
    da, db = jax.vmap(jax.grad(bb.betaln, argnums=(0, 1)))(jnp.asarray(a), jnp.asarray(b))
    psi = scipy.special.digamma
    np.testing.assert_allclose(da, psi(a) - psi(a + b), rtol=1e-10)
    np.testing.assert_allclose(db, psi(b) - psi(a + b), rtol=1e-7)
    # the large-argument branch is continuous at its switch point
    left = bb.log_gamma_ratio(jnp.asarray(0.3), jnp.asarray(np.nextafter(10.0, 0)))
    right = bb.log_gamma_ratio(jnp.asarray(0.3), jnp.asarray(10.0))
    assert abs(float(left - right)) < 1e-13

    # float32 gradients at N = 1e6: the digamma difference is not lost to cancellation
    # (reference: d ASR/dβ = −S·(ψ(β + N) − ψ(α + β + N) − ψ(β) + ψ(α + β)) in float64)
    alpha, beta, n = 0.3, 6.0, 1e6
    survival = math.exp(scipy.special.betaln(alpha, beta + n) - scipy.special.betaln(alpha, beta))
    expected = -survival * (psi(beta + n) - psi(alpha + beta + n) - psi(beta) + psi(alpha + beta))
    g32 = float(jax.grad(lambda b: risk.asr_at_n(n, alpha, b)[0])(jnp.asarray(beta, jnp.float32)))
    assert abs(g32 / expected - 1) < 1e-4


def test_logpmf_matches_scipy_and_sums_to_one(x64):
    n, alpha, beta = 40.0, 0.7, 3.5
    c = jnp.arange(41.0)
    logpmf = bb.logpmf(c, jnp.asarray(n), jnp.asarray(alpha), jnp.asarray(beta))
    np.testing.assert_allclose(logpmf, scipy.stats.betabinom.logpmf(np.arange(41), 40, alpha,
                                                                    beta), rtol=1e-8)
    assert abs(float(jnp.sum(jnp.exp(logpmf))) - 1) < 1e-12


def test_asr_closed_form_identities(x64):
    alpha, beta, pi0 = 0.35, 7.0, 0.2
    small, big = np.arange(0.0, 40.0), np.geomspace(1.0, 1e15, 61)
    n = jnp.asarray(np.concatenate([small, big]))  # one shape: one compilation
    asr, info = risk.asr_at_n(n, alpha, beta, pi0)
    asr = np.asarray(asr)
    plain = np.asarray(risk.asr_at_n(n, alpha, beta, 0.0)[0])
    # the info's survival is the breakable prompts' 1 − ASR@N/(1 − π₀), kept in log space
    np.testing.assert_allclose(-np.expm1(np.asarray(info.log_survival)), plain, rtol=1e-14)
    assert not bool(info.nonfinite)
    # ASR@1 = α/(α + β), and the product form Π_{j<N}(β + j)/(α + β + j) for small N
    assert abs(plain[1] - alpha / (alpha + beta)) < 1e-14
    product = np.array([np.prod((beta + np.arange(k)) / (alpha + beta + np.arange(k)))
                        for k in range(40)])
    np.testing.assert_allclose(plain[:40], 1 - product, rtol=1e-12, atol=1e-15)
    # increasing in N, tending to 1 − π₀, with survival ~ Γ(α + β)/Γ(β)·N^{−α}
    assert np.all(np.diff(asr[40:]) > 0)
    assert 0 < (1 - pi0) - asr[-1] < 0.01
    ratio = (1 - plain[40:]) * big**alpha * math.gamma(beta) / math.gamma(alpha + beta)
    assert abs(ratio[-1] - 1) < 1e-6 and abs(ratio[30] - 1) < 1e-3
    # zero inflation scales the curve
    np.testing.assert_allclose(asr, (1 - pi0) * plain, rtol=1e-14)


def test_asr_estimators_match_monte_carlo(x64):
    """Population ASR@N by simulation, and the conditional / anchored estimators as the exact
    expectations they are under the true model (z-tests, Bonferroni over 7 comparisons)."""
    rng = np.random.default_rng(0)
    alpha, beta, pi0, trials, num_prompts = 0.3, 6.0, 0.25, 20, 40_000
    theta = rng.beta(alpha, beta, num_prompts) * (rng.random(num_prompts) >= pi0)
    first = rng.geometric(np.maximum(theta, 1e-300))  # attempt of the first success
    for n in (1, 30, 400):
        hits = first <= n
        se = hits.std() / math.sqrt(num_prompts)
        assert abs(hits.mean() - float(risk.asr_at_n(n, alpha, beta, pi0)[0])) < Z * se
    # data from the model: c successes in the first `trials` attempts
    c = rng.binomial(trials, theta)
    n_more = 100
    fresh = rng.binomial(n_more, theta) > 0  # a fresh batch of n_more attempts
    mean, info = risk.asr_conditional(n_more, c, trials, alpha, beta, pi0)
    conditional = np.asarray(info.per_prompt)
    assert abs(float(mean) - conditional.mean()) < 1e-12 and not bool(info.nonfinite)
    diff = conditional - fresh
    assert abs(diff.mean()) < Z * diff.std() / math.sqrt(num_prompts)
    # anchored: within `trials + n_more` total attempts, the observed ones counted
    total = (c > 0) | fresh
    anchored = risk.asr_anchored(trials + n_more, c, trials, alpha, beta, pi0)[1].per_prompt
    diff = np.asarray(anchored) - total
    assert abs(diff.mean()) < Z * diff.std() / math.sqrt(num_prompts)
    # anchored at N = n is the observed fraction of broken prompts
    at_n = risk.asr_anchored(trials, c, trials, alpha, beta, pi0)[1].per_prompt
    np.testing.assert_array_equal(np.asarray(at_n), (c > 0).astype(np.float64))
    # π₀ = 0 is the base model's posterior: 1 − B(α + c, β + n − c + N)/B(α + c, β + n − c)
    base = risk.asr_conditional(n_more, c, trials, alpha, beta, 0.0)[1].per_prompt
    a, b = alpha + c[:50], beta + trials - c[:50]
    expected = -np.expm1(scipy.special.betaln(a, b + n_more) - scipy.special.betaln(a, b))
    np.testing.assert_allclose(np.asarray(base)[:50], expected, rtol=1e-8)


def test_unbiased_asr_at_k_is_exactly_unbiased(x64):
    """Σ_c Bin(c; n, θ)·(1 − C(n − c, k)/C(n, k)) = 1 − (1 − θ)^k, by finite summation."""
    for n in (7, 60):
        c = np.arange(n + 1)
        for k in sorted({1, max(1, n // 2), n}):
            mean, info = risk.unbiased_asr_at_k(c, n, k)
            estimator = np.asarray(info.per_prompt, np.float64)
            assert abs(float(mean) - estimator.mean()) < 1e-14
            for theta in (0.01, 0.3, 0.9):
                expected = scipy.stats.binom.pmf(c, n, theta) @ estimator
                assert abs(expected - (1 - (1 - theta) ** k)) < 1e-12


def _log_likelihood(params, successes, trials):
    """Σ_i log P(c_i) in the optimiser's parameters (logit mean, log ν[, logit π₀]), SciPy."""
    mean, nu = 1 / (1 + math.exp(-params[0])), math.exp(params[1])
    log_pmf = scipy.stats.betabinom.logpmf(successes, trials, mean * nu, (1 - mean) * nu)
    if len(params) == 3:
        pi0 = 1 / (1 + math.exp(-params[2]))
        log_pmf = np.logaddexp(np.where(successes == 0, math.log(pi0), -np.inf),
                               math.log1p(-pi0) + log_pmf)
    return log_pmf.sum()


def _observed_se(successes, trials, fit, zero_inflated, h=1e-3):
    """Standard errors from the observed information (central finite differences)."""
    mean = float(fit.alpha / (fit.alpha + fit.beta))
    params = [math.log(mean / (1 - mean)), math.log(float(fit.alpha + fit.beta))]
    if zero_inflated:
        params.append(math.log(float(fit.pi0) / (1 - float(fit.pi0))))
    params = np.asarray(params)
    size = len(params)
    hessian = np.empty((size, size))
    for i in range(size):
        for j in range(size):
            e_i, e_j = np.eye(size)[i] * h, np.eye(size)[j] * h
            values = [_log_likelihood(params + si * e_i + sj * e_j, successes, trials)
                      for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))]
            hessian[i, j] = -(values[0] - values[1] - values[2] + values[3]) / (4 * h * h)
    return params, np.sqrt(np.diag(np.linalg.inv(hessian)))


@pytest.mark.parametrize("zero_inflated", [False, True])
def test_mle_recovers_parameters(x64, zero_inflated):
    rng = np.random.default_rng(1)
    alpha, beta, pi0, trials, num_prompts = 0.4, 5.0, 0.3, 20, 3000
    theta = rng.beta(alpha, beta, num_prompts)
    if zero_inflated:
        theta = theta * (rng.random(num_prompts) >= pi0)
    c = rng.binomial(trials, theta)
    fit, info = risk.fit_beta_binomial(c, trials, zero_inflated=zero_inflated)
    assert bool(info.solver.converged) and not bool(info.nonfinite)
    estimate, se = _observed_se(c, trials, fit, zero_inflated)
    assert abs(float(info.log_likelihood) - _log_likelihood(estimate, c, trials)) < 1e-6
    truth = [math.log(alpha / beta), math.log(alpha + beta)]
    if zero_inflated:
        truth.append(math.log(pi0 / (1 - pi0)))
    assert np.all(np.abs(estimate - np.asarray(truth)) < Z * se), (estimate, truth, se)
    if not zero_inflated:
        # the zero-inflated model with π₀ → 0 reduces to this fit
        _, info_zi = risk.fit_beta_binomial(c, trials, zero_inflated=True)
        assert float(info_zi.log_likelihood) >= float(info.log_likelihood) - 1e-6


def test_budget_is_the_least_sufficient_n(x64):
    tau = jnp.asarray([0.01, 0.3, 0.5, 0.9, 0.99, 0.5, 0.85])
    alpha = jnp.asarray([0.3, 0.3, 0.05, 0.6, 0.6, 0.2, 0.2])
    beta = jnp.asarray([6.0, 6.0, 1.0, 30.0, 30.0, 3.0, 3.0])
    pi0 = jnp.asarray([0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.1])
    budget, info = risk.budget_at(tau, alpha, beta, pi0)
    reachable = np.asarray(tau < 1 - pi0)
    assert np.all(np.asarray(budget)[~reachable] == risk.UNREACHABLE)
    assert budget.dtype == jnp.int64
    # the search's status says which budgets were found; its ASR is the curve at the budget
    np.testing.assert_array_equal(np.asarray(info.solver.converged), reachable)
    assert np.all(np.asarray(info.solver.num_iterations) == (2**53).bit_length())
    assert not bool(info.nonfinite)
    b = jnp.where(budget > 0, budget, 1).astype(jnp.float64)
    at, _ = risk.asr_at_n(b, alpha, beta, pi0)
    before, _ = risk.asr_at_n(b - 1, alpha, beta, pi0)
    np.testing.assert_allclose(np.asarray(info.asr)[reachable], np.asarray(at)[reachable],
                               rtol=1e-12)
    assert np.all(np.asarray(at >= tau)[reachable] & np.asarray(before < tau)[reachable])


def test_bad_inputs_raise_clear_errors():
    c, trials = np.array([0, 3, 5]), np.array([10, 10, 4])
    with pytest.raises(ValueError, match="successes must be <= trials"):
        risk.fit_beta_binomial(c, trials)
    with pytest.raises(ValueError,
                       match=r"successes must be finite and >= 0, got values in \[-1, 2\]"):
        risk.asr_anchored(100, np.array([-1, 2]), 10, 0.3, 5.0)
    with pytest.raises(ValueError, match="trials must be finite and >= 1"):
        risk.unbiased_asr_at_k(np.array([0, 0]), np.array([0, 3]), 1)
    with pytest.raises(ValueError, match="successes must hold whole numbers"):
        risk.fit_beta_binomial(np.array([0.5, 1.0]), 4)
    for tau in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="tau"):
            risk.budget_at(tau, 0.3, 5.0)
    with pytest.raises(ValueError, match="alpha must be finite and > 0, got 0"):
        risk.asr_at_n(10, 0.0, 5.0)
    with pytest.raises(ValueError, match=r"pi0 must be finite and in \[0, 1\), got 1"):
        risk.asr_at_n(10, 0.3, 5.0, pi0=1.0)
    with pytest.raises(ValueError, match="k must be <="):
        risk.unbiased_asr_at_k(np.array([0, 1]), 5, 6)
    with pytest.raises(ValueError, match="n must be >= trials"):
        risk.asr_anchored(5, np.array([0, 1]), 10, 0.3, 5.0)
    with pytest.raises(ValueError, match="estimator"):
        risk.bootstrap_asr(jax.random.key(0), 100, np.array([0, 1]), 10, estimator="plugin")



def test_blocks_with_progress_equal_one_vmap_and_report_each_block():
    """The bootstrap's metered path: rows in min(10, n) blocks of a scan, the last one padded
    (13 rows: 10 blocks of 2, 7 padding rows cut), one report per block, the one-vmap result."""
    import io

    import jaxsample
    from jaxsample._batching import vmap_in_blocks

    x = jnp.arange(13.0)
    y = jnp.arange(26.0).reshape(13, 2)
    meter = jaxsample.TextProgress(every=1, file=io.StringIO())

    def fn(a, b):
        return {"sum": a + b.sum(), "outer": a * b}

    blocked = jax.jit(lambda x, y: vmap_in_blocks(fn, x, y, progress=meter))(x, y)
    jax.effects_barrier()
    assert meter.steps_reported == list(range(1, 11))
    plain = jax.vmap(fn)(x, y)
    for name in plain:
        np.testing.assert_array_equal(np.asarray(blocked[name]), np.asarray(plain[name]))


def test_bootstrap_fits_report_progress(x64):
    import io

    import jaxsample

    c = np.array([0, 0, 0, 1, 1, 2, 3, 5, 8, 12, 19, 20])
    meter = jaxsample.TextProgress(every=1, file=io.StringIO())
    fits, info = risk.bootstrap_fits(jax.random.key(3), c, 20, num_resamples=4, progress=meter)
    jax.effects_barrier()
    assert meter.steps_reported == [1, 2, 3, 4]
    assert fits.alpha.shape == (4,) and bool(jnp.all(info.solver.converged))
    assert not bool(jnp.any(info.nonfinite))
    with pytest.raises(TypeError, match="progress"):
        risk.bootstrap_asr(jax.random.key(3), 100, c, 20, num_resamples=2, progress="bar")


# ----------------------------------------------------------------------------------------------
# statuses that tell the truth: a fit cut short is reported, in Info under jit and eagerly

_COUNTS = np.array([0, 0, 1, 1, 2, 3, 3, 4, 6, 8, 9, 12, 15, 19, 20])


def test_a_fit_cut_short_is_reported_under_jit_and_warned_eagerly():
    # one L-BFGS step from the moment start cannot meet the gradient tolerance (1e-4)
    fit = jax.jit(lambda c: risk.fit_beta_binomial(c, 20, max_iterations=1))
    _, info = fit(jnp.asarray(_COUNTS, jnp.float32))
    assert not bool(info.solver.converged) and int(info.solver.num_iterations) == 1
    assert RESULTS[info.solver.result].startswith("did not converge within max_iterations")
    with pytest.warns(RuntimeWarning, match="fit_beta_binomial's L-BFGS fit did not succeed"):
        risk.fit_beta_binomial(_COUNTS, 20, max_iterations=1)
    # the default budget converges on the same data, silently
    _, info = risk.fit_beta_binomial(_COUNTS, 20)
    assert bool(info.solver.converged)


def test_bootstrap_fits_cut_short_are_reported_under_jit_and_warned_eagerly():
    # eager bootstrap_fits and bootstrap_asr share one compilation of the resampled fits;
    # under jit, bootstrap_asr's Info reports both its fit and the bootstrap fits
    key = jax.random.key(3)
    with pytest.warns(RuntimeWarning, match=r"bootstrap_fits' L-BFGS fits did not succeed "
                                            r"\(4 of 4 solves\)"):
        risk.bootstrap_fits(key, _COUNTS, 20, num_resamples=4, max_iterations=1)
    interval = jax.jit(lambda k, c: risk.bootstrap_asr(k, 100, c, 20, num_resamples=4,
                                                       max_iterations=1))
    _, info = interval(key, jnp.asarray(_COUNTS, jnp.float32))
    assert not bool(info.solver.converged) and float(info.converged_fraction) == 0.0
    with pytest.warns(RuntimeWarning, match="bootstrap_asr's fit to all prompts"):
        risk.bootstrap_asr(key, 100, _COUNTS, 20, num_resamples=4, max_iterations=1)


def test_an_unreachable_budget_is_reported_under_jit_and_warned_eagerly():
    budget, info = jax.jit(lambda t: risk.budget_at(t, 0.3, 6.0, 0.2))(jnp.asarray(0.9))
    assert int(budget) == risk.UNREACHABLE and not bool(info.solver.converged)
    with pytest.warns(RuntimeWarning, match="τ not reached within max_budget"):
        risk.budget_at(0.9, 0.3, 6.0, pi0=0.2)
