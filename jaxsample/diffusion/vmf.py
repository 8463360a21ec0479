"""vMF spherical flows: generating discrete sequences on the sphere with ODE and PC samplers.

Each of V tokens has a fixed unit embedding e_k ∈ S^{d−1}; a sequence g ∈ [V]^L lives on
(S^{d−1})^L. The noise path (Chemseddine, Kornhardt & Steidl, *Spherical Flows for Sampling
Categorical Data*, arXiv:2605.05629) draws every position independently from a von Mises–Fisher
law whose concentration grows from 0 (uniform) to κ_max (clean):

.. math::  x_l \\mid g \\sim \\mathrm{vMF}(e_{g_l}, κ(t)),\\qquad κ(t) = κ_{\\max}\\,s(t).

Radial symmetry reduces the continuity equation to a scalar ODE in the cosine u = eᵀx, which gives
the conditional velocity a_t(u)·P_x e (:mod:`jaxsample.kernels.sphere`). With the token posterior
π_l(k) = p(g_l = k | x, t) — the only learned object, trained by cross-entropy — the marginal
velocity and score are posterior-weighted tangent sums:

.. math::  v_l = Σ_k π_l(k)\\,a_t(e_k^\\top x_l)\\,P_{x_l} e_k, \\qquad
           s_l = κ(t)\\,Σ_k π_l(k)\\,P_{x_l} e_k .

:func:`sample` integrates the ODE from the uniform law (the exact κ = 0 marginal) with
retracted Euler steps, optionally adding Langevin corrector steps that target the marginal
at each new time (predictor–corrector), and decodes g_l = argmax_k π_l(k) at t_end.

Paths: :class:`VMFPath` (the method); the baselines :class:`GeodesicPath` (Riemannian flow
matching from a uniform source) and :class:`EuclideanPath` (linear flow matching in ℝ^d) from
:mod:`jaxsample.diffusion.baselines` plug into the same sampler. Exact posteriors for testing
without training: :class:`Sudoku4Oracle` (the 288 valid 4×4 Sudoku grids) and
:class:`MarkovChainOracle` (a first-order chain, forward–backward).

From the paper and the authors' code (JChemseddine/spherical, branch paper-release): the vMF
path, the posterior-weighted fields, κ_max = 50 with a linear schedule (uniform steps in κ), ODE
sampling by default and the corrector rule ε = 0.01(1 − κ/κ_max)² (``corrector="vanishing"``,
the default of the PC sampler). Derived here: the profile formula a_t(u), the retracted Euler
predictor, decoding by the posterior's argmax. jaxsample's own options (reasons and measured
prices in :class:`VMFPath`): the t² schedule and the corrector rule ε = c/(κ + d − 1)
(``corrector="variance"``: better at few steps, biased at many).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_clamp,
    check_fn_output,
    check_hyperparameter,
    check_int,
    check_key,
    is_concrete,
)
from jaxsample.diffusion._oracles import MarkovChainOracle, Sudoku4Oracle
from jaxsample.diffusion._paths import FlowPath, SpherePath, VelocityTable, default_times
from jaxsample.diffusion.baselines import EuclideanPath, GeodesicPath
from jaxsample.kernels import sphere

__all__ = [
    "EuclideanPath",
    "GeodesicPath",
    "MarkovChainOracle",
    "VMFInfo",
    "Sudoku4Oracle",
    "VMFPath",
    "VelocityTable",
    "sample",
]

SAMPLERS = ("ode", "pc")
SCHEDULES = ("linear", "quadratic")
CORRECTORS = ("vanishing", "variance")
POSTERIORS = ("probabilities", "logits")
"""What ``posterior_fn`` returns: token probabilities (rows summing to 1) or logits."""
# the relative corrector step size c of each rule when the caller gives none: 1 for jaxsample's
# variance rule (measured, see sample), 0.01 for the paper's vanishing rule (authors' code)
DEFAULT_CORRECTOR_STEP_SIZES = {"variance": 1.0, "vanishing": 0.01}


def _schedule_fraction(schedule, t):
    """s(t) and s'(t) of κ(t) = κ_max·s(t)."""
    if schedule == "quadratic":
        return t**2, 2 * t
    if schedule == "linear":
        return t, jnp.ones_like(t)
    return jax.jvp(schedule, (t,), (jnp.ones_like(t),))


