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
from jaxsample.kernels import tabular

__all__ = [
    "PSRLEnvInfo",
    "PSRLInfo",
    "TabularMDP",
    "run_psrl",
    "run_psrl_env",
]

VARIANTS = ("psrl", "pi0")
EXPLORE_POLICIES = ("reference", "sampled")
DISAGREEMENTS = ("reachable", "any", "value_gap")


class TabularMDP(eqx.Module):
    """A finite-horizon tabular MDP with stage-dependent arrays.

    Validated when concrete: transitions are probabilities summing to 1 over the next state
    (to ``1e-5``), rewards lie in ``[0, 1]``, the initial law sums to 1. A homogeneous MDP may be
    given as ``(S, A, S)`` transitions and ``(S, A)`` rewards with ``horizon=H`` (broadcast to
    the stage-wise arrays).

    Attributes:
        transitions: ``(H, S, A, S)`` ``P_h(s′|s, a)``.
        rewards: ``(H, S, A)`` ``r_h(s, a) ∈ [0, 1]``.
        initial: ``(S,)`` initial state law ``ρ``.

    Example:
        >>> mdp = TabularMDP.riverswim(num_states=6, horizon=20)
        >>> mdp.transitions.shape, mdp.rewards.shape
        ((20, 6, 2, 6), (20, 6, 2))
        >>> same = TabularMDP(mdp.transitions[0], mdp.rewards[0], horizon=20)
        >>> bool(jnp.all(same.transitions == mdp.transitions))
        True
    """

    transitions: jax.Array
    rewards: jax.Array
    initial: jax.Array

    def __init__(self, transitions, rewards, initial=None, *, horizon=None):
        transitions = check_array("transitions", transitions)
        if transitions.ndim == 3:
            if horizon is None:
                raise ValueError("horizon is needed with homogeneous (S, A, S) transitions")
            horizon = check_int("horizon", horizon, 1)
            transitions = jnp.broadcast_to(transitions, (horizon, *transitions.shape))
            rewards = check_array("rewards", rewards, shape=transitions.shape[1:3],
                                  dtype=transitions.dtype)
            rewards = jnp.broadcast_to(rewards, transitions.shape[:3])
        elif transitions.ndim != 4:
            raise ValueError(f"transitions must have shape (H, S, A, S) or, homogeneous, "
                             f"(S, A, S), got {transitions.shape}")
        elif horizon is not None and horizon != transitions.shape[0]:
            raise ValueError(f"horizon must match transitions.shape[0] = "
                             f"{transitions.shape[0]}, got {horizon}")
        h, s, a, s2 = transitions.shape
        if s2 != s:
            raise ValueError(f"transitions must have shape (H, S, A, S), got {transitions.shape}")
        # laws over the next state along the last axis
        transitions = check_simplex("transitions", transitions)
        rewards = check_array("rewards", rewards, shape=(h, s, a), dtype=transitions.dtype,
                              finite=True, lower=0, upper=1)
        if initial is None:
            initial = jnp.zeros((s,), transitions.dtype).at[0].set(1)
        initial = check_simplex("initial", initial, shape=(s,))
        if initial.dtype != transitions.dtype:
            raise TypeError(f"initial must have dtype {transitions.dtype}, got {initial.dtype}")
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


def _array_step(transitions, rewards):
    """The simulator of known arrays: ``step(key, h, s, a) -> (s′ ∼ P_h(·|s, a), r_h(s, a))``,
    the next state by ``jax.random.categorical(key, log P_h(·|s, a))``."""

    def step(key, h, s, a):
        return (jax.random.categorical(key, jnp.log(transitions[h, s, a])).astype(jnp.int32),
                rewards[h, s, a])

    return step


