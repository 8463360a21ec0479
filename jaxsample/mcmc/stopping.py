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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsample._checks import (
    check_array,
    check_callable,
    check_int,
    check_key,
    check_number,
    check_position,
    check_progress,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample.core import SamplingAlgorithm, Step, run_until
from jaxsample.kernels.solver import SolverStats

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


def _default_position(state):
    return state.position if hasattr(state, "position") else state


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
    position_fn = check_callable("position_fn", position_fn, allow_none=True) or _default_position
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


# ---------------------------------------------------------------------------------------------
# learned classifier


class StoppingNet(eqx.Module):
    r"""A learned stopping classifier ``σ_θ(x) = 1/h_θ(x)``, ``h_θ = 1 + exp(f_θ(x))``.

    ``h_θ ≥ 1`` is the flow ratio ``G/π`` of the reversible case (``σ* = 1/h``, ``min h = 1``);
    ``log_z`` is the learned log-normaliser ``log Z`` of the unnormalised target, which the
    Poisson equation identifies. With a ``baseline_fn`` ``b(x) = log p₀(x) − log π̃(x)``,
    ``f_θ(x) = model(x) + log Z + b(x)``, i.e. ``h_θ = 1 + s(x)·exp(model(x))`` with the
    Poisson source ``s = Z p₀/π̃``: away from the modes the minimal solution is
    ``h* ≈ 1 + s`` (a chain there leaves at once, so its flow is its source), which spans
    ``e^{±50}`` on a wide ``p₀``, while the network only learns the ``O(1)`` correction. Flow
    ratios are handled in log-scale: ``σ_θ = sigmoid(−f_θ)`` and ``log h_θ = softplus(f_θ)``
    never overflow. With a baseline each ``σ_θ(x)`` costs one ``log p₀`` and one ``log π̃``
    evaluation on top of the network (a stopped MALA step: two density evaluations, not one).

    **Levels** (``num_levels = L > 1``, from ``train_stopping(levels=L)``): one classifier per
    level ``l = 0, …, L − 1`` of the path ``π_l ∝ p₀^{1−β_l} π̃^{β_l}``, ``β_l = (l + 1)/L``
    (level ``l`` starts at ``π_{l−1}``, ``π_{−1} = p₀``, and ends at ``π_l``). The model is
    level-conditioned, ``model(x, l)`` with ``l`` an int32 scalar; ``log_z`` has shape ``(L,)``,
    ``log_z[l] = log(Z_l/Z_{l−1})`` (their sum is ``log Z``); the level's source is
    ``Z_l/Z_{l−1} (p₀/π̃)^{1/L}``, so ``f_θ = model(x, l) + log_z[l] + b(x)/L``. Select a level's
    classifier with :meth:`at_level`; :func:`sample_multilevel` chains the levels.

    Attributes:
        model: any callable module mapping one position ``(d,)`` (and, with levels, the level
            index) to a scalar (e.g. ``equinox.nn.MLP(d, "scalar", width, depth, key=...)``).
        log_z: the learned ``log Z``: a scalar, or ``(num_levels,)`` level increments.
        baseline_fn: ``None`` (``f_θ = model``) or ``b(x)`` as above.
        num_levels: ``L`` (static).
        level: the level this view evaluates (static; ``None`` for a one-level net).
    """

    model: Callable
    log_z: jax.Array
    baseline_fn: Callable | None = None
    num_levels: int = eqx.field(static=True, default=1)
    level: int | None = eqx.field(static=True, default=None)

    def at_level(self, level: int) -> StoppingNet:
        """The classifier of level ``level`` (``0 <= level < num_levels``), ``σ_l``."""
        level = check_int("level", level, 0)
        if level >= self.num_levels:
            raise ValueError(f"level must be < num_levels = {self.num_levels}, got {level}")
        return StoppingNet(self.model, self.log_z, self.baseline_fn, self.num_levels, level)

    def _level_log_z(self):
        """``log Z`` (one level) or ``log(Z_l/Z_{l−1})`` of the selected level."""
        if self.num_levels == 1:
            return self.log_z
        if self.level is None:
            raise ValueError(f"this StoppingNet has {self.num_levels} levels: select one with "
                             "net.at_level(l) (or run all with sample_multilevel)")
        return self.log_z[self.level]

    def log_flow(self, x):
        """``f_θ(x) = log(h_θ(x) − 1)``."""
        log_z = self._level_log_z()
        f = self.model(x) if self.num_levels == 1 else self.model(
            x, jnp.asarray(self.level, jnp.int32))
        if self.baseline_fn is None:
            return f
        return f + log_z.astype(f.dtype) + jnp.asarray(self.baseline_fn(x),
                                                        f.dtype) / self.num_levels

    def log_flow_ratio(self, x):
        """``log h_θ(x) = softplus(f_θ(x)) ≥ 0``."""
        return jax.nn.softplus(self.log_flow(x))

    def flow_ratio(self, x):
        """``h_θ(x) = 1 + exp(f_θ(x)) ≥ 1`` (``inf`` past the dtype's range: prefer
        :meth:`log_flow_ratio`)."""
        return 1.0 + jnp.exp(self.log_flow(x))

    def __call__(self, x):
        """``σ_θ(x) = 1/h_θ(x) = sigmoid(−f_θ(x)) ∈ (0, 1]``."""
        return jax.nn.sigmoid(-self.log_flow(x))


class StoppingTrainInfo(NamedTuple):
    """How the fit of :func:`train_stopping` went.

    Attributes:
        losses: ``(num_steps,)`` the training objective (the mean over levels).
        residual: the mean over the last tenth of the steps of the residual part of the loss,
            ``E_y[r_x(y) r_x'(y)/c(y)²]`` (the penalty left out): an unbiased estimate of the mean
            squared relative Poisson residual, 0 for the exact rule.
        solver: :class:`~jaxsample.SolverStats`; ``successful`` only when ``|residual|`` is at
            most ``tolerance²`` (the Poisson equation solved to a relative RMS residual of
            ``tolerance``) and every loss is finite; ``max_iterations_reached`` otherwise (the
            optimiser's budget ran out before the criterion was met), ``nonfinite`` on a
            NaN/inf loss. A net that fails it may still stop chains, but their terminal law is
            not π to that accuracy.
        nonfinite: a loss went NaN/inf.
    """

    losses: jax.Array
    residual: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


def _poisson_td_loss(net: StoppingNet, y, x, x_prime, log_ratio_y, flow_penalty):
    r"""The Poisson/TD objective of one level with two independent moves plus the minimal-flow
    penalty.

    For states ``y`` and two independent moves ``x, x' ~ K(y, ·)`` the one-move residual is
    ``r_x(y) = h_θ(y) − s(y) − (h_θ(x) − 1)`` with the source ``s = Z_θ p₀/π̃`` (with levels:
    ``(Z_l/Z_{l−1})(p₀/π̃)^{1/L}``); its mean over ``x`` is the residual of
    ``(I − K)h = p₀/π − 1``. ``E[r_x r_{x'}]`` is unbiased for the squared mean residual (a
    single squared residual is not: it adds the move variance). ``flow_penalty · E[h_θ(y)]``
    selects the minimal solution (``min h → 1``), since the equation fixes ``h`` only up to a
    constant.

    **Scale.** Both ``s`` and ``h`` grow like ``p₀/π`` away from the modes (``e^{50}`` on pool
    states of a wide ``p₀``): the raw residuals overflow float32 and the variance of their
    products swamps every gradient (the unweighted loss diverged on GMM9 with ``p₀ = N(0, 25I)``).
    Each state's residual and penalty are therefore divided by the scale of its source,
    ``c(y) = 1 + s(y)`` (held fixed under the gradient, ``h* ≈ 1 + s`` far out), and computed in
    log-space:

    .. math::
        L = \mathbb E_y\Big[\frac{r_x(y)\,r_{x'}(y)}{c(y)^2}\Big]
            + μ\,\mathbb E_y\Big[\frac{h_θ(y)}{c(y)}\Big].

    This keeps the fixed point: a per-state weight ``w(y) > 0`` turns the residual part into
    ``E_y[w(y) (E_x r_x(y))²] ≥ 0``, which still vanishes exactly, hence is minimal, at the exact
    solution, and its gradient there is zero whatever ``w`` is, because every term carries a
    factor ``E_x r_x(y) = 0`` (the two moves are independent). The weighted penalty's derivative
    along the solution family ``h* + t`` is ``μ E[1/c] > 0``, so it still selects the least
    ``t``; near the modes, where ``s < 1``, ``c ∈ [1, 2)`` and both terms are close to the
    unweighted ones. ``c`` must not depend on ``h_θ``: ``c = h + s`` would make the loss
    invariant to scaling ``h`` up, with the trivial minimiser ``h → ∞`` (never stop). A move
    raising the flow more than ``e^{30}``-fold over ``c(y)`` is clipped there (an overflow
    guard; inactive on the benchmarks).
    """
    f = jax.vmap(net.log_flow)
    f_y = f(y)
    log_h_y = jax.nn.softplus(f_y)
    log_s = net._level_log_z().astype(f_y.dtype) + log_ratio_y / net.num_levels
    log_c = jax.lax.stop_gradient(jax.nn.softplus(log_s))  # c = 1 + s
    rest = jnp.exp(log_h_y - log_c) - jnp.exp(log_s - log_c)  # (h(y) − s(y))/c

    def move_term(x):  # (h(x) − 1)/c = exp(f(x) − log c)
        return jnp.exp(jnp.minimum(f(x) - log_c, 30.0))

    r = rest - move_term(x)
    r_prime = rest - move_term(x_prime)
    residual = jnp.mean(r * r_prime)
    return residual + flow_penalty * jnp.mean(jnp.exp(log_h_y - log_c)), residual


class _LevelMLP(eqx.Module):
    """The default level-conditioned model: an MLP on ``(x, β_l)``, ``β_l = (l + 1)/L``."""

    mlp: eqx.nn.MLP
    num_levels: int = eqx.field(static=True)

    def __call__(self, x, level):
        beta = (level + 1).astype(x.dtype) / self.num_levels
        return self.mlp(jnp.concatenate([x, beta[None]]))


class _LevelLogDensity(eqx.Module):
    """``log π̃_l = β log π̃ + (1 − β) log p₀`` (a module: equal paths share compilations)."""

    logdensity_fn: Callable
    init_logdensity_fn: Callable
    beta: float = eqx.field(static=True)

    def __call__(self, x):
        return self.beta * self.logdensity_fn(x) + (1 - self.beta) * self.init_logdensity_fn(x)


def _level_algorithms(algorithm, logdensity_fn, init_logdensity_fn, num_levels):
    """The base kernel of each level: ``algorithm`` itself, or ``algorithm(log π̃_l)``."""
    if isinstance(algorithm, SamplingAlgorithm):
        if num_levels > 1:
            raise TypeError("with levels > 1, algorithm must be a constructor mapping a "
                            "log-density to a SamplingAlgorithm (e.g. functools.partial(mala, "
                            "step_size=0.3)): level l's kernel must leave π_l invariant")
        return [algorithm]
    if not callable(algorithm):
        raise TypeError("algorithm must be a jaxsample.SamplingAlgorithm or a constructor "
                        f"log-density -> SamplingAlgorithm, got {type(algorithm).__name__}")
    algorithms = []
    for level in range(num_levels):
        density = (logdensity_fn if level == num_levels - 1 else
                   _LevelLogDensity(logdensity_fn, init_logdensity_fn, (level + 1) / num_levels))
        built = algorithm(density)
        if not isinstance(built, SamplingAlgorithm):
            raise TypeError(f"algorithm(logdensity) must return a SamplingAlgorithm, got "
                            f"{type(built).__name__}")
        algorithms.append(built)
    return algorithms


def train_stopping(key: jax.Array, algorithm, logdensity_fn: Callable,
                   init_logdensity_fn: Callable, initial_positions, *, levels: int = 1,
                   model=None, position_fn: Callable | None = None, num_steps: int = 2000,
                   pool_steps: int = 50, batch_size: int = 256, learning_rate: float = 1e-2,
                   optimizer: optax.GradientTransformation | None = None,
                   flow_penalty: float = 1e-2, log_z: float = 0.0, width: int = 64,
                   depth: int = 2, baseline: bool = True, tolerance: float = 0.1,
                   progress=None) -> tuple[StoppingNet, StoppingTrainInfo]:
    r"""Fit a stopping classifier ``σ_θ`` by the Poisson/TD loss over a π-reversible base kernel.

    **Loss** (jaxsample's; the paper trains a non-acyclic GFlowNet by trajectory balance with a
    learned forward and backward kernel, which is not reproduced). The Poisson form of the exact
    condition ``σG = π``: for a π-reversible kernel ``K``, ``G = πh`` and
    ``(I − K)h = p₀/π − 1``, ``σ* = 1/h`` with ``min h = 1``. Each optimisation step draws
    ``batch_size`` pooled states ``y`` and two independent moves ``x, x' ~ K(y, ·)`` by the base
    step, and takes an optimiser step on the product of the two one-move residuals (unbiased for
    the squared Poisson residual) plus ``flow_penalty · E[h_θ]`` (the minimal-flow selector),
    each state's terms scaled by its source ``1 + Z p₀/π̃`` so that a wide ``p₀`` trains in
    float32. Training states are a pool of visited states: the base chains run ``pool_steps``
    steps from ``initial_positions`` (draws of ``p₀``), every visit kept. The whole loop is one
    compiled ``lax.scan``.

    **Levels** (the paper's multilevel scheme: ``levels = L`` interpolating levels
    ``β_l = (l + 1)/L`` between ``log p₀`` and ``log π̃``, one level-conditioned network).
    Level ``l``'s chain starts where level ``l − 1`` stopped (at ``π_{l−1}``, ``π_{−1} = p₀``),
    moves by a ``π_l``-reversible kernel ``algorithm(log π̃_l)``, and stops with ``σ_l``; the last
    level ends at π. Each level solves its own Poisson equation
    ``(I − K_l)h_l = π_{l−1}/π_l − 1`` with the source ``(Z_l/Z_{l−1})(p₀/π̃)^{1/L}``: the
    ``L``-th root of the one-level source, so a ``p₀`` far from π splits into ``L`` easier
    problems. The pool of level ``l`` is the visits of ``pool_steps`` steps of ``K_l`` continuing
    the chains of level ``l − 1`` (an annealed path from ``p₀``); every step trains all levels
    on ``batch_size`` states each. Run the result with :func:`sample_multilevel`. As in the
    paper's code, ``β`` is linear in ``l``; the paper's default is ``L = 2``. Measured
    (``bench/bench_stopping.py``, ManyWell-32 from ``p₀ = N(0, 3²I)``, MALA): two levels stop
    after 72 moves with 0.8 % of chains truncated at 400, one level after 95 with 14 %, at a
    lower Sinkhorn divergence; the exact two-level rule on a discretised well needs about half
    the moves of the one-level rule. Neither moves mass across ManyWell's barriers within the
    cap.

    Args:
        key: PRNG key.
        algorithm: the base kernel for one chain, π-reversible (e.g. :func:`~jaxsample.mcmc.mala`),
            or a constructor ``log-density -> SamplingAlgorithm`` (e.g.
            ``functools.partial(mala, step_size=0.3)``), required with ``levels > 1``.
        logdensity_fn: ``log π̃`` of one position.
        init_logdensity_fn: ``log p₀`` of one position (``p₀`` needs a density).
        initial_positions: ``(n, ...)`` draws of ``p₀``.
        levels: ``L >= 1``, the number of levels (1: the one-level classifier).
        model: ``f_θ`` (position -> scalar; with levels ``(position, level) -> scalar``); default
            an ``equinox.nn.MLP`` of ``width``/``depth`` with SiLU activations, for positions of
            shape ``(d,)`` (with levels, on ``(x, β_l)``).
        position_fn: base state -> position, as in :func:`adaptive_stop`.
        num_steps: optimisation steps.
        pool_steps: base-chain steps that build each level's pool (``n (pool_steps + 1)``
            states).
        batch_size: states per optimisation step and level.
        learning_rate: Adam's step (when ``optimizer`` is None).
        optimizer: any ``optax.GradientTransformation`` (e.g. Adam on a decaying schedule);
            default Adam on gradients clipped to global norm 1,
            ``optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))``.
        flow_penalty: ``μ`` of the minimal-flow penalty.
        log_z: initial ``log Z`` (the log-normaliser of ``logdensity_fn``, when known roughly);
            split evenly over the levels.
        width, depth: of the default MLP.
        baseline: learn ``h_θ = 1 + s·exp(model)`` around the source ``s`` (the net's
            ``baseline_fn`` is ``log p₀ − log π̃``; see :class:`StoppingNet`) rather than
            ``h_θ = 1 + exp(model)``. Needed whenever ``p₀/π̃`` spans many orders of magnitude
            over the pool (a ``p₀`` wider than π): without it the fit must grow the net's output
            to ``log(p₀/π̃)`` and the relative residual's gradient vanishes on the way.
        tolerance: the relative RMS Poisson residual the fit must reach for
            ``info.solver`` to report success (``|info.residual| <= tolerance²``); a traced
            value.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the
            optimisation steps from inside the compiled loop.

    **Status.** ``info.solver`` is ``successful`` only when the residual criterion above is
    met; an eager call that misses it warns once (``RuntimeWarning``), a traced one leaves the
    status in the Info. Measured at the defaults (``bench/bench_stopping.py``, 5 seeds, a banana,
    a correlated Gaussian and a two-mode mixture from ``p₀ = N(0, 3²I)``): the criterion is
    missed on all three, and the stopped chains are no better than fixed-length MALA at equal
    cost (see the method page).

    Returns:
        ``(StoppingNet, StoppingTrainInfo)``; pass the net as ``stop_prob_fn`` to
        :func:`adaptive_stop` (one level) or to :func:`sample_multilevel`.

    Example (``p₀ = N(0, 25 I)`` against ``π = N(0, I)``: ``p₀/π`` reaches ``e^{96}`` at
    ``(10, 10)``, past float32's range, yet the loss stays finite):

        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.mcmc import mala, train_stopping
        >>> logpi = lambda x: -0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.pi)
        >>> logp0 = lambda x: -jnp.sum(x**2) / 50 - jnp.log(50 * jnp.pi)
        >>> x0 = 5.0 * jax.random.normal(jax.random.key(0), (16, 2))
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:  # 20 steps: far from solved
        ...     net, info = train_stopping(jax.random.key(1), mala(logpi, step_size=0.3), logpi,
        ...                                logp0, x0, num_steps=20, pool_steps=5,
        ...                                batch_size=32, width=8, depth=1)
        >>> info.losses.shape, bool(info.nonfinite), bool(info.solver.converged), len(caught)
        ((20,), False, False, 1)
        >>> float(net(jnp.zeros(2))) > 0.5, float(net(jnp.full(2, 10.0))) < 1e-30
        (True, True)
    """
    key = check_key("key", key)
    logdensity_fn = check_callable("logdensity_fn", logdensity_fn)
    init_logdensity_fn = check_callable("init_logdensity_fn", init_logdensity_fn)
    levels = check_int("levels", levels, 1)
    algorithms = _level_algorithms(algorithm, logdensity_fn, init_logdensity_fn, levels)
    initial_positions = check_array("initial_positions", initial_positions, kind="numeric",
                                    finite=True, min_rows=1)
    position_fn = check_callable("position_fn", position_fn, allow_none=True) or _default_position
    num_steps = check_int("num_steps", num_steps, 1)
    pool_steps = check_int("pool_steps", pool_steps, 0)
    batch_size = check_int("batch_size", batch_size, 1)
    learning_rate = check_number("learning_rate", learning_rate)
    flow_penalty = check_number("flow_penalty", flow_penalty, positive=False)
    tolerance = check_number("tolerance", tolerance)
    if isinstance(log_z, bool) or not isinstance(log_z, int | float) or not np.isfinite(log_z):
        raise ValueError(f"log_z must be a finite real number, got {log_z!r}")
    if not isinstance(baseline, bool):
        raise TypeError(f"baseline must be a bool, got {type(baseline).__name__}")
    if optimizer is None:
        optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))
    elif not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(f"optimizer must be an optax.GradientTransformation, got "
                        f"{type(optimizer).__name__}")
    progress = check_progress(progress)
    key_model, key_pool, key_train = jax.random.split(key, 3)
    floating = jnp.issubdtype(initial_positions.dtype, jnp.floating)
    dtype = initial_positions.dtype if floating else jnp.asarray(0.0).dtype
    if model is None:
        if initial_positions.ndim != 2:
            raise ValueError("the default model needs initial_positions of shape (n, d), got "
                             f"{initial_positions.shape}; pass model= for other shapes")
        dim = initial_positions.shape[1]
        mlp = eqx.nn.MLP(dim + (levels > 1), "scalar", check_int("width", width, 1),
                         check_int("depth", depth, 0), activation=jax.nn.silu, key=key_model,
                         dtype=dtype)
        model = mlp if levels == 1 else _LevelMLP(mlp, levels)
    log_z0 = jnp.asarray(log_z, dtype) if levels == 1 else jnp.full((levels,), log_z / levels,
                                                                     dtype)
    net = StoppingNet(model, log_z0,
                      _LogRatio(init_logdensity_fn, logdensity_fn) if baseline else None, levels)
    pools, positions, num_chains = [], initial_positions, initial_positions.shape[0]
    for level, (alg, k) in enumerate(zip(algorithms, jax.random.split(key_pool, levels),
                                         strict=True)):
        pool = _visit_pool(k, alg, positions, pool_steps)
        pools.append(pool)
        if level < levels - 1:  # the next level continues these chains
            last = jax.tree.map(lambda leaf: leaf[-num_chains:], pool)
            positions = jax.vmap(position_fn)(last)
    # optax schedules mix an int32 count with floats, which strict promotion refuses
    with jax.numpy_dtype_promotion("standard"):
        net, info = _train(key_train, net, pools, [alg.step for alg in algorithms],
                           position_fn, logdensity_fn, init_logdensity_fn, optimizer, num_steps,
                           batch_size, flow_penalty, tolerance, progress)
    warn_if_unsuccessful(info.solver, "train_stopping's fit of the Poisson equation")
    return net, info