class VMFPath(SpherePath):
    """The vMF noise path x_l | g ~ vMF(e_{g_l}, κ(t)), κ(t) = κ_max·s(t), on (S^{d−1})^L.

    A pytree (equinox module): ``kappa_max`` is an array leaf, so it is traced under ``jit``
    and ``vmap`` (one compilation serves every κ_max); ``dim``, ``schedule``, ``corrector`` and
    ``num_angles`` are static.

    Settings that reproduce the paper (the authors' code, JChemseddine/spherical, branch
    paper-release): ``kappa_max=50``, ``schedule="linear"`` (a uniform time grid is then a
    uniform grid in κ), and with ``sampler="pc"`` the ``corrector="vanishing"`` rule (the
    default) with its default c = 0.01 (the authors' sampler runs without a corrector by
    default, as :func:`sample` does). jaxsample's own options, with the reason:

    * ``schedule="quadratic"`` (κ = κ_max t², the default before the authors' code was read):
      κ′(0) = 0, so the first predictor step does not move (at 8 steps the Euler increments of κ
      sum to 43.75 of 50) and the steps crowd towards the clean end where the posterior
      decides. Measured on Sudoku-4 with d = 8 random embeddings: with the exact oracle
      (κ_max = 50, 4096 grids, NFE 8–32, ODE and PC) both schedules decode valid grids every
      time and their grid χ² lie within the Monte Carlo floor's spread (``bench/results_vmf.md``
      has both rows); with the learned posterior of ``examples/vmf_sudoku.py`` (κ_max = 100,
      trained under each schedule's own κ law, one seed) t² gave more valid grids at NFE 32,
      PC 0.53 vs 0.41 and ODE 0.23 vs 0.19: a network that is least accurate near the clean
      end profits from the extra steps there.
    * ``corrector="variance"`` (the PC default before the measurement below): ε =
      c/(κ(t) + d − 1), the per-direction variance of vMF(κ), so each Langevin step moves a
      fixed fraction of the conditional spread at every κ. It does not vanish at the clean end
      nor as the steps shrink, where an unadjusted Langevin step of ε ≈ c/κ leaves a stationary
      variance ≈ 1/(1 − εκ/2) times the target's (≈ 1.8× at c = 1, d = 8, κ = 50), so more
      steps make it *worse*. Measured (exact :class:`MarkovChainOracle`, V = 3, L = 4, d = 8,
      κ_max = 50, 4 000 sequences, 5 seeds; sequence TV over the 81 sequences, floor 0.056):
      ``"variance"`` 0.086 / 0.063 / 0.078 at 8 / 32 / 128 predictor steps, the paper's
      ``"vanishing"`` (default) 0.097 / 0.055 / 0.054, the ODE 0.106 / 0.059 / 0.053. The
      price of the converging default: at 8 steps the variance rule is ahead (0.086 vs 0.097);
      from 32 steps it is behind and falls further.

    The conditional velocity coefficient a_t(u) is computed at each call from κ(t) and κ'(t) on
    an angle grid of ``num_angles`` nodes (O(num_angles) per time step, no Bessel functions;
    :func:`jaxsample.kernels.sphere.log_velocity_profile`) and interpolated linearly in the angle.

    Args:
        dim: embedding dimension d ≥ 2 (the sphere is S^{d−1}).
        kappa_max: κ(1) > 0, default 50 (the paper's). Choose it so that vMF(e, κ_max) is
            decodable: the posterior at t = 1 should concentrate
            (κ_max·(1 − max_{j≠k} e_jᵀe_k) ≫ 1).
        schedule: ``"linear"`` (s = t, the default, the paper's), ``"quadratic"`` (s = t²), or a
            callable ``s(t)`` with s(0) = 0, s(1) = 1, non-decreasing (its derivative by
            ``jax.jvp``).
        corrector: the corrector's step-size rule ε = c·``corrector_scale(t)``:
            ``"vanishing"`` (default, the paper's; scale (1 − κ(t)/κ_max)², default c = 0.01)
            or ``"variance"`` (scale 1/(κ(t) + d − 1), default c = 1; biased as the steps
            grow, above).
        num_angles: angle-grid nodes of the velocity profile (≥ 3).

    Example:
        >>> import jax.numpy as jnp
        >>> path = VMFPath(3, 20.0)
        >>> round(float(path.kappa(jnp.float32(0.5))), 4), round(float(path.mean_cosine(
        ...     jnp.float32(1.0))), 4)   # A_3(20) = coth 20 − 1/20
        (10.0, 0.95)
        >>> path.velocity_table().log_coefficient.shape
        (65, 1025)
    """

    kappa_max: jax.Array
    schedule: str | Callable = eqx.field(static=True)
    corrector: str = eqx.field(static=True)
    num_angles: int = eqx.field(static=True)

    has_score = True

    def __init__(self, dim: int, kappa_max=50.0, schedule: str | Callable = "linear", *,
                 corrector: str = "vanishing", num_angles: int = 1025):
        self.dim = check_int("dim", dim, 2)
        self.kappa_max = check_hyperparameter("kappa_max", kappa_max)
        if isinstance(schedule, str):
            check_choice("schedule", schedule, SCHEDULES)
        else:
            check_callable("schedule", schedule)
        self.schedule = schedule
        self.corrector = check_choice("corrector", corrector, CORRECTORS)
        self.num_angles = check_int("num_angles", num_angles, 3)

    @property
    def default_corrector_step_size(self) -> float:
        """c when the sampler is given none: 1 (``"variance"``) or 0.01 (``"vanishing"``)."""
        return DEFAULT_CORRECTOR_STEP_SIZES[self.corrector]

    @property
    def t_end(self):
        return 1.0

    def kappa(self, t: jax.Array) -> jax.Array:
        """κ(t) = κ_max·s(t) (dtype of ``t``)."""
        return jnp.asarray(self.kappa_max, t.dtype) * _schedule_fraction(self.schedule, t)[0]

    def kappa_rate(self, t: jax.Array) -> jax.Array:
        """κ'(t) = κ_max·s'(t)."""
        return jnp.asarray(self.kappa_max, t.dtype) * _schedule_fraction(self.schedule, t)[1]

    def mean_cosine(self, t: jax.Array) -> jax.Array:
        """A_d(κ(t)) = E[eᵀx] under the conditional law at time t."""
        return sphere.mean_cosine(self.kappa(t), self.dim, num_angles=self.num_angles)

    def log_profile(self, t: jax.Array) -> jax.Array:
        """log a_t on the angle grid, ``(num_angles,)``."""
        return sphere.log_velocity_profile(self.kappa(t), self.kappa_rate(t), self.dim,
                                           num_angles=self.num_angles)[0]

    def velocity_table(self, times: jax.Array | None = None) -> VelocityTable:
        """log a_t(θ) on ``times`` (default: 65 equispaced times in [0, 1]) × the angle grid."""
        times = default_times(1.0) if times is None else jnp.asarray(times)
        return _velocity_table(self, times)

    def log_likelihood(self, x, t, embeddings):
        """κ(t)·e_kᵀx_l: log vMF(x_l; e_k, κ(t)) up to the k-independent log C_d(κ)."""
        return self.kappa(t) * (x @ embeddings.T)

    def velocity(self, x, t, probs, embeddings):
        """Σ_k π_k a_t(e_kᵀx) P_x e_k for ``x`` (..., d), ``probs`` (..., V)."""
        cosines = x @ embeddings.T
        coefficient = sphere.interp_profile(jnp.exp(self.log_profile(t)), cosines)
        return sphere.tangent_sum(x, probs * coefficient, embeddings)

    def score(self, x, t, probs, embeddings):
        """κ(t) Σ_k π_k P_x e_k: the Riemannian gradient of log p_t(x)."""
        return self.kappa(t) * sphere.tangent_sum(x, probs, embeddings)

    def corrector_scale(self, t):
        """``"variance"``: 1/(κ(t) + d − 1), the per-direction variance of vMF(κ) at large κ and
        1/(d − 1) at 0; ``"vanishing"``: (1 − κ(t)/κ_max)², zero at the clean end."""
        if self.corrector == "vanishing":
            return (1 - _schedule_fraction(self.schedule, t)[0]) ** 2
        return 1 / (self.kappa(t) + (self.dim - 1))

    def sample_conditional(self, key, targets, t):
        """Exact draws x ~ vMF(e, κ(t)) for each row e of ``targets`` (Wood's algorithm)."""
        return sphere.vmf_sample(key, targets, self.kappa(t))


