"""Condorcet-winner identification in dueling bandits with the full gap matrix.

K arms; a duel ``(i, j)`` returns "i wins" with probability ``q_ij`` and ``q_ji = 1 − q_ij``. The
Condorcet winner (CW) ``c`` beats every other arm: ``q_cj > ½`` for all ``j ≠ c``. The only
assumption is that a strict CW exists (Saad, Thuot & Verzelen, *The Sampling Complexity of
Condorcet Winner Identification in Dueling Bandits*, arXiv 2603.15189). Only the paper's abstract
was available; the procedure below is an elimination scheme consistent with it that uses the whole
gap matrix ``Δ_ij = q_ij − ½``, not only the CW's row.

**Confidence radius (anytime).** With ``W_ij`` the wins of i over j and ``N_ij = W_ij + W_ji``,
``q̂_ij = W_ij / N_ij`` and ``r(N) = √(log(4K²N²/δ) / (2N))``. Hoeffding's two-sided bound, a union
over the ``K(K−1)/2`` pairs and over every count ``N ≥ 1`` (``Σ 1/N² = π²/6``) bound the probability
that any ``|q̂_ij − q_ij| > r(N_ij)`` ever happens by ``δπ²/24 < δ``.

**Elimination.** Arm i is eliminated as soon as some arm j, alive or not, has
``LCB_ji = q̂_ji − r(N_ji) > ½``. On the good event the CW is never eliminated (``q_jc < ½``), so the
last arm standing is the CW with probability at least ``1 − δ`` whatever the sampling rule.

**Sampling** (``strategy``), one duel per alive arm per round (``schedule="round"``) or one duel
per loop iteration, cycling over alive arms (``schedule="single"``):

* ``"full_gap"``: arm i plays the most optimistic informative duel,
  ``argmax_{j≠i} max(UCB_ji, 1[j alive]·UCB_ij)``: against its most plausible beater (evidence
  against i) or against the alive arm it most plausibly beats (evidence against j); unplayed
  pairs have an infinite radius; ties are broken by a random priority drawn once per run. Any
  informative arm, not only the CW, can then certify i's elimination: roughly
  ``Σ_{i≠c} log(K/δ) / max_j Δ_ji²`` duels plus the cost of locating each beater.
* ``"winner_row"``: every alive arm duels the current candidate ``ĉ``, the alive arm most
  plausibly beating every other (``argmax_i min_{j≠i} UCB_ij``, as in RUCB); ``ĉ`` duels the alive
  arm it most plausibly beats. Only the candidate's row certifies eliminations:
  ``Σ_{i≠c} log(K/δ) / Δ_ci²``.
* ``"uniform"``: arm i duels the opponents in a fixed rotation over all ``j ≠ i`` (SAVAGE-like).

The loop runs on :func:`jaxsample.run_until` (one ``lax.while_loop``, round ``t`` drawing with
``fold_in(key, t)``) and stops when at most one arm is alive or ``budget`` duels have been played
(the last round is truncated to the budget, so ``num_duels ≤ budget`` exactly).
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
    is_concrete,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.core import SamplingAlgorithm, Step, run_until
from jaxsample.kernels.solver import SolverStats

__all__ = [
    "DuelInfo",
    "DuelState",
    "PreferenceMatrix",
    "identify_condorcet",
]

STRATEGIES = ("full_gap", "winner_row", "uniform")
SCHEDULES = ("round", "single")


class PreferenceMatrix(eqx.Module):
    """A dueling-bandit instance: ``probs[i, j] = P(i beats j)``, ``probs + probsᵀ = 1``.

    Validated when concrete: a square floating matrix with entries in ``[0, 1]``, complementary
    (``q_ij + q_ji = 1`` to ``1e-6``, so the diagonal is ½) and with a strict Condorcet winner (an
    arm with ``q_cj > ½`` for every ``j ≠ c``); a matrix without one raises ``ValueError``. Traced
    matrices (under ``jit``/``vmap``) are not checked: without a strict CW the identification
    then ends undetermined or eliminates every arm (see :func:`identify_condorcet`).

    Attributes:
        probs: ``(K, K)`` floating win probabilities.

    Example:
        >>> import jax.numpy as jnp
        >>> prefs = PreferenceMatrix(jnp.array([[0.5, 0.7], [0.3, 0.5]]))
        >>> int(prefs.condorcet_winner())
        0
    """

    probs: jax.Array

    def __init__(self, probs):
        probs = check_array("preferences", probs, ndim=2)
        if probs.shape[0] != probs.shape[1] or probs.shape[0] < 2:
            raise ValueError(f"preferences must be a square (K, K) matrix with K >= 2, got shape "
                             f"{probs.shape}")
        if is_concrete(probs):
            q = np.asarray(probs, np.float64)
            if not np.all(np.isfinite(q)) or np.any(q < 0) or np.any(q > 1):
                raise ValueError("preferences must hold probabilities in [0, 1]")
            if np.max(np.abs(q + q.T - 1.0)) > 1e-6:
                raise ValueError("preferences must be complementary: q_ij + q_ji = 1 (and q_ii = "
                                 f"1/2); max |q + qᵀ − 1| = {np.max(np.abs(q + q.T - 1.0)):.3g}")
            off = q + np.diag(np.full(q.shape[0], np.inf))
            if not np.any(np.all(off > 0.5, axis=1)):
                raise ValueError("preferences has no strict Condorcet winner (no arm i with "
                                 "q_ij > 1/2 for every j != i)")
        self.probs = probs

    @property
    def num_arms(self) -> int:
        return self.probs.shape[0]

    def condorcet_winner(self) -> jax.Array:
        """The strict CW's index, or ``-1`` when there is none (int32)."""
        k = self.num_arms
        beats = (self.probs > 0.5) | jnp.eye(k, dtype=bool)
        winner = jnp.all(beats, axis=1)
        return jnp.where(jnp.any(winner), jnp.argmax(winner), -1).astype(jnp.int32)

    def duel(self, key: jax.Array, i, j) -> jax.Array:
        """One duel: True when arm ``i`` beats arm ``j`` (broadcasts over index arrays)."""
        q = self.probs[i, j]
        return jax.random.uniform(key, jnp.shape(q), q.dtype) < q

    @staticmethod
    def informative(num_arms: int, *, winner_gap: float = 0.05, beater_gap: float = 0.4,
                    noise: float = 0.1, seed: int = 0, dtype=jnp.float32) -> PreferenceMatrix:
        """The informative instance of the benchmark, arms randomly relabelled.

        The CW beats every arm with ``q = ½ + winner_gap``; a second arm (the "beater") beats
        every other non-CW arm with ``q = ½ + beater_gap``; the remaining pairs are
        ``½ + U(−noise, noise)``. A winner-row method pays ``~(K−1)/winner_gap²``, the full gap
        matrix ``~1/winner_gap² + (K−2)/beater_gap²``.
        """
        rng = np.random.default_rng(seed)
        k = check_int("num_arms", num_arms, 3)
        q = 0.5 + rng.uniform(-noise, noise, (k, k))
        q[0, 1:] = 0.5 + winner_gap
        q[1, 2:] = 0.5 + beater_gap
        q = np.triu(q, 1) + np.tril(1.0 - np.triu(q, 1).T, -1)
        np.fill_diagonal(q, 0.5)
        perm = rng.permutation(k)
        return PreferenceMatrix(jnp.asarray(q[np.ix_(perm, perm)], dtype))


