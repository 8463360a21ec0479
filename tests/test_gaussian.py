"""Tests of jaxsample.gaussian: the smoothed-score sampler, its oracle, and the baselines."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxsample import gaussian as G
from jaxsample.gaussian import baselines as B
from jaxsample.gaussian import resolvent as RS
from jaxsample.kernels import resolvent as R


def _problem(seed, d, kappa, mean_scale=1.0):
    """A dense SPD precision with a log-uniform spectrum on [1, kappa], as float64 NumPy."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.geomspace(1.0, kappa, d)
    precision = (q * lam) @ q.T
    precision = 0.5 * (precision + precision.T)
    mean = mean_scale * rng.standard_normal(d)
    sqrt_precision = (q * np.sqrt(lam)) @ q.T
    return lam, precision, mean, sqrt_precision


def _diagonal_oracle(lam):
    """Spectral oracle of N(0, diag(1/lam)): accurate to round-off coordinate by coordinate."""
    return lambda x, tau: -(lam / (1 + tau * lam)) * x


def _whitened_error(sqrt_precision, s):
    """|| Lambda^{1/2} S^2 Lambda^{1/2} - I ||_op and _F for a symmetric S."""
    w = sqrt_precision @ s @ s @ sqrt_precision - np.eye(s.shape[0])
    return np.linalg.norm(w, 2), np.linalg.norm(w, "fro")


@pytest.mark.parametrize("known_mean", [True, False])
@pytest.mark.parametrize("tol", [1e-3, 1e-6])
def test_sampler_is_linear_and_covariance_error_is_o_tol(x64, known_mean, tol):
    d, kappa = 8, 1e4
    lam, precision, mean, sqrt_precision = _problem(0, d, kappa, mean_scale=3.0)
    oracle = G.smoothed_score_oracle(jnp.asarray(precision), jnp.asarray(mean))
    kwargs = dict(mean=jnp.asarray(mean) if known_mean else None, lambda_min=1.0,
                  lambda_max=kappa, tol=tol)
    columns, info = G.transform_noise(oracle, jnp.eye(d), **kwargs)
    s = (np.asarray(columns) - mean).T  # column j is S e_j
    # linearity: x(a z1 + b z2) - m = a (x(z1) - m) + b (x(z2) - m)
    z = np.random.default_rng(1).standard_normal((2, d))
    combo, _ = G.transform_noise(oracle, jnp.asarray([2.0 * z[0] - 0.5 * z[1]]), **kwargs)
    np.testing.assert_allclose(np.asarray(combo[0]) - mean, s @ (2.0 * z[0] - 0.5 * z[1]),
                               atol=1e-9 * np.linalg.norm(s @ z[0]))
    # S = r(Lambda): symmetric, and the covariance error is bounded by the scalar error e
    # measured on this spectrum: ||Lambda^{1/2} S^2 Lambda^{1/2} - I|| <= 2e + e^2 (plus round-off,
    # below 1e-8 at these settings, see G.sample).
    assert np.max(np.abs(s - s.T)) <= 1e-9 * np.max(np.abs(s))
    rule = R.sinc_rule(1.0, kappa, tol)
    r = np.asarray(R.inverse_sqrt_rational(jnp.asarray(lam), rule.weights, rule.taus))
    e = np.max(np.abs(r * np.sqrt(lam) - 1))
    assert e <= 2 * tol
    op_error, fro_error = _whitened_error(sqrt_precision, s)
    assert op_error <= 2 * e + e**2 + 1e-8
    # TV(N(m, Sigma), N(m, S^2)) <= (3/2) ||.||_F <= (3/2) sqrt(d) (2e + e^2) <= 6 sqrt(d) tol
    assert 1.5 * fro_error <= 6 * math.sqrt(d) * tol * (1 + tol)
    assert info.num_levels == len(rule.taus)
    if known_mean:
        assert info.num_queries == d * info.num_levels
    else:
        assert info.num_queries == d * info.num_levels + info.num_levels + 1
        # the Tweedie base points converge to m to round-off: z = 0 returns the mean estimate
        estimate, _ = G.transform_noise(oracle, jnp.zeros((1, d)), **kwargs)
        whitened = np.linalg.norm(sqrt_precision @ (np.asarray(estimate[0]) - mean))
        assert whitened <= 1e-12 * math.sqrt(kappa) * (1 + np.linalg.norm(mean)) * d


