"""Contract entries: PSRL and π0-PSRL on tabular MDPs (``jaxsample.decision.psrl``), and the
UCBVI baseline on the same MDP."""

import jax
import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import decision


def _mdp(dtype):
    return decision.TabularMDP.riverswim(num_states=3, horizon=4, dtype=dtype)


def _run(dtype):
    mdp = _mdp(dtype)
    return lambda key: decision.run_psrl(key, mdp, num_episodes=6, variant="pi0",
                                        disagreement="value_gap")


def _run_threshold(dtype):
    mdp = _mdp(dtype)
    return lambda key, h: decision.run_psrl(key, mdp, num_episodes=6, variant="pi0",
                                            disagreement="value_gap", gap_threshold=h)


def _ucbvi(dtype):
    mdp = _mdp(dtype)
    return lambda key: decision.run_ucbvi(key, mdp, num_episodes=6)


def _ucbvi_bonus(dtype):
    mdp = _mdp(dtype)
    return lambda key, h: decision.run_ucbvi(key, mdp, num_episodes=6, bonus_scale=h)


def _env(dtype, gap=1e-6):
    mdp = _mdp(dtype)

    def env_step(key, s, a):
        return jax.random.categorical(key, jnp.log(mdp.transitions[0, s, a])), mdp.rewards[0, s, a]

    def fn(key, gap=gap):
        return decision.run_psrl_env(key, env_step, num_states=3, num_actions=2, horizon=4,
                                     num_episodes=6, initial=mdp.initial, variant="pi0",
                                     disagreement="value_gap", gap_threshold=gap)

    return fn


def _env_threshold(dtype):
    return lambda key, h: _env(dtype)(key, gap=h)


def _step(key, s, a):
    return s, jnp.float32(0.5)


_P = np.full((2, 2, 2, 2), 0.5)
_R = np.full((2, 2, 2), 0.5)

ENTRIES = [
    Entry(
        name="decision.psrl",
        module="jaxsample.decision.psrl",
        build=_run,
        covers=("decision.run_psrl",),
        hyper=_run_threshold,
        hyper_values=(1e-6, 0.05),
        bad_inputs=(
            BadInput(lambda: decision.TabularMDP(_P * 1.1, _R), ValueError, "transitions"),
            BadInput(lambda: decision.TabularMDP(_P, _R + 0.6), ValueError, "rewards"),
            BadInput(lambda: decision.TabularMDP(_P, _R[:1]), ValueError, "rewards"),
            BadInput(lambda: decision.run_psrl(KEY, decision.TabularMDP(_P, _R), num_episodes=0),
                     ValueError, "num_episodes"),
            BadInput(lambda: decision.run_psrl(KEY, decision.TabularMDP(_P, _R), num_episodes=3,
                                               variant="opsrl"), ValueError, "variant"),
            BadInput(lambda: decision.run_psrl(KEY, decision.TabularMDP(_P, _R), num_episodes=3,
                                               disagreement="some"), ValueError, "disagreement"),
            BadInput(lambda: decision.run_psrl(KEY, decision.TabularMDP(_P, _R), num_episodes=3,
                                               reference_policy=np.ones((2, 3))), ValueError,
                     "reference_policy"),
            BadInput(lambda: decision.run_psrl(KEY, "riverswim", num_episodes=3), TypeError, "mdp"),
        ),
        note="run_psrl(key, mdp, *, num_episodes, variant, explore_policy, disagreement, "
             "reference_policy) -> (counts, PSRLInfo) with exact per-episode regret; "
             "gap_threshold (the value-gap test's ε) is traced; UCBVI (baselines) shares "
             "PSRLInfo and is exercised in tests/decision/test_psrl.py",
    ),
    Entry(
        name="decision.psrl/ucbvi",
        module="jaxsample.decision.psrl",
        build=_ucbvi,
        covers=("decision.run_ucbvi",),
        hyper=_ucbvi_bonus,
        hyper_values=(0.5, 1.0),
        bad_inputs=(
            BadInput(lambda: decision.run_ucbvi(KEY, decision.TabularMDP(_P, _R),
                                                num_episodes=0), ValueError, "num_episodes"),
            BadInput(lambda: decision.run_ucbvi(None, decision.TabularMDP(_P, _R),
                                                num_episodes=2), TypeError, "key"),
            BadInput(lambda: decision.run_ucbvi(KEY, decision.TabularMDP(_P, _R), num_episodes=2,
                                                bonus_scale=-1.0), ValueError, "bonus_scale"),
        ),
        note="run_ucbvi(key, mdp, *, num_episodes) -> (counts, PSRLInfo), 6 episodes on the "
             "PSRL entry's 3-state RiverSwim; the bonus scale is traced",
    ),
    Entry(
        name="decision.psrl/env",
        module="jaxsample.decision.psrl",
        build=_env,
        covers=("decision.run_psrl_env",),
        hyper=_env_threshold,
        hyper_values=(1e-6, 0.05),
        bad_inputs=(
            BadInput(lambda: decision.run_psrl_env(KEY, "env", num_states=2, num_actions=2,
                                                   horizon=2, num_episodes=2), TypeError,
                     "env_step"),
            BadInput(lambda: decision.run_psrl_env(KEY, lambda k, s, a: s, num_states=2,
                                                   num_actions=2, horizon=2, num_episodes=2),
                     ValueError, "env_step"),
            BadInput(lambda: decision.run_psrl_env(KEY, lambda k, s, a: (s, jnp.nan),
                                                   num_states=2, num_actions=2, horizon=2,
                                                   num_episodes=2), ValueError, "reward"),
            BadInput(lambda: decision.run_psrl_env(KEY, _step, num_states=2, num_actions=2,
                                                   horizon=2, num_episodes=0), ValueError,
                     "num_episodes"),
            BadInput(lambda: decision.run_psrl_env(KEY, _step, num_states=2, num_actions=2,
                                                   horizon=2, num_episodes=2,
                                                   rewards=np.ones((3, 2), np.float32)),
                     ValueError, "rewards"),
            BadInput(lambda: decision.run_psrl_env(KEY, _step, num_states=2, num_actions=2,
                                                   horizon=2, num_episodes=2,
                                                   initial=np.array([0.3, 0.3])), ValueError,
                     "initial"),
            BadInput(lambda: decision.TabularMDP(_P[0], _R[0]), ValueError, "horizon"),
        ),
        note="run_psrl_env(key, env_step, *, num_states, num_actions, horizon, num_episodes, "
             "rewards=None (learned), initial, ...) -> (counts, PSRLEnvInfo); the simulator of "
             "the PSRL entry's RiverSwim, learned rewards; gap_threshold traced; equality with "
             "the array path in tests/decision/test_psrl.py",
    ),
]
