"""Kernels of stable maximum coverage: KL projection, the e_k DP and its gradient, incidences."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample.kernels import coverage as kc
from jaxsample.kernels import ksubset as ks


def _reference_projection(log_y, k):
    """Sort-based exact KL projection: try r = 0..k-1 capped entries (float64 NumPy)."""
    y = np.exp(log_y - log_y.max())
    order = np.argsort(-y)
    ys = y[order]
    for r in range(k):
        c = (k - r) / ys[r:].sum()
        if c * ys[r] <= 1 and (r == 0 or c * ys[r - 1] >= 1):
            return np.minimum(1.0, c * y)
    raise AssertionError("no consistent capped set")


def test_kl_projection_lands_in_capped_hypersimplex(dtype):
    """Output in {0 <= x <= 1, Σx = k}, of the form min(1, c·y), equal to the exact sort form."""
    m, k = 12, 4
    rng = np.random.default_rng(0)
    cases = np.stack([rng.normal(size=m) * s for s in (0.1, 2.0, 8.0, 40.0)]
                     + [np.r_[30.0, 30.0, np.zeros(m - 2)], np.zeros(m)])
    log_x = jax.jit(jax.vmap(lambda l: kc.kl_project(l, k)))(jnp.asarray(cases, dtype))
    eps = float(jnp.finfo(dtype).eps)
    for l, lx in zip(cases, np.asarray(log_x, np.float64), strict=True):
        x = np.exp(lx)
        assert np.all(x >= 0) and np.all(lx <= 0)
        assert abs(x.sum() - k) <= 8 * m * eps * k
        floor = np.log(float(jnp.finfo(dtype).tiny))
        free = (lx < -np.sqrt(eps)) & (lx > floor + 1)     # neither capped nor floored
        shift = lx[free] - l[free]          # log c on the uncapped entries: one constant
        assert shift.max() - shift.min() <= 64 * eps * max(1.0, np.abs(l).max())
        capped = lx >= -np.sqrt(eps)
        assert np.all(l[capped] + shift.mean() >= -np.sqrt(eps))   # capped: c·y >= 1
        np.testing.assert_allclose(x, _reference_projection(l, k), rtol=1e3 * eps, atol=1e3 * eps)


def _enumerate(weights, k):
    """All k-subsets and their weights Π_{i∈A} w_i (NumPy)."""
    subsets = list(itertools.combinations(range(len(weights)), k))
    mass = np.array([np.prod(weights[list(a)]) for a in subsets])
    return subsets, mass


def test_elementary_symmetric_and_gradient_identity(x64):
    """log e_r equals enumeration; π = grad log e_k equals w_i e_{k-1}(w_{-i}) / e_k(w)."""
    rng = np.random.default_rng(1)
    m, k = 7, 3
    theta = rng.normal(size=m)
    theta[5] = -np.inf                     # a zero weight: never in
    weights = np.exp(theta)

    @jax.jit
    def compute(theta):
        log_e = ks.log_elementary_symmetric(theta, k)

        def direct(i):                     # w_i e_{k-1}(w_{-i}) / e_k(w), item by item
            rest = theta.at[i].set(-jnp.inf)
            return jnp.exp(theta[i] + ks.log_elementary_symmetric(rest, k - 1)[k - 1] - log_e[k])

        forced = ks.inclusion_probabilities(theta.at[0].set(jnp.inf), k)
        rest = ks.inclusion_probabilities(theta.at[0].set(-jnp.inf), k - 1)
        return (log_e, ks.inclusion_probabilities(theta, k), jax.vmap(direct)(jnp.arange(m)),
                forced, rest)

    log_e, pi, direct, forced, rest = map(np.asarray, compute(jnp.asarray(theta)))
    exact = [sum(_enumerate(weights, r)[1]) for r in range(k + 1)]
    np.testing.assert_allclose(np.exp(log_e), exact, rtol=1e-12)
    np.testing.assert_allclose(pi, direct, rtol=1e-12, atol=1e-15)
    subsets, mass = _enumerate(weights, k)
    by_item = [sum(p for a, p in zip(subsets, mass, strict=True) if i in a) for i in range(m)]
    np.testing.assert_allclose(pi, np.array(by_item) / mass.sum(), rtol=1e-12, atol=1e-15)
    assert pi[5] == 0 and abs(pi.sum() - k) < 1e-12
    # +inf forces an item in; the others fill the remaining k - 1 slots
    np.testing.assert_allclose(forced, np.r_[1.0, rest[1:]], rtol=1e-12, atol=1e-15)


def _padded(dense):
    dense = np.asarray(dense)
    width = int(dense.sum(axis=1).max())
    rows = [np.flatnonzero(r) for r in dense]
    indices = np.full((dense.shape[0], width), dense.shape[1], np.int32)
    for e, r in enumerate(rows):
        indices[e, :r.size] = r
    return kc.PaddedIncidence.from_indices(indices, num_sets=dense.shape[1])


def test_dense_and_padded_incidence_agree():
    """Bx, Bᵀu and greedy agree between the dense and the padded-index forms (Bᵀu by the
    transposed index and by the segment sum); greedy's bound."""
    rng = np.random.default_rng(2)
    dense = (rng.random((50, 9)) < 0.25).astype(np.float32)
    padded = _padded(dense)
    assert padded.members is not None and padded.members.shape[0] % kc.MEMBER_BLOCK == 0
    without = kc.PaddedIncidence(padded.indices, 9)       # no transposed index: segment sum
    x = jnp.asarray(rng.random(9), jnp.float32)
    u = jnp.asarray(rng.random(50), jnp.float32)
    weights = jnp.asarray(rng.integers(1, 4, 50), jnp.float32)   # integers: exact ties matter

    @jax.jit
    def both(dense, padded, without):
        return ((kc.covered_counts(padded, x), kc.set_totals(padded, u),
                 kc.set_totals(without, u)),
                kc.greedy_coverage(dense, weights, 4), kc.greedy_coverage(padded, weights, 4))

    (counts, totals, scattered), greedy_dense, greedy_padded = both(jnp.asarray(dense), padded,
                                                                    without)
    np.testing.assert_allclose(counts, dense @ np.asarray(x), rtol=1e-6)
    np.testing.assert_allclose(totals, np.asarray(u) @ dense, rtol=1e-6)
    np.testing.assert_allclose(scattered, np.asarray(u) @ dense, rtol=1e-6)
    for a, b in zip(greedy_dense, greedy_padded, strict=True):
        np.testing.assert_array_equal(a, b)
    # greedy is (1 − 1/e)-optimal against brute force, and its gains add up to its coverage
    subsets = np.array(list(itertools.combinations(range(9), 4)))
    covers = [(np.asarray(weights) * (dense[:, a].sum(axis=1) > 0)).sum() for a in subsets]
    mask = np.asarray(greedy_dense[0])
    value = (np.asarray(weights) * (dense[:, mask].sum(axis=1) > 0)).sum()
    assert value == float(np.sum(greedy_dense[2])) >= (1 - 1 / np.e) * max(covers)


