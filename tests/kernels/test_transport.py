"""Tests of the ETD transport kernel: plans, limits, weights, row draws, chunked path."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special
from ott.geometry import geometry
from ott.problems.linear import linear_problem
from ott.solvers.linear import sinkhorn

from jaxsample.kernels import transport


# jitted entry points (one compilation per static configuration, shared by the tests; one
# max_iterations for every test on the 50 x 200 problem: each solve stops at its tolerance)
@functools.partial(jax.jit, static_argnames=("coupling", "max_iterations", "chunk_size"))
def solve(x, y, log_b, epsilon, *, coupling="balanced", rho=1.0, tolerance=1e-3,
          max_iterations=20000, init=None, chunk_size=None):
    geom = _geometry(x, y, chunk_size)
    plan = transport.solve_coupling(geom, log_b, epsilon=epsilon, coupling=coupling, rho=rho,
                                    init=init, tolerance=tolerance, max_iterations=max_iterations)
    log_plan = (plan.f[:, None] + plan.g[None, :] - geom.cost_matrix) / epsilon
    return plan, log_plan, geom.cost_matrix


@functools.partial(jax.jit, static_argnames=("update", "chunk_size"))
def rows_update(key, x, y, g, epsilon, *, update="categorical", chunk_size=None):
    return transport.transport_rows(key, _geometry(x, y, chunk_size), g, y, epsilon=epsilon,
                                    update=update)


weights = jax.jit(transport.proposal_log_weights, static_argnames=("chunk_size",))
cost_scale = jax.jit(transport.cost_scale, static_argnames=("max_entries",))


def _geometry(x, y, chunk_size=None):
    scale = transport.cost_scale(x, y, max_entries=x.shape[0] * y.shape[0])
    return transport.ParticleGeometry(x, y, inv_scale=1 / scale, chunk_size=chunk_size)


@functools.cache   # one draw per configuration (eager, each primitive compiles on its own)
def _problem(dtype, n=50, p=200, d=3, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(k1, (n, d), dtype)
    y = 1.5 * jax.random.normal(k2, (p, d), dtype)
    log_b = jax.nn.log_softmax(jax.random.normal(k3, (p,), dtype))
    return x, y, log_b


@functools.partial(jax.jit, static_argnums=(2, 3))
def _ott_plan(cost, log_b, epsilon, tau_b):
    n = cost.shape[0]
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        prob = linear_problem.LinearProblem(
            geometry.Geometry(cost_matrix=cost, epsilon=epsilon),
            a=jnp.full((n,), 1.0 / n, cost.dtype), b=jnp.exp(log_b), tau_b=tau_b)
        return sinkhorn.Sinkhorn(threshold=1e-12, max_iterations=20000)(prob).matrix


def test_balanced_marginals(dtype):
    x, y, log_b = _problem(dtype)
    tolerance = 1e-5 if dtype == jnp.float32 else 1e-11
    plan, log_plan, _ = solve(x, y, log_b, 0.1, tolerance=tolerance)
    assert bool(plan.converged) and float(plan.error) < tolerance
    assert plan.f.dtype == dtype and plan.g.dtype == dtype
    assert int(plan.num_iterations) % 5 == 0
    gamma = np.exp(np.asarray(log_plan, np.float64))
    tol = 1e-4 if dtype == jnp.float32 else 1e-10
    np.testing.assert_allclose(gamma.sum(axis=1), 1 / 50, atol=tol / 50)
    np.testing.assert_allclose(gamma.sum(axis=0), np.exp(np.asarray(log_b, np.float64)), atol=tol)


def test_median_normalisation(x64):
    x, y, log_b = _problem(jnp.float64)
    _, _, cost = solve(x, y, log_b, 0.1, coupling="gibbs")
    np.testing.assert_allclose(jnp.median(cost), 1.0, rtol=1e-10)
    # above max_entries the median is the one of a strided grid of rows and columns
    sub = cost_scale(x, y, max_entries=2048)
    rows, cols = 45, 2048 // 45
    xs = np.asarray(x)[np.linspace(0, 49, rows).astype(np.int32)]
    ys = np.asarray(y)[np.linspace(0, 199, cols).astype(np.int32)]
    expected = np.median(0.5 * ((xs[:, None] - ys[None]) ** 2).sum(-1))
    np.testing.assert_allclose(sub, expected, rtol=1e-10)


def test_plans_equal_ott_and_rho_limits(x64):
    """Balanced and unbalanced plans equal ott-jax's to round-off; ρ → ∞ is balanced, ρ → 0
    gives rows a_i·softmax(−C_i/ε) with only the row marginal imposed."""
    x, y, log_b = _problem(jnp.float64)
    tight = dict(tolerance=1e-12)
    balanced, log_plan, cost = solve(x, y, log_b, 0.1, **tight)
    plan = np.exp(np.asarray(log_plan))
    np.testing.assert_allclose(plan, _ott_plan(cost, log_b, 0.1, 1.0), atol=1e-12)
    _, log_unb, _ = solve(x, y, log_b, 0.1, coupling="unbalanced", rho=1.0, **tight)
    np.testing.assert_allclose(np.exp(log_unb), _ott_plan(cost, log_b, 0.1, 0.5), atol=1e-12)
    _, log_strong, _ = solve(x, y, log_b, 0.1, coupling="unbalanced", rho=1e8, **tight)
    np.testing.assert_allclose(np.exp(log_strong), plan, atol=1e-8)
    _, log_weak, _ = solve(x, y, log_b, 0.1, coupling="unbalanced", rho=1e-8, **tight)
    rows = scipy.special.softmax(-np.asarray(cost) / 0.1, axis=1) / 50
    np.testing.assert_allclose(np.exp(log_weak), rows, atol=1e-8)
    np.testing.assert_allclose(np.exp(log_weak).sum(axis=1), 1 / 50, rtol=1e-10)


def test_gibbs_rows_are_softmax(dtype):
    x, y, log_b = _problem(dtype)
    plan, log_plan, cost = solve(x, y, log_b, 0.1, coupling="gibbs")
    assert int(plan.num_iterations) == 0 and bool(plan.converged)
    rows = scipy.special.softmax(-np.asarray(cost, np.float64) / 0.1
                                 + np.asarray(log_b, np.float64)[None, :], axis=1) / 50
    tol = 1e-6 if dtype == jnp.float32 else 1e-14
    np.testing.assert_allclose(np.exp(np.asarray(log_plan, np.float64)), rows, atol=tol)


def test_epsilon_limits(x64):
    """ε → ∞: balanced and Gibbs rows tend to b; ε → 0: Gibbs rows pick the nearest proposal."""
    x, y, log_b = _problem(jnp.float64)
    b = np.exp(np.asarray(log_b))
    for coupling in ("balanced", "gibbs"):
        _, log_plan, cost = solve(x, y, log_b, 1e4, coupling=coupling, tolerance=1e-10)
        rows = scipy.special.softmax(np.asarray(log_plan), axis=1)
        # the kernel differs from 1 by at most max(C)/ε, which bounds the relative error
        bound = 2 * float(np.max(cost)) / 1e4
        np.testing.assert_allclose(rows, np.broadcast_to(b, rows.shape), rtol=bound)
    eps = 1e-5
    plan, _, cost = solve(x, y, log_b, eps, coupling="gibbs")
    out = rows_update(jax.random.key(0), x, y, plan.g, eps)
    cost = np.asarray(cost)
    # rows whose two smallest costs differ by more than 50ε (|log b| ≤ 10 here) are one-hot
    two = np.sort(cost, axis=1)[:, :2]
    clear = (two[:, 1] - two[:, 0]) > 50 * eps
    assert int(clear.sum()) >= 45
    np.testing.assert_array_equal(np.asarray(out.picks)[clear], np.argmin(cost, axis=1)[clear])
    np.testing.assert_allclose(np.asarray(out.row_ess)[clear], 1.0, atol=1e-6)


def test_small_epsilon_balanced_tends_to_exact_ot(x64):
    """As ε → 0 the balanced plan's cost tends to the unregularised OT cost (a linear program)."""
    x, y, log_b = _problem(jnp.float64, n=6, p=18, d=2)
    cost = None
    gaps = []
    for eps in (0.1, 0.01, 0.002):
        _, log_plan, cost_matrix = solve(x, y, log_b, eps, tolerance=1e-10,
                                         max_iterations=100000)
        if cost is None:
            cost = np.asarray(cost_matrix)
            n, p = cost.shape
            a_eq = np.vstack([np.kron(np.eye(n), np.ones(p)), np.kron(np.ones(n), np.eye(p))])
            b_eq = np.concatenate([np.full(n, 1 / n), np.exp(np.asarray(log_b))])
            lp = scipy.optimize.linprog(cost.ravel(), A_eq=a_eq, b_eq=b_eq)
        gaps.append(float(np.sum(np.exp(log_plan) * cost)) - lp.fun)
    # the entropic cost exceeds the OT cost by at most ε·log(N·P) and shrinks with ε
    assert all(gap > -1e-8 for gap in gaps)
    assert gaps[-1] <= 0.002 * np.log(n * p) and gaps[0] > gaps[1] > gaps[2]


