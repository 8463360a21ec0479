"""Lev (jaxsample.subset.leverage): greedy against brute force, the sampled law, Vendi, shards.

Generic (dtype, jit, vmap, traced ridge, bad input) checks are in the contract registry.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from scipy import stats

from jaxsample.sharding import particle_mesh
from jaxsample.subset import leverage_sample, leverage_select, leverage_select_sharded, vendi_score

N, D, K = 24, 7, 7


def _rows(seed, n=N, d=D):
    """Generic rows with spread norms: tie-free for the brute-force comparisons."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * rng.uniform(0.5, 1.5, size=(n, 1))


def _objective(x, subset, ridge, quality):
    rows = x[list(subset)]
    value = np.linalg.slogdet(ridge * np.eye(x.shape[1]) + rows.T @ rows)[1]
    return value + (0.0 if quality is None else float(np.sum(np.log(quality[list(subset)]))))


def _brute_force_greedy(x, k, ridge, quality=None, gap=1e-6):
    """Greedy on f(S) = slogdet(λI + X_SᵀX_S) (+ Σ log q), recomputed for every candidate."""
    chosen = []
    for _ in range(k):
        values = {i: _objective(x, chosen + [i], ridge, quality)
                  for i in range(x.shape[0]) if i not in chosen}
        ranked = sorted(values, key=values.get, reverse=True)
        assert values[ranked[0]] - values[ranked[1]] > gap, "the data are not tie-free"
        chosen.append(ranked[0])
    return chosen


def test_greedy_equals_brute_force_and_log_det_telescopes(x64):
    x = _rows(0)
    for ridge in (0.1, 1e-3):
        indices, info = leverage_select(jnp.asarray(x), K, ridge=ridge)
        assert indices.tolist() == _brute_force_greedy(x, K, ridge)
        np.testing.assert_allclose(info.log_det, _objective(x, indices.tolist(), ridge, None),
                                   rtol=1e-10)
        assert bool(jnp.all(jnp.diff(info.gains) <= 1e-12)) and not bool(info.nonfinite)
        assert len(set(indices.tolist())) == K


def test_normalized_quality_chunked_greedy_equals_brute_force(x64):
    """normalize + quality + a ragged chunk_size against brute force on the unit rows."""
    x = _rows(1)
    quality = np.random.default_rng(2).uniform(0.2, 1.0, size=N)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    expected = _brute_force_greedy(unit, K, 0.01, quality)
    results = [leverage_select(jnp.asarray(x), K, ridge=0.01, quality=jnp.asarray(quality),
                               normalize=True, chunk_size=chunk) for chunk in (None, 5)]
    for indices, info in results:
        assert indices.tolist() == expected
        np.testing.assert_allclose(info.log_det, _objective(unit, expected, 0.01, None),
                                   rtol=1e-10)
    np.testing.assert_allclose(results[0][1].gains, results[1][1].gains, rtol=1e-12)


def test_permutation_equivariance_qr_limit_and_duplicates(x64):
    x = _rows(3)
    indices, _ = leverage_select(jnp.asarray(x), K, ridge=0.1)
    perm = np.random.default_rng(4).permutation(N)
    permuted, _ = leverage_select(jnp.asarray(x[perm]), K, ridge=0.1)
    assert perm[np.asarray(permuted)].tolist() == indices.tolist()

    # λ → 0 with k <= d: greedy volume = the pivot order of column-pivoted QR of Xᵀ
    tiny, _ = leverage_select(jnp.asarray(x), K, ridge=1e-9)
    pivots = scipy.linalg.qr(x.T, pivoting=True)[2]
    assert tiny.tolist() == pivots[:K].tolist()

    # basis vectors, three copies each, and zero rows: one copy of each, the lowest index (ties)
    basis = np.concatenate([np.tile(np.eye(D), (3, 1)), np.zeros((N - 3 * D, D))])
    order = np.random.default_rng(5).permutation(N)
    picked, _ = leverage_select(jnp.asarray(basis[order]), K, ridge=0.1)
    directions = np.argmax(basis[order][np.asarray(picked)], axis=1)
    assert sorted(directions.tolist()) == list(range(D))
    first_copies = [int(np.flatnonzero((basis[order] == np.eye(D)[c]).all(1))[0])
                    for c in directions]
    assert picked.tolist() == first_copies


