"""Posterior-sampling RL on finite-horizon tabular MDPs: PSRL and π0-PSRL.

**MDP.** ``S`` states, ``A`` actions, horizon ``H``, known rewards ``r_h(s, a) ∈ [0, 1]``, unknown
transitions ``P_h(·|s, a)``, initial law ``ρ``. Values by backward induction:
``V_{H+1} = 0``, ``Q_h(s, a) = r_h(s, a) + Σ_{s′} P_h(s′|s, a) V_{h+1}(s′)``, ``V_h = max_a Q_h``,
``π_h = argmax_a Q_h`` (first maximum).

**Posterior.** ``Dir(α₀ + n_h(s, a, ·))`` per (h, s, a), with counts shared across stages when the
MDP is homogeneous (``homogeneous=True``, the default).

**Episode k** (Osband, Russo & Van Roy 2013 for PSRL; π0-PSRL is reconstructed from its abstract,
its paper text was not available):

1. empirical MDP ``M̂``: ``P̂ = n/N`` on visited (s, a), the uniform law on unvisited ones;
   ``π̂`` its optimal policy;
2. sampled MDP ``M̃``: ``P̃ ∼ Dir(α₀ + n)``; ``π̃`` its optimal policy;
3. disagreement test ``D`` (``disagreement``): ``"any"`` — ``π̃ ≠ π̂`` at some (h, s) (literal, but
   states no played policy visits keep their prior, so ``D`` can stay true forever);
   ``"reachable"`` — ``π̃ ≠ π̂`` at an (h, s) with positive occupancy under ``π̂`` in ``M̂``;
   ``"value_gap"`` — ``V*_{M̃}(ρ) − V^{π̂}_{M̃}(ρ) > gap_threshold`` (robust to equivalent actions);
4. play: ``variant="psrl"`` always plays ``π̃`` (``D`` is still recorded); ``variant="pi0"`` plays
   ``π̂`` when ``D`` is false and otherwise the exploration policy: the fixed reference policy
   ``π0`` (``explore_policy="reference"``, the abstract's reading) or ``π̃``
   (``explore_policy="sampled"``, the alternative reading);
5. roll out in the true MDP and add the transitions to the counts.

**Regret, exactly.** ``regret_k = V*_1(ρ) − V^{π_k}_1(ρ)`` by exact policy evaluation in the true
MDP, so the per-episode regret carries no Monte Carlo noise (only the trajectory, hence the data,
is random).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_choice,
    check_hyperparameter,
    check_int,
    check_key,
    check_progress,
    check_simplex,
    is_concrete,
)
from jaxsample.kernels import resampling, tabular

__all__ = [
    "PSRLInfo",
    "TabularMDP",
    "run_psrl",
]

VARIANTS = ("psrl", "pi0")
EXPLORE_POLICIES = ("reference", "sampled")
DISAGREEMENTS = ("reachable", "any", "value_gap")


class TabularMDP(eqx.Module):
    """A finite-horizon tabular MDP with stage-dependent arrays.

    Validated when concrete: transitions are probabilities summing to 1 over the next state
    (to ``1e-5``), rewards lie in ``[0, 1]``, the initial law sums to 1.

    Attributes:
        transitions: ``(H, S, A, S)`` ``P_h(s′|s, a)``.
        rewards: ``(H, S, A)`` ``r_h(s, a) ∈ [0, 1]``.
        initial: ``(S,)`` initial state law ``ρ``.

    Example:
        >>> mdp = TabularMDP.riverswim(num_states=6, horizon=20)
        >>> mdp.transitions.shape, mdp.rewards.shape
        ((20, 6, 2, 6), (20, 6, 2))
    """

    transitions: jax.Array
    rewards: jax.Array
    initial: jax.Array

    def __init__(self, transitions, rewards, initial=None):
        transitions = check_array("transitions", transitions, ndim=4)
        h, s, a, s2 = transitions.shape
        if s2 != s:
            raise ValueError(f"transitions must have shape (H, S, A, S), got {transitions.shape}")
        # laws over the next state along the last axis
        transitions = check_simplex("transitions", transitions)
        rewards = check_array("rewards", rewards, shape=(h, s, a), dtype=transitions.dtype)
        if initial is None:
            initial = jnp.zeros((s,), transitions.dtype).at[0].set(1)
        initial = check_simplex("initial", initial, shape=(s,))
        if initial.dtype != transitions.dtype:
            raise TypeError(f"initial must have dtype {transitions.dtype}, got {initial.dtype}")
        if is_concrete(rewards):
            r = np.asarray(rewards, np.float64)
            if not np.all(np.isfinite(r)) or np.any(r < 0) or np.any(r > 1):
                raise ValueError("rewards must lie in [0, 1]")
        self.transitions = transitions
        self.rewards = rewards
        self.initial = initial

    @property
    def horizon(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_states(self) -> int:
        return self.transitions.shape[1]

    @property
    def num_actions(self) -> int:
        return self.transitions.shape[2]

    def backward_induction(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Optimal values, Q-values and a deterministic optimal policy by backward induction.

        Returns:
            ``(values, q, policy)``: ``(H, S)`` ``V*_h``, ``(H, S, A)`` ``Q*_h``, ``(H, S)``
            int32 ``π*_h(s)`` (the first maximising action).

        Example:
            >>> values, q, policy = TabularMDP.riverswim(horizon=20).backward_induction()
            >>> policy[0].tolist(), policy[-1].tolist()
            ([1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1])
        """
        return tabular.backward_induction(self.transitions, self.rewards)

    def evaluate_policy(self, policy) -> jax.Array:
        """Exact values ``V^π_h(s)`` ``(H, S)`` of a policy: ``(H, S)`` int actions
        (deterministic) or ``(H, S, A)`` / ``(S, A)`` action laws (stochastic); the start value
        is ``mdp.initial @ V[0]``.

        Example:
            >>> mdp = TabularMDP.riverswim(horizon=20)
            >>> left = jnp.zeros((20, 6), jnp.int32)
            >>> round(float(mdp.initial @ mdp.evaluate_policy(left)[0]), 3)
            0.1
        """
        return tabular.evaluate(self.transitions, self.rewards, self._action_laws(policy))

    def sample_trajectory(self, key: jax.Array, policy) -> tuple[jax.Array, jax.Array,
                                                                  jax.Array]:
        """One episode under ``policy`` (as in :meth:`evaluate_policy`).

        Returns:
            ``(states, actions, rewards)``: ``(H + 1,)`` int32, ``(H,)`` int32, ``(H,)``
            floating.
        """
        return _rollout(key, self.transitions, self.rewards, self.initial,
                        self._action_laws(policy))

    def _action_laws(self, policy):
        return _as_probs(policy, self.horizon, self.num_states, self.num_actions,
                         self.rewards.dtype)

    @staticmethod
    def riverswim(num_states: int = 6, horizon: int = 20, *, dtype=jnp.float32) -> TabularMDP:
        """RiverSwim (Strehl & Littman 2008), the variant of Osband et al. 2013.

        Actions 0 = left, 1 = right. Left moves left deterministically (state 0 stays). Right
        in an interior state: right 0.35, stay 0.6, left 0.05; in state 0: right 0.6, stay 0.4;
        in the last state: stay 0.6, left 0.4. Rewards 0.005 for (0, left) and 1 for (last,
        right). Start in state 0.
        """
        n = check_int("num_states", num_states, 2)
        horizon = check_int("horizon", horizon, 1)
        p = np.zeros((n, 2, n))
        for s in range(n):
            p[s, 0, max(s - 1, 0)] = 1.0
        p[0, 1, 0], p[0, 1, 1] = 0.4, 0.6
        for s in range(1, n - 1):
            p[s, 1, s - 1], p[s, 1, s], p[s, 1, s + 1] = 0.05, 0.6, 0.35
        p[n - 1, 1, n - 1], p[n - 1, 1, n - 2] = 0.6, 0.4
        r = np.zeros((n, 2))
        r[0, 0], r[n - 1, 1] = 0.005, 1.0
        return TabularMDP(jnp.asarray(np.broadcast_to(p, (horizon, *p.shape)), dtype),
                          jnp.asarray(np.broadcast_to(r, (horizon, *r.shape)), dtype))

    @staticmethod
    def random(key: jax.Array, num_states: int, num_actions: int, horizon: int, *,
               concentration: float = 1.0, dtype=jnp.float32) -> TabularMDP:
        """A random homogeneous MDP: ``P(·|s, a) ∼ Dir(concentration)``, ``r ∼ U(0, 1)``,
        start in state 0."""
        key = check_key("key", key)
        s = check_int("num_states", num_states, 1)
        a = check_int("num_actions", num_actions, 1)
        horizon = check_int("horizon", horizon, 1)
        key_p, key_r = jax.random.split(key)
        p = tabular.dirichlet(key_p, jnp.full((s, a, s), concentration, dtype))
        r = jax.random.uniform(key_r, (s, a), dtype)
        return TabularMDP(jnp.broadcast_to(p, (horizon, s, a, s)),
                          jnp.broadcast_to(r, (horizon, s, a)))


