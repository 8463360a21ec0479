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

__all__ = ["SCALING_BAND", "STEIN_BAND", "STEIN_LEVEL", "CollapseCriteria"]

STEIN_BAND = (0.6, 1.6)
"""The mean Stein ratio allowed (about sd ratios 0.77–1.26 on a Gaussian)."""

SCALING_BAND = (0.5, 1.5)
"""The per-coordinate scale-mixture (funnel) Stein ratio allowed."""

STEIN_LEVEL = 0.01
"""The family-wise level of the per-coordinate tests' significance part (Bonferroni over d)."""


class CollapseCriteria(eqx.Module):
    """When a particle cloud is not a sample of its target.

    A step is degenerate when any of these holds (``N`` particles in ``d`` dimensions):

    - fewer than ``fraction·N`` distinct particles were taken, or the cloud's effective rank is
      below ``fraction·min(N − 1, d)``, or one proposal holds the weight (ESS < 1.5);
    - with a score: the mean Stein ratio ``−(1/Nd) Σ (x − x̄)·∇log π`` is outside
      ``stein_band``; some coordinate's ratio is outside ``coordinate_stein_band`` *and*
      significant (Bonferroni at ``level`` over ``d``); the score bias (mean offset in
      posterior sds²) exceeds ``max_score_bias``; some coordinate's scale-mixture ratio is
      outside ``scaling_band`` and significant.

    The cloud is collapsed when the exponential average of the degenerate flag, weight
    ``1/patience`` per step, exceeds 1/2 (after 7 degenerate steps in a row for patience 10).

    Attributes:
        fraction: the distinct-particle and effective-rank fraction.
        stein_band: ``(low, high)`` around 1 for the mean Stein ratio.
        coordinate_stein_band: ``(low, high)`` around 1 for one coordinate's ratio: wider,
            since one coordinate is noisier (sd about ``√(2/N)`` on a standard Gaussian; exact
            draws of the bench's ill-conditioned Gaussian reach −1 and 3.8).
        max_score_bias: the largest score bias allowed.
        scaling_band: ``(low, high)`` around 1 for the scale-mixture ratios.
        level: the significance level of the per-coordinate parts.
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
            patience=check_int("patience", self.patience, 1),
        )

    def stein_flags(self, evidence: stein.SteinEvidence) -> tuple[jax.Array, jax.Array]:
        """``(coordinate_bad, scaling_bad)``: a coordinate's linear or scale-mixture ratio is
        wrong by effect and significance."""
        low, high = self.coordinate_stein_band
        coordinate_bad = stein.outside_band(evidence.linear, evidence.linear_z, low, high,
                                            self.level)
        low, high = self.scaling_band
        scaling_bad = stein.outside_band(evidence.scaling, evidence.scaling_z, low, high,
                                         self.level)
        return coordinate_bad, scaling_bad

    def degenerate(self, *, num_distinct, rank, weight_ess, stein_mean, score_bias,
                   coordinate_bad, scaling_bad, num_particles: int, dim: int) -> jax.Array:
        """This step's degenerate flag (NaN Stein statistics, without a score, never fire)."""
        dtype = rank.dtype
        threshold = jnp.asarray(self.fraction, dtype)
        low, high = (jnp.asarray(v, dtype) for v in self.stein_band)
        n = num_particles
        return ((num_distinct.astype(dtype) < threshold * n)
                | (rank < threshold * min(n - 1, dim))
                | (weight_ess < 1.5)
                | (stein_mean < low) | (stein_mean > high)
                | coordinate_bad
                | (score_bias > jnp.asarray(self.max_score_bias, dtype))
                | scaling_bad)

    def collapse(self, rate: jax.Array, degenerate: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(rate, collapsed)``: the exponential average of ``degenerate`` updated, and
        whether it is above 1/2."""
        memory = 1 - 1 / self.patience
        rate = memory * rate + (1 - memory) * degenerate.astype(rate.dtype)
        return rate, rate > 0.5
