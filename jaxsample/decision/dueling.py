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

**Ask/tell.** :class:`CondorcetIdentification` holds the procedure as a pytree state: ``ask``
names the next duel, ``tell`` adds its outcome (a win/loss or i's share in [0, 1]: Hoeffding's
bound needs only outcomes in [0, 1] with mean ``q_ij``), ``result`` gives the winner and its
certificate. Its ``run`` is the loop for any ``oracle(key, i, j)`` on :func:`jaxsample.run_until`
(one ``lax.while_loop``, duel ``t`` drawing with ``fold_in(key, t)``); it stops when at most one
arm is alive or ``budget`` duels have been played (so ``num_duels ≤ budget`` exactly).
:func:`identify_condorcet` is that run with the matrix oracle.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_choice,
    check_fn_output,
    check_hyperparameter,
    check_int,
    check_key,
    is_concrete,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.core import SamplingAlgorithm, Step, run_until
from jaxsample.kernels.solver import SolverStats

__all__ = [
    "CondorcetIdentification",
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
        probs = check_array("preferences", probs, ndim=2, finite=True, lower=0, upper=1)
        if probs.shape[0] != probs.shape[1] or probs.shape[0] < 2:
            raise ValueError(f"preferences must be a square (K, K) matrix with K >= 2, got shape "
                             f"{probs.shape}")
        if is_concrete(probs):
            q = np.asarray(probs, np.float64)
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
    """The identification's state (one pytree), from :meth:`CondorcetIdentification.init`.

    Attributes:
        wins: ``(K, K)`` floating, ``wins[i, j]`` = duels i won against j (a fractional outcome
            ``o`` adds ``o`` to ``wins[i, j]`` and ``1 − o`` to ``wins[j, i]``).
        counts: ``(K, K)`` int32 duels per pair (symmetric).
        alive: ``(K,)`` bool.
        eliminated_by: ``(K,)`` int32, the arm whose lower bound eliminated each arm (-1: alive).
        upper: ``(K, K)`` upper confidence bounds ``q̂_ij + r(N_ij)`` (+inf unplayed) as of the
            last refresh (every duel with ``"single"``, every round with ``"round"``).
        priority: ``(K, K)`` uniforms drawn once at ``init`` that break ties between equal bounds.
        pointer: int32, the next arm of the schedule's rotation.
        num_rounds: int32 refreshes (rounds; duels with ``"single"``).
        num_duels: int32 duels told.
        step: int32 ``tell`` calls (the run's step counter: step ``t`` draws with
            ``fold_in(key, t)``).
        nonfinite: bool, a non-finite or out-of-range outcome was met (and skipped), or the
            preference matrix held non-finite values.
    """

    wins: jax.Array
    counts: jax.Array
    alive: jax.Array
    eliminated_by: jax.Array
    upper: jax.Array
    priority: jax.Array
    pointer: jax.Array
    num_rounds: jax.Array
    num_duels: jax.Array
    step: jax.Array
    nonfinite: jax.Array


class DuelInfo(NamedTuple):
    """What :func:`identify_condorcet` and :meth:`CondorcetIdentification.result` report.

    Attributes:
        num_duels: int32 duels played.
        num_rounds: int32 rounds (refreshes of the bounds).
        determined: bool, exactly one arm is left alive (the returned winner is certified at
            level δ); False when the budget ran out or every arm was eliminated.
        solver: :class:`~jaxsample.SolverStats` of the search: ``num_iterations`` the rounds,
            ``result`` ``successful`` exactly when ``determined``, ``nonfinite`` for a
            non-finite matrix or outcome, else ``max_iterations_reached`` (the budget ran out,
            or, without a strict Condorcet winner, every arm was eliminated).
        nonfinite: bool, a non-finite matrix or outcome was met.
        wins: ``(K, K)`` win counts (``wins + winsᵀ`` = duels per pair), floating.
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


def _bounds(wins, counts, delta):
    k = wins.shape[0]
    dtype = wins.dtype
    n = counts.astype(dtype)
    mean = jnp.where(counts > 0, wins / jnp.maximum(n, 1), jnp.asarray(0.5, dtype))
    radius = _confidence_radius(counts, k, delta.astype(dtype))
    return mean, mean - radius, mean + radius


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


def _init_state(key, num_arms, dtype):
    k = num_arms
    zero = jnp.zeros((), jnp.int32)
    return DuelState(jnp.zeros((k, k), dtype), jnp.zeros((k, k), jnp.int32),
                     jnp.ones((k,), bool), jnp.full((k,), -1, jnp.int32),
                     jnp.full((k, k), jnp.inf, dtype),
                     jax.random.uniform(key, (k * k,), dtype).reshape(k, k),
                     zero, zero, zero, zero, jnp.zeros((), bool))


def _ask_pair(strategy, schedule, state):
    """The next duel ``(i, j)``: the schedule's next alive arm and its strategy's opponent."""
    k = state.alive.shape[0]
    arms = jnp.arange(k, dtype=jnp.int32)
    if schedule == "round":
        order = jnp.where(arms >= state.pointer, arms, k + arms)  # the rest of this round first
    else:
        order = (arms - state.pointer) % k
    i = jnp.argmin(jnp.where(state.alive, order, 2 * k)).astype(jnp.int32)
    return i, _opponents(strategy, state)[i]


def _tell_pair(schedule, state, i, j, outcome, delta, budget):
    """Adds the duel ``(i, j)`` with ``outcome`` ∈ [0, 1] (i's share of the win) and, at the end
    of a round (every duel with ``"single"``) or when the budget is spent, refreshes the bounds
    and eliminates. An invalid duel (non-finite or out-of-range outcome, ``i = j``) is skipped
    and sets ``nonfinite``."""
    k = state.alive.shape[0]
    dtype = state.wins.dtype
    arms = jnp.arange(k, dtype=jnp.int32)
    o = jnp.asarray(outcome).astype(dtype)
    valid = jnp.isfinite(o) & (o >= 0) & (o <= 1) & (i != j)
    o = jnp.where(valid, o, 0)
    w = valid.astype(dtype)
    wins = state.wins.at[i, j].add(w * o).at[j, i].add(w * (1 - o))
    step_count = valid.astype(jnp.int32)
    counts = state.counts.at[i, j].add(step_count).at[j, i].add(step_count)
    num_duels = state.num_duels + step_count
    if schedule == "round":
        pointer = jnp.where(valid, i + 1, state.pointer)
        round_end = ~jnp.any(state.alive & (arms >= pointer))
    else:
        pointer = jnp.where(valid, (i + 1) % k, state.pointer)
        round_end = valid
    refresh = round_end | (valid & (num_duels >= budget))

    def refreshed(_):
        _, lower, upper = _bounds(wins, counts, delta)
        beaten = jnp.where(jnp.eye(k, dtype=bool), False, lower.T > 0.5)  # [i, j]: j beats i
        newly = state.alive & jnp.any(beaten, axis=1)
        eliminator = jnp.argmax(jnp.where(beaten, lower.T, -jnp.inf), axis=1)
        eliminated_by = jnp.where(newly, eliminator.astype(jnp.int32), state.eliminated_by)
        new_pointer = jnp.zeros((), jnp.int32) if schedule == "round" else pointer
        return (state.alive & ~newly, eliminated_by, upper, new_pointer.astype(jnp.int32),
                state.num_rounds + 1)

    def kept(_):
        return (state.alive, state.eliminated_by, state.upper, pointer.astype(jnp.int32),
                state.num_rounds)

    alive, eliminated_by, upper, pointer, num_rounds = jax.lax.cond(refresh, refreshed, kept,
                                                                    None)
    return DuelState(wins, counts, alive, eliminated_by, upper, state.priority, pointer,
                     num_rounds, num_duels, state.step + 1, state.nonfinite | ~valid)


def _result(state, delta):
    k = state.alive.shape[0]
    mean, lower, _ = _bounds(state.wins, state.counts, delta)
    determined = jnp.sum(state.alive) == 1
    # undetermined: the candidate with the best worst-case empirical row among the alive arms
    # (among all arms when none is alive)
    eye = jnp.eye(k, dtype=bool)
    worst = jnp.min(jnp.where(eye, jnp.inf, mean), axis=1)
    pool = jnp.where(jnp.any(state.alive), state.alive, jnp.ones((k,), bool))
    winner = jnp.argmax(jnp.where(pool, worst, -jnp.inf)).astype(jnp.int32)
    lower = jnp.where(state.counts > 0, lower, -jnp.inf)
    solver = SolverStats.of(state.num_rounds, converged=determined, nonfinite=state.nonfinite)
    return winner, DuelInfo(state.num_duels, state.num_rounds, determined, solver,
                            state.nonfinite, state.wins, state.alive, state.eliminated_by, lower)


def _done(state, budget):
    return (jnp.sum(state.alive) <= 1) | (state.num_duels >= budget) | state.nonfinite


@functools.cache
def _duel_kernel(strategy: str, schedule: str):
    """One duel as a step of :func:`jaxsample.run_until`: ``kernel(key, state, *, oracle, delta,
    budget) -> (state, ())``: ask, ``oracle(key, i, j)``, tell (the floats are traced leaves).
    """

    def kernel(key, state: DuelState, *, oracle, delta, budget):
        with jax.named_scope("dueling_duel"):
            i, j = _ask_pair(strategy, schedule, state)
            outcome = oracle(key, i, j)
            return _tell_pair(schedule, state, i, j, outcome, delta, budget), ()

    return kernel


@eqx.filter_jit
def _run(key, state, oracle, delta, budget, strategy, schedule):
    step = Step(_duel_kernel(strategy, schedule), oracle=oracle, delta=delta, budget=budget)
    # every step plays one duel unless an outcome is invalid, which ends the run
    state, _ = run_until(key, SamplingAlgorithm(init=lambda s: s, step=step), state,
                         done_fn=lambda s: _done(s, budget),
                         max_steps=jnp.maximum(budget - state.num_duels, 0))
    winner, info = _result(state, delta)
    return state, winner, info


_ask_jit = jax.jit(_ask_pair, static_argnums=(0, 1))
_tell_jit = jax.jit(_tell_pair, static_argnums=(0,))
_result_jit = jax.jit(_result)


class CondorcetIdentification(eqx.Module):
    """Condorcet-winner identification as an ask/tell object (module docstring).

    ``state = m.init(key)``; ``i, j = m.ask(key, state)``; play the duel with any evaluator (an
    LLM judge, a human, a simulator); ``state = m.tell(state, i, j, outcome)`` with ``outcome``
    True/1 when i won, False/0 when j won, or a fraction in [0, 1] (a tie is ½); stop when
    ``m.done(state)``; ``winner, info = m.result(state)``, certified at level δ when
    ``info.determined`` (``info.solver`` successful). :meth:`run` is the whole loop for an
    ``oracle(key, i, j)`` callable; :func:`identify_condorcet` is :meth:`run` with a matrix
    oracle. The radius holds for any outcomes in [0, 1] whose mean is ``q_ij`` (Hoeffding).

    Args:
        num_arms: K ≥ 2.
        delta: failure probability in (0, 1); traced.
        budget: duel cap (``done`` once reached); traced. ``None``: 2³¹ − 1.
        strategy: ``"full_gap"``, ``"winner_row"`` or ``"uniform"``.
        schedule: ``"round"`` (each alive arm duels once per round; bounds refreshed and arms
            eliminated at the round's end) or ``"single"`` (refreshed after every duel).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> m = CondorcetIdentification(3, delta=0.1)
        >>> q = jnp.array([[0.5, 0.9, 0.8], [0.1, 0.5, 0.7], [0.2, 0.3, 0.5]])
        >>> state = m.init(jax.random.key(0))
        >>> key = jax.random.key(1)
        >>> while not m.done(state):
        ...     key, k_ask, k_duel = jax.random.split(key, 3)
        ...     i, j = m.ask(k_ask, state)
        ...     won = bool(jax.random.uniform(k_duel) < q[i, j])   # any evaluator
        ...     state = m.tell(state, i, j, won)
        >>> winner, info = m.result(state)
        >>> int(winner), bool(info.determined)
        (0, True)
    """

    num_arms: int = eqx.field(static=True)
    strategy: str = eqx.field(static=True)
    schedule: str = eqx.field(static=True)
    delta: Any
    budget: Any

    def __init__(self, num_arms: int, *, delta=0.05, budget=None, strategy: str = "full_gap",
                 schedule: str = "round"):
        self.num_arms = check_int("num_arms", num_arms, 2)
        delta = check_hyperparameter("delta", delta, maximum=1.0)
        if is_concrete(delta) and float(delta) >= 1.0:
            raise ValueError(f"delta must be in (0, 1), got {float(delta)}")
        self.delta = delta
        if budget is None:
            budget = 2**31 - 1
        if is_concrete(budget):
            budget = check_int("budget", budget, 1, 2**31 - 1)
        self.budget = budget
        self.strategy = check_choice("strategy", strategy, STRATEGIES)
        self.schedule = check_choice("schedule", schedule, SCHEDULES)

    def _delta(self, dtype):
        return jnp.asarray(self.delta, dtype)

    def _budget(self):
        return jnp.asarray(self.budget, jnp.int32)

    def _check_state(self, state):
        if not isinstance(state, DuelState):
            raise TypeError(f"state must be a DuelState (from init), got {type(state).__name__}")
        if state.alive.shape != (self.num_arms,):
            raise ValueError(f"state is for {state.alive.shape[0]} arms, this identification has "
                             f"{self.num_arms}")

    def init(self, key, dtype=None) -> DuelState:
        """The state before any duel; ``key`` draws the tie-breaking priorities.

        Args:
            key: PRNG key.
            dtype: float dtype of the win counts and bounds (default: JAX's default float).
        """
        key = check_key("key", key)
        dtype = jnp.dtype(jnp.result_type(float) if dtype is None else dtype)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"dtype must be a float dtype, got {dtype}")
        return _init_state(key, self.num_arms, dtype)

    def ask(self, key, state: DuelState) -> tuple[jax.Array, jax.Array]:
        """The next duel ``(i, j)``, int32 scalars (deterministic given the state: ``key`` is
        accepted for the ask/tell shape and unused)."""
        check_key("key", key)
        self._check_state(state)
        return _ask_jit(self.strategy, self.schedule, state)

    def tell(self, state: DuelState, i, j, outcome) -> DuelState:
        """Adds the duel ``(i, j)``'s ``outcome``: a bool (i won), or i's share in [0, 1].

        Concrete invalid input (an index out of range, ``i = j``, an outcome outside [0, 1] or
        non-finite) raises ``ValueError``; under ``jit`` an invalid outcome is skipped and
        sets ``state.nonfinite``.
        """
        self._check_state(state)
        i, j = jnp.asarray(i), jnp.asarray(j)
        for name, index in (("i", i), ("j", j)):
            if index.ndim != 0 or not jnp.issubdtype(index.dtype, jnp.integer):
                raise TypeError(f"{name} must be an integer scalar arm index, got "
                                f"{index.dtype}{list(index.shape)}")
            if is_concrete(index) and not 0 <= int(index) < self.num_arms:
                raise ValueError(f"{name} must be an arm index in [0, {self.num_arms}), got "
                                 f"{int(index)}")
        if is_concrete(i) and is_concrete(j) and int(i) == int(j):
            raise ValueError(f"i and j must be different arms, got {int(i)} twice")
        try:
            outcome = jnp.asarray(outcome)
        except TypeError as err:
            raise TypeError(f"outcome must be a bool or a number in [0, 1], got "
                            f"{type(outcome).__name__}") from err
        if outcome.ndim != 0 or not (outcome.dtype == bool or jnp.issubdtype(
                outcome.dtype, jnp.number)):
            raise TypeError(f"outcome must be a bool or a number in [0, 1], got "
                            f"{outcome.dtype}{list(outcome.shape)}")
        if is_concrete(outcome):
            o = float(outcome)
            if not (np.isfinite(o) and 0.0 <= o <= 1.0):
                raise ValueError(f"outcome must be in [0, 1] (i's share of the win), got {o}")
        dtype = state.wins.dtype
        return _tell_jit(self.schedule, state, i.astype(jnp.int32), j.astype(jnp.int32),
                         outcome, self._delta(dtype), self._budget())

    def done(self, state: DuelState) -> jax.Array:
        """True once at most one arm is alive, the budget is spent or an outcome was invalid."""
        self._check_state(state)
        return _done(state, self._budget())

    def result(self, state: DuelState) -> tuple[jax.Array, DuelInfo]:
        """``(winner, DuelInfo)``: the certified winner when ``info.determined``, else the
        alive arm (every arm if none is) whose smallest empirical win rate is largest."""
        self._check_state(state)
        return _result_jit(state, self._delta(state.wins.dtype))

    def run(self, key, oracle: Callable, state: DuelState | None = None, *, dtype=None
            ) -> tuple[jax.Array, DuelInfo]:
        """The whole loop, one ``lax.while_loop`` on :func:`jaxsample.run_until`: duel ``t``
        asks, calls ``oracle(fold_in(key, t), i, j)`` and tells, until :meth:`done`.

        Args:
            key: PRNG key; without ``state`` it is split once, into the priorities' key for
                :meth:`init` and the loop's.
            oracle: ``oracle(key, i, j) -> outcome``, jittable (a bool, or i's share in [0, 1]);
                probed once for its output's shape (a scalar); under ``jit`` an invalid outcome
                ends the run with ``info.nonfinite``.
            state: a state to continue (its step counter continues the key stream); None: a
                fresh one.
            dtype: the fresh state's float dtype.

        Returns:
            ``(winner, DuelInfo)``; an eager call without a certified winner warns once.
        """
        key = check_key("key", key)
        index = jax.ShapeDtypeStruct((), jnp.int32)
        check_fn_output("oracle", oracle, (jax.eval_shape(lambda: key), index, index), (),
                        kind=None)
        if state is None:
            key_init, key = jax.random.split(key)
            state = self.init(key_init, dtype)
        self._check_state(state)
        _, winner, info = _run(key, state, oracle, self._delta(state.wins.dtype),
                               self._budget(), self.strategy, self.schedule)
        warn_if_unsuccessful(info.solver, "CondorcetIdentification's elimination (no certified "
                             "winner within the duel budget: raise budget)", stacklevel=4)
        return winner, info


def identify_condorcet(key: jax.Array, preferences, *, delta=0.05, budget: int = 100_000,
                       strategy: str = "full_gap",
                       schedule: str = "round") -> tuple[jax.Array, DuelInfo]:
    """Identifies the Condorcet winner of a dueling-bandit instance at confidence ``1 − δ``.

    :meth:`CondorcetIdentification.run` with the matrix oracle ``u < q_ij``, ``u ~ U(0, 1)``
    drawn from the duel's key: ``identify_condorcet(key, prefs)`` equals ``m.run(key, oracle)``
    for ``m = CondorcetIdentification(K, delta=delta, budget=budget, ...)``. See the module
    docstring for the radius, the elimination rule and the strategies. Every strategy shares the
    elimination rule, so each returns the CW with probability ``≥ 1 − δ``; they differ in how
    many duels they need.

    What is returned when there is no certified winner: ``info.determined`` is False,
    ``info.solver`` is not successful (an eager call warns once) and ``winner`` is the alive arm
    (every arm if none is alive) whose smallest empirical win rate ``min_j q̂_ij`` is largest.
    Without a strict Condorcet winner (possible only for traced matrices: concrete ones are
    refused) every arm may be eliminated, and the run ends with ``determined`` False. A
    non-finite matrix (traced) ends the run at once with ``info.nonfinite``.

    Args:
        key: PRNG key.
        preferences: a :class:`PreferenceMatrix` (or a ``(K, K)`` array, validated as one).
        delta: failure probability in (0, 1); traced.
        budget: duel cap (the loop stops after exactly ``budget`` duels at most); traced.
        strategy: ``"full_gap"``, ``"winner_row"`` or ``"uniform"``.
        schedule: ``"round"`` (one duel per alive arm per round) or ``"single"`` (bounds
            refreshed after every duel); statistically equivalent.

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
    probs = preferences.probs
    method = CondorcetIdentification(preferences.num_arms, delta=delta, budget=budget,
                                     strategy=strategy, schedule=schedule)
    key_init, key_run = jax.random.split(key)
    state = _init_state(key_init, preferences.num_arms, probs.dtype)
    state = state._replace(nonfinite=~jnp.all(jnp.isfinite(probs)))
    _, winner, info = _run(key_run, state, _MatrixOracle(probs),
                           method._delta(probs.dtype), method._budget(), method.strategy,
                           method.schedule)
    warn_if_unsuccessful(info.solver, "identify_condorcet's elimination (no certified winner "
                         "within the duel budget: raise budget)")
    return winner, info


class _MatrixOracle(eqx.Module):
    """The simulated duel: ``i`` wins with probability ``probs[i, j]`` (a pytree, so the matrix
    is a traced leaf and every matrix of a shape shares one compilation)."""

    probs: jax.Array

    def __call__(self, key, i, j):
        return jax.random.uniform(key, (), self.probs.dtype) < self.probs[i, j]
