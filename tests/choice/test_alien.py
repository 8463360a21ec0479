"""Tests of jaxsample.choice.alien: exact tilted law, exact SIR proposal and budget, RRF, breadth.

References are brute-force NumPy enumerations of the 84 sets of 3 of 9 atoms. Chi-square tests
and deviation bounds are at ``P_VALUE`` (two-sided where it applies), with fixed seeds; the
dtype/jit/vmap/bad-input checks live in the contract registry.
"""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
from _stats import chisquare_pvalue
from contract.choice_alien import LearnedAvailability, LearnedCoherence

from jaxsample import choice, datasets
from jaxsample.choice import alien

P_VALUE = 1e-3
NUM_ATOMS, SIZE = 9, 3
SETS = np.array(list(itertools.combinations(range(NUM_ATOMS), SIZE)))


def _world():
    return datasets.synthetic_community(jax.random.key(0), num_atoms=NUM_ATOMS, num_topics=3,
                                        dtype=jnp.float32)


def _log_target(world, a, b):
    """Brute-force log π_{a,b} over SETS (NumPy, float64)."""
    coherence = np.asarray(world.coherence_logits, np.float64)
    log_p = scipy.special.log_softmax(np.asarray(world.availability_logits, np.float64), axis=1)
    coh = sum(coherence[SETS[:, i], SETS[:, j]] for i in range(SIZE) for j in range(i, SIZE))
    avail = scipy.special.logsumexp(log_p[:, SETS].sum(axis=-1), axis=0) - np.log(len(log_p))
    scores = a * coh - b * avail
    return scores - scipy.special.logsumexp(scores)


def _set_index(samples):
    lookup = {tuple(s): i for i, s in enumerate(SETS.tolist())}
    return np.array([lookup[tuple(s)] for s in np.asarray(samples).tolist()])


def test_exact_sampler_is_the_enumerated_tilted_law():
    # (a, b) = (1, 0) is coherence sampling, (0, 0) the uniform law on sets; a and b are traced,
    # so the four laws share one compilation
    world = _world()
    for a, b in [(1.0, 0.0), (0.0, 0.0), (1.0, 1.0), (2.0, 0.5)]:
        samples, info = choice.tilted_sample(jax.random.key(1), world.coherence_logits,
                                             world.availability_logits, num_samples=4000, a=a, b=b)
        log_pi = _log_target(world, a, b)
        index = _set_index(samples)
        np.testing.assert_allclose(info.log_target - info.log_normalizer, log_pi[index],
                                   atol=1e-4)
        # the two model terms of each draw, rescored, make up its tilted score
        np.testing.assert_allclose(a * info.log_coherence - b * info.log_availability,
                                   info.log_target, atol=1e-4)
        counts = np.bincount(index, minlength=len(SETS))
        assert chisquare_pvalue(counts, np.exp(log_pi)) > P_VALUE, (a, b)
    # a = b = 0: every set equally likely
    np.testing.assert_allclose(_log_target(world, 0.0, 0.0), -np.log(len(SETS)))


def test_chunked_enumeration_equals_dense():
    world = _world()
    # 4000 draws: the dense call shares the compilation of the test above
    dense = choice.tilted_sample(jax.random.key(2), world.coherence_logits,
                                 world.availability_logits, num_samples=4000)
    chunked = choice.tilted_sample(jax.random.key(2), world.coherence_logits,
                                   world.availability_logits, num_samples=4000, chunk_size=10)
    np.testing.assert_array_equal(chunked[0], dense[0])
    np.testing.assert_allclose(chunked[1].log_normalizer, dense[1].log_normalizer, rtol=1e-6)


def _plackett_luce_set_probs(log_q):
    """Brute force: P(set) under successive sampling without replacement from softmax(q)."""
    p = np.exp(scipy.special.log_softmax(np.asarray(log_q, np.float64)))
    probs = np.zeros(len(SETS))
    for n, s in enumerate(SETS):
        for order in itertools.permutations(s):
            prob, left = 1.0, 1.0
            for atom in order:
                prob *= p[atom] / left
                left -= p[atom]
            probs[n] += prob
    return probs


def _proposal(world, a=1.0, b=1.0):
    """SIR's default proposal logits for the array form of ``world``."""
    return alien._default_proposal(
        alien._PairwiseCoherence(world.coherence_logits),
        alien._CommunityAvailability(jax.nn.log_softmax(world.availability_logits, axis=-1)),
        a, b, NUM_ATOMS, world.availability_logits.dtype)


def test_gumbel_top_k_set_probabilities_are_exact():
    # the SIR weights need the proposal probability of a *set*: the library's log-space
    # Plackett–Luce sum over orders equals the brute force, and sums to 1 over all sets
    world = _world()
    q = _proposal(world)
    exact = _plackett_luce_set_probs(q)
    np.testing.assert_allclose(exact.sum(), 1.0, rtol=1e-12)
    log_p = q - jax.nn.logsumexp(q)
    computed = np.exp(np.asarray(jax.jit(alien._log_set_proposal)(log_p, jnp.asarray(SETS))))
    np.testing.assert_allclose(computed, exact, rtol=1e-4)