def _as_probs(policy, horizon, num_states, num_actions, dtype):
    """``(H, S)`` int actions or ``(H, S, A)``/``(S, A)`` action laws → ``(H, S, A)`` laws."""
    policy = jnp.asarray(policy)
    if jnp.issubdtype(policy.dtype, jnp.integer):
        return jax.nn.one_hot(policy, num_actions, dtype=dtype)
    return jnp.broadcast_to(policy.astype(dtype), (horizon, num_states, num_actions))


_backward = tabular.backward_induction
_evaluate = tabular.evaluate
_occupancy = tabular.occupancy


def _rollout(key, transitions, rewards, initial, probs):
    with jax.named_scope("rollout"):
        # all the episode's uniforms in one draw (each random call costs a compilation)
        horizon = transitions.shape[0]
        u = jax.random.uniform(key, (2 * horizon + 2,), transitions.dtype).reshape(horizon + 1, 2)
        start = resampling.inverse_cdf(initial, u[0, 0])

        def step(s, arrays):
            u_h, p, r, pi = arrays
            a = resampling.inverse_cdf(pi[s], u_h[0])
            s_next = resampling.inverse_cdf(p[s, a], u_h[1])
            return s_next, (s_next, a, r[s, a])

        _, (nxt, actions, rew) = jax.lax.scan(step, start, (u[1:], transitions, rewards, probs))
        return jnp.concatenate([start[None], nxt]), actions, rew


