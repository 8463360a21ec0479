"""Entropic transport between particles and weighted proposals (the ETD coupling).

The pieces of one entropic-transport-descent step that involve all particle–proposal pairs:

* :func:`proposal_log_weights` — self-normalised importance weights of pooled proposals against
  the equal-weight Gaussian mixture that generated them (deterministic-mixture IS),
* :func:`cost_scale` — the median of the squared-distance cost, used to make ``epsilon`` relative,
* :class:`ParticleGeometry` — the cost :math:`C_{ij} = \\tfrac12\\|x_i - y_j\\|^2 / s`, dense or
  recomputed in row chunks, and its two log-sum-exp reductions,
* :func:`solve_coupling` — the balanced, unbalanced or Gibbs (semi-relaxed) plan as log-domain
  duals, by Sinkhorn iterations with warm starts,
* :func:`transport_rows` — per-particle draws (or barycentres) from the row-normalised plan and
  the coupling ESS, without forming the plan.

Every plan is represented by duals ``(f, g)`` with
:math:`\\log\\gamma_{ij} = (f_i + g_j - C_{ij})/\\varepsilon` (ott-jax's convention), so the
coupling matrix itself never needs to exist.

**Why a Sinkhorn loop of our own.** ott-jax's ``Sinkhorn`` is the reference (the tests check
that the plans agree with it to round-off), but inside a sampler three of its properties get in
the way: the unbalanced weight ``tau_b`` is static structure of its ``LinearProblem`` (so ``ρ``
could not be a traced hyper-parameter, swept or ``vmap``-ed without recompiling); its memory-bounded
``PointCloud(batch_size=...)`` path calls ``jax.interpreters.batching.is_vmappable``, which jax 0.10
removed; and its column update reduces along axis 0 of the ``(N, P)`` cost, which on XLA:CPU ran
an order of magnitude slower than the same reduction along a contiguous axis. Here the dense
geometry keeps both ``C`` and ``Cᵀ`` so that both half-steps reduce along rows, and the chunked
geometry recomputes blocks of rows (or columns) through :func:`jaxsample.kernels.chunking.map_rows`,
never holding more than ``chunk_size · max(N, P)`` costs. The updates, the stopping rule (the
``L1`` error of the column marginal, checked every ``inner_iterations`` iterations; for the
unbalanced plan the gradient of ott's marginal-fit term) and the warm starts are ott-jax's.

Inputs are valid: the sampler that calls these checked them.

References:
    V. Pacelli, A. Ratheesh, E. Theodorou, *Variational Inference via Entropic Transport Descent*,
    arXiv:2606.25265 (2026). M. Cuturi, *Sinkhorn distances*, NeurIPS 2013. L. Chizat, G. Peyré,
    B. Schmitzer, F.-X. Vialard, *Scaling algorithms for unbalanced optimal transport problems*,
    Math. Comp. 2018.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsample.kernels import chunking, logspace, pairwise, resampling

__all__ = [
    "COUPLINGS",
    "CRITERIA",
    "UPDATES",
    "Coupling",
    "ParticleGeometry",
    "ProposalWeights",
    "RowUpdate",
    "cost_scale",
    "proposal_log_weights",
    "solve_coupling",
    "transport_rows",
]

COUPLINGS = ("balanced", "unbalanced", "gibbs")
UPDATES = ("categorical", "barycentric")
CRITERIA = ("marginal", "dual")


def cost_scale(x: jax.Array, y: jax.Array, *, max_entries: int = 2048) -> jax.Array:
    """Median of the cost ``½‖x_i − y_j‖²`` over a strided grid of at most ``max_entries`` pairs.

    :func:`jaxsample.kernels.pairwise.median_scale` halved, floored at ``1e-8`` so that a
    degenerate ensemble cannot divide by zero. The median makes ``epsilon`` relative to the typical
    cost, so one value works across dimensions and scales.

    Args:
        x: particles, shape ``(n, d)``.
        y: proposals, shape ``(m, d)``.
        max_entries: the largest number of pairs to take the median over.

    Returns:
        A scalar of ``x``'s dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> float(cost_scale(jnp.zeros((1, 2)), jnp.array([[1.0, 0.0], [3.0, 0.0], [2.0, 0.0]])))
        2.0
    """
    med = 0.5 * pairwise.median_scale(x, y, max_entries=max_entries)
    return jnp.maximum(med, jnp.asarray(1e-8, x.dtype))


class ProposalWeights(NamedTuple):
    """:func:`proposal_log_weights`'s result.

    Attributes:
        log_weights: the normalised log-weights ``log b`` ``(P,)``.
        num_invalid: proposals whose target log-density is NaN or ±inf (int32).
        log_mean_weight: ``log((1/P) Σ_j π(y_j)/q(y_j))`` with ``q`` the *normalised* mixture
            density (before the floor; over the valid proposals, ``−inf`` when none is): the
            importance estimate of ``log ∫π`` for an unnormalised ``π``. It is unbiased on the
            natural scale for the mass ``q`` covers, and falls by ``log(1/(1 − f))`` in a
            typical draw when a region of mass ``f`` of ``π`` lies where ``q`` is negligible.
    """

    log_weights: jax.Array
    num_invalid: jax.Array
    log_mean_weight: jax.Array


def proposal_log_weights(
    log_target: jax.Array,
    proposals: jax.Array,
    centres: jax.Array,
    sigma: jax.Array | float,
    *,
    floor: float = 30.0,
    chunk_size: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Self-normalised log importance weights of pooled proposals under the mixture proposal.

    The proposals ``y_j`` are draws from the equal-weight mixture
    :math:`q(y) = \\frac1N\\sum_i \\mathcal N(y; m_i, \\sigma^2 I)`, so

    .. math::
        \\log b_j = \\log\\pi(y_j)
        - \\operatorname{LSE}_i\\big(-\\|y_j - m_i\\|^2 / 2\\sigma^2\\big) + \\text{const},

    then ``log b ← max(log b, max_j log b_j − floor)`` and ``log b ← log b − LSE(log b)``. The floor
    keeps every valid proposal reachable (and the dual updates finite). Proposals whose target
    log-density is NaN or ±inf are *invalid*: they get ``log b = −inf`` (zero weight) and are
    counted. If no proposal is valid the weights are uniform (the caller should not move).

    A preconditioned proposal ``y = m + σ L ξ`` is handled by passing whitened points
    (``L⁻¹y``, ``L⁻¹m``): the Jacobian ``|det L|`` is common to every proposal and cancels, so the
    weights stay exact for the proposal actually used.

    Args:
        log_target: ``log π(y_j)`` up to a constant, shape ``(P,)``.
        proposals: ``y``, shape ``(P, d)``.
        centres: mixture centres ``m``, shape ``(N, d)``.
        sigma: proposal standard deviation (scalar).
        floor: log-weights below ``max − floor`` are raised to it.
        chunk_size: if given, the ``P × N`` mixture density is evaluated ``chunk_size`` proposals at
            a time and never materialised.

    Returns:
        A :class:`ProposalWeights`: the normalised log-weights ``(P,)`` of the input dtype, the
        number of invalid proposals (int32) and the log mean weight (the evidence estimate).

    Example:
        >>> import jax.numpy as jnp
        >>> log_b, bad, _ = proposal_log_weights(jnp.array([0.0, jnp.nan]), jnp.zeros((2, 1)),
        ...                                      jnp.zeros((1, 1)), 1.0)
        >>> log_b.tolist(), int(bad)
        ([0.0, -inf], 1)
    """
    with jax.named_scope("proposal_log_weights"):
        dtype = proposals.dtype
        inv_two_var = 0.5 / jnp.square(jnp.asarray(sigma, dtype))
        # centring keeps the expanded squared distances accurate far from the origin
        origin = jnp.mean(centres, axis=0)
        centred = centres - origin[None, :]
        centred_norms = pairwise.sq_norms(centred)

        def log_mixture(y_block):
            sq = pairwise.sq_distances(y_block - origin[None, :], centred,
                                       y_sq_norms=centred_norms)
            return jax.nn.logsumexp(-inv_two_var * sq, axis=1)

        log_q = chunking.map_rows(log_mixture, proposals, chunk_size=chunk_size)
        valid = jnp.isfinite(log_target)
        log_b = jnp.where(valid, log_target - log_q, -jnp.inf)
        # q's normalisation: 1/N per component, (2πσ²)^{-d/2} = (π/inv_two_var)^{-d/2} each
        num_centres, dim = centres.shape
        log_norm = -math.log(num_centres) - 0.5 * dim * jnp.log(math.pi / inv_two_var)
        log_mean = jax.nn.logsumexp(log_b) - log_norm - math.log(proposals.shape[0])
        any_valid = jnp.any(valid)
        top = jnp.max(log_b)
        log_b = jnp.where(valid, jnp.maximum(log_b, top - jnp.asarray(floor, dtype)), -jnp.inf)
        log_b = jnp.where(any_valid, log_b, jnp.zeros_like(log_b))
        return ProposalWeights(logspace.log_normalize(log_b), jnp.sum(~valid).astype(jnp.int32),
                               log_mean)