def test_sir_approaches_the_exact_law_within_its_budget():
    # Stated budget: TV(law of an SIR draw, π) <= 6ρ/m, ρ = Σ π²/q (module docstring). With N
    # independent runs of one draw each, E TV(empirical, law) <= ½ Σ sqrt(p(1 − p)/N) and
    # McDiarmid adds sqrt(log(1/p)/(2N)) at probability p; the bound uses p_x = π_x. At m = 1
    # an SIR draw is a proposal draw: its TV to π is TV(q, π), computed exactly.
    world = _world()
    a, b = 1.0, 1.0
    pi = np.exp(_log_target(world, a, b))
    q = _proposal(world, a, b)
    proposal = _plackett_luce_set_probs(q)
    rho = float(np.sum(pi**2 / proposal))
    num_runs, m = 2048, 256
    keys = jax.random.split(jax.random.key(4), num_runs)
    draws, info = jax.vmap(lambda k: choice.tilted_sample(
        k, world.coherence_logits, world.availability_logits, num_samples=1, a=a, b=b, method="sir",
        num_proposals=m))(keys)
    assert not bool(jnp.any(info.nonfinite))
    np.testing.assert_allclose(np.median(info.ess), m / rho, rtol=0.1)
    counts = np.bincount(_set_index(draws[:, 0]), minlength=len(SETS))
    tv = 0.5 * np.abs(counts / num_runs - pi).sum()
    floor = 0.5 * np.sum(np.sqrt(pi * (1 - pi) / num_runs))
    deviation = np.sqrt(np.log(1 / P_VALUE) / (2 * num_runs))
    assert tv <= 6 * rho / m + floor + deviation, (tv, rho, floor)
    tv_proposal = 0.5 * np.abs(proposal - pi).sum()
    assert tv_proposal > 6 * rho / m + floor + deviation, tv_proposal  # the test can fail


def test_reciprocal_rank_fusion_depends_on_ranks_only():
    rng = np.random.default_rng(0)
    first, second = (jnp.asarray(rng.normal(size=50), jnp.float32) for _ in range(2))

    def rrf(*scores, k=60.0):
        return choice.reciprocal_rank_fusion(*scores, k=k)[0]

    fused, info = choice.reciprocal_rank_fusion(first, second)
    for transform in (jnp.exp, lambda s: 3 * s + 1, lambda s: s**3):
        np.testing.assert_allclose(rrf(transform(first), transform(second)), fused, rtol=1e-6)
    np.testing.assert_allclose(rrf(second, first), fused, rtol=1e-6)
    # the info's ranks are the 1-based ranks by decreasing score
    ranks = np.stack([np.argsort(np.argsort(-np.asarray(s))) for s in (first, second)])
    np.testing.assert_array_equal(np.asarray(info.ranks), ranks + 1)
    assert not bool(info.nonfinite)
    # for large k the fused order is the order by rank sum (Borda)
    ranks = ranks.sum(axis=0)
    big_k = np.asarray(rrf(first, second, k=1e6))
    distinct = np.unique(ranks, return_counts=True)
    if np.all(distinct[1] == 1):
        np.testing.assert_array_equal(np.argsort(-big_k), np.argsort(ranks))
    else:
        assert np.all(np.diff(ranks[np.argsort(-big_k)]) >= 0)