@pytest.mark.parametrize("known_mean", [True, False])
def test_query_count_equals_node_count(known_mean):
    lam = jnp.asarray([1.0, 10.0, 100.0])
    points = []

    def oracle(x, tau):
        jax.debug.callback(lambda x: points.append(1), x)  # once per evaluated point
        return -(lam / (1 + tau * lam)) * x

    mean = jnp.zeros(3) if known_mean else None
    x, info = G.sample(jax.random.key(0), oracle, mean=mean, dim=3, lambda_min=1.0,
                       lambda_max=100.0, tol=1e-3, num_samples=5)
    jax.block_until_ready(x)
    jax.effects_barrier()
    q = len(R.sinc_rule(1.0, 100.0, 1e-3).taus)
    expected = 5 * q if known_mean else 5 * q + q + 1
    assert info.num_queries == expected == len(points)
    assert info.answer_bits == 32 and info.solver_iterations == 0 and info.converged


def test_queries_grow_logarithmically_while_chebyshev_grows_like_sqrt_kappa():
    tol = 1e-6
    h = R.sinc_rule(1.0, 1.0, tol).step
    kappas = [1e2, 1e4, 1e6]
    sinc = [len(R.sinc_rule(1.0, k, tol).taus) for k in kappas]
    cheb = [len(B._chebyshev_coefficients(1.0, k, tol)) - 1 for k in kappas]
    per_two_decades = math.log(100) / (2 * h)
    assert np.all((np.diff(sinc) > 0) & (np.diff(sinc) <= math.ceil(per_two_decades) + 1))
    ratios = np.asarray(cheb[1:]) / np.asarray(cheb[:-1])
    assert np.all((ratios >= 8) & (ratios <= 11))
    assert cheb[2] >= 10 * sinc[2]  # the bench goal at kappa = 1e6, tol = 1e-6


def test_monte_carlo_covariance_and_mean(x64):
    # Whitened samples y = Lambda^{1/2}(x - m) ~ N(0, I) up to O(tol). With n samples and the
    # true centre, n ||C - I||_F^2 / 2 is approximately chi^2 with d(d+1)/2 degrees of freedom
    # and n ||mean(y)||^2 ~ chi^2_d: each must not be rejected at p = 1e-4.
    d, kappa, n = 3, 1e3, 20_000
    lam, precision, mean, sqrt_precision = _problem(2, d, kappa)
    oracle = G.smoothed_score_oracle(jnp.asarray(precision), jnp.asarray(mean))
    for bits in (None, "auto"):
        x, info = G.sample(jax.random.key(7), oracle, mean=jnp.asarray(mean), lambda_min=1.0,
                           lambda_max=kappa, tol=1e-4, num_samples=n, bits=bits)
        y = (np.asarray(x) - mean) @ sqrt_precision
        c = y.T @ y / n
        stat = n * np.linalg.norm(c - np.eye(d), "fro") ** 2 / 2
        assert scipy.stats.chi2.sf(stat, d * (d + 1) / 2) > 1e-4
        assert scipy.stats.chi2.sf(n * np.sum(y.mean(axis=0) ** 2), d) > 1e-4
        assert not bool(info.nonfinite)


def test_quantised_noise_variance_matches_formula(x64):
    # Given z, the dithered answers add independent U[-D_k/2, D_k/2] errors, so each coordinate
    # of x gains variance sum_k w_k^2 D_k^2 / 12, D_k = tau_k ||z|| / (1 + tau_k lam_min) / N.
    # Over n dither keys the sample variance has relative s.e. <= sqrt(2/n) (Gaussian bound;
    # the sum of uniforms has lighter tails): 5 sigma.
    d, kappa, bits, n = 4, 1e2, 6, 4000
    lam = jnp.asarray(np.geomspace(1.0, kappa, d))
    oracle = _diagonal_oracle(lam)
    z = jnp.asarray(np.random.default_rng(5).standard_normal((1, d)))
    kwargs = dict(mean=jnp.zeros(d), lambda_min=1.0, lambda_max=kappa, tol=1e-3)
    exact, _ = G.transform_noise(oracle, z, **kwargs)
    keys = jax.random.split(jax.random.key(3), n)
    draws = jax.vmap(lambda k: G.transform_noise(oracle, z, bits=bits, key=k, **kwargs)[0][0])(keys)
    noise = np.asarray(draws) - np.asarray(exact[0])
    rule = R.sinc_rule(1.0, kappa, 1e-3)
    steps = rule.taus * float(jnp.linalg.norm(z)) / (1 + rule.taus) / (2 ** (bits - 1) - 1)
    variance = np.sum(rule.weights**2 * steps**2) / 12
    assert np.all(np.abs(noise.mean(axis=0)) <= 5 * math.sqrt(variance / n))
    assert np.all(np.abs(noise.var(axis=0) / variance - 1) <= 5 * math.sqrt(2 / n))


