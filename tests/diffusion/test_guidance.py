"""Tests specific to the guidance engine: exact oracles, TAG, DPS, NDTM, fibers, bad values.

dtype preservation, jit == eager, vmap over keys, traced hyper-parameters and bad input are in the
contract entries (tests/contract/diffusion_guidance.py).

One problem serves most tests so that compilations are shared: a 4-component Gaussian mixture in
d = 8 with anisotropic covariances, N = 20 steps, B = 256 samples, the linear schedule.
"""

import functools
import io
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.stats

import jaxsample
from jaxsample.diagnostics import mmd
from jaxsample.diffusion import guidance
from jaxsample.kernels import guidance as kernels
from jaxsample.targets import GaussianMixture

DIM, NUM_COMPONENTS, NUM_STEPS, BATCH = 8, 4, 20, 256
SCHEDULE = guidance.VPSchedule("linear")
GRID = kernels.time_grid(NUM_STEPS, jnp.float32)


def _mixture():
    rng = np.random.default_rng(1)
    means = rng.normal(size=(NUM_COMPONENTS, DIM))
    root = rng.normal(size=(NUM_COMPONENTS, DIM, DIM)) / np.sqrt(DIM)
    cov = 0.1 * root @ np.swapaxes(root, 1, 2) + 0.05 * np.eye(DIM)
    weights = np.array([0.3, 0.3, 0.2, 0.2])
    return GaussianMixture(*(jnp.asarray(a, jnp.float32) for a in (means, cov, weights)))


PRIOR = _mixture()
NOISED = guidance.NoisedMixture(PRIOR, SCHEDULE)
# stationary data: N(0, I) is every marginal of the VP process (same shapes as PRIOR: one compile)
STATIONARY = GaussianMixture(jnp.zeros((NUM_COMPONENTS, DIM), jnp.float32),
                             jnp.ones(NUM_COMPONENTS, jnp.float32))
PROJECTION = np.eye(2, DIM, dtype=np.float32)                       # φ(x) = x[:2]
QUERY = 0.5 * (PRIOR.means[0] + PRIOR.means[1])                     # the fiber crosses 0 and 1
FIBER = guidance.LinearFiberLaw(PRIOR, jnp.asarray(PROJECTION), jnp.asarray(PROJECTION) @ QUERY)
X_T = jax.random.normal(jax.random.key(1), (BATCH, DIM))


def _features(x):
    return x[:2]


COST = guidance.FiberCost(_features, QUERY)


@functools.cache
def _exact_fiber_draws(num=4096):
    return FIBER.sample(jax.random.key(5), num)


# ------------------------------------------------------------------------------- oracles


def test_schedules_end_points_and_table():
    t = jnp.array([0.0, 0.5, 1.0], jnp.float32)
    for schedule in (guidance.VPSchedule("linear"), guidance.VPSchedule("cosine")):
        alpha = np.asarray(schedule.alpha_bar(t))
        assert alpha[0] == 1.0 and np.all(np.diff(alpha) < 0) and 0 < alpha[-1] < 1e-3
    np.testing.assert_allclose(guidance.VPSchedule("linear").alpha_bar(t)[-1],
                               np.exp(-(0.1 + 0.5 * 19.9)), rtol=1e-5)
    table = guidance.VPSchedule("table", alpha_bar=[0.9, 0.5, 0.1])
    np.testing.assert_allclose(table.alpha_bar(jnp.array([1 / 3, 0.5, 1.0], jnp.float32)),
                               [0.9, np.sqrt(0.9 * 0.5), 0.1], rtol=1e-5)


def test_gmm_score_and_eps_closed_forms(x64):
    mixture = GaussianMixture(*(jnp.asarray(np.asarray(a), jnp.float64) for a in (
        PRIOR.means, PRIOR.covs, PRIOR.weights)))
    prior = guidance.NoisedMixture(mixture, SCHEDULE)
    x = jnp.asarray(np.random.default_rng(0).normal(size=DIM))
    t = jnp.float64(0.3)
    score, grad, log_prob, eps = jax.jit(lambda x, t: (
        prior.score(x, t), jax.grad(prior.log_prob)(x, t), prior.log_prob(x, t),
        prior(x, t)))(x, t)
    np.testing.assert_allclose(score, grad, rtol=1e-10)
    np.testing.assert_allclose(eps, -np.sqrt(1 - SCHEDULE.alpha_bar(t)) * score, rtol=1e-12)
    # the density itself against scipy
    alpha = float(SCHEDULE.alpha_bar(t))
    dens = sum(w * scipy.stats.multivariate_normal(
        np.sqrt(alpha) * m, alpha * c + (1 - alpha) * np.eye(DIM)).pdf(np.asarray(x))
        for w, m, c in zip(np.asarray(mixture.weights), np.asarray(mixture.means),
                           np.asarray(mixture.covs), strict=True))
    assert float(log_prob) == pytest.approx(np.log(dens), rel=1e-10)


