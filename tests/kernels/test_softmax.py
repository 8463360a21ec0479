"""Tests of the two-level softmax kernels: exact identities by full enumeration, draws, k-means.

Everything runs in float64 on one small clustered table (the contract test covers float32); the
jitted kernels see the same shapes throughout, so each compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as scipy_stats

from jaxsample.kernels import softmax as ks

VARIANTS = ks.VARIANTS
SIZES = (3, 9, 2, 10)  # N = 24 items in K = 4 clusters, d = 2
D = 2


def clustered(seed=0, sizes=SIZES, spread=0.6):
    """Items around random centres: ``sizes[c]`` items in cluster c, ids in order (NumPy)."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
    centres = 2.0 * rng.standard_normal((len(sizes), D))
    return centres[ids] + spread * rng.standard_normal((ids.shape[0], D)), ids


BLOCK = 4  # clusters of 3, 9, 2 and 10 items span 1, 3, 1 and 3 blocks: the ragged path


def build(x, ids, num_clusters=None, rank=0, block=BLOCK):
    num_clusters = int(ids.max()) + 1 if num_clusters is None else num_clusters
    return ks.cluster_stats(x, ids, num_clusters, block, rank=rank)


def enumerate_all(stats, x, ids, query, variant, tau=1.0, logits=None):
    """``log q`` of every item (the segment-log-sum-exp path: S m d > N)."""
    if logits is None:
        logits = ks.cluster_logits(stats, query, variant, tau)
    return ks.two_level_log_prob(stats, logits[None], ids, x, np.asarray(query)[None],
                                 np.arange(x.shape[0])[None], tau)[0]


def per_item(stats, x, ids, query, variant, tau=1.0):
    """``log q`` item by item, as N one-item queries (the slab path: S m d <= N)."""
    n = x.shape[0]
    logits = jnp.broadcast_to(ks.cluster_logits(stats, query, variant, tau), (n, 4))
    queries = np.broadcast_to(query, (n, D))
    return ks.two_level_log_prob(stats, logits, ids, x, queries, np.arange(n)[:, None], tau)[:, 0]


def exact(x, query, tau=1.0):
    return ks.exact_log_probs(x, np.asarray(query)[None, :], tau)[0]


def test_sorted_layout_lists_every_item_once():
    ids = np.array([2, 0, 2, 1, 2, 0], np.int32)
    x = np.arange(6.0)[:, None]
    stats = ks.cluster_stats(x, ids, 4, 2)
    assert np.asarray(stats.sorted_ids).tolist() == [1, 5, 3, 0, 2, 4]  # stable inside a cluster
    assert np.asarray(stats.sizes).tolist() == [2, 1, 3, 0]
    assert np.asarray(stats.starts).tolist() == [0, 2, 3, 6]
    assert ks.block_size(stats) == 2 and stats.sorted_embeddings.shape == (8, 1)
    np.testing.assert_array_equal(np.asarray(stats.sorted_embeddings)[:6, 0],
                                  x[np.asarray(stats.sorted_ids), 0])


def test_stats_match_numpy_and_low_rank_covariance(x64):
    x, ids = clustered(1)
    xn, idn = x, ids
    diag, top = build(x, ids), build(x, ids, rank=1)
    assert diag.dispersion_factors.shape == (4, 0, D) and top.dispersion_factors.shape == (4, 1, D)
    for c in range(4):
        members = xn[idn == c]
        cov = np.cov(members.T, bias=True)
        np.testing.assert_allclose(diag.mean[c], members.mean(0), atol=1e-12)
        np.testing.assert_allclose(diag.dispersion_diag[c], members.var(0), atol=1e-12)
        assert float(diag.log_size[c]) == pytest.approx(np.log(len(members)))
        # rank 1 of 2: keeps the trace and the top direction's variance
        f = np.asarray(top.dispersion_factors[c])
        approx = np.diag(top.dispersion_diag[c]) + f.T @ f
        assert np.trace(approx) == pytest.approx(np.trace(cov), rel=1e-10)
        u = np.linalg.eigh(cov)[1][:, -1]
        assert u @ approx @ u == pytest.approx(u @ cov @ u, rel=1e-10)