def test_categorical_draws_are_unbiased(x64):
    """Plan fixed, keys varied: E[count_j] = Σ_i γ̃_ij = N b_j; exact variance Σ_i γ̃(1 − γ̃)."""
    x, y, log_b = _problem(jnp.float64)
    plan, log_plan, _ = solve(x, y, log_b, 0.5, tolerance=1e-12)
    rows = jax.nn.softmax(log_plan, axis=1)
    expected = rows.sum(axis=0)
    np.testing.assert_allclose(expected, 50 * jnp.exp(log_b), rtol=1e-8)
    num_draws = 4000

    @jax.jit
    def draw_counts(keys):
        geom = _geometry(x, y)
        one = lambda k: jnp.bincount(
            transport.transport_rows(k, geom, plan.g, y, epsilon=0.5).picks, length=200)
        return jax.vmap(one)(keys).astype(jnp.float64)

    counts = draw_counts(jax.random.split(jax.random.key(1), num_draws))
    var = jnp.sum(rows * (1 - rows), axis=0)
    z = (counts.mean(axis=0) - expected) / jnp.sqrt(var / num_draws)
    # 200 columns at 5 sigma: family-wise false-alarm probability < 200 · 5.7e-7
    assert float(jnp.max(jnp.abs(z))) < 5.0
    # count_j is Poisson-binomial (the rows draw independently), so its cumulants are sums over
    # rows: κ2 = Σ γ̃(1 − γ̃) = var, κ4 = Σ γ̃(1 − γ̃)(1 − 6γ̃(1 − γ̃)), and μ4 = κ4 + 3κ2².
    # The unbiased sample variance of n draws has the exact variance μ4/n − σ⁴(n − 3)/(n(n − 1));
    # the same 5-sigma z-test per column as for the mean.
    pq = rows * (1 - rows)
    mu4 = jnp.sum(pq * (1 - 6 * pq), axis=0) + 3 * var**2
    n = num_draws
    var_se = jnp.sqrt(mu4 / n - var**2 * (n - 3) / (n * (n - 1)))
    z_var = (counts.var(axis=0, ddof=1) - var) / var_se
    assert float(jnp.max(jnp.abs(z_var))) < 5.0


