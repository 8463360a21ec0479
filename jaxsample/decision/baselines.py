"""Baselines of :mod:`jaxsample.decision`: UCBVI for tabular episodic MDPs.

UCBVI with Hoeffding bonuses (Azar, Osband & Munos 2017): with ``N_h(s, a)`` visits and ``P̂`` the
empirical transitions (uniform on unvisited pairs),

``Q_h(s, a) = min(H − h + 1, r_h(s, a) + P̂ V_{h+1} + b(N))`` with the bonus
``b(N) = c·H·√(log(S·A·H·K/δ) / max(N, 1))``

(``b = H`` on unvisited pairs, so they are optimistic), and the agent plays the greedy policy of
``Q``. The dueling-bandit baselines (winner-row and uniform sampling) are strategies of
:func:`jaxsample.decision.identify_condorcet`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxsample._checks import check_hyperparameter, is_concrete
from jaxsample.decision.psrl import (
    PSRLInfo,
    TabularMDP,
    _backward,
    _check_common,
    _empirical,
    _episode_outputs,
    _stages,
)

__all__ = ["run_ucbvi"]


@functools.partial(jax.jit, static_argnames=("num_episodes", "homogeneous",
                                             "store_trajectories"))
def _run_ucbvi(key, mdp_arrays, bonus_scale, delta, initial_counts, num_episodes, homogeneous,
               store_trajectories):
    transitions, rewards, initial = mdp_arrays
    horizon, s, a, _ = transitions.shape
    dtype = rewards.dtype
    v_star_all, _, _ = _backward(transitions, rewards)
    v_star = initial @ v_star_all[0]
    log_term = jnp.log(jnp.asarray(s * a * horizon * num_episodes, dtype)
                       / jnp.asarray(delta, dtype))
    cap = jnp.arange(horizon, 0, -1).astype(dtype)[:, None, None]  # H − h + 1
    scale = jnp.asarray(1e-6 * horizon, dtype)

    def episode(counts, key_k):
        with jax.named_scope("ucbvi_episode"):
            visits = _stages(jnp.sum(counts, axis=-1), horizon).astype(dtype)
            p_hat = _stages(_empirical(counts, dtype), horizon)
            bonus = jnp.where(visits > 0, jnp.asarray(bonus_scale, dtype) * horizon
                              * jnp.sqrt(log_term / jnp.maximum(visits, 1)),
                              jnp.asarray(horizon, dtype))

            def step(v_next, arrays):
                p, r, b, c = arrays
                q = jnp.minimum(c, r + p @ v_next + b)
                return jnp.max(q, axis=-1), jnp.argmax(q, axis=-1).astype(jnp.int32)

            _, policy = jax.lax.scan(step, jnp.zeros((s,), dtype), (p_hat, rewards, bonus, cap),
                                     reverse=True)
            played = jax.nn.one_hot(policy, a, dtype=dtype)
            regret, counts, states, actions = _episode_outputs(
                mdp_arrays, v_star, played, key_k, counts, homogeneous)
            if not store_trajectories:
                states, actions = states[:0], actions[:0]
            return counts, (regret, regret <= scale * jnp.maximum(v_star, 1), states, actions)

    keys = jax.random.split(key, num_episodes)
    counts, (regret, optimal, states, actions) = jax.lax.scan(episode, initial_counts, keys)
    nonfinite = ~jnp.all(jnp.isfinite(regret)) | ~jnp.isfinite(v_star)
    explored = jnp.zeros((num_episodes,), bool)
    return counts, PSRLInfo(regret, explored, optimal, jnp.zeros((), jnp.int32), states, actions,
                            nonfinite)


def run_ucbvi(key: jax.Array, mdp: TabularMDP, *, num_episodes: int, bonus_scale=1.0,
              delta=0.1, homogeneous: bool = True, initial_counts=None,
              store_trajectories: bool = False) -> tuple[jax.Array, PSRLInfo]:
    """UCBVI-Hoeffding for ``num_episodes`` episodes; the same record as :func:`run_psrl`.

    Args:
        key: PRNG key.
        mdp: the true :class:`~jaxsample.decision.TabularMDP`.
        num_episodes: K.
        bonus_scale: ``c`` in the bonus; traced. The theoretical constant is conservative on
            small MDPs; ``c < 1`` explores less.
        delta: confidence in (0, 1); traced.
        homogeneous: share counts across stages.
        initial_counts: as in :func:`run_psrl`.
        store_trajectories: as in :func:`run_psrl`.

    Returns:
        ``(counts, info)`` as :func:`~jaxsample.decision.run_psrl` (``info.explored`` all False,
        ``info.num_explore`` 0).

    Example:
        >>> import jax
        >>> counts, info = run_ucbvi(jax.random.key(0), TabularMDP.riverswim(horizon=10),
        ...                          num_episodes=20)
        >>> info.regret.shape
        (20,)
    """
    key, num_episodes, initial_counts = _check_common(key, mdp, num_episodes, initial_counts,
                                                      homogeneous)
    bonus_scale = check_hyperparameter("bonus_scale", bonus_scale, positive=False)
    delta = check_hyperparameter("delta", delta, maximum=1.0)
    if is_concrete(delta) and float(delta) >= 1.0:
        raise ValueError(f"delta must be in (0, 1), got {float(delta)}")
    return _run_ucbvi(key, (mdp.transitions, mdp.rewards, mdp.initial), bonus_scale, delta,
                      initial_counts, num_episodes, bool(homogeneous), bool(store_trajectories))
