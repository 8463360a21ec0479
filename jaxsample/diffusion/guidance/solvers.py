"""The solvers of :func:`~jaxsample.diffusion.guidance.sample`: DDIM(η), DDPM and NDTM.

diffrax's shape: one entry point, one solver value per update rule; each class holds the rule's
settings (floats traced, structure static) and its docstring states the update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx

__all__ = [
    "DDIM",
    "DDPM",
    "INITS",
    "LEARNING_RATE_SCHEDULES",
    "NDTM",
    "WEIGHT_SCHEMES",
]

WEIGHT_SCHEMES = ("zero", "ones", "ddpm", "ddim")
INITS = ("zero", "random", "causal-zero", "causal-random")
LEARNING_RATE_SCHEDULES = ("linear", "constant")


class DDIM(eqx.Module):
    """The DDIM step (Song, Meng & Ermon 2021), a solver of :func:`sample`.

    With t_k = k/N and the guided prediction ε̃ = ε(x, t_k) − σ_k Σ_j g_j(x, t_k) (the terms of
    ``guidance``), each step is

    .. math::  x_{k−1} = \\sqrt{ᾱ_{k−1}}\\,\\frac{x_k − σ_k ε̃}{\\sqrt{ᾱ_k}} + c_1 ξ + c_2 ε̃,
               \\quad c_1 = η\\sqrt{\\frac{(1 − ᾱ_k/ᾱ_{k−1})(1 − ᾱ_{k−1})}{1 − ᾱ_k}},
               \\quad c_2 = \\sqrt{1 − ᾱ_{k−1} − c_1^2},

    ξ ~ N(0, I). The last step returns x̂₀. η = 0 is deterministic (the probability-flow ODE's
    exponential-integrator step); η = 1 has the law of DDPM's ancestral step with the posterior
    variance (:class:`DDPM`). ``variance="large"`` uses β_k = 1 − ᾱ_k/ᾱ_{k−1} in place of the
    posterior variance: c₁ = η√β_k, c₂ = √((1 − ᾱ_{k−1})(1 − c₁²/(1 − ᾱ_k))), the same mean
    (at η = 1, DDPM's ``"beta"`` step; the auditing code's ``variance_type="large"``; no noise on
    the last step, as DDPM). ``clip_x0 = (lo, hi)`` clamps x̂₀ before the step (image models'
    ``clip_sample``; the auditing code clamps to (−1, 1)).

    Attributes:
        eta: η ∈ [0, 1] (traced).
        variance: ``"small"`` (default) or ``"large"``.
        clip_x0: None or ``(lo, hi)`` (static).
    """

    eta: Any = 0.0
    variance: str = eqx.field(static=True, default="small")
    clip_x0: tuple[float, float] | None = eqx.field(static=True, default=None)


class DDPM(eqx.Module):
    """Ancestral DDPM sampling (Ho, Jain & Abbeel 2020), a solver of :func:`sample`.

    With β_k = 1 − ᾱ_k/ᾱ_{k−1} and ε̃ as in :class:`DDIM`,

    .. math::  x_{k−1} = \\frac{1}{\\sqrt{1 − β_k}}\\Big(x_k − \\frac{β_k}{σ_k}\\,ε̃\\Big) + s_k ξ,

    with s_k² = β_k(1 − ᾱ_{k−1})/(1 − ᾱ_k) (``"posterior"``: the same law as DDIM with η = 1) or
    s_k² = β_k (``"beta"``, no noise on the last step).

    Attributes:
        variance: ``"posterior"`` or ``"beta"``.
    """

    variance: str = eqx.field(static=True, default="posterior")


class NDTM(eqx.Module):
    """NDTM: DDIM steps from a controlled state optimised before every step, a solver of
    :func:`sample` (Pandey, Sofian, Draxler, Karaletsos & Mandt, *Variational Control for Guidance
    in Diffusion Models*, ICML 2025, arXiv:2502.03686).

    At step k (i = N − k steps done) the controlled state is x_k + γ_k u (γ_k =
    ``control_scale``). The control u starts at 0 (``"zero"``), at N(0, I) draws (``"random"``),
    or at the previous step's control (``"causal-zero"``/``"causal-random"``: 0 or N(0, I) at the
    first step) and takes M = ``num_steps`` steps of a fresh ``optimizer`` state on the sum over
    the batch of the per-sample costs

    .. math::  c(u) = w_{term}\\,c\\big(x̂_0(x_k + γ_k u)\\big)
                    + w_{score}\\,‖ε(x_k) − ε(x_k + γ_k u)‖² + w_{control}\\,‖γ_k u‖²

    (per-sample costs are independent, and Adam acts per coordinate, so this is M steps of a
    separate Adam per sample). With ``max_grad_norm = c`` each sample's gradient is scaled to norm
    ≤ c before the optimiser (the auditing code clips at 1). Each update is scaled by the
    learning-rate schedule: the default optimiser is Adam with learning rate λ_i = λ·(1 − i/N)
    (``"linear"``) or λ (``"constant"``); a given ``optimizer`` carries its own learning rate and
    its updates are multiplied by (1 − i/N) or 1. Then the DDIM step of :class:`DDIM` (same η,
    ``variance`` and ``clip_x0``) is taken from x_k + γ_k u (with the ``guidance`` terms, if any,
    evaluated there). x̂₀ in the cost is clamped by ``clip_x0`` too (zero gradient outside).

    **Weights.** w_score and w_control follow ``weights``
    (:func:`jaxsample.kernels.guidance.ndtm_weights`: ``"zero"``, ``"ones"``, ``"ddpm"``,
    ``"ddim"``; one scheme for both or a ``(score, control)`` pair). They are the squared
    coefficients of the state and of ε in the step's mean √(ᾱ_s/ᾱ_k)·x + b·ε, so the control and
    score penalties together are the squared move of the step's mean (without the cross term):
    the control weight is ᾱ_s/ᾱ_k. **Departures from the reference code** (``czi-ai/oc-guidance``
    and its copy in ``vislearn/InvarianceAuditing``): it uses ᾱ_k/ᾱ_s, the inverse, for the
    ``"ddim"`` control weight, and it penalises w_control·γ²·‖γu‖², counting γ twice; jaxsample
    uses ᾱ_s/ᾱ_k and ‖γu‖², the squared distance the control moves the state (its ``"ones"``
    weights are also 1, not the reference's 2·10⁻⁵ and 10⁻⁴).

    **γ schedule.** ``control_scale`` is a float (traced) or a function t ↦ γ(t) of the step time
    t ∈ (0, 1]; a step with γ = 0 skips the optimisation (``lax.cond``: no ε-evaluations) and is a
    plain DDIM step. The auditing configurations switch the control off for the noisy half,
    ``control_scale=lambda t: jnp.where(t > 0.5, 0.0, 1.0)`` (t > 500 of 1000 steps). A function
    is part of the compilation's cache key: reuse one function object (or an equinox module,
    whose arrays are traced) across calls rather than a fresh lambda each time.

    **Reproducing the papers.** NDTM's image inverse problems: 50 steps, M = 5, λ = 0.01
    (linear), η = 0.7, w_term = 50, ``"ddim"`` weights, γ = 1, ``clip_x0=(-1, 1)``. Invariance
    auditing (Rousselot, Wendebourg & Köthe, arXiv:2603.21782): ``FiberCost(φ, x_q,
    loss="norm", per_step_target=True)``, w_term = 1, ``weights="zero"``, M = 5, λ = 0.002
    (linear), ``max_grad_norm=1``, ``clip_x0=(-1, 1)``, a γ schedule that is 0 at the noisy
    steps, ``variance="small"`` or ``"large"`` (its published ImageNet rows used ancestral steps
    with a learned variance, which jaxsample does not have). Adam moves every coordinate by
    about λ per inner step, so set λ to the scale of the data (the default 0.1 suits data of unit
    scale).

    **No convergence status.** The inner optimisation runs exactly M steps, as the paper's does:
    it has no tolerance, so NDTM claims no convergence; ``info`` reports what the control did
    (``terminal_cost``, ``score_penalty``, ``control_norm``, ``final_cost``) and ``nonfinite``
    where a cost or gradient was not finite.

    With ``terminal_weight = 0`` and ``init="zero"`` every control gradient is exactly 0, the
    update is exactly 0 and the result is bitwise the :class:`DDIM` solver's with the same key.

    Cost per step with γ ≠ 0: M + 1 ε-evaluations and M VJPs through ε and the cost (one
    evaluation more for the non-zero inits, one for a per-step fiber target), counted in
    ``info``.

    Attributes:
        terminal_cost: ``c(x) -> scalar`` for one sample (e.g. :class:`FiberCost`).
        optimizer: an ``optax.GradientTransformation`` for the control (with its own learning
            rate); default ``None``: Adam at ``learning_rate``.
        num_steps: M ≥ 1 optimiser steps per diffusion step.
        learning_rate: λ > 0 of the default Adam (traced; default 0.1); leave it ``None`` when
            passing ``optimizer``.
        terminal_weight: w_term ≥ 0 (traced).
        weights: weight scheme(s) of the score and control penalties.
        init: ``"zero"``, ``"random"``, ``"causal-zero"`` or ``"causal-random"``.
        learning_rate_schedule: ``"linear"`` or ``"constant"``.
        control_scale: γ ≥ 0 (traced) or a function ``t -> γ(t)``.
        max_grad_norm: None (no clipping) or c > 0, per-sample gradient clipping (traced).
        eta: η of the DDIM step (traced).
        variance: ``"small"`` or ``"large"``, as in :class:`DDIM`.
        clip_x0: None or ``(lo, hi)``, as in :class:`DDIM` (and in the cost).
    """

    terminal_cost: Callable
    optimizer: Any = eqx.field(static=True, default=None)
    num_steps: int = eqx.field(static=True, default=5)
    learning_rate: Any = None
    terminal_weight: Any = 50.0
    weights: Any = eqx.field(static=True, default="ddim")
    init: str = eqx.field(static=True, default="zero")
    learning_rate_schedule: str = eqx.field(static=True, default="linear")
    control_scale: Any = 1.0
    max_grad_norm: Any = None
    eta: Any = 0.0
    variance: str = eqx.field(static=True, default="small")
    clip_x0: tuple[float, float] | None = eqx.field(static=True, default=None)