@jax.tree_util.register_pytree_node_class
class ParticleGeometry:
    """The cost ``C_ij = ½‖x_i − y_j‖² · inv_scale`` between particles and proposals.

    Both point clouds are first centred on the particles' mean: the cost is unchanged, and the
    expanded form ``‖x‖² + ‖y‖² − 2x·y`` keeps its precision when the ensemble sits far from the
    origin (so the sampler is translation equivariant to round-off).

    * ``chunk_size=None``: ``C`` and ``Cᵀ`` are formed once, so that both Sinkhorn half-steps reduce
      along a contiguous axis (fastest when ``N · P`` fits in memory).
    * ``chunk_size=c``: nothing of size ``N · P`` is ever stored; every reduction recomputes the
      cost ``c`` rows (or columns) at a time (peak memory ``O(c · max(N, P))``; the price is a
      ``d``-length dot product per entry per half-step).

    Args:
        x: particles ``(N, d)``.
        y: proposals ``(P, d)``.
        inv_scale: ``1 / cost_scale(x, y)`` (scalar); makes ``epsilon`` relative.
        chunk_size: rows per block of the memory-bounded path, or None for dense.

    Example:
        >>> import jax.numpy as jnp
        >>> geom = ParticleGeometry(jnp.zeros((2, 1)), jnp.ones((3, 1)), inv_scale=2.0)
        >>> geom.shape, geom.cost_matrix[0].tolist()
        ((2, 3), [1.0, 1.0, 1.0])
    """

    def __init__(self, x: jax.Array, y: jax.Array, *, inv_scale: jax.Array | float,
                 chunk_size: int | None = None, _centred: bool = False, _dense=None):
        if not _centred:
            centre = jnp.mean(x, axis=0)
            x, y = x - centre[None, :], y - centre[None, :]
        self.x, self.y = x, y
        self.inv_scale = jnp.asarray(inv_scale, x.dtype)
        self.chunk_size = chunk_size
        if _dense is None and chunk_size is None:
            cost = self.cost_rows(x)
            _dense = (cost, cost.T)
        self._dense = _dense

    def cost_rows(self, x_rows: jax.Array) -> jax.Array:
        """The cost between (centred) particle rows ``(c, d)`` and all proposals: ``(c, P)``."""
        return 0.5 * pairwise.sq_distances(x_rows, self.y) * self.inv_scale

    def cost_columns(self, y_rows: jax.Array) -> jax.Array:
        """The transposed cost between (centred) proposal rows ``(c, d)`` and all particles."""
        return 0.5 * pairwise.sq_distances(y_rows, self.x) * self.inv_scale

    @property
    def cost_matrix(self) -> jax.Array:
        """The full ``(N, P)`` cost (materialised in chunked mode: for inspection only)."""
        return self.cost_rows(self.x) if self._dense is None else self._dense[0]

    @property
    def shape(self) -> tuple[int, int]:
        return self.x.shape[0], self.y.shape[0]

    @property
    def dtype(self):
        return self.x.dtype

    def lse_rows(self, g: jax.Array, epsilon: jax.Array) -> jax.Array:
        """``ε · LSE_j((g_j − C_ij)/ε)`` for every particle ``i``: shape ``(N,)``."""
        if self._dense is not None:
            return epsilon * jax.nn.logsumexp((g[None, :] - self._dense[0]) / epsilon, axis=1)
        return chunking.map_rows(
            lambda rows: epsilon * jax.nn.logsumexp((g[None, :] - self.cost_rows(rows))
                                                    / epsilon, axis=1),
            self.x, chunk_size=self.chunk_size)

    def lse_columns(self, f: jax.Array, epsilon: jax.Array) -> jax.Array:
        """``ε · LSE_i((f_i − C_ij)/ε)`` for every proposal ``j``: shape ``(P,)``."""
        if self._dense is not None:
            return epsilon * jax.nn.logsumexp((f[None, :] - self._dense[1]) / epsilon, axis=1)
        return chunking.map_rows(
            lambda rows: epsilon * jax.nn.logsumexp((f[None, :] - self.cost_columns(rows))
                                                    / epsilon, axis=1),
            self.y, chunk_size=self.chunk_size)

    def tree_flatten(self):
        return (self.x, self.y, self.inv_scale, self._dense), {"chunk_size": self.chunk_size}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        x, y, inv_scale, dense = children
        return cls(x, y, inv_scale=inv_scale, _centred=True, _dense=dense, **aux_data)