def test_auto_bits_grow_like_log_kappa_and_meet_tol(x64):
    d, tol = 4, 1e-4
    bits = []
    for kappa in (1e2, 1e4, 1e6, 1e8):
        rule = R.sinc_rule(1.0, kappa, tol)
        b = RS._auto_bits(rule, 1.0, kappa, tol, d)
        bits.append(b)
        # chosen noise level: lambda_max * E sigma^2 <= tol, and one bit fewer would not do
        spread = np.sum((rule.weights * rule.taus / (1 + rule.taus)) ** 2)
        noise = [kappa * d * spread / (12 * (2 ** (n - 1) - 1) ** 2) for n in (b, b - 1)]
        assert noise[0] <= tol < noise[1]
    increments = np.diff(bits)
    # b ~ (1/2) log2(kappa d spread / tol) with spread ~ h / lambda_min: ~3.3 bits per 2 decades
    assert np.all((increments >= 2) & (increments <= 5))
    # the sampler uses them: q d b bits per sample
    lam = jnp.asarray(np.geomspace(1.0, 1e2, d))
    _, info = G.sample(jax.random.key(0), _diagonal_oracle(lam), mean=jnp.zeros(d),
                       lambda_min=1.0, lambda_max=1e2, tol=tol, num_samples=3, bits="auto")
    assert info.answer_bits == bits[0]


def test_matrix_free_oracle_matches_dense(x64):
    d, kappa = 6, 1e3
    _, precision, mean, _ = _problem(3, d, kappa)
    dense = G.smoothed_score_oracle(jnp.asarray(precision), jnp.asarray(mean))
    free = G.smoothed_score_oracle(lambda v: jnp.asarray(precision) @ v, jnp.asarray(mean))
    x = jnp.asarray(np.random.default_rng(0).standard_normal(d))
    taus = jnp.asarray([0.0, 1e-3, 1.0, 1e3])
    a = jax.vmap(dense, in_axes=(None, 0))(x, taus)
    b, stats = jax.jit(jax.vmap(free.with_stats, in_axes=(None, 0)))(x, taus)
    assert np.all(np.linalg.norm(a - b, axis=1) <= 1e-10 * np.linalg.norm(a, axis=1))
    # CG's report: one step at tau = 0 (the operator is I), at most d steps in exact arithmetic
    assert bool(jnp.all(stats.converged)) and int(stats.iterations[0]) == 1
    assert bool(jnp.all((stats.iterations >= 1) & (stats.iterations <= 2 * d)))
    # the sampler sums them over the levels; a cap below what CG needs is reported, not hidden
    kwargs = dict(mean=jnp.asarray(mean), lambda_min=1.0, lambda_max=kappa, tol=1e-3)
    _, info = G.transform_noise(free, jnp.eye(d), **kwargs)
    assert info.converged and info.num_levels <= info.solver_iterations <= 2 * d * info.num_levels
    capped = G.smoothed_score_oracle(lambda v: jnp.asarray(precision) @ v, jnp.asarray(mean),
                                     max_iterations=2)
    x_capped, info = G.transform_noise(capped, jnp.eye(d), **kwargs)
    assert not info.converged and info.solver_iterations <= 2 * info.num_levels
    assert not info.nonfinite and bool(jnp.all(jnp.isfinite(x_capped)))


def test_float32_at_tol_1e3_meets_the_float64_budget():
    # With an oracle accurate to round-off per coordinate, float32 at tol = 1e-3 and kappa = 100
    # sits above the round-off floor (4.5e-4) and meets 2e + e^2 plus that floor.
    d, kappa, tol = 16, 1e2, 1e-3
    lam = np.geomspace(1.0, kappa, d)
    oracle = _diagonal_oracle(jnp.asarray(lam, jnp.float32))
    x, _ = G.transform_noise(oracle, jnp.eye(d, dtype=jnp.float32), mean=jnp.zeros(d),
                             lambda_min=1.0, lambda_max=kappa, tol=tol)
    assert x.dtype == jnp.float32
    s = np.asarray(x, np.float64)
    rule = R.sinc_rule(1.0, kappa, tol)
    e = np.max(np.abs(np.sum(rule.weights * rule.taus / (1 + rule.taus * lam[:, None]), 1)
                      * np.sqrt(lam) - 1))
    floor = RS._roundoff_floor(rule, kappa, jnp.float32)
    op_error, _ = _whitened_error(np.diag(np.sqrt(lam)), s)
    assert op_error <= 2 * e + e**2 + floor


