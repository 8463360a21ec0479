"""Tests of jaxsample.softmax: the index, the batched sampler, importance weights, transforms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsample import softmax
from jaxsample.sharding import particle_mesh, shard_particles

N, D, K = 96, 3, 6


def items_and_ids(dtype, key=0):
    k_centre, k_noise = jax.random.split(jax.random.key(key))
    sizes = np.array([4, 30, 8, 20, 2, 32])
    ids = np.repeat(np.arange(K), sizes)
    centres = 1.5 * jax.random.normal(k_centre, (K, D), dtype)
    x = centres[ids] + jnp.asarray(0.7, dtype) * jax.random.normal(k_noise, (N, D), dtype)
    return x, jnp.asarray(ids, jnp.int32)


@pytest.fixture
def index(dtype):
    x, ids = items_and_ids(dtype)
    return softmax.build_index(x, cluster_ids=ids)


def queries_for(dtype, batch=4):
    return jax.random.normal(jax.random.key(42), (batch, D), dtype)


def test_build_index_from_ids(dtype):
    x, ids = items_and_ids(dtype)
    index = softmax.build_index(x, cluster_ids=ids, rank=1, chunk_size=4)
    assert index.num_items == N and index.num_clusters == K and index.dim == D
    assert index.stats.members.shape == (K, 32)
    assert index.stats.dispersion_factors.shape == (K, 1, D)
    assert index.stats.mean.dtype == dtype and index.stats.dispersion_factors.dtype == dtype


def test_build_index_by_kmeans():
    x, _ = items_and_ids(jnp.float32)
    index = softmax.build_index(x, num_clusters=6, key=jax.random.key(1), chunk_size=40)
    assert 1 <= index.num_clusters <= 6
    sizes = np.bincount(np.asarray(index.cluster_ids))
    assert sizes.sum() == N and np.all(sizes > 0)
    log_q = softmax.log_prob(index, queries_for(jnp.float32), jnp.tile(jnp.arange(N), (4, 1)))
    np.testing.assert_allclose(jnp.exp(log_q).sum(1), 1, atol=1e-5)


def test_max_cluster_size_splits_and_stays_normalised(x64):
    x, ids = items_and_ids(jnp.float64)
    index = softmax.build_index(x, cluster_ids=ids, max_cluster_size=7)
    assert index.stats.members.shape[1] == 7
    assert index.num_clusters == sum(-(-s // 7) for s in (4, 30, 8, 20, 2, 32))
    # every piece comes from one original cluster
    for c in range(index.num_clusters):
        assert len(set(np.asarray(ids)[np.asarray(index.cluster_ids) == c])) == 1
    q = queries_for(jnp.float64)
    log_q = softmax.log_prob(index, q, jnp.tile(jnp.arange(N), (4, 1)))
    np.testing.assert_allclose(jnp.exp(log_q).sum(1), 1, atol=1e-12)
    np.testing.assert_allclose(softmax.proposal_log_probs(index, q), log_q, atol=1e-12)


def test_singleton_index_every_variant_exact(x64):
    x, _ = items_and_ids(jnp.float64)
    index = softmax.build_index(x, cluster_ids=jnp.arange(N))
    q = queries_for(jnp.float64)
    target = softmax.exact_log_probs(index, q, temperature=0.5)
    for variant in softmax.VARIANTS:
        got = softmax.log_prob(index, q, jnp.tile(jnp.arange(N), (4, 1)), variant,
                               temperature=0.5)
        np.testing.assert_allclose(got, target, atol=1e-12)


@pytest.mark.parametrize("variant", softmax.VARIANTS)
def test_sample_shapes_dtypes_and_log_prob_consistency(index, dtype, variant):
    q = queries_for(dtype)
    items, log_q = softmax.sample(jax.random.key(0), index, q, 16, variant=variant,
                                  temperature=0.8)
    assert items.shape == (4, 16) and items.dtype == jnp.int32
    assert log_q.shape == (4, 16) and log_q.dtype == dtype
    again = softmax.log_prob(index, q, items, variant, temperature=0.8)
    np.testing.assert_allclose(again, log_q, atol=1e-5 if dtype == jnp.float32 else 1e-12)
    if variant != "sd":
        return
    single_items, single_log_q = softmax.sample(jax.random.key(0), index, q[0], 5,
                                                variant=variant)
    assert single_items.shape == (5,) and single_log_q.shape == (5,)
    chunked = softmax.sample(jax.random.key(0), index, q, 16, variant=variant, temperature=0.8,
                             chunk_size=3)
    np.testing.assert_array_equal(chunked[0], items)
    np.testing.assert_allclose(chunked[1], log_q, rtol=1e-5 if dtype == jnp.float32 else 1e-12)


def test_jit_and_eager_agree(index, dtype):
    q = queries_for(dtype)
    key = jax.random.key(3)
    jitted = jax.jit(lambda k, idx, qs: softmax.sample(k, idx, qs, 8, temperature=0.7))
    items_jit, log_q_jit = jitted(key, index, q)
    # the sampler's body run op by op (its outer jit removed)
    eager = softmax._sample.__wrapped__
    items_eager, log_q_eager = eager(key, index, q, jnp.asarray(0.7, dtype), 8, "sd", None)
    np.testing.assert_array_equal(items_jit, items_eager)
    np.testing.assert_allclose(log_q_jit, log_q_eager, rtol=1e-5 if dtype == jnp.float32 else 1e-12)


def test_vmap_equals_loop(index, dtype):
    q = queries_for(dtype)
    keys = jax.random.split(jax.random.key(4), 4)
    draw = lambda k, query: softmax.sample(k, index, query, 6, variant="s")
    items, log_q = jax.vmap(draw)(keys, q)
    for b in range(4):
        loop_items, loop_log_q = draw(keys[b], q[b])
        np.testing.assert_array_equal(items[b], loop_items)
        np.testing.assert_allclose(log_q[b], loop_log_q, rtol=1e-5)


def test_compiles_once_per_shape():
    x, ids = items_and_ids(jnp.float32)
    index = softmax.build_index(x, cluster_ids=ids)
    softmax.sample(jax.random.key(0), index, queries_for(jnp.float32, 3), 4)
    before = softmax._sample._cache_size()
    for seed in range(3):
        q = jax.random.normal(jax.random.key(seed), (3, D), jnp.float32)
        softmax.sample(jax.random.key(seed), index, q, 4, temperature=0.5 + seed)
    assert softmax._sample._cache_size() == before


def test_sharded_item_table_matches():
    x, ids = items_and_ids(jnp.float32)
    index = softmax.build_index(x, cluster_ids=ids)
    mesh = particle_mesh(4)
    sharded = index._replace(embeddings=shard_particles(index.embeddings, mesh),
                             cluster_ids=shard_particles(index.cluster_ids, mesh))
    assert len(sharded.embeddings.sharding.device_set) == 4
    q = queries_for(jnp.float32)
    a = softmax.sample(jax.random.key(5), index, q, 8)
    b = softmax.sample(jax.random.key(5), sharded, q, 8)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=1e-5)
    np.testing.assert_allclose(softmax.log_partition(sharded, q, chunk_size=32),
                               softmax.log_partition(index, q), rtol=1e-5)


@pytest.mark.slow
def test_importance_weights_unbiased(x64):
    """mean(w) -> Z and self-normalised E_p[f], within 5 Monte Carlo standard errors."""
    x, ids = items_and_ids(jnp.float64)
    index = softmax.build_index(x, cluster_ids=ids)
    q = queries_for(jnp.float64, 2)
    num = 20_000
    items, log_q = softmax.sample(jax.random.key(6), index, q, num, variant="2ls")
    log_w = softmax.log_importance_weights(index, q, items, log_q)
    z = jnp.exp(softmax.log_partition(index, q))
    w = jnp.exp(log_w)
    mean_w, se_w = w.mean(1), w.std(1) / np.sqrt(num)
    assert np.all(np.abs(np.asarray((mean_w - z) / se_w)) < 5)
    f = x[:, 0]
    exact_f = jnp.sum(jnp.exp(softmax.exact_log_probs(index, q)) * f[None, :], axis=1)
    snis = jnp.sum(jax.nn.softmax(log_w, axis=1) * f[items], axis=1)
    # delta-method standard error of the self-normalised estimator
    se = jnp.sqrt(jnp.mean((w * (f[items] - snis[:, None])) ** 2, axis=1) / num) / mean_w
    assert np.all(np.abs(np.asarray((snis - exact_f) / se)) < 5)


def test_size_correction_beats_plain_on_imbalanced_duplicates(x64):
    """Zero spread: S-2LS and SD-2LS are exact at every query; 2LS is off by the size ratio."""
    centres = jax.random.normal(jax.random.key(7), (3, D), jnp.float64)
    ids = jnp.asarray([0] * 10 + [1] * 2 + [2] * 5, jnp.int32)
    index = softmax.build_index(centres[ids], cluster_ids=ids)
    q = queries_for(jnp.float64)
    everything = jnp.tile(jnp.arange(17), (4, 1))
    target = softmax.exact_log_probs(index, q)
    for variant in ("s", "sd"):
        np.testing.assert_allclose(softmax.log_prob(index, q, everything, variant), target,
                                   atol=1e-12)
    assert float(jnp.max(jnp.abs(softmax.log_prob(index, q, everything, "2ls") - target))) > 0.1


def test_bad_inputs_raise():
    x, ids = items_and_ids(jnp.float32)
    with pytest.raises(ValueError, match="non-empty"):
        softmax.build_index(x, cluster_ids=jnp.where(ids == 2, 1, ids))
    with pytest.raises(ValueError, match="cluster_ids must lie"):
        softmax.build_index(x, cluster_ids=ids.at[0].set(-1))
    with pytest.raises(ValueError, match="cluster_ids must lie"):
        softmax.build_index(x, cluster_ids=ids, num_clusters=3)
    with pytest.raises(ValueError, match="cluster_ids must have shape"):
        softmax.build_index(x, cluster_ids=ids[:-1])
    with pytest.raises(TypeError, match="integer"):
        softmax.build_index(x, cluster_ids=ids.astype(jnp.float32))
    with pytest.raises(ValueError, match="key is required"):
        softmax.build_index(x, num_clusters=4)
    with pytest.raises(ValueError, match="embeddings must have shape"):
        softmax.build_index(x[0], cluster_ids=ids)
    with pytest.raises(ValueError, match="finite"):
        softmax.build_index(x.at[0, 0].set(jnp.nan), cluster_ids=ids)
    with pytest.raises(ValueError, match="rank"):
        softmax.build_index(x, cluster_ids=ids, rank=D + 1)

    index = softmax.build_index(x, cluster_ids=ids)
    q = queries_for(jnp.float32)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="queries must have shape"):
        softmax.sample(key, index, jnp.ones((4, D + 1), jnp.float32), 2)
    with pytest.raises(TypeError, match="dtype"):
        with jax.enable_x64(True):
            softmax.sample(key, index, jnp.ones((4, D), jnp.float64), 2)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="temperature"):
            softmax.sample(key, index, q, 2, temperature=bad)
    with pytest.raises(ValueError, match="variant"):
        softmax.sample(key, index, q, 2, variant="exact")
    with pytest.raises(ValueError, match="num_samples"):
        softmax.sample(key, index, q, 0)
    with pytest.raises(TypeError, match="num_samples"):
        softmax.sample(key, index, q, 2.0)
    with pytest.raises(TypeError, match="SoftmaxIndex"):
        softmax.sample(key, (x, ids), q, 2)
    with pytest.raises(ValueError, match="items must lie"):
        softmax.log_prob(index, q, jnp.full((4, 2), N), "s")
    with pytest.raises(ValueError, match="items must have shape"):
        softmax.log_prob(index, q, jnp.zeros((3, 2), jnp.int32), "s")
    with pytest.raises(ValueError, match="log_q"):
        softmax.log_importance_weights(index, q, jnp.zeros((4, 2), jnp.int32),
                                       jnp.zeros((4, 3), jnp.float32))
    with pytest.raises(TypeError, match="outside jit"):
        jax.jit(lambda e: softmax.build_index(e, cluster_ids=ids))(x)
