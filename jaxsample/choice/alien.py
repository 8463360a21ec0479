"""Alien-space sampling: combinations of idea atoms that are coherent but unavailable.

After Artiles, Weiss, Brinkmann, Goyal & Rahaman, *The alien space of science* (arXiv 2603.01092,
2026): research directions are combinations ``x = {x_1 < … < x_L}`` of ``L`` distinct atoms from a
vocabulary of ``V``. A coherence model scores whether ``x`` is viable, an availability model
whether some existing community is positioned to produce it, and alien directions are drawn from
the tilted law (the paper ranks; this is the sampling form of the same trade-off)::

    π_{a,b}(x) ∝ p_coh(x)^a · A(x)^{−b},
    log p_coh(x) = Σ_i C_{x_i x_i} + Σ_{i<j} C_{x_i x_j} + const       (pairwise coherence logits)
    A(x) = (1/K) Σ_c Π_i softmax(U_c)_{x_i}                           (K communities, logits U)

``a = 1, b = 0`` is coherence sampling, ``a = b = 0`` the uniform law on the ``C(V, L)`` sets.

* ``method="exact"``: every set is enumerated (its index unranked in the combinatorial number
  system, ``chunk_size`` sets scored at a time), and draws come from the exact categorical law by
  :func:`jaxsample.kernels.resampling.categorical`. For ``C(V, L)`` up to ~10⁷.
* ``method="sir"``: sampling-importance-resampling for vocabularies too large to enumerate.
  ``num_proposals`` sets are drawn by **Gumbel-top-L** on proposal logits ``q`` (``L`` distinct
  atoms: the ``L`` largest of ``q_v + G_v``, ``G_v`` i.i.d. Gumbel). That is successive sampling
  without replacement from ``p = softmax(q)`` (Plackett–Luce), so the proposal probability of a
  *set* is exact: the sum over its ``L!`` orders ``σ`` of
  ``Π_i p_{σ_i} / (1 − Σ_{j<i} p_{σ_j})``, computed in log space. Each proposal gets the
  importance weight ``log π̃(x) − log q(x)``; ``num_samples`` draws are resampled from the
  self-normalised weights. The draws' law converges to ``π`` as ``num_proposals = m`` grows:
  its total-variation distance to ``π`` is at most ``6ρ/m`` with ``ρ = E_q[w²]/E_q[w]²``
  (the bias bound ``12ρ/m`` on bounded test functions of Agapiou et al., *Importance sampling:
  intrinsic dimension and computational cost*, Statist. Sci. 2017), so ``m ≥ 6ρ/ε`` proposals
  give TV ``≤ ε``; ``info.ess ≈ m/ρ`` estimates it.
* :func:`reciprocal_rank_fusion` (Cormack et al. 2009) and :func:`effective_vocabulary` (the
  paper's breadth metric); :func:`jaxsample.datasets.synthetic_community` is a planted world to
  test them.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsample._checks import (
    check_array,
    check_callable,
    check_choice,
    check_chunk_size,
    check_fn_output,
    check_hyperparameter,
    check_int,
    check_key,
    is_concrete,
)
from jaxsample.kernels import chunking, logspace, resampling

__all__ = [
    "RRFInfo",
    "TiltedInfo",
    "VocabularyInfo",
    "effective_vocabulary",
    "reciprocal_rank_fusion",
    "tilted_sample",
]

_MAX_ENUMERATED = 2**31 - 1


class TiltedInfo(NamedTuple):
    """Diagnostics of :func:`tilted_sample`.

    Attributes:
        log_target: ``(num_samples,)`` unnormalised tilted log-score ``a·log p̃_coh − b·log A``
            of each draw (``log_target − log_normalizer`` is its log-probability: exact for
            ``"exact"``, estimated for ``"sir"``).
        log_coherence: ``(num_samples,)`` the draws' ``log p̃_coh(x) = Σ_i C_{x_i x_i} +
            Σ_{i<j} C_{x_i x_j}`` (unnormalised).
        log_availability: ``(num_samples,)`` the draws' ``log A(x)``.
        log_normalizer: ``log Σ_x π̃(x)`` (``"exact"``) or its importance estimate
            ``log mean_i w_i`` (``"sir"``).
        ess: Kish effective sample size of the importance weights (``"sir"``); ``num_samples``
            for ``"exact"`` (independent exact draws).
        nonfinite: a non-finite score, weight or normaliser.
    """

    log_target: jax.Array
    log_coherence: jax.Array
    log_availability: jax.Array
    log_normalizer: jax.Array
    ess: jax.Array
    nonfinite: jax.Array


class RRFInfo(NamedTuple):
    """Beside :func:`reciprocal_rank_fusion`: ``ranks`` ``(num_lists, M)`` int32, the 1-based
    rank of each candidate in each list; ``nonfinite``: a score was NaN (its rank is
    arbitrary)."""

    ranks: jax.Array
    nonfinite: jax.Array


class VocabularyInfo(NamedTuple):
    """Beside :func:`effective_vocabulary`.

    Attributes:
        frequencies: ``(num_atoms,)`` the atom histogram ``f`` (sums to 1).
        entropy: ``H(f)`` in nats (the vocabulary is ``exp H``).
        nonfinite: the vocabulary is not finite (no samples).
    """

    frequencies: jax.Array
    entropy: jax.Array
    nonfinite: jax.Array


def _unary_and_pairs(coherence_logits, atoms):
    """``Σ_i C_{ii} + Σ_{i<j} C_{ij}`` for ``(..., L)`` atom sets (``C`` may be ``(V,)`` unary)."""
    if coherence_logits.ndim == 1:
        return jnp.sum(coherence_logits[atoms], axis=-1)
    size = atoms.shape[-1]
    total = jnp.sum(coherence_logits[atoms, atoms], axis=-1)
    for i, j in itertools.combinations(range(size), 2):
        total = total + coherence_logits[atoms[..., i], atoms[..., j]]
    return total


def _log_availability(log_community_probs, atoms):
    """``log (1/K) Σ_c Π_i p_c(x_i)`` for ``(n, L)`` atom sets."""
    per_community = jnp.sum(log_community_probs[:, atoms], axis=-1)  # (K, n)
    num_communities = log_community_probs.shape[0]
    return jax.nn.logsumexp(per_community, axis=0) - math.log(num_communities)


class _PairwiseCoherence(eqx.Module):
    """``log p̃_coh(x) = Σ_i C_{x_i x_i} + Σ_{i<j} C_{x_i x_j}`` from ``(V, V)`` or ``(V,)``
    logits."""

    logits: jax.Array

    def __call__(self, atoms):
        return _unary_and_pairs(self.logits, atoms)

    def unary(self, num_atoms, dtype):
        return self.logits if self.logits.ndim == 1 else jnp.diagonal(self.logits)


class _CommunityAvailability(eqx.Module):
    """``log A(x) = log (1/K) Σ_c Π_i softmax(U_c)_{x_i}`` from ``(K, V)`` logits."""

    log_probs: jax.Array

    def __call__(self, atoms):
        return _log_availability(self.log_probs, atoms)

    def unary(self, num_atoms, dtype):
        return jax.nn.logsumexp(self.log_probs, axis=0) - math.log(self.log_probs.shape[0])


class _SetFunction(eqx.Module):
    """A user's batched score ``fn(sets) -> (batch,)`` on ``(batch, L)`` atom sets. An equinox
    Module (or its method) keeps its weights as traced leaves; a plain function is static."""

    fn: object

    def __call__(self, atoms):
        return self.fn(atoms)

    def unary(self, num_atoms, dtype):
        return jnp.zeros((num_atoms,), dtype)  # no per-atom part: uniform in the proposal


class _CandidateScores(eqx.Module):
    """Per-candidate scores ``(M,)`` of the given candidate sets."""

    scores: jax.Array


def _candidate_scores(term, candidates, chunk_size):
    if isinstance(term, _CandidateScores):
        return term.scores
    return chunking.map_rows(term, candidates, chunk_size=chunk_size)


def _tilted_scores(coherence, availability, atoms, a, b):
    # a = 0 or b = 0 drops a term exactly (0·finite = 0; the scores were checked finite)
    return a * coherence(atoms) - b * availability(atoms)


def _binomial_tables(num_atoms, size):
    """``tables[k-1][v] = C(v, k)``, ``v = 0..V``, clipped to int32 (larger exceed every rank)."""
    tables = np.array([[math.comb(v, k) for v in range(num_atoms + 1)]
                       for k in range(1, size + 1)], dtype=np.int64)
    return np.minimum(tables, _MAX_ENUMERATED).astype(np.int32)


def _unrank(ranks, tables):
    """Sets of ``L`` atoms (ascending) from colex ranks ``r = Σ_k C(x_k, k)``."""
    atoms = []
    remainder = ranks
    for k in range(tables.shape[0], 0, -1):
        table = tables[k - 1]
        atom = (jnp.searchsorted(table, remainder, side="right") - 1).astype(jnp.int32)
        remainder = remainder - table[atom]
        atoms.append(atom)
    return jnp.stack(atoms[::-1], axis=-1)


def _log_set_proposal(log_p, atoms):
    """Exact log-probability of the *set* ``atoms`` under Gumbel-top-L on ``log p`` (normalised).

    Plackett–Luce: ``Σ_σ Π_i p_{σ_i}/(1 − Σ_{j<i} p_{σ_j})`` over the ``L!`` orders.
    """
    chosen = log_p[atoms]  # (n, L)
    size = atoms.shape[-1]
    terms = []
    for order in itertools.permutations(range(size)):
        total = jnp.zeros(chosen.shape[:-1], chosen.dtype)
        taken = jnp.zeros(chosen.shape[:-1], chosen.dtype)
        for i in order:
            # log(1 − taken), clipped: the mass left is positive (at least the atoms to come)
            left = jnp.log1p(-jnp.minimum(taken, 1 - jnp.finfo(chosen.dtype).eps))
            total = total + chosen[..., i] - left
            taken = taken + jnp.exp(chosen[..., i])
        terms.append(total)
    return jax.nn.logsumexp(jnp.stack(terms), axis=0)


def _exact(key, coherence, availability, a, b, *, num_samples, size, num_atoms, chunk_size):
    tables = jnp.asarray(_binomial_tables(num_atoms, size))
    num_sets = math.comb(num_atoms, size)

    def block_scores(ranks):
        return _tilted_scores(coherence, availability, _unrank(ranks, tables), a, b)

    scores = chunking.map_rows(block_scores, jnp.arange(num_sets, dtype=jnp.int32),
                               chunk_size=chunk_size)
    log_normalizer = jax.nn.logsumexp(scores)
    picks = resampling.categorical(key, scores, num_samples)
    samples = _unrank(picks, tables)
    ess = jnp.asarray(num_samples, scores.dtype)
    nonfinite = ~(jnp.all(jnp.isfinite(scores)) & jnp.isfinite(log_normalizer))
    return samples, _draws_info(coherence, availability, samples, scores[picks],
                                log_normalizer, ess, nonfinite)


def _from_candidates(key, coherence, availability, a, b, candidates, *, num_samples,
                     chunk_size):
    """The exact law restricted to the given candidate sets (their scores given or computed)."""
    log_coherence = _candidate_scores(coherence, candidates, chunk_size)
    log_availability = _candidate_scores(availability, candidates, chunk_size)
    scores = a * log_coherence - b * log_availability
    log_normalizer = jax.nn.logsumexp(scores)
    picks = resampling.categorical(key, scores, num_samples)
    nonfinite = ~(jnp.all(jnp.isfinite(scores)) & jnp.isfinite(log_normalizer))
    return candidates[picks], TiltedInfo(scores[picks], log_coherence[picks],
                                         log_availability[picks], log_normalizer,
                                         jnp.asarray(num_samples, scores.dtype), nonfinite)


def _draws_info(coherence, availability, samples, log_target, log_normalizer, ess, nonfinite):
    """The Info of ``(n, L)`` draws: both model terms rescored on the draws (``O(n)`` calls'
    worth, cheaper than carrying them through the enumeration or the proposals)."""
    log_coherence, log_availability = coherence(samples), availability(samples)
    nonfinite = nonfinite | ~(jnp.all(jnp.isfinite(log_coherence))
                              & jnp.all(jnp.isfinite(log_availability)))
    return TiltedInfo(log_target, log_coherence, log_availability, log_normalizer, ess,
                      nonfinite)


def _default_proposal(coherence, availability, a, b, num_atoms, dtype):
    """``q_v = a·C_vv − b·log mean_c p_c(v)``: the tilt of the unary parts (0 for a callable
    term, which has none)."""
    return a * coherence.unary(num_atoms, dtype) - b * availability.unary(num_atoms, dtype)


def _sir(key, coherence, availability, a, b, proposal_logits, *, num_samples, size, num_atoms,
         num_proposals, chunk_size, dtype):
    key_propose, key_resample = jax.random.split(key)
    if proposal_logits is None:
        proposal_logits = _default_proposal(coherence, availability, a, b, num_atoms, dtype)
    log_p = logspace.log_normalize(proposal_logits)

    def block(keys):
        noise = jax.vmap(lambda k: jax.random.gumbel(k, log_p.shape, log_p.dtype))(keys)
        atoms = jnp.sort(jax.lax.top_k(log_p[None, :] + noise, size)[1], axis=-1).astype(jnp.int32)
        scores = _tilted_scores(coherence, availability, atoms, a, b)
        return atoms, scores, scores - _log_set_proposal(log_p, atoms)

    keys = jax.random.split(key_propose, num_proposals)
    atoms, scores, log_weights = chunking.map_rows(block, keys, chunk_size=chunk_size)
    picks = resampling.categorical(key_resample, log_weights, num_samples)
    log_normalizer = jax.nn.logsumexp(log_weights) - math.log(num_proposals)
    ess = jnp.exp(logspace.log_ess(log_weights))
    nonfinite = ~(jnp.all(jnp.isfinite(log_weights)) & jnp.isfinite(log_normalizer))
    samples = atoms[picks]
    return samples, _draws_info(coherence, availability, samples, scores[picks],
                                log_normalizer, ess, nonfinite)


@eqx.filter_jit
def _tilted_sample(key, coherence, availability, a, b, proposal_logits, candidates, *,
                   method, num_samples, size, num_atoms, num_proposals, chunk_size, dtype):
    # filter_jit: arrays (the model arrays, a user Module's weights, a, b) are traced; the
    # counts, the method and plain user functions are static
    with jax.named_scope(f"tilted_sample_{method}"):
        a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
        if candidates is not None:
            return _from_candidates(key, coherence, availability, a, b, candidates,
                                    num_samples=num_samples, chunk_size=chunk_size)
        if method == "exact":
            return _exact(key, coherence, availability, a, b, num_samples=num_samples,
                          size=size, num_atoms=num_atoms, chunk_size=chunk_size)
        return _sir(key, coherence, availability, a, b, proposal_logits,
                    num_samples=num_samples, size=size, num_atoms=num_atoms,
                    num_proposals=num_proposals, chunk_size=chunk_size, dtype=dtype)


def _one_of(term, **given):
    named = [name for name, value in given.items() if value is not None]
    if len(named) != 1:
        options = ", ".join(given)
        got = ", ".join(named) if named else "none"
        raise ValueError(f"the {term} term: give exactly one of {options}; got {got}")
    return named[0]


def _example_sets(size, num_atoms, candidates):
    """Two sets on which a user's callable is probed eagerly."""
    if candidates is not None and is_concrete(candidates):
        rows = np.asarray(candidates)[:2]
        return rows if rows.shape[0] == 2 else np.concatenate([rows, rows])[:2]
    first = np.arange(size)
    second = first.copy()
    if num_atoms is not None and num_atoms > size:
        second[-1] = size  # the next set in colex order
    return np.stack([first, second]).astype(np.int32)


