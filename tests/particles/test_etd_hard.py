"""ETD's switch for hard posteriors (``jaxsample.particles.ETD_HARD``) at d = 100.

The claim (``bench/results_etd.md``): with ``ETD_HARD`` and ``N ≥ 2d`` particles ETD is calibrated
at ``d ≈ 100`` where its defaults are only flagged. Tested here on an ill-conditioned rotated
Gaussian (condition number 10², d = 100, N = 256, started from N(0, I)), through the covariance
of the cloud in the target's exact whitening (``y = L⁻¹x`` with ``LLᵀ = Σ``: ``cov(y) = I``).

Error budget. ETD's particles are not independent draws: resampling duplicates about half of
them each step (measured: ~120 distinct of 256 before the mutation moves) and the mutation
moves decorrelate them only in part, so the bounds are those of ``N_eff = N/4`` independent
draws, at z = 4 (two-sided p ≈ 6e-5 each):

- the mean variance ratio ``tr cov(y)/d`` has sd ``√(2/(N_eff d))`` under independence;
- the mean squared offset ``‖ȳ‖²/d`` has mean ``1/N_eff`` and sd ``√(2/d)/N_eff``;
- the full covariance error ``‖cov(y) − I‖_F²/d`` has mean ``(d + 1)/N_eff`` under
  independence (Wishart); the bound is twice that. It sees an error in a few stiff directions
  that the mean variance ratio averages away.
"""

import jax
import jax.numpy as jnp
import numpy as np
from _xla import compiled_for_run_time

import jaxsample
from jaxsample.particles import ETD_HARD

D, N, STEPS = 100, 256, 150
N_EFF = N / 4
Z = 4.0


def _target():
    rng = np.random.default_rng(0)
    q, r = np.linalg.qr(rng.standard_normal((D, D)))
    rotation = q * np.sign(np.diag(r))
    cov = (rotation * np.logspace(-1.0, 1.0, D)) @ rotation.T
    cov = 0.5 * (cov + cov.T)
    precision = np.linalg.inv(cov)
    return cov, precision


def test_hard_switch_is_calibrated_on_an_ill_conditioned_gaussian_d100():
    cov, precision = _target()
    p = jnp.asarray(precision, jnp.float32)
    alg = jaxsample.etd(lambda x: -0.5 * x @ p @ x, score_fn="autodiff", **ETD_HARD)
    state = alg.init(jax.random.normal(jax.random.key(0), (N, D)))

    def go(key):
        final, trace = jaxsample.run(key, alg, state, STEPS)
        return final.positions, trace.nonfinite

    keys = jax.random.key(1)
    positions, nonfinite = compiled_for_run_time(go, keys)(keys)
    assert not bool(jnp.any(nonfinite[STEPS // 2:]))
    whiten = np.linalg.inv(np.linalg.cholesky(cov))
    y = np.asarray(positions, np.float64) @ whiten.T
    centred = y - y.mean(0)
    sample_cov = centred.T @ centred / N
    variance_ratio = np.trace(sample_cov) / D
    assert abs(variance_ratio - 1) < Z * np.sqrt(2 / (N_EFF * D)), variance_ratio
    offset = np.sum(y.mean(0) ** 2) / D
    assert offset < 1 / N_EFF + Z * np.sqrt(2 / D) / N_EFF, offset
    frobenius = np.sum((sample_cov - np.eye(D)) ** 2) / D
    assert frobenius < 2 * (D + 1) / N_EFF, frobenius


def test_hard_switch_is_a_read_only_mapping_of_etd_arguments():
    import inspect

    parameters = inspect.signature(jaxsample.etd).parameters
    assert set(ETD_HARD) <= set(parameters)
    try:
        ETD_HARD["mutation"] = None
    except TypeError:
        pass
    else:  # pragma: no cover - the failure this guards against
        raise AssertionError("ETD_HARD must be read-only")
