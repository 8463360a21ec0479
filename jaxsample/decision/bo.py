"""Spherical linear Bayesian optimisation: exact Bayesian linear regression on the sphere.

Generative latents z ∈ ℝ^D of a model with an N(0, I) prior concentrate near the sphere of radius
≈ √D, so the search runs over directions :math:`u = z/\\|z\\| ∈ S^{D−1}` and decodes
:math:`z = r\\,u` at a fixed latent radius r. The surrogate is linear,
:math:`f(u) = w^\\top u + c + ε` with :math:`ε ∼ N(0, σ^2)`, :math:`w ∼ N(0, σ_w^2 I_D)` and a flat
prior on the offset c, so the posterior of w is Gaussian and exact (*Spherical linear Bayesian
optimisation for de novo design*; the linear-surrogate argument of Doumont et al. 2025,
arXiv:2512.00170):

.. math::

    Λ = G/σ^2 + I/σ_w^2, \\qquad Σ = Λ^{-1}, \\qquad μ = Σ\\,r/σ^2,

with the centred scatter :math:`G = \\sum_i (u_i − \\bar u)(u_i − \\bar u)^\\top` and cross moment
:math:`r = \\sum_i (u_i − \\bar u)(y_i − \\bar y)`: the flat offset prior integrates c out exactly
(conditioning on the contrasts of y, which c does not reach). An observation changes G by the
rank-one term :math:`\\tfrac{n}{n+1} δδ^\\top` (δ = u − ū, Welford's update), so ``tell`` is a
rank-one update of a square root :math:`Σ = SS^\\top` (Potter's square-root form, O(D²), positive
semi-definite by construction in float32), and every acquisition is closed form:

* **Thompson**: draw :math:`\\tilde w = μ + Sξ`; the maximiser of :math:`\\tilde w^\\top u` on the
  sphere is :math:`\\tilde w/\\|\\tilde w\\|` (O(D²) per point; batches are independent draws);
* **mean**: :math:`μ/\\|μ\\|`;
* **UCB**: :math:`\\max_{\\|u\\|=1} μ^\\top u + β\\sqrt{u^\\top Σ u}` through a secular equation
  (:func:`jaxsample.kernels.secular.ucb_argmax`: one ``eigh``, O(D³), and a bracketed Newton
  solve); batches by the GP-BUCB rule (each point told back at its posterior mean, which shrinks
  Σ and leaves μ);
* **trust region**: a spherical cap :math:`\\{u : ∠(u, u_0) ≤ ρ\\}`, on which the maximiser of a
  linear function is closed form (:func:`jaxsample.kernels.secular.cap_argmax`); used with
  Thompson or mean, and adapted TuRBO-style by :meth:`SphericalLinearBO.run`.

UCB scores the direction part :math:`w^\\top u` only (the offset is common to every candidate).

The hyper-parameters (σ, σ_w) maximise the restricted evidence, the density of the contrasts of y,

.. math::

    \\log p = −\\tfrac12\\big[(n−1)\\log 2πσ^2 + \\sum_k \\log(1 + σ_w^2 g_k/σ^2)
      + (y_c^\\top y_c − \\tilde r^\\top (\\mathrm{diag}(g) + σ^2/σ_w^2)^{-1}
         \\tilde r)/σ^2\\big]

(g: eigenvalues of G, :math:`\\tilde r = Q^\\top r`), O(D) per evaluation after one ``eigh``,
maximised over log σ² and log σ_w² with optimistix's BFGS (:meth:`SphericalLinearBO.fit`).

**Inputs.** ``tell`` normalises: every row of ``x`` is mapped to its direction ``x/‖x‖`` (the
latent's encoding), so latents of any radius can be told; all-zero rows and non-finite ``x`` or
``y`` are refused with a ``ValueError`` when concrete, and under ``jit`` such an observation is
skipped and ``state.nonfinite`` set.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_hyperparameter,
    check_int,
    check_key,
    check_number,
    check_progress,
    is_concrete,
)
from jaxsample._solver import from_optimistix, warn_if_unsuccessful
from jaxsample.core import SamplingAlgorithm, Step, run
from jaxsample.kernels import secular, sphere
from jaxsample.kernels.solver import SolverStats

__all__ = ["BOFitInfo", "BORunInfo", "BOState", "SphericalLinearBO", "TrustRegion"]

_ACQUISITIONS = ("thompson", "mean", "ucb")


class BOState(NamedTuple):
    """Posterior of the spherical linear model: sufficient statistics and a square root of Σ.

    Attributes:
        count: number of observations told (int32).
        mean_x: ``(D,)`` ū, the mean told direction.
        mean_y: ȳ.
        scatter: ``(D, D)`` G, the centred scatter of the told directions.
        cross: ``(D,)`` r, their centred cross moment with y.
        scatter_y: centred sum of squares of y.
        noise: σ (observation noise standard deviation).
        prior_scale: σ_w (prior standard deviation of each weight; Var(wᵀu) = σ_w²).
        sqrt_cov: ``(D, D)`` S with Σ = S Sᵀ.
        mean: ``(D,)`` μ, the posterior mean of w.
        best_x: ``(D,)`` the told direction with the largest y (zeros before any).
        best_y: the largest y told (−inf before any).
        nonfinite: a non-finite observation was met (and skipped).
    """

    count: jax.Array
    mean_x: jax.Array
    mean_y: jax.Array
    scatter: jax.Array
    cross: jax.Array
    scatter_y: jax.Array
    noise: jax.Array
    prior_scale: jax.Array
    sqrt_cov: jax.Array
    mean: jax.Array
    best_x: jax.Array
    best_y: jax.Array
    nonfinite: jax.Array


class TrustRegion(NamedTuple):
    """A spherical cap: ``center`` (``(D,)``, normalised on use) and half-``angle`` (radians)."""

    center: jax.Array
    angle: jax.Array


class BOFitInfo(NamedTuple):
    """Evidence maximisation: the final restricted ``log_evidence``, the BFGS ``solver``
    status (a :class:`~jaxsample.SolverStats`) and the ``nonfinite`` flag."""

    log_evidence: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


class BORunInfo(NamedTuple):
    """Trace of :meth:`SphericalLinearBO.run` (leading axis: iterations).

    Attributes:
        points: ``(T, q, D)`` the evaluated points (decoded: scaled by the radius when set).
        values: ``(T, q)`` the objective values.
        best_value: ``(T,)`` best value so far (including the state's earlier observations).
        angle: ``(T,)`` trust-region half-angle used (π without a trust region).
        solver: :class:`~jaxsample.SolverStats` of the iteration's evidence refit (``(T,)``
            leaves; zero iterations and ``successful`` where none ran, see ``refit_every``).
        nonfinite: ``(T,)`` a non-finite value was met that iteration (and skipped).
    """

    points: jax.Array
    values: jax.Array
    best_value: jax.Array
    angle: jax.Array
    solver: SolverStats
    nonfinite: jax.Array


# --------------------------------------------------------------------------------------------
# kernels (valid input assumed: unit directions of the state's dtype)


def _tell_one(state: BOState, u: jax.Array, y: jax.Array) -> BOState:
    """One rank-one (Welford + Potter) update; a non-finite (u, y) is skipped and flagged."""
    dtype = state.mean.dtype
    ok = jnp.isfinite(y) & jnp.all(jnp.isfinite(u))
    u = jnp.where(ok, u, 0)
    y = jnp.where(ok, y, 0)
    n = state.count.astype(dtype)
    n1 = n + 1
    du = u - state.mean_x
    dy = y - state.mean_y
    root_w = jnp.sqrt(n / n1)
    f = root_w * du
    t = root_w * dy
    noise2 = state.noise**2
    s = state.sqrt_cov
    phi = s.T @ f
    s_phi = s @ phi
    alpha = 1 / (phi @ phi + noise2)
    gamma = alpha / (1 + jnp.sqrt(noise2 * alpha))
    resid = t - f @ state.mean
    better = y > state.best_y
    new = state._replace(
        count=state.count + 1,
        mean_x=state.mean_x + du / n1,
        mean_y=state.mean_y + dy / n1,
        scatter=state.scatter + jnp.outer(f, f),
        cross=state.cross + f * t,
        scatter_y=state.scatter_y + t * t,
        sqrt_cov=s - gamma * jnp.outer(s_phi, phi),
        mean=state.mean + alpha * resid * s_phi,
        best_x=jnp.where(better, u, state.best_x),
        best_y=jnp.where(better, y, state.best_y),
    )
    new = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, state)
    return new._replace(nonfinite=state.nonfinite | ~ok)


@jax.jit
def _tell(state: BOState, x: jax.Array, y: jax.Array) -> BOState:
    with jax.named_scope("spherical_bo_tell"):
        norm = jnp.linalg.norm(x, axis=-1, keepdims=True)
        u = x / norm
        if x.ndim == 1:
            return _tell_one(state, u, y)
        state, _ = jax.lax.scan(lambda s, uy: (_tell_one(s, *uy), None), state, (u, y))
        return state


def _refactor(state: BOState, eigenvalues, eigenvectors) -> BOState:
    """S and μ from the statistics, given ``eigh`` of the scatter, at the state's hypers."""
    prec = jnp.maximum(eigenvalues, 0) / state.noise**2 + 1 / state.prior_scale**2
    sqrt_cov = eigenvectors * jax.lax.rsqrt(prec)[None, :]
    mean = eigenvectors @ ((eigenvectors.T @ state.cross) / prec) / state.noise**2
    return state._replace(sqrt_cov=sqrt_cov, mean=mean)


