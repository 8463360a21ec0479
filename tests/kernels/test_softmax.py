"""Tests of the two-level softmax kernels: exact identities by full enumeration, then draws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as scipy_stats

from jaxsample.kernels import softmax as ks

VARIANTS = ks.VARIANTS


def clustered(key, sizes, d, dtype, spread=0.5):
    """Items around random centres: ``sizes[c]`` items in cluster c, ids in order."""
    k_centre, k_noise = jax.random.split(key)
    centres = 2.0 * jax.random.normal(k_centre, (len(sizes), d), dtype)
    ids = jnp.asarray(np.repeat(np.arange(len(sizes)), sizes), jnp.int32)
    noise = jax.random.normal(k_noise, (ids.shape[0], d), dtype)
    return centres[ids] + jnp.asarray(spread, dtype) * noise, ids


def build(x, ids, num_clusters=None, rank=0):
    num_clusters = int(ids.max()) + 1 if num_clusters is None else num_clusters
    largest = int(np.bincount(np.asarray(ids), minlength=num_clusters).max())
    return ks.cluster_stats(x, ids, num_clusters, largest, rank=rank)


def proposal(stats, x, ids, query, variant, tau=1.0, logits=None):
    """``log q`` of every item, by full enumeration."""
    if logits is None:
        logits = ks.cluster_logits(stats, query, variant, tau)
    return ks.two_level_log_prob(logits, stats.members, stats.mask, ids, x, query,
                                 jnp.arange(x.shape[0]), tau)


def exact(x, query, tau=1.0):
    return ks.exact_log_probs(x, query[None, :], tau)[0]


def tol(dtype):
    return 1e-5 if dtype == jnp.float32 else 1e-12


def test_members_table_lists_every_item_once():
    ids = jnp.array([2, 0, 2, 1, 2, 0], jnp.int32)
    members, mask = ks.cluster_members(ids, 4, 3)
    listed = np.asarray(members)[np.asarray(mask)]
    assert sorted(listed.tolist()) == list(range(6))
    np.testing.assert_array_equal(np.asarray(mask).sum(1), [2, 1, 3, 0])
    for c in range(4):
        assert np.all(np.asarray(ids)[np.asarray(members[c])[np.asarray(mask[c])]] == c)
    # stable order inside a cluster
    assert np.asarray(members[2]).tolist() == [0, 2, 4]


def test_stats_match_numpy(dtype):
    x, ids = clustered(jax.random.key(0), [5, 1, 7], 3, dtype)
    stats = build(x, ids)
    assert stats.mean.dtype == dtype and stats.dispersion_diag.dtype == dtype
    xn, idn = np.asarray(x, np.float64), np.asarray(ids)
    for c in range(3):
        members = xn[idn == c]
        np.testing.assert_allclose(stats.mean[c], members.mean(0), rtol=tol(dtype) * 10,
                                   atol=tol(dtype) * 10)
        np.testing.assert_allclose(stats.dispersion_diag[c], members.var(0),
                                   rtol=tol(dtype) * 100, atol=tol(dtype) * 100)
        assert float(stats.log_size[c]) == pytest.approx(np.log(len(members)))
    assert stats.dispersion_factors.shape == (3, 0, 3)


def test_full_rank_reproduces_covariance(x64):
    x, ids = clustered(jax.random.key(1), [6, 9], 4, jnp.float64)
    stats = build(x, ids, rank=4)
    for c in range(2):
        members = np.asarray(x)[np.asarray(ids) == c]
        cov = np.cov(members.T, bias=True)
        f = np.asarray(stats.dispersion_factors[c])
        np.testing.assert_allclose(np.diag(stats.dispersion_diag[c]) + f.T @ f, cov, atol=1e-12)


def test_low_rank_keeps_trace_and_top_direction(x64):
    x, ids = clustered(jax.random.key(2), [40], 5, jnp.float64)
    stats = build(x, ids, rank=2)
    cov = np.cov(np.asarray(x).T, bias=True)
    f = np.asarray(stats.dispersion_factors[0])
    approx = np.diag(stats.dispersion_diag[0]) + f.T @ f
    assert np.trace(approx) == pytest.approx(np.trace(cov), rel=1e-12)
    top = np.linalg.eigh(cov)[1][:, -1]
    assert top @ approx @ top == pytest.approx(top @ cov @ top, rel=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_proposal_normalised(dtype, variant):
    x, ids = clustered(jax.random.key(3), [4, 1, 9, 2], 3, dtype)
    query = jax.random.normal(jax.random.key(4), (3,), dtype)
    for rank in (0, 2):
        log_q = proposal(build(x, ids, rank=rank), x, ids, query, variant, 0.7)
        assert log_q.dtype == dtype
        assert float(jnp.exp(log_q).sum()) == pytest.approx(1.0, abs=10 * tol(dtype))


@pytest.mark.parametrize("variant", VARIANTS)
def test_singleton_clusters_are_exact(dtype, variant):
    x = jax.random.normal(jax.random.key(5), (7, 3), dtype)
    ids = jnp.arange(7, dtype=jnp.int32)
    query = jax.random.normal(jax.random.key(6), (3,), dtype)
    log_q = proposal(build(x, ids), x, ids, query, variant, 0.5)
    np.testing.assert_allclose(log_q, exact(x, query, 0.5), atol=100 * tol(dtype))


def test_zero_dispersion_size_corrected_is_exact(dtype):
    """Duplicated items: S-2LS and SD-2LS are exact, 2LS is not (sizes differ)."""
    centres = jax.random.normal(jax.random.key(7), (3, 4), dtype)
    ids = jnp.asarray([0, 0, 0, 0, 1, 2, 2], jnp.int32)
    x = centres[ids]
    query = jax.random.normal(jax.random.key(8), (4,), dtype)
    target = exact(x, query, 0.8)
    stats = build(x, ids, rank=2)
    for variant in ("s", "sd"):
        np.testing.assert_allclose(proposal(stats, x, ids, query, variant, 0.8), target,
                                   atol=100 * tol(dtype))
    assert float(jnp.max(jnp.abs(proposal(stats, x, ids, query, "2ls", 0.8) - target))) > 0.1


def test_size_bias_two_clusters(dtype):
    """Equal centroid scores, sizes 3 and 1: 2LS gives each cluster 1/2, S-2LS 3/4 and 1/4."""
    x = jnp.asarray([[1.0, 0.0]] * 3 + [[0.0, 1.0]], dtype)
    ids = jnp.asarray([0, 0, 0, 1], jnp.int32)
    query = jnp.asarray([0.3, 0.3], dtype)
    stats = build(x, ids)
    mass = {v: jnp.exp(proposal(stats, x, ids, query, v)) for v in VARIANTS}
    assert float(mass["2ls"][:3].sum()) == pytest.approx(0.5, abs=10 * tol(dtype))
    for v in ("s", "sd"):
        assert float(mass[v][:3].sum()) == pytest.approx(0.75, abs=10 * tol(dtype))
    np.testing.assert_allclose(mass["s"], jnp.exp(exact(x, query)), atol=10 * tol(dtype))


def test_oracle_cluster_logits_are_exact(dtype):
    x, ids = clustered(jax.random.key(9), [5, 2, 8], 3, dtype, spread=1.5)
    query = jax.random.normal(jax.random.key(10), (3,), dtype)
    scores = x @ query
    peak = jax.ops.segment_max(scores, ids, num_segments=3)
    oracle = peak + jnp.log(jax.ops.segment_sum(jnp.exp(scores - peak[ids]), ids, num_segments=3))
    log_q = proposal(build(x, ids), x, ids, query, None, logits=oracle)
    np.testing.assert_allclose(log_q, exact(x, query), atol=100 * tol(dtype))


@pytest.mark.parametrize("variant", VARIANTS)
def test_translation_and_relabelling_invariance(x64, variant):
    x, ids = clustered(jax.random.key(11), [3, 6, 2], 3, jnp.float64)
    query = jax.random.normal(jax.random.key(12), (3,), jnp.float64)
    base = proposal(build(x, ids, rank=1), x, ids, query, variant)
    shifted = x + jnp.asarray([5.0, -2.0, 1.0])[None, :]
    np.testing.assert_allclose(proposal(build(shifted, ids, rank=1), shifted, ids, query,
                                        variant), base, atol=1e-10)
    perm = np.random.default_rng(0).permutation(x.shape[0])
    relabel = jnp.asarray([2, 0, 1], jnp.int32)
    xp, idp = x[perm], relabel[ids[perm]]
    np.testing.assert_allclose(proposal(build(xp, idp, rank=1), xp, idp, query, variant),
                               base[perm], atol=1e-10)


@pytest.mark.parametrize("variant", VARIANTS)
def test_dense_enumeration_matches_per_item(dtype, variant):
    x, ids = clustered(jax.random.key(23), [5, 1, 6], 3, dtype, spread=1.0)
    query = jax.random.normal(jax.random.key(24), (3,), dtype)
    stats = build(x, ids)
    logits = ks.cluster_logits(stats, query, variant, 0.6)
    np.testing.assert_allclose(ks.two_level_log_probs_all(logits, ids, x, query, 0.6),
                               proposal(stats, x, ids, query, variant, 0.6),
                               atol=100 * tol(dtype))


@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_clusters_never_sampled(variant):
    x, ids = clustered(jax.random.key(13), [3, 4], 2, jnp.float32)
    ids = jnp.where(ids == 1, 3, ids)  # clusters 1 and 2 empty
    stats = build(x, ids, num_clusters=4)
    query = jnp.asarray([0.5, -1.0], jnp.float32)
    logits = ks.cluster_logits(stats, query, variant, 1.0)
    assert bool(jnp.all(jnp.isneginf(logits[1:3])))
    items, log_q = ks.two_level_sample(jax.random.key(14), logits, stats.members, stats.mask,
                                       x, query, 1.0, 500)
    assert bool(jnp.all(jnp.isfinite(log_q)))
    assert set(np.asarray(ids)[np.asarray(items)].tolist()) <= {0, 3}
    assert float(jnp.exp(proposal(stats, x, ids, query, variant)).sum()) == pytest.approx(1, 1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_sampled_log_q_matches_enumeration(dtype, variant):
    x, ids = clustered(jax.random.key(15), [4, 7, 1, 3], 3, dtype)
    query = jax.random.normal(jax.random.key(16), (3,), dtype)
    stats = build(x, ids)
    logits = ks.cluster_logits(stats, query, variant, 0.9)
    items, log_q = ks.two_level_sample(jax.random.key(17), logits, stats.members, stats.mask,
                                       x, query, 0.9, 64)
    assert items.dtype == jnp.int32 and log_q.dtype == dtype
    table = proposal(stats, x, ids, query, variant, 0.9)
    np.testing.assert_allclose(log_q, table[items], atol=100 * tol(dtype))


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_frequencies_chi_square(variant):
    """Empirical frequencies of 20000 draws vs exp(log q): chi-square, reject at p < 1e-3."""
    x, ids = clustered(jax.random.key(18), [6, 2, 9, 3], 2, jnp.float32, spread=1.0)
    query = jnp.asarray([0.4, -0.3], jnp.float32)
    stats = build(x, ids)
    logits = ks.cluster_logits(stats, query, variant, 1.0)
    items, _ = ks.two_level_sample(jax.random.key(19), logits, stats.members, stats.mask, x,
                                   query, 1.0, 20_000)
    probs = np.asarray(jnp.exp(proposal(stats, x, ids, query, variant)), np.float64)
    counts = np.bincount(np.asarray(items), minlength=x.shape[0])
    result = scipy_stats.chisquare(counts, 20_000 * probs / probs.sum())
    assert result.pvalue > 1e-3


def test_exact_partition_and_log_probs_chunked(dtype):
    x = jax.random.normal(jax.random.key(20), (23, 4), dtype)
    queries = jax.random.normal(jax.random.key(21), (5, 4), dtype)
    dense = ks.exact_log_partition(x, queries, 0.6)
    for chunk in (5, 100):
        chunked = ks.exact_log_partition(x, queries, 0.6, chunk_size=chunk)
        assert chunked.dtype == dtype
        np.testing.assert_allclose(chunked, dense, rtol=10 * tol(dtype))
    full = ks.exact_log_probs(x, queries, 0.6)
    np.testing.assert_allclose(ks.exact_log_probs(x, queries, 0.6, chunk_size=2), full,
                               rtol=10 * tol(dtype), atol=10 * tol(dtype))
    np.testing.assert_allclose(jax.scipy.special.logsumexp(full, axis=1), 0, atol=10 * tol(dtype))


def test_unknown_variant_raises():
    x, ids = clustered(jax.random.key(22), [2, 2], 2, jnp.float32)
    with pytest.raises(ValueError, match="variant"):
        ks.cluster_logits(build(x, ids), jnp.ones(2, jnp.float32), "exact", 1.0)
