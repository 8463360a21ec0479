"""ETD's preconditioners: small objects, each with ``init`` and ``update``.

With a preconditioner ``L`` (``Σ = LLᵀ`` a covariance scale) every ETD step runs in the
whitened coordinates ``u = L⁻¹x``: centres ``m = x + αΣ∇log π``, proposals ``m + √(2α)Lξ``, the
Mahalanobis cost and preconditioned MALA, with ``α`` in whitened units. The importance weights
stay exact for the proposal used: ``L`` is fixed within a step and ``|det L|`` cancels.

A preconditioner is an ``equinox.Module``: its float options are array leaves of the sampler's
step (traced: a new value does not recompile), ``init(x, score)`` gives the running statistic
carried in ``ETDState.preconditioner`` and ``update(statistic, x, score, fraction)`` returns the
new statistic, this step's :class:`Whitening` and whether a non-finite value was met. ``score``
is the particles' scores ``(N, d)`` (None without a score function); ``fraction`` is the collapse
criteria's fraction (:class:`jaxsample.diagnostics.CollapseCriteria`): a cloud whose effective
rank falls below ``fraction·min(N − 1, d)`` keeps the old statistic, so a collapsed cloud cannot
lock itself in.

- :class:`Identity` (``preconditioner=None``): the paper's unpreconditioned step;
- :class:`Fixed`: a given lower Cholesky factor (e.g. :func:`laplace_preconditioner`'s ``chol``,
  or ``Precision(P)``);
- :class:`Ensemble` (``"ensemble"``, the default): the particles' Ledoit–Wolf covariance, an EMA;
- :class:`Fisher` (``"fisher"``): the geometric mean ``C # S⁻¹`` of the particles' covariance and
  the inverse of their scores' covariance (:func:`jaxsample.kernels.linalg.fisher_covariance`):
  ``Σ`` itself on a Gaussian whatever the cloud's spread; needs a score and, with
  ``shrinkage=0``, ``N > d``;
- :class:`Diagonal` (``"diagonal"``): RMSProp on the squared scores, or the particles' variances
  without a score.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsample._checks import check_array, check_choice, check_hyperparameter, is_concrete
from jaxsample.kernels import linalg
from jaxsample.particles.laplace import Precision, damped_chol_of_precision

__all__ = ["PRECONDITIONERS", "Diagonal", "Ensemble", "Fisher", "Fixed", "Identity",
           "Preconditioner", "Whitening"]

PRECONDITIONERS = ("ensemble", "fisher", "diagonal")
"""The string shorthands :func:`resolve` accepts (each the class with its defaults)."""


class Whitening(NamedTuple):
    """This step's coordinates ``u = L⁻¹x``: ``whiten(x) = u``, ``colour(u) = x``,
    ``pull(s) = Lᵀs`` (a score in ``x`` as a score in ``u``) and ``log_det = log|det L|`` (the
    Jacobian that carries a density in ``u`` back to ``x``: ETD's evidence estimate needs it)."""

    whiten: Callable
    colour: Callable
    pull: Callable
    log_det: jax.Array


def _identity(v):
    return v


IDENTITY = Whitening(_identity, _identity, _identity, 0.0)


def factor_whitening(chol) -> Whitening:
    """Whitening by a lower-triangular factor ``L``."""
    # L⁻¹ as a matmul (kernels.linalg.triangular_inverse): a triangular solve with the particles
    # as right-hand sides made the preconditioned step ~2-4x the unpreconditioned one on CPU
    inverse = linalg.triangular_inverse(chol)
    return Whitening(lambda v: v @ inverse.T, lambda u: u @ chol.T, lambda s: s @ chol,
                     jnp.sum(jnp.log(jnp.abs(jnp.diagonal(chol)))))


def _scale_whitening(factor) -> Whitening:
    return Whitening(lambda v: v / factor[None, :], lambda u: u * factor[None, :],
                     lambda s: s * factor[None, :], jnp.sum(jnp.log(factor)))


def _no_failure():
    return jnp.zeros((), bool)


class Preconditioner(eqx.Module):
    """The protocol: ``init``, ``update`` and a validating ``checked``."""

    needs_score: ClassVar[bool] = False
    whitens: ClassVar[bool] = True

    def checked(self) -> Preconditioner:
        """The options validated (errors name the option), floats as traced leaves."""
        return self

    def check_start(self, num_particles: int, dim: int) -> None:
        """Raises when the preconditioner cannot serve ``num_particles`` points in ``dim``."""

    def init(self, x: jax.Array, score: jax.Array | None) -> jax.Array:
        """The running statistic at the start (an empty array when there is none)."""
        return jnp.zeros((0,), x.dtype)

    def update(self, statistic, x, score, fraction) -> tuple[jax.Array, Whitening, jax.Array]:
        raise NotImplementedError


class Identity(Preconditioner):
    """No preconditioning (``preconditioner=None``)."""

    whitens: ClassVar[bool] = False

    def update(self, statistic, x, score, fraction):
        return statistic, IDENTITY, _no_failure()


class Fixed(Preconditioner):
    """A fixed lower Cholesky factor ``chol`` ``(d, d)`` of a covariance scale."""

    chol: Any

    def check_start(self, num_particles, dim):
        if self.chol.shape != (dim, dim):
            raise ValueError(f"preconditioner must have shape ({dim}, {dim}), got "
                             f"{self.chol.shape}")

    def update(self, statistic, x, score, fraction):
        return statistic, factor_whitening(jnp.asarray(self.chol, x.dtype)), _no_failure()


def _ema_unless_collapsed(statistic, fresh, x, ema, fraction):
    """``ema·statistic + (1 − ema)·fresh``, except that a cloud whose effective rank fell below
    ``fraction·min(N − 1, d)`` keeps the old statistic."""
    n, d = x.shape
    mix = jnp.asarray(ema, x.dtype)
    spread = linalg.effective_rank(x) >= jnp.asarray(fraction, x.dtype) * min(n - 1, d)
    return jnp.where(spread, mix * statistic + (1 - mix) * fresh, statistic)


def _check_ema_options(shrinkage, ema):
    return (check_hyperparameter("shrinkage", shrinkage, positive=False, allow_none=True,
                                 maximum=1.0),
            check_hyperparameter("ema", ema, positive=False, maximum=0.999))


class Ensemble(Preconditioner):
    """The particles' Ledoit–Wolf covariance, an exponential average over steps.

    Attributes:
        shrinkage: Ledoit–Wolf intensity ``λ ∈ [0, 1]`` towards ``(tr Σ/d) I``; None estimates
            it (Ledoit & Wolf 2004).
        ema: weight ``∈ [0, 1)`` of the previous statistic: one degenerate step (weight ESS ≈
            1, covariance 0) cannot shrink the proposals to nothing.
    """

    shrinkage: Any = None
    ema: Any = 0.9

    def checked(self):
        return Ensemble(*_check_ema_options(self.shrinkage, self.ema))

    def init(self, x, score):
        return linalg.ledoit_wolf(x, self.shrinkage)

    def update(self, statistic, x, score, fraction):
        statistic = _ema_unless_collapsed(statistic, linalg.ledoit_wolf(x, self.shrinkage), x,
                                          self.ema, fraction)
        chol, bad = linalg.safe_cholesky(statistic)
        return statistic, factor_whitening(chol), bad


def _fisher_statistic(x, score, shrinkage):
    """The pair ``(C, S)``: the Ledoit–Wolf covariances of the particles and of their scores
    ``(2, d, d)``, each score first clipped to 10× the median score norm: far from the
    posterior a few particles' scores reach 10²⁰ (stochastic volatility from N(0, I)), whose
    squares overflow float32; in the bulk the clip does not bind. Norms are taken of rows
    divided by their largest entry, so the clip itself does not overflow."""
    peak = jnp.max(jnp.abs(score), axis=1, keepdims=True)
    peak = jnp.where(peak > 0, peak, jnp.ones_like(peak))
    norms = peak * jnp.linalg.norm(score / peak, axis=1, keepdims=True)
    cap = 10 * jnp.median(norms) + jnp.finfo(x.dtype).tiny
    score = score * jnp.minimum(1, cap / jnp.maximum(norms, jnp.finfo(x.dtype).tiny))
    return jnp.stack([linalg.ledoit_wolf(x, shrinkage), linalg.ledoit_wolf(score, shrinkage)])


class Fisher(Preconditioner):
    """The geometric mean of the particles' and the inverse scores' covariances, each an EMA
    frozen like :class:`Ensemble`'s: the target's covariance on a Gaussian however wrong the
    cloud's spread, so a cloud too narrow or too wide is not locked in.

    Attributes:
        shrinkage: as :class:`Ensemble`'s; shrinkage spoils the mean on an ill-conditioned
            target (``ETD_HARD`` sets 0, which needs more particles than dimensions).
        ema: as :class:`Ensemble`'s.
    """

    shrinkage: Any = None
    ema: Any = 0.9
    needs_score: ClassVar[bool] = True

    def checked(self):
        return Fisher(*_check_ema_options(self.shrinkage, self.ema))

    def check_start(self, num_particles, dim):
        off = (self.shrinkage is not None and is_concrete(self.shrinkage)
               and float(self.shrinkage) == 0)
        if off and num_particles <= dim:
            raise ValueError(
                f"position: preconditioner='fisher' with shrinkage=0 needs more particles than "
                f"dimensions (the covariances of the particles and of their scores are singular "
                f"otherwise), got N = {num_particles} for d = {dim}; use N >= 2d, or "
                "shrinkage=None")

    def init(self, x, score):
        return _fisher_statistic(x, score, self.shrinkage)

    def update(self, statistic, x, score, fraction):
        statistic = _ema_unless_collapsed(
            statistic, _fisher_statistic(x, score, self.shrinkage), x, self.ema, fraction)
        chol, bad = linalg.safe_cholesky(linalg.fisher_covariance(statistic[0], statistic[1]))
        return statistic, factor_whitening(chol), bad


class Diagonal(Preconditioner):
    """RMSProp on the squared scores (with a score), else an EMA of the particles' variances.

    Attributes:
        decay: the average's decay ``β ∈ [0, 1)``.
    """

    decay: Any = 0.9

    def checked(self):
        return Diagonal(check_hyperparameter("decay", self.decay, positive=False,
                                             maximum=0.999))

    def init(self, x, score):
        return jnp.mean(score**2, axis=0) if score is not None else jnp.var(x, axis=0)

    def update(self, statistic, x, score, fraction):
        beta = jnp.asarray(self.decay, x.dtype)
        if score is not None:
            statistic = beta * statistic + (1 - beta) * jnp.mean(score**2, axis=0)
            factor = jax.lax.rsqrt(statistic + jnp.asarray(1e-8, x.dtype))
        else:
            statistic = beta * statistic + (1 - beta) * jnp.var(x, axis=0)
            factor = jnp.sqrt(jnp.maximum(statistic, jnp.finfo(x.dtype).tiny))
        return statistic, _scale_whitening(factor), _no_failure()


_SHORTHANDS = {"ensemble": Ensemble, "fisher": Fisher, "diagonal": Diagonal}


def resolve(value) -> Preconditioner:
    """The checked :class:`Preconditioner` for ``etd``'s ``preconditioner`` argument: None, a
    shorthand of :data:`PRECONDITIONERS`, a :class:`Preconditioner`, a lower Cholesky factor
    ``(d, d)`` or ``Precision(P)``."""
    if value is None:
        return Identity()
    if isinstance(value, str):
        return _SHORTHANDS[check_choice("preconditioner", value, PRECONDITIONERS)]().checked()
    if isinstance(value, Preconditioner):
        return value.checked()
    if isinstance(value, Precision):
        matrix = check_array("preconditioner", value.matrix, ndim=2, finite=True)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"preconditioner must be a square (d, d) matrix, got {matrix.shape}")
        scale, damping, _ = damped_chol_of_precision(matrix)
        if is_concrete(damping) and float(damping) > 0:
            raise ValueError("preconditioner: the precision matrix is not positive definite")
        return Fixed(scale)
    scale = check_array("preconditioner", value, ndim=2, finite=True)
    if scale.shape[0] != scale.shape[1]:
        raise ValueError(f"preconditioner must be a square (d, d) matrix, got {scale.shape}")
    if is_concrete(scale):
        if not bool(jnp.allclose(scale, jnp.tril(scale))) or not bool(
                jnp.all(jnp.diagonal(scale) > 0)):
            raise ValueError("preconditioner must be a lower-triangular Cholesky factor with a "
                             "positive diagonal (e.g. jnp.linalg.cholesky(cov))")
    return Fixed(scale)
