"""Tests of jaxsample.softmax: the index, the batched sampler, log_prob at scale, importance
weights and the sampled-softmax loss. dtype, jit, vmap and traced temperature are the contract
test's (tests/contract/softmax_two_level.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from contract.softmax_two_level import tiny_index, tiny_queries

from jaxsample import softmax
from jaxsample.kernels.softmax import exact_log_probs, sampled_softmax_logits
from jaxsample.sharding import particle_mesh, shard_particles
from jaxsample.softmax import baselines

SIZES = (4, 14, 6, 24)
N, D, K = sum(SIZES), 3, len(SIZES)


def items_and_ids(dtype=jnp.float32, key=0):
    k_centre, k_noise = jax.random.split(jax.random.key(key))
    ids = np.repeat(np.arange(K), SIZES)
    centres = 1.5 * jax.random.normal(k_centre, (K, D), dtype)
    x = centres[ids] + jnp.asarray(0.7, dtype) * jax.random.normal(k_noise, (N, D), dtype)
    return x, jnp.asarray(ids, jnp.int32)


def queries_for(dtype=jnp.float32, batch=4):
    return jax.random.normal(jax.random.key(42), (batch, D), dtype)


def test_build_index_from_ids_and_split():
    x, ids = items_and_ids()
    index, info = softmax.index_from_clusters(x, ids)
    assert (index.num_items, index.num_clusters, index.dim, index.max_cluster_size) == (N, K, D, 24)
    assert (index.rank, index.block_size) == (D, N // K)  # full covariance; mean-size blocks
    assert int(info.solver.num_iterations) == 0 and bool(info.solver.converged)
    assert not bool(info.nonfinite)
    centred = np.asarray(x) - np.asarray(index.stats.mean)[np.asarray(ids)]
    assert float(info.objective) == pytest.approx(float((centred ** 2).sum()), rel=1e-5)

    split, _ = softmax.index_from_clusters(x, ids, max_cluster_size=7)
    assert split.max_cluster_size <= 7
    assert split.num_clusters == sum(-(-s // 7) for s in SIZES)
    for c in range(split.num_clusters):  # every piece comes from one original cluster
        assert len(set(np.asarray(ids)[np.asarray(split.cluster_ids) == c])) == 1
    log_q = split.proposal_log_probs(queries_for())
    np.testing.assert_allclose(jnp.exp(log_q).sum(1), 1, atol=1e-5)


def test_static_shapes_pad_every_rebuild_alike():
    """static_shapes pads an index to K + ceil(N / m) clusters, blocks of m rows, whatever the
    partition
    (a training loop's rebuilds share compilations); the padding clusters are empty (log size
    -inf: never drawn, tests/kernels/test_softmax.py)."""
    x, ids = items_and_ids()
    built = [softmax.index_from_clusters(x, c, max_cluster_size=7, static_shapes=True)[0]
             for c in (ids, (ids + 1) % K)]
    assert jax.tree.map(jnp.shape, built[0]) == jax.tree.map(jnp.shape, built[1])
    for index in built:
        bound = K + -(-N // 7)
        assert (index.num_clusters, index.block_size, index.rank) == (bound, 7, D)
        assert index.max_cluster_size <= 7
        used = np.bincount(np.asarray(index.cluster_ids), minlength=index.num_clusters) > 0
        assert used.sum() == sum(-(-s // 7) for s in SIZES)
        np.testing.assert_array_equal(np.isneginf(np.asarray(index.stats.log_size)), ~used)


def test_sample_matches_log_prob_and_ignores_chunking():
    index, q = tiny_index(jnp.float32), tiny_queries(jnp.float32)
    items, info = softmax.sample(jax.random.key(0), index, q, num_samples=4, temperature=0.8)
    assert items.shape == (2, 4) and items.dtype == jnp.int32 and info.log_q.shape == (2, 4)
    np.testing.assert_allclose(index.log_prob(q, items, temperature=0.8), info.log_q,
                               atol=1e-6)
    chunked, chunked_info = softmax.sample(jax.random.key(0), index, q, num_samples=4,
                                           temperature=0.8, chunk_size=1)
    np.testing.assert_array_equal(chunked, items)
    np.testing.assert_allclose(chunked_info.log_q, info.log_q, rtol=1e-6)


def test_exclude_removes_items_and_renormalises():
    """Per-query exclusion lists (ragged: -1 padding; a repeat; a whole cluster, items 0-1 of
    the tiny index; every item): sample's log q equals log_prob's and the enumeration's, no
    excluded item is drawn, the law over the remaining items sums to 1, and the query whose every
    item is excluded is flagged (the closed form is checked in tests/kernels/test_softmax.py)."""
    index, q = tiny_index(jnp.float32), np.asarray(tiny_queries(jnp.float32))
    q = np.concatenate([q, q[:1]])  # host arrays: slicing them compiles nothing
    pad = np.full((3, 10), -1, np.int32)
    pad[0, :3], pad[1, :2], pad[2] = [0, 1, 7], [3, 3], np.arange(10)
    items, info = softmax.sample(jax.random.key(1), index, q, num_samples=64, exclude=pad)
    items, log_q = np.asarray(items), np.asarray(info.log_q)
    assert info.nonfinite.tolist() == [False, False, True]
    table = np.asarray(index.proposal_log_probs(q[:2], exclude=pad[:2]))
    np.testing.assert_allclose(np.exp(table).sum(1), 1, atol=1e-5)
    for b in range(2):
        assert not np.isin(items[b], pad[b][pad[b] >= 0]).any()
        assert np.all(np.isneginf(table[b, pad[b][pad[b] >= 0]]))
    np.testing.assert_allclose(np.take_along_axis(table, items[:2], 1), log_q[:2], atol=2e-6)
    np.testing.assert_allclose(np.asarray(index.log_prob(q, items, exclude=pad))[:2], log_q[:2],
                               atol=2e-6)


def test_legacy_and_new_style_keys_draw_alike():
    """A legacy ``PRNGKey`` is accepted, as by every family, and draws what the new-style key of
    the same seed draws (its key data are the same). The settings of
    test_sample_matches_log_prob_and_ignores_chunking, so the new-style call reuses its
    compilation."""
    index, q = tiny_index(jnp.float32), tiny_queries(jnp.float32)
    new, new_info = softmax.sample(jax.random.key(0), index, q, num_samples=4, temperature=0.8)
    legacy, legacy_info = softmax.sample(jax.random.PRNGKey(0), index, q, num_samples=4,
                                         temperature=0.8)
    assert legacy.shape == (2, 4)
    np.testing.assert_array_equal(legacy, new)
    np.testing.assert_array_equal(legacy_info.log_q, new_info.log_q)


def test_nonfinite_query_is_flagged():
    index, q = tiny_index(jnp.float32), tiny_queries(jnp.float32)
    items, info = softmax.sample(jax.random.key(0), index, q.at[1, 0].set(jnp.nan),
                                 num_samples=4, temperature=0.8)
    assert info.nonfinite.tolist() == [False, True]
    assert int(items.min()) >= 0 and int(items.max()) < index.num_items  # valid ids, flagged
    assert np.all(np.isfinite(np.asarray(info.log_q)[0]))


def test_log_prob_of_every_item_at_scale_within_memory():
    """N = 10^4 items in 50 clusters, d = 16, 200 queries, every item: <= 1 GB, equals the
    enumeration (the per-item cluster normalisers once asked for 104 GB here)."""
    n, d, b = 10_000, 16, 200
    x = jax.random.normal(jax.random.key(1), (n, d), jnp.float32)
    ids = jnp.asarray(np.arange(n) % 50, jnp.int32)
    index, _ = softmax.index_from_clusters(x, ids)
    q = 0.5 * jax.random.normal(jax.random.key(2), (b, d), jnp.float32)
    items = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (b, n))
    tau = np.asarray(1.0, np.float32)
    compiled = softmax.two_level._log_prob.lower(index, q, items, None, tau, "sd", None).compile()
    memory = compiled.memory_analysis()
    assert memory.temp_size_in_bytes + memory.output_size_in_bytes <= 2**30
    np.testing.assert_allclose(compiled(index, q, items, None, tau),
                               index.proposal_log_probs(q, variant="sd"), atol=2e-5)


def test_sharded_item_table_matches():
    index, q = tiny_index(jnp.float32), tiny_queries(jnp.float32)
    mesh = particle_mesh(2)
    sharded = index._replace(embeddings=shard_particles(index.embeddings, mesh),
                             cluster_ids=shard_particles(index.cluster_ids, mesh))
    assert len(sharded.embeddings.sharding.device_set) == 2
    a = softmax.sample(jax.random.key(5), index, q, num_samples=4, temperature=0.8)
    b = softmax.sample(jax.random.key(5), sharded, q, num_samples=4, temperature=0.8)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1].log_q, b[1].log_q, rtol=1e-5)


@pytest.mark.slow
def test_importance_weights_and_sampled_softmax_gradient():
    """R = 16 independent batches of S = 4096 draws from the 2LS proposal of one query (far
    from the softmax on this table):

    - the weights w = exp(s - log q) average to Z and self-normalise to E_p[f], within 5
      Monte Carlo standard errors of the R * S draws, while the plain average misses E_p[f];
    - d/dq of the corrected sampled-softmax loss (one batch of S) averages over the R batches to
      d/dq of the full softmax loss within 5 standard errors (spread of the R gradients /
      sqrt(R)) plus 20 / S for the O(1/S) bias of the self-normalised estimate, per coordinate;
      the uncorrected loss (log q dropped) misses by more than 3 such bounds, so the test can
      fail.
    """
    x, ids = items_and_ids()
    index, _ = softmax.index_from_clusters(x, ids)
    reps, num, target = 16, 4096, 17
    query = queries_for(batch=1)[0]
    items, info = softmax.sample(jax.random.key(6), index, jnp.tile(query, (reps, 1)),
                                 num_samples=num, variant="2ls")
    xn, qn = np.asarray(x, np.float64), np.asarray(query, np.float64)
    drawn = np.asarray(items).ravel()
    w = np.exp(xn[drawn] @ qn - np.asarray(info.log_q, np.float64).ravel())  # exp(s - log q)
    f, fi = xn[:, 0], xn[drawn, 0]
    total = reps * num
    scores = xn @ qn
    z = np.exp(scores).sum()
    assert abs((w.mean() - z) / (w.std() / np.sqrt(total))) < 5
    p = np.exp(scores) / z
    exact_f = p @ f
    snis = np.sum(w * fi) / np.sum(w)
    se = np.sqrt(np.mean((w * (fi - snis)) ** 2) / total) / w.mean()  # delta method
    assert abs(snis - exact_f) < 5 * se
    assert abs(fi.mean() - exact_f) > 5 * se

    def sampled_loss(q, drawn, log_q):
        logits = sampled_softmax_logits((x[target] @ q)[None], (x[drawn] @ q)[None],
                                                log_q[None], jnp.asarray([target]), drawn[None])
        return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray([0]))[0]

    exact = p @ xn - xn[target]  # d/dq (log Z - s_target)
    gradients = jax.jit(jax.vmap(jax.grad(sampled_loss), in_axes=(None, 0, 0)))
    for log_q, corrected in ((info.log_q, True), (jnp.full_like(info.log_q, -np.log(N)), False)):
        grads = np.asarray(gradients(query, items, log_q))
        error = np.abs(grads.mean(0) - exact)
        bound = 5 * grads.std(0) / np.sqrt(reps) + 20 / num
        if corrected:
            assert np.all(error < bound), (error, bound)
        else:
            assert np.any(error > 3 * bound), (error, bound)


def test_exact_baselines_follow_the_softmax():
    """Both exact draws report log p; each item's frequency over 2 x 4000 draws is within
    5 binomial standard errors of p (the contract does not cover baselines)."""
    index, q = tiny_index(jnp.float32), tiny_queries(jnp.float32)
    log_p = np.asarray(exact_log_probs(index.embeddings, q, 1.0))
    for method in baselines.METHODS:
        items, info = baselines.exact_sample(jax.random.key(3), index.embeddings, q,
                                             num_samples=4000, method=method)
        items = np.asarray(items)
        np.testing.assert_allclose(info.log_q, np.take_along_axis(log_p, items, 1), atol=1e-5)
        p = np.exp(log_p)
        freq = np.stack([np.bincount(row, minlength=10) for row in items]) / 4000
        assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / 4000) + 1e-12), method
    items, info = baselines.uniform_sample(jax.random.key(4), N, 2, num_samples=3)
    assert items.shape == (2, 3) and float(info.log_q[0, 0]) == pytest.approx(-np.log(N))


def test_bad_inputs_raise():
    x, ids = items_and_ids()
    with pytest.raises(ValueError, match="non-empty"):
        softmax.index_from_clusters(x, jnp.where(ids == 2, 1, ids))
    with pytest.raises(ValueError, match="cluster_ids must lie"):
        softmax.index_from_clusters(x, ids.at[0].set(-1))
    with pytest.raises(ValueError, match="cluster_ids must lie"):
        softmax.index_from_clusters(x, ids, num_clusters=3)
    with pytest.raises(ValueError, match="cluster_ids must have shape"):
        softmax.index_from_clusters(x, ids[:-1])
    with pytest.raises(TypeError, match="cluster_ids must be integer"):
        softmax.index_from_clusters(x, ids.astype(jnp.float32))
    with pytest.raises(TypeError, match="key"):
        softmax.build_index(None, x, num_clusters=4)
    with pytest.raises(ValueError, match="embeddings must have 2"):
        softmax.index_from_clusters(x[0], ids)
    with pytest.raises(ValueError, match="embeddings must be finite"):
        softmax.index_from_clusters(x.at[0, 0].set(jnp.nan), ids)
    with pytest.raises(ValueError, match="rank"):
        softmax.index_from_clusters(x, ids, rank=D + 1)
    with pytest.raises(ValueError, match="init"):
        softmax.build_index(jax.random.key(0), x, init="kmeans")
    with pytest.raises(ValueError, match="max_iterations"):
        softmax.build_index(jax.random.key(0), x, max_iterations=0)
    with pytest.raises(TypeError, match="outside jit"):
        jax.jit(lambda e: softmax.index_from_clusters(e, ids))(x)

    index, _ = softmax.index_from_clusters(x, ids)
    q = queries_for()
    key = jax.random.key(0)
    with pytest.raises(TypeError, match="queries must have dtype"):
        with jax.enable_x64(True):
            softmax.sample(key, index, jnp.ones((4, D), jnp.float64), num_samples=2)
    with pytest.raises(TypeError, match="num_samples"):
        softmax.sample(key, index, q, num_samples=2.0)
    with pytest.raises(TypeError, match="SoftmaxIndex"):
        softmax.sample(key, (x, ids), q, num_samples=2)
    with pytest.raises(ValueError, match="items must lie"):
        index.log_prob(q, jnp.full((4, 2), N))
    with pytest.raises(ValueError, match="items must have shape"):
        index.log_prob(q, jnp.zeros((3, 2), jnp.int32))
    with pytest.raises(ValueError, match="log_q"):
        index.log_importance_weights(q, jnp.zeros((4, 2), jnp.int32),
                                       jnp.zeros((4, 3), jnp.float32))
    with pytest.raises(ValueError, match="exclude must lie"):
        softmax.sample(key, index, q, num_samples=2, exclude=jnp.full((4, 2), -2))
    with pytest.raises(ValueError, match=r"exclude must have shape \(B, E\)"):
        softmax.sample(key, index, q, num_samples=2, exclude=jnp.zeros((3, 2), jnp.int32))
    with pytest.raises(TypeError, match="exclude must be integer"):
        index.log_prob(q, jnp.zeros((4, 2), jnp.int32), exclude=jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match="block_size"):
        softmax.index_from_clusters(x, ids, block_size=0)
    with pytest.raises(TypeError, match="progress"):
        softmax.build_index(jax.random.key(0), x, progress=print)


def test_build_index_warns_once_when_kmeans_runs_out_of_iterations():
    """k-means stopped by max_iterations: info.solver says so and the eager call warns once; a
    converged build (and a given partition) is silent."""
    import warnings

    from jaxsample import RESULTS

    x, _ = items_and_ids()
    with pytest.warns(RuntimeWarning, match="build_index's k-means did not succeed") as caught:
        _, info = softmax.build_index(jax.random.key(0), x, num_clusters=K, max_iterations=1,
                                      tolerance=0.0, max_cluster_size=N)
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert info.solver.result == RESULTS.max_iterations_reached
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = softmax.build_index(jax.random.key(0), x, num_clusters=K, max_cluster_size=N)
        assert info.solver.result == RESULTS.successful
        _, info = softmax.index_from_clusters(x, items_and_ids()[1])
        assert info.solver.result == RESULTS.successful