@eqx.filter_jit
def _velocity_table(path, times):
    log_a = jax.vmap(path.log_profile)(times)
    return VelocityTable(times, sphere.angle_grid(path.num_angles, times.dtype), log_a)


class VMFInfo(NamedTuple):
    """What :func:`sample` reports besides the tokens.

    Attributes:
        x: ``(B, L, d)`` the continuous state at t_end (on the sphere for spherical paths).
        confidence: ``(B, L)`` max_k π_l(k) of the decoding posterior.
        nfe: int32 scalar, posterior evaluations per sequence: ``num_steps`` predictor steps,
            ``corrector_steps·(num_steps − 1)`` corrector steps (``"pc"``; none after the last
            predictor step) and one decoding call at t_end.
        nonfinite: ``(B,)`` bool, a posterior evaluation returned NaN/inf or a step produced a
            non-finite state for that sequence; the offending step was skipped (the sequence kept
            its previous state), so its tokens are not trustworthy.
        invalid_posterior: ``(B,)`` bool, with ``posterior="probabilities"``: an evaluation for
            that sequence returned finite rows that are not probability vectors (an entry below
            0 or a row sum off 1 by more than 4V·ε of float32), e.g. logits or log-probabilities
            (pass ``posterior="logits"``). The eager check refuses that at the first call; this
            flag reports it under ``jit``. Always ``False`` with ``posterior="logits"``.
    """

    x: jax.Array
    confidence: jax.Array
    nfe: jax.Array
    nonfinite: jax.Array
    invalid_posterior: jax.Array