def test_time_linked_score_is_grad_of_exact_time_logits(x64):
    x = jnp.asarray(np.random.default_rng(0).normal(size=DIM))
    grid = kernels.time_grid(NUM_STEPS, jnp.float64)
    indices = jnp.array([0, 7, NUM_STEPS - 1])

    @jax.jit
    def evaluate(x):
        logits = lambda y: NOISED.time_logits(y, grid)                        # noqa: E731
        jacobian = jax.jacobian(lambda y: jax.nn.log_softmax(logits(y)))(x)   # (T, d)
        closed = jax.vmap(lambda i: NOISED.time_linked_score(x, grid, i))(indices)
        return jacobian, closed, jnp.exp(NOISED.time_log_posterior(x, grid))

    jacobian, closed, posterior = evaluate(x)
    np.testing.assert_allclose(closed, jacobian[indices], rtol=1e-9, atol=1e-9)
    # Σ_τ p(τ | x) ∇ log p(τ | x) = ∇ Σ_τ p(τ | x) = 0
    scale = float(jnp.max(jnp.abs(jacobian)))
    np.testing.assert_allclose(posterior @ jacobian, np.zeros(DIM), atol=1e-12 * scale)


def test_linear_fiber_law_matches_gaussian_conditioning():
    """LinearFiberLaw: draws satisfy Ax = y; weights and means against a float64 computation."""
    draws = np.asarray(_exact_fiber_draws())
    np.testing.assert_allclose(draws[:, :2], np.broadcast_to(np.asarray(QUERY[:2]), (4096, 2)),
                               atol=1e-5)
    a, y = PROJECTION.astype(np.float64), PROJECTION @ np.asarray(QUERY, np.float64)
    log_w = []
    for k in range(NUM_COMPONENTS):
        m, c = np.asarray(PRIOR.means[k], np.float64), np.asarray(PRIOR.covs[k], np.float64)
        s = a @ c @ a.T
        log_w.append(np.log(np.asarray(PRIOR.weights[k], np.float64))
                     + scipy.stats.multivariate_normal(a @ m, s).logpdf(y))
        np.testing.assert_allclose(FIBER.means[k], m + c @ a.T @ np.linalg.solve(s, y - a @ m),
                                   rtol=1e-4, atol=1e-5)
    weights = np.exp(np.array(log_w) - scipy.special.logsumexp(log_w))
    np.testing.assert_allclose(FIBER.weights, weights, atol=1e-5)
    assert weights[0] > 0.2 and weights[1] > 0.2      # the fiber crosses components 0 and 1


def test_learned_time_predictor_approaches_the_exact_one():
    """Cross-entropy training shrinks KL(exact ‖ learned); no predictor beats the Bayes one.

    Both KL estimates use the same 2048 (τ, x_τ) pairs; each is a mean of non-negative terms, so
    the comparison is paired; the exact posterior's own KL is 0 by construction.
    """
    grid = kernels.time_grid(10, jnp.float32)
    data = PRIOR.sample(jax.random.key(0), 4096)
    untrained = guidance.TimePredictor(jax.random.key(1), DIM, 10, width=16)
    trained, info = guidance.train_time_predictor(jax.random.key(2), untrained, data,
                                                  SCHEDULE, grid, num_steps=400,
                                                  batch_size=128, learning_rate=3e-3)
    losses = np.asarray(info.losses)
    assert losses.shape == (400,) and float(losses[-100:].mean()) < float(losses[:20].mean())
    assert not bool(info.nonfinite)
    # any optax optimizer: Adam at the same rate, given as a transformation, is the same fit
    same, same_info = guidance.train_time_predictor(jax.random.key(2), untrained, data, SCHEDULE,
                                                    grid, num_steps=400, batch_size=128,
                                                    optimizer=optax.adam(3e-3))
    np.testing.assert_allclose(same_info.losses, losses, rtol=1e-5, atol=1e-6)
    kl_before, _ = guidance.time_posterior_kl(jax.random.key(3), PRIOR, untrained, SCHEDULE, grid,
                                              num_samples=2048)
    kl_after, kl_info = guidance.time_posterior_kl(jax.random.key(3), PRIOR, trained, SCHEDULE,
                                                   grid, num_samples=2048)
    assert float(kl_after) < 0.5 * float(kl_before) and not bool(kl_info.nonfinite)
    # KL ≥ 0: the exact posterior is optimal
    assert float(kl_after) > -3 * float(kl_info.standard_error)


# -------------------------------------------------------------------------------- samplers


