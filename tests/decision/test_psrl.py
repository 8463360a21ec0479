"""Tabular MDP kernels and (π0-)PSRL: brute force, exact evaluation, regret and count invariants.

Shapes, dtypes, jit/vmap and bad inputs are in the contract entry
(tests/contract/decision_psrl.py).
"""

import io
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

import jaxsample
from jaxsample.decision import TabularMDP, run_psrl, run_psrl_env, run_ucbvi
from jaxsample.kernels.tabular import dirichlet

_EPISODES = 6  # with S=3, A=2, H=4 the configurations below share the contract's compilations


def _small_mdp():
    return TabularMDP.random(jax.random.key(5), 3, 2, 3)


def test_backward_induction_equals_brute_force():
    """All 2^(3·3) = 512 deterministic non-stationary policies of an S=3, A=2, H=3 MDP."""
    policies = jnp.asarray(list(itertools.product((0, 1), repeat=9)), jnp.int32).reshape(-1, 3, 3)

    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute(policies):
        mdp = _small_mdp()
        values, q, policy = mdp.backward_induction()
        all_values = jax.vmap(mdp.evaluate_policy)(policies)
        return values, q, mdp.evaluate_policy(policy), all_values

    values, q, greedy_values, all_values = jax.device_get(compute(policies))
    np.testing.assert_allclose(np.max(all_values[:, 0], axis=0), values[0], rtol=1e-6)
    np.testing.assert_allclose(greedy_values, values, rtol=1e-6)
    np.testing.assert_allclose(np.max(q, axis=-1), values, rtol=1e-6)


def test_exact_evaluation_equals_monte_carlo():
    """Mean return of 4000 rollouts under the uniform policy within 4 standard errors."""
    @jax.jit
    def compute(key):
        mdp = TabularMDP.riverswim(num_states=4, horizon=8)
        uniform = jnp.full((4, 2), 0.5, jnp.float32)
        keys = jax.random.split(key, 4000)
        _, _, rewards = jax.vmap(lambda key: mdp.sample_trajectory(key, uniform))(keys)
        return mdp.initial @ mdp.evaluate_policy(uniform)[0], rewards

    exact, rewards = compute(jax.random.key(2))
    exact = float(exact)
    returns = np.asarray(rewards, np.float64).sum(axis=1)
    assert abs(returns.mean() - exact) <= 4 * returns.std(ddof=1) / math.sqrt(returns.size)


def test_dirichlet_moments():
    """Mean and covariance of Dir(0.3, 1, 5) from 20000 draws within 4 standard errors."""
    alpha = np.array([0.3, 1.0, 5.0])
    draws = np.asarray(jax.jit(dirichlet)(jax.random.key(4), jnp.broadcast_to(
        jnp.asarray(alpha, jnp.float32), (20000, 3))), np.float64)
    a0 = alpha.sum()
    mean = alpha / a0
    cov = (np.diag(mean) - np.outer(mean, mean)) / (a0 + 1)
    se = np.sqrt(np.diag(cov) / draws.shape[0])
    assert np.all(np.abs(draws.mean(0) - mean) <= 4 * se)
    centred = draws - mean
    products = centred[:, :, None] * centred[:, None, :]
    se_cov = products.std(0, ddof=1) / math.sqrt(draws.shape[0])
    assert np.all(np.abs(products.mean(0) - cov) <= 4 * se_cov + 1e-12)


def test_riverswim_optimal_policy_is_non_stationary():
    """H = 20, S = 6. Derived: from state s at stage h (0-based) the far reward needs
    5 − s right moves, so when h + 5 − s > H − 1 it is out of reach and left (0.005 in state 0,
    or a tie at 0 broken to the first action) is optimal; at the first stage right is optimal in
    every state; and V*₁(0) beats always-left's 20·0.005 = 0.1."""
    @jax.jit
    def compute():
        mdp = TabularMDP.riverswim(num_states=6, horizon=20)
        values, _, policy = mdp.backward_induction()
        return values, policy, mdp.evaluate_policy(jnp.zeros((20, 6), jnp.int32))

    values, policy, left = jax.device_get(compute())
    h, s = np.meshgrid(np.arange(20), np.arange(6), indexing="ij")
    unreachable = h + 5 - s > 19
    assert np.all(policy[unreachable] == 0)
    assert np.all(policy[0] == 1)
    assert np.any(policy[0] != policy[-1])
    np.testing.assert_allclose(float(left[0, 0]), 0.1, rtol=1e-5)
    assert float(values[0, 0]) > float(left[0, 0])


