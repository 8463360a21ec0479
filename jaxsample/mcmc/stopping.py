r"""Learned MCMC trajectory termination: a state-dependent classifier decides when a chain stops.

Korolev, Morozov, Pavlenko, Whitammer & Samsonov, *Learned MCMC trajectory termination via
non-acyclic GFlowNets*, arXiv:2606.16073 (2026). A chain starts at ``X₀ ~ p₀``; at every visit to
``x`` it **stops with probability σ(x)** and outputs ``x``, otherwise it moves by a base kernel
``K(x, ·)``. With the occupation (state flow) ``G(x)`` = expected number of visits to ``x``:

.. math::
    G = p_0 + (G \odot (1-\sigma))K, \qquad p_T = \sigma \odot G, \qquad
    \mathbb E[L] = \textstyle\sum_x G(x)(1-\sigma(x)) = \sum_x G(x) - 1 .

Asking ``p_T = π`` gives ``G(I − K) = p₀ − πK``, solvable for any irreducible ``K`` (π-invariant
or not: the classifier absorbs a biased kernel's error). Its solutions are ``G₀ + t·π_K``; the
smallest feasible ``t`` (``G ≥ π``) gives the minimal-flow, hence shortest, exact classifier
``σ* = π/G*`` (:func:`~jaxsample.mcmc.stopping_tabular.optimal_stop_tabular`). For a
π-reversible kernel ``G = π h`` with the Poisson equation ``(I − K)h = p₀/π − 1`` and
``σ* = 1/h``, ``min h = 1``: the form :func:`train_stopping` learns with an equinox network in
continuous spaces.

* :func:`adaptive_stop` wraps any :class:`~jaxsample.SamplingAlgorithm` (and a BlackJAX kernel
  through a two-line adapter) into a stopped chain; :func:`sample_until_stopped` runs a batch of
  them to termination through :func:`jaxsample.run_until` (one ``lax.while_loop``, vmapped
  over chains) with a length cap.
* :func:`~jaxsample.mcmc.stopping_tabular.optimal_stop_tabular` and
  :func:`~jaxsample.mcmc.stopping_tabular.terminal_law` are the exact finite-state solvers
  (module :mod:`jaxsample.mcmc.stopping_tabular`).
* :func:`train_stopping` fits ``σ_θ = 1/h_θ`` by the Poisson/TD loss with two independent moves
  plus a minimal-flow penalty, over any π-reversible base kernel (MALA in the examples). The net
  learns ``h_θ = 1 + s·exp(model)`` around the Poisson source ``s = Z p₀/π̃`` and each residual
  is scaled by ``1 + s``, so a ``p₀`` far wider than π (``s`` up to ``e^{50}`` on the pool)
  trains in float32. ``levels = L`` trains the paper's multilevel scheme: ``L`` stopped chains
  in sequence along ``π_l ∝ p₀^{1−β_l} π̃^{β_l}``, ``β_l = (l + 1)/L``, with one
  level-conditioned network; :func:`sample_multilevel` runs them.

**Where each part lives.** This module holds the stopped chain and its drivers. The
network :class:`StoppingNet`, its Poisson/TD loss and the level path are in
``mcmc/_stopping_net.py``; :func:`train_stopping` and its :class:`StoppingTrainInfo` (the
visit pool and the fit, through the library's one training loop ``jaxsample._training``)
are in ``mcmc/_stopping_train.py``. All three are re-exported here and from
:mod:`jaxsample.mcmc`.

**What reproduces the paper.** The stopped chain, the exact condition ``σG = π`` and its
minimal-flow solution, the multilevel path (linear ``β`` in the level, one level-conditioned
network, ``L = 2`` in the paper's configurations) and the targets of its benchmark
(:class:`~jaxsample.targets.GMM9`, ``ManyWell(dim=32)`` with ``p₀ = N(0, 3²I)``).
**jaxsample's own choices.** The Poisson/TD loss over a fixed π-reversible base kernel (the paper
learns forward and backward Gaussian kernels with a trajectory-balance loss; a fixed kernel
keeps the stopped chain a drop-in wrapper of any sampler and the fixed point exact), the
source-scaled residual (float32 on wide ``p₀``) and the visit pool as training states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsample._checks import (
    check_callable,
    check_int,
    check_key,
    check_position,
)
from jaxsample.core import SamplingAlgorithm, Step, run_until
from jaxsample.mcmc._stopping_net import StoppingNet as StoppingNet
from jaxsample.mcmc._stopping_net import default_position, level_algorithms
from jaxsample.mcmc._stopping_train import StoppingTrainInfo as StoppingTrainInfo
from jaxsample.mcmc._stopping_train import train_stopping as train_stopping

__all__ = [
    "StopInfo",
    "StopState",
    "StopStepInfo",
    "StoppingNet",
    "StoppingTrainInfo",
    "adaptive_stop",
    "sample_multilevel",
    "sample_until_stopped",
    "train_stopping",
]


class StopState(NamedTuple):
    """A stopped chain: the base kernel's ``inner`` state and the stopping bookkeeping.

    Attributes:
        inner: the wrapped algorithm's state (e.g. a :class:`~jaxsample.mcmc.MALAState`).
        done: bool, the chain has stopped (or was truncated); it never moves again.
        length: int32, number of moves made.
        truncated: bool, the cap ``max_steps`` was reached before the classifier stopped it.
        max_steps: int32, the cap on ``length``.
        step: int32, steps taken, frozen ones included (it numbers :func:`jaxsample.run`'s
            step keys; the ``inner`` state's own counter, where it has one, counts moves).
    """

    inner: Any
    done: jax.Array
    length: jax.Array
    truncated: jax.Array
    max_steps: jax.Array
    step: jax.Array


class StopStepInfo(NamedTuple):
    """One step: ``moved``, ``stopped`` (the classifier fired), the base ``inner`` info (its
    values are meaningful where ``moved``), ``nonfinite`` (a NaN stopping probability or a
    non-finite base move)."""

    moved: jax.Array
    stopped: jax.Array
    inner: Any
    nonfinite: jax.Array


class StopInfo(NamedTuple):
    """A batch run to termination.

    Attributes:
        lengths: ``(n,)`` int32 moves per chain (the trajectory length ``L``).
        truncated: ``(n,)`` bool; a truncated chain's output is **not** a draw of the stopped
            chain's terminal law (it hit ``max_steps``).
        nonfinite: ``(n,)`` bool, a non-finite position, stopping probability or base move.
    """

    lengths: jax.Array
    truncated: jax.Array
    nonfinite: jax.Array


def _stop_kernel(key, state: StopState, base_step, stop_prob_fn, position_fn):
    """Test stopping at the current state, then move (p₀ counts in G; done chains are frozen)."""
    with jax.named_scope("adaptive_stop"):
        key_stop, key_move = jax.random.split(key)
        x = position_fn(state.inner)
        sigma = jnp.asarray(stop_prob_fn(x))
        dtype = (sigma.dtype if jnp.issubdtype(sigma.dtype, jnp.floating)
                 else jax.tree.leaves(x)[0].dtype)
        live = ~state.done
        stop = live & (jax.random.uniform(key_stop, (), dtype) < sigma)
        at_cap = state.length >= state.max_steps
        truncate = live & ~stop & at_cap
        move = live & ~stop & ~at_cap
        proposed, info = base_step(key_move, state.inner)
        inner = jax.tree.map(lambda new, old: jnp.where(move, new, old), proposed, state.inner)
        inner_bad = jnp.any(jnp.asarray(getattr(info, "nonfinite", False)))
        bad = (live & ~jnp.isfinite(sigma)) | (move & inner_bad)
        new = StopState(inner, state.done | stop | truncate, state.length + move.astype(jnp.int32),
                        state.truncated | truncate, state.max_steps, state.step + 1)
        return new, StopStepInfo(move, stop, info, bad)


def adaptive_stop(algorithm: SamplingAlgorithm, stop_prob_fn: Callable, *,
                  position_fn: Callable | None = None, max_steps: int) -> SamplingAlgorithm:
    r"""Wrap a one-chain sampler into a chain that stops with probability ``σ(x)`` at each visit.

    One step of the wrapped algorithm: draw ``U ~ U(0, 1)`` and stop if ``U < σ(x)`` at the
    current state ``x``; otherwise move by the base step, unless the chain already made
    ``max_steps`` moves, in which case it is marked ``truncated`` and stops. Finished chains are
    frozen (``jnp.where`` masks), so ``jax.vmap`` over chains is exact. ``σ ≡ 1`` returns the
    initial state; a constant ``σ = s`` gives ``L ~ Geometric(s)`` on ``{0, 1, …}``.

    Any :class:`~jaxsample.SamplingAlgorithm` for one chain works. A BlackJAX kernel takes a
    two-line adapter (its ``init(position, rng_key=None)`` and ``step(key, state)`` already have
    the shape):

    Example:
        >>> import jax, jax.numpy as jnp, blackjax
        >>> import jaxsample
        >>> from jaxsample.mcmc import adaptive_stop, sample_until_stopped
        >>> logdensity = lambda x: -0.5 * jnp.sum(x**2)
        >>> bj = blackjax.mala(logdensity, step_size=0.5)
        >>> base = jaxsample.SamplingAlgorithm(bj.init, bj.step)
        >>> wrapped = adaptive_stop(base, lambda x: 0.2, max_steps=50)
        >>> x, info = sample_until_stopped(jax.random.key(0), wrapped, jnp.zeros((8, 2)))
        >>> x.shape, info.lengths.shape, bool(info.truncated.any())
        ((8, 2), (8,), False)

    Args:
        algorithm: the base sampler (one chain): ``init(position)``, ``step(key, state)``.
        stop_prob_fn: ``σ(x) ∈ [0, 1]`` of one position (e.g. a :class:`StoppingNet`, or the
            tabular ``σ*`` indexed by state). A NaN ``σ`` is flagged in ``nonfinite``; values
            outside ``[0, 1]`` act as 0 or 1.
        position_fn: maps the base state to the position ``σ`` reads and the run returns;
            default ``state.position`` (BlackJAX and jaxsample states) or the state itself.
        max_steps: cap on the number of moves, ``>= 1``.

    Returns:
        ``SamplingAlgorithm(init, step)`` over :class:`StopState`; ``step`` returns
        :class:`StopStepInfo`. The base step's array leaves (its float hyper-parameters) stay
        traced leaves of ``step``.
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise TypeError("algorithm must be a jaxsample.SamplingAlgorithm (wrap a BlackJAX one as "
                        f"SamplingAlgorithm(alg.init, alg.step)), got {type(algorithm).__name__}")
    stop_prob_fn = check_callable("stop_prob_fn", stop_prob_fn)
    position_fn = check_callable("position_fn", position_fn, allow_none=True) or default_position
    max_steps = check_int("max_steps", max_steps, 1)
    base_init = algorithm.init
    step = Step(_stop_kernel, base_step=algorithm.step, stop_prob_fn=stop_prob_fn,
                position_fn=position_fn)

    def init_fn(position, *, rng_key=None):
        inner = base_init(position) if rng_key is None else base_init(position, rng_key=rng_key)
        false, zero = jnp.zeros((), bool), jnp.zeros((), jnp.int32)
        return StopState(inner, false, zero, false, jnp.asarray(max_steps, jnp.int32), zero)

    return SamplingAlgorithm(init_fn, step)


def sample_until_stopped(key: jax.Array, wrapped: SamplingAlgorithm,
                         initial_positions) -> tuple[jax.Array, StopInfo]:
    r"""Run ``n`` stopped chains to termination: :func:`jaxsample.run_until` vmapped over chains.

    Chain ``i`` uses ``chain_key = jax.random.split(key, n)[i]`` and, at its step ``t``, the
    step key ``jax.random.fold_in(chain_key, t)`` (the driver's keys): its randomness does not
    depend on the batch, so the batch equals a per-chain loop exactly. The loop ends when every
    chain is done; a chain still running after ``max_steps`` moves is returned with
    ``truncated = True``.

    Args:
        key: PRNG key.
        wrapped: the result of :func:`adaptive_stop`.
        initial_positions: ``(n, ...)``, one initial position per chain (draws of ``p₀``); or a
            pytree whose leaves have a leading ``n`` (one pytree position per chain, for a base
            sampler that takes pytrees, such as :func:`~jaxsample.mcmc.mala`).

    Returns:
        ``(positions (n, ...), StopInfo)``: the terminal positions (``position_fn`` of the final
        states, in the structure of the positions) and the lengths, truncation and non-finite
        flags.
    """
    key = check_key("key", key)
    if not (isinstance(wrapped, SamplingAlgorithm) and isinstance(wrapped.step, Step)
            and wrapped.step.func is _stop_kernel):
        raise TypeError("wrapped must be the result of jaxsample.mcmc.adaptive_stop")
    initial_positions = check_position("initial_positions", initial_positions, batch_ndim=1,
                                       kind="numeric")
    num_chains = jax.tree.leaves(initial_positions)[0].shape[0]
    if num_chains < 1:
        raise ValueError("initial_positions needs at least 1 rows, got 0")
    states = jax.vmap(wrapped.init)(initial_positions)
    chain_keys = jax.random.split(key, num_chains)
    # a chain tests stopping once more after its last move: max_steps + 1 steps at most
    cap = jnp.max(states.max_steps) + 1
    final, run_info = jax.vmap(lambda k, state: run_until(
        k, wrapped, state, done_fn=_is_done, max_steps=cap))(chain_keys, states)
    positions = jax.vmap(wrapped.step.keywords["position_fn"])(final.inner)
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf).reshape(num_chains, -1), axis=1)
                                for leaf in jax.tree.leaves(positions)]), axis=0)
    return positions, StopInfo(final.length, final.truncated | ~final.done,
                               run_info.nonfinite | ~finite)


