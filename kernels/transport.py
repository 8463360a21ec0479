"""Entropic transport between particles and weighted proposals (the ETD coupling).

The pieces of one entropic-transport-descent step that involve all particle–proposal pairs:

* :func:`proposal_log_weights` — self-normalised importance weights of pooled proposals against
  the equal-weight Gaussian mixture that generated them (deterministic-mixture IS),
* :func:`cost_scale` — the median of the squared-distance cost, used to make ``epsilon`` relative,
* :class:`ParticleGeometry` — an ott-jax geometry for the cost
  :math:`C_{ij} = \\tfrac12\\|x_i - y_j\\|^2 / s`, dense or in row chunks,
* :func:`solve_coupling` — the balanced, unbalanced or Gibbs (semi-relaxed) plan as log-domain
  duals, with ott-jax's Sinkhorn solver and warm starts,
* :func:`transport_rows` — per-particle draws (or barycentres) from the row-normalised plan and
  the coupling ESS, without forming the plan.

Every plan is represented by duals ``(f, g)`` with
:math:`\\log\\gamma_{ij} = (f_i + g_j - C_{ij})/\\varepsilon` (ott-jax's convention), so the
coupling matrix itself never needs to exist.

**Why a geometry of our own for the chunked path.** ott-jax's ``PointCloud(batch_size=...)`` is the
library's memory-bounded path, but in ott-jax 0.6 it calls
``jax.interpreters.batching.is_vmappable``, which jax 0.10 removed. Rather than re-implementing
Sinkhorn, :class:`ParticleGeometry` subclasses ott's ``Geometry`` and overrides only
``apply_lse_kernel`` (the one operation Sinkhorn's log-domain loop and its marginal-error check
use) so that it recomputes the cost in blocks of ``chunk_size`` rows (``axis=1``) or columns
(``axis=0``) with ``jax.lax.map``. Each block is laid out so that the log-sum-exp runs along the
contiguous axis (the reduction over particles is done on a ``(chunk, N)`` block, not along axis 0
of an ``(N, P)`` one). The solver, its convergence test, warm starts and unbalanced updates stay
ott-jax's. Peak memory is ``O(chunk_size · max(N, P))`` instead of ``O(N · P)``; the price is
recomputing the cost (a ``d``-length dot product per entry) at every Sinkhorn half-step, so the
dense path is faster when ``N · P`` fits in memory.

References:
    V. Pacelli, A. Ratheesh, E. Theodorou, *Variational Inference via Entropic Transport Descent*,
    arXiv:2606.25265 (2026). M. Cuturi, *Sinkhorn distances*, NeurIPS 2013. L. Chizat, G. Peyré,
    B. Schmitzer, F.-X. Vialard, *Scaling algorithms for unbalanced optimal transport problems*,
    Math. Comp. 2018.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from ott.geometry import geometry
from ott.problems.linear import linear_problem
from ott.solvers.linear import sinkhorn

__all__ = [
    "COUPLINGS",
    "Coupling",
    "ParticleGeometry",
    "RowUpdate",
    "cost_scale",
    "proposal_log_weights",
    "solve_coupling",
    "transport_rows",
]

COUPLINGS = ("balanced", "unbalanced", "gibbs")
_UPDATES = ("categorical", "barycentric")


def _half_sq_dist(x: jax.Array, y: jax.Array) -> jax.Array:
    """``½‖x_i − y_j‖²`` for all pairs, expanded as a matrix product and clamped at 0."""
    sq = (
        jnp.sum(x * x, axis=1)[:, None]
        + jnp.sum(y * y, axis=1)[None, :]
        - 2 * jnp.matmul(x, y.T, precision=jax.lax.Precision.HIGHEST)
    )
    return 0.5 * jnp.maximum(sq, 0)


def _row_map(fn, xs, chunk_size: int | None):
    """``fn`` applied to leading-axis blocks of ``xs``: one block if ``chunk_size`` is None."""
    if chunk_size is None:
        return fn(xs)
    # lax.map(batch_size=c) vmaps fn over c rows at a time; fn sees one row, so add the axis.
    return jax.lax.map(
        lambda row: jax.tree.map(lambda a: a[0], fn(jax.tree.map(lambda a: a[None], row))),
        xs,
        batch_size=chunk_size,
    )


def cost_scale(x: jax.Array, y: jax.Array, *, max_entries: int = 2048) -> jax.Array:
    """Median of the cost ``½‖x_i − y_j‖²`` over a strided grid of at most ``max_entries`` pairs.

    The median makes ``epsilon`` relative to the typical cost, so one value works across dimensions
    and scales. When ``n · m <= max_entries`` the median is exact; otherwise it is taken on
    ``r = min(n, ⌊√max_entries⌋)`` evenly spaced rows and ``⌊max_entries / r⌋`` evenly spaced
    columns, so it costs ``O(max_entries · d)`` and never forms the full matrix. The result is
    floored at ``1e-8`` so that a degenerate ensemble cannot divide by zero.

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
    n, m = x.shape[0], y.shape[0]
    if n * m > max_entries:
        rows = min(n, int(max_entries**0.5))
        cols = min(m, max_entries // rows)
        x = x[jnp.linspace(0, n - 1, rows).astype(jnp.int32)]
        y = y[jnp.linspace(0, m - 1, cols).astype(jnp.int32)]
    diff = x[:, None, :] - y[None, :, :]
    med = jnp.median(0.5 * jnp.sum(diff * diff, axis=-1))
    return jnp.maximum(med, jnp.asarray(1e-8, x.dtype))


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

    Args:
        log_target: ``log π(y_j)`` up to a constant, shape ``(P,)``.
        proposals: ``y``, shape ``(P, d)``.
        centres: mixture centres ``m``, shape ``(N, d)``.
        sigma: proposal standard deviation (scalar).
        floor: log-weights below ``max − floor`` are raised to it.
        chunk_size: if given, the ``P × N`` mixture density is evaluated ``chunk_size`` proposals at
            a time and never materialised.

    Returns:
        ``(log_b, num_invalid)``: normalised log-weights ``(P,)`` of the input dtype, and the number
        of invalid proposals (int32).

    Example:
        >>> import jax.numpy as jnp
        >>> log_b, bad = proposal_log_weights(jnp.array([0.0, jnp.nan]), jnp.zeros((2, 1)),
        ...                                   jnp.zeros((1, 1)), 1.0)
        >>> log_b.tolist(), int(bad)
        ([0.0, -inf], 1)
    """
    dtype = proposals.dtype
    inv_two_var = 0.5 / jnp.square(jnp.asarray(sigma, dtype))

    # centring keeps the expanded squared distances accurate far from the origin
    origin = jnp.mean(centres, axis=0)
    centred = centres - origin[None, :]

    def log_mixture(y_block):
        sq = 2 * _half_sq_dist(y_block - origin[None, :], centred)
        return jax.nn.logsumexp(-inv_two_var * sq, axis=1)

    valid = jnp.isfinite(log_target)
    log_b = jnp.where(valid, log_target - _row_map(log_mixture, proposals, chunk_size), -jnp.inf)
    any_valid = jnp.any(valid)
    top = jnp.max(log_b)
    log_b = jnp.where(valid, jnp.maximum(log_b, top - jnp.asarray(floor, dtype)), -jnp.inf)
    log_b = jnp.where(any_valid, log_b, jnp.zeros_like(log_b))
    log_b = log_b - jax.nn.logsumexp(log_b)
    return log_b, jnp.sum(~valid).astype(jnp.int32)


@jax.tree_util.register_pytree_node_class
class ParticleGeometry(geometry.Geometry):
    """ott-jax geometry of the cost ``C_ij = ½‖x_i − y_j‖² · inv_scale``, dense or chunked.

    Both point clouds are first centred on the particles' mean: the cost is unchanged, and the
    expanded form ``‖x‖² + ‖y‖² − 2x·y`` keeps its precision when the ensemble sits far from the
    origin (so the sampler is translation equivariant to round-off).

    * ``chunk_size=None``: the cost matrix is formed once and ott-jax's own dense log-domain
      kernels are used (fastest when ``N · P`` fits in memory).
    * ``chunk_size=c``: nothing of size ``N · P`` is ever stored. ``apply_lse_kernel`` recomputes
      the cost ``c`` rows (or columns) at a time; see the module docstring for why this is ours and
      not ott-jax's ``PointCloud(batch_size=...)``. Weighted applications (``vec``) are not
      supported in this mode; Sinkhorn does not use them.

    Args:
        x: particles ``(N, d)``.
        y: proposals ``(P, d)``.
        inv_scale: ``1 / cost_scale(x, y)`` (scalar); makes ``epsilon`` relative.
        epsilon: entropic regularisation (relative to the median cost when ``inv_scale`` is).
        chunk_size: rows per block of the memory-bounded path, or None for dense.

    Example:
        >>> import jax.numpy as jnp
        >>> geom = ParticleGeometry(jnp.zeros((2, 1)), jnp.ones((3, 1)), inv_scale=2.0, epsilon=0.1)
        >>> geom.shape, geom.cost_matrix[0].tolist()
        ((2, 3), [1.0, 1.0, 1.0])
    """

    def __init__(
        self,
        x: jax.Array,
        y: jax.Array,
        *,
        inv_scale: jax.Array | float,
        epsilon: jax.Array | float,
        chunk_size: int | None = None,
        _centred: bool = False,
    ):
        if not _centred:
            centre = jnp.mean(x, axis=0)
            x, y = x - centre[None, :], y - centre[None, :]
        self.x, self.y = x, y
        self.inv_scale = jnp.asarray(inv_scale, x.dtype)
        self.chunk_size = chunk_size
        cost = None if chunk_size is not None else self.cost_rows(x)
        super().__init__(cost_matrix=cost, epsilon=epsilon)

    def cost_rows(self, x_rows: jax.Array) -> jax.Array:
        """The cost between (centred) particle rows ``(c, d)`` and all proposals: ``(c, P)``."""
        return _half_sq_dist(x_rows, self.y) * self.inv_scale

    def cost_columns(self, y_rows: jax.Array) -> jax.Array:
        """The transposed cost between (centred) proposal rows ``(c, d)`` and all particles."""
        return _half_sq_dist(y_rows, self.x) * self.inv_scale

    @property
    def cost_matrix(self) -> jax.Array:
        """The full ``(N, P)`` cost (materialised in chunked mode: for inspection only)."""
        if self._cost_matrix is None:
            return self.cost_rows(self.x)
        return self._cost_matrix

    @property
    def shape(self) -> tuple[int, int]:
        return self.x.shape[0], self.y.shape[0]

    @property
    def dtype(self):
        return self.x.dtype

    @property
    def is_symmetric(self) -> bool:
        return False

    def apply_lse_kernel(self, f, g, eps, vec=None, axis=0):
        """``eps·LSE_j((g_j − C_ij)/eps)`` (``axis=1``) or ``eps·LSE_i((f_i − C_ij)/eps)`` (0)."""
        if self.chunk_size is None:
            return super().apply_lse_kernel(f, g, eps, vec=vec, axis=axis)
        if vec is not None:
            raise ValueError("ParticleGeometry in chunked mode does not support vec=...")
        if axis == 1:
            points, cost_fn, other = self.x, self.cost_rows, g
        else:
            points, cost_fn, other = self.y, self.cost_columns, f

        def block(rows):
            return eps * jax.nn.logsumexp((other[None, :] - cost_fn(rows)) / eps, axis=1)

        return _row_map(block, points, self.chunk_size), jnp.ones((1,), self.dtype)

    def tree_flatten(self):
        children = (self.x, self.y, self.inv_scale, self._epsilon_init)
        return children, {"chunk_size": self.chunk_size}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        x, y, inv_scale, epsilon = children
        return cls(x, y, inv_scale=inv_scale, epsilon=epsilon, _centred=True, **aux_data)


class Coupling(NamedTuple):
    """An entropic plan as duals: ``log γ_ij = (f_i + g_j − C_ij) / ε``.

    Attributes:
        f: particle duals ``(N,)``.
        g: proposal duals ``(P,)``.
        num_iters: Sinkhorn iterations run (int32; 0 for the Gibbs plan).
        converged: whether the marginal error fell below the threshold (bool; True for Gibbs).
    """

    f: jax.Array
    g: jax.Array
    num_iters: jax.Array
    converged: jax.Array


def solve_coupling(
    geom: ParticleGeometry,
    log_b: jax.Array,
    *,
    coupling: str = "balanced",
    rho: float = 1.0,
    init: tuple[jax.Array, jax.Array] | None = None,
    threshold: float = 1e-3,
    max_iterations: int = 200,
    inner_iterations: int = 5,
) -> Coupling:
    """The ETD plan between uniform particles ``a = 1/N`` and proposals weighted by ``b``.

    * ``"balanced"``: entropic OT with both marginals imposed, solved by ott-jax's log-domain
      Sinkhorn: ``f ← ε(log a − LSE_j((g_j − C_ij)/ε))``, ``g ← ε(log b − LSE_i((f_i − C_ij)/ε))``.
    * ``"unbalanced"``: the column constraint is replaced by a KL penalty of weight ``ρε``; ott's
      ``tau_b = ρ/(1+ρ)`` scales the ``g`` update. ``ρ → ∞`` recovers the balanced plan, ``ρ → 0``
      rows ``a_i·softmax_j(−C_ij/ε)``.
    * ``"gibbs"`` (semi-relaxed): no iterations; each row is ``a_i·softmax_j(log b_j − C_ij/ε)``,
      i.e. ``g = ε log b`` and one ``f`` update.

    Duals from the previous step can be passed as ``init`` (warm start); non-finite entries are
    reset to 0. ott's Sinkhorn tests the L1 marginal error every ``inner_iterations`` iterations,
    so ``num_iters`` is a multiple of it.

    Args:
        geom: a :class:`ParticleGeometry` with ``N`` rows and ``P`` columns.
        log_b: normalised log proposal weights ``(P,)`` (``-inf`` allowed: zero weight).
        coupling: ``"balanced"``, ``"unbalanced"`` or ``"gibbs"``.
        rho: the unbalanced KL weight ``ρ > 0`` (relative to ``ε``).
        init: optional ``(f, g)`` warm start of shapes ``(N,)``, ``(P,)``.
        threshold: Sinkhorn's tolerance on the L1 marginal error.
        max_iterations: Sinkhorn's iteration cap.
        inner_iterations: iterations between two error checks.

    Returns:
        A :class:`Coupling`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (4, 2))
        >>> y = jax.random.normal(jax.random.key(1), (8, 2))
        >>> geom = ParticleGeometry(x, y, inv_scale=1 / cost_scale(x, y), epsilon=0.1)
        >>> plan = solve_coupling(geom, jnp.full(8, -jnp.log(8.0)), threshold=1e-5)
        >>> bool(plan.converged), plan.f.shape, plan.g.shape
        (True, (4,), (8,))
    """
    if coupling not in COUPLINGS:
        raise ValueError(f"coupling must be one of {COUPLINGS}, got {coupling!r}")
    n, p = geom.shape
    dtype = geom.dtype
    eps = geom.epsilon
    log_a = jnp.full((n,), -jnp.log(jnp.asarray(n, dtype)), dtype)
    if coupling == "gibbs":
        g = eps * log_b
        f = geom.update_potential(jnp.zeros((n,), dtype), g, log_a, axis=1)
        return Coupling(f, g, jnp.zeros((), jnp.int32), jnp.ones((), bool))
    if init is None:
        init = (jnp.zeros((n,), dtype), jnp.zeros((p,), dtype))
    init = tuple(jnp.where(jnp.isfinite(v), v, jnp.zeros_like(v)) for v in init)
    tau_b = 1.0 if coupling == "balanced" else rho / (1.0 + rho)
    return _sinkhorn(geom, log_a, log_b, init, tau_b, threshold, max_iterations, inner_iterations)


# jitted so that eager callers compile Sinkhorn's loop once per shape, not at every call
@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _sinkhorn(geom, log_a, log_b, init, tau_b, threshold, max_iterations, inner_iterations):
    problem = linear_problem.LinearProblem(
        geom, a=jnp.exp(log_a), b=jnp.exp(log_b), tau_a=1.0, tau_b=tau_b
    )
    solver = sinkhorn.Sinkhorn(
        lse_mode=True,
        threshold=threshold,
        max_iterations=max_iterations,
        inner_iterations=inner_iterations,
    )
    # ott-jax's error check relies on implicit rank broadcasting (and mixes weak-typed constants),
    # so it runs under jax's default promotion rules even when the caller asked for strict ones.
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        out = solver(problem, init=init)
    return Coupling(out.f, out.g, out.n_iters.astype(jnp.int32), out.converged)


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
    update: str = "categorical",
) -> RowUpdate:
    """Draws (or averages) each particle's proposal from its row-normalised plan.

    The row-normalised plan is ``γ̃_ij = softmax_j((g_j − C_ij)/ε)`` (``f_i`` cancels). With
    ``update="categorical"`` particle ``i`` draws ``j_i ~ Cat(γ̃_i·)`` with its own key
    (``jax.random.split(key, N)[i]``), so that ``E[#{i: j_i = j}] = Σ_i γ̃_ij`` (``= N b_j`` for a
    converged balanced plan); with ``"barycentric"`` it gets ``Σ_j γ̃_ij y_j``. Rows are processed in
    blocks of ``geom.chunk_size`` when the geometry is chunked, so the plan is never formed.

    Args:
        key: PRNG key.
        geom: the :class:`ParticleGeometry` the plan was solved on.
        g: proposal duals ``(P,)``.
        proposals: the proposals ``y`` in original (uncentred) coordinates, ``(P, d)``.
        update: ``"categorical"`` or ``"barycentric"``.

    Returns:
        A :class:`RowUpdate`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x, y = jnp.zeros((3, 1)), jnp.array([[0.0], [5.0]])
        >>> geom = ParticleGeometry(x, y, inv_scale=1.0, epsilon=0.01)
        >>> transport_rows(jax.random.key(0), geom, jnp.zeros(2), y).picks.tolist()
        [0, 0, 0]
    """
    if update not in _UPDATES:
        raise ValueError(f"update must be one of {_UPDATES}, got {update!r}")
    n = geom.shape[0]
    eps = geom.epsilon

    def block(cost_rows, keys):
        log_rows = jax.nn.log_softmax((g[None, :] - cost_rows) / eps, axis=1)
        row_ess = jnp.exp(-jax.nn.logsumexp(2 * log_rows, axis=1))
        if update == "categorical":
            picks = jax.vmap(jax.random.categorical)(keys, log_rows).astype(jnp.int32)
            targets = proposals[picks]
        else:
            picks = jnp.full((cost_rows.shape[0],), -1, jnp.int32)
            targets = jnp.matmul(
                jnp.exp(log_rows), proposals, precision=jax.lax.Precision.HIGHEST
            )
        return targets, picks, row_ess

    keys = jax.random.split(key, n)
    if geom.chunk_size is None:
        targets, picks, row_ess = block(geom.cost_matrix, keys)
    else:
        targets, picks, row_ess = _row_map(
            lambda args: block(geom.cost_rows(args[0]), args[1]), (geom.x, keys), geom.chunk_size
        )
    return RowUpdate(targets, picks, row_ess)