def _log_evidence(log_params, eigenvalues, cross2, scatter_y, dof):
    log_noise2, log_prior2 = log_params[0], log_params[1]
    ratio = jnp.exp(log_prior2 - log_noise2)
    g = jnp.maximum(eigenvalues, 0)
    logdet = dof * log_noise2 + jnp.sum(jnp.log1p(ratio * g))
    quad = (scatter_y - jnp.sum(cross2 / (g + 1 / ratio))) / jnp.exp(log_noise2)
    return -0.5 * (dof * math.log(2 * math.pi) + logdet + quad)


@functools.partial(jax.jit, static_argnames=("dim", "dtype"))
def _init(dim: int, dtype, prior_scale, noise) -> BOState:
    zero = jnp.zeros((), dtype)
    prior_scale = jnp.asarray(prior_scale, dtype)
    return BOState(
        count=jnp.zeros((), jnp.int32), mean_x=jnp.zeros(dim, dtype), mean_y=zero,
        scatter=jnp.zeros((dim, dim), dtype), cross=jnp.zeros(dim, dtype), scatter_y=zero,
        noise=jnp.asarray(noise, dtype), prior_scale=prior_scale,
        sqrt_cov=prior_scale * jnp.eye(dim, dtype=dtype), mean=jnp.zeros(dim, dtype),
        best_x=jnp.zeros(dim, dtype), best_y=jnp.asarray(-jnp.inf, dtype),
        nonfinite=jnp.zeros((), bool))