def _rollout_with(key, step_fn, initial, probs):
    """One episode of the action laws ``probs`` ``(H, S, A)`` through ``step_fn(key, h, s, a)``:
    ``(states (H + 1,), actions (H,), rewards (H,), bad)``; ``bad`` flags a next state out of
    range (clipped) or a non-finite reward (zeroed). Key ``h + 1`` of the episode's ``H + 1``
    drives stage h: its first half the action, its second the simulator."""
    with jax.named_scope("rollout"):
        horizon, num_states, _ = probs.shape
        keys = jax.random.split(key, horizon + 1)
        start = jax.random.categorical(keys[0], jnp.log(initial)).astype(jnp.int32)

        def step(carry, xs):
            s, bad = carry
            h, key_h, pi = xs
            key_a, key_s = jax.random.split(key_h)
            a = jax.random.categorical(key_a, jnp.log(pi[s])).astype(jnp.int32)
            s_next, r = step_fn(key_s, h, s, a)
            s_next = jnp.asarray(s_next).astype(jnp.int32)
            r = jnp.asarray(r).astype(probs.dtype)
            out = (s_next < 0) | (s_next >= num_states) | ~jnp.isfinite(r)
            s_next = jnp.clip(s_next, 0, num_states - 1)
            r = jnp.where(jnp.isfinite(r), r, 0)
            return (s_next, bad | out), (s_next, a, r)

        (_, bad), (nxt, actions, rew) = jax.lax.scan(
            step, (start, jnp.zeros((), bool)),
            (jnp.arange(horizon, dtype=jnp.int32), keys[1:], probs))
        return jnp.concatenate([start[None], nxt]), actions, rew, bad


def _rollout(key, transitions, rewards, initial, probs):
    states, actions, rew, _ = _rollout_with(key, _array_step(transitions, rewards), initial,
                                            probs)
    return states, actions, rew


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


def _engine(key, step_fn, initial, rewards, num_actions, reference, prior, gap_threshold,
            initial_counts, initial_reward_sums, truth, num_episodes, variant, explore_policy,
            disagreement, homogeneous, store_trajectories, store_policies, progress):
    """The episode loop shared by the array and the environment paths.

    ``rewards``: ``(H, S, A)`` known rewards, or None (learned: Beta(1 + Σr, 1 + n − Σr) per
    pair, its mean in ``M̂``, a draw in ``M̃``). ``truth``: the true ``(P, r, ρ)`` for the exact
    regret, or None (the regret is then zeros and unused).
    """
    horizon = reference.shape[0]
    a = num_actions
    dtype = initial.dtype
    prior = jnp.asarray(prior, dtype)
    gap_threshold = jnp.asarray(gap_threshold, dtype)
    if truth is not None:
        v_star_all, _, _ = _backward(truth[0], truth[1])
        v_star = truth[2] @ v_star_all[0]
    else:
        v_star = jnp.zeros((), dtype)
    scale = jnp.asarray(1e-6 * horizon, dtype)
    stage = (jnp.zeros((horizon,), jnp.int32) if homogeneous
             else jnp.arange(horizon, dtype=jnp.int32))

    def episode(carry, xs):
        counts, reward_sums, bad = carry
        index, key_k = xs
        with jax.named_scope("psrl_episode"):
            key_post, key_reward, key_roll = jax.random.split(key_k, 3)
            p_hat = tabular.stagewise(tabular.empirical_transitions(counts, dtype), horizon)
            if rewards is None:
                visits = tabular.stagewise(jnp.sum(counts, axis=-1), horizon).astype(dtype)
                sums = tabular.stagewise(reward_sums, horizon)
                r_hat = (1 + sums) / (2 + visits)
                beta = jnp.stack([1 + sums, 1 + jnp.maximum(visits - sums, 0)], axis=-1)
                r_tilde = tabular.dirichlet(key_reward, beta)[..., 0]
            else:
                r_hat = r_tilde = rewards
            _, _, pi_hat = _backward(p_hat, r_hat)
            alpha = prior + counts.astype(dtype)
            p_tilde = tabular.stagewise(tabular.dirichlet(key_post, alpha), horizon)
            v_tilde, _, pi_tilde = _backward(p_tilde, r_tilde)
            hat_probs = jax.nn.one_hot(pi_hat, a, dtype=dtype)
            tilde_probs = jax.nn.one_hot(pi_tilde, a, dtype=dtype)
            differ = pi_tilde != pi_hat
            reached = differ & (_occupancy(p_hat, initial, hat_probs) > 0)
            if disagreement == "any":
                explore = jnp.any(differ)
            elif disagreement == "reachable":
                explore = jnp.any(reached)
            else:
                v_hat_in_tilde = initial @ _evaluate(p_tilde, r_tilde, hat_probs)[0]
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
            states, actions, rew, bad_k = _rollout_with(key_roll, step_fn, initial, played)
            counts = _count_update(counts, states, actions, homogeneous)
            if rewards is None:
                reward_sums = reward_sums.at[stage, states[:-1], actions].add(rew)
            if truth is not None:
                regret = v_star - truth[2] @ _evaluate(truth[0], truth[1], played)[0]
            else:
                regret = jnp.zeros((), dtype)
            if not store_trajectories:
                states, actions = states[:0], actions[:0]
            policy = played if store_policies else played[:0]
            if progress is not None:
                progress.report(index + 1, num_episodes)
            return (counts, reward_sums, bad | bad_k), (
                regret, explore, regret <= scale * jnp.maximum(v_star, 1), blind,
                jnp.sum(rew), policy, states, actions)

    keys = jax.random.split(key, num_episodes)
    carry = (initial_counts, initial_reward_sums, jnp.zeros((), bool))
    (counts, reward_sums, bad), outputs = jax.lax.scan(
        episode, carry, (jnp.arange(num_episodes, dtype=jnp.int32), keys))
    return counts, reward_sums, bad, v_star, outputs