def test_float32_below_floor_is_refused_and_float64_warns(x64):
    lam = jnp.asarray([1.0, 1e4], jnp.float32)
    with pytest.raises(ValueError, match="round-off floor"):
        G.sample(jax.random.key(0), _diagonal_oracle(lam), mean=jnp.zeros(2, jnp.float32),
                 lambda_min=1.0, lambda_max=1e4, tol=1e-4, num_samples=1)
    lam64 = jnp.asarray([1.0, 1e4])
    with pytest.warns(UserWarning, match="round-off floor"):
        G.sample(jax.random.key(0), _diagonal_oracle(lam64), mean=jnp.zeros(2),
                 lambda_min=1.0, lambda_max=1e4, tol=1e-9, num_samples=1)


def test_new_precision_and_mean_reuse_the_compilation():
    # the oracle is a pytree: new keys, a new precision and a new mean of the same shape compile
    # nothing (jit/vmap/dtype behaviour is the contract test's)
    kwargs = dict(lambda_min=1.0, lambda_max=50.0, tol=1e-3, num_samples=4)
    mean = jnp.ones(3)
    oracle = G.smoothed_score_oracle(jnp.diag(jnp.asarray([1.0, 7.0, 50.0])), mean)
    G.sample(jax.random.key(0), oracle, mean=mean, **kwargs)
    G.chebyshev_sample(jax.random.key(0), oracle.score, mean=mean, **kwargs)
    other_mean = mean + 1
    other = G.smoothed_score_oracle(jnp.diag(jnp.asarray([2.0, 3.0, 40.0])), other_mean)
    compiles = []
    listener = lambda name, *args, **kw: compiles.append(name)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        G.sample(jax.random.key(1), oracle, mean=mean, **kwargs)
        G.sample(jax.random.key(2), other, mean=other_mean, **kwargs)
        G.chebyshev_sample(jax.random.key(2), other.score, mean=other_mean, **kwargs)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not [name for name in compiles if name.endswith("backend_compile_duration")], compiles


def test_sharded_noise_and_outputs_on_four_devices(x64):
    assert jax.device_count() >= 4
    mesh = jax.make_mesh((4,), ("particles",))
    lam = jnp.asarray([1.0, 7.0, 50.0])
    oracle = _diagonal_oracle(lam)
    kwargs = dict(mean=jnp.ones(3), lambda_min=1.0, lambda_max=50.0, tol=1e-6)
    z = jax.random.normal(jax.random.key(1), (8, 3))
    plain, _ = G.transform_noise(oracle, z, **kwargs)
    z_sharded = jax.device_put(z, NamedSharding(mesh, P("particles", None)))
    sharded, _ = G.transform_noise(oracle, z_sharded, **kwargs)
    assert len(sharded.sharding.device_set) == 4
    np.testing.assert_allclose(np.asarray(sharded), np.asarray(plain), rtol=1e-12)
    out = NamedSharding(mesh, P("particles", None))
    draw = jax.jit(lambda k: G.sample(k, oracle, num_samples=8, **kwargs)[0], out_shardings=out)
    x = draw(jax.random.key(2))
    ref, _ = G.sample(jax.random.key(2), oracle, num_samples=8, **kwargs)
    assert x.sharding == out
    np.testing.assert_allclose(np.asarray(x), np.asarray(ref), rtol=1e-12)


def test_baselines_against_exact_linear_algebra(x64):
    d, kappa = 10, 1e3
    lam, precision, mean, sqrt_precision = _problem(4, d, kappa)
    oracle = G.smoothed_score_oracle(jnp.asarray(precision), jnp.asarray(mean))
    score = oracle.score
    key, n = jax.random.key(5), 6
    z = np.asarray(jax.random.normal(key, (n, d), jnp.float64))

    x, info = G.chebyshev_sample(key, score, mean=jnp.asarray(mean), lambda_min=1.0,
                                 lambda_max=kappa, tol=1e-6, num_samples=n)
    whitened = (np.asarray(x) - mean) @ sqrt_precision
    # p(Lambda) with max |p(l) sqrt(l) - 1| <= tol: per-sample whitened error <= tol ||z||
    assert np.all(np.linalg.norm(whitened - z, axis=1) <= 1.01e-6 * np.linalg.norm(z, axis=1))
    assert info.num_queries == n * info.num_levels

    x, info = G.lanczos_sample(key, score, mean=jnp.asarray(mean), num_steps=d, num_samples=n)
    whitened = (np.asarray(x) - mean) @ sqrt_precision
    np.testing.assert_allclose(whitened, z, atol=1e-8)  # d steps: the Krylov space is R^d
    assert info.num_queries == n * d

    x, info = G.cholesky_sample(key, jnp.asarray(precision), mean=jnp.asarray(mean), num_samples=n)
    factor = np.linalg.cholesky(precision)
    np.testing.assert_allclose((np.asarray(x) - mean) @ factor, z, atol=1e-10)
    assert info.num_queries == d