def test_sampled_first_two_picks_follow_the_leverage_law(x64):
    """Joint law of the first two draws: P(j₁) ∝ q s_j(∅), P(j₂ | j₁) ∝ q s_j({j₁}).

    20 000 independent draws, chi-square over the 30 ordered pairs; the test fails with
    probability 1e-3 for a correct sampler (fixed seed).
    """
    n, ridge = 6, 0.5
    x = _rows(6, n=n, d=3)
    quality = np.array([1.0, 0.5, 2.0, 1.0, 1.5, 0.8])

    def scores(subset):
        rows = x[list(subset)]
        inverse = np.linalg.inv(ridge * np.eye(3) + rows.T @ rows)
        return np.einsum("ij,jk,ik->i", x, inverse, x)

    expected = np.zeros((n, n))
    first = quality * scores([])
    for i in range(n):
        second = quality * scores([i])
        second[i] = 0
        expected[i] = first[i] / first.sum() * second / second.sum()
    keys = jax.random.split(jax.random.key(7), 20_000)
    draws = jax.vmap(lambda key: leverage_sample(key, jnp.asarray(x), 2, ridge=ridge,
                                                 quality=jnp.asarray(quality))[0])(keys)
    single, info = leverage_sample(keys[1], jnp.asarray(x), 2, ridge=ridge,
                                   quality=jnp.asarray(quality))
    draws = np.asarray(draws)
    assert single.tolist() == draws[1].tolist() and info.gains.dtype == jnp.float64  # vmap = call
    assert np.all(draws[:, 0] != draws[:, 1])
    counts = np.zeros((n, n))
    np.add.at(counts, (draws[:, 0], draws[:, 1]), 1)
    off = ~np.eye(n, dtype=bool)
    assert np.min(expected[off]) * len(keys) > 5  # the chi-square approximation holds
    assert stats.chisquare(counts[off], expected[off] * len(keys)).pvalue > 1e-3


def test_nonfinite_rows_under_jit_are_flagged_and_never_repeat():
    x = jnp.asarray(_rows(8), jnp.float32).at[5, 2].set(jnp.nan)
    indices, info = jax.jit(lambda rows: leverage_select(rows, K))(x)
    assert bool(info.nonfinite) and len(set(indices.tolist())) == K and 5 not in indices.tolist()


def test_memory_at_a_million_rows_of_256():
    """10⁶ × 256 float32 (1 GB): besides the input, O(n + d²) working memory, no (n, d) copy."""
    x = jax.ShapeDtypeStruct((1_000_000, 256), jnp.float32)
    fn = jax.jit(lambda rows: leverage_sample(jax.random.key(0), rows, 2048, normalize=True))
    temp = fn.lower(x).compile().memory_analysis().temp_size_in_bytes
    assert temp < 1_000_000 * 256 * 4 / 16, temp


def test_sharded_selection_equals_shards_then_union():
    """4 fake devices: per-shard greedy, greedy over the union, the better of the two (GreeDi).

    16 rows per shard and k = 4, so the union (4 shards × 4 picks) has a shard's shape.
    """
    assert jax.device_count() == 4
    x = jnp.asarray(_rows(9, n=64, d=5), jnp.float32)
    k, ridge = 4, 1e-2
    indices, info = leverage_select_sharded(x, k, mesh=particle_mesh(), ridge=ridge)
    local = [leverage_select(x[16 * p: 16 * (p + 1)], k, ridge=ridge) for p in range(4)]
    union = np.concatenate([np.asarray(i) + 16 * p for p, (i, _) in enumerate(local)])
    final, final_info = leverage_select(x[union], k, ridge=ridge)
    shard_log_det = np.array([float(i.log_det) for _, i in local])
    np.testing.assert_allclose(info.shard_log_det, shard_log_det, rtol=1e-6)
    if bool(info.from_union):
        assert indices.tolist() == union[np.asarray(final)].tolist()
        np.testing.assert_allclose(info.log_det, final_info.log_det, rtol=1e-6)
    else:
        best = int(np.argmax(shard_log_det))
        assert indices.tolist() == (np.asarray(local[best][0]) + 16 * best).tolist()
    assert len(set(indices.tolist())) == k and not bool(info.nonfinite)
    floor = 5 * math.log(ridge)  # g = f − d log λ: the (1 − 1/e) bound against every shard
    assert float(info.log_det) - floor >= (1 - 1 / math.e) * (np.max(shard_log_det) - floor)