class Coupling(NamedTuple):
    """An entropic plan as duals: ``log γ_ij = (f_i + g_j − C_ij) / ε``.

    Attributes:
        f: particle duals ``(N,)``.
        g: proposal duals ``(P,)``.
        num_iterations: Sinkhorn iterations run (int32; 0 for the Gibbs plan).
        converged: whether the marginal error fell below the tolerance (bool; True for Gibbs).
        error: the last error measured (marginal or dual change; 0 for Gibbs).
    """

    f: jax.Array
    g: jax.Array
    num_iterations: jax.Array
    converged: jax.Array
    error: jax.Array


def _column_error(geom, f, g, log_b, epsilon, rho, balanced):
    """ott-jax's stopping criterion: the ``L1`` error of the column marginal (balanced), or of
    the column marginal against the gradient of the KL marginal-fit term (unbalanced)."""
    col = jnp.exp(g / epsilon + geom.lse_columns(f, epsilon) / epsilon)
    b = jnp.exp(log_b)
    if balanced:
        target = b
    else:
        safe_g = jnp.where(b > 0, g, jnp.zeros_like(g))
        target = jnp.where(b > 0, b * jnp.exp(-safe_g / (epsilon * rho)), jnp.zeros_like(b))
    return jnp.sum(jnp.abs(jnp.where(b > 0, col, jnp.zeros_like(col)) - target))


