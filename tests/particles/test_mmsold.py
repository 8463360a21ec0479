"""Tests of MM-SOLD specific to it, its baselines (naive smoothed Langevin, σ-CFDM), the tilt
and the datasets (the contract test covers dtypes, jit, vmap, traced hyper-parameters and argument
errors)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
import scipy.stats
from _xla import compiled_for_run_time
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import jaxsample
from jaxsample import datasets
from jaxsample.kernels.interactions import antithetic_normal, smoothed_kde_score
from jaxsample.kernels.stiefel import retract
from jaxsample.particles import (
    MMSOLDState,
    MomentTargets,
    cfdm_sample,
    exact_tilt,
    plugin_tilt,
    sample_kde,
    smoothed_langevin,
)
from jaxsample.particles.mmsold import pulled_back_gradient

CORRELATED_COV = np.array([[1.0, 0.6, 0.0], [0.6, 2.0, -0.3], [0.0, -0.3, 0.5]])


def _data(dtype, num_data=40, dim=3, seed=0):
    chol = np.linalg.cholesky(CORRELATED_COV[:dim, :dim])
    x = np.random.default_rng(seed).standard_normal((num_data, dim)) @ chol.T + 1.5
    return jnp.asarray(x, dtype)


def _circle():
    """12 points equispaced on the unit circle, float64 NumPy (cast where used)."""
    angles = np.arange(12) * (2 * np.pi / 12)
    return np.stack([np.cos(angles), np.sin(angles)], axis=1)


def _keep_state(state, info):
    return state, info


def _start(alg, data, key, num_particles, bandwidth):
    key_start, key_noise = jax.random.split(key)
    return alg.init(sample_kde(key_start, data, num_samples=num_particles, bandwidth=bandwidth)[0],
                    rng_key=key_noise)


@pytest.mark.parametrize("integrator,estimator", [("leimkuhler_matthews", "exact"),
                                                  ("euler", "knn")])
def test_moments_exact_at_every_step(x64, integrator, estimator):
    """float64: moments to 1e-10 at every step (float32 to 1e-4 is the contract entry's run)."""
    dtype = jnp.float64
    data = _data(dtype)
    num_particles = 16
    alg = jaxsample.mmsold(data, bandwidth=0.3, smoothing=0.2, step_size=0.05,
                           integrator=integrator, estimator=estimator, num_neighbours=5,
                           num_remainder=10, num_smoothing_samples=4)
    state = _start(alg, data, jax.random.key(1), num_particles, 0.3)
    _, (states, info) = jaxsample.run(jax.random.key(2), alg, state, 8, transform=_keep_state)
    mean, cov, _ = MomentTargets.from_data(data, 0.3)
    z, y = states.positions, states.coords
    assert z.dtype == dtype and z.shape == (8, num_particles, 3)
    rel = 1e-10
    centred = z - mean[None, None, :]
    np.testing.assert_allclose(jnp.mean(z, axis=1), jnp.broadcast_to(mean, (8, 3)),
                               atol=rel * float(jnp.max(jnp.abs(mean))))
    emp_cov = jnp.einsum("tbi,tbj->tij", centred, centred) / num_particles
    np.testing.assert_allclose(emp_cov, jnp.broadcast_to(cov, (8, 3, 3)),
                               atol=rel * float(jnp.max(jnp.abs(cov))))
    np.testing.assert_allclose(jnp.einsum("tbi,tbj->tij", y, y),
                               jnp.broadcast_to(num_particles * jnp.eye(3, dtype=dtype),
                                                (8, 3, 3)), atol=rel * num_particles)
    np.testing.assert_allclose(jnp.sum(y, axis=1), 0.0, atol=rel * num_particles)
    assert not bool(jnp.any(info.nonfinite))
    assert float(jnp.max(info.cov_residual)) < rel and float(jnp.max(info.mean_residual)) < (
        rel * float(jnp.max(jnp.abs(mean))))
    assert not bool(jnp.allclose(z[0], z[-1]))  # the particles do move


def test_start_is_retracted_and_too_few_particles_rejected(x64):
    """init moves any start onto the moment-matching set; B <= d is refused."""
    data = _data(jnp.float64)
    alg = jaxsample.mmsold(data, bandwidth=0.3, smoothing=0.1, step_size=0.01)
    with pytest.raises(ValueError, match=r"at least 4 particles.*B >= d \+ 1"):
        alg.init(data[:3])
    with pytest.raises(ValueError, match="position"):
        alg.init(data[:, :2])
    state = alg.init(data[:4] * 3.0 + 1.0)
    mean, cov, _ = MomentTargets.from_data(data, 0.3)
    centred = state.positions - mean[None, :]
    np.testing.assert_allclose(jnp.mean(state.positions, axis=0), mean, atol=1e-12)
    np.testing.assert_allclose(centred.T @ centred / 4, cov, atol=1e-12)
    np.testing.assert_array_equal(state.prev_noise, 0.0)  # no rng_key: zero previous noise


def test_bad_arguments_raise():
    args = dict(bandwidth=0.3, smoothing=0.1, step_size=0.01)
    data = _data(jnp.float32)
    with pytest.raises(ValueError, match="estimator"):
        jaxsample.mmsold(data, **args, estimator="fast")
    with pytest.raises(ValueError, match="num_neighbours"):
        jaxsample.mmsold(data, **(args | {"estimator": "knn", "num_neighbours": 30,
                                          "num_remainder": 20}))
    with pytest.raises(ValueError, match="smoothing"):
        smoothed_langevin(data, **(args | {"smoothing": -0.1}))
    bad = np.array(data)
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        jaxsample.mmsold(bad, **args)
    with pytest.raises(ValueError, match="data"):
        jaxsample.mmsold(np.ones(5, np.float32), **args)
    with pytest.raises(ValueError, match="finite"):
        cfdm_sample(jax.random.key(0), bad, num_samples=4, smoothing=0.1)


def test_rank_deficient_data_needs_no_jitter(x64):
    """Data on a line: Sigma* = Sigma_x + sigma_g^2 I is still positive definite, moments exact."""
    t = np.linspace(-1, 1, 30)
    data = jnp.asarray(np.stack([t, 2 * t], axis=1))
    alg = jaxsample.mmsold(data, bandwidth=0.1, smoothing=0.05, step_size=0.01)
    _, info = jaxsample.run(jax.random.key(0), alg, _start(alg, data, jax.random.key(1), 8, 0.1),
                            5)
    assert float(jnp.max(info.cov_residual)) < 1e-10
    # a bandwidth negligible in float32 next to the data's scale is refused, not jittered
    with pytest.raises(ValueError, match="bandwidth"):
        jaxsample.mmsold(jnp.asarray(1e4 * data, jnp.float32), bandwidth=1e-9,
                         smoothing=0.0, step_size=0.01)


def test_pullback_is_the_chain_rule_not_the_transpose(x64):
    """G_Y = G_Z L equals jax.grad of Y -> sum_b V_hat(mu* + L y_b) with the noise fixed.

    Every quantity comes out of one jitted program (eager, each primitive compiled on its own).
    """
    data = _data(jnp.float64, num_data=25, dim=3)
    bandwidth, smoothing = 0.4, 0.3

    @jax.jit
    def evaluate(data):
        mean, cov, chol = MomentTargets.from_data(data, bandwidth)
        y = retract(jax.random.normal(jax.random.key(0), (10, 3), jnp.float64))
        noise = antithetic_normal(jax.random.key(1), 10, 4, 3, jnp.float64)

        def total_potential(y):
            z = mean[None, :] + y @ chol.T
            shifted = z[:, None, :] + smoothing * noise
            sq = jnp.sum(jnp.square(shifted[:, :, None, :] - data[None, None]), axis=-1)
            return -jnp.sum(jnp.mean(jax.nn.logsumexp(-sq / (2 * bandwidth**2), axis=-1),
                                     axis=1))

        score_z = smoothed_kde_score(y @ chol.T, data - mean[None, :], bandwidth, smoothing,
                                     noise)
        return (cov, chol, score_z, jax.grad(total_potential)(y),
                -pulled_back_gradient(score_z, chol))

    cov, chol, score_z, expected, pulled = (np.asarray(a) for a in evaluate(data))
    assert np.max(np.abs(cov - np.diag(np.diag(cov)))) > 0.1  # non-diagonal
    np.testing.assert_allclose(pulled, expected, rtol=1e-9, atol=1e-9)
    # the reference code's gZ @ L.T is a different vector for this non-diagonal Sigma*
    assert np.max(np.abs(-score_z @ chol.T - expected)) > 1e-2
    # ... and the same one when Sigma* is diagonal
    diag_chol = np.diag(np.diag(chol))
    np.testing.assert_allclose(score_z @ diag_chol, score_z @ diag_chol.T)


def test_gaussian_data_passes_ks_on_random_projections():
    """Gaussian data: e^{-V} ~ N(mu*, Sigma*), the tilt ~ 0, so the particles must pass a KS test.

    10 random projections of the final B = 600 particles, each against N(a^T mu*, a^T Sigma* a);
    Bonferroni: every p-value must exceed 0.001 / 10 (family-wise false alarm 0.1%). The exact
    moment constraint only makes the test conservative.
    """
    with jax.enable_x64(True):
        dim = 2
        data = _data(jnp.float64, num_data=1000, dim=dim, seed=3)
        alg = jaxsample.mmsold(data, bandwidth=0.4, smoothing=0.2, step_size=0.05,
                               num_smoothing_samples=4)
        state, _ = jaxsample.run(jax.random.key(0), alg,
                                 _start(alg, data, jax.random.key(1), 600, 0.4), 150)
        mean, cov, _ = MomentTargets.from_data(data, 0.4)
        directions = np.random.default_rng(7).standard_normal((10, dim))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        z = np.asarray(state.positions)
        for a in directions:
            loc, scale = a @ np.asarray(mean), np.sqrt(a @ np.asarray(cov) @ a)
            p_value = scipy.stats.kstest(z @ a, "norm", args=(loc, scale)).pvalue
            assert p_value > 0.001 / 10, (a, p_value)


def _circle_potential(points, data, bandwidth, smoothing, num_quadrature=16):
    """V on points, by a Gauss–Hermite product rule in NumPy (independent of the library)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(num_quadrature)
    weights = weights / weights.sum()
    potential = np.zeros(points.shape[0])
    for e1, w1 in zip(nodes, weights, strict=True):
        for e2, w2 in zip(nodes, weights, strict=True):
            shifted = points + smoothing * np.array([e1, e2])
            logits = -np.sum((shifted[:, None, :] - data[None]) ** 2, axis=-1) / (2 * bandwidth**2)
            top = logits.max(axis=1)  # a plain log-sum-exp: scipy's costs 5x more here
            potential -= w1 * w2 * (top + np.log(np.exp(logits - top[:, None]).sum(axis=1)))
    return potential


def _radius_stats(radius, probs, r0):
    mean_r = probs @ radius
    return np.array([mean_r, np.sqrt(probs @ radius**2 - mean_r**2), probs @ (radius < r0)])


@pytest.mark.slow
def test_circle_particles_match_exact_tilt_by_quadrature():
    """12 points on the unit circle, sigma_g = 0.1, s = 0.2 (the paper's Fig. 1 set-up).

    The test computes the exact tilted law itself: V by Gauss–Hermite on a grid, then the
    scalar c (lambda = 0, Lambda = c I by symmetry) so that E||z||^2 = tr Sigma*. (A 121^2 grid,
    spacing sigma_g / 3, and 16^2 nodes: the Riemann sum of this smooth, fast-decaying density
    is accurate far beyond the Monte Carlo error.) Particle radius
    statistics (mean, sd, P(r < 0.9)) are pooled over 1000 steps after burn-in; their standard
    error comes from 10 batch means of 100 steps (longer than the radial relaxation time ~80
    steps), and each must lie within 5 SE of the tilted law's value (t with 9 dof: p ~ 7e-4).
    The mean radius and P(r < 0.9) must also be more than 10 SE away from the untilted e^{-V}
    (its radius sd is nearly the same, so that one does not discriminate). B = 1000 particles: the
    tilted and untilted laws lie about 400 and 40 SE apart on those two statistics (SE from this
    run's own batch means), so an untilted sampler fails by a wide margin.
    """
    bandwidth, smoothing, r0 = 0.1, 0.2, 0.9
    data = _circle()
    axis = np.linspace(-2.0, 2.0, 121)
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    potential = _circle_potential(grid, data, bandwidth, smoothing)
    sq_radius = np.sum(grid**2, axis=1)
    target_second = 2 * (0.5 + bandwidth**2)

    def law(c):
        logits = -potential - 0.5 * c * sq_radius
        probs = np.exp(logits - logits.max())
        return probs / probs.sum()

    c = scipy.optimize.brentq(lambda c: law(c) @ sq_radius - target_second, -60.0, 60.0,
                              xtol=1e-12)
    assert c < 0  # smoothing pulls mass inwards; the tilt pushes it back out
    radius = np.sqrt(sq_radius)
    tilted, naive = _radius_stats(radius, law(c), r0), _radius_stats(radius, law(0.0), r0)

    library, info = exact_tilt(data, bandwidth=bandwidth, smoothing=smoothing, grid_size=121,
                               num_quadrature=16)
    assert bool(info.solver.converged) and not bool(info.nonfinite)
    assert library.quadratic.dtype == jnp.float32  # the data's dtype
    np.testing.assert_allclose(library.linear, 0.0, atol=1e-6)
    np.testing.assert_allclose(library.quadratic, c * np.eye(2), rtol=2e-3, atol=1e-3)

    with jax.enable_x64(True):
        alg = jaxsample.mmsold(jnp.asarray(data), bandwidth=bandwidth,
                               smoothing=smoothing, num_smoothing_samples=32, step_size=2.5e-4)
        state = _start(alg, jnp.asarray(data), jax.random.key(0), 1000, bandwidth)

        def stats(state, info):
            r = jnp.linalg.norm(state.positions, axis=1)
            return jnp.stack([jnp.mean(r), jnp.mean(r**2), jnp.mean((r < r0).astype(r.dtype))])

        # burn-in and measurement in one run (one compiled loop, compiled to run: it spends
        # seconds running, not compiling), the first 300 steps dropped
        run = lambda key, state: jaxsample.run(key, alg, state, 1300, transform=stats)[1]
        key = jax.random.key(1)
        trace = compiled_for_run_time(run, key, state)(key, state)
    batches = np.asarray(trace)[300:].reshape(10, 100, 3).mean(axis=1)
    batch_stats = np.stack([batches[:, 0], np.sqrt(batches[:, 1] - batches[:, 0] ** 2),
                            batches[:, 2]], axis=1)
    estimate = batch_stats.mean(axis=0)
    standard_error = batch_stats.std(axis=0, ddof=1) / np.sqrt(10)
    assert np.all(np.abs(estimate - tilted) < 5 * standard_error), (estimate, tilted,
                                                                    standard_error)
    discriminating = [0, 2]
    assert np.all(np.abs(estimate - naive)[discriminating]
                  > 10 * standard_error[discriminating]), (estimate, naive)


def test_plugin_tilt_on_the_circle():
    """Plug-in Stein tilt on the 12-point circle.

    Monte Carlo with shared antithetic draws: lambda = 0 to round-off (antipodal data). Gauss–
    Hermite: also Lambda = c I to round-off (quarter-turn symmetry), and Lambda equals SciPy's
    Lyapunov solution for S built from the test's own potential (same Gauss–Hermite rule) by
    central differences.
    """
    bandwidth, smoothing, num_quadrature = 0.1, 0.2, 16
    with jax.enable_x64(True):
        data = jnp.asarray(_circle())

        @jax.jit   # one program for the three estimates (eager, each primitive compiles alone)
        def estimates(key, data):
            return (plugin_tilt(key, data, bandwidth=bandwidth, smoothing=smoothing,
                                num_smoothing_samples=512),
                    plugin_tilt(key, data, bandwidth=bandwidth, smoothing=smoothing,
                                num_quadrature=num_quadrature)[0],
                    MomentTargets.from_data(data, bandwidth).cov)

        (monte_carlo, info), quadrature, cov = estimates(jax.random.key(0), data)
        assert not bool(info.nonfinite)
        np.testing.assert_allclose(monte_carlo.linear, 0.0, atol=1e-12)
        lam = np.asarray(monte_carlo.quadratic)
        np.testing.assert_allclose(lam, lam.T, atol=1e-12)
    np.testing.assert_allclose(quadrature.linear, 0.0, atol=1e-10)
    lam = np.asarray(quadrature.quadratic)
    assert lam[0, 0] < 0
    np.testing.assert_allclose(lam, lam[0, 0] * np.eye(2), atol=1e-8)

    points, step = np.asarray(data), 1e-5
    grad_v = np.stack([
        (_circle_potential(points + step * e, points, bandwidth, smoothing, num_quadrature)
         - _circle_potential(points - step * e, points, bandwidth, smoothing, num_quadrature))
        / (2 * step)
        for e in np.eye(2)], axis=1)
    stein = points.T @ grad_v / points.shape[0]
    expected = scipy.linalg.solve_continuous_lyapunov(np.asarray(cov),
                                                      2 * np.eye(2) - (stein + stein.T))
    np.testing.assert_allclose(lam, expected, rtol=1e-5, atol=1e-6)


def test_exact_tilt_rejects_high_dimension():
    with pytest.raises(ValueError, match="d <= 2"):
        exact_tilt(_data(jnp.float32), bandwidth=0.3, smoothing=0.1)


def test_sharded_particles_on_fake_devices():
    devices = jax.devices()[:4]
    if len(devices) < 4:
        pytest.skip("needs 4 (fake) devices")
    mesh = Mesh(np.asarray(devices), ("particles",))
    sharding = NamedSharding(mesh, PartitionSpec("particles"))
    data = _data(jnp.float32, dim=2)
    alg = jaxsample.mmsold(data, bandwidth=0.3, smoothing=0.2, step_size=0.05,
                           num_smoothing_samples=4, chunk_size=4)
    state = _start(alg, data, jax.random.key(0), 16, 0.3)
    # the particle leaves split over the devices, the step counter (a scalar) replicated
    sharded = jax.tree.map(lambda leaf: jax.device_put(
        leaf, sharding if leaf.ndim else NamedSharding(mesh, PartitionSpec())), state)
    out, info = jaxsample.run(jax.random.key(1), alg, sharded, 3)
    ref, _ = jaxsample.run(jax.random.key(1), alg, state, 3)
    np.testing.assert_allclose(out.positions, ref.positions, rtol=1e-4, atol=1e-4)
    assert float(info.cov_residual[-1]) < 1e-4


def test_nonfinite_step_is_flagged_and_rejected():
    data = _data(jnp.float32, dim=2)
    alg = jaxsample.mmsold(data, bandwidth=0.3, smoothing=0.1, step_size=0.05)
    state = _start(alg, data, jax.random.key(0), 8, 0.3)
    broken = state._replace(prev_noise=state.prev_noise.at[0, 0].set(jnp.nan))
    new, info = jax.jit(alg.step)(jax.random.key(1), broken)
    assert bool(info.nonfinite)
    np.testing.assert_array_equal(new.positions, broken.positions)


def test_naive_langevin_drifts_off_the_moments():
    """Without the constraint the circle's smoothed law shrinks: the covariance residual grows."""
    data = jnp.asarray(_circle(), jnp.float32)
    alg = smoothed_langevin(data, bandwidth=0.1, smoothing=0.3, step_size=2e-3,
                            num_smoothing_samples=8)
    state = _start(alg, data, jax.random.key(0), 500, 0.1)
    state, info = jaxsample.run(jax.random.key(1), alg, state, 200)
    assert isinstance(state, MMSOLDState)
    assert float(info.cov_residual[-1]) > 0.1 and not bool(jnp.any(info.nonfinite))


def test_cfdm_memorises_without_smoothing_and_generalises_with_it():
    dtype = jnp.float32
    data = datasets.checkerboard(jax.random.key(0), 50, dtype=dtype)

    def nearest_distance(x):
        return jnp.min(jnp.linalg.norm(x[:, None, :] - data[None, :, :], axis=-1), axis=1)

    plain, info = cfdm_sample(jax.random.key(1), data, num_samples=64, smoothing=0.0,
                              num_steps=200)
    assert plain.dtype == dtype and plain.shape == (64, 2) and not bool(info.nonfinite)
    assert float(jnp.median(nearest_distance(plain))) < 0.02
    smooth, _ = cfdm_sample(jax.random.key(1), data, num_samples=64, smoothing=0.3,
                            num_steps=200)
    assert float(jnp.median(nearest_distance(smooth))) > 0.05
    with pytest.raises(ValueError, match="num_steps"):
        cfdm_sample(jax.random.key(1), data, num_samples=4, smoothing=0.1, num_steps=1)
    with pytest.raises(ValueError, match="num_samples"):
        cfdm_sample(jax.random.key(1), data, num_samples=0, smoothing=0.1)


@pytest.mark.parametrize("maker,dim", [(datasets.checkerboard, 2), (datasets.two_spirals, 2),
                                       (datasets.latent_mixture, 64)])
def test_datasets_are_deterministic(maker, dim):
    dtype = jnp.float32
    draw = jax.jit(lambda key: maker(key, 33, dtype=dtype))   # one program for the three draws
    a = draw(jax.random.key(0))
    assert a.shape == (33, dim) and a.dtype == dtype
    np.testing.assert_array_equal(a, draw(jax.random.key(0)))
    assert not bool(jnp.allclose(a, draw(jax.random.key(1))))
    with pytest.raises(ValueError, match="num_samples"):
        maker(jax.random.key(0), 0)


def test_checkerboard_is_uniform_on_dark_squares():
    """Chi-square over the 8 dark squares (p > 1e-3) and no point on a light square."""
    x = np.asarray(datasets.checkerboard(jax.random.key(3), 8000))
    cells = np.floor(x).astype(int)
    assert np.all((cells.sum(axis=1) % 2) == 0) and np.all(np.abs(x) <= 2)
    _, counts = np.unique(cells, axis=0, return_counts=True)
    assert counts.shape == (8,)
    assert scipy.stats.chisquare(counts).pvalue > 1e-3


def test_exact_tilt_reports_an_unconverged_newton_iteration():
    """One Newton step from the zero tilt cannot meet float64's 1e-9 moment tolerance on a
    skewed set: the Info says so under jit and an eager call warns once."""
    from jaxsample.kernels.solver import RESULTS

    points = [[-2.0], [-1.7], [-1.5], [0.4], [1.1], [2.6]]

    def fit(data):
        return exact_tilt(data, bandwidth=0.3, smoothing=0.2, grid_size=101,
                          max_iterations=1)[1]

    with jax.enable_x64(True):
        data = jnp.asarray(points, jnp.float64)
        traced = jax.jit(fit)(data)
        assert traced.solver.result == RESULTS.max_iterations_reached
        assert float(traced.moment_error) > 1e-9
        with pytest.warns(RuntimeWarning, match="exact_tilt.*did not succeed"):
            eager = fit(data)
        assert not bool(eager.solver.converged)
        solved = exact_tilt(data, bandwidth=0.3, smoothing=0.2, grid_size=101)[1]
        assert bool(solved.solver.converged)