def sample(
    key: jax.Array,
    posterior_fn: Callable[[jax.Array, jax.Array], jax.Array],
    embeddings: jax.Array,
    path: FlowPath,
    *,
    seq_len: int,
    num_samples: int,
    num_steps: int,
    sampler: str = "ode",
    corrector_steps: int = 1,
    corrector_step_size=None,
    posterior: str = "probabilities",
    clamp: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, VMFInfo]:
    """Generates token sequences by integrating a spherical (or Euclidean) flow.

    Start: x_l ~ ``path.init`` (uniform on S^{d−1} for the spherical paths: the exact t = 0
    marginal). With h = t_end/N and t_k = k·h, each of the N = ``num_steps`` predictor steps is

    .. math::  x ← \\mathrm{Retr}\\big(x + h\\,v(x, t_k)\\big),\\qquad
               v_l = Σ_k π_l(k)\\,a_{t_k}(e_k^\\top x_l)\\,P_{x_l} e_k ,

    with π = ``posterior_fn(x, t_k)`` (or its softmax, ``posterior="logits"``). ``sampler="pc"``
    adds, after every predictor step but the
    last, ``corrector_steps`` spherical Langevin steps at t_{k+1} that target the marginal p_t:

    .. math::  x ← \\mathrm{Retr}\\big(x + ε\\,s(x, t) + \\sqrt{2ε}\\,P_x ξ\\big),\\qquad
               ε = c\\,/\\,(κ(t) + d − 1)\\ \\text{or}\\ ε = c\\,(1 − κ(t)/κ_{\\max})^2,

    ξ ~ N(0, I_d), c = ``corrector_step_size``, s the marginal score, ε by the path's
    ``corrector`` rule (:class:`VMFPath`: the paper's ``"vanishing"``, the default, or
    ``"variance"``; the
    Euclidean baseline takes plain Langevin steps with ε = c(1 − t)²; Retr(y) = y/‖y‖). The
    tokens are g_l = argmax_k π_l(k) of one more posterior call at t_end. Every posterior call is
    counted in ``info.nfe``: N + corrector_steps·(N − 1) + 1.

    The posterior is evaluated as ``jax.vmap(posterior_fn, in_axes=(0, None))`` over the batch.
    ``num_steps`` and ``corrector_steps`` are traced loop bounds and ``corrector_step_size``,
    ``kappa_max`` and the embeddings are traced values: one compilation per (posterior, path
    type, shapes) serves every NFE, both samplers of a path with a score, and every float
    setting (an equinox module posterior is traced too; a new plain function recompiles).

    Args:
        key: PRNG key.
        posterior_fn: ``posterior_fn(x, t) -> (L, V)`` for one sequence ``x`` ``(L, d)`` at
            scalar time ``t``: token probabilities (rows summing to 1; the exact oracles
            :class:`Sudoku4Oracle`, :class:`MarkovChainOracle`) or, with
            ``posterior="logits"``, unnormalised log-probabilities (what a trained network
            returns; ``-inf`` allowed, not a whole row).
        embeddings: ``(V, d)`` token embeddings: unit rows for the spherical paths (refused
            otherwise, not normalised), any finite rows for :class:`EuclideanPath`. Their dtype
            is the working dtype.
        path: :class:`VMFPath`, :class:`GeodesicPath` or :class:`EuclideanPath`.
        seq_len: L ≥ 1.
        num_samples: B ≥ 1.
        num_steps: predictor steps N ≥ 1.
        sampler: ``"ode"`` or ``"pc"`` (needs a path with a score: not :class:`GeodesicPath`,
            whose conditional law has compact support).
        corrector_steps: Langevin steps after each predictor step (``"pc"``), ≥ 1. With an
            exact posterior the ODE converges to the data law as ``num_steps`` grows (first
            order); the corrector is unadjusted Langevin (no Metropolis step), exact only as
            ε → 0.
        corrector_step_size: c > 0 in ε = c·``path.corrector_scale(t)``; ``None`` is the
            path's ``default_corrector_step_size``: 0.01 for the paper's ``"vanishing"`` rule
            (the authors' value) and 1 otherwise (jaxsample's; measured on Sudoku-4, d = 8 with
            the variance rule: at NFE 16 it brought the grid χ² to the Monte Carlo floor where
            c = 0.3 did not; the ODE stayed above it).
        posterior: ``"probabilities"`` (default) or ``"logits"``: what ``posterior_fn``
            returns; logits (or log-probabilities) are turned into π by a softmax over the
            tokens. The default is ``"probabilities"`` because that is the choice a wrong guess
            cannot hide from: logits or log-probabilities are caught as rows that do not sum to
            1, while probabilities read as logits would pass silently (a softmax of
            probabilities is a valid, flattened law). ``posterior_fn``'s first output is checked
            eagerly (one call on a fixed uniform draw at t = 0, when its values are concrete):
            shape, finiteness (no NaN or +inf; not a whole row of −inf for logits) and, for
            probabilities, rows >= 0 summing to 1 within 4V·ε of float32. Under ``jit`` the
            check is ``info.invalid_posterior`` (and ``info.nonfinite``).
        clamp: ``None`` or ``(mask, tokens)`` (Sudoku clues, a prefix): ``mask`` bool and
            ``tokens`` int, each ``(L,)`` or ``(B, L)``. Clamped positions sit at their clean
            embedding :math:`x_l = e_{c_l}` from the start, never move (predictor and corrector
            skip them) and decode to ``tokens``; ``posterior_fn`` sees them in every call, and
            the free positions follow the flow driven by its posterior. That is the conditional
            law given the clamped tokens when the posterior reads clamped positions as clean
            (:meth:`Sudoku4Oracle.clamped`, :meth:`MarkovChainOracle.clamped`, or a network
            given the mask); one that reads ``x_l = e_c`` as a vMF observation at κ(t)
            conditions on it more weakly at small t. On a product law the free positions' law
            is unchanged.

    Returns:
        ``(tokens, info)``: ``tokens`` ``(B, L)`` int32 and a :class:`VMFInfo`.

    Raises:
        TypeError / ValueError: naming the argument, for bad arguments, embeddings that are not
            unit vectors on a spherical path or do not match ``path.dim``, and a posterior whose
            output is not ``(seq_len, V)`` floating, not finite, or (``"probabilities"``) not
            rows of probabilities, naming ``posterior_fn`` and the fix.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import vmf
        >>> emb = jnp.eye(4)
        >>> path = vmf.VMFPath(4, 40.0)
        >>> oracle = vmf.Sudoku4Oracle(emb, path)
        >>> tokens, info = vmf.sample(jax.random.key(0), oracle, emb, path, seq_len=16,
        ...     num_samples=32, num_steps=8, sampler="pc")
        >>> tokens.shape, int(info.nfe), bool(info.nonfinite.any())
        ((32, 16), 16, False)
        >>> from jaxsample.datasets import sudoku4_index
        >>> float(jnp.mean(sudoku4_index(tokens) >= 0)) > 0.9   # valid grids
        True
    """
    key = check_key("key", key)
    check_callable("posterior_fn", posterior_fn)
    if not isinstance(path, FlowPath):
        raise TypeError("path must be a VMFPath, GeodesicPath or EuclideanPath, got "
                        f"{type(path).__name__}")
    embeddings = check_array("embeddings", embeddings, ndim=2, finite=True, min_rows=1)
    if embeddings.shape[1] != path.dim:
        raise ValueError(f"embeddings must have shape (V, path.dim) = (V, {path.dim}), got "
                         f"{embeddings.shape}")
    path.check_embeddings(embeddings)
    seq_len = check_int("seq_len", seq_len, 1)
    num_samples = check_int("num_samples", num_samples, 1)
    num_steps = check_int("num_steps", num_steps, 1)
    sampler = check_choice("sampler", sampler, SAMPLERS)
    corrector_steps = check_int("corrector_steps", corrector_steps, 1)
    step_size = check_hyperparameter("corrector_step_size", corrector_step_size,
                                     allow_none=True)
    if sampler == "pc" and not path.has_score:
        raise ValueError(f"sampler='pc' needs a path with a score; {type(path).__name__} has "
                         "none (its conditional law has compact support): use sampler='ode'")
    dtype = embeddings.dtype
    # (x, t) -> probabilities of shape (seq_len, V)
    check_fn_output("posterior_fn", posterior_fn, (
        jax.ShapeDtypeStruct((seq_len, path.dim), dtype), jax.ShapeDtypeStruct((), dtype),
    ), (seq_len, embeddings.shape[0]))
    posterior = check_choice("posterior", posterior, POSTERIORS)
    clamp = check_clamp(clamp, (num_samples, seq_len), embeddings.shape[0])
    _check_first_output(posterior_fn, path, seq_len, dtype, posterior)
    if step_size is None:   # an array either way, so the default shares the compilation
        step_size = check_hyperparameter("corrector_step_size",
                                         path.default_corrector_step_size)
    corrections = corrector_steps if sampler == "pc" else 0
    return _sample(key, posterior_fn, embeddings, path, jnp.asarray(num_steps, jnp.int32),
                   jnp.asarray(corrections, jnp.int32), step_size, (num_samples, seq_len),
                   posterior == "logits", clamp)