@jax.jit
def _state_log_evidence(state: BOState) -> jax.Array:
    g, q = jnp.linalg.eigh(state.scatter)
    params = jnp.stack([2 * jnp.log(state.noise), 2 * jnp.log(state.prior_scale)])
    return _log_evidence(params, g, (q.T @ state.cross) ** 2, state.scatter_y,
                         state.count.astype(state.mean.dtype) - 1)


@jax.jit
def _posterior(state: BOState):
    return state.mean, state.sqrt_cov @ state.sqrt_cov.T


@functools.partial(jax.jit, static_argnames=("num_samples",))
def _sample_weights(key, state: BOState, num_samples: int):
    xi = sphere.normal(key, (num_samples, state.mean.shape[-1]), state.mean.dtype)
    return state.mean[None] + xi @ state.sqrt_cov.T


@functools.partial(jax.jit, static_argnames=("max_iterations",))
def _fit(state: BOState, max_iterations: int):
    with jax.named_scope("spherical_bo_fit"):
        dtype = state.mean.dtype
        g, q = jnp.linalg.eigh(state.scatter)
        cross2 = (q.T @ state.cross) ** 2
        dof = state.count.astype(dtype) - 1
        var_y = jnp.maximum(state.scatter_y / jnp.maximum(dof, 1), jnp.finfo(dtype).tiny)
        # search box for log σ², log σ_w² around the variance of y (keeps degenerate fits finite)
        lower = jnp.log(var_y) + jnp.asarray([math.log(1e-8), math.log(1e-6)], dtype)
        upper = jnp.log(var_y) + jnp.asarray([math.log(1e2), math.log(1e4)], dtype)
        start = jnp.stack([2 * jnp.log(state.noise), 2 * jnp.log(state.prior_scale)])

        def loss(params, _):
            return -_log_evidence(jnp.clip(params, lower, upper), g, cross2, state.scatter_y,
                                  dof) / jnp.maximum(dof, 1)

        solver = optx.BFGS(rtol=1e-5, atol=1e-6)
        sol = optx.minimise(loss, solver, jnp.clip(start, lower, upper),
                            max_steps=max_iterations, throw=False)
        params = jnp.clip(sol.value, lower, upper)
        enough = state.count >= 3
        params = jnp.where(enough, params, start)
        fitted = state._replace(noise=jnp.exp(params[0] / 2), prior_scale=jnp.exp(params[1] / 2))
        fitted = _refactor(fitted, g, q)
        fitted = jax.tree.map(lambda a, b: jnp.where(enough, a, b), fitted, state)
        value = _log_evidence(params, g, cross2, state.scatter_y, dof)
        nonfinite = ~(jnp.isfinite(value) & jnp.all(jnp.isfinite(fitted.sqrt_cov)))
        info = BOFitInfo(value, from_optimistix(sol), nonfinite)
        return fitted, info