def solve_coupling(
    geom: ParticleGeometry,
    log_b: jax.Array,
    *,
    epsilon: jax.Array | float,
    coupling: str = "balanced",
    rho: jax.Array | float = 1.0,
    init: tuple[jax.Array, jax.Array] | None = None,
    tolerance: jax.Array | float = 1e-3,
    max_iterations: int = 200,
    inner_iterations: int = 5,
    criterion: str = "marginal",
) -> Coupling:
    """The ETD plan between uniform particles ``a = 1/N`` and proposals weighted by ``b``.

    * ``"balanced"``: entropic OT with both marginals imposed, by log-domain Sinkhorn:
      ``g ← ε(log b − LSE_i((f_i − C_ij)/ε))`` then ``f ← ε(log a − LSE_j((g_j − C_ij)/ε))``.
    * ``"unbalanced"``: the column constraint is replaced by a KL penalty of weight ``ρε``; the
      ``g`` update is scaled by ``λ = ρ/(1+ρ)`` (ott-jax's ``tau_b``). ``ρ → ∞`` recovers the
      balanced plan, ``ρ → 0`` rows ``a_i·softmax_j(−C_ij/ε)``.
    * ``"gibbs"`` (semi-relaxed): no iterations; each row is ``a_i·softmax_j(log b_j − C_ij/ε)``,
      i.e. ``g = ε log b`` and one ``f`` update.

    With ``criterion="marginal"`` (ott-jax's rule) Sinkhorn stops when the ``L1`` error of the
    column marginal (the proposal mass the plan misallocates) falls below ``tolerance``; with
    ``"dual"`` (the ETD reference code's rule) when ``max_i |Δf_i|`` over the last iteration does.
    The criterion is checked every ``inner_iterations`` iterations, so ``num_iterations`` is a
    multiple of it. Duals from the previous step can be passed as
    ``init`` (warm start); non-finite entries are reset to 0.

    Args:
        geom: a :class:`ParticleGeometry` with ``N`` rows and ``P`` columns.
        log_b: normalised log proposal weights ``(P,)`` (``-inf`` allowed: zero weight).
        epsilon: entropic regularisation ``ε > 0`` (relative when the geometry is scaled).
        coupling: ``"balanced"``, ``"unbalanced"`` or ``"gibbs"``.
        rho: the unbalanced KL weight ``ρ > 0`` (relative to ``ε``; may be traced).
        init: optional ``(f, g)`` warm start of shapes ``(N,)``, ``(P,)``.
        tolerance: tolerance on the marginal error (may be traced).
        max_iterations: iteration cap (static).
        inner_iterations: iterations between two error checks (static).
        criterion: ``"marginal"`` or ``"dual"`` (static).

    Returns:
        A :class:`Coupling`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (4, 2))
        >>> y = jax.random.normal(jax.random.key(1), (8, 2))
        >>> geom = ParticleGeometry(x, y, inv_scale=1 / cost_scale(x, y))
        >>> plan = solve_coupling(geom, jnp.full(8, -jnp.log(8.0)), epsilon=0.1, tolerance=1e-5)
        >>> bool(plan.converged), plan.f.shape, plan.g.shape
        (True, (4,), (8,))
    """
    with jax.named_scope("sinkhorn"):
        n, p = geom.shape
        dtype = geom.dtype
        eps = jnp.asarray(epsilon, dtype)
        log_a = jnp.full((n,), -jnp.log(jnp.asarray(n, dtype)), dtype)
        if coupling == "gibbs":
            g = eps * log_b
            f = eps * log_a - geom.lse_rows(g, eps)
            return Coupling(f, g, jnp.zeros((), jnp.int32), jnp.ones((), bool),
                            jnp.zeros((), dtype))
        balanced = coupling == "balanced"
        rho = jnp.asarray(rho, dtype)
        scale_g = jnp.ones((), dtype) if balanced else rho / (1 + rho)
        tolerance = jnp.asarray(tolerance, dtype)
        if init is None:
            init = (jnp.zeros((n,), dtype), jnp.zeros((p,), dtype))
        f, g = (jnp.where(jnp.isfinite(v), v, jnp.zeros_like(v)) for v in init)

        def update(f, g):
            lse = geom.lse_columns(f, eps)
            # a column without mass has LSE −inf; ott-jax zeroes it so that g = ε log b (= −inf)
            g = scale_g * (eps * log_b - jnp.where(jnp.isfinite(lse), lse, jnp.zeros_like(lse)))
            return eps * log_a - geom.lse_rows(g, eps), g

        def block(carry):
            iterations, f, g, _ = carry
            if criterion == "marginal":
                f, g = jax.lax.fori_loop(0, inner_iterations, lambda _, fg: update(*fg),
                                         (f, g))
                error = _column_error(geom, f, g, log_b, eps, rho, balanced)
            else:
                f, g = jax.lax.fori_loop(0, inner_iterations - 1, lambda _, fg: update(*fg),
                                         (f, g))
                f_before = f
                f, g = update(f, g)
                error = jnp.max(jnp.abs(f - f_before))
            return iterations + inner_iterations, f, g, error

        def keep_going(carry):
            iterations, _, _, error = carry
            return (iterations < max_iterations) & ~(error < tolerance)

        start = (jnp.zeros((), jnp.int32), f, g, jnp.full((), jnp.inf, dtype))
        iterations, f, g, error = jax.lax.while_loop(keep_going, block, start)
        return Coupling(f, g, iterations, error < tolerance, error)