class PSRLInfo(NamedTuple):
    """Per-episode record of :func:`run_psrl` (and of the UCBVI baseline).

    Attributes:
        regret: ``(K,)`` exact expected regret ``V*_1(ρ) − V^{π_k}_1(ρ)`` of each episode.
        explored: ``(K,)`` bool, the disagreement test fired (for ``"pi0"``: an exploration
            episode; for ``"psrl"``: recorded only).
        optimal: ``(K,)`` bool, the played policy's value equals ``V*`` (to 1e-6·H relative).
        num_explore: int32 exploration episodes.
        blind: ``(K,)`` bool, an exploration episode that played ``π0`` while the test disagreed
            at a state where ``π0`` cannot play (zero state-action occupancy in ``M̂``) one of
            the two disputed actions ``π̃_h(s)``, ``π̂_h(s)``: the episode cannot gather the data
            that settles the test (always False for ``"psrl"`` and ``explore_policy="sampled"``,
            and for a ``π0`` that plays every action with positive probability).
        states: ``(K, H + 1)`` int32 trajectories (``(K, 0)`` unless ``store_trajectories``).
        actions: ``(K, H)`` int32 actions (``(K, 0)`` unless ``store_trajectories``).
        nonfinite: bool, a non-finite value appeared in a value or regret.
    """

    regret: jax.Array
    explored: jax.Array
    optimal: jax.Array
    num_explore: jax.Array
    blind: jax.Array
    states: jax.Array
    actions: jax.Array
    nonfinite: jax.Array


def _count_update(counts, states, actions, homogeneous):
    h = actions.shape[0]
    stage = jnp.zeros((h,), jnp.int32) if homogeneous else jnp.arange(h, dtype=jnp.int32)
    return counts.at[stage, states[:-1], actions, states[1:]].add(1)


def episode_outputs(mdp_arrays, v_star, probs_played, key, counts, homogeneous):
    """An episode's exact regret, its rollout and the updated counts (shared with the UCBVI
    baseline, :func:`jaxsample.decision.baselines.run_ucbvi`)."""
    transitions, rewards, initial = mdp_arrays
    value = initial @ _evaluate(transitions, rewards, probs_played)[0]
    regret = v_star - value
    states, actions, _ = _rollout(key, transitions, rewards, initial, probs_played)
    counts = _count_update(counts, states, actions, homogeneous)
    return regret, counts, states, actions


@functools.partial(jax.jit, static_argnames=("num_episodes", "variant", "explore_policy",
                                             "disagreement", "homogeneous",
                                             "store_trajectories", "progress"))