@pytest.mark.parametrize("variant", VARIANTS)
def test_proposal_identities(x64, variant):
    """Normalised; both log-prob paths agree; singletons exact; translation/relabel invariant."""
    x, ids = clustered(2, spread=1.0)
    query = np.asarray([0.7, -1.1])
    stats = build(x, ids, rank=1)
    table = np.asarray(enumerate_all(stats, x, ids, query, variant, 0.7))
    assert np.exp(table).sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(per_item(stats, x, ids, query, variant, 0.7), table, atol=1e-12)
    np.testing.assert_allclose(
        ks.two_level_log_probs_all(ks.cluster_logits(stats, query, variant, 0.7), ids, x, query,
                                   0.7), table, atol=1e-12)

    singletons = np.arange(24, dtype=np.int32)
    np.testing.assert_allclose(
        ks.two_level_log_probs_all(ks.cluster_logits(ks.cluster_stats(x, singletons, 24, 1),
                                                     query, variant, 0.7),
                                   singletons, x, query, 0.7), exact(x, query, 0.7), atol=1e-12)

    shifted = x + np.asarray([5.0, -2.0])[None, :]
    np.testing.assert_allclose(enumerate_all(build(shifted, ids, rank=1), shifted, ids, query,
                                             variant, 0.7), table, atol=1e-10)
    perm = np.random.default_rng(0).permutation(24)
    relabel = np.asarray([2, 0, 3, 1], np.int32)
    xp, idp = x[perm], relabel[ids[perm]]
    np.testing.assert_allclose(enumerate_all(build(xp, idp, rank=1), xp, idp, query, variant,
                                             0.7), table[perm], atol=1e-10)


def test_zero_dispersion_and_size_bias(x64):
    """Duplicated items: S-2LS and SD-2LS are exact; 2LS gives equal-score clusters equal mass."""
    centres = np.asarray([[1.0, 0.0], [0.0, 1.0], [-1.0, 2.0], [0.5, 0.5]])
    ids = np.repeat(np.arange(4), SIZES).astype(np.int32)
    x = centres[ids]
    query = np.asarray([0.3, 0.3])  # clusters 0 and 1 have equal centroid scores
    stats = build(x, ids, rank=1)
    target = np.asarray(exact(x, query))
    for variant in ("s", "sd", "sd_saturated"):
        np.testing.assert_allclose(enumerate_all(stats, x, ids, query, variant), target,
                                   atol=1e-12)
    plain = np.exp(np.asarray(enumerate_all(stats, x, ids, query, "2ls")))
    mass = [plain[ids == c].sum() for c in (0, 1)]
    assert mass[0] == pytest.approx(mass[1], rel=1e-12)  # 2LS: sizes 3 and 9 ignored
    exact_mass = [np.exp(target)[ids == c].sum() for c in (0, 1)]
    assert exact_mass[1] / exact_mass[0] == pytest.approx(3.0, rel=1e-12)


def test_oracle_cluster_logits_are_exact(x64):
    x, ids = clustered(3, spread=1.5)
    query = np.asarray([-0.4, 0.9])
    scores = x @ query
    oracle = np.asarray([np.log(np.exp(scores[ids == c]).sum()) for c in range(4)])
    log_q = enumerate_all(build(x, ids), x, ids, query, None, logits=oracle)
    np.testing.assert_allclose(log_q, exact(x, query), atol=1e-12)


def _chi_square_pvalue(counts, probs):
    """Chi-square goodness of fit, pooling items whose expected count is below 5."""
    expected = counts.sum() * probs
    small = expected < 5
    obs = np.r_[counts[~small], counts[small].sum()]
    exp = np.r_[expected[~small], expected[small].sum()]
    keep = exp > 0
    return scipy_stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


