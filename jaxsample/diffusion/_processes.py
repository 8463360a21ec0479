"""Stay-vs-replace decompositions of three uniform-noise discrete generative processes.

All three share the uniform path: a clean token ``x0`` is seen through the channel
:math:`q_\\alpha(x \\mid x_0) = \\alpha\\,\\mathbb{1}[x = x_0] + (1 - \\alpha)/K` at *signal level*
:math:`\\alpha \\in [0, 1]` (0: pure noise, 1: data), so one clean-token denoiser
:math:`p_\\theta(x_0^i = a \\mid x)` (``denoiser(tokens, signal)``) drives all of them. Generation
climbs a grid :math:`\\alpha_0 < \\dots < \\alpha_N = 1`: the model is called at
:math:`\\alpha_0, \\dots, \\alpha_{N-1}` (``N`` = NFE), steps :math:`k < N - 1` are stay-vs-replace
steps :math:`\\alpha_k \\to \\alpha_{k+1}`, and the last call feeds a final denoise draw of every
position, so no process ever evaluates its rate at :math:`\\alpha = 1`.

For each step a process gives, per position ``i`` holding token ``x``, nonnegative *jump weights*
:math:`w(y)` for :math:`y \\ne x` (returned as logs, ``-inf`` at ``x``). Their sum is the jump mass
:math:`\\Delta = \\sum_y w(y)` handed to the jump rule, and the destination law is
:math:`d(y) \\propto w(y)`. Everything is written with :math:`S_x = 1 - p(x)` computed as a
logsumexp over :math:`a \\ne x`, so that no weight is a difference of probabilities.

* :class:`DTMC` — D3PM/UDLM-uniform ancestral step with :math:`\\alpha_t = 1 - t`, with the
  posterior-averaged (D3PM) or the plug-in (UDLM) kernel.
* :class:`CTMC` — the exact reverse generator of the uniform forward process (SEDD-uniform,
  continuous-time UDLM), Euler/τ-leaping; starts at :math:`\\alpha_0 = \\alpha_\\min`
  (``min_signal``) because its hazard diverges at pure noise.

Processes are equinox modules: a float setting (``CTMC.min_signal``) is an array leaf, so it is
traced by the sampler (two values share one compilation; ``jax.vmap`` over it works).
* :class:`Flow` — discrete flow matching with a uniform source and :math:`\\kappa_t = t`; its hazard
  diverges at the data end, which the final denoise step replaces.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_choice, check_hyperparameter, is_concrete

__all__ = ["CTMC", "DTMC", "DTMC_KERNELS", "Flow", "PROCESSES"]

DTMC_KERNELS = ("posterior", "plugin")
"""How :class:`DTMC` turns the clean-token probabilities into a reverse step."""


def _is_current(tokens: jax.Array, vocab_size: int) -> jax.Array:
    """One-hot mask ``(B, L, K)`` of the current tokens ``(B, L)``."""
    return tokens[..., None] == jnp.arange(vocab_size, dtype=tokens.dtype)[None, None, :]


def _current_and_rest(log_posterior: jax.Array, tokens: jax.Array):
    """Log p(x) at the current token, log S_x = log(1 − p(x)), and the one-hot mask of x."""
    is_current = _is_current(tokens, log_posterior.shape[-1])
    neg_inf = jnp.asarray(-jnp.inf, log_posterior.dtype)
    log_p_current = jnp.sum(jnp.where(is_current, log_posterior, 0), axis=-1)
    log_rest = jax.nn.logsumexp(jnp.where(is_current, neg_inf, log_posterior), axis=-1)
    return log_p_current, log_rest, is_current


def _mask_current(log_weights: jax.Array, is_current: jax.Array) -> jax.Array:
    return jnp.where(is_current, jnp.asarray(-jnp.inf, log_weights.dtype), log_weights)


class _Process(eqx.Module):
    """Shared parts of the processes: a linear signal grid ``k / N`` and the "at least one event"
    jump probability ``1 - exp(-Δ)``; a process overrides what differs."""

    def signal_at(self, step, num_steps, dtype) -> jax.Array:
        """Signal level :math:`k / N` (``step`` and ``num_steps`` may be traced)."""
        return jnp.asarray(step).astype(dtype) / jnp.asarray(num_steps).astype(dtype)

    def signal_grid(self, num_steps: int, dtype) -> jax.Array:
        """All signal levels, ``k = 0..N``, shape ``(N + 1,)``."""
        return self.signal_at(jnp.arange(num_steps + 1), num_steps, dtype)

    def jump_probability(self, jump_mass: jax.Array) -> jax.Array:
        """:math:`1 - e^{-\\Delta}`: at least one event of a Poisson clock of mass Δ (the
        ``jump_probability="exponential"`` convention of the sampler's coin rules)."""
        return -jnp.expm1(-jump_mass)


class DTMC(_Process):
    """Ancestral D3PM/UDLM step under uniform noise (:math:`\\alpha_t = 1 - t`, uniform grid in t).

    For a step from signal :math:`a = \\alpha_t` to :math:`b = \\alpha_s > a`, Bayes' rule on the
    uniform channel gives the exact reverse step given a clean token :math:`x_0`,

    .. math::
        q(x_s \\mid x_t, x_0) = \\frac{K a\\,\\delta_{x_t x_0}\\delta_{x_s x_t}
        + (a/b - a)\\,\\delta_{x_s x_t} + (b - a)\\,\\delta_{x_s x_0} + (1 - a/b)(1 - b)/K}
        {K a\\,\\delta_{x_t x_0} + 1 - a},

    (:math:`\\delta` the Kronecker delta), and the model's clean-token probabilities
    :math:`p = p_\\theta(x_0 \\mid x_t)` enter it in one
    of two ways (``kernel``):

    * ``"posterior"`` (default): the exact reverse step averaged over the posterior,
      :math:`p_\\theta(x_s = y \\mid x_t) = \\sum_a p(a)\\,q(y \\mid x_t, a)` (D3PM's
      :math:`x_0`-parameterisation; exact whenever :math:`p` is the true posterior). For
      :math:`y \\ne x` (the current token), with :math:`S_x = 1 - p(x)`,

      .. math::
          w(y) = \\underbrace{\\frac{b - a}{1 - a}}_{A}\\,p(y)
          + \\underbrace{\\frac{(b - a)(1 - b)}{K b}
            \\Big[\\frac{p(x)}{K a + 1 - a} + \\frac{S_x}{1 - a}\\Big]}_{B}.

    * ``"plugin"``: UDLM's kernel (Schiff et al. 2024, and the SHS authors' UDLM sampler), the
      probability vector :math:`p` substituted for the one-hot :math:`x_0` in the formula above:

      .. math::
          w(y) = \\frac{(b - a)\\,p(y) + (b - a)(1 - b)/(K b)}{K a\\,p(x) + 1 - a}.

      It equals ``"posterior"`` when :math:`p` is one-hot and differs otherwise: where the model
      is confident in the current token (:math:`p(x)` near 1) the plug-in jump mass is smaller by
      a factor of order :math:`K a`, 100–10 000× at a 30 000-token vocabulary. A model trained
      UDLM-style (its ELBO is written with this kernel) should be sampled with it.

    The jump mass is :math:`\\Delta = 1 - p_\\text{stay} = \\sum_{y \\ne x} w(y) \\le 1`, already a
    probability, so every Bernoulli convention jumps with probability :math:`\\Delta`.
    Grid: :math:`\\alpha_k = k/N`; with ``"posterior"`` the step to :math:`\\alpha = 1` is exactly
    a draw from :math:`p` (with ``"plugin"`` it is not: it stays with probability
    :math:`(K a + 1 - a)\\,p(x) / (K a\\,p(x) + 1 - a) \\ge p(x)`).

    Args:
        kernel: ``"posterior"`` or ``"plugin"`` (static).

    Reference: Austin et al. 2021 (D3PM, arXiv:2107.03006); Schiff et al. 2024 (UDLM,
    arXiv:2412.10193).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.diffusion.shs import DTMC
        >>> log_post = jnp.log(jnp.full((1, 2, 3), 1 / 3))  # B = 1, L = 2, K = 3
        >>> w = DTMC().log_jump_weights(log_post, jnp.array([[0, 2]]), jnp.float32(0.0),
        ...                             jnp.float32(0.5))
        >>> w.shape, bool(jnp.isneginf(w[0, 1, 2]))
        ((1, 2, 3), True)
    """

    kernel: str = eqx.field(static=True)
    name = "dtmc"

    def __init__(self, kernel: str = "posterior"):
        self.kernel = check_choice("kernel", kernel, DTMC_KERNELS)

    def log_jump_weights(self, log_posterior, tokens, signal, next_signal) -> jax.Array:
        """Log jump weights ``(B, L, K)`` (``-inf`` at the current token) for one step.

        Args:
            log_posterior: normalised log :math:`p_\\theta(x_0 \\mid x_t)`, shape ``(B, L, K)``.
            tokens: current tokens ``(B, L)``.
            signal: :math:`\\alpha_t`, scalar; ``next_signal``: :math:`\\alpha_s > \\alpha_t`.
        """
        a, b = signal, next_signal
        k = jnp.asarray(log_posterior.shape[-1], log_posterior.dtype)
        log_p_current, log_rest, is_current = _current_and_rest(log_posterior, tokens)
        log_step = jnp.log(b - a)
        # (b - a)(1 - b)/(K b), the uniform part; -inf at b = 1
        log_spread = log_step + jnp.log1p(-b) - jnp.log(k * b)
        if self.kernel == "plugin":
            log_norm = jnp.logaddexp(jnp.log(k * a) + log_p_current, jnp.log1p(-a))
            log_weights = (jnp.logaddexp(log_step + log_posterior, log_spread)
                           - log_norm[..., None])
        else:
            log_a = log_step - jnp.log1p(-a)
            log_b = log_spread + jnp.logaddexp(
                log_p_current - jnp.log(k * a + 1 - a), log_rest - jnp.log1p(-a))
            log_weights = jnp.logaddexp(log_a + log_posterior, log_b[..., None])
        return _mask_current(log_weights, is_current)

    def jump_probability(self, jump_mass: jax.Array) -> jax.Array:
        """Bernoulli jump probability: the DTMC jump mass is already a probability."""
        return jump_mass


class CTMC(_Process):
    """Euler/τ-leaping on the exact reverse of the uniform forward CTMC (SEDD-uniform).

    Forward generator per position :math:`Q = \\beta(\\mathbb{1}\\mathbb{1}^\\top / K - I)` with
    :math:`\\beta = -\\dot\\alpha/\\alpha = 1/\\alpha` for :math:`\\alpha_t = 1 - t`. The reverse
    rate to :math:`y \\ne x` is :math:`\\hat R(x \\to y) = (\\beta/K)\\,\\sum_a p(a)\\,
    q_\\alpha(y \\mid a) / q_\\alpha(x \\mid a)` (SEDD's concrete score), which with
    :math:`m = (1 - \\alpha)/K` is the sum of three nonnegative terms

    .. math::
        \\hat R(x \\to y) = \\frac{1}{\\alpha K}\\Big[p(x)\\,\\frac{m}{\\alpha + m} + S_x
        + p(y)\\,\\frac{\\alpha}{m}\\Big].

    The jump weights over a step of length :math:`\\delta\\alpha` are
    :math:`\\hat R\\,\\delta\\alpha` (so :math:`\\Delta = \\lambda\\,\\delta\\alpha` with the hazard
    :math:`\\lambda = \\sum_y \\hat R`), and the Bernoulli rule jumps with probability
    :math:`1 - e^{-\\Delta}` (at least one event).
    The hazard diverges at :math:`\\alpha = 0`, so the grid is
    :math:`\\alpha_k = \\alpha_\\min + (1 - \\alpha_\\min) k / N`; the first steps carry
    :math:`\\Delta \\gg 1` (a near-certain move between near-uniform states).

    Args:
        min_signal: :math:`\\alpha_\\min`, the signal level of the first model call
            (``t = 1 − min_signal`` in diffusion time), in ``(0, 1)``. A float hyper-parameter:
            stored as an array leaf and traced by the sampler (a tracer is accepted unchecked).

    Reference: Campbell et al. 2022 (arXiv:2205.14987); Lou et al. 2024 (SEDD, arXiv:2310.16834).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.diffusion.shs import CTMC
        >>> [round(a, 4) for a in CTMC(min_signal=0.01).signal_grid(4, jnp.float32).tolist()]
        [0.01, 0.2575, 0.505, 0.7525, 1.0]
    """

    min_signal: jax.Array
    name = "ctmc"

    def __init__(self, min_signal=1e-3):
        min_signal = check_hyperparameter("min_signal", min_signal)
        if is_concrete(min_signal) and not float(min_signal) < 1.0:
            raise ValueError(f"min_signal must be in (0, 1), got {float(min_signal)}")
        self.min_signal = min_signal

    def signal_at(self, step, num_steps, dtype) -> jax.Array:
        """Signal level :math:`\\alpha_\\min + (1 - \\alpha_\\min) k/N` (``step`` may be traced)."""
        start = jnp.asarray(self.min_signal, dtype)
        fraction = jnp.asarray(step).astype(dtype) / jnp.asarray(num_steps).astype(dtype)
        return start + (1 - start) * fraction

    def log_jump_weights(self, log_posterior, tokens, signal, next_signal) -> jax.Array:
        """Log of :math:`\\hat R(x \\to y)\\,(\\alpha_{k+1} - \\alpha_k)`, shape ``(B, L, K)``."""
        alpha = signal
        k = jnp.asarray(log_posterior.shape[-1], log_posterior.dtype)
        log_m = jnp.log1p(-alpha) - jnp.log(k)
        log_p_current, log_rest, is_current = _current_and_rest(log_posterior, tokens)
        log_stay_term = log_p_current + log_m - jnp.log(alpha + jnp.exp(log_m))
        log_rate = jnp.logaddexp(
            jnp.logaddexp(log_stay_term, log_rest)[..., None],
            log_posterior + (jnp.log(alpha) - log_m),
        )
        log_scale = jnp.log(next_signal - signal) - jnp.log(alpha * k)
        return _mask_current(log_rate + log_scale, is_current)


class Flow(_Process):
    """Discrete flow matching with a uniform source and the linear path :math:`\\kappa_t = t`.

    The factorised rate :math:`u(y \\mid x) = \\dot\\kappa/(1 - \\kappa)\\, p_{1|t}(y \\mid x_t)`,
    :math:`y \\ne x`, generates the mixture path :math:`\\kappa\\,\\delta_{x_1} + (1 - \\kappa)/K`
    (a different generator from :class:`CTMC` with the same marginals). Jump weights over a step
    :math:`\\delta\\kappa` are :math:`u\\,\\delta\\kappa`, hazard
    :math:`\\lambda = (1 - p(x))/(1 - \\kappa)`, and the Bernoulli rule jumps with probability
    :math:`1 - e^{-\\Delta}`. Grid :math:`\\kappa_k = k/N`: the model is never called at
    :math:`\\kappa = 1`, where the hazard diverges; the last interval is the denoise draw.

    Reference: Gat et al. 2024 (arXiv:2407.15595); Campbell et al. 2024 (arXiv:2402.04997).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.diffusion.shs import Flow
        >>> log_post = jnp.log(jnp.array([[[0.5, 0.25, 0.25]]]))
        >>> w = Flow().log_jump_weights(log_post, jnp.array([[0]]), jnp.float32(0.5),
        ...                             jnp.float32(0.75))
        >>> jnp.exp(w).round(3).tolist()  # u(y | x) dκ = p(y) / (1 - κ) · dκ, y ≠ x
        [[[0.0, 0.125, 0.125]]]
    """

    name = "flow"

    def log_jump_weights(self, log_posterior, tokens, signal, next_signal) -> jax.Array:
        """Log of :math:`u(y \\mid x)\\,(\\kappa_{k+1} - \\kappa_k)`, shape ``(B, L, K)``."""
        is_current = _is_current(tokens, log_posterior.shape[-1])
        log_scale = jnp.log(next_signal - signal) - jnp.log1p(-signal)
        return _mask_current(log_posterior + log_scale, is_current)


PROCESSES = {"dtmc": DTMC, "ctmc": CTMC, "flow": Flow}