class DuelState(NamedTuple):
    """The identification loop's state (one pytree).

    Attributes:
        wins: ``(K, K)`` int32, ``wins[i, j]`` = duels i won against j.
        alive: ``(K,)`` bool.
        eliminated_by: ``(K,)`` int32, the arm whose lower bound eliminated each arm (-1: alive).
        upper: ``(K, K)`` upper confidence bounds ``q̂_ij + r(N_ij)`` (+inf unplayed).
        priority: ``(K, K)`` uniforms drawn once per run that break ties between equal bounds.
        pointer: int32, the next arm in the ``"single"`` schedule's rotation.
        num_rounds: int32 loop iterations.
        num_duels: int32 duels played.
    """

    wins: jax.Array
    alive: jax.Array
    eliminated_by: jax.Array
    upper: jax.Array
    priority: jax.Array
    pointer: jax.Array
    num_rounds: jax.Array
    num_duels: jax.Array


class DuelInfo(NamedTuple):
    """What :func:`identify_condorcet` reports.

    Attributes:
        num_duels: int32 duels played.
        num_rounds: int32 loop iterations.
        determined: bool, exactly one arm is left alive (the returned winner is certified at
            level δ); False when the budget ran out or every arm was eliminated.
        solver: :class:`~jaxsample.SolverStats` of the search: ``num_iterations`` the rounds,
            ``result`` ``successful`` exactly when ``determined``, ``nonfinite`` for a
            non-finite matrix, else ``max_iterations_reached`` (the budget ran out, or, without
            a strict Condorcet winner, every arm was eliminated).
        nonfinite: bool, the preference matrix held non-finite values.
        wins: ``(K, K)`` int32 win counts (``wins + winsᵀ`` = duels per pair).
        alive: ``(K,)`` bool arms not eliminated.
        eliminated_by: ``(K,)`` int32 arm that eliminated each arm (-1 for alive arms).
        lower: ``(K, K)`` lower confidence bounds ``q̂_ij − r(N_ij)`` at the end (−inf unplayed).
    """

    num_duels: jax.Array
    num_rounds: jax.Array
    determined: jax.Array
    solver: SolverStats
    nonfinite: jax.Array
    wins: jax.Array
    alive: jax.Array
    eliminated_by: jax.Array
    lower: jax.Array


