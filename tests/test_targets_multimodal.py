"""The multimodal target family: normalisers, mode weights and exact draws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from jaxsample.targets import GMM9, GMM9Equal, ManyWell, MoG40, TiltedDoubleWell


def _draws_and_modes(target, key, num):
    """Exact draws and their mode labels in one jitted call (not eager op by op)."""
    def draw(key):
        x = target.sample(key, num)
        return x, target.assign_mode(x)
    return jax.device_get(jax.jit(draw)(key))


def test_tilted_double_well(x64):
    target = TiltedDoubleWell(barrier=1.0, tilt=0.3, temperature=0.2)
    log_z = target.log_normalizer
    density = lambda x: np.exp(-target._potential_np(x) / 0.2 - log_z)  # noqa: E731
    total, _ = integrate.quad(density, -4, 4, points=[target.saddle], limit=200)
    logdensity = jax.jit(lambda v: target.logdensity(v))(jnp.array([0.7]))
    np.testing.assert_allclose(np.exp(logdensity), density(0.7), rtol=1e-12)
    left, _ = integrate.quad(density, -4, target.saddle, limit=200)
    assert total == pytest.approx(1.0, abs=1e-8)
    np.testing.assert_allclose(target.mode_weights, [left, 1 - left], atol=1e-8)
    derivatives = jax.jit(lambda z: (jax.grad(target.potential)(z),
                                     jax.grad(jax.grad(target.potential))(z)))
    for point, curvature in zip((*target.minima, target.saddle), target.hessians, strict=True):
        grad, second = derivatives(point)
        assert abs(float(grad)) < 1e-10
        np.testing.assert_allclose(second, curvature)
    x, modes = _draws_and_modes(target, jax.random.key(0), 20000)
    counts = np.bincount(np.asarray(modes), minlength=2)
    _, p_value = stats.chisquare(counts, 20000 * np.asarray(target.mode_weights))
    assert p_value > 1e-3
    cdf = lambda z: integrate.quad(density, -4, z, limit=200)[0]  # noqa: E731
    grid = np.linspace(-1.6, 1.4, 7)
    empirical = np.mean(np.asarray(x)[:, 0][:, None] <= grid[None, :], axis=0)
    exact = np.array([cdf(g) for g in grid])
    # DKW bound at p = 1e-3: sup |F_n − F| <= sqrt(log(2/p) / 2n)
    assert np.max(np.abs(empirical - exact)) < np.sqrt(np.log(2e3) / (2 * 20000))


def test_many_well(x64):
    target = ManyWell(dim=4)
    one, _ = integrate.quad(lambda a: np.exp(-a**4 + 6 * a**2 + 0.5 * a), -6, 6)
    np.testing.assert_allclose(target.log_normalizer, 2 * (np.log(one) + 0.5 * np.log(2 * np.pi)),
                               rtol=1e-10)
    right, _ = integrate.quad(lambda a: np.exp(-a**4 + 6 * a**2 + 0.5 * a), target.saddle, 6)
    np.testing.assert_allclose(target.well_weights[1], right / one, rtol=1e-8)
    weights = np.asarray(target.mode_weights)
    assert weights.shape == (4,) and weights.sum() == pytest.approx(1.0, abs=1e-12)
    x, modes = _draws_and_modes(target, jax.random.key(1), 20000)
    counts = np.bincount(np.asarray(modes), minlength=4)
    _, p_value = stats.chisquare(counts, 20000 * weights)
    assert p_value > 1e-3
    # second coordinates are standard normal: variance 1 within its sampling error
    second = np.asarray(x)[:, 1::2]
    assert abs(second.var() - 1) < 4 * np.sqrt(2 / second.size)
    score, grad = jax.jit(lambda z: (target.score(z), jax.grad(target.logdensity)(z)))(x[0])
    np.testing.assert_allclose(score, grad)


def test_mixtures_mode_weights():
    mog = MoG40()
    np.testing.assert_allclose(mog.mode_weights, 1 / 40)
    assert np.all(np.abs(np.asarray(mog.mixture.means)) <= 40)
    for target in (GMM9(), GMM9Equal()):
        weights = np.asarray(target.mode_weights)
        _, modes = _draws_and_modes(target, jax.random.key(2), 9000)
        counts = np.bincount(np.asarray(modes), minlength=weights.shape[0])
        _, p_value = stats.chisquare(counts, 9000 * weights)
        assert p_value > 1e-3
    np.testing.assert_allclose(GMM9Equal().mode_weights, 1 / 9, rtol=1e-6)


def test_gmm9_is_the_benchmark_setting():
    """The paper's GMM9: covariance 0.5477222 I, its unequal weights, grid {-5, 0, 5}^2; the
    draws' covariance matches the closed form within 4 Monte Carlo standard errors."""
    target = GMM9()
    np.testing.assert_allclose(target.mixture.covs, 0.5477222 * np.eye(2)[None].repeat(9, 0),
                               rtol=1e-6)
    paper = np.array([0.1277, 0.0553, 0.2590, 0.0973, 0.0416, 0.0241, 0.1662, 0.0185, 0.2102])
    np.testing.assert_allclose(target.mode_weights, paper / paper.sum(), rtol=1e-6)
    np.testing.assert_allclose(target.mixture.means[2], [-5.0, 5.0])
    x = np.asarray(jax.jit(lambda key: target.sample(key, 20000))(jax.random.key(3)), np.float64)
    centred = x - np.asarray(target.mean)
    products = centred[:, :, None] * centred[:, None, :]
    error = products.mean(0) - np.asarray(target.cov)
    standard_error = products.std(0) / np.sqrt(len(x))
    assert np.all(np.abs(error) < 4 * standard_error)


def test_bad_arguments():
    with pytest.raises(ValueError, match="tilt"):
        TiltedDoubleWell(barrier=1.0, tilt=2.0)
    with pytest.raises(ValueError, match="temperature"):
        TiltedDoubleWell(temperature=0.0)
    with pytest.raises(ValueError, match="dim"):
        ManyWell(dim=3)