def _ucb_one(state: BOState, beta):
    g, q = jnp.linalg.eigh(state.scatter)
    prec = jnp.maximum(g, 0) / state.noise**2 + 1 / state.prior_scale**2
    u, _, _ = secular.ucb_argmax(state.mean, 1 / prec, q, beta)
    return u


def _ask_kernel(key, state: BOState, beta, center, angle, acquisition: str, batch_size: int,
                capped: bool):
    dtype = state.mean.dtype
    dim = state.mean.shape[-1]
    if acquisition == "ucb":
        def body(s, _):
            u = _ucb_one(s, beta)
            fantasy = s.mean_y + s.mean @ (u - s.mean_x)
            return _tell_one(s, u, fantasy)._replace(best_x=s.best_x, best_y=s.best_y), u

        if batch_size == 1:
            return _ucb_one(state, beta)[None]
        _, points = jax.lax.scan(body, state, None, length=batch_size)
        return points
    if acquisition == "mean":
        norm = jnp.linalg.norm(state.mean)
        # no information yet (μ = 0): a uniform direction
        fallback = sphere.uniform(key, (1,), dim, dtype)[0]
        linear = jnp.where(norm > 0, state.mean, fallback)[None]
    else:
        xi = sphere.normal(key, (batch_size, dim), dtype)
        linear = state.mean[None] + xi @ state.sqrt_cov.T
    free = sphere.retract(linear)
    if not capped:
        return free
    center = jnp.where(jnp.linalg.norm(center) > 0, center, free[0])
    center = sphere.retract(center)
    return jnp.where(state.count > 0, secular.cap_argmax(linear, center, angle), free)


