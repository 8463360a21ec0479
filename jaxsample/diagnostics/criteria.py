"""The collapse verdict's criteria, in one object: :class:`CollapseCriteria`.

A particle sampler's cloud is judged every step on evidence that needs no reference sample
(counts of distinct particles, the cloud's effective rank, the importance weights' ESS and the
Stein statistics of :func:`jaxsample.kernels.stein.evidence`); a step is *degenerate* when any
criterion fails, and the cloud is *collapsed* when degenerate steps dominate the recent past.
The thresholds live here, below every family, so the sampler that raises the flag (ETD), the
stand-alone test (:func:`jaxsample.diagnostics.stein_check`) and the report
(:func:`jaxsample.diagnostics.diagnose`) read the same numbers: changing a default here changes
the sampler, its flag and the report together.

The float criteria are traced values (an array leaf of the sampler's step), so two samplers that
differ only in a band share one compilation; ``patience`` is static (it shapes nothing, but it is
an integer memory length).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_band, check_hyperparameter, check_int, is_concrete
from jaxsample.kernels import stein

__all__ = ["MASS_MIN_ESS", "MASS_Z", "SCALING_BAND", "STEIN_BAND", "STEIN_LEVEL",
           "CollapseCriteria"]

STEIN_BAND = (0.6, 1.6)
"""The mean Stein ratio allowed (about sd ratios 0.77–1.26 on a Gaussian)."""

SCALING_BAND = (0.5, 1.5)
"""The per-coordinate scale-mixture (funnel) Stein ratio allowed."""

STEIN_LEVEL = 0.01
"""The family-wise level of the per-coordinate tests' significance part (Bonferroni over d)."""


MASS_Z = 2.0
"""The mass-loss test's margin in standard errors, on each side: the best lower bound so far
against the current upper bound."""

MASS_MIN_ESS = 20.0
"""The raw weight ESS below which a step's evidence estimate is not used: the delta-method
variance ``1/ESS`` needs the mean weight to be near its CLT, and with degenerate weights the
log mean weight is biased low by more than that (ETD_HARD at d = 103, weight ESS 2–3, raised a
false ``mass_lost`` on a calibrated cloud without this guard)."""