class RowUpdate(NamedTuple):
    """What each particle takes from its row of the plan.

    Attributes:
        targets: the chosen proposal (categorical) or the row barycentre, ``(N, d)``.
        picks: index of the chosen proposal ``(N,)`` int32 (``-1`` for barycentric updates).
        row_ess: ``1 / Σ_j γ̃_ij²`` per row, ``(N,)``: how many proposals a particle chooses among.
    """

    targets: jax.Array
    picks: jax.Array
    row_ess: jax.Array


def transport_rows(
    key: jax.Array,
    geom: ParticleGeometry,
    g: jax.Array,
    proposals: jax.Array,
    *,
    epsilon: jax.Array | float,
    update: str = "categorical",
) -> RowUpdate:
    """Draws (or averages) each particle's proposal from its row-normalised plan.

    The row-normalised plan is ``γ̃_ij = softmax_j((g_j − C_ij)/ε)`` (``f_i`` cancels). With
    ``update="categorical"`` particle ``i`` draws ``j_i ~ Cat(γ̃_i·)`` by inverse CDF
    (:func:`jaxsample.kernels.resampling.categorical`) with its own key
    (``jax.random.split(key, N)[i]``), so that ``E[#{i: j_i = j}] = Σ_i γ̃_ij`` (``= N b_j`` for a
    converged balanced plan); with ``"barycentric"`` it gets ``Σ_j γ̃_ij y_j``. Rows are processed in
    blocks of ``geom.chunk_size`` when the geometry is chunked, so the plan is never formed.

    Args:
        key: PRNG key.
        geom: the :class:`ParticleGeometry` the plan was solved on.
        g: proposal duals ``(P,)``.
        proposals: the proposals ``y`` in original (uncentred) coordinates, ``(P, d)``.
        epsilon: the ``ε`` the plan was solved with.
        update: ``"categorical"`` or ``"barycentric"``.

    Returns:
        A :class:`RowUpdate`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x, y = jnp.zeros((3, 1)), jnp.array([[0.0], [5.0]])
        >>> geom = ParticleGeometry(x, y, inv_scale=1.0)
        >>> transport_rows(jax.random.key(0), geom, jnp.zeros(2), y, epsilon=0.01).picks.tolist()
        [0, 0, 0]
    """
    with jax.named_scope("transport_rows"):
        n = geom.shape[0]
        eps = jnp.asarray(epsilon, geom.dtype)

        def from_cost(cost_rows, keys):
            log_rows = jax.nn.log_softmax((g[None, :] - cost_rows) / eps, axis=1)
            row_ess = jnp.exp(-jax.nn.logsumexp(2 * log_rows, axis=1))
            if update == "categorical":
                picks = jax.vmap(resampling.categorical)(keys, log_rows)
                targets = proposals[picks]
            else:
                picks = jnp.full((cost_rows.shape[0],), -1, jnp.int32)
                targets = jnp.matmul(jnp.exp(log_rows), proposals,
                                     precision=jax.lax.Precision.HIGHEST)
            return targets, picks, row_ess

        keys = jax.random.split(key, n)
        if geom.chunk_size is None:
            targets, picks, row_ess = from_cost(geom.cost_matrix, keys)
        else:
            targets, picks, row_ess = chunking.map_rows(
                lambda rows, keys: from_cost(geom.cost_rows(rows), keys), geom.x, keys,
                chunk_size=geom.chunk_size)
        return RowUpdate(targets, picks, row_ess)