def draw(key, stats, logits, query, num, sequential=False):
    items, log_q = ks.two_level_sample(key, stats, logits[None], np.asarray(query)[None], 1.0,
                                       num, sequential=sequential)
    return items[0], log_q[0]


def test_draws_follow_the_proposal(x64):
    """20 000 draws per variant with all draws run at once, and 4 000 for SD-2LS with the
    per-draw loop (CPU's layout), every cluster streamed in blocks of 4 (clusters of 3, 9, 2
    and 10 items: 1 to 3 blocks, partial last blocks): log q equals enumeration and the counts
    pass a chi-square test against exp(log q) (reject at p < 1e-3 for each of the 4 runs)."""
    x, ids = clustered(4, spread=1.0)
    query = np.asarray([0.4, -0.3])
    stats = build(x, ids)
    runs = [(variant, False, 20_000) for variant in VARIANTS] + [("sd", True, 4_000)]
    for seed, (variant, sequential, num) in enumerate(runs):
        logits = ks.cluster_logits(stats, query, variant, 1.0)
        items, log_q = draw(jax.random.key(seed), stats, logits, query, num, sequential)
        assert items.dtype == jnp.int32
        table, items = np.asarray(enumerate_all(stats, x, ids, query, variant)), np.asarray(items)
        np.testing.assert_allclose(log_q, table[items], atol=1e-12)
        counts = np.bincount(items, minlength=24)
        assert _chi_square_pvalue(counts, np.exp(table)) > 1e-3, variant


def test_empty_clusters_never_sampled(x64):
    x, ids = clustered(5)
    ids = np.where(ids == 2, 0, ids).astype(np.int32)  # cluster 2 empty; m = 10 as elsewhere
    stats = build(x, ids, num_clusters=4)
    query = np.asarray([0.5, -1.0])
    for variant in VARIANTS:
        logits = ks.cluster_logits(stats, query, variant, 1.0)
        assert np.isneginf(np.asarray(logits)[2])
        items, log_q = draw(jax.random.key(6), stats, logits, query, 20_000)
        assert np.all(np.isfinite(np.asarray(log_q)))
        assert 2 not in set(ids[np.asarray(items)].tolist())
        total = np.exp(np.asarray(enumerate_all(stats, x, ids, query, variant))).sum()
        assert total == pytest.approx(1, abs=1e-12)


def test_exact_partition_and_log_probs_chunked(x64):
    x, _ = clustered(7)
    queries = np.random.default_rng(8).standard_normal((4, D))
    dense = np.asarray(ks.exact_log_partition(x, queries, 0.6))
    np.testing.assert_allclose(ks.exact_log_partition(x, queries, 0.6, chunk_size=2), dense,
                               rtol=1e-12)
    reference = [np.log(np.exp(x @ q / 0.6).sum()) for q in queries]
    np.testing.assert_allclose(dense, reference, rtol=1e-12)


def test_split_cuts_balanced_slabs_along_the_principal_axis(x64):
    rng = np.random.default_rng(11)
    t = rng.uniform(-5, 5, 23)  # cluster 0: a long thin cloud along (1, 1); cluster 1: 1 item
    x = np.r_[np.c_[t + 0.1 * rng.standard_normal(23), t + 0.1 * rng.standard_normal(23)],
              [[9.0, -9.0]]]
    ids = np.r_[np.zeros(23, np.int32), 1]
    new, total = ks.split_clusters(x, ids, 2, 5)
    new = np.asarray(new)
    assert int(total) == 6 and new[-1] == 5  # ceil(23 / 5) = 5 pieces, then the singleton
    assert sorted(np.bincount(new[:-1]).tolist()) == [4, 4, 5, 5, 5]
    order = [t[new[:-1] == p] for p in range(5)]  # consecutive slabs along the long axis
    assert all(a.max() < b.min() for a, b in zip(order, order[1:], strict=False)) or \
        all(a.min() > b.max() for a, b in zip(order, order[1:], strict=False))


