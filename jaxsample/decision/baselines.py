"""Baselines of :mod:`jaxsample.decision`: UCBVI for tabular episodic MDPs, GP-UCB on the sphere.

UCBVI with Hoeffding bonuses (Azar, Osband & Munos 2017): with ``N_h(s, a)`` visits and ``P̂`` the
empirical transitions (uniform on unvisited pairs),

``Q_h(s, a) = min(H − h + 1, r_h(s, a) + P̂ V_{h+1} + b(N))`` with the bonus
``b(N) = c·H·√(log(S·A·H·K/δ) / max(N, 1))``

(``b = H`` on unvisited pairs, so they are optimistic), and the agent plays the greedy policy of
``Q``. The dueling-bandit baselines (winner-row and uniform sampling) are strategies of
:func:`jaxsample.decision.identify_condorcet`.

GP-UCB on the sphere (:func:`gp_ucb_run`), the small exact-GP baseline of spherical BO, in JAX: an
RBF kernel on unit vectors, :math:`k(u, v) = \\exp(−\\|u − v\\|^2/(2ℓ^2))`, fixed ℓ and noise,
y standardised by the running mean and deviation; each iteration refits the exact posterior
(an N×N Cholesky, O(N³)) and maximises UCB over random candidates: half uniform directions, half
perturbations of the best point (angle ~ ℓ/2). The whole loop is one ``lax.scan`` over a
fixed-size buffer whose unused rows are masked out of the kernel matrix (identity block), so the
posterior over the used rows is exact. It is the cheap JAX stand-in for a GP-based BO library, not
a replacement for one (no hyper-parameter fit, no gradient-based acquisition optimiser).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxsample._checks import check_hyperparameter, is_concrete
from jaxsample.decision.psrl import (
    PSRLInfo,
    TabularMDP,
    check_run_arguments,
    episode_outputs,
)
from jaxsample.kernels import sphere, tabular

__all__ = ["gp_ucb_run", "run_ucbvi"]


@functools.partial(jax.jit, static_argnames=("num_episodes", "homogeneous",
                                             "store_trajectories", "progress"))
def _run_ucbvi(key, mdp_arrays, bonus_scale, delta, initial_counts, num_episodes, homogeneous,
               store_trajectories, progress=None):
    transitions, rewards, initial = mdp_arrays
    horizon, s, a, _ = transitions.shape
    dtype = rewards.dtype
    v_star_all, _, _ = tabular.backward_induction(transitions, rewards)
    v_star = initial @ v_star_all[0]
    log_term = jnp.log(jnp.asarray(s * a * horizon * num_episodes, dtype)
                       / jnp.asarray(delta, dtype))
    cap = jnp.arange(horizon, 0, -1).astype(dtype)[:, None, None]  # H − h + 1
    scale = jnp.asarray(1e-6 * horizon, dtype)

    def episode(counts, xs):
        index, key_k = xs
        with jax.named_scope("ucbvi_episode"):
            visits = tabular.stagewise(jnp.sum(counts, axis=-1), horizon).astype(dtype)
            p_hat = tabular.stagewise(tabular.empirical_transitions(counts, dtype), horizon)
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
            # the bonus still steers: the played policy loses value in the agent's own M̂
            v_hat, _, _ = tabular.backward_induction(p_hat, rewards)
            v_played = tabular.evaluate(p_hat, rewards, played)
            explored = initial @ (v_hat[0] - v_played[0]) > scale * jnp.maximum(v_star, 1)
            regret, counts, states, actions = episode_outputs(
                mdp_arrays, v_star, played, key_k, counts, homogeneous)
            if not store_trajectories:
                states, actions = states[:0], actions[:0]
            if progress is not None:
                progress.report(index + 1, num_episodes)
            return counts, (regret, explored, regret <= scale * jnp.maximum(v_star, 1), states,
                            actions)

    keys = jax.random.split(key, num_episodes)
    counts, (regret, explored, optimal, states, actions) = jax.lax.scan(
        episode, initial_counts, (jnp.arange(num_episodes, dtype=jnp.int32), keys))
    nonfinite = ~jnp.all(jnp.isfinite(regret)) | ~jnp.isfinite(v_star)
    return counts, PSRLInfo(regret, explored, optimal, jnp.sum(explored).astype(jnp.int32),
                            jnp.zeros((num_episodes,), bool), states, actions, nonfinite)


def run_ucbvi(key: jax.Array, mdp: TabularMDP, *, num_episodes: int, bonus_scale=1.0,
              delta=0.1, homogeneous: bool = True, initial_counts=None,
              store_trajectories: bool = False, progress=None) -> tuple[jax.Array, PSRLInfo]:
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
        progress: an optional meter, as in :func:`run_psrl`.

    Returns:
        ``(counts, info)`` as :func:`~jaxsample.decision.run_psrl`; ``info.explored`` marks the
        episodes whose bonus still steered the policy (its value in the empirical MDP ``M̂`` is
        below ``M̂``'s optimum by more than ``1e-6·H``), ``info.blind`` is all False. With the
        default ``bonus_scale = 1`` (the theory's constant) the bonus steers for about
        ``H²·log(SAHK/δ)/gap²`` visits per pair, and since it grows with ``log K`` the
        per-episode regret late in a run need not fall with K (docs/methods/bandits.md).

    Example:
        >>> import jax
        >>> counts, info = run_ucbvi(jax.random.key(0), TabularMDP.riverswim(horizon=10),
        ...                          num_episodes=20)
        >>> info.regret.shape
        (20,)
    """
    key, num_episodes, initial_counts = check_run_arguments(key, mdp, num_episodes,
                                                            initial_counts, homogeneous, progress)
    bonus_scale = check_hyperparameter("bonus_scale", bonus_scale, positive=False)
    delta = check_hyperparameter("delta", delta, maximum=1.0)
    if is_concrete(delta) and float(delta) >= 1.0:
        raise ValueError(f"delta must be in (0, 1), got {float(delta)}")
    return _run_ucbvi(key, (mdp.transitions, mdp.rewards, mdp.initial), bonus_scale, delta,
                      initial_counts, num_episodes, bool(homogeneous), bool(store_trajectories),
                      progress)


