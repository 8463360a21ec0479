"""Jump decisions of discrete diffusion and flow samplers: systematic (SHS), Bernoulli, Weyl.

A discrete diffusion or flow sampler decides at every step, for every position, whether the token
is replaced. Given the step's *jump mass* :math:`\\Delta^k \\ge 0` (a jump probability for a DTMC,
hazard × step length for a CTMC) and its Bernoulli jump probability :math:`p^k` (the stratified
rule's own :math:`\\min(\\Delta^k, 1)`, as the SHS authors give their baseline, or
:math:`1 - e^{-\\Delta^k}` for a CTMC's "at least one event"), the rules here are:

* **Systematic / stratified** (SHS: Jang & Han 2026, *Systematic Hazard Sampling*,
  arXiv:2601.02799): one phase
  :math:`\\varphi \\sim U[0, 1)` per position, drawn once; each step crosses
  :math:`n^k = \\lfloor \\varphi + \\Delta^k \\rfloor` unit thresholds and keeps the fractional
  phase :math:`\\varphi \\leftarrow \\varphi + \\Delta^k - n^k \\in [0, 1)`. Over a path with total
  mass :math:`\\Lambda = \\sum_k \\Delta^k` the count :math:`J = \\sum_k n^k` takes only the values
  :math:`\\lfloor\\Lambda\\rfloor, \\lceil\\Lambda\\rceil`, with :math:`E[J] = \\Lambda` and
  :math:`\\mathrm{Var}[J] = f(1 - f)`, :math:`f = \\mathrm{frac}(\\Lambda)` (the least variance of
  any integer count with mean :math:`\\Lambda`), while each step still jumps with probability
  :math:`\\Delta^k` when :math:`\\Delta^k \\le 1`. This is systematic resampling (Kitagawa 1996;
  Carpenter, Clifford & Fearnhead 1999) applied to the cumulative hazard. **Not exact in law:**
  the first jump comes when the mass reaches :math:`1 - \\varphi`, so
  :math:`P(\\text{no jump}) = 1 - \\Lambda` instead of :math:`e^{-\\Lambda}`, and a sampler using it
  does not converge to the continuous-time process as the steps shrink.
* **Bernoulli**: an independent coin with probability :math:`p^k` per position and step, whose
  count is Poisson-binomial with variance :math:`\\sum_k p^k (1 - p^k)`.
* **Weyl** (:func:`weyl_jumps`): the Bernoulli coins, coupled across the positions of a row by a
  Weyl (golden-ratio) sequence: one :math:`V \\sim U[0, 1)` per row and step, coin
  :math:`u_i = \\mathrm{frac}(V + i/\\phi)`. Each position's coins are exactly those of the
  Bernoulli rule; only their joint law across positions changes.
* **Windowed Weyl** (:func:`weyl_window_jumps`): systematic crossings of :math:`p^k` inside
  windows of a few steps, from a Weyl phase drawn afresh at each window start: the count per
  window has variance at most 1/4, and the rule becomes exact as the window's mass vanishes.

All functions are elementwise over arrays of any shape (batch × positions in the samplers; the
Weyl rules couple the last axis), pure, and preserve the floating dtype of their inputs. Inputs are
valid (matching shapes and dtypes, masses ``>= 0``): the public entry point checked them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "allocate_phases",
    "bernoulli_jumps",
    "init_phase",
    "stratified_jumps",
    "weyl_jumps",
    "weyl_uniforms",
    "weyl_window_jumps",
]

# 1/phi = (sqrt(5) - 1)/2: the rotation whose multiples i/phi mod 1 are the most evenly spread
# (its continued fraction has all partial quotients 1; three-distance theorem)
_INV_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


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
        >>> hazard.init_phase(jax.random.key(0), (1, 8)).shape
        (1, 8)
    """
    with jax.named_scope("init_phase"):
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

    Exactness: on a fixed mass path and a uniform initial phase, each step crosses with
    probability :math:`\\min(\\Delta, 1)` (for :math:`\\Delta \\le 1`) and the count is two-point
    (module docstring); the joint law of the jump times is not that of any Bernoulli rule.

    Args:
        phase: current phases in ``[0, 1)``, any shape.
        jump_mass: jump masses ``Δ >= 0``, same shape and dtype as ``phase`` (not checked).

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
    with jax.named_scope("stratified_jumps"):
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
        >>> hazard.bernoulli_jumps(jax.random.key(0), jnp.array([[0.0] * 4 + [1.0] * 4])).tolist()
        [[False, False, False, False, True, True, True, True]]
    """
    with jax.named_scope("bernoulli_jumps"):
        jump_prob = jnp.asarray(jump_prob)
        return jax.random.uniform(key, jump_prob.shape, jump_prob.dtype) < jump_prob


def weyl_uniforms(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
    """Uniforms coupled along the last axis by a Weyl sequence: :math:`\\mathrm{frac}(V + i/\\phi)`.

    One :math:`V \\sim U[0, 1)` per row (``shape[:-1]``); entry ``i`` of the row is
    :math:`u_i = \\mathrm{frac}(V + i/\\phi)` with :math:`1/\\phi = (\\sqrt5 - 1)/2`. Each
    :math:`u_i` is exactly :math:`U[0, 1)` (a uniform shifted modulo 1), while the ``L`` values of a
    row are as evenly spread as any rotation can make them: the points :math:`i/\\phi \\bmod 1`
    split the circle into gaps of at most three lengths (Weyl 1916; the three-distance theorem),
    so the number of entries of a row falling below a level ``p`` is within a few units of
    ``L·p``. Offsets :math:`\\mathrm{frac}(i/\\phi)` are computed in float64 from the static row
    length, then cast, so they stay accurate for any ``L``.

    Args:
        key: a PRNG key.
        shape: ``(..., L)``.
        dtype: a floating dtype.

    Returns:
        Array of ``shape`` and ``dtype`` in ``[0, 1)``.

    Example:
        >>> import jax
        >>> from jaxsample.kernels import hazard
        >>> u = hazard.weyl_uniforms(jax.random.key(0), (1, 8))
        >>> u.shape, bool(((u >= 0) & (u < 1)).all())
        ((1, 8), True)
    """
    with jax.named_scope("weyl_uniforms"):
        offsets = np.mod(np.arange(shape[-1]) * _INV_GOLDEN, 1.0).reshape((1,) * (len(shape) - 1)
                                                                           + (shape[-1],))
        offsets = jnp.asarray(offsets, dtype)
        shift = jax.random.uniform(key, (*shape[:-1], 1), dtype)
        total = shift + offsets
        return jnp.where(total >= 1, total - 1, total)


def weyl_jumps(key: jax.Array, jump_prob: jax.Array) -> jax.Array:
    """Bernoulli coins coupled along the last axis: jump iff frac(V + i/φ) < p_i.

    One uniform :math:`V` per row and step (:func:`weyl_uniforms`). **Exactness:** each entry's
    coin is :math:`U[0, 1)` and independent of every earlier step, so on a fixed path of
    probabilities each position's jump indicators are independent across steps with
    :math:`P(\\text{jump at step } k) = p^k`: position by position, exactly the law of
    :func:`bernoulli_jumps` (its count is the same Poisson-binomial). Only the joint law of the
    positions of a row within a step differs: the coins of positions ``i`` and ``j`` differ by
    :math:`\\mathrm{frac}((j - i)/\\phi)`, so two positions jump in the same step far less often
    than independent coins would (never once both probabilities are below
    :math:`\\min(c, 1 - c)`, :math:`c` that offset), and the
    number of jumps in a row is stratified around :math:`\\sum_i p_i`.

    In a sampler this keeps the per-position jump probability of every step and makes
    simultaneous jumps of two positions vanish faster as the steps shrink than independent coins
    do, so the chain converges to the same continuous-time process as the Bernoulli rule
    (consistent); at a finite number of steps neither rule is exact.

    Args:
        key: a PRNG key (a fresh one per step).
        jump_prob: jump probabilities ``(..., L)`` in ``[0, 1]``, floating.

    Returns:
        Boolean array of ``jump_prob``'s shape.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.kernels import hazard
        >>> jump = hazard.weyl_jumps(jax.random.key(0), jnp.full((1, 8), 0.3))
        >>> int(jump.sum()) in (2, 3)  # for every V: the row's count is stratified around L·p
        True
    """
    with jax.named_scope("weyl_jumps"):
        jump_prob = jnp.asarray(jump_prob)
        return weyl_uniforms(key, jump_prob.shape, jump_prob.dtype) < jump_prob


def weyl_window_jumps(
    key: jax.Array, phase: jax.Array, jump_prob: jax.Array, window_start: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Windowed Weyl rule: systematic crossings of :math:`p^k` from a Weyl phase redrawn per window.

    At the first step of a window (``window_start``, a boolean scalar that may be traced) the
    phases of a row are redrawn as :math:`\\varphi_i = \\mathrm{frac}(V + i/\\phi)` with a fresh
    :math:`V` (:func:`weyl_uniforms`); every step of the window then crosses
    :math:`n = \\lfloor \\varphi + p \\rfloor` thresholds and keeps the fraction
    (:func:`stratified_jumps` on the jump *probabilities*, so ``n <= 1`` and ``n`` is the jump).

    **Exactness**, on a fixed path of probabilities: each position jumps at step ``k`` with
    probability exactly :math:`p^k` (its phase is uniform at the window start and the crossing
    probability of a step is its length), so each position's per-step jump marginals are those of
    the Bernoulli rule, and windows are independent of each other. Within a window the count is
    :math:`\\lfloor P_w \\rfloor` or :math:`\\lceil P_w \\rceil`
    (:math:`P_w = \\sum_{k \\in w} p^k`): mean :math:`P_w` (the Bernoulli mean) and variance
    :math:`f(1 - f) \\le 1/4`. The jump *times* inside a window are dependent (a jump early in
    the window makes a second one unlikely), so the rule is not exact in law; the difference from
    Bernoulli is of order :math:`P_w^2` per window, which vanishes when the window length in steps
    is fixed and the steps shrink: consistent, unlike SHS's single phase. Across positions the
    phases are Weyl-coupled as in :func:`weyl_jumps`.

    Args:
        key: a PRNG key (a fresh one per step; used only at window starts).
        phase: current phases ``(..., L)`` in ``[0, 1)`` (any values at the first window start).
        jump_prob: jump probabilities in ``[0, 1]``, shape and dtype of ``phase`` (not checked).
        window_start: boolean scalar, ``True`` at the first step of each window.

    Returns:
        ``(jump, crossings, new_phase)``: boolean jumps, the crossings in the phase's dtype (equal
        to ``jump``; ``nan`` where the probability is ``nan``) and the phases to carry.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.kernels import hazard
        >>> phase, total = jnp.zeros((1, 8)), jnp.zeros((1, 8))
        >>> for k in range(4):  # one window of 4 steps with p = 0.3: 1.2 jumps per position
        ...     jump, n, phase = hazard.weyl_window_jumps(
        ...         jax.random.fold_in(jax.random.key(0), k), phase, jnp.full((1, 8), 0.3),
        ...         jnp.asarray(k == 0))
        ...     total = total + n
        >>> sorted(set(total[0].tolist()))  # every count is 1 or 2
        [1.0, 2.0]
    """
    with jax.named_scope("weyl_window_jumps"):
        fresh = weyl_uniforms(key, phase.shape, phase.dtype)
        phase = jnp.where(window_start, fresh, phase)
        crossings, new_phase = stratified_jumps(phase, jump_prob)
        return crossings >= 1, crossings, new_phase


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
        priority: boolean array of the same shape (not checked).

    Returns:
        Array like ``phase`` with each row's phases permuted.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxsample.kernels import hazard
        >>> hazard.allocate_phases(jnp.array([0.25, 0.75, 0.5]),
        ...                        jnp.array([False, False, True])).tolist()
        [0.5, 0.25, 0.75]
    """
    with jax.named_scope("allocate_phases"):
        descending = -jnp.sort(-phase, axis=-1)
        # positions in the order they receive phases: priority ones first, each group in order
        order = jnp.argsort(jnp.logical_not(priority), axis=-1, stable=True)
        rank = jnp.argsort(order, axis=-1)
        return jnp.take_along_axis(descending, rank, axis=-1)