def _confidence_radius(counts, num_arms, delta):
    """Anytime radius ``r(N) = √(log(4K²N²/δ)/(2N))`` (``+inf`` for ``N = 0``), in ``delta``'s
    floating dtype; ``info.lower`` of :func:`identify_condorcet` is ``q̂ − r(N)``."""
    dtype = delta.dtype
    n = counts.astype(dtype)
    safe = jnp.maximum(n, 1)
    log_term = (jnp.log(jnp.asarray(4.0 * num_arms**2, dtype)) + 2 * jnp.log(safe)
                - jnp.log(delta.astype(dtype)))
    return jnp.where(n > 0, jnp.sqrt(log_term / (2 * safe)), jnp.inf)


def _bounds(wins, delta, dtype):
    k = wins.shape[0]
    counts = wins + wins.T
    w = wins.astype(dtype)
    n = counts.astype(dtype)
    mean = jnp.where(counts > 0, w / jnp.maximum(n, 1), jnp.asarray(0.5, dtype))
    radius = _confidence_radius(counts, k, delta.astype(dtype))
    return mean, mean - radius, mean + radius, counts


def _argmax_random(scores, noise):
    """Row-wise argmax with ties broken by ``noise`` (uniforms in [0, 1))."""
    best = jnp.max(scores, axis=1, keepdims=True)
    return jnp.argmax(jnp.where(scores == best, noise, -1), axis=1).astype(jnp.int32)