@functools.partial(jax.jit, static_argnames=("objective", "dim", "num_iterations", "num_initial",
                                             "num_candidates"))
def gp_ucb_run(key, objective, dim: int, num_iterations: int, *, num_initial: int = 10,
               num_candidates: int = 1024, lengthscale=0.5, noise=1e-2, beta=2.0):
    """GP-UCB on S^{D−1}; returns the ``(num_initial + num_iterations,)`` observed values.

    ``objective`` maps ``(q, D)`` unit vectors to ``(q,)`` values (float32).
    """
    with jax.named_scope("gp_ucb"):
        total = num_initial + num_iterations
        key_init, key_loop = jax.random.split(key)
        x0 = sphere.uniform(key_init, (num_initial,), dim)
        y0 = objective(x0)
        xs = jnp.zeros((total, dim)).at[:num_initial].set(x0)
        ys = jnp.zeros(total).at[:num_initial].set(y0)
        index = jnp.arange(total)

        def kernel(a, b):
            return jnp.exp(-(1 - a @ b.T) / lengthscale**2)

        def body(carry, inputs):
            xs, ys = carry
            step, step_key = inputs
            n = num_initial + step
            mask = (index < n).astype(xs.dtype)
            mean_y = jnp.sum(ys * mask) / n
            std_y = jnp.sqrt(jnp.sum(((ys - mean_y) * mask) ** 2) / n) + 1e-9
            z = (ys - mean_y) / std_y * mask
            gram = kernel(xs, xs) * mask[:, None] * mask[None, :]
            gram = gram + jnp.diag(noise * mask + (1 - mask))
            chol = jnp.linalg.cholesky(gram)
            alpha = jax.scipy.linalg.cho_solve((chol, True), z)
            key_uniform, key_local = jax.random.split(step_key)
            best = xs[jnp.argmax(jnp.where(mask > 0, ys, -jnp.inf))]
            half = num_candidates // 2
            uniform = sphere.uniform(key_uniform, (num_candidates - half,), dim)
            local = sphere.retract(best[None] + lengthscale / 2 / jnp.sqrt(dim)
                                   * sphere.normal(key_local, (half, dim)))
            candidates = jnp.concatenate([uniform, local])
            cross = kernel(candidates, xs) * mask[None, :]
            mean = cross @ alpha
            v = jax.scipy.linalg.solve_triangular(chol, cross.T, lower=True)
            var = jnp.maximum(1 - jnp.sum(v * v, axis=0), 1e-12)
            pick = candidates[jnp.argmax(mean + beta * jnp.sqrt(var))]
            value = objective(pick[None])[0]
            return (xs.at[n].set(pick), ys.at[n].set(value)), value

        inputs = (jnp.arange(num_iterations), jax.random.split(key_loop, num_iterations))
        _, values = jax.lax.scan(body, (xs, ys), inputs)
        return jnp.concatenate([y0, values])