def test_effective_vocabulary_limits_and_relabelling():
    def vocabulary(samples, **kwargs):
        return choice.effective_vocabulary(samples, **kwargs)[0]

    uniform = jnp.arange(24).reshape(8, 3)
    value, info = choice.effective_vocabulary(uniform, num_atoms=30)
    np.testing.assert_allclose(value, 24.0, rtol=1e-6)
    np.testing.assert_allclose(info.entropy, np.log(24.0), rtol=1e-6)
    np.testing.assert_allclose(info.frequencies, np.r_[np.full(24, 1 / 24), np.zeros(6)],
                               rtol=1e-6)
    np.testing.assert_allclose(vocabulary(jnp.zeros((5, 3), jnp.int32)), 1.0)
    samples = jnp.asarray(np.random.default_rng(1).integers(0, 30, (40, 3)))
    relabel = jnp.asarray(np.random.default_rng(2).permutation(30))
    np.testing.assert_allclose(vocabulary(relabel[samples], num_atoms=30),
                               vocabulary(samples, num_atoms=30), rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# learned models: batched callables and per-candidate scores


# the learned models a user would write, shared with the contract entry
_Coherence, _Availability = LearnedCoherence, LearnedAvailability


def _assert_same_draws(left, right):
    (x, info_x), (y, info_y) = left, right
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for name in ("log_target", "log_coherence", "log_availability", "log_normalizer", "ess"):
        np.testing.assert_allclose(getattr(info_x, name), getattr(info_y, name), rtol=1e-5,
                                   atol=1e-5, err_msg=name)
    assert not bool(info_y.nonfinite)


def test_callables_give_the_array_path_on_the_same_model():
    world = _world()
    coherence, availability = _Coherence(world.coherence_logits), _Availability(
        world.availability_logits)
    proposal = _proposal(world)
    for method, extra in (("exact", {}), ("sir", dict(num_proposals=512,
                                                      proposal_logits=proposal))):
        settings = dict(num_samples=300, method=method, **extra)
        arrays = choice.tilted_sample(jax.random.key(7), world.coherence_logits,
                                      world.availability_logits, **settings)
        callables = choice.tilted_sample(jax.random.key(7), log_coherence_fn=coherence,
                                         log_availability_fn=availability, num_atoms=NUM_ATOMS,
                                         **settings)
        _assert_same_draws(arrays, callables)
        mixed = choice.tilted_sample(jax.random.key(7), world.coherence_logits,
                                     log_availability_fn=availability, **settings)
        _assert_same_draws(arrays, mixed)
    # chunked scoring calls the models on blocks of sets: the same draws
    chunked = choice.tilted_sample(jax.random.key(7), log_coherence_fn=coherence,
                                   log_availability_fn=availability, num_atoms=NUM_ATOMS,
                                   num_samples=300, chunk_size=16)
    _assert_same_draws(arrays := choice.tilted_sample(
        jax.random.key(7), world.coherence_logits, world.availability_logits, num_samples=300),
        chunked)
    # a Module's weights are traced: one compilation serves two models under jit
    draw = jax.jit(lambda key, model: choice.tilted_sample(
        key, world.coherence_logits, log_availability_fn=model, num_samples=300))
    _assert_same_draws(arrays, draw(jax.random.key(7), availability))
    other = _Availability(world.availability_logits * 0.5)
    expected = choice.tilted_sample(jax.random.key(7), world.coherence_logits,
                                    world.availability_logits * 0.5, num_samples=300)
    _assert_same_draws(expected, draw(jax.random.key(7), other))
    assert draw._cache_size() == 1


def test_per_candidate_scores_in_enumeration_order_give_the_exact_path():
    world = _world()
    colex = SETS[np.lexsort(SETS.T)]  # the enumeration's (colex) order: last atom slowest
    coherence, availability = _Coherence(world.coherence_logits), _Availability(
        world.availability_logits)
    candidates = jnp.asarray(colex, jnp.int32)
    scores = dict(log_coherence=coherence(candidates), log_availability=availability(candidates))
    arrays = choice.tilted_sample(jax.random.key(8), world.coherence_logits,
                                  world.availability_logits, num_samples=500, a=2.0, b=0.5)
    given = choice.tilted_sample(jax.random.key(8), candidates=candidates, num_samples=500,
                                 a=2.0, b=0.5, **scores)
    _assert_same_draws(arrays, given)
    # one term per candidate, the other from its model on the candidates
    mixed = choice.tilted_sample(jax.random.key(8), candidates=candidates, num_samples=500,
                                 a=2.0, b=0.5, log_coherence=scores["log_coherence"],
                                 log_availability_fn=availability)
    _assert_same_draws(arrays, mixed)
    # a subset of candidates: the law restricted to it
    subset = candidates[::4]
    x, info = choice.tilted_sample(jax.random.key(9), world.coherence_logits,
                                   world.availability_logits, candidates=subset,
                                   num_samples=4000)
    log_pi = _log_target(world, 1.0, 1.0)
    index = _set_index(np.asarray(subset))
    restricted = np.exp(log_pi[index] - scipy.special.logsumexp(log_pi[index]))
    lookup = {tuple(s): i for i, s in enumerate(np.asarray(subset).tolist())}
    counts = np.bincount([lookup[tuple(s)] for s in np.asarray(x).tolist()],
                         minlength=len(index))
    assert chisquare_pvalue(counts, restricted) > P_VALUE


class _Broken(eqx.Module):
    """An availability model that is infinite on every set holding atom 5."""

    scale: jax.Array

    def __call__(self, sets):
        first = sets[:, 0].astype(self.scale.dtype)
        return jnp.where(jnp.any(sets == 5, axis=-1), jnp.inf, self.scale * first)


def test_a_callable_non_finite_beyond_its_first_output_is_flagged_in_info():
    world = _world()
    model = _Broken(jnp.asarray(0.1, jnp.float32))
    # eagerly the first output (two sets without atom 5) passes; the draws' Info flags the rest
    _, info = choice.tilted_sample(jax.random.key(10), world.coherence_logits,
                                   log_availability_fn=model, num_samples=50)
    assert bool(info.nonfinite)
    # under jit the weights are traced, so no eager probe can see them: the Info flags it
    _, info = jax.jit(lambda m: choice.tilted_sample(
        jax.random.key(10), world.coherence_logits, log_availability_fn=m, num_samples=50))(model)
    assert bool(info.nonfinite)
    # a first output that is not finite is refused eagerly, naming the argument
    with pytest.raises(ValueError, match="log_availability_fn must return finite"):
        choice.tilted_sample(jax.random.key(10), world.coherence_logits, num_samples=50,
                             log_availability_fn=lambda sets: jnp.full(sets.shape[0], jnp.nan))