def _run_psrl(key, mdp_arrays, reference, prior, gap_threshold, initial_counts, num_episodes,
              variant, explore_policy, disagreement, homogeneous, store_trajectories,
              progress=None):
    transitions, rewards, initial = mdp_arrays
    horizon, s, a, _ = transitions.shape
    dtype = rewards.dtype
    prior = jnp.asarray(prior, dtype)
    gap_threshold = jnp.asarray(gap_threshold, dtype)
    v_star_all, _, _ = _backward(transitions, rewards)
    v_star = initial @ v_star_all[0]
    scale = jnp.asarray(1e-6 * horizon, dtype)

    def episode(counts, xs):
        index, key_k = xs
        with jax.named_scope("psrl_episode"):
            key_post, key_roll = jax.random.split(key_k)
            p_hat = tabular.stagewise(tabular.empirical_transitions(counts, dtype), horizon)
            _, _, pi_hat = _backward(p_hat, rewards)
            alpha = prior + counts.astype(dtype)
            p_tilde = tabular.stagewise(tabular.dirichlet(key_post, alpha), horizon)
            v_tilde, _, pi_tilde = _backward(p_tilde, rewards)
            hat_probs = jax.nn.one_hot(pi_hat, a, dtype=dtype)
            tilde_probs = jax.nn.one_hot(pi_tilde, a, dtype=dtype)
            differ = pi_tilde != pi_hat
            reached = differ & (_occupancy(p_hat, initial, hat_probs) > 0)
            if disagreement == "any":
                explore = jnp.any(differ)
            elif disagreement == "reachable":
                explore = jnp.any(reached)
            else:
                v_hat_in_tilde = initial @ _evaluate(p_tilde, rewards, hat_probs)[0]
                explore = initial @ v_tilde[0] - v_hat_in_tilde > gap_threshold
            blind = jnp.zeros((), bool)
            if variant == "psrl":
                played = tilde_probs
            else:
                explore_probs = reference if explore_policy == "reference" else tilde_probs
                played = jnp.where(explore, explore_probs, hat_probs)
                if explore_policy == "reference":
                    # π0's state-action occupancy in M̂ at both disputed actions
                    occ_ref = _occupancy(p_hat, initial, reference)[..., None] * reference
                    can_tilde = jnp.take_along_axis(occ_ref, pi_tilde[..., None], -1)[..., 0]
                    can_hat = jnp.take_along_axis(occ_ref, pi_hat[..., None], -1)[..., 0]
                    blind = explore & jnp.any(reached & ((can_tilde <= 0) | (can_hat <= 0)))
            regret, counts, states, actions = episode_outputs(
                mdp_arrays, v_star, played, key_roll, counts, homogeneous)
            if not store_trajectories:
                states, actions = states[:0], actions[:0]
            if progress is not None:
                progress.report(index + 1, num_episodes)
            return counts, (regret, explore, regret <= scale * jnp.maximum(v_star, 1),
                            blind, states, actions)

    keys = jax.random.split(key, num_episodes)
    counts, (regret, explored, optimal, blind, states, actions) = jax.lax.scan(
        episode, initial_counts, (jnp.arange(num_episodes, dtype=jnp.int32), keys))
    nonfinite = ~jnp.all(jnp.isfinite(regret)) | ~jnp.isfinite(v_star)
    return counts, PSRLInfo(regret, explored, optimal, jnp.sum(explored).astype(jnp.int32),
                            blind, states, actions, nonfinite)


def _warn_if_blind(info: PSRLInfo, *, stacklevel: int = 3) -> None:
    """One ``RuntimeWarning`` when an eager run's exploration stayed blind (``info.blind`` in
    the second half of the episodes); nothing under tracing (the flag stays in the Info)."""
    import warnings

    if not is_concrete(info.blind):
        return
    blind = np.asarray(info.blind)
    half = blind.shape[-1] // 2
    late = blind[..., half:]
    if not late.any():
        return
    cost = float(np.asarray(info.regret)[..., half:][late].mean())
    warnings.warn(
        f"π0-PSRL's exploration is blind in {int(late.sum())} of {late.size} episodes of the "
        "run's second half: the disagreement test fires at states where the reference policy "
        "cannot play one of the two disputed actions, so those episodes gather no data that "
        "can settle the test, which keeps firing, and the regret grows linearly at π0's own "
        f"gap V* − V^π0 (here {cost:.3g} per blind episode). Give a reference_policy that "
        "plays every action with positive probability, or explore_policy='sampled'.",
        RuntimeWarning, stacklevel=stacklevel)


def check_run_arguments(key, mdp, num_episodes, initial_counts, homogeneous, progress):
    """The checks of :func:`run_psrl` and the UCBVI baseline's shared arguments."""
    check_progress(progress)
    key = check_key("key", key)
    if not isinstance(mdp, TabularMDP):
        raise TypeError(f"mdp must be a TabularMDP, got {type(mdp).__name__}")
    num_episodes = check_int("num_episodes", num_episodes, 1)
    hc = 1 if homogeneous else mdp.horizon
    shape = (hc, mdp.num_states, mdp.num_actions, mdp.num_states)
    if initial_counts is None:
        initial_counts = jnp.zeros(shape, jnp.int32)
    else:
        initial_counts = check_array("initial_counts", initial_counts, shape=shape,
                                     kind="integer").astype(jnp.int32)
    return key, num_episodes, initial_counts


