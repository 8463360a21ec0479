"""SHS: one sampler for uniform-noise discrete diffusion and flow: model × process × jump rule.

Three pieces compose (SHS, Jang & Han 2026, arXiv:2601.02799):

1. a *model*: any ``denoiser(tokens, signal) -> logits`` over clean tokens, ``(B, L, K)``;
2. a *process*: the stay-vs-replace decomposition of :class:`DTMC` (D3PM/UDLM ancestral),
   :class:`CTMC` (reverse of the uniform forward CTMC, SEDD-uniform) or :class:`Flow` (discrete
   flow matching, uniform source);
3. a *jump rule*: ``"stratified"`` (systematic hazard sampling) or ``"bernoulli"``.

:func:`sample` puts them together; :class:`MarkovChainData` is an exactly solvable data model
with its Bayes-optimal denoiser, for tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import check_int
from jaxsample.diffusion._markov import MarkovChainData
from jaxsample.diffusion._processes import CTMC, DTMC, PROCESSES, Flow
from jaxsample.kernels import hazard

__all__ = ["CTMC", "DTMC", "Flow", "MarkovChainData", "SampleInfo", "sample"]

JUMP_RULES = ("stratified", "bernoulli")


class SampleInfo(NamedTuple):
    """What :func:`sample` reports besides the tokens.

    Attributes:
        jumps: ``(B, L)`` int32, number of steps in which the position was resampled (a step
            changes a token at most once; the final denoise draw is not counted).
        crossings: ``(B, L)`` float, the jump count ``J`` of the rule: thresholds crossed for
            ``"stratified"`` (can exceed ``jumps`` when a step carries mass >= 1), equal to
            ``jumps`` for ``"bernoulli"``.
        cum_hazard: ``(B, L)`` float, the cumulative jump mass :math:`\\Lambda = \\sum_k \\Delta^k`
            along the path actually taken.
        nfe: int32 scalar, number of model evaluations (``num_steps``).
        signal_grid: ``(num_steps + 1,)`` float, the signal levels :math:`\\alpha_k` used.
        banned_before_denoise: ``(B,)`` int32, positions still holding a blacklisted token just
            before the final denoise draw (which always replaces them); 0 without a blacklist.
        nonfinite: bool scalar, ``True`` if the model returned ``nan`` or ``+inf`` logits (or all
            of a position's allowed tokens had ``-inf``) at any step: the tokens are then not
            trustworthy.
    """

    jumps: jax.Array
    crossings: jax.Array
    cum_hazard: jax.Array
    nfe: jax.Array
    signal_grid: jax.Array
    banned_before_denoise: jax.Array
    nonfinite: jax.Array




def _resolve_process(process):
    if isinstance(process, str):
        if process not in PROCESSES:
            raise ValueError(f"process must be one of {sorted(PROCESSES)}, got {process!r}")
        return PROCESSES[process]()
    if isinstance(process, (CTMC, DTMC, Flow)):
        return process
    raise TypeError(
        "process must be 'ctmc', 'dtmc', 'flow' or an instance of jaxsample.diffusion.CTMC/DTMC/"
        f"Flow, got {type(process).__name__}"
    )


def _blacklist_mask(blacklist, vocab_size: int) -> np.ndarray | None:
    if blacklist is None:
        return None
    ids = np.asarray(blacklist)
    if ids.size == 0:
        return None
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(
            f"blacklist must be a 1-D sequence of integer token ids, got shape {ids.shape} "
            f"and dtype {ids.dtype}"
        )
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(
            f"blacklist token ids must be in [0, vocab_size={vocab_size}), got range "
            f"[{ids.min()}, {ids.max()}]"
        )
    mask = np.zeros(vocab_size, dtype=bool)
    mask[ids] = True
    if mask.all():
        raise ValueError(
            f"blacklist covers the whole vocabulary ({vocab_size} tokens): nothing can be generated"
        )
    return mask


def sample(
    key: jax.Array,
    denoiser: Callable[[jax.Array, jax.Array], jax.Array],
    *,
    vocab_size: int,
    seq_len: int,
    num_samples: int,
    num_steps: int,
    process="ctmc",
    jumps: str = "stratified",
    blacklist: Sequence[int] | None = None,
    allocate_phases: bool = False,
    sharding: jax.sharding.Sharding | None = None,
) -> tuple[jax.Array, SampleInfo]:
    """Generates token sequences from a clean-token denoiser with SHS or Bernoulli jumps.

    Starting from uniform noise, each of the first ``num_steps − 1`` model calls drives one
    stay-vs-replace step of ``process`` (see :mod:`jaxsample.diffusion._processes`): per position it
    yields a jump mass :math:`\\Delta` and destination weights :math:`w(y)`, the jump rule decides
    whether the position jumps, and a jumping position draws :math:`y \\sim w / \\Delta` (never its
    current token). The last model call feeds a denoise draw
    :math:`x_0^i \\sim p_\\theta(x_0^i \\mid x)` at every position. One model call per step for
    both rules.

    Jump rules (:mod:`jaxsample.kernels.hazard`):

    * ``"stratified"`` — SHS (Jang & Han 2026, arXiv:2601.02799): one phase
      :math:`\\varphi \\sim U[0,1)` per position drawn once; a step jumps iff
      :math:`\\lfloor\\varphi + \\Delta\\rfloor \\ge 1`, then :math:`\\varphi \\leftarrow
      \\mathrm{frac}(\\varphi + \\Delta)`. Given the hazard path the count is
      :math:`\\lfloor\\Lambda\\rfloor` or :math:`\\lceil\\Lambda\\rceil` (variance ≤ 1/4), each step
      still jumps with probability :math:`\\Delta` (:math:`\\Delta \\le 1`), destinations unchanged.
    * ``"bernoulli"`` — the baseline: an independent coin per step with probability
      ``process.jump_probability(Δ)`` (Δ for the DTMC, :math:`1 - e^{-\\Delta}` for CTMC/flow).

    Both rules split each step's key the same way, so with one seed they share the destination
    draws. ``num_steps`` is a traced loop bound: one compilation serves every NFE.

    Caveat (measured, see ``bench/results_shs.md``): SHS is not distribution-exact. The first
    jump of a position happens when its cumulative mass reaches :math:`1 - U`, a linear rather
    than exponential waiting-time law, so even with an exact denoiser and many steps the output
    law is sharpened towards the modes: fewer invalid bigrams than Bernoulli at equal NFE, but a
    sequence-level TV that plateaus (≈ 0.12 on the K = 3, L = 6 test chain) where the Bernoulli
    rule converges to the data law.

    Blacklist: blacklisted tokens are removed from the model's clean-token posterior (set to
    ``-inf`` and renormalised) before the process is built, so they are never proposed and never
    produced by the final draw. A blacklisted token present in the initial noise leaves only when
    its position jumps; ``info.banned_before_denoise`` counts those still present at the end,
    which the final draw then has to edit late. ``allocate_phases=True`` (stratified only) gives
    the largest phases of each sequence to the positions that start on a blacklisted token, which
    front-loads their edits but biases per-position counts (up at those positions, down at the
    others; see :func:`jaxsample.kernels.hazard.allocate_phases`). Off by default.

    Args:
        key: a PRNG key.
        denoiser: ``denoiser(tokens, signal) -> logits``: ``tokens`` ``(B, L)`` int32, ``signal``
            a scalar α in ``[0, 1)`` (the channel keeps the clean token with probability α:
            0 is noise, 1 data), ``logits`` ``(B, L, K)`` floating, unnormalised log
            :math:`p_\\theta(x_0 \\mid x)`. Any callable or equinox module; the logits' dtype is
            the working dtype of phases and hazards.
        vocab_size: ``K >= 2``.
        seq_len: ``L >= 1``.
        num_samples: ``B >= 1``.
        num_steps: number of model evaluations (NFE) ``>= 1``; ``1`` is a single denoise draw.
        process: ``"ctmc"``, ``"dtmc"``, ``"flow"`` or a :class:`CTMC`/:class:`DTMC`/:class:`Flow`.
        jumps: ``"stratified"`` or ``"bernoulli"``.
        blacklist: token ids never to generate, or ``None``.
        allocate_phases: the blacklist phase-allocation variant (needs a blacklist and
            ``jumps="stratified"``).
        sharding: optional sharding of the ``(B, L)`` token and phase arrays, e.g.
            ``NamedSharding(mesh, PartitionSpec("particles"))`` to split the batch over devices.

    Returns:
        ``(tokens, info)``: ``tokens`` ``(B, L)`` int32 and a :class:`SampleInfo`.

    Raises:
        TypeError / ValueError: for bad arguments, a denoiser whose output is not ``(B, L, K)``
            floating, or a blacklist covering the whole vocabulary.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import shs
        >>> data = shs.MarkovChainData(jnp.full(3, 1 / 3), jnp.array(
        ...     [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]))
        >>> tokens, info = shs.sample(jax.random.key(0), data.denoiser, vocab_size=3,
        ...     seq_len=6, num_samples=100, num_steps=16, process="flow")
        >>> tokens.shape, int(info.nfe), bool(info.nonfinite)
        ((100, 6), 16, False)
    """
    if not callable(denoiser):
        raise TypeError(f"denoiser must be callable, got {type(denoiser).__name__}")
    check_int("vocab_size", vocab_size, 2)
    check_int("seq_len", seq_len, 1)
    check_int("num_samples", num_samples, 1)
    check_int("num_steps", num_steps, 1)
    process = _resolve_process(process)
    if jumps not in JUMP_RULES:
        raise ValueError(f"jumps must be one of {JUMP_RULES}, got {jumps!r}")
    banned = _blacklist_mask(blacklist, vocab_size)
    if not isinstance(allocate_phases, bool):
        raise TypeError(f"allocate_phases must be a bool, got {type(allocate_phases).__name__}")
    if allocate_phases and (banned is None or jumps != "stratified"):
        raise ValueError(
            "allocate_phases=True needs a non-empty blacklist and jumps='stratified', got "
            f"blacklist={blacklist!r}, jumps={jumps!r}"
        )
    if sharding is not None and not isinstance(sharding, jax.sharding.Sharding):
        raise TypeError(f"sharding must be a jax.sharding.Sharding, got {type(sharding).__name__}")

    shape = (int(num_samples), int(seq_len))
    probe = jax.eval_shape(
        denoiser,
        jax.ShapeDtypeStruct(shape, jnp.int32),
        jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(jnp.float64)),
    )
    expected = (*shape, int(vocab_size))
    if not hasattr(probe, "shape") or tuple(probe.shape) != expected:
        raise ValueError(
            f"denoiser(tokens, signal) must return logits of shape (num_samples, seq_len, "
            f"vocab_size) = {expected}, got {getattr(probe, 'shape', type(probe).__name__)}"
        )
    if not jnp.issubdtype(probe.dtype, jnp.floating):
        raise TypeError(f"denoiser logits must be floating, got dtype {probe.dtype}")
    dtype = jnp.dtype(probe.dtype)
    tokens, info = _sample(
        key, denoiser, process, jumps, banned, allocate_phases, sharding, shape,
        int(vocab_size), jnp.asarray(num_steps, jnp.int32), dtype,
    )
    return tokens, info._replace(signal_grid=process.signal_grid(num_steps, dtype))


def _stay_or_replace(key, tokens, phase, log_weights, jumps, jump_probability):
    """One stay-vs-replace step shared by both rules: only the jump decision differs.

    ``log_weights`` ``(B, L, K)`` are the log jump weights (``-inf`` at the current token); their
    sum is the jump mass Δ. The key is split the same way for both rules, so the destination
    draw ``y ~ w / Δ`` is the same random variable under either rule.

    Returns ``(tokens, phase, jump, crossings, jump_mass)``.
    """
    dest_key, coin_key = jax.random.split(key)
    jump_mass = jnp.exp(jax.nn.logsumexp(log_weights, axis=-1))
    if jumps == "stratified":
        crossings, phase = hazard.stratified_jumps(phase, jump_mass)
        jump = crossings >= 1
    else:
        jump = hazard.bernoulli_jumps(coin_key, jump_probability(jump_mass))
        crossings = jump.astype(jump_mass.dtype)
    proposal = jax.random.categorical(dest_key, log_weights, axis=-1).astype(jnp.int32)
    return jnp.where(jump, proposal, tokens), phase, jump, crossings, jump_mass


@eqx.filter_jit
def _sample(key, denoiser, process, jumps, banned, allocate, sharding, shape, vocab_size,
            num_steps, dtype):
    constrain = (lambda x: x) if sharding is None else (
        lambda x: jax.lax.with_sharding_constraint(x, sharding)
    )
    banned = None if banned is None else jnp.asarray(banned)
    neg_inf = jnp.asarray(-jnp.inf, dtype)

    def posterior(tokens, signal):
        logits = denoiser(tokens, signal).astype(dtype)
        if banned is not None:
            logits = jnp.where(banned[None, None, :], neg_inf, logits)
        log_posterior = jax.nn.log_softmax(logits, axis=-1)
        return log_posterior, jnp.any(jnp.isnan(log_posterior))

    noise_key, phase_key, steps_key, final_key = jax.random.split(key, 4)
    tokens = constrain(jax.random.randint(noise_key, shape, 0, vocab_size, dtype=jnp.int32))
    phase = hazard.init_phase(phase_key, shape, dtype)
    if allocate:
        phase = hazard.allocate_phases(phase, banned[tokens])
    phase = constrain(phase)

    def step(index, carry):
        tokens, phase, jumps_so_far, crossings, cum_hazard, nonfinite = carry
        signal = process.signal_at(index, num_steps, dtype)
        next_signal = process.signal_at(index + 1, num_steps, dtype)
        log_posterior, bad = posterior(tokens, signal)
        log_weights = process.log_jump_weights(log_posterior, tokens, signal, next_signal)
        tokens, phase, jump, n, jump_mass = _stay_or_replace(
            jax.random.fold_in(steps_key, index), tokens, phase, log_weights, jumps,
            process.jump_probability,
        )
        return (
            constrain(tokens),
            phase,
            jumps_so_far + jump.astype(jnp.int32),
            crossings + n,
            cum_hazard + jump_mass,
            nonfinite | bad | jnp.any(jnp.isnan(jump_mass)),
        )

    zeros = jnp.zeros(shape, dtype)
    carry = (tokens, phase, jnp.zeros(shape, jnp.int32), zeros, zeros, jnp.asarray(False))
    # num_steps is traced: one compilation serves every NFE
    tokens, _, jump_counts, crossings, cum_hazard, nonfinite = jax.lax.fori_loop(
        0, num_steps - 1, step, carry
    )
    if banned is None:
        banned_left = jnp.zeros(shape[0], jnp.int32)
    else:
        banned_left = jnp.sum(banned[tokens], axis=-1, dtype=jnp.int32)
    log_posterior, bad = posterior(tokens, process.signal_at(num_steps - 1, num_steps, dtype))
    tokens = jax.random.categorical(final_key, log_posterior, axis=-1).astype(jnp.int32)
    info = SampleInfo(
        jumps=jump_counts,
        crossings=crossings,
        cum_hazard=cum_hazard,
        nfe=num_steps,
        signal_grid=None,  # filled in outside the compiled function: its length is the NFE
        banned_before_denoise=banned_left,
        nonfinite=nonfinite | bad,
    )
    return constrain(tokens), info
