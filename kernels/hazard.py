"""Jump decisions from a cumulative hazard: systematic (SHS) and independent Bernoulli.

A discrete diffusion or flow sampler decides at every step, for every position, whether the token
is replaced. Given the step's *jump mass* :math:`\\Delta^k \\ge 0` (a jump probability for a DTMC,
hazard × step length for a CTMC), the two rules here are:

* **Systematic / stratified** (SHS, Jang & Han 2026, arXiv:2601.02799): one phase
  :math:`\\varphi \\sim U[0, 1)` per position, drawn once; each step crosses
  :math:`n^k = \\lfloor \\varphi + \\Delta^k \\rfloor` unit thresholds and keeps the fractional
  phase :math:`\\varphi \\leftarrow \\varphi + \\Delta^k - n^k \\in [0, 1)`. Over a path with total
  mass :math:`\\Lambda = \\sum_k \\Delta^k` the count :math:`J = \\sum_k n^k` takes only the values
  :math:`\\lfloor\\Lambda\\rfloor, \\lceil\\Lambda\\rceil`, with :math:`E[J] = \\Lambda` and
  :math:`\\mathrm{Var}[J] = f(1 - f)`, :math:`f = \\mathrm{frac}(\\Lambda)` (the least variance of
  any integer count with mean :math:`\\Lambda`), while each step still jumps with probability
  :math:`\\Delta^k` when :math:`\\Delta^k \\le 1`. This is systematic resampling (Kitagawa 1996;
  Carpenter, Clifford & Fearnhead 1999) applied to the cumulative hazard.
* **Bernoulli**: an independent coin with probability :math:`p^k` per step, whose count is
  Poisson-binomial with variance :math:`\\sum_k p^k (1 - p^k)`.

All functions are elementwise over arrays of any shape (batch × positions in the samplers), pure,
and preserve the floating dtype of their inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["allocate_phases", "bernoulli_jumps", "init_phase", "stratified_jumps"]


def init_phase(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
    """Draws the SHS phases, independent :math:`U[0, 1)` per entry (the rule's only randomness).

    Args:
        key: a PRNG key.
        shape: shape of the phase array, e.g. ``(batch, seq_len)``.
        dtype: a floating dtype.

    Returns:
        Array of ``shape`` and ``dtype`` with entries in ``[0, 1)``.

    Example:
        >>> import jax
        >>> from jaxsample.kernels import hazard
        >>> hazard.init_phase(jax.random.key(0), (2, 3)).shape
        (2, 3)
    """
    return jax.random.uniform(key, shape, dtype)


def stratified_jumps(phase: jax.Array, jump_mass: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One systematic-hazard step: thresholds crossed and the new fractional phase.

    .. math::
        n = \\lfloor \\varphi + \\Delta \\rfloor, \\qquad
        \\varphi' = \\varphi + \\Delta - n \\in [0, 1).

    Carrying only the fractional phase keeps its precision whatever the cumulative mass (a running
    total would lose the phase's low bits in float32): each step rounds once, in ``s = φ + Δ``,
    and ``s − floor(s)`` is then exact in binary floating point.
    A position jumps in this step iff ``n >= 1``; a discretised sampler then changes the token at
    most once and may log ``n`` for diagnostics.

    Args:
        phase: current phases in ``[0, 1)``, any shape.
        jump_mass: jump masses ``Δ >= 0``, same shape and dtype as ``phase``.

    Returns:
        ``(crossings, new_phase)``: ``crossings`` is ``n`` in the phase's dtype (``inf`` where the
        mass is ``inf``, ``nan`` where it is ``nan``, so nothing overflows an integer), and
        ``new_phase`` is in ``[0, 1)``; where the mass is not finite the phase is left unchanged.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.kernels import hazard
        >>> n, phase = hazard.stratified_jumps(jnp.array([0.5, 0.5]), jnp.array([0.4, 1.7]))
        >>> n.tolist(), [round(p, 4) for p in phase.tolist()]
        ([0.0, 2.0], [0.9, 0.2])
    """
    phase = jnp.asarray(phase)
    jump_mass = jnp.asarray(jump_mass)
    if phase.shape != jump_mass.shape:
        raise ValueError(
            f"phase and jump_mass must have the same shape, got {phase.shape} and {jump_mass.shape}"
        )
    if phase.dtype != jump_mass.dtype:
        raise TypeError(
            f"phase and jump_mass must have the same dtype, got {phase.dtype} and {jump_mass.dtype}"
        )
    total = phase + jump_mass
    crossings = jnp.floor(total)
    new_phase = jnp.where(jnp.isfinite(total), total - crossings, phase)
    return crossings, new_phase


def bernoulli_jumps(key: jax.Array, jump_prob: jax.Array) -> jax.Array:
    """The baseline rule: an independent coin per entry, ``True`` with probability ``jump_prob``.

    .. math:: \\mathbb{1}[U < p], \\qquad U \\sim U[0, 1) \\text{ fresh at every step.}

    Args:
        key: a PRNG key (a fresh one per step).
        jump_prob: jump probabilities, any shape, floating dtype; values above 1 always jump,
            values at or below 0 (and ``nan``) never do.

    Returns:
        Boolean array of ``jump_prob``'s shape.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.kernels import hazard
        >>> hazard.bernoulli_jumps(jax.random.key(0), jnp.array([0.0, 1.0])).tolist()
        [False, True]
    """
    jump_prob = jnp.asarray(jump_prob)
    return jax.random.uniform(key, jump_prob.shape, jump_prob.dtype) < jump_prob


def allocate_phases(phase: jax.Array, priority: jax.Array) -> jax.Array:
    """Reassigns the phases along the last axis so that priority positions get the largest ones.

    The first threshold at a position is crossed when its cumulative mass reaches ``1 − φ``, so a
    larger phase means an earlier first edit. Within each row (last axis) the phases are sorted in
    decreasing order and handed out first to the positions with ``priority`` set (in position
    order), then to the others. This front-loads edits at high-risk positions (SHS v1's
    blacklist phase allocation) at a price: a phase chosen this way is no longer
    :math:`U[0, 1)` on its own, so the expected count is above :math:`\\Lambda` at priority
    positions and below it elsewhere; the row total stays unbiased only when all positions carry
    the same :math:`\\Lambda`. The multiset of phases in a row is unchanged.

    Args:
        phase: phases in ``[0, 1)``, shape ``(..., L)``.
        priority: boolean array of the same shape.

    Returns:
        Array like ``phase`` with each row's phases permuted.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.kernels import hazard
        >>> hazard.allocate_phases(jnp.array([0.25, 0.75, 0.5]),
        ...                        jnp.array([False, False, True])).tolist()
        [0.5, 0.25, 0.75]
    """
    phase = jnp.asarray(phase)
    priority = jnp.asarray(priority)
    if phase.shape != priority.shape:
        raise ValueError(
            f"phase and priority must have the same shape, got {phase.shape} and {priority.shape}"
        )
    descending = -jnp.sort(-phase, axis=-1)
    # positions in the order they receive phases: priority ones first, each group in position order
    order = jnp.argsort(jnp.logical_not(priority), axis=-1, stable=True)
    rank = jnp.argsort(order, axis=-1)
    return jnp.take_along_axis(descending, rank, axis=-1)