class CollapseCriteria(eqx.Module):
    """When a particle cloud is not a sample of its target.

    A step is degenerate when any of these holds (``N`` particles in ``d`` dimensions):

    - fewer than ``fraction·N`` distinct particles were taken, or the cloud's effective rank is
      below ``fraction·min(N − 1, d)``, or one proposal holds the weight (ESS < 1.5);
    - with a score: the mean Stein ratio ``−(1/Nd) Σ (x − x̄)·∇log π`` is outside
      ``stein_band`` *and* significant (at ``level``: on a curved target such as the banana the
      ratio of an exact cloud of 100 points leaves the band on 63 % of clouds); some coordinate's
      ratio is outside ``coordinate_stein_band`` *and*
      significant (Bonferroni at ``level`` over ``d``); the score bias (mean offset in
      posterior sds²) exceeds ``max_score_bias``; some coordinate's scale-mixture ratio is
      outside ``scaling_band`` and significant.

    The cloud is collapsed when the exponential average of the degenerate flag, weight
    ``1/patience`` per step, exceeds 1/2 (after 7 degenerate steps in a row for patience 10).

    **Mass lost** (:meth:`mass_loss`). A cloud can lose a whole mode and look healthy: every
    check above is local. The importance estimate of the evidence ``Ẑ_t = (1/P) Σ_j
    π(y_j)/q_t(y_j)`` (ETD's ``log_evidence``) counts the mass of ``π`` the pool covers, so
    when a mode of mass ``f`` empties it falls by ``log(1/(1 − f))`` and stays there (two modes
    0.3 / 0.7: by 0.356, measured 0.355–0.357). Each step's ``log Ẑ_t`` has the delta-method
    variance ``σ_t² ≈ 1/ESS_t`` (``ESS_t`` the raw weight ESS), so the running estimate is the
    precision-weighted mean with forgetting ``λ = 1 − 1/patience``: ``m_t = B_t/A_t`` with
    ``A_t = Σ_s λ^{t−s}/σ_s²``, ``B_t = Σ_s λ^{t−s} log Ẑ_s/σ_s²``, variance ``v_t = C_t/A_t²``,
    ``C_t = Σ_s λ^{2(t−s)}/σ_s²`` (steps with degenerate weights, whose estimate is noisy and
    biased low, count little). ``best_t = max_{s≤t}(m_s − z√v_s)`` is the best lower bound
    seen, and mass is *lost* while ``m_t + z√v_t < best_t − log(1/(1 − max_mass_loss))``
    (``z = MASS_Z``). Steps whose raw weight ESS is below :data:`MASS_MIN_ESS` are left out (the
    delta method does not hold there), so where ETD's weights are degenerate (``d ≳ 50–100``)
    the test abstains. It sees mass the cloud covered and then lost, not mass it never reached
    (a start inside one mode).

    Attributes:
        fraction: the distinct-particle and effective-rank fraction.
        stein_band: ``(low, high)`` around 1 for the mean Stein ratio.
        coordinate_stein_band: ``(low, high)`` around 1 for one coordinate's ratio: wider,
            since one coordinate is noisier (sd about ``√(2/N)`` on a standard Gaussian; exact
            draws of the bench's ill-conditioned Gaussian reach −1 and 3.8).
        max_score_bias: the largest score bias allowed.
        scaling_band: ``(low, high)`` around 1 for the scale-mixture ratios.
        level: the significance level of the per-coordinate parts.
        max_mass_loss: the fraction of the target's mass the cloud may stop covering before
            ``mass_lost`` (0.15: a lost mode of 15 % or more).
        patience: the verdict's memory in steps (static).

    Example:
        >>> from jaxsample.diagnostics import CollapseCriteria
        >>> CollapseCriteria(patience=20).checked().patience
        20
    """

    fraction: Any = 0.1
    stein_band: Any = STEIN_BAND
    coordinate_stein_band: Any = (0.3, 3.0)
    max_score_bias: Any = 0.05
    scaling_band: Any = SCALING_BAND
    level: Any = STEIN_LEVEL
    max_mass_loss: Any = 0.15
    patience: int = eqx.field(static=True, default=10)

    def checked(self) -> CollapseCriteria:
        """The criteria validated (errors name the field), floats as traced array leaves."""
        level = check_hyperparameter("level", self.level)
        if is_concrete(level) and not level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        return CollapseCriteria(
            fraction=check_hyperparameter("collapse fraction", self.fraction, positive=False,
                                          maximum=1.0),
            stein_band=check_band("stein_band", self.stein_band, around=1.0),
            coordinate_stein_band=check_band("coordinate_stein_band",
                                             self.coordinate_stein_band, around=1.0),
            max_score_bias=check_hyperparameter("max_score_bias", self.max_score_bias),
            scaling_band=check_band("scaling_band", self.scaling_band, around=1.0),
            level=level,
            max_mass_loss=check_hyperparameter("max_mass_loss", self.max_mass_loss,
                                               maximum=1.0),
            patience=check_int("patience", self.patience, 1),
        )

    def stein_flags(self, evidence: stein.SteinEvidence
                    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(mean_bad, coordinate_bad, scaling_bad)``: the mean linear ratio, a coordinate's
        linear ratio or its scale-mixture ratio is wrong by effect and significance (the mean
        at ``level``, the coordinates at ``level`` Bonferroni over ``d``)."""
        low, high = self.stein_band
        mean_bad = stein.outside_band(jnp.mean(evidence.linear)[None], evidence.mean_z[None],
                                      low, high, self.level)
        low, high = self.coordinate_stein_band
        coordinate_bad = stein.outside_band(evidence.linear, evidence.linear_z, low, high,
                                            self.level)
        low, high = self.scaling_band
        scaling_bad = stein.outside_band(evidence.scaling, evidence.scaling_z, low, high,
                                         self.level)
        return mean_bad, coordinate_bad, scaling_bad

    def degenerate(self, *, num_distinct, rank, weight_ess, mean_bad, score_bias,
                   coordinate_bad, scaling_bad, num_particles: int, dim: int) -> jax.Array:
        """This step's degenerate flag (NaN Stein statistics, without a score, never fire)."""
        dtype = rank.dtype
        threshold = jnp.asarray(self.fraction, dtype)
        low, high = (jnp.asarray(v, dtype) for v in self.stein_band)
        n = num_particles
        return ((num_distinct.astype(dtype) < threshold * n)
                | (rank < threshold * min(n - 1, dim))
                | (weight_ess < 1.5)
                | mean_bad
                | coordinate_bad
                | (score_bias > jnp.asarray(self.max_score_bias, dtype))
                | scaling_bad)

    def collapse(self, rate: jax.Array, degenerate: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(rate, collapsed)``: the exponential average of ``degenerate`` updated, and
        whether it is above 1/2."""
        memory = 1 - 1 / self.patience
        rate = memory * rate + (1 - memory) * degenerate.astype(rate.dtype)
        return rate, rate > 0.5

    def mass_loss(self, evidence: jax.Array, log_evidence: jax.Array,
                  weight_ess: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(evidence, lost)``: the running statistic ``(A, B, C, best)`` (start ``(0, 0, 0,
        −inf)``, see the class docstring) updated with this step's ``log Ẑ`` and raw weight
        ESS, and whether mass is lost. A non-finite ``log Ẑ``, or a raw weight ESS below
        :data:`MASS_MIN_ESS`, leaves it unchanged (the test abstains)."""
        dtype = evidence.dtype
        total, weighted, squares, best = evidence[0], evidence[1], evidence[2], evidence[3]
        forget = jnp.asarray(1 - 1 / self.patience, dtype)
        precision = weight_ess  # 1 / the step's variance 1/ESS
        ok = jnp.isfinite(log_evidence) & (weight_ess >= jnp.asarray(MASS_MIN_ESS, dtype))
        total = jnp.where(ok, forget * total + precision, total)
        weighted = jnp.where(ok, forget * weighted + precision * log_evidence, weighted)
        squares = jnp.where(ok, forget**2 * squares + precision, squares)
        seen = total > 0
        safe = jnp.where(seen, total, 1.0)
        mean = weighted / safe
        margin = jnp.asarray(MASS_Z, dtype) * jnp.sqrt(squares) / safe
        best = jnp.where(ok & seen, jnp.maximum(best, mean - margin), best)
        drop = -jnp.log1p(-jnp.asarray(self.max_mass_loss, dtype))
        lost = seen & (mean + margin < best - drop)
        return jnp.stack([total, weighted, squares, best]), lost