def _check_set_fn(name, fn, size, dtype, examples):
    """A batched callable on ``(batch, size)`` int32 atom sets returning ``(batch,)`` floating
    log-scores of ``dtype`` (when fixed by the arrays), finite on ``examples`` when concrete."""
    check_callable(name, fn)
    out = check_fn_output(name, fn, jax.ShapeDtypeStruct((2, size), jnp.int32), (2,),
                          kind="floating", dtype=dtype)
    value = fn(jnp.asarray(examples, jnp.int32))
    if is_concrete(value) and not np.all(np.isfinite(np.asarray(value))):
        raise ValueError(f"{name} must return finite log-scores on (batch, {size}) atom sets, "
                         f"got {np.asarray(value).tolist()} on the sets {examples.tolist()}")
    return out.dtype


def tilted_sample(key, coherence_logits=None, availability_logits=None, *, num_samples: int,
                  a=1.0, b=1.0, method: str = "exact", num_proposals: int | None = None,
                  size: int | None = None, proposal_logits=None, chunk_size: int | None = None,
                  log_coherence_fn=None, log_availability_fn=None, num_atoms: int | None = None,
                  candidates=None, log_coherence=None, log_availability=None
                  ) -> tuple[jax.Array, TiltedInfo]:
    """Draws sets of ``size`` distinct atoms from ``π_{a,b} ∝ p_coh^a · A^{−b}``.

    See the module docstring for the model, the exact and SIR samplers and the SIR budget. Each
    of the two terms comes in one of three forms:

    * **arrays** (the shorthand): ``coherence_logits`` (pairwise logits, ``log p̃_coh`` their
      sum over the set's pairs) and ``availability_logits`` (community logits, ``log A`` the
      mixture of the communities' products);
    * **batched callables** on ``(batch, L)`` int32 atom sets returning ``(batch,)`` log-scores:
      ``log_coherence_fn(sets) = log p̃_coh`` and ``log_availability_fn(sets) = log A``, e.g.
      learned models. Both samplers call them on blocks of sets (``chunk_size`` at a time, all at
      once by default). Pass an ``equinox.Module`` (or its method) so that its weights are
      traced, not baked into the compilation; ``num_atoms`` gives ``V`` when no array does;
    * **per-candidate scores**: ``candidates`` ``(M, L)`` sets with ``log_coherence`` and/or
      ``log_availability`` ``(M,)`` arrays (a term not given per candidate is computed on the
      candidates from its array or callable). The law is then ``π`` restricted to the
      candidates, drawn exactly (``method="exact"`` only).

    The forms mix (a learned coherence model with community logits, say). With a callable
    term SIR's default proposal has no per-atom part for it (uniform in that term): pass
    ``proposal_logits`` (a model's per-atom scores, say) when the law is far from uniform.

    Args:
        key: PRNG key.
        coherence_logits: ``(V, V)`` symmetric pairwise coherence logits (diagonal: per-atom
            terms) or ``(V,)`` per-atom logits only; finite.
        availability_logits: ``(K, V)`` per-community atom logits (each row a softmax law of
            the atoms a community uses); finite.
        num_samples: draws ``n`` (with replacement).
        a, b: coherence and availability exponents, ``>= 0``; traced.
        method: ``"exact"`` (enumerate the ``C(V, size)`` sets, or the candidates) or ``"sir"``.
        num_proposals: SIR proposals ``m`` (default ``max(64·n, 4096)``).
        size: atoms per set ``L`` (default 3, or the candidates' width; ``"sir"`` sums over
            ``L!`` orders: keep ``L`` small).
        proposal_logits: ``(V,)`` SIR proposal logits ``q``; default the tilt of the per-atom
            parts, ``a·C_vv − b·log mean_c softmax(U_c)_v`` (0 for a callable term).
        chunk_size: sets (``"exact"``, candidates) or proposals (``"sir"``) scored at a time;
            ``None``: all at once (``"sir"`` holds an ``(m, V)`` Gumbel array: chunk it for
            large ``V``).
        log_coherence_fn: batched callable ``(batch, L) int32 -> (batch,)`` floating
            ``log p̃_coh``, instead of ``coherence_logits``; its output is checked eagerly
            (shape, dtype, finite on two sets).
        log_availability_fn: the same for ``log A``, instead of ``availability_logits``.
        num_atoms: the vocabulary ``V`` when no logits array gives it (callables only).
        candidates: ``(M, L)`` int atom sets to draw from instead of all ``C(V, L)`` sets.
        log_coherence: ``(M,)`` finite ``log p̃_coh`` of each candidate.
        log_availability: ``(M,)`` finite ``log A`` of each candidate.

    Returns:
        ``(samples, info)``: ``(n, size)`` int32 atoms (ascending in each set; a candidate as
        given) and a :class:`TiltedInfo`.

    Example:
        >>> import jax
        >>> from jaxsample.datasets import synthetic_community
        >>> world = synthetic_community(jax.random.key(0), num_atoms=12, num_topics=3)
        >>> x, info = tilted_sample(jax.random.key(1), world.coherence_logits,
        ...                         world.availability_logits, num_samples=5)
        >>> x.shape, bool(info.nonfinite), info.log_availability.shape
        ((5, 3), False, (5,))

        A learned availability model (here a small equinox Module of community logits) in
        place of the array gives the same draws:

        >>> import equinox as eqx, jax.numpy as jnp
        >>> class Availability(eqx.Module):
        ...     logits: jax.Array
        ...     def __call__(self, sets):                     # (batch, L) -> (batch,)
        ...         log_p = jax.nn.log_softmax(self.logits, axis=-1)[:, sets].sum(-1)
        ...         return jax.nn.logsumexp(log_p, axis=0) - jnp.log(self.logits.shape[0])
        >>> y, _ = tilted_sample(jax.random.key(1), world.coherence_logits, num_samples=5,
        ...                      log_availability_fn=Availability(world.availability_logits))
        >>> bool((x == y).all())
        True
    """
    key = check_key("key", key)
    method = check_choice("method", method, ("exact", "sir"))
    coherence_form = _one_of("coherence", coherence_logits=coherence_logits,
                             log_coherence_fn=log_coherence_fn, log_coherence=log_coherence)
    availability_form = _one_of("availability", availability_logits=availability_logits,
                                log_availability_fn=log_availability_fn,
                                log_availability=log_availability)
    for form in (coherence_form, availability_form):
        if form in ("log_coherence", "log_availability") and candidates is None:
            raise ValueError(f"{form} holds per-candidate scores: pass the candidate sets as "
                             "candidates=(M, size) int atoms")
    if candidates is not None and method == "sir":
        raise ValueError("candidates are drawn from exactly (method='exact'); method='sir' "
                         "proposes new sets: leave candidates out")
    num_samples = check_int("num_samples", num_samples, 1)
    a = check_hyperparameter("a", a, positive=False)
    b = check_hyperparameter("b", b, positive=False)
    chunk_size = check_chunk_size(chunk_size)

    # the arrays fix the dtype and the vocabulary
    dtype = None
    availability = coherence = None
    if availability_logits is not None:
        availability_logits = check_array("availability_logits", availability_logits, ndim=2,
                                          finite=True)
        dtype = availability_logits.dtype
        given_atoms = availability_logits.shape[1]
        if num_atoms is not None and check_int("num_atoms", num_atoms, 1) != given_atoms:
            raise ValueError(f"num_atoms must match availability_logits' {given_atoms} atoms, "
                             f"got {num_atoms}")
        num_atoms = given_atoms
    if coherence_logits is not None:
        coherence_logits = check_array("coherence_logits", coherence_logits, dtype=dtype,
                                       finite=True)
        dtype = coherence_logits.dtype
        if num_atoms is None:
            num_atoms = coherence_logits.shape[-1]
        if coherence_logits.shape not in ((num_atoms,), (num_atoms, num_atoms)):
            raise ValueError(f"coherence_logits must have shape ({num_atoms}, {num_atoms}) or "
                             f"({num_atoms},) to match availability_logits' {num_atoms} atoms, "
                             f"got {coherence_logits.shape}")
    if candidates is not None:
        candidates = check_array("candidates", candidates, ndim=2, kind="integer",
                                 min_rows=1).astype(jnp.int32)
        if size is not None and check_int("size", size, 1) != candidates.shape[1]:
            raise ValueError(f"size must match the candidates' width {candidates.shape[1]}, "
                             f"got {size}")
        size = candidates.shape[1]
        if is_concrete(candidates):
            values = np.asarray(candidates)
            top = num_atoms if num_atoms is not None else np.iinfo(np.int32).max
            if values.min() < 0 or values.max() >= top:
                raise ValueError(f"candidates must be atoms in [0, {top}), got values in "
                                 f"[{values.min()}, {values.max()}]")
        for name, scores in (("log_coherence", log_coherence),
                             ("log_availability", log_availability)):
            if scores is not None:
                scores = check_array(name, scores, shape=(candidates.shape[0],), dtype=dtype,
                                     finite=True)
                dtype = scores.dtype
                if name == "log_coherence":
                    log_coherence = scores
                else:
                    log_availability = scores
    else:
        if num_atoms is None:
            raise ValueError("num_atoms must be given when no coherence_logits or "
                             "availability_logits fixes the vocabulary (callables only)")
        num_atoms = check_int("num_atoms", num_atoms, 1)
        size = check_int("size", 3 if size is None else size, 1, num_atoms)
    examples = _example_sets(size, num_atoms, candidates)
    for name, fn in (("log_coherence_fn", log_coherence_fn),
                     ("log_availability_fn", log_availability_fn)):
        if fn is not None:
            dtype = _check_set_fn(name, fn, size, dtype, examples)
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)

    coherence = {"coherence_logits": lambda: _PairwiseCoherence(coherence_logits),
                 "log_coherence_fn": lambda: _SetFunction(log_coherence_fn),
                 "log_coherence": lambda: _CandidateScores(log_coherence)}[coherence_form]()
    availability = {
        "availability_logits": lambda: _CommunityAvailability(
            jax.nn.log_softmax(availability_logits, axis=-1)),
        "log_availability_fn": lambda: _SetFunction(log_availability_fn),
        "log_availability": lambda: _CandidateScores(log_availability)}[availability_form]()

    if candidates is not None:
        num_proposals = proposal_logits = None
    elif method == "exact":
        if math.comb(num_atoms, size) > _MAX_ENUMERATED:
            raise ValueError(f"method='exact' enumerates C({num_atoms}, {size}) = "
                             f"{math.comb(num_atoms, size):.3g} sets, more than 2³¹ − 1; use "
                             f"method='sir'")
        num_proposals = None
        proposal_logits = None
    else:
        if is_concrete((a, b)) and float(a) == 0.0 and float(b) == 0.0:
            raise ValueError("a = b = 0 with method='sir': the target is the uniform law on "
                             "sets, drawn exactly by method='exact' or by uniform subsets; "
                             "SIR needs a tilt (a > 0 or b > 0)")
        if num_proposals is None:
            num_proposals = max(64 * num_samples, 4096)
        num_proposals = check_int("num_proposals", num_proposals, 1)
        if proposal_logits is not None:
            proposal_logits = check_array("proposal_logits", proposal_logits,
                                          shape=(num_atoms,), dtype=dtype, finite=True)
    return _tilted_sample(key, coherence, availability, jnp.asarray(a, dtype),
                          jnp.asarray(b, dtype), proposal_logits, candidates, method=method,
                          num_samples=num_samples, size=size, num_atoms=num_atoms,
                          num_proposals=num_proposals, chunk_size=chunk_size, dtype=dtype)

