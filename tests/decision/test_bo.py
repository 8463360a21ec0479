"""Tests specific to spherical linear BO: exact posterior, closed-form acquisitions, the loop.

dtype preservation, jit == eager, vmap over keys, the traced noise and bad input are in the
contract entry (tests/contract/decision_bo.py).
"""

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.stats

import jaxsample
from jaxsample.decision import SphericalLinearBO
from jaxsample.kernels import secular


def _unit(rng, rows, dim):
    x = rng.normal(size=(rows, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


DIM, ROWS = 6, 7  # one shape for most tests: few compilations; ROWS = DIM + 1


def _data(seed, rows=ROWS, dim=DIM):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, dim)) * rng.uniform(0.5, 3.0, size=(rows, 1))  # any radius
    y = x @ rng.normal(size=dim) / np.linalg.norm(x, axis=1) + rng.normal(size=rows) * 0.3 + 2
    return x, y


def _fibonacci_sphere(n):
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    phi = np.pi * (1 + 5**0.5) * i
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def test_posterior_and_evidence_equal_direct_conditioning(x64):
    """μ, Σ and the restricted evidence equal Gaussian conditioning on the contrasts of y."""
    dim, n, noise, scale = DIM, ROWS, 0.4, 0.7
    x, y = _data(0)
    bo = SphericalLinearBO(dim, noise=noise, prior_scale=scale)
    state = bo.tell(bo.init(jnp.float64), x, y)
    # contrasts: an orthonormal basis of the complement of 1 removes the flat offset exactly
    h = scipy.linalg.null_space(np.ones((1, n))).T
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    a = h @ u
    k = scale**2 * a @ a.T + noise**2 * np.eye(n - 1)
    mean = scale**2 * a.T @ np.linalg.solve(k, h @ y)
    cov = scale**2 * np.eye(dim) - scale**4 * a.T @ np.linalg.solve(k, a)
    mu, sigma = bo.posterior(state)
    np.testing.assert_allclose(mu, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sigma, cov, rtol=1e-10, atol=1e-12)
    expected = scipy.stats.multivariate_normal(np.zeros(n - 1), k).logpdf(h @ y)
    np.testing.assert_allclose(bo.log_evidence(state), expected, rtol=1e-10)