@functools.cache
def _sampler(kind):
    noised = lambda prior: guidance.NoisedMixture(prior, SCHEDULE)         # noqa: E731
    tag_terms = lambda prior, omega: [guidance.TAG(                       # noqa: E731
        noised(prior).time_predictor(GRID), omega)]
    if kind == "base":
        return jax.jit(lambda key, x, eta, prior: guidance.sample(
            key, noised(prior), SCHEDULE, x, num_steps=NUM_STEPS, solver=guidance.DDIM(eta)))
    if kind == "tag-off":
        return jax.jit(lambda key, x, eta, prior: guidance.sample(
            key, noised(prior), SCHEDULE, x, num_steps=NUM_STEPS,
            solver=guidance.DDIM(eta), guidance=tag_terms(prior, 0.0)))
    if kind == "tag":
        return jax.jit(lambda key, x, eta, prior, omega: guidance.sample(
            key, noised(prior), SCHEDULE, x, num_steps=NUM_STEPS,
            solver=guidance.DDIM(eta), guidance=tag_terms(prior, omega)))
    if kind == "ndtm":
        return jax.jit(lambda key, x, eta, weight: guidance.sample(
            key, NOISED, SCHEDULE, x, num_steps=NUM_STEPS, solver=guidance.NDTM(
                COST, eta=eta, terminal_weight=weight, learning_rate=0.1,
                learning_rate_schedule="constant")))
    raise KeyError(kind)


@pytest.mark.default_compiler
def test_tag_omega_zero_and_ndtm_without_cost_are_bitwise_ddim():
    key, eta = jax.random.key(3), jnp.float32(0.5)
    x0, info = _sampler("base")(key, X_T, eta, PRIOR)
    tag_x0, tag_info = _sampler("tag-off")(key, X_T, eta, PRIOR)
    np.testing.assert_array_equal(np.asarray(tag_x0), np.asarray(x0))
    assert tag_info.time_gap.shape == (NUM_STEPS, BATCH, 1) and float(tag_info.time_gap.max()) > 0
    np.testing.assert_array_equal(np.asarray(tag_info.guidance_norm), 0)
    ndtm_x0, ndtm_info = _sampler("ndtm")(key, X_T, eta, jnp.float32(0.0))
    np.testing.assert_array_equal(np.asarray(ndtm_x0), np.asarray(x0))
    np.testing.assert_array_equal(np.asarray(ndtm_info.control_norm), 0)
    assert int(ndtm_info.num_eps_evals) == NUM_STEPS * 6 and int(ndtm_info.num_vjps) == 100
    assert not bool(info.nonfinite.any() | ndtm_info.nonfinite.any())


def test_tag_is_the_base_sampler_on_stationary_data():
    """N(0, I) data: every p_t is N(0, I), p(τ | x) is uniform, the TAG field is 0 for every ω."""
    key, eta = jax.random.key(4), jnp.float32(1.0)
    x0, _ = _sampler("base")(key, X_T, eta, STATIONARY)
    for omega in (0.5, 4.0):
        tagged, info = _sampler("tag")(key, X_T, eta, STATIONARY, jnp.float32(omega))
        np.testing.assert_allclose(tagged, x0, rtol=1e-5, atol=1e-5)
        assert float(info.guidance_norm.max()) < 1e-4


def test_tag_reduces_the_time_gap_after_an_off_manifold_perturbation():
    """x_T = 1.6·ξ has the wrong norm for every time; TAG (ω = 1) lowers the mean time gap.

    Paired per-sample trajectory-mean gaps (same key and start for ω = 0 and ω = 1), one-sided
    z-test at z = 4 on B = 256 pairs; the exact Bayes time posterior, d = 8.
    """
    key, eta = jax.random.key(6), jnp.float32(0.0)
    start = 1.6 * X_T
    _, off = _sampler("tag-off")(key, start, eta, PRIOR)
    _, on = _sampler("tag")(key, start, eta, PRIOR, jnp.float32(1.0))
    diff = np.asarray(off.time_gap.mean(axis=(0, 2)) - on.time_gap.mean(axis=(0, 2)))
    assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(BATCH)
    # the unperturbed start is closer to the manifold than the perturbed one
    _, clean = _sampler("tag-off")(key, X_T, eta, PRIOR)
    assert float(clean.time_gap.mean()) < float(off.time_gap.mean())


def test_ddpm_posterior_variance_is_ddim_eta_one():
    key = jax.random.key(7)
    x0, _ = _sampler("base")(key, X_T, jnp.float32(1.0), PRIOR)
    ddpm, info = guidance.sample(key, NOISED, SCHEDULE, X_T, num_steps=NUM_STEPS,
                                 solver=guidance.DDPM())
    np.testing.assert_allclose(ddpm, x0, rtol=2e-3, atol=2e-3)
    assert int(info.num_eps_evals) == NUM_STEPS and int(info.num_vjps) == 0


@jax.jit
def _labels(x):
    responsibilities = jax.vmap(lambda y: NOISED.component_log_posterior(
        y, jnp.float32(1e-4)))(x)
    return jnp.argmax(responsibilities, axis=1)


def _label_counts(x):
    return np.bincount(np.asarray(_labels(x)), minlength=NUM_COMPONENTS)