def _sum_tolerance(vocab_size: int) -> float:
    # a law normalised in float32 (V terms summed, V divisions) is off by <= ~2V·eps32
    return 4 * vocab_size * float(np.finfo(np.float32).eps)


def _check_first_output(posterior_fn, path, seq_len, dtype, posterior):
    """Calls ``posterior_fn`` once on a fixed uniform draw at t = 0 and refuses what cannot be
    a posterior (only when the output is concrete: under ``jit`` the Info flags report it)."""
    x = path.init(jax.random.key(0), (1, seq_len), dtype)[0]
    out = posterior_fn(x, jnp.zeros((), dtype))
    if not is_concrete(out):
        return
    values = np.asarray(out, np.float64)
    fix = ("posterior_fn must return (L, V) token probabilities with posterior='probabilities' "
           "(the default)")
    if posterior == "logits":
        if np.any(np.isnan(values) | (values == np.inf)):
            raise ValueError("posterior_fn returned NaN or +inf logits at its first call "
                             "(t = 0, a uniform draw); logits must be finite or -inf")
        if np.any(np.all(values == -np.inf, axis=-1)):
            raise ValueError("posterior_fn returned a row of logits that are all -inf at its "
                             "first call (t = 0): every position needs one possible token")
        return
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{fix}; its first call (t = 0, a uniform draw) returned NaN or inf")
    sums = values.sum(axis=-1)
    worst = float(sums[np.argmax(np.abs(sums - 1))])
    if np.all(values <= 0) and np.allclose(np.exp(values).sum(axis=-1), 1, atol=1e-3):
        raise ValueError(
            f"{fix}; its first call returned log-probabilities (every entry <= 0, exp(rows) sum "
            "to 1): pass posterior='logits' (a log-softmax is taken as logits), or return "
            "jnp.exp of them")
    if values.min() < -_sum_tolerance(values.shape[-1]) or np.any(
            np.abs(sums - 1) > _sum_tolerance(values.shape[-1])):
        raise ValueError(
            f"{fix}; its first call returned rows that are not probability vectors (minimum "
            f"entry {values.min():.4g}, a row sum of {worst:.6g}): for a network's logits or "
            "log-probabilities pass posterior='logits'")