class _LogRatio(eqx.Module):
    """``log p₀(x) − log π̃(x)`` (a module: equal functions give equal, cache-sharing nets)."""

    init_logdensity_fn: Callable
    logdensity_fn: Callable

    def __call__(self, x):
        return self.init_logdensity_fn(x) - self.logdensity_fn(x)


@eqx.filter_jit
def _visit_pool(key, algorithm, initial_positions, pool_steps):
    states = jax.vmap(algorithm.init)(initial_positions)
    if pool_steps == 0:
        return states
    step = jax.vmap(algorithm.step)

    def body(state, k):
        state, _ = step(jax.random.split(k, initial_positions.shape[0]), state)
        return state, state

    _, visits = jax.lax.scan(body, states, jax.random.split(key, pool_steps))
    return jax.tree.map(lambda first, rest: jnp.concatenate(
        [first, rest.reshape((-1,) + rest.shape[2:])]), states, visits)


@eqx.filter_jit
def _train(key, net, pools, base_steps, position_fn, logdensity_fn, init_logdensity_fn,
           optimizer, num_steps, batch_size, flow_penalty, tolerance, progress):
    with jax.named_scope("train_stopping"):
        params, static = eqx.partition(net, eqx.is_inexact_array)
        positions = jax.vmap(position_fn)
        log_ratio_fn = jax.vmap(_LogRatio(init_logdensity_fn, logdensity_fn))
        num_levels = len(pools)

        def level_batch(k, pool, base_step):
            """States ``y`` of one level's pool, two independent moves, ``log p₀/π̃ (y)``."""
            k_idx, k1, k2 = jax.random.split(k, 3)
            pool_size = jax.tree.leaves(pool)[0].shape[0]
            index = jax.random.randint(k_idx, (batch_size,), 0, pool_size)
            y_state = jax.tree.map(lambda leaf: leaf[index], pool)
            move = jax.vmap(base_step)
            y = positions(y_state)
            x = positions(move(jax.random.split(k1, batch_size), y_state)[0])
            x_prime = positions(move(jax.random.split(k2, batch_size), y_state)[0])
            return y, x, x_prime, log_ratio_fn(y).astype(net.log_z.dtype)

        def loss_fn(p, batches):
            trained = eqx.combine(p, static)
            terms = [_poisson_td_loss(trained if num_levels == 1 else trained.at_level(level),
                                      *batch, flow_penalty)
                     for level, batch in enumerate(batches)]
            return (sum(t[0] for t in terms) / num_levels,
                    sum(t[1] for t in terms) / num_levels)

        def body(carry, xs):
            p, opt_state = carry
            step_index, k = xs
            batches = [level_batch(k_level, pool, base_step) for k_level, pool, base_step in
                       zip(jax.random.split(k, num_levels), pools, base_steps, strict=True)]
            (loss, residual), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, batches)
            updates, opt_state = optimizer.update(grads, opt_state, p)
            if progress is not None:
                progress.report(step_index + 1, num_steps)
            return (optax.apply_updates(p, updates), opt_state), (loss, residual)

        steps = (jnp.arange(num_steps, dtype=jnp.int32), jax.random.split(key, num_steps))
        (params, _), (losses, residuals) = jax.lax.scan(
            body, (params, optimizer.init(params)), steps)
        tail = residuals[-max(num_steps // 10, 1):]
        residual = jnp.mean(tail)
        nonfinite = ~jnp.all(jnp.isfinite(losses))
        tolerance = jnp.asarray(tolerance, residual.dtype)
        solver = SolverStats.of(jnp.asarray(num_steps, jnp.int32),
                                converged=jnp.abs(residual) <= tolerance**2,
                                nonfinite=nonfinite | ~jnp.isfinite(residual))
        info = StoppingTrainInfo(losses, residual, solver, nonfinite)
        return eqx.combine(params, static), info


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
    algorithms = _level_algorithms(algorithm, logdensity_fn, init_logdensity_fn, net.num_levels)
    x, total = initial_positions, None
    for level, alg in enumerate(algorithms):
        sigma = net if net.num_levels == 1 else net.at_level(level)
        wrapped = adaptive_stop(alg, sigma, position_fn=position_fn, max_steps=max_steps)
        x, info = sample_until_stopped(jax.random.fold_in(key, level), wrapped, x)
        total = info if total is None else StopInfo(
            total.lengths + info.lengths, total.truncated | info.truncated,
            total.nonfinite | info.nonfinite)
    return x, total
