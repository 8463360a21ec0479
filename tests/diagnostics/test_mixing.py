"""Mixing diagnostics: SQRA generator structure, OU and Eyring–Kramers limits, MFPT, hitting times.

All exact checks run in float64 (the diagnostics need it; see the module docstring).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample.diagnostics.mixing import (
    exact_mode_weights,
    first_passage_steps,
    fp_generator,
    kramers_rate,
    mfpt,
    mode_weights,
    rate_matrix,
    spectral_gap,
)
from jaxsample.mcmc import mala

M = 701


def _grid(m=M, half_width=2.5):
    x = np.linspace(-half_width, half_width, m)
    return x, x[1] - x[0]


def _double_well(x, h):
    return h * (x**2 - 1) ** 2


def test_generator_structure(x64):
    x, dx = _grid(201)
    v = _double_well(x, 1.0) + 0.3 * x
    temperature = 0.3
    q = np.asarray(rate_matrix(v, temperature, dx)[0])
    log_pi = -v / temperature
    pi = np.exp(log_pi - np.logaddexp.reduce(log_pi))
    np.testing.assert_allclose(q.sum(axis=1), 0.0, atol=1e-9 * np.abs(q).max())
    np.testing.assert_allclose(pi @ q, 0.0, atol=1e-12 * np.abs(q).max())
    flux = pi[:, None] * q
    np.testing.assert_allclose(flux, flux.T, atol=1e-14 * np.abs(q).max())  # detailed balance
    (diag, off), info = fp_generator(v, temperature, dx)
    assert not bool(info.nonfinite)
    np.testing.assert_allclose(off, temperature / dx**2, rtol=1e-14)
    np.testing.assert_allclose(diag, np.diag(q), rtol=1e-13)
    s = np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)
    np.testing.assert_allclose(s @ np.sqrt(pi), 0.0, atol=1e-11 * np.abs(s).max())


def test_symmetric_double_well_eigenvector_is_antisymmetric(x64):
    x, dx = _grid(201)
    (diag, off), _ = fp_generator(_double_well(x, 1.0), 0.25, dx)
    s = np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)
    _, vectors = np.linalg.eigh(-s)
    first = vectors[:, 1]
    np.testing.assert_allclose(first, -first[::-1], atol=1e-10)
    # (the tails of √π·f underflow to round-off, so look where π has mass)
    left = np.sign(first[(x < -0.1) & (x > -1.6)])
    right = np.sign(first[(x > 0.1) & (x < 1.6)])
    assert np.all(left == left[0]) and np.all(right == -left[0])  # one sign change, at 0


def test_ou_gap_converges_at_second_order(x64):
    """−𝓛 for V = a x²/2 has eigenvalues n·a for every temperature: error O(Δx²)."""
    a, temperature = 1.5, 0.7
    errors = []
    for m in (121, 241):
        x = np.linspace(-6.0, 6.0, m)
        (diag, off), _ = fp_generator(0.5 * a * x**2, temperature, x[1] - x[0])
        errors.append(np.asarray(spectral_gap(diag, off, k=3)[0]) - a * np.arange(1, 4))
    ratio = errors[0] / errors[1]
    np.testing.assert_allclose(ratio, 4.0, rtol=0.02)  # halving Δx divides the error by 4
    assert np.max(np.abs(errors[1])) < 0.01 * a


def test_mfpt_solves_the_restricted_equation(x64):
    x, dx = _grid(301)
    v = 0.5 * (x - 2.5) ** 2  # monotone on the grid, minimum at the right edge
    q, _ = rate_matrix(v, 0.5, dx)
    target = x >= 2.0
    tau, info = mfpt(q, target)
    tau = np.asarray(tau)
    assert not bool(info.nonfinite)
    np.testing.assert_allclose((np.asarray(q) @ tau)[~target], -1.0, rtol=1e-9)
    np.testing.assert_array_equal(tau[target], 0.0)
    assert np.all(np.diff(tau[~target]) < 0)  # farther from the target takes longer


def test_eyring_kramers_limits(x64):
    """λ₁/(2k) → 1 and MFPT·k → 1 with O(T/h) corrections; log λ₁ has slope −h in 1/T.

    The relative correction is bounded by T/h here (its constant is ≈ 0.4 for this well), and
    it shrinks as h/T grows. (h/T = 20 is the float64 limit of the eigenvalue route on this
    grid: the gap 3.6e-9 against an absolute round-off of ~1e-13.)
    """
    x, dx = _grid()
    start = int(np.argmin(np.abs(x + 1)))
    gaps, ratios, passages = [], [], []
    h = 1.0
    temperatures = np.array([0.15, 0.1, 0.05])  # h/T = 6.7, 10, 20
    for temperature in temperatures:
        v = _double_well(x, h)
        (diag, off), _ = fp_generator(v, temperature, dx)
        gap = float(spectral_gap(diag, off)[0][0])
        k = float(kramers_rate(0.0, h, 8 * h, -4 * h, temperature)[0])
        tau = float(mfpt(rate_matrix(v, temperature, dx)[0], x >= 1.0)[0][start])
        gaps.append(gap)
        ratios.append(gap / (2 * k))
        passages.append(tau * k)
    corrections = temperatures / h
    assert np.all(np.abs(np.array(ratios) - 1) < corrections)
    assert np.all(np.abs(np.array(passages) - 1) < corrections)
    assert np.all(np.diff(np.abs(np.array(ratios) - 1)) < 0)
    assert np.all(np.diff(np.abs(np.array(passages) - 1)) < 0)
    slope = np.diff(np.log(gaps)) / np.diff(1 / temperatures)
    np.testing.assert_allclose(slope, -h, rtol=0.02)


def test_kramers_rate_in_two_dimensions_reduces_to_one(x64):
    """A separable 2-D saddle with a harmonic transverse direction gives the 1-D rate."""
    one, _ = kramers_rate(0.0, 2.0, 16.0, -8.0, 0.2)
    two, _ = kramers_rate(0.0, 2.0, np.diag([16.0, 3.0]), np.diag([-8.0, 3.0]), 0.2)
    np.testing.assert_allclose(two, one, rtol=1e-12)
    np.testing.assert_allclose(one, 2 * np.sqrt(2) * 2 / np.pi * np.exp(-10.0), rtol=1e-12)


def test_mala_hitting_times_match_mfpt(x64):
    """MALA (small steps) from the left well to x >= 1: mean hitting time = T·MFPT (z-test).

    MALA on log π = −V/T runs the diffusion with generator 𝓛/T, so its time is T times the
    Fokker–Planck time. Two-sided z at p ≈ 1e-3 with the step's O(√step) overshoot well below
    the Monte Carlo error (5 % at 400 chains).
    """
    h, temperature, step_size = 1.0, 1.0 / 3.0, 0.01
    x, dx = _grid()
    v = _double_well(x, h)
    times, _ = mfpt(rate_matrix(v, temperature, dx)[0], x >= 1.0)
    tau = float(times[int(np.argmin(np.abs(x + 1)))])
    expected_steps = temperature * tau / step_size
    alg = mala(lambda z: -h * jnp.sum((z**2 - 1) ** 2) / temperature, step_size=step_size)
    n = 400
    steps, info = first_passage_steps(
        jax.random.key(0), alg, -jnp.ones((n, 1)), lambda z: z[0] >= 1.0,
        max_steps=int(30 * expected_steps))
    assert not bool(info.censored.any()) and not bool(info.nonfinite.any())
    steps = np.asarray(steps, np.float64)
    z = (steps.mean() - expected_steps) / (steps.std(ddof=1) / np.sqrt(n))
    assert abs(z) < 3.3, (steps.mean(), expected_steps, z)


def test_mode_weights(x64):
    x, _ = _grid(2001)
    v = _double_well(x, 1.0) + 0.2 * x
    weights = np.asarray(exact_mode_weights(v, 0.2, x, np.array([0.0]))[0])
    log_pi = -v / 0.2
    pi = np.exp(log_pi - log_pi.max())
    np.testing.assert_allclose(weights[0], pi[x <= 0].sum() / pi.sum(), rtol=1e-12)
    assert weights[0] > 0.8
    counts, _ = mode_weights(jnp.array([0, 1, 1, 2, 1], jnp.int32), num_modes=3)
    np.testing.assert_allclose(counts, [0.2, 0.6, 0.2])


@pytest.mark.parametrize("bad", ["nan", "short"])
def test_bad_potentials(bad):
    v = np.array([0.0, np.nan, 1.0]) if bad == "nan" else np.array([1.0])
    with pytest.raises(ValueError, match="potential"):
        fp_generator(v, 0.1, 0.1)


def test_first_passage_reports_censored_chains():
    """A walk that cannot reach the target within max_steps: censored in the Info under jit,
    and one RuntimeWarning when eager."""
    import jaxsample

    walk = jaxsample.SamplingAlgorithm(
        init=lambda x: x, step=lambda k, x: (x + 0.01 * jax.random.normal(k, x.shape), {}))

    def passage(key):
        return first_passage_steps(key, walk, jnp.zeros((4, 1)), lambda x: x[0] > 5.0,
                                   max_steps=20)

    steps, info = jax.jit(passage)(jax.random.key(0))
    assert bool(info.censored.all()) and bool((steps == 20).all())
    with pytest.warns(RuntimeWarning, match="4 of 4 chains"):
        _, eager = passage(jax.random.key(0))
    assert bool(eager.censored.all())