@functools.partial(jax.jit, static_argnames=("acquisition", "batch_size", "capped"))
def _ask(key, state, beta, center, angle, acquisition, batch_size, capped):
    with jax.named_scope("spherical_bo_ask"):
        return _ask_kernel(key, state, beta, center, angle, acquisition, batch_size, capped)


class _LoopState(NamedTuple):
    """The BO loop's state under :func:`jaxsample.run`: the posterior and the trust region's
    adaptation counters (the iteration number drives ``refit_every``)."""

    bo: BOState
    angle: jax.Array
    successes: jax.Array
    failures: jax.Array
    iteration: jax.Array


@functools.cache
def _loop_kernel(acquisition: str, batch_size: int, trust_region: bool, refit_every: int):
    """``kernel(key, loop, *, objective, beta, radius, initial_angle, min_angle)`` for static
    settings: ask, evaluate, tell, adapt (the floats are traced leaves of the step)."""
    successes_needed, failures_needed = 3, 5

    def kernel(key, loop: _LoopState, *, objective, beta, radius, initial_angle, min_angle):
        with jax.named_scope("spherical_bo_iteration"):
            state, angle, successes, failures, index = loop
            dtype = state.mean.dtype
            no_refit = SolverStats.of(jnp.zeros((), jnp.int32), converged=jnp.asarray(True))
            refit = no_refit
            if refit_every:
                def fit(s):
                    fitted, fit_info = _fit(s, 32)
                    return fitted, fit_info.solver

                state, refit = jax.lax.cond((index % refit_every == 0) & (index > 0), fit,
                                            lambda s: (s, no_refit), state)
            points = _ask_kernel(key, state, beta, state.best_x, angle, acquisition,
                                 batch_size, trust_region)
            decoded = points if radius is None else points * radius
            values = jnp.asarray(objective(decoded), dtype).reshape(batch_size)
            before = state.best_y
            state = (_tell_one(state, points[0], values[0]) if batch_size == 1
                     else _tell(state, points, values))
            finite = jnp.isfinite(values)
            best_now = jnp.max(jnp.where(finite, values, -jnp.inf))
            improved = best_now > before + 1e-3 * jnp.abs(before)
            successes = jnp.where(improved, successes + 1, 0)
            failures = jnp.where(improved, 0, failures + 1)
            if trust_region:
                grow = successes >= successes_needed
                shrink = failures >= failures_needed
                max_angle = jnp.asarray(math.pi / 2, dtype)
                angle = jnp.where(grow, jnp.minimum(2 * angle, max_angle), angle)
                angle = jnp.where(shrink, angle / 2, angle)
                successes = jnp.where(grow, 0, successes)
                failures = jnp.where(shrink, 0, failures)
                angle = jnp.where(angle < min_angle, initial_angle, angle)  # restart
            info = BORunInfo(decoded, values, state.best_y,
                             angle if trust_region else jnp.asarray(math.pi, dtype), refit,
                             ~jnp.all(finite))
            return _LoopState(state, angle, successes, failures, index + 1), info

    return kernel


# --------------------------------------------------------------------------------------------
# public API