def _is_done(state: StopState) -> jax.Array:
    return state.done


def sample_multilevel(key: jax.Array, algorithm, logdensity_fn: Callable,
                      init_logdensity_fn: Callable, net: StoppingNet, initial_positions, *,
                      max_steps: int, position_fn: Callable | None = None
                      ) -> tuple[jax.Array, StopInfo]:
    r"""Run the stopped chains of every level of a (multilevel) :class:`StoppingNet` in turn.

    Level ``l = 0, …, L − 1`` wraps the kernel ``algorithm(log π̃_l)``,
    ``log π̃_l = β_l log π̃ + (1 − β_l) log p₀``, ``β_l = (l + 1)/L`` (the last level: π̃
    itself), with ``σ_l = net.at_level(l)`` (:func:`adaptive_stop`), and runs it to termination
    (:func:`sample_until_stopped`, key ``fold_in(key, l)``) from where level ``l − 1`` stopped.
    With exact classifiers every level ends exactly at ``π_l``, the last at π. A one-level net
    runs one level (``algorithm`` may then be the kernel itself).

    Args:
        key: PRNG key.
        algorithm: the constructor ``log-density -> SamplingAlgorithm`` used in training (or,
            for a one-level net, the kernel).
        logdensity_fn, init_logdensity_fn: ``log π̃`` and ``log p₀``, as in training.
        net: the trained :class:`StoppingNet` (from :func:`train_stopping`).
        initial_positions: ``(n, ...)`` draws of ``p₀``.
        max_steps: the cap on each level's moves.
        position_fn: as in :func:`adaptive_stop`.

    Returns:
        ``(positions (n, ...), StopInfo)``: lengths summed over the levels; ``truncated`` if any
        level truncated the chain (its later levels started from a non-terminal state);
        ``nonfinite`` if any level flagged it.
    """
    key = check_key("key", key)
    if not isinstance(net, StoppingNet):
        raise TypeError(f"net must be a StoppingNet, got {type(net).__name__}")
    logdensity_fn = check_callable("logdensity_fn", logdensity_fn)
    init_logdensity_fn = check_callable("init_logdensity_fn", init_logdensity_fn)
    algorithms = level_algorithms(algorithm, logdensity_fn, init_logdensity_fn, net.num_levels)
    x, total = initial_positions, None
    for level, alg in enumerate(algorithms):
        sigma = net if net.num_levels == 1 else net.at_level(level)
        wrapped = adaptive_stop(alg, sigma, position_fn=position_fn, max_steps=max_steps)
        x, info = sample_until_stopped(jax.random.fold_in(key, level), wrapped, x)
        total = info if total is None else StopInfo(
            total.lengths + info.lengths, total.truncated | info.truncated,
            total.nonfinite | info.nonfinite)
    return x, total