def test_barycentric_update_is_row_mean(x64):
    x, y, log_b = _problem(jnp.float64)
    plan, log_plan, _ = solve(x, y, log_b, 0.1)
    out = rows_update(jax.random.key(0), x, y, plan.g, 0.1, update="barycentric")
    rows = scipy.special.softmax(np.asarray(log_plan), axis=1)
    np.testing.assert_allclose(out.targets, rows @ np.asarray(y), atol=1e-12)
    assert np.all(np.asarray(out.picks) == -1)
    np.testing.assert_allclose(out.row_ess, 1 / np.sum(rows**2, axis=1), rtol=1e-12)


def test_permutation_equivariance(x64):
    x, y, log_b = (np.asarray(a) for a in _problem(jnp.float64))
    rng = np.random.default_rng(5)
    rows_perm, cols_perm = rng.permutation(50), rng.permutation(200)
    tight = dict(tolerance=1e-12)
    _, ref_plan, _ = solve(x, y, log_b, 0.1, **tight)
    _, perm_plan, _ = solve(x[rows_perm], y[cols_perm], log_b[cols_perm], 0.1, **tight)
    np.testing.assert_allclose(perm_plan, np.asarray(ref_plan)[rows_perm][:, cols_perm],
                               atol=1e-9)
    # IS weights do not depend on the order of the mixture components
    logp = -0.5 * np.sum(y**2, axis=1)
    w1 = weights(logp, y, x, 0.7).log_weights
    w2 = weights(logp, y, x[rows_perm], 0.7).log_weights
    np.testing.assert_allclose(w1, w2, atol=1e-12)


