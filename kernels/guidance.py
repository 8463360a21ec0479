"""Kernels of guided variance-preserving (VP) diffusion sampling: steps, weights, GMM marginals.

VP forward process x_t = √ᾱ_t·x₀ + σ_t·ε, σ_t = √(1 − ᾱ_t), with an ε-predictor ε(x, t); the score
is s = −ε/σ_t and Tweedie's denoised estimate x̂₀ = (x − σ_t·ε)/√ᾱ_t. One reverse step t → s
(ᾱ_s ≥ ᾱ_t) is one of

* DDIM (Song, Meng & Ermon 2021): x_s = √ᾱ_s·x̂₀ + c₁·ξ + c₂·ε with
  c₁ = η·√((1 − ᾱ_t/ᾱ_s)(1 − ᾱ_s)/(1 − ᾱ_t)), c₂ = √(1 − ᾱ_s − c₁²) (:func:`ddim_update`);
  η = 0 is the deterministic probability-flow discretisation, η = 1 has DDPM's law. The
  ``"large"`` variance puts β = 1 − ᾱ_t/ᾱ_s in place of the posterior variance:
  c₁ = η·√β, c₂ = √((1 − ᾱ_s)(1 − c₁²/(1 − ᾱ_t))), the same mean for any η; at η = 1 it is
  DDPM's ``"beta"`` step;
* DDPM ancestral (Ho, Jain & Abbeel 2020): with β = 1 − ᾱ_t/ᾱ_s,
  x_s = (x − β/σ_t·ε)/√(1 − β) + σ·ξ, σ² = β̃ = β(1 − ᾱ_s)/(1 − ᾱ_t) (``"posterior"``) or β
  (``"beta"``, no noise on the last step, s = 0) (:func:`ddpm_update`).

NDTM's control and score penalties (:func:`ndtm_weights`) and the exact marginal log-densities of
a Gaussian mixture under the forward process (:func:`gmm_component_log_densities`) live here too.

Inputs are valid (the public entry points in :mod:`jaxsample.diffusion.guidance` checked them);
every function keeps the dtype of its array arguments and broadcasts scalars.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = [
    "VARIANCES",
    "clip_rows_by_norm",
    "ddim_coefficients",
    "ddim_eps_coefficient",
    "ddim_update",
    "ddpm_eps_coefficient",
    "ddpm_update",
    "gmm_component_log_densities",
    "ndtm_weights",
    "time_gap",
    "time_grid",
    "tweedie",
]

# the DDIM noise levels: the DDPM posterior's ("small") or β's ("large")
VARIANCES = ("small", "large")


def time_grid(num_steps: int, dtype=None) -> jax.Array:
    """The samplers' noisy times t_k = k/N, k = 1..N (ascending), ``(num_steps,)``.

    A sampler with ``num_steps = N`` visits t_N = 1, …, t_1 and ends at t_0 = 0; a time predictor
    for TAG classifies over these N times (class j is t_{j+1}).

    Example:
        >>> time_grid(4).tolist()
        [0.25, 0.5, 0.75, 1.0]
    """
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    return jnp.arange(1, num_steps + 1, dtype=dtype) / num_steps


def tweedie(x: jax.Array, eps: jax.Array, alpha_bar: jax.Array) -> jax.Array:
    """Tweedie's (DDIM's) denoised estimate x̂₀ = (x − √(1 − ᾱ)·ε)/√ᾱ.

    Example:
        >>> import jax.numpy as jnp
        >>> float(tweedie(jnp.float32(1.0), jnp.float32(0.0), jnp.float32(0.25)))
        2.0
    """
    return (x - jnp.sqrt(1 - alpha_bar) * eps) / jnp.sqrt(alpha_bar)


def ddim_coefficients(alpha_t: jax.Array, alpha_s: jax.Array, eta: jax.Array,
                      variance: str = "small"):
    """(c₁, c₂) of the DDIM step t → s: the noise and the ε coefficients.

    ``"small"``: c₁ = η·√((1 − ᾱ_t/ᾱ_s)(1 − ᾱ_s)/(1 − ᾱ_t)), c₂ = √(max(1 − ᾱ_s − c₁², 0)).
    ``"large"``: c₁ = η·√(1 − ᾱ_t/ᾱ_s), c₂ = √(max((1 − ᾱ_s)(1 − c₁²/(1 − ᾱ_t)), 0)); c₁ is set
    to 0 on the step to s = 0 (ᾱ_s = 1), as DDPM's β variance drops its last noise. Both keep the
    mean of x_s given x̂₀ and x_t; both are 0 on the last step.

    Example:
        >>> import jax.numpy as jnp
        >>> c1, c2 = ddim_coefficients(jnp.float32(0.5), jnp.float32(1.0), jnp.float32(1.0))
        >>> float(c1), float(c2)
        (0.0, 0.0)
    """
    if variance == "small":
        c1 = eta * jnp.sqrt((1 - alpha_t / alpha_s) * (1 - alpha_s) / (1 - alpha_t))
        c2 = jnp.sqrt(jnp.maximum(1 - alpha_s - c1 * c1, 0))
        return c1, c2
    c1 = jnp.where(alpha_s < 1, eta * jnp.sqrt(1 - alpha_t / alpha_s), 0)
    c2 = jnp.sqrt(jnp.maximum((1 - alpha_s) * (1 - c1 * c1 / (1 - alpha_t)), 0))
    return c1, c2


def ddim_eps_coefficient(alpha_t, alpha_s, eta, variance: str = "small"):
    """b = c₂ − √(ᾱ_s(1 − ᾱ_t)/ᾱ_t): the DDIM step is x_s = √(ᾱ_s/ᾱ_t)·x + b·ε + c₁·ξ.

    Example:
        >>> import jax.numpy as jnp
        >>> float(ddim_eps_coefficient(jnp.float32(0.5), jnp.float32(1.0), jnp.float32(0.0)))
        -1.0
    """
    _, c2 = ddim_coefficients(alpha_t, alpha_s, eta, variance)
    return c2 - jnp.sqrt(alpha_s / alpha_t * (1 - alpha_t))


def ddpm_eps_coefficient(alpha_t, alpha_s):
    """b = −β/(√(1 − β)·σ_t), β = 1 − ᾱ_t/ᾱ_s: the DDPM step is x_s = x/√(1 − β) + b·ε + s·ξ.

    Example:
        >>> import jax.numpy as jnp
        >>> round(float(ddpm_eps_coefficient(jnp.float32(0.5), jnp.float32(1.0))), 6)
        -1.0
    """
    beta = 1 - alpha_t / alpha_s
    return -beta / (jnp.sqrt(1 - beta) * jnp.sqrt(1 - alpha_t))


def ddim_update(x, eps, alpha_t, alpha_s, eta, noise, variance: str = "small", clip=None):
    """One DDIM step: x_s = √ᾱ_s·x̂₀(x, ε) + c₁·ξ + c₂·ε (``noise`` is ξ ~ N(0, I)).

    ``clip = (lo, hi)`` clamps x̂₀ elementwise first (image models' ``clip_sample``); ``variance``
    as in :func:`ddim_coefficients`.

    Example:
        >>> import jax.numpy as jnp
        >>> one = jnp.float32(1.0)
        >>> float(ddim_update(one, 0 * one, jnp.float32(0.25), one, 0 * one, one))  # s = 0: x̂₀
        2.0
    """
    with jax.named_scope("ddim_update"):
        c1, c2 = ddim_coefficients(alpha_t, alpha_s, eta, variance)
        x0 = tweedie(x, eps, alpha_t)
        if clip is not None:
            x0 = jnp.clip(x0, clip[0], clip[1])
        return jnp.sqrt(alpha_s) * x0 + c1 * noise + c2 * eps


def ddpm_update(x, eps, alpha_t, alpha_s, noise, variance: str, last_step):
    """One ancestral DDPM step with β = 1 − ᾱ_t/ᾱ_s (``variance`` ``"posterior"`` or ``"beta"``).

    x_s = (x − β/σ_t·ε)/√(1 − β) + σ·ξ with σ² = β(1 − ᾱ_s)/(1 − ᾱ_t) or σ² = β; ``last_step``
    (a bool scalar) drops the noise of the ``"beta"`` variance on the step to s = 0, as DDPM does.

    Example:
        >>> import jax.numpy as jnp
        >>> one = jnp.float32(1.0)
        >>> float(ddpm_update(one, 0 * one, jnp.float32(0.25), one, one, "beta", True))
        2.0
    """
    with jax.named_scope("ddpm_update"):
        beta = 1 - alpha_t / alpha_s
        mean = (x - beta / jnp.sqrt(1 - alpha_t) * eps) / jnp.sqrt(1 - beta)
        if variance == "posterior":
            std = jnp.sqrt(beta * (1 - alpha_s) / (1 - alpha_t))
        else:
            std = jnp.where(last_step, jnp.zeros_like(beta), jnp.sqrt(beta))
        return mean + std * noise


def ndtm_weights(score_scheme: str, control_scheme: str, alpha_t, alpha_s, eta,
                 variance: str = "small"):
    """NDTM's per-step weights (w_score, w_control) of ‖ε(x) − ε(x + u)‖² and ‖u‖².

    Both are squared coefficients of the step's mean x_s(x, ε): w_control that of x (the control
    moves the state), w_score that of ε (the control changes the prediction); dropping the cross
    term, w_control·‖u‖² + w_score·‖Δε‖² is the squared change of the step's mean.

    ====================  ====================================  ==========================
    scheme                w_score                               w_control
    ====================  ====================================  ==========================
    ``"zero"``            0                                     0
    ``"ones"``            1                                     1
    ``"ddpm"``            β²/((1 − β)(1 − ᾱ_t)), β = 1 − ᾱ_t/ᾱ_s  1/(1 − β) = ᾱ_s/ᾱ_t
    ``"ddim"``            (c₂ − √(ᾱ_s(1 − ᾱ_t)/ᾱ_t))²            ᾱ_s/ᾱ_t
    ====================  ====================================  ==========================

    (c₂ of ``variance``.) Derivation of the control weight: write the DDIM step as a function of
    the state and the prediction, x_s = √ᾱ_s·(x − σ_t ε)/√ᾱ_t + c₂ε + c₁ξ =
    √(ᾱ_s/ᾱ_t)·x + (c₂ − √(ᾱ_s(1 − ᾱ_t)/ᾱ_t))·ε + c₁ξ. Moving the state by u and the prediction
    by Δε moves x_s by √(ᾱ_s/ᾱ_t)·u + b·Δε, whose squared norm without the cross term is
    (ᾱ_s/ᾱ_t)‖u‖² + b²‖Δε‖²: the control weight is ᾱ_s/ᾱ_t ≥ 1 (DDPM's 1/(1 − β) too). The
    reference implementation of NDTM (Pandey et al., ICML 2025, and its copy in the auditing
    code) uses ᾱ_t/ᾱ_s, the inverse, which makes control *cheaper* at the noisy steps where
    the step amplifies it most; the tests check ᾱ_s/ᾱ_t against ``jax.grad`` of the step.

    Example:
        >>> import jax.numpy as jnp
        >>> w = ndtm_weights("ddim", "ddim", jnp.float32(0.5), jnp.float32(1.0), jnp.float32(0.0))
        >>> [round(float(v), 4) for v in w]   # last step: x_s = x̂₀ = (x − √½ ε)/√½
        [1.0, 2.0]
    """
    ratio = alpha_s / alpha_t
    one = jnp.ones_like(ratio)

    def pick(scheme, ddpm, ddim):
        return {"zero": 0 * one, "ones": one, "ddpm": ddpm, "ddim": ddim}[scheme]

    ddim_score = ddim_eps_coefficient(alpha_t, alpha_s, eta, variance) ** 2
    ddpm_score = ddpm_eps_coefficient(alpha_t, alpha_s) ** 2
    # 1/(1 − β) = ᾱ_s/ᾱ_t: DDPM's and DDIM's coefficients of x agree
    return pick(score_scheme, ddpm_score, ddim_score), pick(control_scheme, ratio, ratio)


def gmm_component_log_densities(projected_x, alpha_bar, log_weights, projected_means,
                                eigenvalues):
    """log π_k + log N(x; √ᾱ·m_k, ᾱ·C_k + (1 − ᾱ)·I) for every component k, from eigen-coordinates.

    With C_k = V_k diag(λ_k) V_kᵀ the marginal covariance at ᾱ is V_k diag(ᾱλ_k + 1 − ᾱ) V_kᵀ, so
    with p_k = V_kᵀx (``projected_x``) and μ_k = V_kᵀm_k (``projected_means``) the Mahalanobis
    term is Σ_i (p_ki − √ᾱ μ_ki)²/(ᾱλ_ki + 1 − ᾱ): O(K·d) per time once p is known.

    Args:
        projected_x: ``(K, d)``.
        alpha_bar: scalar ᾱ in (0, 1].
        log_weights: ``(K,)`` normalised log π.
        projected_means: ``(K, d)``.
        eigenvalues: ``(K, d)`` λ ≥ 0 (the variance ᾱλ + 1 − ᾱ must be positive: ᾱ < 1 or λ > 0).

    Returns:
        ``(K,)`` log-densities.

    Example:
        >>> import jax.numpy as jnp
        >>> out = gmm_component_log_densities(jnp.zeros((1, 2)), jnp.float32(0.5), jnp.zeros(1),
        ...                                   jnp.zeros((1, 2)), jnp.ones((1, 2)))
        >>> round(float(out[0]), 4) == round(-float(jnp.log(2 * jnp.pi)), 4)   # N(0; 0, I_2)
        True
    """
    variance = alpha_bar * eigenvalues + (1 - alpha_bar)
    residual = projected_x - jnp.sqrt(alpha_bar) * projected_means
    dim = projected_x.shape[-1]
    quadratic = jnp.sum(residual * residual / variance, axis=-1)
    log_det = jnp.sum(jnp.log(variance), axis=-1)
    return log_weights - 0.5 * (quadratic + log_det + dim * math.log(2 * math.pi))


def clip_rows_by_norm(grads: jax.Array, max_norm) -> jax.Array:
    """Each row g_i (leading axis) scaled by min(1, c/‖g_i‖): per-sample gradient clipping.

    Rows of norm 0 stay 0 (no division by zero).

    Example:
        >>> import jax.numpy as jnp
        >>> clip_rows_by_norm(jnp.array([[3.0, 4.0], [0.3, 0.4]]), 1.0).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.30000001192092896, 0.4000000059604645]]
    """
    axes = tuple(range(1, grads.ndim))
    norm = jnp.sqrt(jnp.sum(grads * grads, axis=axes, keepdims=True))
    scale = jnp.minimum(1, max_norm / jnp.where(norm > 0, norm, 1))
    return grads * scale.astype(grads.dtype)


def time_gap(log_posterior: jax.Array, times: jax.Array, t: jax.Array) -> jax.Array:
    """|t̂(x) − t| with t̂ = Σ_τ τ·p(τ | x), the posterior-mean time over the grid ``times``.

    Example:
        >>> import jax.numpy as jnp
        >>> float(time_gap(jnp.log(jnp.array([0.5, 0.5])), jnp.array([0.0, 1.0]), 1.0))
        0.5
    """
    return jnp.abs(jnp.sum(jnp.exp(log_posterior) * times) - t)