def test_sampled_softmax_logits_remove_accidental_hits(x64):
    logits = ks.sampled_softmax_logits(jnp.asarray([2.0]), jnp.asarray([[1.0, 2.0, 0.5]]),
                                       jnp.log(jnp.asarray([[0.25, 0.5, 0.25]])),
                                       jnp.asarray([7]), jnp.asarray([[3, 7, 4]]))
    # o_k = s_k - log(S q_k) with S = 3; the sampled copy of the target is removed
    np.testing.assert_allclose(logits, [[2.0, 1.0 - np.log(0.75), -np.inf,
                                         0.5 - np.log(0.75)]])


def closed_form(x, ids, query, variant, tau=1.0, excluded=()):
    """``log q`` of every item written out in NumPy from the definitions (full covariance, 1/n):
    the cluster logits of ``variant``, clusters with every member excluded at -inf, and the exact
    softmax over each cluster's remaining members."""
    scores = x @ query / tau
    out = np.full(x.shape[0], -np.inf)
    keep = ~np.isin(np.arange(x.shape[0]), excluded)
    logits, masses = [], []
    for c in range(int(ids.max()) + 1):
        members = x[ids == c]
        cov = np.cov(members.T, bias=True).reshape(x.shape[1], x.shape[1])
        logit = members.mean(0) @ query / tau
        if variant != "2ls":
            logit += np.log(len(members))
        v, log_n = query @ cov @ query / tau**2, np.log(len(members))
        if variant == "sd":
            logit += 0.5 * v
        if variant == "sd_saturated":  # v / 2 up to v = 2 log n_c, then sqrt(2 v log n_c) - log n_c
            logit += 0.5 * v if v <= 2 * log_n else np.sqrt(2 * v * log_n) - log_n
        alive = keep & (ids == c)
        logits.append(logit if alive.any() else -np.inf)
        masses.append(np.log(np.exp(scores[alive]).sum()) if alive.any() else -np.inf)
    logits = np.asarray(logits)
    log_cluster = logits - np.log(np.exp(logits[np.isfinite(logits)]).sum())
    out[keep] = log_cluster[ids[keep]] + scores[keep] - np.asarray(masses)[ids[keep]]
    return out


def _excluded_row(excluded, width=6):
    row = np.full(width, -1, np.int32)
    row[:len(excluded)] = excluded
    return np.sort(row)[None]


@pytest.mark.parametrize("variant", VARIANTS)
def test_ragged_blocks_and_exclusion_match_the_closed_form(x64, variant):
    """On the uneven partition (3, 9, 2, 10 items in blocks of 4), with and without excluded items
    (one cluster emptied, one cluster thinned, a repeat, padding), both log-prob paths equal the
    closed form written out in NumPy, and every law sums to 1 over the remaining items."""
    x, ids = clustered(9, spread=1.0)
    query = np.asarray([0.8, -0.5])
    stats = build(x, ids, rank=D)  # the full covariance: the paper's SD-2LS
    cases = [(), (0, 1, 2), (0, 1, 2, 5, 5, 23)]  # cluster 0 is items 0-2
    for excluded in cases:
        row = _excluded_row(excluded)
        logits = ks.cluster_logits(stats, query, variant, 0.7)
        logits = jnp.where(ks.exhausted_clusters(stats, ids, row)[0], -jnp.inf, logits)
        expected = closed_form(x, ids, query, variant, 0.7, excluded)
        assert np.exp(expected).sum() == pytest.approx(1.0, abs=1e-12)
        every = np.arange(24)
        table = ks.two_level_log_prob(stats, logits[None], ids, x, query[None], every[None], 0.7,
                                      row)[0]  # segment path
        one_by_one = ks.two_level_log_prob(
            stats, jnp.broadcast_to(logits, (24, 4)), ids, x, np.broadcast_to(query, (24, D)),
            every[:, None], 0.7, np.repeat(row, 24, 0))[:, 0]  # streaming path
        full = ks.two_level_log_probs_all(logits, ids, x, query, 0.7, row[0])
        for got in (table, one_by_one, full):
            np.testing.assert_allclose(got, expected, atol=1e-12)