def reciprocal_rank_fusion(*rankings, k=60.0) -> tuple[jax.Array, RRFInfo]:
    """Fuses score lists by reciprocal rank: ``RRF(x) = Σ_l 1/(k + r_l(x))``.

    ``r_l(x)`` is the 1-based rank of candidate ``x`` in list ``l`` sorted by decreasing score
    (ties: the earlier candidate ranks first), so the result is invariant under strictly
    increasing transforms of each list. Pass ``−score`` for a list where lower is better (e.g.
    availability). Cormack, Clarke & Büttcher, SIGIR 2009; ``k = 60`` is their default.

    Args:
        *rankings: one or more ``(M,)`` score arrays (higher is better).
        k: rank offset, ``> 0``; traced.

    Returns:
        ``(fused, info)``: ``(M,)`` fused scores (higher is better), in the scores' floating
        dtype (JAX's default float for integer scores), and an :class:`RRFInfo` (the ranks).

    Example:
        >>> import jax.numpy as jnp
        >>> fused, info = reciprocal_rank_fusion(jnp.array([3.0, 2.0, 1.0]),
        ...                                      jnp.array([1.0, 3.0, 2.0]))
        >>> jnp.argsort(-fused).tolist(), info.ranks.tolist()
        ([1, 0, 2], [[1, 2, 3], [3, 1, 2]])
    """
    if not rankings:
        raise ValueError("rankings: pass at least one score array")
    arrays = [check_array(f"rankings[{i}]", r, ndim=1, kind="numeric")
              for i, r in enumerate(rankings)]
    if len({a.shape for a in arrays}) > 1:
        raise ValueError(f"rankings must all have the same length, got shapes "
                         f"{[a.shape for a in arrays]}")
    k = check_hyperparameter("k", k)
    dtype = jnp.result_type(*[a.dtype for a in arrays])
    dtype = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.zeros(()).dtype
    return _rrf(jnp.stack([a.astype(dtype) for a in arrays]), k)