class SphericalLinearBO(eqx.Module):
    """Spherical linear Bayesian optimisation (module docstring): ask/tell with a pytree state.

    Args:
        dim: D ≥ 2, the latent dimension.
        prior_scale: σ_w > 0, the initial prior standard deviation of each weight
            (Var(wᵀu) = σ_w² on the unit sphere; ``fit`` re-estimates it).
        noise: σ > 0, the initial observation noise standard deviation (``fit`` re-estimates
            it).
        radius: the latent radius r > 0 that ``ask`` scales its directions to (``None``: unit
            vectors). For an N(0, I_D) latent prior, ≈ √D; or the median norm of training latents.

    The float arguments are traced hyper-parameters: a model built from a traced value (under
    ``jit``/``vmap``) works and shares one compilation.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> bo = SphericalLinearBO(3, noise=0.01)
        >>> a = jnp.array([0.0, 0.6, 0.8])
        >>> x = jax.random.normal(jax.random.key(0), (8, 3))
        >>> state = bo.tell(bo.init(), x, (x / jnp.linalg.norm(x, axis=1, keepdims=True)) @ a)
        >>> u = bo.ask(jax.random.key(1), state, acquisition="mean")
        >>> round(float(u[0] @ a), 3)
        1.0
    """

    dim: int = eqx.field(static=True)
    prior_scale: Any
    noise: Any
    radius: Any

    def __init__(self, dim: int, *, prior_scale=1.0, noise=0.1, radius=None):
        self.dim = check_int("dim", dim, 2)
        self.prior_scale = check_hyperparameter("prior_scale", prior_scale)
        self.noise = check_hyperparameter("noise", noise)
        self.radius = check_hyperparameter("radius", radius, allow_none=True)

    # ---- state

    def init(self, dtype=None) -> BOState:
        """The prior state (no observations): μ = 0, Σ = σ_w² I.

        Args:
            dtype: float dtype of the state (default: JAX's default float).
        """
        dtype = jnp.dtype(jnp.result_type(float) if dtype is None else dtype)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"dtype must be a float dtype, got {dtype}")
        return _init(self.dim, dtype, self.prior_scale, self.noise)

    def encode(self, x: jax.Array) -> jax.Array:
        """Directions ``x/‖x‖`` of latents ``x`` (``(..., D)``)."""
        return sphere.retract(x)

    def decode(self, u: jax.Array) -> jax.Array:
        """Latents ``r·u`` (``u`` itself without a radius)."""
        return u if self.radius is None else u * jnp.asarray(self.radius, u.dtype)

    def _check_state(self, state):
        if not isinstance(state, BOState):
            raise TypeError(f"state must be a BOState (from init), got {type(state).__name__}")
        if state.mean.shape != (self.dim,):
            raise ValueError(f"state is for dim {state.mean.shape[-1]}, this model has dim "
                             f"{self.dim}")

    # ---- observations

    def tell(self, state: BOState, x, y) -> BOState:
        """Conditions the posterior on observations ``y`` at ``x`` (rank-one updates, O(D²) each).

        Args:
            state: the current state.
            x: ``(D,)`` one point or ``(q, D)`` a batch; rows are normalised to directions.
            y: ``()`` or ``(q,)`` the observed values.

        Returns:
            The updated state. Non-finite observations under ``jit`` are skipped and set
            ``state.nonfinite``; concrete ones raise.
        """
        self._check_state(state)
        dtype = state.mean.dtype
        x = check_array("x", x, kind="numeric", finite=True)
        if x.ndim not in (1, 2) or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape ({self.dim},) or (q, {self.dim}), got {x.shape}")
        y = check_array("y", y, kind="numeric", finite=True)
        if y.shape != x.shape[:-1]:
            raise ValueError(f"y must have shape {x.shape[:-1]} (one value per row of x), got "
                             f"{y.shape}")
        x = jnp.asarray(x, dtype)
        y = jnp.asarray(y, dtype)
        if is_concrete(x) and np.any(np.linalg.norm(np.asarray(x).reshape(-1, self.dim),
                                                    axis=-1) == 0):
            raise ValueError("x has an all-zero row: a point has no direction")
        return _tell(state, x, y)

    # ---- acquisition

    def ask(self, key, state: BOState, *, acquisition: str = "thompson", trust_region=None,
            batch_size: int = 1, beta=2.0) -> jax.Array:
        """Next points to evaluate, ``(batch_size, D)``: unit directions, or scaled by ``radius``.

        Args:
            key: PRNG key (Thompson draws; the mean acquisition's fallback before data).
            state: the current state.
            acquisition: ``"thompson"`` (argmax of a posterior draw, w̃/‖w̃‖), ``"mean"``
                (μ/‖μ‖) or ``"ucb"`` (secular equation, module docstring).
            trust_region: ``None``; a half-angle ρ (radians) of a cap centred at the best
                direction told so far; or ``(center, angle)`` / :class:`TrustRegion`. With
                ``"thompson"`` or ``"mean"`` only (UCB on a cap has no closed form).
            batch_size: q ≥ 1 points: independent Thompson draws, or GP-BUCB for UCB.
            beta: UCB's exploration weight β ≥ 0 (traced).
        """
        key = check_key("key", key)
        self._check_state(state)
        acquisition = check_choice("acquisition", acquisition, _ACQUISITIONS)
        batch_size = check_int("batch_size", batch_size, 1)
        beta = check_hyperparameter("beta", beta, positive=False)
        dtype = state.mean.dtype
        if acquisition == "mean" and batch_size > 1:
            raise ValueError("batch_size must be 1 with acquisition='mean' (it is deterministic: "
                             "use 'thompson' or 'ucb' for batches)")
        capped = trust_region is not None
        center = np.zeros(self.dim, dtype)
        angle = np.asarray(math.pi, dtype)
        if capped:
            if acquisition == "ucb":
                raise ValueError("trust_region needs acquisition 'thompson' or 'mean' (UCB on "
                                 "a spherical cap has no closed form)")
            if isinstance(trust_region, tuple):
                if len(trust_region) != 2:
                    raise ValueError("trust_region must be an angle or (center, angle)")
                center = check_array("trust_region center", trust_region[0], shape=(self.dim,),
                                     kind="numeric", finite=True)
                center = jnp.asarray(center, dtype)
                angle = trust_region[1]
            else:
                center = state.best_x
                angle = trust_region
            angle = check_hyperparameter("trust_region angle", angle, positive=False,
                                         maximum=math.pi)
        points = _ask(key, state, jnp.asarray(beta, dtype), jnp.asarray(center, dtype),
                      jnp.asarray(angle, dtype), acquisition, batch_size, capped)
        return self.decode(points)

    def sample_weights(self, key, state: BOState, num_samples: int = 1) -> jax.Array:
        """``(num_samples, D)`` posterior draws w̃ = μ + Sξ (the ones Thompson's ``ask`` uses)."""
        key = check_key("key", key)
        self._check_state(state)
        num_samples = check_int("num_samples", num_samples, 1)
        return _sample_weights(key, state, num_samples)

    def posterior(self, state: BOState) -> tuple[jax.Array, jax.Array]:
        """``(μ, Σ)`` of the weights w."""
        self._check_state(state)
        return _posterior(state)

    # ---- hyper-parameters

    def log_evidence(self, state: BOState) -> jax.Array:
        """Restricted log evidence of the told y at the state's (σ, σ_w) (module docstring)."""
        self._check_state(state)
        return _state_log_evidence(state)

    def fit(self, state: BOState, *, max_iterations: int = 64) -> tuple[BOState, BOFitInfo]:
        """(σ, σ_w) by evidence maximisation (optimistix BFGS over their logs), then S and μ.

        One ``eigh`` of the scatter (O(D³)) makes every evidence evaluation O(D). Needs ≥ 3
        observations (otherwise the state is returned unchanged). The search is kept to
        σ² ∈ [1e-8, 1e2]·var(y), σ_w² ∈ [1e-6, 1e4]·var(y) so degenerate data stay finite.

        Returns:
            ``(state, BOFitInfo)``.
        """
        self._check_state(state)
        max_iterations = check_int("max_iterations", max_iterations, 1)
        state, info = _fit(state, max_iterations)
        warn_if_unsuccessful(info.solver, "SphericalLinearBO.fit's evidence maximisation",
                             stacklevel=4)
        return state, info

    # ---- loop

    def run(self, key, objective: Callable[[jax.Array], jax.Array], state: BOState,
            num_iterations: int, *, acquisition: str = "thompson", batch_size: int = 1,
            trust_region: bool = False, initial_angle=0.8, min_angle=0.01, beta=2.0,
            refit_every: int = 10, progress=None) -> tuple[BOState, BORunInfo]:
        """The BO loop on :func:`jaxsample.run` (one compiled ``lax.scan``): ask, evaluate,
        tell, adapt.

        Each iteration is a step of a :class:`jaxsample.SamplingAlgorithm` whose float settings
        (``beta``, the radius, the angles) are traced leaves, so runs that differ only in them
        share one compilation.

        Args:
            key: PRNG key; iteration ``t`` uses ``fold_in(key, t)`` (the driver's keys),
                counted from 0 on every call, as the trust region restarts: a second call on
                the returned state continues from its observations, so give it a new key.
            objective: a JAX function mapping ``(batch_size, D)`` decoded points to
                ``(batch_size,)`` values (to maximise). A host objective (a simulator) runs
                in a Python loop around :meth:`ask` and :meth:`tell` instead.
            state: the starting state (it may hold earlier observations).
            num_iterations: T ≥ 1 iterations.
            acquisition: as in :meth:`ask` (``"ucb"`` needs ``trust_region=False``).
            batch_size: q points per iteration.
            trust_region: adapt a spherical cap at the best point, TuRBO-style: double its
                angle (to at most π/2) after 3 consecutive improving iterations, halve it
                after 5 without, restart at ``initial_angle`` below ``min_angle``.
            initial_angle: ρ₀ (radians).
            min_angle: restart threshold.
            beta: UCB's β.
            refit_every: re-fit (σ, σ_w) by evidence every this many iterations (0: never).
            progress: a meter (:class:`jaxsample.TextProgress`) reporting from the loop.

        Returns:
            ``(state, BORunInfo)``.
        """
        key = check_key("key", key)
        self._check_state(state)
        objective = check_callable("objective", objective)
        num_iterations = check_int("num_iterations", num_iterations, 1)
        acquisition = check_choice("acquisition", acquisition, _ACQUISITIONS)
        batch_size = check_int("batch_size", batch_size, 1)
        refit_every = check_int("refit_every", refit_every, 0)
        if not isinstance(trust_region, bool):
            raise TypeError(f"trust_region must be a bool, got {type(trust_region).__name__}")
        if trust_region and acquisition == "ucb":
            raise ValueError("trust_region needs acquisition 'thompson' or 'mean'")
        if acquisition == "mean" and batch_size > 1:
            raise ValueError("batch_size must be 1 with acquisition='mean'")
        progress = check_progress(progress)
        dtype = state.mean.dtype
        initial_angle = check_number("initial_angle", initial_angle, maximum=math.pi)
        min_angle = check_number("min_angle", min_angle, maximum=initial_angle)
        beta = check_hyperparameter("beta", beta, positive=False)
        radius = None if self.radius is None else jnp.asarray(self.radius, dtype)
        step = Step(_loop_kernel(acquisition, batch_size, trust_region, refit_every),
                    objective=objective, beta=jnp.asarray(beta, dtype), radius=radius,
                    initial_angle=jnp.asarray(initial_angle, dtype),
                    min_angle=jnp.asarray(min_angle, dtype))
        zero = jnp.zeros((), jnp.int32)
        loop = _LoopState(state, jnp.asarray(initial_angle, dtype), zero, zero, zero)
        loop, trace = run(key, SamplingAlgorithm(init=lambda s: s, step=step), loop,
                          num_iterations, progress=progress)
        warn_if_unsuccessful(trace.solver, "SphericalLinearBO.run's evidence refits (the "
                             "iterations after a failed refit keep its last (σ, σ_w))",
                             stacklevel=4)
        return loop.bo, trace