def test_ragged_draws_with_exclusion_pass_chi_square(x64):
    """40 000 SD-2LS draws per loop layout from the uneven partition in blocks of 4, with three
    items excluded (an emptied cluster would be never drawn): no excluded item appears, log q
    equals the closed form, and the counts pass a chi-square test against it (reject at
    p < 1e-3 for each of the 2 runs)."""
    x, ids = clustered(10, spread=1.2)
    query = np.asarray([-0.6, 0.9])
    stats = build(x, ids, rank=D)
    excluded = (4, 11, 20)
    row = _excluded_row(excluded)
    logits = ks.cluster_logits(stats, query, "sd", 1.0)
    logits = jnp.where(ks.exhausted_clusters(stats, ids, row)[0], -jnp.inf, logits)
    expected = closed_form(x, ids, query, "sd", 1.0, excluded)
    for seed, sequential in enumerate((False, True)):
        items, log_q = ks.two_level_sample(jax.random.key(20 + seed), stats, logits[None],
                                           query[None], 1.0, 40_000, row, sequential=sequential)
        items = np.asarray(items[0])
        assert not np.isin(items, excluded).any()
        np.testing.assert_allclose(log_q[0], expected[items], atol=1e-12)
        counts = np.bincount(items, minlength=24)
        keep = np.isfinite(expected)
        assert _chi_square_pvalue(counts[keep], np.exp(expected[keep])) > 1e-3, sequential


def test_exhausted_clusters_count_distinct_items():
    ids = np.array([0, 0, 1, 2, 2, 2], np.int32)
    stats = ks.cluster_stats(np.zeros((6, 1), np.float32), ids, 4, 2)
    excluded = np.sort(np.array([[0, 1, -1, -1], [3, 3, 4, 2], [-1, -1, -1, -1]], np.int32), 1)
    np.testing.assert_array_equal(ks.exhausted_clusters(stats, ids, excluded),
                                  [[True, False, False, False], [False, True, False, False],
                                   [False] * 4])


def test_saturated_dispersion_is_the_gaussian_term_then_the_largest_member(x64):
    """D(v) = v/2 up to v = 2 log n (value and slope continuous there), sqrt(2 v log n) - log n
    past it, never above v/2; for n Gaussian scores it tracks log mean exp(z) on both sides of
    the freezing point, where v/2 overshoots (n = 10^4 draws, v from 1 to 64: the n-sample
    log-mean-exp fluctuates by far less than the gaps asserted)."""
    log_n = np.log(100.0)
    v = np.linspace(0.0, 40.0, 401)
    d = np.asarray(ks.saturated_dispersion(jnp.asarray(v), jnp.full(v.shape, log_n)))
    assert np.all(d <= 0.5 * v + 1e-12)
    np.testing.assert_allclose(d[v <= 2 * log_n], 0.5 * v[v <= 2 * log_n], rtol=1e-12)
    slope = jax.grad(lambda u: ks.saturated_dispersion(u, jnp.asarray(log_n)))
    at = 2 * log_n
    assert float(slope(at - 1e-9)) == pytest.approx(0.5, rel=1e-6)
    assert float(slope(at + 1e-9)) == pytest.approx(0.5, rel=1e-6)
    z = np.random.default_rng(0).standard_normal(10_000)
    below = np.log(np.mean(np.exp(z)))  # v = 1 < 2 log n: the Gaussian cumulant holds
    assert float(ks.saturated_dispersion(jnp.asarray(1.0), jnp.log(1e4))) == pytest.approx(
        below, abs=0.05)
    # v = 64 > 2 log n = 18.4: v/2 = 32 overshoots log mean exp (~19 nats) by ~13 nats, the
    # saturated rule (~25) by half that (the largest of n Gaussians sits below sqrt(2 v log n))
    past = np.log(np.mean(np.exp(8.0 * z)))
    rule = float(ks.saturated_dispersion(jnp.asarray(64.0), jnp.log(1e4)))
    assert past < rule < 32.0
    assert rule - past < 0.6 * (32.0 - past)
