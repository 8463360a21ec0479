"""Stein identities that test a cloud of points against a target through its score alone.

For a smooth density ``π`` on ``ℝ^d`` with score ``s = ∇log π`` and a vector field ``φ`` that
decays fast enough, integration by parts gives Stein's identity
``E_π[∇·φ(x) + φ(x)·s(x)] = 0``. A cloud ``x_1..x_N`` with scores ``s_i`` is a sample of ``π``
only if the empirical mean of ``∇·φ + φ·s`` is near zero for every ``φ``; each function here
picks a family of fields, needs no reference and no normalising constant, and costs ``O(N·d)``.

- :func:`linear_ratios`: ``φ = (x_k − c_k) e_k``, the spread of each coordinate (1 for a sample
  of ``π``; about the squared sd ratio on a Gaussian).
- :func:`score_bias`: ``φ = e_k``, ``E_π[s] = 0``, the offset of the mean.
- :func:`scaling_ratios`: ``φ = (x_j − β₁) e_j − (β₂ + β₃ x_j) Σ_{k≠j} (x_k − c_k) e_k`` with
  the ``β`` fitted to the cloud, one coordinate's spread *together with a dilation of all the
  others*: the field along which a scale-mixture (a funnel, a
  hierarchical scale) moves. It sees a cloud stuck in a funnel's neck, which the other two do
  not (there the cloud is locally right: every conditional spread matches, only the joint law
  along the funnel is wrong).

Inputs are valid (the caller checked them): ``x`` and ``s`` of shape ``(N, d)``, finite,
``N >= 8``. Dtypes are preserved.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

__all__ = ["SteinEvidence", "evidence", "linear_ratios", "linear_z", "outside_band",
           "scaling_ratios", "score_bias"]


class SteinEvidence(NamedTuple):
    """Every Stein statistic of one cloud, computed once (:func:`evidence`).

    Attributes:
        linear: per-coordinate spread ratios ``(d,)`` (:func:`linear_ratios`).
        linear_z: their z-scores ``(d,)`` (:func:`linear_z`).
        mean_z: the z-score of their mean over the coordinates, a scalar (:func:`mean_z`).
        score_bias: the mean offset in posterior sds², a scalar (:func:`score_bias`).
        scaling: per-coordinate scale-mixture ratios ``(d,)`` (:func:`scaling_ratios`).
        scaling_z: their z-scores ``(d,)``.
    """

    linear: jax.Array
    linear_z: jax.Array
    mean_z: jax.Array
    score_bias: jax.Array
    scaling: jax.Array
    scaling_z: jax.Array


def linear_ratios(x: jax.Array, score: jax.Array) -> jax.Array:
    """Per-coordinate Stein ratios ``r_k = −(1/N) Σ_i (x_ik − x̄_k) s_ik`` ``(d,)``.

    ``E_π[(x_k − c)·∂_k log π(x)] = −1`` for any constant ``c`` (integration by parts in
    ``x_k``), so ``r_k ≈ 1`` for a sample of ``π``, below 1 for a cloud narrower than ``π`` in
    coordinate ``k``, above for a wider one (the squared sd ratio on a Gaussian).

    Example:
        >>> import jax
        >>> x = jax.random.normal(jax.random.key(0), (4000, 2))
        >>> bool(jnp.all(jnp.abs(linear_ratios(0.5 * x, -0.5 * x) - 0.25) < 0.02))
        True
    """
    centred = x - jnp.mean(x, axis=0, keepdims=True)
    return -jnp.mean(centred * score, axis=0)


def linear_z(x: jax.Array, score: jax.Array) -> jax.Array:
    """The z-scores ``(d,)`` of :func:`linear_ratios`: ``√N·mean_i T_ik / sd_i T_ik`` with
    ``T_ik = 1 + (x_ik − x̄_k) s_ik`` (mean zero under ``π``), for :func:`outside_band`.

    On a badly conditioned target one coordinate's ratio is noisy (its score mixes stiff
    directions), so a band on the ratio alone raises false alarms on exact draws; with the
    z-score the band needs evidence too.
    """
    return _z(_linear_terms(x, score))


def _linear_terms(x, score):
    """``T_ik = 1 + (x_ik − x̄_k) s_ik`` ``(N, d)``, mean zero under ``π``."""
    return 1 + (x - jnp.mean(x, axis=0, keepdims=True)) * score


def _z(terms):
    """``√N·mean_i T_i / sd_i T_i`` along the first axis (0 where the terms are constant)."""
    mean, sd = jnp.mean(terms, axis=0), jnp.std(terms, axis=0)
    return jnp.where(sd > 0, jnp.sqrt(terms.shape[0] * 1.0) * mean / jnp.where(sd > 0, sd, 1),
                     jnp.zeros_like(mean))


def mean_z(x: jax.Array, score: jax.Array) -> jax.Array:
    """The z-score of the mean ratio ``mean_k r_k`` (:func:`linear_ratios`), a scalar:
    ``√N·mean_i T_i / sd_i T_i`` with ``T_i = 1 + (1/d) Σ_k (x_ik − x̄_k) s_ik`` (mean zero
    under ``π``).

    On a curved or heavy-tailed target the mean ratio of a finite sample is noisy (exact draws
    of the bench's banana, 100 points: sd 1.07, outside ``(0.6, 1.6)`` on 63 % of clouds), so a
    band on the ratio alone flags exact samples; with the z-score the band needs evidence too.
    """
    return _z(jnp.mean(_linear_terms(x, score), axis=-1))


def score_bias(score: jax.Array) -> jax.Array:
    """``max(mean_k z_k² − 1, 0)/N`` with ``z_k = √N·mean_i s_ik / sd_i s_ik`` (scalar).

    ``E_π[∇log π] = 0``: about 0 for a sample of ``π`` (noise of sd about ``√(2/d)/N`` for
    independent points), and the mean bias² in posterior sds, ``mean_k ((m_k − μ_k)/σ_k)²``,
    for a cloud off-centre on a Gaussian.
    """
    n = score.shape[0]
    mean = jnp.mean(score, axis=0)
    var = jnp.var(score, axis=0)
    z2 = jnp.where(var > 0, n * mean**2 / jnp.where(var > 0, var, jnp.ones_like(var)),
                   jnp.where(mean == 0, jnp.zeros_like(mean), jnp.full_like(mean, jnp.inf)))
    return jnp.maximum(jnp.mean(z2) - 1, 0) / n


def scaling_ratios(x: jax.Array, score: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The Stein identity of each coordinate along the scale-mixture direction, with its z-score.

    Coordinates are first centred at the cloud's mean. For coordinate ``j`` the primary term
    is ``T_j = 1 + x_j s_j`` (``E_π[T_j] = 0``: the field
    ``x_j e_j``). Three more fields give terms of mean zero under ``π`` that act as control
    variates: ``e_j`` (``s_j``), the dilation of the other coordinates ``Σ_{k≠j} x_k e_k``
    (``A_j = (d − 1) + Σ_{k≠j} x_k s_k``) and the same dilation scaled by ``x_j``
    (``x_j A_j``: ``∇·(x_j x_k e_k) = x_j`` for ``k ≠ j``). The statistic is the regression
    estimate ``m_j = mean_i(T_ij − β_jᵀ R_ij)`` with ``R_j = (s_j, A_j, x_j A_j)`` and ``β_j``
    the least-squares fit of ``T_j`` on ``R_j``: the Stein term of the field
    ``(x_j − β₁) e_j − (β₂ + β₃ x_j) Σ_{k≠j} x_k e_k`` that best cancels the noise the other
    coordinates put into ``T_j``.

    Why this family: in a scale mixture one coordinate ``v`` sets the scale of others,
    ``x_k | v ~ N(0, e^v)`` (Neal's funnel; ``log τ`` and the group effects of a centred
    hierarchical model). Along the field that moves ``v`` by one and dilates the others by
    ``e^{1/2}`` the score terms of the others cancel exactly (``s_v + ½ Σ x_k s_k`` is the
    score of ``v``'s marginal), so ``m_v`` tests ``v``'s marginal law with almost no noise,
    while ``T_v`` alone drowns it in the others' noise. The regression finds that field (the
    ``½``, the centring) from the cloud itself.

    Returns:
        ``(ratio, z)``, both ``(d,)``: ``ratio_j = 1 − m_j`` (1 for a sample of ``π``) and
        ``z_j = m_j / se_j`` with ``se_j`` the standard error of the residual mean (``N − 4``
        degrees of freedom): about standard normal for ``N`` independent draws of ``π`` when
        ``N ≫ 4``, heavier-tailed for skewed terms; use it with an effect-size threshold on
        ``|1 − ratio|`` (as :func:`jaxsample.diagnostics.stein_check` does).

    Example:
        >>> import jax
        >>> k1, k2 = jax.random.split(jax.random.key(0))
        >>> v = -4.0 + jax.random.normal(k1, (200, 1))       # a cloud stuck in the neck
        >>> x = jnp.concatenate([v, jnp.exp(v / 2) * jax.random.normal(k2, (200, 4))], 1)
        >>> def score(p):                                   # Neal's funnel, sd(v) = 3
        ...     v, rest = p[:, :1], p[:, 1:]
        ...     q = jnp.sum(rest**2, 1, keepdims=True) * jnp.exp(-v)
        ...     return jnp.concatenate([-v / 9 - 2.0 + q / 2, -rest * jnp.exp(-v)], 1)
        >>> ratio, z = scaling_ratios(x, score(x))
        >>> bool(abs(z[0]) > 10), bool(jnp.all(jnp.abs(z[1:]) < 10))
        (True, True)
    """
    n, d = x.shape
    # centred at the cloud's mean: the statistic is then unchanged by translating the cloud
    # and the target together (the j-th centre is refitted through the s_j regressor)
    x = x - jnp.mean(x, axis=0, keepdims=True)
    xs = x * score
    primary = 1 + xs
    others = (d - 1) + jnp.sum(xs, axis=1, keepdims=True) - xs
    regressors = jnp.stack([score, others, x * others], axis=-1)  # (N, d, 3)
    centred_p = primary - jnp.mean(primary, axis=0, keepdims=True)
    centred_r = regressors - jnp.mean(regressors, axis=0, keepdims=True)
    gram = jnp.einsum("ndi,ndj->dij", centred_r, centred_r)
    # a ridge of relative size 1e-6 of each regressor's own sum of squares keeps a coordinate
    # whose regressors are collinear (d = 1, a constant score) solvable and changes a
    # well-posed fit by a relative 1e-6; being per regressor, it rescales with the regressor,
    # so the statistic stays unchanged when a coordinate is measured in other units (one ridge
    # for all three, sized by their total, swamped the small ones: s_j and x_j A_j scale as
    # 1/σ_j and σ_j)
    diagonal = jnp.diagonal(gram, axis1=1, axis2=2)  # (d, 3)
    ridge = 1e-6 * diagonal + jnp.finfo(x.dtype).tiny
    beta = jnp.linalg.solve(gram + ridge[:, :, None] * jnp.eye(3, dtype=x.dtype)[None],
                            jnp.einsum("ndi,nd->di", centred_r, centred_p)[..., None])[..., 0]
    residual = primary - jnp.einsum("ndi,di->nd", regressors, beta)
    mean = jnp.mean(residual, axis=0)
    se = jnp.std(residual, axis=0) * jnp.sqrt(1.0 / max(n - 4, 1))
    z = jnp.where(se > 0, mean / jnp.where(se > 0, se, 1), jnp.zeros_like(mean))
    return 1 - mean, z


def outside_band(ratio: jax.Array, z: jax.Array, low, high, level) -> jax.Array:
    """Whether some coordinate's ratio (:func:`scaling_ratios`, :func:`linear_ratios`) is wrong
    by both effect and evidence.

    True when a ``ratio_j`` lies outside ``(low, high)`` *and* its ``|z_j|`` exceeds the
    Bonferroni bound ``Φ⁻¹(1 − level/(2d))`` over the ``d`` coordinates. ``ratio`` and ``z``
    are ``(..., d)``; the flag is ``(...)``.
    """
    dtype = ratio.dtype
    threshold = ndtri(1 - jnp.asarray(level, dtype) / (2 * ratio.shape[-1]))
    outside = (ratio < jnp.asarray(low, dtype)) | (ratio > jnp.asarray(high, dtype))
    return jnp.any(outside & (jnp.abs(z) > threshold), axis=-1)


def evidence(x: jax.Array, score: jax.Array) -> SteinEvidence:
    """All the Stein statistics of the cloud ``x`` with scores ``score`` (both ``(N, d)``): what
    a sampler's verdict and :func:`jaxsample.diagnostics.stein_check` read, computed in one
    place. ``O(N·d)``."""
    scaling, scaling_z = scaling_ratios(x, score)
    return SteinEvidence(linear_ratios(x, score), linear_z(x, score), mean_z(x, score),
                         score_bias(score), scaling, scaling_z)