@functools.partial(jax.jit, static_argnums=2)
def _permutation_null(x, y, num_permutations, bandwidth):
    """The statistic and its permutation null in one compiled program."""
    z = jnp.concatenate([x, y])

    def one(key):
        shuffled = z[jax.random.permutation(key, z.shape[0])]
        return mmd(shuffled[:x.shape[0]], shuffled[x.shape[0]:], bandwidth)[0]

    null = jax.lax.map(one, jax.random.split(jax.random.key(0), num_permutations))
    return mmd(x, y, bandwidth)[0], null


def _permutation_pvalue(x, y, num_permutations=200, bandwidth=1.0):
    stat, null = _permutation_null(x, y, num_permutations, jnp.float32(bandwidth))
    return float(stat), float((1 + jnp.sum(null >= stat)) / (1 + num_permutations))


def test_exact_fiber_guidance_samples_the_exact_conditional_mixture():
    """Prior score + the exact likelihood term ∇ log p_t(Ax₀ = y | x) samples the fiber law.

    The likelihood term is classifier guidance with log p_t^fiber(x) − log p_t(x) (the fiber law
    is a mixture, :class:`LinearFiberLaw`). MMD permutation test (200 permutations) against exact
    draws at p > 0.001; component labels (argmax of the prior's responsibilities) against the
    exact draws' frequencies by a chi-square test at p > 0.001.
    """
    fiber = guidance.NoisedMixture(FIBER, SCHEDULE)

    def likelihood(x, t):
        return fiber.log_prob(x, t) - NOISED.log_prob(x, t)

    x0, info = guidance.sample(jax.random.key(8), NOISED, SCHEDULE, X_T,
                               num_steps=NUM_STEPS, solver=guidance.DDIM(1.0),
                               guidance=guidance.ClassifierGuidance(likelihood, 1.0))
    assert not bool(info.nonfinite.any())
    np.testing.assert_allclose(x0[:, :2], np.broadcast_to(QUERY[:2], (BATCH, 2)), atol=1e-3)
    exact = _exact_fiber_draws()
    _, pvalue = _permutation_pvalue(x0, exact[:BATCH])
    assert pvalue > 1e-3
    expected = _label_counts(exact) / exact.shape[0] * BATCH
    observed = _label_counts(x0)
    keep = expected > 0.5
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    assert scipy.stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3, (observed, expected)


def test_ndtm_fiber_residual_shrinks_as_the_terminal_weight_grows():
    """Mean residual ‖Ax₀ − y‖ at w_term = 0.2, 1, 5 (same key): strictly decreasing, each step
    by more than 4 standard errors of the paired per-sample differences; NDTM lands nearer the
    exact fiber law (MMD) than the unguided prior does.

    (Adam moves each coordinate by about λ per inner step whatever the cost's scale, so far
    larger w_term stop helping once the residual is at the optimiser's resolution.)"""
    key, eta = jax.random.key(9), jnp.float32(1.0)
    residuals, samples = [], []
    for weight in (0.2, 1.0, 5.0):
        x0, info = _sampler("ndtm")(key, X_T, eta, jnp.float32(weight))
        assert not bool(info.nonfinite.any())
        residuals.append(np.sqrt(np.asarray(info.final_cost)))
        samples.append(x0)
    for coarse, fine in zip(residuals, residuals[1:], strict=False):
        diff = coarse - fine
        assert diff.mean() > 4 * diff.std(ddof=1) / np.sqrt(BATCH)
    exact = _exact_fiber_draws()[:BATCH]
    unguided, _ = _sampler("base")(key, X_T, eta, PRIOR)
    assert float(mmd(samples[-1], exact, 1.0)[0]) < 0.5 * float(mmd(unguided, exact, 1.0)[0])


def test_dps_moves_towards_the_fiber():
    term = guidance.DPSGuidance(COST, 0.1)
    x0, info = guidance.sample(jax.random.key(10), NOISED, SCHEDULE, X_T, num_steps=NUM_STEPS,
                               solver=guidance.DDIM(1.0), guidance=term)
    unguided, _ = _sampler("base")(jax.random.key(10), X_T, jnp.float32(1.0), PRIOR)
    residual = lambda x: np.linalg.norm(np.asarray(x)[:, :2] - np.asarray(QUERY[:2]), axis=1)  # noqa: E731
    assert np.median(residual(x0)) < 0.5 * np.median(residual(unguided))
    assert int(info.num_vjps) == NUM_STEPS and float(info.guidance_norm.min()) > 0


def test_ndtm_weights_are_squared_step_coefficients(x64):
    alpha_t, alpha_s, eta = jnp.float64(0.3), jnp.float64(0.6), jnp.float64(0.4)
    noise = jnp.zeros(())
    ddim_x = jax.grad(lambda x: kernels.ddim_update(x, 0.2, alpha_t, alpha_s, eta, noise))(1.0)
    ddim_e = jax.grad(lambda e: kernels.ddim_update(1.0, e, alpha_t, alpha_s, eta, noise))(0.2)
    w_score, w_control = kernels.ndtm_weights("ddim", "ddim", alpha_t, alpha_s, eta)
    np.testing.assert_allclose([w_score, w_control], [ddim_e**2, ddim_x**2], rtol=1e-12)
    ddpm_x = jax.grad(lambda x: kernels.ddpm_update(x, 0.2, alpha_t, alpha_s, noise,
                                                    "posterior", False))(1.0)
    ddpm_e = jax.grad(lambda e: kernels.ddpm_update(1.0, e, alpha_t, alpha_s, noise,
                                                    "posterior", False))(0.2)
    w_score, w_control = kernels.ndtm_weights("ddpm", "ddpm", alpha_t, alpha_s, eta)
    np.testing.assert_allclose([w_score, w_control], [ddpm_e**2, ddpm_x**2], rtol=1e-12)