def test_proposal_weights_match_mixture_density(dtype):
    x, y, _ = _problem(dtype)
    sigma = 0.8
    logp = -0.25 * jnp.sum(y**2, axis=1)
    log_b, bad, _ = weights(logp, y, x, sigma)
    assert log_b.dtype == dtype and int(bad) == 0
    yn, xn = np.asarray(y, np.float64), np.asarray(x, np.float64)
    sq = ((yn[:, None] - xn[None]) ** 2).sum(-1)
    log_q = scipy.special.logsumexp(-sq / (2 * sigma**2), axis=1)
    ref = np.asarray(logp, np.float64) - log_q
    ref = np.maximum(ref, ref.max() - 30)
    ref -= scipy.special.logsumexp(ref)
    tol = 1e-4 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(log_b, ref, atol=tol)


def test_proposal_log_mean_weight_estimates_the_normaliser(x64):
    """``log_mean_weight`` estimates ``log ∫π`` for an unnormalised ``π``: for ``π(y) = c·N(y;
    0, I₃)`` the mean weight is unbiased for ``c`` (its standard error from the weights
    themselves; z-test at the two-sided level 1e-3), and when the mixture covers only one of
    two equal modes it estimates ``c/2``."""
    d, n, m = 3, 40, 50
    k = jax.random.split(jax.random.key(3), 2)
    centres = jax.random.normal(k[0], (n, d))
    y = jnp.repeat(centres, m, axis=0) + jax.random.normal(k[1], (n * m, d))
    log_c = 2.5
    logp = log_c - 0.5 * jnp.sum(y**2, axis=1) - 0.5 * d * np.log(2 * np.pi)
    out = weights(logp, y, centres, 1.0)
    # the weights' own standard error of the mean, on the natural scale
    w = np.exp(np.asarray(out.log_weights, np.float64) + float(out.log_mean_weight)
               + np.log(n * m))
    se = w.std(ddof=1) / np.sqrt(w.size) / w.mean()
    assert abs(float(out.log_mean_weight) - log_c) < 3.3 * se, (float(out.log_mean_weight), se)
    # a second mode of equal mass 12 away: the pool around the first sees half of the mass
    logp2 = log_c + jnp.logaddexp(
        jnp.log(0.5) - 0.5 * jnp.sum(y**2, axis=1),
        jnp.log(0.5) - 0.5 * jnp.sum((y - 12.0) ** 2, axis=1)) - 0.5 * d * np.log(2 * np.pi)
    half = float(weights(logp2, y, centres, 1.0).log_mean_weight)
    assert abs(half - (log_c + np.log(0.5))) < 3.3 * se


