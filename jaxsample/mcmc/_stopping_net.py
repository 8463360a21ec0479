r"""The learned stopping classifier ``σ_θ = 1/h_θ`` of :func:`~jaxsample.mcmc.train_stopping`,
its Poisson/TD loss and the level path of the multilevel scheme.

* :class:`StoppingNet` — ``σ_θ``, read in log-scale (``log h_θ = softplus(f_θ)``), one classifier
  per level; :class:`LevelMLP` its default level-conditioned model and :class:`LogRatio` its
  baseline ``log p₀ − log π̃``;
* :func:`poisson_td_loss` — one level's source-scaled Poisson/TD objective with the minimal-flow
  penalty;
* :func:`level_algorithms` — the base kernel of each level ``π_l ∝ p₀^{1−β_l} π̃^{β_l}``;
* :func:`default_position` — the position a stopping classifier reads from a base state.

The maths (the stopped chain, ``σ* = 1/h``) is in :mod:`jaxsample.mcmc.stopping`.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_int
from jaxsample.core import SamplingAlgorithm

__all__ = ["LevelMLP", "LogRatio", "StoppingNet", "default_position", "level_algorithms",
           "poisson_td_loss"]


def default_position(state):
    """``state.position`` (BlackJAX and jaxsample states) or the state itself."""
    return state.position if hasattr(state, "position") else state


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
    classifier with :meth:`at_level`; :func:`~jaxsample.mcmc.sample_multilevel` chains the levels.

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


def poisson_td_loss(net: StoppingNet, y, x, x_prime, log_ratio_y, flow_penalty):
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


class LevelMLP(eqx.Module):
    """The default level-conditioned model: an MLP on ``(x, β_l)``, ``β_l = (l + 1)/L``."""

    mlp: eqx.nn.MLP
    num_levels: int = eqx.field(static=True)

    def __call__(self, x, level):
        beta = (level + 1).astype(x.dtype) / self.num_levels
        return self.mlp(jnp.concatenate([x, beta[None]]))


class LogRatio(eqx.Module):
    """``log p₀(x) − log π̃(x)`` (a module: equal functions give equal, cache-sharing nets)."""

    init_logdensity_fn: Callable
    logdensity_fn: Callable

    def __call__(self, x):
        return self.init_logdensity_fn(x) - self.logdensity_fn(x)


class _LevelLogDensity(eqx.Module):
    """``log π̃_l = β log π̃ + (1 − β) log p₀`` (a module: equal paths share compilations)."""

    logdensity_fn: Callable
    init_logdensity_fn: Callable
    beta: float = eqx.field(static=True)

    def __call__(self, x):
        return self.beta * self.logdensity_fn(x) + (1 - self.beta) * self.init_logdensity_fn(x)


def level_algorithms(algorithm, logdensity_fn, init_logdensity_fn, num_levels):
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
