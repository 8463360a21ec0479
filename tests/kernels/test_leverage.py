"""Kernel invariants of ridge-leverage selection: the rank-one update against fresh scores."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from jaxsample.kernels import leverage as kl

_RIDGE = 0.05
_PICKS = np.array([3, 17, 8, 25, 0, 11, 29])


@jax.jit
def _run_updates(x, row_scale):
    """Running state after each pick of ``_PICKS``, beside scores computed afresh."""

    picks = jnp.asarray(_PICKS, jnp.int32)

    def step(state, t):
        j = picks[t]
        before = state.scores
        state, gain = kl.rank_one_update(state, x, j, row_scale=row_scale)
        taken = jnp.arange(_PICKS.size, dtype=jnp.int32) <= t  # the first t + 1 picks, then 0
        rows = jnp.where(taken[:, None], x[picks] * row_scale[picks, None], 0)
        fresh, inverse = kl.selection_scores(x, rows, _RIDGE, row_scale=row_scale)
        return state, (before, state.scores, state.gram_inverse, gain, fresh, inverse)

    state = kl.init_state(x, _RIDGE, row_scale=row_scale)
    state, trace = jax.lax.scan(step, state, jnp.arange(_PICKS.size, dtype=jnp.int32))
    return state.selected, trace


def test_running_scores_equal_fresh_scores_after_every_update(dtype):
    """s_i and A^{-1} after each Sherman–Morrison step equal fresh (Cholesky and float64) values.

    The running scores start at ``w_i²‖x_i‖²/λ`` and subtract from it, so their error is a few
    unit round-offs of that starting value: the tolerance is ``64·eps·max_i s_i(∅)``.
    """
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 5)) * rng.uniform(0.5, 2.0, size=(30, 1))
    scale = rng.uniform(0.5, 2.0, size=30)
    selected, trace = _run_updates(jnp.asarray(x, dtype), jnp.asarray(scale, dtype))
    before, scores, inverse, gains, fresh, fresh_inverse = (np.asarray(a, np.float64)
                                                            for a in trace)
    assert trace[1].dtype == dtype and trace[2].dtype == dtype
    rows = x * scale[:, None]
    atol = 64 * float(jnp.finfo(dtype).eps) * np.max(np.sum(rows**2, 1)) / _RIDGE
    for t, j in enumerate(_PICKS):
        chosen = rows[_PICKS[: t + 1]]
        exact_inverse = np.linalg.inv(_RIDGE * np.eye(5) + chosen.T @ chosen)
        exact = np.einsum("ij,jk,ik->i", rows, exact_inverse, rows)
        for value in (scores[t], fresh[t]):
            np.testing.assert_allclose(value, exact, atol=atol, rtol=0)
        for value in (inverse[t], fresh_inverse[t]):
            np.testing.assert_allclose(value, exact_inverse, atol=atol, rtol=0)
        assert np.all(scores[t] <= before[t] + atol) and np.all(scores[t] >= 0)
        np.testing.assert_allclose(gains[t], np.log1p(before[t][j]), atol=atol, rtol=0)
        np.testing.assert_allclose(scores[t][j], before[t][j] / (1 + before[t][j]), atol=atol,
                                   rtol=0)
    assert np.flatnonzero(np.asarray(selected)).tolist() == sorted(_PICKS.tolist())
    log_det = np.linalg.slogdet(_RIDGE * np.eye(5) + chosen.T @ chosen)[1]
    telescoped = 5 * np.log(_RIDGE) + np.sum(gains)
    np.testing.assert_allclose(telescoped, log_det, atol=_PICKS.size * atol, rtol=0)


def test_greedy_pick_ties_nan_and_selection():
    pick = jax.jit(kl.greedy_pick, static_argnames="tie_rtol")
    state = kl.LeverageState(jnp.eye(1), jnp.array([2.0, 5.0, 5.0 * (1 - 1e-7), 5.0, jnp.nan]),
                             jnp.array([False, False, False, False, False]))
    assert int(pick(state, tie_rtol=1e-6)) == 1  # lowest index among near-ties
    assert int(pick(state, tie_rtol=0.0)) == 1  # exact tie: still the lowest
    taken = state._replace(selected=jnp.array([False, True, False, True, False]))
    assert int(pick(taken, tie_rtol=1e-6)) == 2  # 2 ties 5 within rtol, 3 is taken
    assert int(pick(taken, tie_rtol=0.0)) == 2
    quality = jnp.array([4.0, 1.0, 1.0, 1.0, 1.0])  # 4 * (1 + 2) = 12 > 1 * (1 + 5)
    assert int(pick(state, quality=quality, tie_rtol=1e-6)) == 0
    nan_left = state._replace(selected=jnp.array([True, True, True, True, False]))
    assert int(pick(nan_left, tie_rtol=1e-6)) == 4  # NaN ranks last, never a repeat
    zero_quality = jnp.zeros(5)
    assert int(pick(taken, quality=zero_quality, tie_rtol=1e-6)) == 0


def test_sampled_pick_is_uniform_over_unselected_when_nothing_is_left():
    """All weights 0: uniform over the unselected rows (chi-square, p-value threshold 1e-3)."""
    state = kl.LeverageState(jnp.eye(1), jnp.array([0.0, 3.0, 0.0, 0.0, 0.0, 2.0]),
                             jnp.array([False, True, False, False, False, True]))
    draws = jax.jit(jax.vmap(lambda key: kl.sampled_pick(key, state)))(
        jax.random.split(jax.random.key(3), 4000))
    counts = np.bincount(np.asarray(draws), minlength=6)
    assert counts[1] == 0 and counts[5] == 0
    assert stats.chisquare(counts[[0, 2, 3, 4]]).pvalue > 1e-3


def test_spectral_entropy_orders():
    orders = (0.0, 1.0, 2.0, 0.5)

    @jax.jit
    def entropies(spectrum):
        fixed = jnp.stack([kl.spectral_entropy(spectrum, q) for q in orders])
        traced = jax.vmap(kl.spectral_entropy, (None, 0))(spectrum, jnp.asarray(orders))
        return fixed, traced, kl.spectral_entropy(spectrum, float("inf"))

    fixed, traced, infinite = entropies(jnp.array([0.5, 0.25, 0.25, 0.0, 1e-19]))
    p = np.array([0.5, 0.25, 0.25])
    expected = [np.log(3.0), -np.sum(p * np.log(p)), -np.log(np.sum(p**2)),
                2 * np.log(np.sum(np.sqrt(p)))]
    np.testing.assert_allclose(fixed, expected, rtol=1e-6)
    np.testing.assert_allclose(traced, expected, rtol=1e-6)
    np.testing.assert_allclose(infinite, np.log(2.0), rtol=1e-6)