@functools.partial(jax.jit, static_argnames=("num_episodes", "variant", "explore_policy",
                                             "disagreement", "homogeneous",
                                             "store_trajectories", "progress"))
def _run_psrl(key, mdp_arrays, reference, prior, gap_threshold, initial_counts, num_episodes,
              variant, explore_policy, disagreement, homogeneous, store_trajectories,
              progress=None):
    transitions, rewards, initial = mdp_arrays
    counts, _, _, v_star, outputs = _engine(
        key, _array_step(transitions, rewards), initial, rewards, transitions.shape[2],
        reference, prior, gap_threshold, initial_counts, jnp.zeros(initial_counts.shape[:3],
                                                                   rewards.dtype),
        mdp_arrays, num_episodes, variant, explore_policy, disagreement, homogeneous,
        store_trajectories, False, progress)
    regret, explored, optimal, blind, _, _, states, actions = outputs
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
    regret = getattr(info, "regret", None)
    cost = ("" if regret is None else
            f" (here {float(np.asarray(regret)[..., half:][late].mean()):.3g} per blind episode)")
    warnings.warn(
        f"π0-PSRL's exploration is blind in {int(late.sum())} of {late.size} episodes of the "
        "run's second half: the disagreement test fires at states where the reference policy "
        "cannot play one of the two disputed actions, so those episodes gather no data that "
        "can settle the test, which keeps firing, and the regret grows linearly at π0's own "
        f"gap V* − V^π0{cost}. Give a reference_policy that "
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


def _reference_laws(reference_policy, h, s, a, dtype):
    """``π0`` as ``(H, S, A)`` action laws (uniform when None), checked."""
    if reference_policy is None:
        return jnp.full((h, s, a), 1.0 / a, dtype)
    reference_policy = jnp.asarray(reference_policy)
    integer = jnp.issubdtype(reference_policy.dtype, jnp.integer)
    if reference_policy.shape not in (((h, s),) if integer else ((s, a), (h, s, a))):
        raise ValueError(f"reference_policy must have shape (H, S) (actions) or (S, A) / "
                         f"(H, S, A) (action laws), got {reference_policy.shape}")
    # action laws along the last axis (one-hot for integer actions)
    return check_simplex("reference_policy", _as_probs(reference_policy, h, s, a, dtype))


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
    reference = _reference_laws(reference_policy, mdp.horizon, mdp.num_states,
                                mdp.num_actions, mdp.rewards.dtype)
    counts, info = _run_psrl(key, (mdp.transitions, mdp.rewards, mdp.initial), reference, prior,
                             gap_threshold, initial_counts, num_episodes, variant,
                             explore_policy, disagreement, bool(homogeneous),
                             bool(store_trajectories), progress)
    _warn_if_blind(info)
    return counts, info


class PSRLEnvInfo(NamedTuple):
    """Per-episode record of :func:`run_psrl_env` (no true MDP, so no exact regret: evaluate
    ``policies`` in a model of your own, e.g. ``TabularMDP.evaluate_policy``).

    Attributes:
        returns: ``(K,)`` the realised return ``Σ_h r_h`` of each episode.
        explored, blind, num_explore: as in :class:`PSRLInfo`.
        policies: ``(K, H, S, A)`` the played action laws (``(K, 0, S, A)`` unless
            ``store_policies``).
        states, actions: as in :class:`PSRLInfo` (``store_trajectories``).
        reward_sums: ``(Hc, S, A)`` the summed observed rewards per pair (zeros when the rewards
            were given); pass them back as ``initial_reward_sums`` to continue.
        nonfinite: bool, the environment returned a next state out of ``[0, S)`` (clipped) or a
            non-finite reward (counted as 0) under tracing.
    """

    returns: jax.Array
    explored: jax.Array
    blind: jax.Array
    num_explore: jax.Array
    policies: jax.Array
    states: jax.Array
    actions: jax.Array
    reward_sums: jax.Array
    nonfinite: jax.Array


@eqx.filter_jit
def _run_env(key, env_step, initial, rewards, num_actions, reference, prior, gap_threshold,
             initial_counts, initial_reward_sums, num_episodes, variant, explore_policy,
             disagreement, homogeneous, store_trajectories, store_policies, progress):
    def step_fn(k, h, s, a):
        return env_step(k, s, a)

    counts, reward_sums, bad, _, outputs = _engine(
        key, step_fn, initial, rewards, num_actions, reference, prior, gap_threshold,
        initial_counts, initial_reward_sums, None, num_episodes, variant, explore_policy,
        disagreement, homogeneous, store_trajectories, store_policies, progress)
    _, explored, _, blind, returns, policies, states, actions = outputs
    nonfinite = bad | ~jnp.all(jnp.isfinite(returns))
    return counts, PSRLEnvInfo(returns, explored, blind, jnp.sum(explored).astype(jnp.int32),
                               policies, states, actions, reward_sums, nonfinite)


def run_psrl_env(key: jax.Array, env_step, *, num_states: int, num_actions: int, horizon: int,
                 num_episodes: int, rewards=None, initial=None, variant: str = "psrl",
                 explore_policy: str = "reference", disagreement: str = "reachable",
                 reference_policy=None, prior=1.0, gap_threshold=1e-6, homogeneous: bool = True,
                 initial_counts=None, initial_reward_sums=None, store_policies: bool = False,
                 store_trajectories: bool = False, progress=None
                 ) -> tuple[jax.Array, PSRLEnvInfo]:
    """PSRL or π0-PSRL on a simulator: ``env_step(key, state, action) -> (next_state, reward)``.

    The agent is that of :func:`run_psrl` (module docstring); only the data come from the
    environment, a jittable function of a PRNG key, an int32 state and an int32 action returning
    an integer next state in ``[0, S)`` and a reward (homogeneous: the same law at every stage).
    Episodes last ``horizon`` steps from ``s₁ ∼ initial``. Rewards: given as ``(S, A)`` or
    ``(H, S, A)`` arrays in [0, 1], or learned (``rewards=None``): each observed reward must lie
    in [0, 1], and pair (s, a) with n visits and summed reward Σr is modelled by a
    Beta(1 + Σr, 1 + n − Σr) posterior (the Bernoulli conjugate, valid for [0, 1] rewards by the
    binarisation argument), whose mean enters ``M̂`` and a draw ``M̃``.

    A simulator of a :class:`TabularMDP` that draws ``s′`` by ``jax.random.categorical(key,
    log P(·|s, a))`` gives, with the same key and the known rewards, exactly the episodes of
    :func:`run_psrl` (which simulates its arrays so): the same policies, hence the same regret.

    Args:
        key: PRNG key.
        env_step: ``env_step(key, state, action) -> (next_state, reward)``, jittable; called
            once eagerly on ``(key, 0, 0)`` to check its output.
        num_states, num_actions, horizon: S, A, H.
        num_episodes: K.
        rewards: ``(S, A)`` / ``(H, S, A)`` known rewards in [0, 1], or None (learned).
        initial: ``(S,)`` initial law ρ (known to the agent); None: state 0.
        variant: as in :func:`run_psrl`.
        explore_policy: as in :func:`run_psrl`.
        disagreement: as in :func:`run_psrl`.
        reference_policy: as in :func:`run_psrl`.
        prior: as in :func:`run_psrl`.
        gap_threshold: as in :func:`run_psrl`.
        homogeneous: as in :func:`run_psrl`.
        initial_counts: as in :func:`run_psrl`.
        store_trajectories: as in :func:`run_psrl`.
        progress: as in :func:`run_psrl`.
        initial_reward_sums: ``(Hc, S, A)`` summed rewards to start from (learned rewards).
        store_policies: return every episode's played action laws.

    Returns:
        ``(counts, info)``: the final transition counts and a :class:`PSRLEnvInfo`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> mdp = TabularMDP.riverswim(num_states=4, horizon=8)
        >>> def env_step(key, s, a):                    # any simulator of (state, action)
        ...     s_next = jax.random.categorical(key, jnp.log(mdp.transitions[0, s, a]))
        ...     return s_next, mdp.rewards[0, s, a]
        >>> counts, info = run_psrl_env(jax.random.key(0), env_step, num_states=4,
        ...                             num_actions=2, horizon=8, num_episodes=20)
        >>> info.returns.shape, int(counts.sum()) == 20 * 8
        ((20,), True)
    """
    check_progress(progress)
    key = check_key("key", key)
    s = check_int("num_states", num_states, 1)
    a = check_int("num_actions", num_actions, 1)
    horizon = check_int("horizon", horizon, 1)
    num_episodes = check_int("num_episodes", num_episodes, 1)
    variant = check_choice("variant", variant, VARIANTS)
    explore_policy = check_choice("explore_policy", explore_policy, EXPLORE_POLICIES)
    disagreement = check_choice("disagreement", disagreement, DISAGREEMENTS)
    prior = check_hyperparameter("prior", prior)
    gap_threshold = check_hyperparameter("gap_threshold", gap_threshold, positive=False)
    if not callable(env_step):
        raise TypeError(f"env_step must be callable, got {type(env_step).__name__}")
    if initial is None:
        dtype = (jnp.asarray(rewards).dtype if rewards is not None
                 and jnp.issubdtype(jnp.asarray(rewards).dtype, jnp.floating)
                 else jnp.dtype(jnp.result_type(float)))
        initial = jnp.zeros((s,), dtype).at[0].set(1)
    initial = check_simplex("initial", initial, shape=(s,))
    dtype = initial.dtype
    if rewards is not None:
        rewards = check_array("rewards", rewards, dtype=dtype, finite=True, lower=0, upper=1)
        if rewards.shape == (s, a):
            rewards = jnp.broadcast_to(rewards, (horizon, s, a))
        elif rewards.shape != (horizon, s, a):
            raise ValueError(f"rewards must have shape (S, A) = {(s, a)} or (H, S, A) = "
                             f"{(horizon, s, a)}, got {rewards.shape}")
    _check_env_step(env_step, s, a, learned=rewards is None)
    hc = 1 if homogeneous else horizon
    shape = (hc, s, a, s)
    if initial_counts is None:
        initial_counts = jnp.zeros(shape, jnp.int32)
    else:
        initial_counts = check_array("initial_counts", initial_counts, shape=shape,
                                     kind="integer").astype(jnp.int32)
    if initial_reward_sums is None:
        initial_reward_sums = jnp.zeros(shape[:3], dtype)
    else:
        initial_reward_sums = check_array("initial_reward_sums", initial_reward_sums,
                                          shape=shape[:3], dtype=dtype)
    reference = _reference_laws(reference_policy, horizon, s, a, dtype)
    counts, info = _run_env(key, env_step, initial, rewards, a, reference, prior, gap_threshold,
                            initial_counts, initial_reward_sums, num_episodes, variant,
                            explore_policy, disagreement, bool(homogeneous),
                            bool(store_trajectories), bool(store_policies), progress)
    _warn_if_blind(info)
    return counts, info


def _check_env_step(env_step, num_states, num_actions, *, learned):
    """``env_step``'s first output, eagerly: a ``(next_state, reward)`` pair of scalars, an
    integer state in ``[0, S)`` and a finite reward (in [0, 1] when rewards are learned)."""
    expected = "env_step(key, state, action) must return (next_state, reward), two scalars"
    try:
        out = env_step(jax.random.key(0), jnp.int32(0), jnp.int32(0))
    except Exception as err:  # noqa: BLE001 - re-raised naming the argument
        raise ValueError(f"{expected}; it failed on (key, 0, 0): {err}") from err
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise ValueError(f"{expected}, got {type(out).__name__}")
    s_next, reward = jnp.asarray(out[0]), jnp.asarray(out[1])
    if s_next.ndim or reward.ndim:
        raise ValueError(f"{expected}, got shapes {s_next.shape} and {reward.shape}")
    if not jnp.issubdtype(s_next.dtype, jnp.integer):
        raise TypeError(f"env_step's next_state must be an integer state index, got "
                        f"{s_next.dtype}")
    if is_concrete(s_next) and not 0 <= int(s_next) < num_states:
        raise ValueError(f"env_step's next_state must lie in [0, {num_states}), got "
                         f"{int(s_next)}")
    if is_concrete(reward):
        r = float(reward)
        if not np.isfinite(r) or (learned and not 0.0 <= r <= 1.0):
            need = " and in [0, 1] (rewards are learned)" if learned else ""
            raise ValueError(f"env_step's reward must be finite{need}, got {r}")