def _opponents(strategy, state):
    upper = state.upper
    k = upper.shape[0]
    eye = jnp.eye(k, dtype=bool)
    noise = state.priority
    if strategy == "full_gap":
        # a duel (i, j) is evidence against i (j may beat i: UCB_ji) or against an alive j
        # (i may beat j: UCB_ij); duels against eliminated arms i surely beats are wasted
        score = jnp.maximum(upper.T, jnp.where(state.alive[None, :], upper, -jnp.inf))
        return _argmax_random(jnp.where(eye, -jnp.inf, score), noise)
    if strategy == "winner_row":
        # the candidate: the alive arm most plausibly beating every other (optimistic row)
        row = jnp.min(jnp.where(eye, jnp.inf, upper), axis=1)
        row = jnp.where(state.alive, row, -jnp.inf)
        candidate = _argmax_random(row[None, :], noise[:1])[0]
        own = _argmax_random(jnp.where(eye | ~state.alive[None, :], -jnp.inf, upper), noise)
        arms = jnp.arange(k, dtype=jnp.int32)
        return jnp.where(arms == candidate, own[candidate], candidate)
    # uniform rotation over every opponent j != i
    shift = 1 + state.num_rounds % (k - 1)
    return ((jnp.arange(k, dtype=jnp.int32) + shift) % k).astype(jnp.int32)


@functools.cache
def _duel_kernel(strategy: str, schedule: str):
    """The loop body ``kernel(key, state, *, probs, delta, budget) -> (state, ())`` for static
    settings: one step of :func:`jaxsample.run_until` (the floats are traced leaves).

    Inputs are valid (the public entry point checked them).
    """

    def kernel(key_duel, state: DuelState, *, probs, delta, budget):
        with jax.named_scope("dueling_round"):
            k = probs.shape[0]
            dtype = probs.dtype
            opponent = _opponents(strategy, state)
            arms = jnp.arange(k, dtype=jnp.int32)
            if schedule == "round":
                room = budget - state.num_duels
                active = state.alive & (jnp.cumsum(state.alive, dtype=jnp.int32) <= room)
                pointer = state.pointer
            else:
                order = (arms - state.pointer) % k
                first = jnp.argmin(jnp.where(state.alive, order, k)).astype(jnp.int32)
                active = (arms == first) & state.alive
                pointer = (first + 1) % k
            won = jax.random.uniform(key_duel, (k,), dtype) < probs[arms, opponent]
            played = active[:, None] & (arms[None, :] == opponent[:, None])
            wins_i = (played & won[:, None]).astype(jnp.int32)
            lost_i = (played & ~won[:, None]).astype(jnp.int32)
            wins = state.wins + wins_i + lost_i.T
            _, lower, upper, _ = _bounds(wins, delta, dtype)
            beaten = jnp.where(jnp.eye(k, dtype=bool), False, lower.T > 0.5)  # [i, j]: j beats i
            newly = state.alive & jnp.any(beaten, axis=1)
            eliminator = jnp.argmax(jnp.where(beaten, lower.T, -jnp.inf), axis=1)
            eliminated_by = jnp.where(newly, eliminator.astype(jnp.int32), state.eliminated_by)
            return DuelState(wins, state.alive & ~newly, eliminated_by, upper, state.priority,
                             pointer.astype(jnp.int32),
                             state.num_rounds + 1,
                             state.num_duels + jnp.sum(active).astype(jnp.int32)), ()

    return kernel


