"""Pytree positions, the score spelling rule and the eager non-finite start.

Every sampler that takes pytree positions is run three ways on the same numbers: a flat array,
a one-leaf dict and a dict of two leaves whose concatenation is the flat array. All three must
give bitwise equal results (the flat path takes the code it always took; the pytree path only
reshapes and slices).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsample
from jaxsample import _pytree
from jaxsample._checks import AUTODIFF, resolve_score_fn
from jaxsample.kernels import langevin
from jaxsample.mcmc import mala, parallel_tempering

_SCALES = np.array([1.0, 2.0, 0.5])


def _flat_ld(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2 / jnp.asarray(_SCALES, x.dtype) ** 2, axis=-1)


def _one_leaf_ld(p):
    return _flat_ld(p["x"])


def _two_leaf_ld(p):
    return _flat_ld(jnp.concatenate([p["a"], p["b"]], axis=-1))


def _as_one_leaf(x):
    return {"x": x}


def _as_two_leaves(x):
    return {"a": x[..., :1], "b": x[..., 1:]}


def _from_two_leaves(p):
    return jnp.concatenate([p["a"], p["b"]], axis=-1)


_FORMS = [
    (_flat_ld, lambda x: x, lambda x: x),
    (_one_leaf_ld, _as_one_leaf, lambda p: p["x"]),
    (_two_leaf_ld, _as_two_leaves, _from_two_leaves),
]


def _assert_bitwise(results):
    reference = results[0]
    for other in results[1:]:
        jax.tree.map(np.testing.assert_array_equal, reference, other)


def test_ravel_round_trip_keeps_leaf_dtypes_and_batch_axes(x64):
    tree = {"a": jnp.ones((4, 2, 3), jnp.float32), "b": jnp.arange(4.0)}
    flat, structure = _pytree.ravel(tree, batch_ndim=1)
    assert flat.shape == (4, 7) and flat.dtype == jnp.float64 and structure.size == 7
    back = _pytree.unravel(flat, structure)
    assert back["a"].dtype == jnp.float32 and back["b"].dtype == jnp.float64
    jax.tree.map(np.testing.assert_array_equal, back, tree)
    array = jnp.ones((4, 3))
    assert _pytree.ravel(array, 1) == (array, None)
    assert _pytree.unravel(array, None) is array
    assert _pytree.on_flat(_flat_ld, None) is _flat_ld


def _primitives(fn, *args):
    """The primitives ``fn`` traces to, nested ``jit`` calls inlined (a step compiles as one)."""

    def flat(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("jit", "pjit"):
                yield from flat(eqn.params["jaxpr"].jaxpr)
            else:
                yield eqn.primitive.name

    return list(flat(jax.make_jaxpr(fn)(*args).jaxpr))


def test_flat_path_has_no_extra_operations():
    # one MALA step on an array traces to exactly the operations of the Langevin kernel called
    # directly on the arrays and the step counter's increment; the pytree form adds only its
    # concatenations and slices
    alg = mala(_flat_ld, step_size=0.3)
    state = alg.init(jnp.zeros(3))

    def direct(key, state):
        return langevin.mala_step(key, state.position, state.logdensity, state.score,
                                  jax.value_and_grad(_flat_ld), 0.3), state.step + 1

    key = jax.random.key(0)
    assert _primitives(alg.step, key, state) == _primitives(direct, key, state)
    dict_alg = mala(_two_leaf_ld, step_size=0.3)
    dict_state = dict_alg.init(_as_two_leaves(jnp.zeros(3)))
    extra = _primitives(dict_alg.step, key, dict_state)
    assert "concatenate" in extra and len(extra) > len(_primitives(direct, key, state))


@pytest.mark.default_compiler
def test_mala_flat_and_pytree_are_bitwise_equal(dtype):
    results = []
    for ld, to_tree, from_tree in _FORMS:
        alg = mala(ld, step_size=0.4)
        state = alg.init(to_tree(jnp.asarray([0.5, -1.0, 2.0], dtype)))
        state, trace = jaxsample.run(jax.random.key(3), alg, state, 30,
                                     transform=lambda s, i: (s.position, i.is_accepted))
        positions, accepted = trace
        assert jax.tree.leaves(state.position)[0].dtype == dtype
        results.append((from_tree(state.position), from_tree(state.score), state.logdensity,
                        from_tree(positions), accepted))
    assert 0 < int(results[0][4].sum()) < 30
    _assert_bitwise(results)


def test_mala_keeps_mixed_leaf_dtypes(x64):
    alg = mala(lambda p: -0.5 * (jnp.sum(p["a"].astype(jnp.float64) ** 2) + jnp.sum(p["b"] ** 2)),
               step_size=0.4)
    state = alg.init({"a": jnp.zeros(1, jnp.float32), "b": jnp.zeros(2, jnp.float64)})
    state, _ = jaxsample.run(jax.random.key(0), alg, state, 5)
    assert state.position["a"].dtype == jnp.float32 and state.score["a"].dtype == jnp.float32
    assert state.position["b"].dtype == jnp.float64 and state.logdensity.dtype == jnp.float64


@pytest.mark.default_compiler
def test_tempering_flat_and_pytree_are_bitwise_equal(dtype):
    results = []
    for ld, to_tree, from_tree in _FORMS:
        alg = parallel_tempering(ld, inverse_temperatures=[1.0, 0.5, 0.2], step_size=0.3)
        state = alg.init(to_tree(jnp.asarray([0.5, -1.0, 2.0], dtype)))
        state, trace = jaxsample.run(jax.random.key(4), alg, state, 20,
                                     transform=lambda s, i: (s.position, i.swap_rate))
        assert jax.tree.leaves(state.position)[0].shape[0] == 3
        results.append((from_tree(state.position), from_tree(state.score), state.logdensity,
                        from_tree(trace[0]), trace[1]))
    _assert_bitwise(results)


# ------------------------------------------------------------------------ the score spelling


def test_inline_grad_is_recognised_and_variants_are_not():
    def ld(x):
        return -0.5 * jnp.sum(x**2)

    assert resolve_score_fn(jax.grad(ld), ld, default=None) == AUTODIFF
    assert resolve_score_fn(None, ld, default=None) is None
    assert resolve_score_fn(None, ld, default=AUTODIFF) == AUTODIFF
    assert resolve_score_fn("autodiff", ld, default=None) == AUTODIFF
    # what jax.grad does not expose is compared, never guessed: these stay user functions
    for variant in (jax.grad(ld, argnums=(0,)), jax.grad(ld, has_aux=True),
                    jax.grad(ld, allow_int=True), jax.grad(lambda x: ld(x)),
                    jax.jit(jax.grad(ld)), jax.grad(jax.jit(ld))):
        assert callable(resolve_score_fn(variant, ld, default=None))
    # a bound method is a new object at every attribute access: still recognised
    target = jaxsample.targets.Gaussian(jnp.zeros(2), jnp.eye(2))
    assert resolve_score_fn(jax.grad(target.logdensity), target.logdensity,
                            default=None) == AUTODIFF
    with pytest.raises(ValueError, match="score_fn must be one of"):
        resolve_score_fn("grad", ld, default=None)
    with pytest.raises(TypeError, match="score_fn must be callable"):
        resolve_score_fn(3, ld, default=None)


@pytest.mark.parametrize("make", [
    lambda ld, h: mala(ld, step_size=h, score_fn=jax.grad(ld)),
    lambda ld, h: parallel_tempering(ld, inverse_temperatures=[1.0, 0.5], step_size=h,
                                     score_fn=jax.grad(ld)),
], ids=["mala", "parallel_tempering"])
def test_sweep_with_inline_grad_compiles_once(make):
    traces = []

    def ld(x):
        traces.append(None)  # runs once per trace of the density
        return -0.5 * jnp.sum(x**2)

    state = make(ld, 0.1).init(jnp.zeros(2))
    traces.clear()
    for h in (0.1, 0.2, 0.3, 0.4):
        jaxsample.run(jax.random.key(0), make(ld, h), state, 5)
    assert len(traces) == 1
    # a user's score function built once is reused; a new one per call compiles per call
    # (it is part of the cache key), which is what the inline jax.grad form is spared


# ------------------------------------------------------------------------- the eager start


def test_eager_init_refuses_a_start_where_the_density_is_nowhere_finite():
    bad = lambda p: jnp.where(p["tau"] > 0, -p["tau"], -jnp.inf)
    with pytest.raises(ValueError, match=r"logdensity_fn \(.*<lambda>\) is not finite at any "
                                         r"initial point.*= -inf.*'tau'"):
        mala(bad, step_size=0.1).init({"tau": jnp.asarray(-1.0)})
    with pytest.raises(ValueError, match=r"position\[0\]"):
        parallel_tempering(lambda x: jnp.where(x[0] > 0, 0.0, jnp.nan),
                           inverse_temperatures=[1.0, 0.5], step_size=0.1).init(-jnp.ones(1))
    # under jit the flag stays the report
    state = jax.jit(mala(bad, step_size=0.1).init)({"tau": jnp.asarray(-1.0)})
    assert not bool(jnp.isfinite(state.logdensity))


def test_position_leaves_are_checked_by_name():
    alg = mala(_two_leaf_ld, step_size=0.1)
    with pytest.raises(ValueError, match=r"position\['b'\] must be finite"):
        alg.init({"a": jnp.zeros(1), "b": jnp.array([0.0, jnp.nan])})
    with pytest.raises(TypeError, match=r"position\['a'\] must be floating"):
        alg.init({"a": jnp.zeros(1, jnp.int32), "b": jnp.zeros(2)})
    with pytest.raises(TypeError, match="position must be an array or a pytree"):
        alg.init(None)


# ------------------------------------------------------------------------- particle baselines


@pytest.mark.default_compiler
def test_svgd_flat_and_pytree_are_bitwise_equal(dtype):
    from jaxsample.particles import svgd

    start = jax.random.normal(jax.random.key(5), (16, 3), dtype)
    results = []
    for ld, to_tree, from_tree in _FORMS:
        out, _ = svgd(ld, to_tree(start), num_steps=10, keep_every=5)
        assert jax.tree.leaves(out)[0].shape[:2] == (2, 16)
        results.append(from_tree(out))
    _assert_bitwise(results)


def test_svgd_refuses_a_start_where_the_density_is_nowhere_finite():
    from jaxsample.particles import svgd

    with pytest.raises(ValueError, match=r"not finite at any initial point.*position\[0\]"):
        svgd(lambda x: jnp.where(x[0] > 10, 0.0, -jnp.inf), jnp.zeros((4, 2)), num_steps=2)


@pytest.mark.default_compiler
def test_mmsold_flat_and_pytree_records_are_bitwise_equal():
    # float32 only (dtypes are the flat path's, tested in the MM-SOLD suite); the naive smoothed
    # Langevin baseline shares this code path (mmsold._algorithm)
    from jaxsample.particles import mmsold, sample_kde

    make, dtype = mmsold, jnp.float32
    data = jax.random.normal(jax.random.key(6), (40, 3), dtype) * jnp.asarray(_SCALES, dtype)[None]
    results = []
    for _, to_tree, from_tree in _FORMS:
        alg = make(to_tree(data), bandwidth=0.4, smoothing=0.1, step_size=1e-2,
                   num_smoothing_samples=2)
        start, _ = sample_kde(jax.random.key(7), to_tree(data), num_samples=8, bandwidth=0.4)
        state, trace = jaxsample.run(jax.random.key(8), alg, alg.init(start), 5,
                                     transform=lambda s, i: (s.positions, i.cov_residual))
        assert jax.tree.leaves(state.positions)[0].shape[0] == 8
        results.append((from_tree(state.positions), state.coords, from_tree(trace[0]), trace[1]))
    _assert_bitwise(results)
    with pytest.raises(ValueError, match="structure, leaf shapes and dtypes of one record"):
        make(_as_two_leaves(data), bandwidth=0.4, smoothing=0.1, step_size=1e-2).init(
            {"a": jnp.zeros((8, 2), dtype), "b": jnp.zeros((8, 1), dtype)})


@pytest.mark.default_compiler
def test_stopping_wrapper_flat_and_pytree_are_bitwise_equal(dtype):
    from jaxsample.mcmc import adaptive_stop, sample_until_stopped

    start = jax.random.normal(jax.random.key(9), (6, 3), dtype)
    results = []
    for ld, to_tree, from_tree in _FORMS:
        # the stopping probability reads the position in the user's structure
        stop = lambda x, from_tree=from_tree: jax.nn.sigmoid(jnp.sum(from_tree(x)) - 2.0)
        wrapped = adaptive_stop(mala(ld, step_size=0.3), stop, max_steps=8)
        positions, info = sample_until_stopped(jax.random.key(10), wrapped, to_tree(start))
        assert jax.tree.leaves(positions)[0].shape[0] == 6
        results.append((from_tree(positions), info.lengths, info.truncated, info.nonfinite))
    assert int(results[0][1].max()) > 0
    _assert_bitwise(results)