@eqx.filter_jit
def _sample(key, posterior_fn, embeddings, path, num_steps, corrector_steps, step_size, shape,
            logits, clamp=None):
    """One loop over the nfe = N + M(N − 1) + 1 posterior evaluations.

    Evaluation e (period 1 + M): k = e // (1 + M), m = e % (1 + M); m = 0 is at t_k and feeds the
    predictor step from t_k, m > 0 is at t_{k+1} and feeds the m-th corrector step there, the
    last one is at t_N = t_end and feeds the decode. Iteration e first applies the move that
    evaluation e − 1 fed (iteration 0: the initial draw), then evaluates the posterior. The
    posterior, the velocity profile and the normal draws (initial state and corrector noise, one
    ``lax.cond``-guarded site keyed by ``fold_in(key, e)``) each appear once in the compiled loop.
    """
    with jax.named_scope("vmf_sample"):
        dtype = embeddings.dtype
        batched = jax.vmap(posterior_fn, in_axes=(0, None))
        dt = jnp.asarray(path.t_end, dtype) / num_steps.astype(dtype)
        step_size = jnp.asarray(step_size, dtype)
        period = 1 + corrector_steps
        nfe = num_steps + corrector_steps * (num_steps - 1) + 1
        state_shape = (*shape, path.dim)

        def time_of(event):
            k, m = event // period, event % period
            return (k + (m > 0).astype(k.dtype)).astype(dtype) * dt

        def start(x, t, probs, noise):
            return path.from_noise(noise)

        def predictor(x, t, probs, noise):
            return path.move(x, path.velocity(x, t, probs, embeddings), dt)

        def corrector(x, t, probs, noise):
            score = path.score(x, t, probs, embeddings)
            return path.langevin(x, score, step_size * path.corrector_scale(t), noise)

        branches = (start, predictor, corrector) if path.has_score else (start, predictor)

        tolerance = _sum_tolerance(embeddings.shape[0])

        def as_probabilities(out):
            """π from the posterior's output, and (B,) flags of rows that are not laws."""
            if logits:
                return jax.nn.softmax(out, axis=-1), jnp.zeros(shape[0], bool)
            sums = jnp.sum(out, axis=-1)
            invalid = (jnp.any(out < -tolerance, axis=(1, 2))
                       | jnp.any(jnp.abs(sums - 1) > tolerance, axis=1))
            return out, invalid

        def body(event, carry):
            x, bad, invalid, probs = carry
            previous = event - 1
            # the move fed by evaluation e − 1: 0 start, 1 predictor, 2 corrector
            kind = jnp.where(event == 0, 0, jnp.where(previous % period == 0, 1, 2))
            noise = jax.lax.cond(
                kind != 1,
                lambda: sphere.normal(jax.random.fold_in(key, event), state_shape, dtype),
                lambda: jnp.zeros(state_shape, dtype))
            x_new = jax.lax.switch(kind, branches, x, time_of(previous), probs, noise)
            if clamp is not None:   # clamped positions sit at their clean embedding
                x_new = jnp.where(clamp[0][..., None], embeddings[clamp[1]], x_new)
            moved = jnp.all(jnp.isfinite(x_new), axis=(1, 2))
            x = jnp.where(moved[:, None, None], x_new, x)
            probs, not_law = as_probabilities(batched(x, time_of(event)).astype(dtype))
            ok = jnp.all(jnp.isfinite(probs), axis=(1, 2))
            probs = jnp.where(ok[:, None, None], probs, jnp.zeros_like(probs))
            return x, bad | ~moved | ~ok, invalid | (ok & not_law), probs

        no = jnp.zeros(shape[0], bool)
        init = (jnp.zeros(state_shape, dtype), no, no,
                jnp.zeros((*shape, embeddings.shape[0]), dtype))
        x, bad, invalid, probs = jax.lax.fori_loop(0, nfe, body, init)
        tokens = jnp.argmax(probs, axis=-1).astype(jnp.int32)
        if clamp is not None:
            tokens = jnp.where(clamp[0], clamp[1], tokens)
        info = VMFInfo(x=x, confidence=jnp.max(probs, axis=-1), nfe=nfe.astype(jnp.int32),
                       nonfinite=bad, invalid_posterior=invalid)
        return tokens, info