# --------------------------------------------------------------------------- bad values


def test_nonfinite_predictions_and_costs_are_flagged_not_propagated():
    """A NaN prediction freezes only its sample for that step (flagged); a NaN cost drops every
    control gradient, so u stays 0 and NDTM returns the DDIM samples (to the round-off of another
    compilation), all flagged."""
    small = X_T[:16]

    def broken_eps(x, t):
        eps = NOISED(x, t)
        return jnp.where(x[0] > 0.5, jnp.full_like(eps, jnp.nan), eps)

    with pytest.warns(RuntimeWarning, match="non-finite"):   # eager: one message
        x0, info = guidance.sample(jax.random.key(0), broken_eps, SCHEDULE, small,
                                   num_steps=NUM_STEPS)
    assert bool(jnp.all(jnp.isfinite(x0)))
    assert bool(info.nonfinite.any()) and not bool(info.nonfinite.all())

    key, eta = jax.random.key(11), jnp.float32(0.5)
    with pytest.warns(RuntimeWarning, match="non-finite"):
        x0, info = guidance.sample(key, NOISED, SCHEDULE, X_T, num_steps=NUM_STEPS,
                                   solver=guidance.NDTM(lambda x: jnp.nan * COST(x), eta=eta))
    base, _ = _sampler("base")(key, X_T, eta, PRIOR)
    np.testing.assert_allclose(x0, base, rtol=1e-5, atol=1e-5)
    assert bool(info.nonfinite.all()) and float(info.control_norm.max()) == 0


@pytest.mark.default_compiler
def test_chunked_batch_equals_dense_and_bounds_memory():
    """Blocks of 48 (ragged: 256 = 5·48 + 16) equal the dense batch; at B = 8192 blocks of 256
    cut the compiled temporary memory by more than 2×."""
    def run(key, x, eta, chunk_size):
        return guidance.sample(key, NOISED, SCHEDULE, x, num_steps=NUM_STEPS,
                               solver=guidance.DDIM(eta), chunk_size=chunk_size)[0]

    key, eta = jax.random.key(12), jnp.float32(0.5)
    dense, _ = _sampler("base")(key, X_T, eta, PRIOR)
    np.testing.assert_allclose(run(key, X_T, eta, 48), dense, rtol=1e-5, atol=1e-5)
    big = jax.ShapeDtypeStruct((8192, DIM), jnp.float32)

    def temp_bytes(chunk_size):
        compiled = jax.jit(lambda x: run(key, x, eta, chunk_size)).lower(big).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    assert temp_bytes(256) < 0.5 * temp_bytes(None)


# ------------------------------------------------------------- invariance-auditing options


def test_norm_fiber_loss_gradient_is_the_hand_derived_one(x64):
    """∇ₓ‖φ(x) − y‖ = J_φ(x)ᵀ(φ(x) − y)/‖φ(x) − y‖ for a nonlinear φ (float64), and 0 (not NaN)
    at a zero residual; the squared loss's gradient is 2 J_φᵀ(φ(x) − y)."""
    rng = np.random.default_rng(3)
    weight = jnp.asarray(rng.normal(size=(3, DIM)))
    feature = lambda x: jnp.tanh(weight @ x)                                  # noqa: E731
    query, x = (jnp.asarray(rng.normal(size=DIM)) for _ in range(2))

    @jax.jit   # one program (eager, each primitive would compile on its own)
    def evaluate(x, query):
        norm_cost = guidance.FiberCost(feature, query, loss="norm")
        squared_cost = guidance.FiberCost(feature, query)
        return (feature(x) - feature(query), jax.jacobian(feature)(x), jax.grad(norm_cost)(x),
                jax.grad(squared_cost)(x), norm_cost(x), jax.grad(norm_cost)(query))

    residual, jacobian, norm_grad, squared_grad, norm, at_query = (
        np.asarray(a) for a in evaluate(x, query))
    np.testing.assert_allclose(norm_grad, jacobian.T @ residual / np.linalg.norm(residual),
                               rtol=1e-12)
    np.testing.assert_allclose(squared_grad, 2 * jacobian.T @ residual, rtol=1e-12)
    assert float(norm) == pytest.approx(np.linalg.norm(residual), rel=1e-14)
    np.testing.assert_array_equal(at_query, 0)


