"""Condorcet-winner identification: count invariants, a derived duel bound, δ-correctness.

Shapes, dtypes, jit/vmap and bad inputs are in the contract entry
(tests/contract/decision_dueling.py).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxsample.decision import PreferenceMatrix, identify_condorcet

# K = 4, CW = arm 2; the other three form a cycle, all pairs deterministic
_CYCLE = np.array([[0.5, 1.0, 0.0, 0.0],
                   [0.0, 0.5, 0.0, 1.0],
                   [1.0, 1.0, 0.5, 1.0],
                   [1.0, 0.0, 0.0, 0.5]])


def _first_count(delta, k, level):
    """Smallest N with r(N) < level (r decreases in N once log(4K²N²/δ) > 2)."""
    n = 1
    while math.sqrt(math.log(4 * k * k * n * n / delta) / (2 * n)) >= level:
        n += 1
    return n


@pytest.mark.parametrize("schedule", ["round", "single"])
def test_counts_are_consistent(schedule):
    """W + Wᵀ = N symmetric with zero diagonal, ΣN = 2·duels, the cap is exact; the lower
    bounds are ``q̂ − r(N)`` with the anytime radius ``r(N) = √(log(4K²N²/δ)/(2N))``."""
    prefs = PreferenceMatrix(jnp.asarray(0.5 + 0.3 * (_CYCLE - 0.5), jnp.float32))
    with pytest.warns(RuntimeWarning, match="no certified winner"):  # 37 duels certify none
        _, info = identify_condorcet(jax.random.key(3), prefs, delta=0.1, budget=37,
                                     schedule=schedule)
    wins = np.asarray(info.wins)
    counts = wins + wins.T
    assert np.all(np.diag(counts) == 0) and np.all(counts == counts.T)
    assert counts.sum() == 2 * int(info.num_duels)
    played = counts > 0
    n = np.maximum(counts, 1)
    radius = np.sqrt(np.log(4 * 4**2 * n**2 / 0.1) / (2 * n))
    np.testing.assert_allclose(np.asarray(info.lower)[played], (wins / n - radius)[played],
                               rtol=1e-5)
    assert np.all(np.isneginf(np.asarray(info.lower)[~played]))
    assert int(info.num_duels) == 37 and not bool(info.determined)
    if schedule == "single":
        assert int(info.num_rounds) == 37


def test_deterministic_instance_within_derived_bound():
    """q ∈ {0, 1}: the CW is returned within the derived number of duels.

    n* = min{N : r(N) < ½} duels certify a pair's loser; n₁ = min{N : r(N) < 1}. Full gap: a pair
    whose loser is alive holds ≤ n* − 1 duels before a round and gains ≤ 2 in it; after the
    loser's elimination only its winner may pick it, and only while r(N) ≥ 1 (every other option
    scores ≥ 1), so each pair ends with ≤ max(n* + 1, n₁) duels. Uniform: each alive arm meets the
    CW once per K − 1 rounds, so ≤ (K − 1)·n* rounds of ≤ K duels.
    """
    k, delta = 4, 0.05
    n_star, n_one = _first_count(delta, k, 0.5), _first_count(delta, k, 1.0)
    bounds = {"full_gap": k * (k - 1) // 2 * max(n_star + 1, n_one),
              "uniform": k * (k - 1) * n_star}
    prefs = PreferenceMatrix(jnp.asarray(_CYCLE, jnp.float32))
    for strategy, bound in bounds.items():
        for seed in (1, 2):
            winner, info = identify_condorcet(jax.random.key(seed), prefs, delta=delta,
                                              strategy=strategy)
            assert int(winner) == 2 and bool(info.determined)
            assert int(info.num_duels) <= bound, (strategy, int(info.num_duels), bound)


# CW = arm 0 with gaps 0.2-0.3; arm 1 beats 2 and 3; 2 beats 3
_Q4 = np.array([[0.5, 0.7, 0.75, 0.8],
                [0.3, 0.5, 0.8, 0.8],
                [0.25, 0.2, 0.5, 0.6],
                [0.2, 0.2, 0.4, 0.5]])


def test_correct_with_probability_at_least_one_minus_delta():
    """Errors over 1000 seeds ≤ the binomial(1000, δ) upper 0.1% quantile (one-sided test)."""
    delta, num_seeds = 0.2, 1000
    prefs = PreferenceMatrix(jnp.asarray(_Q4, jnp.float32))
    keys = jax.random.split(jax.random.key(7), num_seeds)
    winner, info = jax.vmap(lambda key: identify_condorcet(key, prefs, delta=delta,
                                                           strategy="full_gap"))(keys)
    errors = int(np.sum(np.asarray(winner) != 0))
    assert bool(jnp.all(info.determined))
    assert errors <= stats.binom.ppf(0.999, num_seeds, delta), errors


def test_degenerate_instance_behaves_like_winner_row():
    """All non-CW pairs ½: no other row is informative, so (on the good event, probability
    ≥ 1 − δ per run) every elimination is certified by the CW, as in the winner-row method, and
    full-gap cannot beat winner-row's duel count: its mean is ≥ winner-row's minus 4 standard
    errors of the difference."""
    q = np.full((4, 4), 0.5)
    q[0, 1:], q[1:, 0] = 0.75, 0.25
    prefs = PreferenceMatrix(jnp.asarray(q, jnp.float32))
    keys = jax.random.split(jax.random.key(11), 1000)  # the size above: one compilation
    duels = {}
    for strategy in ("full_gap", "winner_row"):
        winner, info = jax.vmap(lambda key, s=strategy: identify_condorcet(
            key, prefs, delta=0.2, strategy=s))(keys)
        by = np.asarray(info.eliminated_by)[:, 1:]
        good = np.mean(np.all(by == 0, axis=1))
        assert good >= 1 - 0.2 - 3 * math.sqrt(0.2 * 0.8 / 1000), (strategy, good)
        assert np.mean(np.asarray(winner) == 0) >= good
        duels[strategy] = np.asarray(info.num_duels, np.float64)
    diff = duels["full_gap"] - duels["winner_row"]
    assert diff.mean() >= -4 * diff.std(ddof=1) / math.sqrt(diff.size), diff.mean()


def test_budget_exhausted_is_reported_under_jit_and_warned_eagerly():
    """A budget far below the stopping time: no certified winner. Under ``jit`` the status says
    so (``determined`` False, ``solver`` not successful, its rounds counted); an eager call
    warns once; a certified run does not warn."""
    prefs = PreferenceMatrix(jnp.asarray(_Q4, jnp.float32))
    _, info = jax.jit(lambda key: identify_condorcet(key, prefs, budget=12))(jax.random.key(2))
    assert not bool(info.determined) and not bool(info.solver.converged)
    assert int(info.solver.num_iterations) == int(info.num_rounds) > 0
    with pytest.warns(RuntimeWarning, match="no certified winner"):
        identify_condorcet(jax.random.key(2), prefs, budget=12)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = identify_condorcet(jax.random.key(2), prefs)
    assert bool(info.determined) and bool(info.solver.converged)


@pytest.mark.parametrize("schedule", ["round", "single"])
def test_ask_tell_with_scripted_outcomes_equals_the_simulated_run(schedule):
    """The matrix run's outcomes are ``u_t < q_ij`` with ``u_t`` from ``fold_in(key, t)``; a
    Python ask/tell loop fed that scripted sequence reaches the same state bit for bit."""
    from jaxsample.decision import CondorcetIdentification

    prefs = PreferenceMatrix(jnp.asarray(_Q4, jnp.float32))
    key = jax.random.key(21)
    winner, info = identify_condorcet(key, prefs, delta=0.2, schedule=schedule)
    key_init, key_run = jax.random.split(key)
    m = CondorcetIdentification(4, delta=0.2, budget=100_000, schedule=schedule)
    state = m.init(key_init, jnp.float32)
    script = jax.jit(lambda t: jax.random.uniform(jax.random.fold_in(key_run, t), (),
                                                  jnp.float32))
    while not bool(m.done(state)):
        i, j = m.ask(key_run, state)
        state = m.tell(state, i, j, script(state.step) < _Q4[int(i), int(j)].astype(np.float32))
    winner_told, info_told = m.result(state)
    assert int(winner_told) == int(winner) and bool(info_told.determined)
    for a, b in zip(jax.tree.leaves(info_told), jax.tree.leaves(info), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_fractional_outcomes_certify_with_error_at_most_delta():
    """Outcomes are fractions (i's share ~ Beta with mean q_ij, as a judge's graded verdict):
    over 200 seeds, through ``run`` with a callable oracle under vmap, the certified winner is
    wrong at most as often as the binomial(200, δ) upper 0.1% quantile allows."""
    from jaxsample.decision import CondorcetIdentification

    delta, num_seeds = 0.2, 200
    q = jnp.asarray(_Q4, jnp.float32)

    def oracle(key, i, j):
        return jax.random.beta(key, 4 * q[i, j] + 1e-3, 4 * (1 - q[i, j]) + 1e-3)

    m = CondorcetIdentification(4, delta=delta, budget=50_000)
    keys = jax.random.split(jax.random.key(8), num_seeds)
    winner, info = jax.jit(jax.vmap(lambda k: m.run(k, oracle, dtype=jnp.float32)))(keys)
    assert bool(jnp.all(info.determined)) and not bool(jnp.any(info.nonfinite))
    errors = int(np.sum(np.asarray(winner) != 0))
    assert errors <= stats.binom.ppf(0.999, num_seeds, delta), errors
    wins = np.asarray(info.wins)
    assert np.any(wins != np.round(wins))  # the fractions were counted as fractions


def test_told_outcomes_are_checked():
    from jaxsample.decision import CondorcetIdentification

    m = CondorcetIdentification(3)
    state = m.init(jax.random.key(0))
    with pytest.raises(ValueError, match="outcome"):
        m.tell(state, 0, 1, 1.5)
    with pytest.raises(ValueError, match="different arms"):
        m.tell(state, 1, 1, True)
    with pytest.raises(ValueError, match="i must be an arm index"):
        m.tell(state, 3, 1, True)
    with pytest.raises(ValueError, match="oracle"):
        m.run(jax.random.key(0), lambda key, i, j: jnp.ones(2))
    told = jax.jit(lambda s, o: m.tell(s, 0, 1, o))(state, jnp.float32(jnp.nan))
    assert bool(told.nonfinite) and int(told.num_duels) == 0
