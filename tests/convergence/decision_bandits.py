"""Dueling bandits, PSRL and UCBVI (``jaxsample.decision``): what their budgets drive to a floor.

Condorcet identification (``budget``; ``identify_condorcet`` is ``CondorcetIdentification.run``
with a matrix oracle, so the entry covers both). The error is the probability that the returned arm
is not the Condorcet winner, estimated per seed from 40 vmapped runs on a K = 5 matrix the method's
tests do not use. A small budget ends undetermined and returns the best empirical row, often wrong;
once the budget covers the stopping time every run is certified, and the anytime radius bounds the
error by δ. So the floor is 0 and ``atol = δ = 0.05`` (the default): converged means "wrong at most
as often as certified".

PSRL and UCBVI (``num_episodes``). A regret minimiser converges when the policies it plays
approach the optimal one: the error is the exact per-episode regret ``V*₁(ρ) − V^{π_k}₁(ρ)``
(policy evaluation in the true MDP, no Monte Carlo) averaged over the last quarter of a run of K
episodes, and ``V*`` comes from value iteration (backward induction) on a random S = 4, A = 2,
H = 4 MDP that no test uses. The floor is 0; ``atol = 0.01·V*``: the late policies are within 1%
of optimal on average.

PSRL uses nothing of ``num_episodes`` but the number of episodes (its posterior and keys do not
depend on K), so the first K episodes of one run are a K-episode run in law: each seed runs the
largest budget once and each budget reads its own last quarter (one compilation, not three).
The environment path (``run_psrl_env``, rewards learned by default) is read the same way,
its played policies evaluated exactly in the MDP its simulator draws from. UCBVI's bonus holds
``log K``, so each budget is its own run.

UCBVI's default (``bonus_scale = 1``, the theory's constant) is a documented limit: the bonus
still steers the policy thousands of episodes in and the late regret is not monotone in K
(measured: 0.71, 0.074, 0.17, 0.16, 0.068 at K = 32 ... 8192 on this MDP, 4% of V* at 8192),
stated on docs/methods/bandits.md and reported by ``info.explored`` (the bonus still costs value
in the agent's empirical MDP).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from convergence import Entry, Limit

# a K = 5 instance, CW = arm 3; the other arms form a cycle with gaps 0.1-0.3
_Q = np.full((5, 5), 0.5)
_UPPER = {(0, 1): 0.7, (0, 2): 0.35, (0, 4): 0.6, (1, 2): 0.8, (1, 4): 0.4, (2, 4): 0.65}
for (i, j), q in _UPPER.items():
    _Q[i, j], _Q[j, i] = q, 1 - q
for j in (0, 1, 2, 4):
    _Q[3, j], _Q[j, 3] = 0.65 + 0.05 * (j % 2), 0.35 - 0.05 * (j % 2)
_RUNS = 40
_DELTA = 0.05  # identify_condorcet's default


def _dueling_error(budget, keys):
    from jaxsample import decision

    prefs = decision.PreferenceMatrix(jnp.asarray(_Q, jnp.float32))
    runs = jax.vmap(lambda k: jax.random.split(k, _RUNS))(keys).reshape(-1)
    winner, _ = _identify(runs, prefs.probs, budget)
    return np.mean(np.asarray(winner).reshape(len(keys), _RUNS) != 3, axis=1)


@jax.jit
def _identify(runs, probs, budget):
    from jaxsample import decision

    # the budget is traced: every budget shares this compilation
    return jax.vmap(lambda k: decision.identify_condorcet(k, probs, budget=budget))(runs)


def _mdp():
    from jaxsample.decision import TabularMDP

    return TabularMDP.random(jax.random.key(2026), 4, 2, 4)


@functools.cache
def _v_star() -> float:
    mdp = _mdp()
    values, _, _ = mdp.backward_induction()
    return float(mdp.initial @ values[0])


_PSRL_BUDGETS = (64, 256, 1024)


@functools.cache
def _psrl_regret(keys_bytes: bytes) -> np.ndarray:
    from jaxsample.decision import run_psrl

    keys = jax.random.wrap_key_data(jnp.asarray(np.frombuffer(keys_bytes, np.uint32)
                                                .reshape(-1, 2)))
    mdp = _mdp()
    _, info = jax.jit(jax.vmap(lambda k: run_psrl(k, mdp, num_episodes=_PSRL_BUDGETS[-1])))(keys)
    return np.asarray(info.regret, float)


@functools.cache
def _env_regret(keys_bytes: bytes) -> np.ndarray:
    from jaxsample.decision import run_psrl_env

    keys = jax.random.wrap_key_data(jnp.asarray(np.frombuffer(keys_bytes, np.uint32)
                                                .reshape(-1, 2)))
    mdp = _mdp()

    def env_step(key, s, a):
        return jax.random.categorical(key, jnp.log(mdp.transitions[0, s, a])), mdp.rewards[0, s, a]

    def one(key):
        _, info = run_psrl_env(key, env_step, num_states=4, num_actions=2, horizon=4,
                               num_episodes=_PSRL_BUDGETS[-1], store_policies=True)
        values = jax.vmap(lambda p: mdp.initial @ mdp.evaluate_policy(p)[0])(info.policies)
        return _v_star() - values

    return np.asarray(jax.jit(jax.vmap(one))(keys), float)


def _env_error(budget, keys):
    regret = _env_regret(np.asarray(jax.random.key_data(keys)).tobytes())
    return _last_quarter(regret, budget)


def _last_quarter(regret, budget):
    return regret[:, budget - budget // 4:budget].mean(axis=1)


def _psrl_error(budget, keys):
    regret = _psrl_regret(np.asarray(jax.random.key_data(keys)).tobytes())
    return _last_quarter(regret, budget)


@functools.cache
def _ucbvi(budget: int, keys_bytes: bytes):
    from jaxsample.decision import run_ucbvi

    keys = jax.random.wrap_key_data(jnp.asarray(np.frombuffer(keys_bytes, np.uint32)
                                                .reshape(-1, 2)))
    mdp = _mdp()
    _, info = jax.jit(jax.vmap(lambda k: run_ucbvi(k, mdp, num_episodes=budget)))(keys)
    return np.asarray(info.regret, float), np.asarray(info.explored)


_UCBVI_BUDGETS = (64, 256, 1024)


def _ucbvi_error(budget, keys):
    regret, _ = _ucbvi(budget, np.asarray(jax.random.key_data(keys)).tobytes())
    return _last_quarter(regret, budget)


def _ucbvi_flagged(keys) -> bool:
    budget = _UCBVI_BUDGETS[-1]
    _, explored = _ucbvi(budget, np.asarray(jax.random.key_data(keys)).tobytes())
    return bool(np.all(explored[:, budget - budget // 4:].any(axis=1)))


def _zeros(keys):
    return np.zeros(len(keys))


ENTRIES = [
    Entry(
        name="decision.dueling/five-arm",
        covers=("decision.identify_condorcet", "decision.CondorcetIdentification"),
        problem="K = 5, Condorcet winner arm 3 (gaps 0.15-0.2), the others a cycle; the error is "
                "P(winner != 3) over 40 runs per seed",
        knob="budget",
        budgets=(100, 400, 20_000),
        error=_dueling_error,
        floor=_zeros,
        floor_formula="0: a certified winner is wrong with probability <= delta; atol = delta = "
                      "0.05 (the default)",
        atol=_DELTA,
    ),
    Entry(
        name="decision.psrl/random-mdp",
        covers=("decision.run_psrl",),
        problem="random MDP S = 4, A = 2, H = 4 (Dir(1) transitions, U(0, 1) rewards); the error "
                "is the exact per-episode regret V* - V^pi_k over the run's last quarter, V* by "
                "backward induction",
        knob="num_episodes",
        budgets=_PSRL_BUDGETS,
        error=_psrl_error,
        floor=_zeros,
        floor_formula="0 (the optimal policy has zero regret); atol = 0.01 V*: the late "
                      "policies within 1% of optimal on average",
        atol=0.01 * _v_star(),
    ),
    Entry(
        name="decision.psrl_env/random-mdp-learned-rewards",
        covers=("decision.run_psrl_env",),
        problem="the PSRL entry's MDP as a simulator env_step(key, s, a), rewards unknown to "
                "the agent (the default: learned); the error is the played policies' exact "
                "regret in the true MDP over the run's last quarter",
        knob="num_episodes",
        budgets=_PSRL_BUDGETS,
        error=_env_error,
        floor=_zeros,
        floor_formula="0; atol = 0.01 V* (as the PSRL entry)",
        atol=0.01 * _v_star(),
    ),
    Entry(
        name="decision.ucbvi/random-mdp",
        covers=("decision.run_ucbvi",),
        problem="the PSRL entry's MDP and error, UCBVI with its default bonus_scale = 1",
        knob="num_episodes",
        budgets=_UCBVI_BUDGETS,
        error=_ucbvi_error,
        floor=_zeros,
        floor_formula="0; atol = 0.01 V*",
        atol=0.01 * _v_star(),
        limit=Limit("methods/bandits.md", "UCBVI's default bonus", _ucbvi_flagged),
    ),
]
