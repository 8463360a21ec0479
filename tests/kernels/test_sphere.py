"""Tests of the sphere kernels: geometry, Wood's vMF sampler, A_d and the velocity profile."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
import scipy.special
import scipy.stats

from jaxsample.kernels import sphere


def _bessel_ratio(kappa, dim):
    return scipy.special.ive(dim / 2, kappa) / scipy.special.ive(dim / 2 - 1, kappa)


def _unit_rows(seed, rows, dim):
    x = np.random.default_rng(seed).normal(size=(rows, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@jax.jit
def _geometry(x, direction, y):
    v = sphere.tangent_project(x, direction)
    log = sphere.log_map(x, y)
    tiny = 1e-3 if x.dtype == jnp.float32 else 1e-7
    near = sphere.exp_map(x, tiny * sphere.retract(v))
    return {
        "v": v, "log": log, "retract": sphere.retract(x + 0.3 * v), "exp": sphere.exp_map(x, v),
        "exp0": sphere.exp_map(x, jnp.zeros_like(v)), "exp_log": sphere.exp_map(x, log),
        "angle": sphere.angle(x, y), "near": sphere.angle(x, near) / tiny,
    }


def test_geometry_tangency_norms_and_maps(dtype):
    x, direction, y = (jnp.asarray(a, dtype) for a in (
        _unit_rows(0, 50, 5), np.random.default_rng(1).normal(size=(50, 5)), _unit_rows(2, 50, 5)))
    out = {k: np.asarray(v) for k, v in _geometry(x, direction, y).items()}
    eps = float(jnp.finfo(dtype).eps)
    assert all(v.dtype == dtype for v in out.values())
    x, y = np.asarray(x), np.asarray(y)
    np.testing.assert_allclose(np.sum(x * out["v"], axis=-1), 0, atol=20 * eps)
    for moved in (out["retract"], out["exp"]):
        np.testing.assert_allclose(np.linalg.norm(moved, axis=-1), 1, atol=10 * eps)
    np.testing.assert_allclose(out["exp0"], x, atol=10 * eps)
    # exp_x(log_x(y)) = y, and |log_x(y)| is the great-circle distance
    np.testing.assert_allclose(np.sum(x * out["log"], axis=-1), 0, atol=50 * eps)
    np.testing.assert_allclose(out["exp_log"], y, atol=200 * eps)
    np.testing.assert_allclose(np.linalg.norm(out["log"], axis=-1), out["angle"], rtol=50 * eps)
    # the angle keeps relative precision for nearly equal points, where arccos(xᵀy) cannot
    np.testing.assert_allclose(out["near"], 1, rtol=1e-3)


def test_mean_cosine_matches_bessel_ratios(x64):
    kappas = np.array([0.0, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4])
    for dim in (2, 3, 8, 64):
        got = np.asarray(jax.vmap(lambda k, d=dim: sphere.mean_cosine(k, d))(jnp.asarray(kappas)))
        want = np.array([_bessel_ratio(k, dim) if k > 0 else 0.0 for k in kappas])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
        # 1 − A_d keeps its relative precision as A_d → 1
        np.testing.assert_allclose(1 - got, 1 - want, rtol=1e-10)
    single = np.asarray(jax.vmap(lambda k: sphere.mean_cosine(k, 8))(
        jnp.array([0.0, 100.0], jnp.float32)))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, [0.0, _bessel_ratio(100.0, 8)], rtol=1e-6, atol=1e-6)


def test_vmf_sample_law():
    """Wood's sampler at κ = 6 and κ = 1000, d = 4: mean A·μ and covariance
    E[u²]μμᵀ + (1 − E[u²])/(d − 1)·(I − μμᵀ) − A²μμᵀ with E[u²] = 1 − (d − 1)A/κ, every entry
    within 4.5 MC SE; KS of the cosine against SciPy's sampler at κ = 6. (Same shapes as the
    transport test of tests/diffusion/test_vmf.py: one compilation serves both.)"""
    dim, n = 4, 20_000
    mu = np.array([1.0, -2.0, 0.5, 1.0]) / np.sqrt(6.25)
    means = jnp.asarray(np.tile(mu, (n, 1)), jnp.float32)
    draws = {}
    for kappa in (6.0, 1000.0):
        x = sphere.vmf_sample(jax.random.key(3), means, jnp.float32(kappa))
        draws[kappa] = x = np.asarray(x, np.float64)
        mean = _bessel_ratio(kappa, dim)
        second = 1 - (dim - 1) * mean / kappa
        want_cov = ((second - mean**2) * np.outer(mu, mu)
                    + (1 - second) / (dim - 1) * (np.eye(dim) - np.outer(mu, mu)))
        assert np.all(np.abs(x.mean(axis=0) - mean * mu) <= 4.5 * x.std(axis=0) / np.sqrt(n))
        centred = x - x.mean(axis=0)
        products = centred[:, :, None] * centred[:, None, :]
        cov_se = products.std(axis=0) / np.sqrt(n)
        assert np.all(np.abs(products.mean(axis=0) - want_cov) <= 4.5 * cov_se + 1e-12)
    reference = scipy.stats.vonmises_fisher(mu, 6.0).rvs(n, random_state=0)
    assert scipy.stats.ks_2samp(draws[6.0] @ mu, reference @ mu).pvalue > 1e-3


def _theta_density(theta, kappa, dim):
    log_q = kappa * (np.cos(theta) - 1) + (dim - 2) * np.log(np.maximum(np.sin(theta), 1e-300))
    q = np.exp(log_q) if dim > 2 else np.exp(kappa * (np.cos(theta) - 1))
    return q / scipy.integrate.trapezoid(q, theta)


def test_velocity_profile_solves_the_continuity_equation(x64):
    """∂_t q + ∂_θ(q θ̇) = 0 with θ̇ = −a sin θ, κ(t) = κ_max t², by finite differences."""
    dim, kappa_max, t, delta = 8, 100.0, 0.6, 1e-5
    times = np.array([t - delta, t, t + delta])
    log_a, means = jax.vmap(lambda s: sphere.log_velocity_profile(
        kappa_max * s**2, 2 * kappa_max * s, dim))(jnp.asarray(times))
    theta = np.asarray(sphere.angle_grid(1025, jnp.float64))
    a = np.exp(np.asarray(log_a))
    assert np.all(a > 0) and np.all(np.isfinite(a))
    dq = (_theta_density(theta, kappa_max * times[2] ** 2, dim)
          - _theta_density(theta, kappa_max * times[0] ** 2, dim)) / (2 * delta)
    flux = _theta_density(theta, kappa_max * t**2, dim) * (-a[1] * np.sin(theta))
    residual = dq + np.gradient(flux, theta)
    assert np.max(np.abs(residual[5:-5])) <= 1e-3 * np.max(np.abs(dq))
    # a wrong profile (1% off) violates the equation by far more than the tolerance
    wrong = dq + np.gradient(1.01 * flux, theta)
    assert np.max(np.abs(wrong[5:-5])) > 3e-3 * np.max(np.abs(dq))
    # end values: κ'(1 ∓ A_d)/(d − 1)
    rate, mean = 2 * kappa_max * t, float(means[1])
    np.testing.assert_allclose(a[1, [0, -1]], rate * np.array([1 - mean, 1 + mean]) / (dim - 1),
                               rtol=1e-12)
    # the interior matches adaptive quadrature of the cancellation-free integral at each node
    kappa = kappa_max * t**2
    for j in (40, 700):
        th = theta[j]
        sign, lo, hi = (1, 0, th) if np.cos(th) >= mean else (-1, th, np.pi)
        def integrand(p, th=th, sign=sign):
            return sign * (np.cos(p) - mean) * np.exp(kappa * (np.cos(p) - np.cos(th))) * (
                np.sin(p) / np.sin(th)) ** (dim - 2)
        integral = scipy.integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-12, limit=200)[0]
        np.testing.assert_allclose(a[1, j], rate * integral / np.sin(th), rtol=1e-10)
    # float32: finite and within 2e-3 of float64 everywhere; κ' = 0 gives a ≡ 0 (log a = −inf)
    log_a32, _ = sphere.log_velocity_profile(jnp.float32(kappa), jnp.float32(rate), dim)
    zero, _ = sphere.log_velocity_profile(jnp.float32(0.0), jnp.float32(0.0), dim)
    log_a32 = np.asarray(log_a32)
    assert log_a32.dtype == np.float32 and np.all(np.isfinite(log_a32))
    np.testing.assert_allclose(np.exp(log_a32.astype(np.float64)) / a[1], 1, rtol=2e-3)
    assert np.all(np.asarray(zero) == -np.inf)


def test_interp_profile_and_tangent_sum():
    profile = np.random.default_rng(0).uniform(1, 2, 9).astype(np.float32)
    s = np.array([0.0625, 0.3, 0.99], np.float32)          # sin(θ/2) = s ⇒ u = 1 − 2s²
    x, emb = jnp.asarray(_unit_rows(3, 6, 5), jnp.float32), jnp.asarray(_unit_rows(4, 3, 5),
                                                                           jnp.float32)
    w = jnp.asarray(np.random.default_rng(5).uniform(size=(6, 3)), jnp.float32)

    @jax.jit
    def compute(profile):
        at_nodes = sphere.interp_profile(profile, jnp.cos(sphere.angle_grid(9)))
        between = sphere.interp_profile(profile, 1 - 2 * jnp.asarray(s) ** 2)
        explicit = sum(w[:, k:k + 1] * sphere.tangent_project(x, emb[k][None]) for k in range(3))
        return at_nodes, between, sphere.tangent_sum(x, w, emb), explicit

    at_nodes, between, fast, explicit = compute(jnp.asarray(profile))
    np.testing.assert_allclose(at_nodes, profile, rtol=1e-5)
    # linear in sin(θ/2) between the nodes
    np.testing.assert_allclose(between, np.interp(s, np.linspace(0, 1, 9), profile), rtol=1e-5)
    np.testing.assert_allclose(fast, explicit, atol=1e-6)