def test_rank_one_updates_equal_refit_in_any_order(x64):
    dim, n = DIM, ROWS
    x, y = _data(1)
    bo = SphericalLinearBO(dim, noise=0.3, prior_scale=1.5)
    batch = bo.tell(bo.init(jnp.float64), x, y)
    sequential = bo.init(jnp.float64)
    for i in np.random.default_rng(2).permutation(n):
        sequential = bo.tell(sequential, x[i], y[i])
    for name in ("count", "mean_x", "mean_y", "scatter", "cross", "scatter_y", "mean",
                 "best_y"):
        np.testing.assert_allclose(getattr(sequential, name), getattr(batch, name), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
    # refit from the statistics: Σ = (G/σ² + I/σ_w²)⁻¹
    prec = np.asarray(batch.scatter) / 0.3**2 + np.eye(dim) / 1.5**2
    for state in (batch, sequential):
        np.testing.assert_allclose(bo.posterior(state)[1], np.linalg.inv(prec), rtol=1e-10,
                                   atol=1e-12)


def test_thompson_argmax_beats_random_unit_vectors(x64):
    """w̃ᵀu* = ‖w̃‖ ≥ w̃ᵀv for every unit v (an exact inequality, checked on 10⁵ vectors)."""
    dim = DIM
    x, y = _data(3)
    bo = SphericalLinearBO(dim, noise=0.1)
    state = bo.tell(bo.init(jnp.float64), x, y)
    key = jax.random.key(4)
    w = np.asarray(bo.sample_weights(key, state, 1)[0], np.float64)
    u = np.asarray(bo.ask(key, state)[0], np.float64)
    v = _unit(np.random.default_rng(5), 100_000, dim)
    assert w @ u >= np.max(v @ w)
    np.testing.assert_allclose(w @ u, np.linalg.norm(w), rtol=1e-12)


@pytest.mark.parametrize("planar", [True, False])
def test_ucb_secular_solution_matches_dense_search_on_s2(x64, planar):
    """planar: told points on a great circle, so the unobserved normal keeps the prior variance
    and the mean has no weight there (the secular equation's hard case); otherwise generic. The
    first GP-BUCB point is the UCB maximiser; the next ones differ."""
    x, y = _data(8, dim=3)
    if planar:
        x[:, 2] = 0.0
    bo = SphericalLinearBO(3, noise=0.2, prior_scale=0.8)
    state = bo.tell(bo.init(jnp.float64), x, y)
    beta = 3.0
    points = np.asarray(bo.ask(jax.random.key(0), state, acquisition="ucb", beta=beta,
                               batch_size=3))
    u = points[0]
    mu, sigma = (np.asarray(a) for a in bo.posterior(state))

    def acq(v):
        return v @ mu + beta * np.sqrt(np.einsum("...i,ij,...j->...", v, sigma, v))

    grid = _fibonacci_sphere(200_000)
    values = acq(grid)
    assert abs(np.linalg.norm(u) - 1) < 1e-12
    assert acq(u) >= values.max() - 1e-12
    # the grid's spacing is ~0.008 rad: its best is within O(spacing²) of the optimum
    assert acq(u) - values.max() < 1e-3 * (np.abs(mu).sum() + beta * np.sqrt(sigma.max()))
    assert np.min(np.linalg.norm(points[1:] - u, axis=1)) > 1e-3
    if planar:
        lam, q = np.linalg.eigh(sigma)
        _, _, info = secular.ucb_argmax(jnp.asarray(mu), jnp.asarray(lam), jnp.asarray(q), beta)
        assert bool(info.hard_case) and abs(u[2]) > 0.1  # it explores the unobserved normal
    else:
        assert np.arccos(min(1.0, grid[np.argmax(values)] @ u)) < 0.02


def test_ucb_closed_form_limits(x64):
    lam, q = jnp.linalg.eigh(jnp.diag(jnp.array([0.3, 1.0, 2.0])))
    mu = jnp.array([0.5, -1.0, 0.2])
    u, value, info = secular.ucb_argmax(mu, lam, q, 0.0)  # β = 0: μ/‖μ‖
    np.testing.assert_allclose(u, mu / jnp.linalg.norm(mu), rtol=1e-12)
    lam, q = jnp.linalg.eigh(4.0 * jnp.eye(3))  # Σ = s²I: μ/‖μ‖ with value ‖μ‖ + βs
    u, value, info = secular.ucb_argmax(mu, lam, q, 1.5)
    np.testing.assert_allclose(u, mu / jnp.linalg.norm(mu), rtol=1e-12)
    np.testing.assert_allclose(value, jnp.linalg.norm(mu) + 1.5 * 2.0, rtol=1e-12)
    assert bool(info.solver.converged)


@pytest.mark.parametrize("angle", [0.3, 2.5])
def test_cap_argmax_lies_in_the_cap_and_beats_dense_sampling(x64, angle):
    rng = np.random.default_rng(9)
    a, center = rng.normal(size=3), _unit(rng, 1, 3)[0]
    u = np.asarray(secular.cap_argmax(jnp.asarray(a), jnp.asarray(center), angle))
    assert np.arccos(min(1.0, u @ center)) <= angle + 1e-9
    grid = _fibonacci_sphere(400_000)
    cap = grid[grid @ center >= np.cos(angle)]
    assert len(cap) > 1000
    assert u @ a >= np.max(cap @ a) - 1e-12
    if np.arccos(a @ center / np.linalg.norm(a)) <= angle:
        np.testing.assert_allclose(u, a / np.linalg.norm(a), rtol=1e-12)
    # a antiparallel to the centre: a boundary point
    back = np.asarray(secular.cap_argmax(jnp.asarray(-center), jnp.asarray(center), 0.3))
    np.testing.assert_allclose(back @ center, np.cos(0.3), rtol=1e-12)


def test_noise_free_linear_objective_solved_after_d_plus_1_points(x64):
    dim = DIM
    rng = np.random.default_rng(13)
    a = rng.normal(size=dim)
    x = _unit(rng, dim + 1, dim)
    bo = SphericalLinearBO(dim, noise=1e-6)
    state = bo.tell(bo.init(jnp.float64), x, x @ a + 3.0)  # the offset is integrated out
    u = np.asarray(bo.ask(jax.random.key(0), state, acquisition="mean")[0])
    np.testing.assert_allclose(u, a / np.linalg.norm(a), atol=1e-8)
    np.testing.assert_allclose(state.mean, a, atol=1e-6)  # shrinkage ~ σ²/σ_w² · cond


def test_batch_asks_under_vmap_stay_in_the_trust_region(x64):
    x, y = _data(14)
    bo = SphericalLinearBO(DIM, noise=0.2)
    state = bo.tell(bo.init(jnp.float64), x, y)
    keys = jax.random.split(jax.random.key(15), 2)
    center = _unit(np.random.default_rng(11), 1, DIM)[0]

    def ask(key):
        return bo.ask(key, state, batch_size=32, trust_region=(center, 0.2))

    batched = jax.vmap(ask)(keys)
    assert batched.shape == (2, 32, DIM)
    for i in range(2):
        np.testing.assert_allclose(batched[i], ask(keys[i]), rtol=1e-12, atol=1e-12)
    assert np.all(np.asarray(batched) @ center >= np.cos(0.2) - 1e-12)
    first = np.asarray(batched)[0]
    assert np.min(np.linalg.norm(first[1:] - first[:1], axis=1)) > 1e-3  # distinct draws


def test_non_finite_observation_under_jit_is_skipped_and_flagged(x64):
    bo = SphericalLinearBO(DIM)
    state = bo.tell(bo.init(jnp.float64), *_data(19))
    tell = jax.jit(lambda s, x, y: bo.tell(s, x, y))
    after = tell(state, jnp.ones(DIM), jnp.asarray(jnp.nan))
    assert bool(after.nonfinite) and int(after.count) == ROWS
    np.testing.assert_array_equal(after.mean, state.mean)


def test_fit_recovers_the_noise_and_raises_the_evidence(x64):
    dim, n, noise = DIM, 200, 0.1
    rng = np.random.default_rng(16)
    x = _unit(rng, n, dim)
    y = x @ rng.normal(size=dim) + rng.normal(size=n) * noise
    bo = SphericalLinearBO(dim, noise=1.0, prior_scale=0.1)
    state = bo.tell(bo.init(jnp.float64), x, y)
    fitted, info = bo.fit(state)
    assert bool(info.solver.converged) and not bool(info.nonfinite)
    assert float(bo.log_evidence(fitted)) > float(bo.log_evidence(state))
    np.testing.assert_allclose(info.log_evidence, bo.log_evidence(fitted), rtol=1e-10)
    # the estimate's relative standard error is ≈ 1/√(2(n − D)) = 5%: within 3 of them
    assert abs(float(fitted.noise) / noise - 1) < 0.15
    mu, sigma = bo.posterior(fitted)
    refit = bo.tell(SphericalLinearBO(dim, noise=fitted.noise,
                                      prior_scale=fitted.prior_scale).init(jnp.float64), x, y)
    np.testing.assert_allclose(mu, refit.mean, rtol=1e-8, atol=1e-10)


def test_run_improves_with_trust_region_and_reports_progress(x64):
    dim = DIM
    a = jnp.asarray(_unit(np.random.default_rng(17), 1, dim)[0])
    bo = SphericalLinearBO(dim, noise=0.05, radius=2.0)

    def objective(z):  # decoded latents of norm 2
        return z @ a / 2

    out = io.StringIO()
    meter = jaxsample.TextProgress(every=10, file=out)
    state, trace = bo.run(jax.random.key(18), objective, bo.init(jnp.float64), 30,
                          trust_region=True, refit_every=10, progress=meter)
    jax.effects_barrier()
    assert meter.steps_reported == [10, 20, 30]
    best = np.asarray(trace.best_value)
    assert np.all(np.diff(best) >= 0) and best[-1] == np.max(trace.values)
    np.testing.assert_allclose(np.linalg.norm(trace.points, axis=-1), 2.0, rtol=1e-12)
    assert best[-1] > 0.95  # cos(u, a) of the best of 30 points in D = 6
    assert not bool(np.any(trace.nonfinite)) and int(state.count) == 30
    # the evidence refits (iterations 10 and 20) report their solver; the others ran none
    refits = np.asarray(trace.solver.num_iterations)
    assert np.all(refits[[10, 20]] > 0) and np.all(np.delete(refits, [10, 20]) == 0)


def test_secular_solve_reports_through_solver_stats():
    from jaxsample import RESULTS

    b, d = jnp.array([0.3, 0.4, 2.0]), jnp.array([0.0, 1.0, 3.0])
    _, info = secular.solve_secular(b, d)
    assert bool(info.solver.converged) and int(info.solver.num_iterations) > 1
    _, capped = secular.solve_secular(b, d, max_iterations=1)
    assert int(capped.solver.num_iterations) == 1
    assert RESULTS[capped.solver.result] == RESULTS[RESULTS.max_iterations_reached]
    _, bad = secular.solve_secular(b.at[0].set(jnp.nan), d)
    assert bool(bad.nonfinite) and RESULTS[bad.solver.result] == RESULTS[RESULTS.nonfinite]


def test_evidence_fit_that_stops_early_is_reported_and_warned():
    """One BFGS step cannot meet the tolerance from a start far from the evidence maximum: the
    fit's status says so under ``jit`` and an eager call warns; the default budget succeeds
    without a warning."""
    import warnings

    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 4))
    y = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ np.array([1.0, -0.5, 0.3, 0.0])
    y = y + 0.05 * rng.normal(size=40)
    bo = SphericalLinearBO(4, noise=3.0, prior_scale=0.01)
    state = bo.tell(bo.init(jnp.float32), jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
    _, info = jax.jit(lambda s: bo.fit(s, max_iterations=1))(state)
    assert not bool(info.solver.converged) and int(info.solver.num_iterations) == 1
    with pytest.warns(RuntimeWarning, match="evidence maximisation did not succeed"):
        bo.fit(state, max_iterations=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = bo.fit(state)
    assert bool(info.solver.converged)


@pytest.mark.filterwarnings("ignore:SphericalLinearBO.run's evidence refits")  # noise-free y
def test_run_is_prefix_consistent():
    """Iteration t draws with fold_in(key, t) and nothing depends on num_iterations: a short
    run is bit for bit the start of a longer one (the convergence entry reads its budgets from
    one run)."""
    a = jnp.asarray([1.0, 2.0, 0.0, -1.0, 0.5, 0.0])
    bo = SphericalLinearBO(6)
    _, long = bo.run(jax.random.key(3), lambda u: u @ a, bo.init(jnp.float32), 12)
    _, short = bo.run(jax.random.key(3), lambda u: u @ a, bo.init(jnp.float32), 6)
    np.testing.assert_array_equal(np.asarray(long.points[:6]), np.asarray(short.points))