@functools.cache
def _small_ndtm():
    """One compilation for the option tests: 64 samples, the options as traced leaves, a progress
    meter reporting every 5 of the 20 steps."""
    x = X_T[:64]
    meter = jaxsample.TextProgress(every=5, file=io.StringIO())

    @jax.jit
    def run(key, weight, gamma_cut, max_norm):
        solver = guidance.NDTM(
            guidance.FiberCost(_features, QUERY, loss="norm"), optimizer=optax.sgd(1.0),
            num_steps=3, terminal_weight=weight, learning_rate_schedule="constant",
            control_scale=lambda t: jnp.where(t > gamma_cut, 0.0, 1.0), max_grad_norm=max_norm,
            weights="zero")
        return guidance.sample(key, NOISED, SCHEDULE, x, num_steps=NUM_STEPS, solver=solver,
                               progress=meter)

    run.meter = meter
    return run


def test_control_scale_schedule_switches_the_control_off_at_the_noisy_steps():
    """γ_t = 0 for t > 0.5: those steps report γ = 0, no control move, no score penalty and no
    inner ε-evaluations; γ = 0 everywhere is DDIM (η = 0); the others move the state."""
    key = jax.random.key(13)
    x0, info = _small_ndtm()(key, jnp.float32(1.0), jnp.float32(0.5), jnp.float32(1.0))
    times = np.asarray(info.times)
    off = times > 0.5
    np.testing.assert_array_equal(np.asarray(info.control_scale), np.where(off, 0.0, 1.0))
    np.testing.assert_array_equal(np.asarray(info.control_norm)[off], 0)
    np.testing.assert_array_equal(np.asarray(info.score_penalty)[off], 0)
    assert float(np.asarray(info.control_norm)[~off].min()) > 0
    assert int(info.num_eps_evals) == NUM_STEPS + 3 * int((~off).sum())
    assert int(info.num_vjps) == 3 * int((~off).sum())
    never, never_info = _small_ndtm()(key, jnp.float32(1.0), jnp.float32(-1.0), jnp.float32(1.0))
    # DDIM at η = 0 moves each sample on its own: the first 64 rows of the shared B = 256 run.
    # Another compilation and batch shape: float32 round-off over 20 steps (seen up to 2e-5);
    # a control left on moves samples by O(0.1-1) (the SGD rate is 1)
    base, _ = _sampler("base")(key, X_T, jnp.float32(0.0), PRIOR)
    np.testing.assert_allclose(never, base[:64], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(never_info.control_norm), 0)
    assert int(never_info.num_eps_evals) == NUM_STEPS and int(never_info.num_vjps) == 0
    jax.effects_barrier()   # the meter reports from inside the compiled scan, every run
    reported = _small_ndtm().meter.steps_reported
    assert reported and reported == [5, 10, 15, 20] * (len(reported) // 4)


def test_per_sample_gradient_clipping_bounds_each_control():
    """With SGD at rate 1 and clipping at c, M = 3 inner steps from u = 0 move each sample's
    control by at most 3c (γ = 1); unclipped, the norm loss's gradient is larger and so is the
    move."""
    key = jax.random.key(14)
    _, clipped = _small_ndtm()(key, jnp.float32(5.0), jnp.float32(2.0), jnp.float32(0.01))
    _, loose = _small_ndtm()(key, jnp.float32(5.0), jnp.float32(2.0), jnp.float32(1e6))
    assert float(clipped.control_norm.max()) <= 3 * 0.01 * (1 + 1e-5)
    assert float(loose.control_norm.max()) > 10 * 3 * 0.01


def test_clip_x0_clamps_the_returned_samples_and_large_variance_is_ddpm_beta():
    """The last DDIM step returns the clamped x̂₀, so every sample lies in [lo, hi] (unclamped,
    some do not); DDIM(η = 1, "large") is DDPM's β step (same noise: equal to round-off)."""
    key = jax.random.key(15)
    clamped, _ = guidance.sample(key, NOISED, SCHEDULE, X_T, num_steps=NUM_STEPS,
                                 solver=guidance.DDIM(0.5, clip_x0=(-0.5, 0.5)))
    free, _ = _sampler("base")(key, X_T, jnp.float32(0.5), PRIOR)
    assert float(jnp.abs(clamped).max()) <= 0.5 and float(jnp.abs(free).max()) > 0.5
    large, _ = guidance.sample(key, NOISED, SCHEDULE, X_T, num_steps=NUM_STEPS,
                               solver=guidance.DDIM(1.0, variance="large"))
    beta, _ = guidance.sample(key, NOISED, SCHEDULE, X_T, num_steps=NUM_STEPS,
                              solver=guidance.DDPM("beta"))
    np.testing.assert_allclose(large, beta, rtol=2e-3, atol=2e-3)


@pytest.mark.default_compiler
def test_per_step_target_compares_with_the_noised_query_features():
    """At t = 1 the query noised to t carries almost nothing of x_q (ᾱ(1) ≈ 4·10⁻⁵), so its
    Tweedie estimate and the state's both sit near the prior mean m̄: the per-step target's
    first-step terminal cost is small, while the static target's is ‖m̄ − x_q‖ up to the state's
    own deviation from m̄, for every sample. With
    w_term = 0 the per-step target changes nothing else (bitwise DDIM) and costs one ε-evaluation
    per step."""
    key = jax.random.key(16)

    def run(per_step):
        cost = guidance.FiberCost(_features, QUERY, loss="norm", per_step_target=per_step)
        return guidance.sample(key, NOISED, SCHEDULE, X_T[:64], num_steps=NUM_STEPS,
                               solver=guidance.NDTM(cost, terminal_weight=0.0))

    (x_step, step_info), (x_static, static_info) = run(True), run(False)
    np.testing.assert_array_equal(np.asarray(x_step), np.asarray(x_static))
    assert int(step_info.num_eps_evals) == int(static_info.num_eps_evals) + NUM_STEPS
    # the first step's state is x_T (w_term = 0: u = 0); δ = x̂₀(x_T)[:2] − m̄[:2]
    prior_mean = np.asarray(PRIOR.weights) @ np.asarray(PRIOR.means)[:, :2]
    far = np.linalg.norm(prior_mean - np.asarray(QUERY[:2]))

    @jax.jit
    def first_tweedie(x):
        one = jnp.float32(1.0)
        return kernels.tweedie(x, jax.vmap(lambda y: NOISED(y, one))(x), SCHEDULE.alpha_bar(one))

    x0 = first_tweedie(X_T[:64])
    delta = np.linalg.norm(np.asarray(x0)[:, :2] - prior_mean, axis=1)
    # static: | ‖m̄ + δ − x_q‖ − ‖m̄ − x_q‖ | ≤ ‖δ‖ (triangle inequality; the slack is the
    # float32 round-off of x̂₀, amplified by 1/√ᾱ(1) ≈ 150)
    assert np.all(np.abs(np.asarray(static_info.terminal_cost[0]) - far) <= delta + 1e-3)
    # per step: ‖δ − δ'‖ with δ' the noised query's deviation, of the same law (both states are
    # N(0, I)-like at t = 1); max ‖δ‖ is about 0.07 here, a quarter of ‖m̄ − x_q‖ ≈ 0.94
    assert float(delta.max()) < 0.1 and float(step_info.terminal_cost[0].max()) < 0.25 * far


def test_digits_audit_example_samples_fibers(tmp_path):
    """examples/digits_audit.py at a small size (a 64-wide ε-network trained 300 steps, one query,
    4 samples, 40 steps): NDTM's fiber samples have less than half the feature residual of
    unguided draws from the same prior and noise, and none is non-finite."""
    pytest.importorskip("sklearn")
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "digits_audit.py"
    spec = importlib.util.spec_from_file_location("digits_audit", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with jax.numpy_dtype_promotion("standard"):   # a reader's script: JAX's default promotion
        metrics = example.main(["--train-steps", "300", "--width", "64", "--num-queries", "1",
                                "--num-samples", "4", "--num-steps", "40",
                                "--out", str(tmp_path / "digits.png")])
    assert metrics["nonfinite"] == 0
    assert metrics["fiber_residual"] < 0.5 * metrics["prior_residual"]
    assert (tmp_path / "digits.png").exists()


def test_first_outputs_are_checked_eagerly_and_flagged_under_jit():
    """A prediction or time logits that are non-finite at the first state raise, naming the
    argument, when the call is eager; under jit nothing can be read, and info.nonfinite flags
    every sample instead (no warning: the flag is the report)."""
    small = X_T[:4]

    def nan_eps(x, t):
        return jnp.full_like(x, jnp.nan)

    with pytest.raises(ValueError, match="eps_fn must return a finite"):
        guidance.sample(jax.random.key(0), nan_eps, SCHEDULE, small, num_steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x0, info = jax.jit(lambda x: guidance.sample(jax.random.key(0), nan_eps, SCHEDULE, x,
                                                     num_steps=2))(small)
    assert bool(info.nonfinite.all()) and bool(jnp.all(x0 == small))

    def nan_logits(x):
        return jnp.full((2,), jnp.nan, x.dtype)

    with pytest.raises(ValueError, match="time_logits_fn must return finite"):
        guidance.sample(jax.random.key(0), NOISED, SCHEDULE, small, num_steps=2,
                        guidance=guidance.TAG(nan_logits, 1.0))


def test_time_predictor_training_that_diverges_is_flagged_and_warned():
    """A learning rate of 1e30 drives the logits to overflow: info.nonfinite under jit, one
    RuntimeWarning eagerly."""
    grid = kernels.time_grid(4, jnp.float32)
    data = PRIOR.sample(jax.random.key(0), 64)
    net = guidance.TimePredictor(jax.random.key(1), DIM, 4, width=4, depth=1)

    def train(rate):
        return guidance.train_time_predictor(jax.random.key(2), net, data, SCHEDULE, grid,
                                             num_steps=20, batch_size=16, learning_rate=rate)

    info = jax.jit(lambda rate: train(rate)[1])(jnp.float32(1e30))
    assert bool(info.nonfinite)
    with pytest.warns(RuntimeWarning, match="not finite"):
        train(1e30)


# ------------------------------------------------------------------- what models predict

def _adapter_problem():
    mixture = GaussianMixture(jnp.array([[1.0, 0.5, -0.5], [-1.0, 0.0, 0.8]]),
                              jnp.array([0.4, 0.6]), jnp.array([0.3, 0.7]))
    return mixture, jax.random.normal(jax.random.key(9), (64, 3), jnp.float64)


def test_every_parametrisation_of_one_model_gives_the_same_samples(x64):
    """ε, x̂₀, v and a flow-matching velocity of the same exact model, and the same model on
    integer timesteps, give the samples of the ε path to float64 round-off; the velocity comes
    from the flow path's own marginal (x_s = (1 − s)x₀ + sε), not from the VP formulas."""
    mixture, x_T = _adapter_problem()
    schedule = guidance.VPSchedule("linear")     # float64 leaves (built under x64)
    noised = guidance.NoisedMixture(mixture, schedule)

    def alpha(t):
        return schedule.alpha_bar(t)

    def x0_model(x, t):
        return kernels.tweedie(x, noised(x, t), alpha(t))

    def v_model(x, t):
        return jnp.sqrt(alpha(t)) * noised(x, t) - jnp.sqrt(1 - alpha(t)) * x0_model(x, t)

    def velocity_model(x, s):
        # E[ε − x₀ | x_s] = (E[ε | x_s] − x_s)/(1 − s), with E[ε | x_s] = −s·∇log p_s(x_s)
        def log_density(y):
            covs = (1 - s) ** 2 * mixture.covs + s ** 2 * jnp.eye(3)[None]
            comps = jax.vmap(lambda m, c: jax.scipy.stats.multivariate_normal.logpdf(
                y, (1 - s) * m, c))(mixture.means, covs)
            return jax.nn.logsumexp(comps + jnp.log(mixture.weights))
        eps = -s * jax.grad(log_density)(x)
        return (eps - x) / (1 - s)

    def run(model, **kwargs):
        return guidance.sample(jax.random.key(3), model, schedule, x_T, num_steps=NUM_STEPS,
                               solver=guidance.DDIM(eta=0.5), **kwargs)

    base, _ = run(noised)
    for model, prediction in ((x0_model, "x0"), (v_model, "v"), (velocity_model, "velocity")):
        x0, info = run(model, prediction=prediction)
        assert not bool(info.nonfinite.any())
        np.testing.assert_allclose(x0, base, rtol=1e-9, atol=1e-9, err_msg=prediction)

    # integer timesteps 0..T-1 of a table schedule: index t·T − 1 is the node of t
    steps = 100
    table = guidance.VPSchedule("table", alpha_bar=schedule.alpha_bar(
        jnp.arange(1, steps + 1, dtype=jnp.float64) / steps))
    on_table = guidance.NoisedMixture(mixture, table)

    def integer_model(x, j):
        assert j.dtype == jnp.int32
        return on_table(x, (j + 1).astype(x.dtype) / steps)

    reference, _ = guidance.sample(jax.random.key(3), on_table, table, x_T, num_steps=NUM_STEPS)
    x0, _ = guidance.sample(jax.random.key(3), integer_model, table, x_T, num_steps=NUM_STEPS,
                            timesteps=steps)
    np.testing.assert_allclose(x0, reference, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="num_steps must divide timesteps"):
        guidance.sample(jax.random.key(3), integer_model, table, x_T, num_steps=30,
                        timesteps=steps)


def test_a_time_predictor_on_T_classes_guides_as_the_grid_one(x64):
    """TAG with the Bayes classifier over 100 training times, seen on a 20-step grid, equals TAG
    with the Bayes classifier of the grid itself (the posterior of a sub-grid is the softmax of
    the same logits restricted to it)."""
    mixture, x_T = _adapter_problem()
    schedule = guidance.VPSchedule("linear")     # float64 leaves (built under x64)
    noised = guidance.NoisedMixture(mixture, schedule)
    adapted = guidance.GridTimePredictor(noised.time_predictor(kernels.time_grid(100)), 100,
                                         NUM_STEPS)

    def run(predictor):
        return guidance.sample(jax.random.key(4), noised, schedule, x_T, num_steps=NUM_STEPS,
                               guidance=guidance.TAG(predictor, 1.0))

    x0, info = run(adapted)
    exact, exact_info = run(noised.time_predictor(kernels.time_grid(NUM_STEPS)))
    np.testing.assert_allclose(x0, exact, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(info.time_gap, exact_info.time_gap, rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="time_logits_fn"):   # 100 logits expected, 20 given
        run(guidance.GridTimePredictor(noised.time_predictor(GRID), 100, NUM_STEPS))