@pytest.mark.parametrize("num_elements", [1_000_000])
def test_padded_relaxation_memory_is_linear_in_nonzeros(num_elements):
    """n = 10⁶ elements, m = 10⁴ sets: compiled memory O(n·d), nowhere near n·m (with the
    transposed index of a disc cover's size, 1 024 members per set at most)."""
    m, d, k = 10_000, 8, 100
    incidence = kc.PaddedIncidence(jax.ShapeDtypeStruct((num_elements, d), jnp.int32), m,
                                   jax.ShapeDtypeStruct((1024, m), jnp.int32))
    weights = jax.ShapeDtypeStruct((num_elements,), jnp.float32)
    solve = jax.jit(lambda inc, w, reg: kc.entropic_mirror_ascent(inc, w, k, reg, 10))
    stats = solve.lower(incidence, weights, jax.ShapeDtypeStruct((), jnp.float32)).compile()
    stats = stats.memory_analysis()
    used = stats.temp_size_in_bytes + stats.output_size_in_bytes
    index_bytes = num_elements * d * 4
    assert used <= 6 * index_bytes, used            # a few (n, d) buffers: 0.4% of n·m floats


def test_transposed_index_is_skipped_when_one_set_is_huge():
    """A set holding every element would make the transposed index n·m: the segment sum runs."""
    indices = np.stack([np.zeros(400, int), np.arange(400) % 39 + 1], axis=1)
    assert kc.PaddedIncidence.from_indices(indices, num_sets=40).members is None
    assert kc.PaddedIncidence.from_indices(indices[:, 1:], num_sets=40).members is not None
