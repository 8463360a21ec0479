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
  plus a minimal-flow penalty, over any π-reversible base kernel (MALA by default in the
  examples). The net learns ``h_θ = 1 + s·exp(model)`` around the Poisson source
  ``s = Z p₀/π̃`` and each residual is scaled by ``1 + s`` (:func:`poisson_td_loss`), so a
  ``p₀`` far wider than π (``s`` up to ``e^{50}`` on the pool) trains in float32.
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
from jaxsample.core import SamplingAlgorithm, Step, run_until

__all__ = [
    "StopInfo",
    "StopState",
    "StopStepInfo",
    "StoppingNet",
    "StoppingTrainInfo",
    "adaptive_stop",
    "poisson_td_loss",
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
    """

    inner: Any
    done: jax.Array
    length: jax.Array
    truncated: jax.Array
    max_steps: jax.Array


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
                        state.truncated | truncate, state.max_steps)
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
        false = jnp.zeros((), bool)
        return StopState(inner, false, jnp.zeros((), jnp.int32), false,
                         jnp.asarray(max_steps, jnp.int32))

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

    Attributes:
        model: any callable module mapping one position ``(d,)`` to a scalar (e.g.
            ``equinox.nn.MLP(d, "scalar", width, depth, key=...)``).
        log_z: scalar, the learned ``log Z``.
        baseline_fn: ``None`` (``f_θ = model``) or ``b(x)`` as above.
    """

    model: Callable
    log_z: jax.Array
    baseline_fn: Callable | None = None

    def log_flow(self, x):
        """``f_θ(x) = log(h_θ(x) − 1)``."""
        f = self.model(x)
        if self.baseline_fn is None:
            return f
        return f + self.log_z.astype(f.dtype) + jnp.asarray(self.baseline_fn(x), f.dtype)

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
    """``losses (num_steps,)`` of the training objective; ``nonfinite``: a loss went NaN/inf."""

    losses: jax.Array
    nonfinite: jax.Array


def poisson_td_loss(net: StoppingNet, y, x, x_prime, log_ratio_y, *, flow_penalty):
    r"""The Poisson/TD objective with two independent moves plus the minimal-flow penalty.

    For states ``y`` and two independent moves ``x, x' ~ K(y, ·)`` the one-move residual is
    ``r_x(y) = h_θ(y) − s(y) − (h_θ(x) − 1)`` with the source ``s = Z_θ p₀/π̃``; its mean over
    ``x`` is the residual of ``(I − K)h = p₀/π − 1``. ``E[r_x r_{x'}]`` is unbiased for the
    squared mean residual (a single squared residual is not: it adds the move variance).
    ``flow_penalty · E[h_θ(y)]`` selects the minimal solution (``min h → 1``), since the equation
    fixes ``h`` only up to a constant.

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
    solution (``(I − K)h = p₀/π − 1`` at every ``y``), and its gradient there is zero whatever
    ``w`` is, because every term carries a factor ``E_x r_x(y) = 0`` (the two moves are
    independent). The weighted penalty's derivative along the solution family ``h* + t`` is
    ``μ E[1/c] > 0``, so it still selects the least ``t`` (``min h → 1``); near the modes, where
    ``s < 1``, ``c ∈ [1, 2)`` and both terms are close to the unweighted ones. The weights only
    re-balance the errors of an inexact fit between states (relative to the source instead of
    absolute). ``c`` must not depend on ``h_θ``: ``c = h + s`` would make the loss invariant
    to scaling ``h`` up, with the trivial minimiser ``h → ∞`` (never stop). A move raising the
    flow more than ``e^{30}``-fold over ``c(y)`` is clipped there (an overflow guard; inactive
    on the benchmarks, where the largest ratio seen is about ``e^6``).

    Args:
        net: the :class:`StoppingNet`.
        y, x, x_prime: ``(B, d)`` states and their two independent moves.
        log_ratio_y: ``(B,)`` ``log p₀(y) − log π̃(y)``.
        flow_penalty: ``μ >= 0``.

    Returns:
        The scalar loss.
    """
    f = jax.vmap(net.log_flow)
    f_y = f(y)
    log_h_y = jax.nn.softplus(f_y)
    log_s = net.log_z.astype(f_y.dtype) + log_ratio_y
    log_c = jax.lax.stop_gradient(jax.nn.softplus(log_s))  # c = 1 + s
    rest = jnp.exp(log_h_y - log_c) - jnp.exp(log_s - log_c)  # (h(y) − s(y))/c

    def move_term(x):  # (h(x) − 1)/c = exp(f(x) − log c)
        return jnp.exp(jnp.minimum(f(x) - log_c, 30.0))

    r = rest - move_term(x)
    r_prime = rest - move_term(x_prime)
    return jnp.mean(r * r_prime) + flow_penalty * jnp.mean(jnp.exp(log_h_y - log_c))


def train_stopping(key: jax.Array, algorithm: SamplingAlgorithm, logdensity_fn: Callable,
                   init_logdensity_fn: Callable, initial_positions, *, model=None,
                   position_fn: Callable | None = None, num_steps: int = 2000,
                   pool_steps: int = 50, batch_size: int = 256, learning_rate: float = 1e-2,
                   optimizer: optax.GradientTransformation | None = None,
                   flow_penalty: float = 1e-2, log_z: float = 0.0, width: int = 64,
                   depth: int = 2, baseline: bool = True, progress=None
                   ) -> tuple[StoppingNet, StoppingTrainInfo]:
    r"""Fit a stopping classifier ``σ_θ`` by the Poisson/TD loss over a π-reversible base kernel.

    (The paper's exact losses and multilevel scheme are not reproduced; this is the Poisson form
    of the exact condition ``σG = π``.) Training states are a pool of visited states: the base
    chains run ``pool_steps`` steps from ``initial_positions`` (draws of ``p₀``), every visit
    kept. Each optimisation step draws ``batch_size`` pooled states ``y``, two independent moves
    ``x, x' ~ K(y, ·)`` by ``algorithm.step``, and takes an Adam step (optax) on
    :func:`poisson_td_loss`. The whole loop is one compiled ``lax.scan``.

    Args:
        key: PRNG key.
        algorithm: the base kernel for one chain (π-reversible, e.g. :func:`~jaxsample.mcmc.mala`).
        logdensity_fn: ``log π̃`` of one position.
        init_logdensity_fn: ``log p₀`` of one position (``p₀`` needs a density).
        initial_positions: ``(n, ...)`` draws of ``p₀``.
        model: ``f_θ`` (position -> scalar); default an ``equinox.nn.MLP`` of ``width``/``depth``
            with SiLU activations, for positions of shape ``(d,)``.
        position_fn: base state -> position, as in :func:`adaptive_stop`.
        num_steps: optimisation steps.
        pool_steps: base-chain steps that build the pool (``n (pool_steps + 1)`` states).
        batch_size: states per optimisation step.
        learning_rate: Adam's step (when ``optimizer`` is None).
        optimizer: any ``optax.GradientTransformation`` (e.g. Adam on a decaying schedule);
            default Adam on gradients clipped to global norm 1,
            ``optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))``.
        flow_penalty: ``μ`` of the minimal-flow penalty.
        log_z: initial ``log Z`` (the log-normaliser of ``logdensity_fn``, when known roughly).
        width, depth: of the default MLP.
        baseline: learn ``h_θ = 1 + (Z p₀/π̃)·exp(model)`` (the net's ``baseline_fn`` is
            ``log p₀ − log π̃``; see :class:`StoppingNet`) rather than ``h_θ = 1 + exp(model)``.
            Needed whenever ``p₀/π̃`` spans many orders of magnitude over the pool (a ``p₀``
            wider than π): without it the fit must grow the net's output to ``log(p₀/π̃)`` and
            the relative residual's gradient vanishes on the way.
        progress: an optional meter (e.g. :class:`jaxsample.TextProgress`) reporting the
            optimisation steps from inside the compiled loop.

    Returns:
        ``(StoppingNet, StoppingTrainInfo)``; pass the net as ``stop_prob_fn`` to
        :func:`adaptive_stop`.

    Example (``p₀ = N(0, 25 I)`` against ``π = N(0, I)``: ``p₀/π`` reaches ``e^{96}`` at
    ``(10, 10)``, past float32's range, yet the loss stays finite):

        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.mcmc import mala, train_stopping
        >>> logpi = lambda x: -0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.pi)
        >>> logp0 = lambda x: -jnp.sum(x**2) / 50 - jnp.log(50 * jnp.pi)
        >>> x0 = 5.0 * jax.random.normal(jax.random.key(0), (16, 2))
        >>> net, info = train_stopping(jax.random.key(1), mala(logpi, step_size=0.3), logpi,
        ...                            logp0, x0, num_steps=20, pool_steps=5, batch_size=32,
        ...                            width=8, depth=1)
        >>> info.losses.shape, bool(info.nonfinite)
        ((20,), False)
        >>> float(net(jnp.zeros(2))) > 0.5, float(net(jnp.full(2, 10.0))) < 1e-30
        (True, True)
    """
    key = check_key("key", key)
    if not isinstance(algorithm, SamplingAlgorithm):
        raise TypeError(f"algorithm must be a jaxsample.SamplingAlgorithm, got "
                        f"{type(algorithm).__name__}")
    logdensity_fn = check_callable("logdensity_fn", logdensity_fn)
    init_logdensity_fn = check_callable("init_logdensity_fn", init_logdensity_fn)
    initial_positions = check_array("initial_positions", initial_positions, kind="numeric",
                                    finite=True, min_rows=1)
    position_fn = check_callable("position_fn", position_fn, allow_none=True) or _default_position
    num_steps = check_int("num_steps", num_steps, 1)
    pool_steps = check_int("pool_steps", pool_steps, 0)
    batch_size = check_int("batch_size", batch_size, 1)
    learning_rate = check_number("learning_rate", learning_rate)
    flow_penalty = check_number("flow_penalty", flow_penalty, positive=False)
    if isinstance(log_z, bool) or not isinstance(log_z, int | float) or not np.isfinite(log_z):
        raise ValueError(f"log_z must be a finite real number, got {log_z!r}")
    key_model, key_pool, key_train = jax.random.split(key, 3)
    if model is None:
        if initial_positions.ndim != 2:
            raise ValueError("the default model needs initial_positions of shape (n, d), got "
                             f"{initial_positions.shape}; pass model= for other shapes")
        model = eqx.nn.MLP(initial_positions.shape[1], "scalar", check_int("width", width, 1),
                           check_int("depth", depth, 0), activation=jax.nn.silu, key=key_model,
                           dtype=initial_positions.dtype)
    floating = jnp.issubdtype(initial_positions.dtype, jnp.floating)
    dtype = initial_positions.dtype if floating else jnp.asarray(0.0).dtype
    if not isinstance(baseline, bool):
        raise TypeError(f"baseline must be a bool, got {type(baseline).__name__}")
    net = StoppingNet(model, jnp.asarray(log_z, dtype),
                      _LogRatio(init_logdensity_fn, logdensity_fn) if baseline else None)
    if optimizer is None:
        optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))
    elif not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(f"optimizer must be an optax.GradientTransformation, got "
                        f"{type(optimizer).__name__}")
    pool = _visit_pool(key_pool, algorithm, initial_positions, pool_steps)
    # optax schedules mix an int32 count with floats, which strict promotion refuses
    with jax.numpy_dtype_promotion("standard"):
        return _train(key_train, net, pool, algorithm.step, position_fn, logdensity_fn,
                      init_logdensity_fn, optimizer, num_steps, batch_size, flow_penalty,
                      check_progress(progress))


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
def _train(key, net, pool, base_step, position_fn, logdensity_fn, init_logdensity_fn,
           optimizer, num_steps, batch_size, flow_penalty, progress):
    with jax.named_scope("train_stopping"):
        params, static = eqx.partition(net, eqx.is_inexact_array)
        pool_size = jax.tree.leaves(pool)[0].shape[0]
        move = jax.vmap(base_step)
        positions = jax.vmap(position_fn)

        def loss_fn(p, y, x, x_prime, log_ratio):
            return poisson_td_loss(eqx.combine(p, static), y, x, x_prime, log_ratio,
                                   flow_penalty=flow_penalty)

        def body(carry, xs):
            p, opt_state = carry
            step_index, k = xs
            k_idx, k1, k2 = jax.random.split(k, 3)
            index = jax.random.randint(k_idx, (batch_size,), 0, pool_size)
            y_state = jax.tree.map(lambda leaf: leaf[index], pool)
            y = positions(y_state)
            x = positions(move(jax.random.split(k1, batch_size), y_state)[0])
            x_prime = positions(move(jax.random.split(k2, batch_size), y_state)[0])
            log_ratio = jax.vmap(_LogRatio(init_logdensity_fn, logdensity_fn))(y)
            loss, grads = jax.value_and_grad(loss_fn)(p, y, x, x_prime,
                                                      log_ratio.astype(net.log_z.dtype))
            updates, opt_state = optimizer.update(grads, opt_state, p)
            if progress is not None:
                progress.report(step_index + 1, num_steps)
            return (optax.apply_updates(p, updates), opt_state), loss

        steps = (jnp.arange(num_steps, dtype=jnp.int32), jax.random.split(key, num_steps))
        (params, _), losses = jax.lax.scan(body, (params, optimizer.init(params)), steps)
        info = StoppingTrainInfo(losses, ~jnp.all(jnp.isfinite(losses)))
        return eqx.combine(params, static), info