def _indifferent_mdp():
    """Rewards and transitions independent of the action: every policy is optimal."""
    base = TabularMDP.random(jax.random.key(9), 3, 2, 4)  # the shapes of the RiverSwim below
    p = jnp.broadcast_to(base.transitions[:, :, :1], base.transitions.shape)
    r = jnp.broadcast_to(base.rewards[:, :, :1], base.rewards.shape)
    return TabularMDP(p, r)


def test_all_actions_optimal_gives_zero_regret():
    mdp = jax.jit(_indifferent_mdp)()  # one compilation, not an eager op loop
    key = jax.random.key(0)
    runs = [run_psrl(key, mdp, num_episodes=_EPISODES, variant="psrl"),
            run_psrl(key, mdp, num_episodes=_EPISODES, variant="pi0", disagreement="value_gap"),
            run_psrl(key, mdp, num_episodes=_EPISODES, variant="pi0", store_trajectories=True),
            run_ucbvi(key, mdp, num_episodes=_EPISODES)]
    for _, info in runs:
        assert np.max(np.abs(np.asarray(info.regret))) <= 1e-5
        assert np.all(np.asarray(info.optimal))


def test_counts_grow_by_exactly_the_trajectory():
    mdp = TabularMDP.riverswim(num_states=3, horizon=4)
    start = jax.random.randint(jax.random.key(1), (1, 3, 2, 3), 0, 5)
    meter = jaxsample.TextProgress(every=1, file=io.StringIO())
    counts, info = run_psrl(jax.random.key(3), mdp, num_episodes=_EPISODES, variant="pi0",
                            initial_counts=start, store_trajectories=True, progress=meter)
    jax.effects_barrier()
    assert meter.steps_reported == list(range(1, _EPISODES + 1))  # one report per episode
    states, actions = np.asarray(info.states), np.asarray(info.actions)
    expected = np.asarray(start).copy()
    for k in range(_EPISODES):
        for h in range(4):
            expected[0, states[k, h], actions[k, h], states[k, h + 1]] += 1
    np.testing.assert_array_equal(np.asarray(counts), expected)
    assert np.all(states[:, 0] == 0)


def test_huge_counts_stop_disagreement():
    """Counts ≈ 10⁷·P at the true transitions: π̂ = π* and the test never fires; with no data
    it fires (so the assertion can fail)."""
    mdp = TabularMDP.riverswim(num_states=3, horizon=4)
    huge = jnp.round(1e7 * mdp.transitions[:1]).astype(jnp.int32)
    _, informed = run_psrl(jax.random.key(3), mdp, num_episodes=_EPISODES, variant="pi0",
                           initial_counts=huge, store_trajectories=True)
    assert not bool(jnp.any(informed.explored)) and bool(jnp.all(informed.optimal))
    _, blank = run_psrl(jax.random.key(3), mdp, num_episodes=_EPISODES, variant="pi0",
                        store_trajectories=True)
    assert bool(jnp.any(blank.explored))