def _vendi(*args, **kwargs):
    score, info = vendi_score(*args, **kwargs)
    assert not bool(info.nonfinite)
    return score


def test_vendi_closed_forms_and_invariances(x64):
    """Shapes (12, 3) (dual form) and (3, 8) (primal form) only, to share compilations."""
    rng = np.random.default_rng(10)
    assert float(_vendi(jnp.ones((12, 3)))) == pytest.approx(1.0, abs=1e-12)
    groups = np.repeat(scipy.linalg.qr(rng.normal(size=(3, 3)))[0], 4, axis=0)
    assert float(_vendi(jnp.asarray(groups))) == pytest.approx(3.0, rel=1e-10)
    orthogonal = scipy.linalg.qr(rng.normal(size=(8, 8)))[0][:3] * 3.0
    assert float(_vendi(jnp.asarray(orthogonal))) == pytest.approx(3.0, rel=1e-10)

    x = rng.normal(size=(12, 3))
    dual = _vendi(jnp.asarray(x))
    np.testing.assert_allclose(_vendi(jnp.asarray(x), kernel=_cosine), dual, rtol=1e-10)
    rotation = scipy.linalg.qr(rng.normal(size=(3, 3)))[0]
    np.testing.assert_allclose(_vendi(jnp.asarray(x[::-1] @ rotation)), dual, rtol=1e-10)
    for q in (0.5, 2.0):
        np.testing.assert_allclose(_vendi(jnp.asarray(x), q=q),
                                   _vendi(jnp.asarray(x), kernel=_cosine, q=q), rtol=1e-10)
    assert 1 <= float(_vendi(jnp.asarray(x), q=jnp.inf)) <= float(
        _vendi(jnp.asarray(x), q=2.0)) <= float(dual) <= 3

    # differentiable where the spectrum is simple: grad matches a central difference
    direction = rng.normal(size=x.shape)
    grad = jax.grad(lambda a: vendi_score(a)[0])(jnp.asarray(x))
    step = 1e-6
    numeric = (float(_vendi(jnp.asarray(x + step * direction)))
               - float(_vendi(jnp.asarray(x - step * direction)))) / (2 * step)
    np.testing.assert_allclose(float(jnp.sum(grad * direction)), numeric, rtol=1e-5)


def _cosine(a, b):
    return jnp.dot(a, b) / jnp.sqrt(jnp.dot(a, a) * jnp.dot(b, b))


def _rbf(a, b):
    return jnp.exp(-jnp.sum((a - b) ** 2) / 4.0)


def test_vendi_matches_the_reference_package(x64):
    vendi = pytest.importorskip("vendi_score.vendi")
    rng = np.random.default_rng(11)
    x = rng.normal(size=(12, 3)) + 0.5
    for q in (1.0, 2.0, 0.5):
        np.testing.assert_allclose(_vendi(jnp.asarray(x), q=q), vendi.score_dual(x, q=q),
                                   rtol=1e-8)
    np.testing.assert_allclose(_vendi(jnp.asarray(x), q=jnp.inf),
                               vendi.score_dual(x, q="inf"), rtol=1e-8)
    small = rng.normal(size=(3, 8))  # n <= d: the primal form, against score_X
    np.testing.assert_allclose(_vendi(jnp.asarray(small)), vendi.score_X(small), rtol=1e-8)
    reference = vendi.score(list(x), lambda a, b: float(np.exp(-np.sum((a - b) ** 2) / 4)))
    np.testing.assert_allclose(_vendi(jnp.asarray(x), kernel=_rbf), reference, rtol=1e-8)


def test_progress_meter_reports_the_picks():
    """``progress=`` reports the picks from inside the compiled loop and changes nothing."""
    import io

    import jaxsample

    x = jnp.asarray(np.random.default_rng(12).normal(size=(12, 3)), jnp.float32)
    meter = jaxsample.TextProgress(every=2, file=io.StringIO())
    indices, _ = leverage_select(x, 4, progress=meter)
    jax.effects_barrier()
    assert meter.steps_reported == [2, 4]
    np.testing.assert_array_equal(indices, leverage_select(x, 4)[0])
    with pytest.raises(TypeError, match="progress"):
        leverage_sample(jax.random.key(0), x, 4, progress=True)