@jax.jit
def _rrf(scores, k):
    with jax.named_scope("reciprocal_rank_fusion"):
        order = jnp.argsort(-scores, axis=-1, stable=True)
        ranks = (jnp.argsort(order, axis=-1, stable=True) + 1).astype(jnp.int32)
        k = jnp.asarray(k, scores.dtype)
        fused = jnp.sum(1 / (k + ranks.astype(scores.dtype)), axis=0)
        return fused, RRFInfo(ranks, jnp.any(jnp.isnan(scores)))


def effective_vocabulary(samples, *, num_atoms: int | None = None, dtype=None
                         ) -> tuple[jax.Array, VocabularyInfo]:
    """``exp(H(f))``: the perplexity of the atom histogram of ``samples``.

    ``f_v`` is the frequency of atom ``v`` over all positions of all sets: 1 when one atom is
    used, ``V`` when all are used equally; unchanged by relabelling atoms.

    Args:
        samples: ``(..., L)`` int atoms in ``[0, num_atoms)``.
        num_atoms: histogram length (static; default ``max(samples) + 1``, which needs concrete
            samples — pass it under ``jit``).
        dtype: floating dtype of the result (default: JAX's default float).

    Returns:
        ``(vocabulary, info)``: ``exp H(f)`` and a :class:`VocabularyInfo` (``f`` and ``H``).

    Example:
        >>> import jax.numpy as jnp
        >>> vocabulary, info = effective_vocabulary(jnp.array([[0, 1], [2, 3]]))
        >>> float(vocabulary), info.frequencies.tolist()
        (4.0, [0.25, 0.25, 0.25, 0.25])
    """
    samples = check_array("samples", samples, kind="integer")
    if num_atoms is None:
        if not is_concrete(samples):
            raise TypeError("num_atoms must be given when samples are traced (under jit/vmap)")
        num_atoms = int(np.max(np.asarray(samples))) + 1 if samples.size else 1
    num_atoms = check_int("num_atoms", num_atoms, 1)
    if is_concrete(samples) and samples.size:
        values = np.asarray(samples)
        if values.min() < 0 or values.max() >= num_atoms:
            raise ValueError(f"samples must lie in [0, {num_atoms}), got values in "
                             f"[{values.min()}, {values.max()}]")
    dtype = jnp.zeros(()).dtype if dtype is None else jnp.dtype(dtype)
    return _effective_vocabulary(samples, num_atoms=num_atoms, dtype=dtype)


@functools.partial(jax.jit, static_argnames=("num_atoms", "dtype"))
def _effective_vocabulary(samples, *, num_atoms, dtype):
    with jax.named_scope("effective_vocabulary"):
        counts = jnp.bincount(samples.ravel(), length=num_atoms).astype(dtype)
        freq = counts / jnp.sum(counts)
        safe = jnp.where(freq > 0, freq, jnp.ones_like(freq))
        entropy = -jnp.sum(jnp.where(freq > 0, freq * jnp.log(safe), jnp.zeros_like(freq)))
        vocabulary = jnp.exp(entropy)
        return vocabulary, VocabularyInfo(freq, entropy, ~jnp.isfinite(vocabulary))