def test_blind_exploration_with_a_non_covering_reference_is_flagged_and_warned():
    """π0 = always-left on RiverSwim never plays 'right', so exploration episodes cannot settle
    a disagreement about it: every exploration episode is blind (under jit: the Info flag), an
    eager run warns once, and its regret is π0's own gap in every blind episode. A uniform π0
    plays every action: never blind, no warning."""
    import warnings

    import pytest

    mdp = TabularMDP.riverswim(num_states=3, horizon=4)
    left = jnp.zeros((4, 3), jnp.int32)
    _, info = jax.jit(lambda key: run_psrl(key, mdp, num_episodes=_EPISODES, variant="pi0",
                                           reference_policy=left))(jax.random.key(3))
    blind, explored = np.asarray(info.blind), np.asarray(info.explored)
    assert blind[_EPISODES // 2:].any() and np.all(blind <= explored)
    v_star = float(mdp.initial @ mdp.backward_induction()[0][0])
    v_left = float(mdp.initial @ mdp.evaluate_policy(left)[0])
    np.testing.assert_allclose(np.asarray(info.regret)[blind], v_star - v_left, rtol=1e-5)
    with pytest.warns(RuntimeWarning, match="blind"):
        run_psrl(jax.random.key(3), mdp, num_episodes=_EPISODES, variant="pi0",
                 reference_policy=left)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, covered = run_psrl(jax.random.key(3), mdp, num_episodes=_EPISODES, variant="pi0")
    assert not np.any(np.asarray(covered.blind)) and np.any(np.asarray(covered.explored))


def test_ucbvi_reports_when_its_bonus_steers():
    """UCBVI's ``explored``: the bonus makes the played policy lose value in the empirical MDP.
    Without data the bonus decides everything (flagged); with ~10⁷·P counts and a zero bonus
    scale the greedy policy is played (never flagged)."""
    mdp = TabularMDP.riverswim(num_states=3, horizon=4)
    _, blank = run_ucbvi(jax.random.key(0), mdp, num_episodes=_EPISODES)
    assert bool(np.asarray(blank.explored)[0]) and int(blank.num_explore) >= 1
    huge = jnp.round(1e7 * mdp.transitions[:1]).astype(jnp.int32)
    _, informed = run_ucbvi(jax.random.key(0), mdp, num_episodes=_EPISODES, initial_counts=huge,
                            bonus_scale=0.0)
    assert not np.any(np.asarray(informed.explored)) and int(informed.num_explore) == 0


def _simulator(mdp):
    """A simulator of a homogeneous TabularMDP, as a user with a model would write it."""
    def env_step(key, s, a):
        return jax.random.categorical(key, jnp.log(mdp.transitions[0, s, a])), mdp.rewards[0, s, a]

    return env_step


def test_simulator_of_a_tabular_mdp_gives_the_array_paths_regret_curve():
    """The simulator built from a TabularMDP (given as 3-D homogeneous arrays) with its known
    rewards gives, key for key, the array path's policies: their exact regret curve equals
    run_psrl's, for PSRL and for π0-PSRL."""
    base = TabularMDP.riverswim(num_states=3, horizon=4)
    mdp = TabularMDP(base.transitions[0], base.rewards[0], horizon=4)
    np.testing.assert_array_equal(np.asarray(mdp.transitions), np.asarray(base.transitions))
    v_star = float(mdp.initial @ mdp.backward_induction()[0][0])
    for variant in ("psrl", "pi0"):
        _, arrays = run_psrl(jax.random.key(4), mdp, num_episodes=_EPISODES, variant=variant)
        counts, env = run_psrl_env(jax.random.key(4), _simulator(mdp), num_states=3,
                                   num_actions=2, horizon=4, num_episodes=_EPISODES,
                                   rewards=mdp.rewards[0], variant=variant, store_policies=True)
        values = jax.vmap(lambda p: mdp.initial @ mdp.evaluate_policy(p)[0])(env.policies)
        np.testing.assert_allclose(v_star - np.asarray(values), np.asarray(arrays.regret),
                                   atol=1e-6)
        np.testing.assert_array_equal(np.asarray(env.explored), np.asarray(arrays.explored))
        assert int(counts.sum()) == _EPISODES * 4 and not bool(env.nonfinite)


def test_learned_rewards_are_the_observed_sums():
    """With rewards=None, reward_sums are the sums of the rewards observed on each pair (from
    the stored trajectories), and a simulator's bad outputs are refused eagerly."""
    import pytest

    mdp = TabularMDP.riverswim(num_states=3, horizon=4)
    counts, info = run_psrl_env(jax.random.key(6), _simulator(mdp), num_states=3, num_actions=2,
                                horizon=4, num_episodes=_EPISODES, store_trajectories=True)
    states, actions = np.asarray(info.states), np.asarray(info.actions)
    r = np.asarray(mdp.rewards[0])
    expected = np.zeros((1, 3, 2))
    np.add.at(expected[0], (states[:, :-1], actions), r[states[:, :-1], actions])
    np.testing.assert_allclose(np.asarray(info.reward_sums), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(info.returns), r[states[:, :-1], actions].sum(1),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="next_state must lie"):
        run_psrl_env(jax.random.key(0), lambda k, s, a: (jnp.int32(7), 0.5), num_states=3,
                     num_actions=2, horizon=4, num_episodes=2)
    with pytest.raises(ValueError, match="reward must be finite and in"):
        run_psrl_env(jax.random.key(0), lambda k, s, a: (s, jnp.float32(2.0)), num_states=3,
                     num_actions=2, horizon=4, num_episodes=2)
    with pytest.raises(TypeError, match="next_state must be an integer"):
        run_psrl_env(jax.random.key(0), lambda k, s, a: (0.5, 0.5), num_states=3,
                     num_actions=2, horizon=4, num_episodes=2)
