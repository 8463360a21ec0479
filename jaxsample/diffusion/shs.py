"""SHS: one sampler for uniform-noise discrete diffusion and flow: model × process × jump rule.

Three pieces compose (SHS: S. Jang & S. Han, *Systematic Hazard Sampling* — titled *Stratified
Hazard Sampling: Minimal-Variance Event Scheduling for CTMC/DTMC Discrete Diffusion and Flow
Models* in arXiv:2601.02799 v1–v2 — 2026; authors' code: github.com/Jang-seunghwan/
Stratified-Hazard-Sampling):

1. a *model*: any ``denoiser(tokens, signal) -> logits`` over clean tokens, ``(B, L, K)``;
2. a *process*: the stay-vs-replace decomposition of :class:`DTMC` (D3PM/UDLM ancestral, with
   the posterior-averaged or UDLM's plug-in kernel),
   :class:`CTMC` (reverse of the uniform forward CTMC, SEDD-uniform) or :class:`Flow` (discrete
   flow matching, uniform source);
3. a *jump rule* (:mod:`jaxsample.kernels.hazard`): ``"bernoulli"`` (independent coins, the
   usual sampler and the default, on the same per-step probability as the stratified rule),
   ``"stratified"`` (systematic hazard sampling, the paper's: biased and mode-seeking, selectable
   by name), ``"weyl"`` (Bernoulli coins coupled across positions) or ``"weyl_window"``
   (systematic crossings within short windows from Weyl-coupled phases).

:func:`sample` puts them together; :class:`MarkovChainData` is an exactly solvable data model
with its Bayes-optimal denoiser, for tests and benchmarks.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
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
    check_int,
    check_key,
    is_concrete,
)
from jaxsample.diffusion._markov import MarkovChainData
from jaxsample.diffusion._processes import CTMC, DTMC, PROCESSES, Flow
from jaxsample.kernels import hazard, resampling

__all__ = [
    "CTMC",
    "DTMC",
    "JUMP_PROBABILITIES",
    "JUMP_RULES",
    "LAST_STEPS",
    "Flow",
    "MarkovChainData",
    "SHSInfo",
    "sample",
]

JUMP_RULES = ("stratified", "bernoulli", "weyl", "weyl_window")
"""The jump rules :func:`sample` accepts (the default is ``"bernoulli"``)."""

STRATIFIED_WARNING = (
    "jumps='stratified' (SHS) is biased and mode-seeking: its law does not converge to the "
    "model's as num_steps grows (per-position TV 0.066 at 256 steps against a sampling floor of "
    "0.024 on a product law with an exact denoiser; docs/methods/shs.md). Use "
    "jumps='bernoulli' (the default, converging) or 'weyl_window' for samples from the model's "
    "law; keep 'stratified' only for its sharper, mode-seeking samples.")
"""The one eager warning of a call that picks ``jumps="stratified"``."""

JUMP_PROBABILITIES = ("clipped", "exponential")
"""Per-step jump probability of the coin rules (``"bernoulli"``, ``"weyl"``, ``"weyl_window"``)."""

LAST_STEPS = ("denoise", "jump")
"""What the last model call of :func:`sample` drives."""

_DEFAULT_WINDOW = 4


class SHSInfo(NamedTuple):
    """What :func:`sample` reports besides the tokens (arrays only, also under ``jit``).

    Attributes:
        jumps: ``(B, L)`` int32, number of steps in which the position was resampled (a step
            changes a token at most once; with ``last_step="denoise"`` the final denoise draw is
            not counted, with ``last_step="jump"`` the last step counts like any other).
        crossings: ``(B, L)`` float, the jump count ``J`` of the rule: thresholds crossed for
            ``"stratified"`` (can exceed ``jumps`` when a step carries mass >= 1), equal to
            ``jumps`` for the other rules.
        cum_hazard: ``(B, L)`` float, the cumulative jump mass :math:`\\Lambda = \\sum_k \\Delta^k`
            along the path actually taken (over the counted steps).
        nfe: int32 scalar, number of model evaluations (``num_steps``). The signal levels used
            are ``process.signal_grid(num_steps, dtype)[:-1]``.
        banned_before_denoise: ``(B,)`` int32, positions still holding a blacklisted token just
            before the last model call's step (the final denoise draw always replaces them; with
            ``last_step="jump"`` a position that does not jump keeps its token, so the output can
            still hold some); 0 without a blacklist.
        nonfinite: bool scalar, ``True`` if the model returned ``nan`` or ``+inf`` logits (or all
            of a position's allowed tokens had ``-inf``) at any step: the tokens are then not
            trustworthy.
        mode_seeking: bool scalar, ``True`` when the jump rule is ``"stratified"``: its law is
            sharpened towards the modes and does not converge to the model's however many steps
            (the documented limit; an eager call also warns once).
    """

    jumps: jax.Array
    crossings: jax.Array
    cum_hazard: jax.Array
    nfe: jax.Array
    banned_before_denoise: jax.Array
    nonfinite: jax.Array
    mode_seeking: jax.Array


def _resolve_process(process):
    if isinstance(process, str):
        return PROCESSES[check_choice("process", process, tuple(PROCESSES))]()
    if isinstance(process, CTMC | DTMC | Flow):
        return process
    raise TypeError(
        f"process must be one of {tuple(PROCESSES)} or an instance of "
        f"jaxsample.diffusion.shs.CTMC/DTMC/Flow, got {type(process).__name__}"
    )


def _blacklist_mask(blacklist, vocab_size: int) -> np.ndarray | None:
    if blacklist is None:
        return None
    if not is_concrete(blacklist):
        raise TypeError("blacklist must be concrete token ids (it fixes the vocabulary mask), "
                        "got a traced value")
    if np.size(blacklist) == 0:
        return None
    ids = np.asarray(check_array("blacklist", blacklist, ndim=1, kind="integer"))
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


def _check_first_logits(denoiser, shape, dtype, clamp):
    """One eager call of the denoiser at signal 1/2 on a state the sampler can reach (token 0,
    the clamped tokens where ``clamp`` holds them): its logits may be -inf (forbidden tokens) but
    never NaN or +inf, and every position needs a finite logit. Skipped when the output is traced
    (a denoiser closing over traced values)."""
    tokens = jnp.zeros(shape, jnp.int32)
    if clamp is not None:
        tokens = jnp.where(clamp[0], clamp[1], tokens)
    logits = denoiser(tokens, jnp.asarray(0.5, dtype))
    if not is_concrete(logits):
        return
    logits = np.asarray(logits)
    if np.isnan(logits).any() or np.isposinf(logits).any():
        raise ValueError("denoiser returned NaN or +inf logits on its first call (token 0 at "
                         "the free positions, signal 0.5); it must return finite logits (or -inf "
                         "for forbidden tokens)")
    if not np.isfinite(logits).any(axis=-1).all():
        raise ValueError("denoiser returned no finite logit at some position on its first call "
                         "(token 0 at the free positions, signal 0.5): every position needs a "
                         "token it can take")


def sample(
    key: jax.Array,
    denoiser: Callable[[jax.Array, jax.Array], jax.Array],
    *,
    vocab_size: int,
    seq_len: int,
    num_samples: int,
    num_steps: int,
    process="ctmc",
    jumps: str = "bernoulli",
    jump_probability: str | None = None,
    last_step: str = "denoise",
    window_length: int | None = None,
    blacklist: Sequence[int] | None = None,
    allocate_phases: bool = False,
    sharding: jax.sharding.Sharding | None = None,
    clamp: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, SHSInfo]:
    """Generates token sequences from a clean-token denoiser with one of four jump rules.

    Starting from uniform noise (token ids from 32 random bits modulo ``K``: relative bias at most
    :math:`K / 2^{32}`), each of the first ``num_steps − 1`` model calls drives one
    stay-vs-replace step of ``process`` (see :mod:`jaxsample.diffusion._processes`): per position it
    yields a jump mass :math:`\\Delta` and destination weights :math:`w(y)`, the jump rule decides
    whether the position jumps, and a jumping position draws :math:`y \\sim w / \\Delta` (never its
    current token). The last model call (``last_step``) feeds either a denoise draw
    :math:`x_0^i \\sim p_\\theta(x_0^i \\mid x)` at every position (``"denoise"``, the default) or
    one more stay-vs-replace step, to signal 1, under the same jump rule (``"jump"``, the
    authors' sampler: the SHS schedule kept to the end). One model call per step for every rule,
    and the model appears once in the compiled loop.

    Jump rules (:mod:`jaxsample.kernels.hazard`):

    * ``"bernoulli"`` (default) — an independent coin per position and step with probability
      :math:`p` (``jump_probability``). Consistent: its law converges to the process's as the
      steps shrink. The default because it reached the Monte Carlo floor at every budget
      measured (product law K = 30, L = 12, exact denoiser, DTMC, 4 000 samples, 5 seeds:
      per-position TV 0.0235 / 0.0222 / 0.0232 at 16 / 64 / 256 steps, floor 0.0239), where
      ``"weyl_window"`` needed 64 steps (0.0302 at 16).
    * ``"stratified"`` — SHS (Jang & Han 2026, arXiv:2601.02799): one phase
      :math:`\\varphi \\sim U[0,1)` per position drawn once; a step jumps iff
      :math:`\\lfloor\\varphi + \\Delta\\rfloor \\ge 1`, then :math:`\\varphi \\leftarrow
      \\mathrm{frac}(\\varphi + \\Delta)`. Given the hazard path the count is
      :math:`\\lfloor\\Lambda\\rfloor` or :math:`\\lceil\\Lambda\\rceil` (variance ≤ 1/4), each step
      jumps with probability :math:`\\min(\\Delta, 1)`, destinations unchanged.
      **Not exact in law and not consistent** (below): on the problem above its TV is 0.050 /
      0.063 / 0.066, rising with the steps. An eager call that picks it warns once
      (:data:`STRATIFIED_WARNING`) and ``info.mode_seeking`` is set.
    * ``"weyl"`` — the Bernoulli coins coupled across the positions of a sequence: one
      :math:`V \\sim U[0,1)` per sequence and step, position ``i`` jumps iff
      :math:`\\mathrm{frac}(V + i/\\phi) < p_i` (:math:`\\phi` the golden ratio). Each position's
      coins have exactly the Bernoulli law (same per-step probability, independent across steps);
      only simultaneous jumps of several positions become rarer and the number of jumps per
      sequence is stratified. Consistent like Bernoulli.
    * ``"weyl_window"`` — systematic crossings of :math:`p` inside windows of ``window_length``
      steps (default 4), from Weyl-coupled phases drawn afresh at every window start: each step
      still jumps with probability :math:`p` on a fixed path, the count per window has variance
      ≤ 1/4, and the within-window dependence it adds vanishes as the steps shrink (consistent).

    The coin rules' per-step probability :math:`p` (``jump_probability``):

    * ``"clipped"`` (default) — :math:`p = \\min(\\Delta, 1)`, the per-step jump probability of the
      stratified rule itself, as the authors give their Bernoulli baseline: the two rules then
      differ only in how the steps' jumps are coupled, which is what a comparison should
      isolate;
    * ``"exponential"`` — ``process.jump_probability(Δ)``: :math:`1 - e^{-\\Delta}` (at least one
      event of a Poisson clock of mass Δ) for CTMC/flow, Δ itself for the DTMC, whose mass is
      already a probability (both conventions agree there). Its mean jump count is below the
      cumulative hazard at coarse steps; on the K = 4 test chain this alone moved Bernoulli's
      TV by ≈ 0.01 at NFE 8–16 (``bench/results_shs.md`` has both conventions side by side).

    Settings that reproduce the paper (authors' code): ``jumps="stratified"`` against
    ``jumps="bernoulli"`` with the default ``jump_probability="clipped"``, ``last_step="jump"``,
    and for a UDLM checkpoint ``process=DTMC(kernel="plugin")``. jaxsample's own choices, with the
    reason: ``last_step="denoise"`` by default (it never leaves a position on a noise token or a
    blacklisted one; measured exact sequence TV of SHS at NFE 8 on the K = 3, L = 6 test chain,
    20 000 samples: 0.173 vs 0.192 with the schedule kept to the end for the DTMC, 0.172 vs 0.196
    for the flow, 0.172 vs 0.194 for the CTMC); ``DTMC(kernel="posterior")`` by default (the
    exact reverse step whenever the denoiser is the true posterior, as with
    :class:`MarkovChainData`); the
    ``"weyl"``/``"weyl_window"`` rules and the CTMC/flow processes are jaxsample's additions.

    All rules split each step's key the same way, so with one seed they share the destination
    draws (an inverse-CDF draw, :func:`jaxsample.kernels.resampling.categorical`). ``num_steps``
    and ``window_length`` are traced loop values, and so are the process's float settings
    (``CTMC.min_signal``), ``allocate_phases``, ``jump_probability`` and ``last_step``: one
    compilation serves every NFE, window, signal floor, allocation, coin convention and last
    step (the jump rule and ``DTMC(kernel=...)`` are static).

    Caveat (measured, see ``bench/results_shs.md`` and ``docs/methods/shs.md``): SHS is not
    distribution-exact. The first
    jump of a position happens when its cumulative mass reaches :math:`1 - U`, a linear rather
    than exponential waiting-time law (:math:`P(\\text{no jump}) = 1 - \\Lambda`, not
    :math:`e^{-\\Lambda}`), so even with an exact denoiser and many steps the output law is
    sharpened towards the modes: fewer invalid bigrams than Bernoulli at equal NFE, but a
    sequence-level TV that plateaus (≈ 0.12 on the K = 3, L = 6 test chain) where the other three
    rules converge to the data law. ``"weyl_window"`` keeps most of SHS's variance reduction and
    converges.

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
        num_steps: number of model evaluations (NFE) ``>= 1``; ``1`` is a single denoise draw
            (``last_step="denoise"``) or a single step from noise to signal 1 (``"jump"``).
        process: ``"ctmc"``, ``"dtmc"``, ``"flow"`` or a :class:`CTMC`/:class:`DTMC`/:class:`Flow`
            (e.g. ``DTMC(kernel="plugin")``).
        jumps: one of :data:`JUMP_RULES`; default ``"bernoulli"`` (was ``"stratified"``, which
            does not converge: it now warns when called eagerly).
        jump_probability: ``"clipped"`` (default) or ``"exponential"``: the coin rules'
            per-step probability (above); not a setting of ``jumps="stratified"``.
        last_step: ``"denoise"`` (default) or ``"jump"``: what the last model call drives.
        window_length: steps per window of ``jumps="weyl_window"`` (``>= 1``, default 4); only
            with that rule.
        blacklist: token ids never to generate, or ``None``.
        allocate_phases: the blacklist phase-allocation variant (needs a blacklist and
            ``jumps="stratified"``).
        sharding: optional sharding of the ``(B, L)`` token and phase arrays, e.g.
            ``NamedSharding(mesh, PartitionSpec("particles"))`` to split the batch over devices.
        clamp: ``None`` or ``(mask, tokens)`` for a prefix or an infill: ``mask`` bool and
            ``tokens`` int, each ``(L,)`` or ``(B, L)``. Clamped positions (``mask`` True) hold
            ``tokens`` from the start and never move (never counted in ``info.jumps``); the
            denoiser sees them in every call, and the free positions follow the process driven
            by its posterior. That is the conditional law given the clamped tokens when the
            denoiser reads clamped positions as clean (its posterior there a point mass, e.g.
            :meth:`MarkovChainData.clamped_denoiser`, or a network given the mask); a denoiser
            that reads them as noisy observations at the current signal conditions on them
            more weakly early on. On a product law the free positions' law is unchanged.

    Returns:
        ``(tokens, info)``: ``tokens`` ``(B, L)`` int32 and a :class:`SHSInfo`.

    Raises:
        TypeError / ValueError: for bad arguments, a denoiser whose output is not ``(B, L, K)``
            floating, or a blacklist covering the whole vocabulary.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsample.diffusion import shs
        >>> data = shs.MarkovChainData(jnp.full(3, 1 / 3), jnp.array(
        ...     [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]))
        >>> tokens, info = shs.sample(jax.random.key(0), data.denoiser, vocab_size=3,
        ...     seq_len=6, num_samples=100, num_steps=16, process="flow", jumps="weyl_window")
        >>> tokens.shape, int(info.nfe), bool(info.nonfinite)
        ((100, 6), 16, False)
    """
    key = check_key("key", key)
    denoiser = check_callable("denoiser", denoiser)
    vocab_size = check_int("vocab_size", vocab_size, 2)
    seq_len = check_int("seq_len", seq_len, 1)
    num_samples = check_int("num_samples", num_samples, 1)
    num_steps = check_int("num_steps", num_steps, 1)
    process = _resolve_process(process)
    jumps = check_choice("jumps", jumps, JUMP_RULES)
    if jump_probability is not None and jumps == "stratified":
        raise ValueError("jump_probability is a setting of the coin rules ('bernoulli', 'weyl', "
                         f"'weyl_window'), got jumps={jumps!r}")
    jump_probability = check_choice("jump_probability", "clipped" if jump_probability is None
                                    else jump_probability, JUMP_PROBABILITIES)
    last_step = check_choice("last_step", last_step, LAST_STEPS)
    if window_length is not None and jumps != "weyl_window":
        raise ValueError(f"window_length is a setting of jumps='weyl_window', got jumps={jumps!r}")
    window_length = check_int("window_length", _DEFAULT_WINDOW if window_length is None
                              else window_length, 1)
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

    shape = (num_samples, seq_len)
    # (tokens, signal) -> logits of shape (num_samples, seq_len, vocab_size)
    probe = check_fn_output("denoiser", denoiser, (
        jax.ShapeDtypeStruct(shape, jnp.int32),
        jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(jnp.float64)),
    ), (*shape, vocab_size))
    clamp = check_clamp(clamp, shape, vocab_size)
    if is_concrete(key):
        _check_first_logits(denoiser, shape, probe.dtype, clamp)
    if jumps == "stratified" and is_concrete(key):   # eager: say once that the rule is biased
        warnings.warn(STRATIFIED_WARNING, RuntimeWarning, stacklevel=2)
    return _sample(
        key, denoiser, process, jumps, jnp.asarray(jump_probability == "exponential"),
        jnp.asarray(last_step == "jump"), banned, jnp.asarray(allocate_phases), sharding, shape,
        vocab_size, jnp.asarray(num_steps, jnp.int32), jnp.asarray(window_length, jnp.int32),
        jnp.dtype(probe.dtype), clamp,
    )


def _coin_probability(process, exponential, jump_mass):
    """Per-step probability ``p`` of the coin rules: ``process.jump_probability(Δ)`` where
    ``exponential`` (a traced boolean scalar) is set, ``min(Δ, 1)`` otherwise."""
    return jnp.where(exponential, process.jump_probability(jump_mass),
                     jnp.minimum(jump_mass, 1))


def _stay_or_replace(key, tokens, phase, log_weights, coin_probability, jumps, window_start,
                     force=False):
    """One stay-vs-replace step shared by every rule: only the jump decision differs.

    ``log_weights`` ``(B, L, K)`` are the log jump weights (``-inf`` at the current token); their
    sum is the jump mass Δ. The key is split the same way for every rule, so the destination
    draw ``y ~ w / Δ`` is the same random variable under each. ``force`` (a boolean scalar) makes
    every position jump (the final denoise draw, with ``log_weights`` the posterior).

    Returns ``(tokens, phase, jump, crossings, jump_mass)``.
    """
    dest_key, coin_key = jax.random.split(key)
    jump_mass = jnp.exp(jax.nn.logsumexp(log_weights, axis=-1))
    if jumps == "stratified":
        crossings, phase = hazard.stratified_jumps(phase, jump_mass)
        jump = crossings >= 1
    elif jumps == "weyl_window":
        jump, crossings, phase = hazard.weyl_window_jumps(
            coin_key, phase, coin_probability(jump_mass), window_start)
    else:
        rule = hazard.bernoulli_jumps if jumps == "bernoulli" else hazard.weyl_jumps
        jump = rule(coin_key, coin_probability(jump_mass))
        crossings = jump.astype(jump_mass.dtype)
    jump = jump | force
    proposal = resampling.categorical(dest_key, log_weights)
    return jnp.where(jump, proposal, tokens), phase, jump, crossings, jump_mass


@eqx.filter_jit
def _sample(key, denoiser, process, jumps, exponential, jump_last, banned, allocate, sharding,
            shape, vocab_size, num_steps, window_length, dtype, clamp=None):
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

    noise_key, phase_key, steps_key = jax.random.split(key, 3)
    # uniform noise: 32 random bits modulo K (relative bias at most K / 2^32); one draw, where
    # jax.random.randint's two would double the compiled random-number code
    bits = jax.random.bits(noise_key, shape, jnp.uint32)
    tokens = constrain((bits % jnp.uint32(vocab_size)).astype(jnp.int32))
    if clamp is None:
        free = None
    else:
        clamped, clamp_tokens = clamp
        free = jnp.logical_not(clamped)
        tokens = jnp.where(clamped, clamp_tokens, tokens)
    if jumps == "stratified":  # the only rule whose phases are drawn once, up front
        phase = hazard.init_phase(phase_key, shape, dtype)
        if banned is not None:  # ``allocate`` is traced: one compilation serves both settings
            phase = jnp.where(allocate, hazard.allocate_phases(phase, banned[tokens]), phase)
    else:
        phase = jnp.zeros(shape, dtype)
    phase = constrain(phase)

    def coin_probability(jump_mass):
        return _coin_probability(process, exponential, jump_mass)

    def step(index, carry):
        tokens, phase, jump_counts, crossings, cum_hazard, banned_left, nonfinite = carry
        with jax.named_scope("shs_step"):
            last = index == num_steps - 1
            signal = process.signal_at(index, num_steps, dtype)
            next_signal = process.signal_at(index + 1, num_steps, dtype)
            log_posterior, bad = posterior(tokens, signal)
            # with last_step="denoise" the last model call feeds the denoise draw (every
            # position redrawn from the posterior), with "jump" one more step to signal 1;
            # ``jump_last`` is traced, so the model is traced once for the loop and both
            # settings share one compilation
            denoise = last & jnp.logical_not(jump_last)
            log_weights = jnp.where(
                denoise, log_posterior,
                process.log_jump_weights(log_posterior, tokens, signal, next_signal))
            force, counted = denoise, jnp.logical_not(denoise)
            if banned is not None:
                banned_left = jnp.where(last, jnp.sum(banned[tokens], axis=-1, dtype=jnp.int32),
                                        banned_left)
            new_tokens, phase, jump, n, jump_mass = _stay_or_replace(
                jax.random.fold_in(steps_key, index), tokens, phase, log_weights,
                coin_probability, jumps, index % window_length == 0, force=force,
            )
            if free is not None:   # clamped positions never move
                jump = jump & free
                n = jnp.where(free, n, jnp.zeros((), dtype))
                jump_mass = jnp.where(free, jump_mass, jnp.zeros((), dtype))
                new_tokens = jnp.where(free, new_tokens, tokens)
            zero = jnp.zeros((), dtype)
            return (
                constrain(new_tokens),
                phase,
                jump_counts + (jump & counted).astype(jnp.int32),
                crossings + jnp.where(counted, n, zero),
                cum_hazard + jnp.where(counted, jump_mass, zero),
                banned_left,
                nonfinite | bad | jnp.any(jnp.isnan(jump_mass)),
            )

    zeros = jnp.zeros(shape, dtype)
    carry = (tokens, phase, jnp.zeros(shape, jnp.int32), zeros, zeros,
             jnp.zeros(shape[0], jnp.int32), jnp.asarray(False))
    # num_steps is traced: one compilation serves every NFE
    tokens, _, jump_counts, crossings, cum_hazard, banned_left, nonfinite = jax.lax.fori_loop(
        0, num_steps, step, carry
    )
    info = SHSInfo(
        jumps=jump_counts,
        crossings=crossings,
        cum_hazard=cum_hazard,
        nfe=num_steps,
        banned_before_denoise=banned_left,
        nonfinite=nonfinite,
        mode_seeking=jnp.asarray(jumps == "stratified"),
    )
    return tokens, info