def run_psrl(key: jax.Array, mdp: TabularMDP, *, num_episodes: int, variant: str = "psrl",
             explore_policy: str = "reference", disagreement: str = "reachable",
             reference_policy=None, prior=1.0, gap_threshold=1e-6, homogeneous: bool = True,
             initial_counts=None, store_trajectories: bool = False, progress=None
             ) -> tuple[jax.Array, PSRLInfo]:
    """PSRL or π0-PSRL for ``num_episodes`` episodes on ``mdp``; exact per-episode regret.

    See the module docstring for the algorithm. The whole run is one ``lax.scan`` over episodes
    (``O(H·S²·A)`` per episode for each of ``M̂``, ``M̃`` and the evaluation); ``jax.vmap`` over
    keys runs many seeds at once.

    Args:
        key: PRNG key.
        mdp: the true :class:`TabularMDP` (rewards known to the agent, transitions not).
        num_episodes: K.
        variant: ``"psrl"`` (always play the sampled MDP's policy) or ``"pi0"``.
        explore_policy: for ``"pi0"``: ``"reference"`` (play ``π0`` when the test fires) or
            ``"sampled"`` (play ``π̃``).
        disagreement: ``"reachable"``, ``"any"`` or ``"value_gap"``.
        reference_policy: ``π0`` as ``(H, S)`` int actions or ``(S, A)``/``(H, S, A)`` action
            laws; None = uniformly random actions.
        prior: Dirichlet prior ``α₀ > 0`` per next state; traced.
        gap_threshold: ``ε`` of the ``"value_gap"`` test (``>= 0``); traced.
        homogeneous: share transition counts across stages (the MDP's transitions do not depend
            on h).
        initial_counts: ``(Hc, S, A, S)`` integer counts to start from (``Hc = 1`` when
            homogeneous, else H); None = zeros.
        store_trajectories: also return every episode's states and actions.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting episodes
            from inside the compiled scan.

    Returns:
        ``(counts, info)``: the ``(Hc, S, A, S)`` int32 final transition counts (``Hc = 1`` when
        homogeneous; pass them as ``initial_counts`` to continue learning) and a
        :class:`PSRLInfo`; the cumulative regret is ``jnp.cumsum(info.regret)``.

    Example:
        >>> import jax
        >>> mdp = TabularMDP.riverswim(horizon=10)
        >>> counts, info = run_psrl(jax.random.key(0), mdp, num_episodes=50, variant="pi0")
        >>> info.regret.shape, bool(info.regret.min() >= -1e-5)
        ((50,), True)
    """
    key, num_episodes, initial_counts = check_run_arguments(key, mdp, num_episodes,
                                                            initial_counts, homogeneous, progress)
    variant = check_choice("variant", variant, VARIANTS)
    explore_policy = check_choice("explore_policy", explore_policy, EXPLORE_POLICIES)
    disagreement = check_choice("disagreement", disagreement, DISAGREEMENTS)
    prior = check_hyperparameter("prior", prior)
    gap_threshold = check_hyperparameter("gap_threshold", gap_threshold, positive=False)
    h, s, a = mdp.horizon, mdp.num_states, mdp.num_actions
    dtype = mdp.rewards.dtype
    if reference_policy is None:
        reference = jnp.full((h, s, a), 1.0 / a, dtype)
    else:
        reference_policy = jnp.asarray(reference_policy)
        integer = jnp.issubdtype(reference_policy.dtype, jnp.integer)
        if reference_policy.shape not in (((h, s),) if integer else ((s, a), (h, s, a))):
            raise ValueError(f"reference_policy must have shape (H, S) (actions) or (S, A) / "
                             f"(H, S, A) (action laws), got {reference_policy.shape}")
        reference = _as_probs(reference_policy, h, s, a, dtype)
        if is_concrete(reference) and (np.any(np.asarray(reference) < 0) or np.max(
                np.abs(np.asarray(reference, np.float64).sum(-1) - 1)) > 1e-5):
            raise ValueError("reference_policy must hold action laws summing to 1")
    counts, info = _run_psrl(key, (mdp.transitions, mdp.rewards, mdp.initial), reference, prior,
                             gap_threshold, initial_counts, num_episodes, variant,
                             explore_policy, disagreement, bool(homogeneous),
                             bool(store_trajectories), progress)
    _warn_if_blind(info)
    return counts, info