@functools.partial(jax.jit, static_argnames=("strategy", "schedule"))
def _identify(key, probs, delta, budget, strategy, schedule):
    k = probs.shape[0]
    dtype = probs.dtype
    delta = jnp.asarray(delta, dtype)
    step = Step(_duel_kernel(strategy, schedule), probs=probs, delta=delta, budget=budget)
    key, key_priority = jax.random.split(key)
    state = DuelState(jnp.zeros((k, k), jnp.int32), jnp.ones((k,), bool),
                      jnp.full((k,), -1, jnp.int32), jnp.full((k, k), jnp.inf, dtype),
                      jax.random.uniform(key_priority, (k * k,), dtype).reshape(k, k),
                      jnp.zeros((), jnp.int32),
                      jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    nonfinite = ~jnp.all(jnp.isfinite(probs))

    def done(s):
        return (jnp.sum(s.alive) <= 1) | (s.num_duels >= budget) | nonfinite

    # every step before the end plays at least one duel: at most `budget` steps
    state, _ = run_until(key, SamplingAlgorithm(init=lambda s: s, step=step), state,
                         done_fn=done, max_steps=budget)
    mean, lower, _, counts = _bounds(state.wins, delta, dtype)
    determined = jnp.sum(state.alive) == 1
    # undetermined: the candidate with the best worst-case empirical row among the alive arms
    # (among all arms when none is alive)
    eye = jnp.eye(k, dtype=bool)
    worst = jnp.min(jnp.where(eye, jnp.inf, mean), axis=1)
    pool = jnp.where(jnp.any(state.alive), state.alive, jnp.ones((k,), bool))
    winner = jnp.argmax(jnp.where(pool, worst, -jnp.inf)).astype(jnp.int32)
    lower = jnp.where(counts > 0, lower, -jnp.inf)
    solver = SolverStats.of(state.num_rounds, converged=determined, nonfinite=nonfinite)
    info = DuelInfo(state.num_duels, state.num_rounds, determined, solver, nonfinite, state.wins,
                    state.alive, state.eliminated_by, lower)
    return winner, info


def identify_condorcet(key: jax.Array, preferences, *, delta=0.05, budget: int = 100_000,
                       strategy: str = "full_gap",
                       schedule: str = "round") -> tuple[jax.Array, DuelInfo]:
    """Identifies the Condorcet winner of a dueling-bandit instance at confidence ``1 − δ``.

    See the module docstring for the radius, the elimination rule and the strategies. Every
    strategy shares the elimination rule, so each returns the CW with probability ``≥ 1 − δ``;
    they differ in how many duels they need.

    What is returned when there is no certified winner: ``info.determined`` is False,
    ``info.solver`` is not successful (an eager call warns once) and
    ``winner`` is the alive arm (every arm if none is alive) whose smallest empirical win rate
    ``min_j q̂_ij`` is largest. Without a strict Condorcet winner (possible only for traced
    matrices: concrete ones are refused) every arm may be eliminated, and the run ends with
    ``determined`` False.

    Args:
        key: PRNG key.
        preferences: a :class:`PreferenceMatrix` (or a ``(K, K)`` array, validated as one).
        delta: failure probability in (0, 1); traced.
        budget: duel cap (the loop stops after exactly ``budget`` duels at most); traced.
        strategy: ``"full_gap"``, ``"winner_row"`` or ``"uniform"``.
        schedule: ``"round"`` (one duel per alive arm per loop iteration) or ``"single"``
            (one duel per iteration, cycling over the alive arms); statistically equivalent.

    Returns:
        ``(winner, info)``: int32 arm index and :class:`DuelInfo`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> prefs = PreferenceMatrix(jnp.array([[0.5, 0.8, 0.7],
        ...                                     [0.2, 0.5, 0.9],
        ...                                     [0.3, 0.1, 0.5]]))
        >>> winner, info = identify_condorcet(jax.random.key(0), prefs, delta=0.05)
        >>> int(winner), bool(info.determined)
        (0, True)
    """
    key = check_key("key", key)
    if not isinstance(preferences, PreferenceMatrix):
        preferences = PreferenceMatrix(preferences)
    delta = check_hyperparameter("delta", delta, maximum=1.0)
    if is_concrete(delta) and float(delta) >= 1.0:
        raise ValueError(f"delta must be in (0, 1), got {float(delta)}")
    if is_concrete(budget):
        budget = check_int("budget", budget, 1, 2**31 - 1)
    strategy = check_choice("strategy", strategy, STRATEGIES)
    schedule = check_choice("schedule", schedule, SCHEDULES)
    winner, info = _identify(key, preferences.probs, delta, jnp.asarray(budget, jnp.int32),
                             strategy, schedule)
    warn_if_unsuccessful(info.solver, "identify_condorcet's elimination (no certified winner "
                         "within the duel budget: raise budget)")
    return winner, info