def test_baselines_preserve_dtype(dtype):
    lam = jnp.asarray([1.0, 4.0, 9.0], dtype)
    score = lambda x: -lam * x
    mean = jnp.zeros(3, dtype)
    key = jax.random.key(0)
    outs = [
        G.chebyshev_sample(key, score, mean=mean, lambda_min=1.0, lambda_max=9.0, tol=1e-3,
                           num_samples=2),
        G.lanczos_sample(key, score, mean=mean, num_steps=3, num_samples=2),
        G.cholesky_sample(key, jnp.diag(lam), mean=mean, num_samples=2),
    ]
    for x, info in outs:
        assert x.dtype == dtype and x.shape == (2, 3) and not bool(info.nonfinite)


def test_bad_inputs_raise_clear_errors():
    # the sampler's own argument errors are in tests/contract/gaussian_resolvent.py
    lam = jnp.asarray([1.0, 4.0])
    oracle = _diagonal_oracle(lam)
    base = dict(mean=jnp.zeros(2), lambda_min=1.0, lambda_max=4.0, tol=1e-3, num_samples=2)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="smoothed_score_fn"):
        G.sample(key, lambda x, tau: jnp.zeros(3), **base)
    with pytest.raises(TypeError, match="smoothed_score_fn"):
        G.sample(key, "oracle", **base)
    with pytest.raises(TypeError, match="lambda_min"):  # traced: it fixes the level count
        jax.jit(lambda a: G.sample(key, oracle, **{**base, "lambda_min": a})[0])(1.0)
    with pytest.raises(ValueError, match="square"):
        G.smoothed_score_oracle(jnp.ones((2, 3)), jnp.zeros(2))
    with pytest.raises(ValueError, match="symmetric"):
        G.smoothed_score_oracle(jnp.asarray([[1.0, 0.5], [0.0, 1.0]]), jnp.zeros(2))
    with pytest.raises(ValueError, match="positive definite"):
        G.smoothed_score_oracle(jnp.asarray([[1.0, 0.0], [0.0, -1.0]]), jnp.zeros(2))
    with pytest.raises(ValueError, match="dimension"):
        G.smoothed_score_oracle(jnp.eye(3), jnp.zeros(2))
    with pytest.raises(ValueError, match="score_fn"):
        G.chebyshev_sample(key, lambda x: x[:1], mean=jnp.zeros(2), lambda_min=1.0,
                           lambda_max=4.0, tol=1e-3, num_samples=1)
    with pytest.raises(ValueError, match="tol"):
        G.chebyshev_sample(key, lambda x: -x, mean=jnp.zeros(2), lambda_min=1.0,
                           lambda_max=4.0, tol=0.0, num_samples=1)
    with pytest.raises(ValueError, match="num_steps"):
        G.lanczos_sample(key, lambda x: -x, mean=jnp.zeros(2), num_steps=3, num_samples=1)
    with pytest.raises(ValueError, match="symmetric"):
        G.cholesky_sample(key, jnp.asarray([[2.0, 1.0], [0.0, 2.0]]), mean=jnp.zeros(2),
                          num_samples=1)
    spectrum = dict(mean=jnp.zeros(2), lambda_min=1.0, lambda_max=4.0, tol=1e-3)
    with pytest.raises(ValueError, match="z must have 2"):
        G.transform_noise(oracle, jnp.ones(2), **spectrum)
    with pytest.raises(TypeError, match="z must be floating"):
        G.transform_noise(oracle, jnp.ones((1, 2), jnp.int32), **spectrum)
    with pytest.raises(TypeError, match="key"):
        G.transform_noise(oracle, jnp.ones((1, 2)), bits=4, **spectrum)