def test_proposal_weights_floor_and_invalid():
    y, x = np.zeros((5, 1), np.float32), np.zeros((1, 1), np.float32)
    logp = np.array([0.0, -100.0, np.nan, -np.inf, np.inf], np.float32)
    log_b, bad, _ = (np.asarray(a) for a in weights(logp, y, x, 1.0))
    assert int(bad) == 3
    assert np.all(np.isneginf(log_b[2:]))
    np.testing.assert_allclose(log_b[0] - log_b[1], 30.0, rtol=1e-6)
    np.testing.assert_allclose(scipy.special.logsumexp(log_b), 0.0, atol=1e-6)
    # no valid proposal: uniform weights (the sampler then keeps its particles)
    log_b, bad, _ = weights(np.full((5,), np.nan, np.float32), y, x, 1.0)
    assert int(bad) == 5
    np.testing.assert_allclose(log_b, -np.log(5.0), rtol=1e-6)


def test_zero_weight_proposals_receive_no_mass(x64):
    x, y, log_b = _problem(jnp.float64)
    log_b = np.asarray(log_b).copy()
    log_b[:20] = -np.inf
    log_b -= scipy.special.logsumexp(log_b)
    for coupling in transport.COUPLINGS:
        plan, log_plan, _ = solve(x, y, log_b, 0.1, coupling=coupling)
        assert np.all(np.isfinite(plan.f)), coupling
        assert float(np.max(np.exp(log_plan)[:, :20])) == 0.0, coupling
        out = rows_update(jax.random.key(0), x, y, plan.g, 0.1)
        assert np.all(np.asarray(out.picks) >= 20), coupling


@pytest.mark.parametrize("coupling", ["balanced", "unbalanced"])
def test_chunked_plan_rows_and_weights_equal_dense(x64, coupling):
    x, y, log_b = _problem(jnp.float64)
    warm = (jnp.linspace(-0.1, 0.1, 50), jnp.zeros(200))
    p_dense, _, _ = solve(x, y, log_b, 0.1, coupling=coupling, init=warm)
    p_chunk, _, _ = solve(x, y, log_b, 0.1, coupling=coupling, init=warm, chunk_size=7)
    assert int(p_dense.num_iterations) == int(p_chunk.num_iterations)
    np.testing.assert_allclose(p_chunk.f, p_dense.f, atol=1e-12)
    np.testing.assert_allclose(p_chunk.g, p_dense.g, atol=1e-12)
    if coupling == "unbalanced":
        return
    update = "categorical"
    r_dense = rows_update(jax.random.key(3), x, y, p_dense.g, 0.1, update=update)
    r_chunk = rows_update(jax.random.key(3), x, y, p_dense.g, 0.1, update=update, chunk_size=7)
    np.testing.assert_array_equal(r_chunk.picks, r_dense.picks)
    np.testing.assert_allclose(r_chunk.targets, r_dense.targets, atol=1e-12)
    np.testing.assert_allclose(r_chunk.row_ess, r_dense.row_ess, rtol=1e-10)
    logp = -0.5 * jnp.sum(y**2, axis=1)
    np.testing.assert_allclose(weights(logp, y, x, 0.5, chunk_size=9)[0],
                               weights(logp, y, x, 0.5)[0], atol=1e-12)


def test_non_finite_warm_start_is_reset():
    x, y, log_b = _problem(jnp.float32)
    bad = (jnp.full((50,), jnp.nan), jnp.full((200,), -jnp.inf))
    plan, _, _ = solve(x, y, log_b, 0.1, init=bad)
    ref, _, _ = solve(x, y, log_b, 0.1, init=(jnp.zeros(50), jnp.zeros(200)))
    assert bool(plan.converged)
    np.testing.assert_allclose(plan.f, ref.f, rtol=1e-5)


def test_translation_invariance_of_cost(x64):
    x, y, log_b = _problem(jnp.float64)
    shift = jnp.full((3,), 1e3)
    _, _, c0 = solve(x, y, log_b, 0.1, coupling="gibbs")
    _, _, c1 = solve(x + shift[None, :], y + shift[None, :], log_b, 0.1, coupling="gibbs")
    np.testing.assert_allclose(c1, c0, atol=1e-9)
