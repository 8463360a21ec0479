r"""Training of the learned stopping classifier: :func:`train_stopping` and its
:class:`StoppingTrainInfo`.

The visit pool (the base chains' visited states, level by level) and the optimisation of
:func:`~jaxsample.mcmc._stopping_net.poisson_td_loss` by the library's one training loop
(:func:`jaxsample._training.fit`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

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
    check_progress,
)
from jaxsample._solver import warn_if_unsuccessful
from jaxsample._training import check_optimizer, fit
from jaxsample.kernels.solver import SolverStats
from jaxsample.mcmc._stopping_net import (
    LevelMLP,
    LogRatio,
    StoppingNet,
    default_position,
    level_algorithms,
    poisson_td_loss,
)

__all__ = ["StoppingTrainInfo", "train_stopping"]


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
    on ``batch_size`` states each. Run the result with
    :func:`~jaxsample.mcmc.sample_multilevel`. As in the paper's code, ``β`` is linear in ``l``;
    the paper's default is ``L = 2``. Measured
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
        position_fn: base state -> position, as in :func:`~jaxsample.mcmc.adaptive_stop`.
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
            ``baseline_fn`` is ``log p₀ − log π̃``; see :class:`~jaxsample.mcmc.StoppingNet`)
            rather than
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
        :func:`~jaxsample.mcmc.adaptive_stop` (one level) or to
        :func:`~jaxsample.mcmc.sample_multilevel`.

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
    algorithms = level_algorithms(algorithm, logdensity_fn, init_logdensity_fn, levels)
    initial_positions = check_array("initial_positions", initial_positions, kind="numeric",
                                    finite=True, min_rows=1)
    position_fn = check_callable("position_fn", position_fn, allow_none=True) or default_position
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
    optimizer = check_optimizer("optimizer", optimizer)
    if optimizer is None:
        optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))
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
        model = mlp if levels == 1 else LevelMLP(mlp, levels)
    log_z0 = jnp.asarray(log_z, dtype) if levels == 1 else jnp.full((levels,), log_z / levels,
                                                                     dtype)
    net = StoppingNet(model, log_z0,
                      LogRatio(init_logdensity_fn, logdensity_fn) if baseline else None, levels)
    pools, positions, num_chains = [], initial_positions, initial_positions.shape[0]
    for level, (alg, k) in enumerate(zip(algorithms, jax.random.split(key_pool, levels),
                                         strict=True)):
        pool = _visit_pool(k, alg, positions, pool_steps)
        pools.append(pool)
        if level < levels - 1:  # the next level continues these chains
            last = jax.tree.map(lambda leaf: leaf[-num_chains:], pool)
            positions = jax.vmap(position_fn)(last)
    net, info = _train(key_train, net, pools, [alg.step for alg in algorithms], position_fn,
                       logdensity_fn, init_logdensity_fn, optimizer, num_steps, batch_size,
                       flow_penalty, tolerance, progress)
    warn_if_unsuccessful(info.solver, "train_stopping's fit of the Poisson equation")
    return net, info


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
        log_ratio_fn = jax.vmap(LogRatio(init_logdensity_fn, logdensity_fn))
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

        def loss_fn(p, k):
            """The mean over levels of the loss and of its residual part, one batch a level."""
            trained = eqx.combine(p, static)
            terms = [poisson_td_loss(trained if num_levels == 1 else trained.at_level(level),
                                     *level_batch(k_level, pool, base_step), flow_penalty)
                     for level, (k_level, pool, base_step) in enumerate(zip(
                         jax.random.split(k, num_levels), pools, base_steps, strict=True))]
            return (sum(t[0] for t in terms) / num_levels,
                    sum(t[1] for t in terms) / num_levels)

        params, (losses, residuals) = fit(loss_fn, params, optimizer, key, num_steps,
                                          has_aux=True, progress=progress)
        tail = residuals[-max(num_steps // 10, 1):]
        residual = jnp.mean(tail)
        nonfinite = ~jnp.all(jnp.isfinite(losses))
        tolerance = jnp.asarray(tolerance, residual.dtype)
        solver = SolverStats.of(jnp.asarray(num_steps, jnp.int32),
                                converged=jnp.abs(residual) <= tolerance**2,
                                nonfinite=nonfinite | ~jnp.isfinite(residual))
        info = StoppingTrainInfo(losses, residual, solver, nonfinite)
        return eqx.combine(params, static), info
