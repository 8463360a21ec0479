"""The run driver and progress meters."""

import io
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsample
from jaxsample import SamplingAlgorithm, TextProgress, run
from jaxsample._checks import check_hyperparameter


def ar1_algorithm(rho=0.9, trace_counter=None):
    def step(key, x):
        if trace_counter is not None:
            trace_counter.append(1)
        new = rho * x + jax.random.normal(key, x.shape, x.dtype)
        return new, {"mean": jnp.mean(new)}

    return SamplingAlgorithm(init=lambda x: x, step=step)


def test_run_equals_hand_loop(dtype):
    alg = ar1_algorithm()
    key = jax.random.key(3)
    x0 = jnp.zeros(5, dtype)
    final, trace = run(key, alg, alg.init(x0), 20)
    state = x0
    means = []
    for t in range(20):
        state, info = alg.step(jax.random.fold_in(key, t), state)
        means.append(info["mean"])
    np.testing.assert_allclose(final, state, rtol=1e-6)
    np.testing.assert_allclose(trace["mean"], jnp.stack(means), rtol=1e-6)
    assert final.dtype == dtype and trace["mean"].shape == (20,)


class _CountedState(NamedTuple):
    x: jax.Array
    step: jax.Array


def _counted_kernel(key, state, *, rho):
    new, info = _ar1_kernel(key, state.x, rho=rho)
    return _CountedState(new, state.step + 1), info


def _counted_ar1(rho=0.9):
    """An AR(1) chain whose state carries its step counter, as every jaxsample state does."""
    step = eqx.Partial(_counted_kernel, rho=check_hyperparameter("rho", rho))
    return SamplingAlgorithm(init=lambda x: _CountedState(x, jnp.zeros((), jnp.int32)),
                             step=step)


def test_run_continued_from_its_state_equals_one_long_run():
    """The run reads the state's step counter: 2 x 500 steps == 1000 steps, bit for bit, with
    no argument to pass."""
    alg = _counted_ar1(0.9)
    key, s0 = jax.random.key(4), alg.init(jnp.zeros(3))
    long_state, long_trace = run(key, alg, s0, 1000)
    half, first = run(key, alg, s0, 500)
    resumed, second = run(key, alg, half, 500)
    assert int(resumed.step) == 1000
    np.testing.assert_array_equal(resumed.x, long_state.x)
    np.testing.assert_array_equal(jnp.concatenate([first["mean"], second["mean"]]),
                                  long_trace["mean"])
    # the counter is traced: resuming at another step reuses the compiled loop
    size = jaxsample.core._run._cache_size()
    run(key, alg, half._replace(step=jnp.asarray(7, jnp.int32)), 500)
    assert jaxsample.core._run._cache_size() == size


def test_explicit_first_step_wins_and_a_state_without_a_counter_starts_at_zero():
    key, alg = jax.random.key(4), _counted_ar1(0.9)
    s0 = alg.init(jnp.zeros(3))
    half, _ = run(key, alg, s0, 5)
    # first_step= overrides the counter: steps 0-4 again, from the advanced state
    again, _ = run(key, alg, half, 5, first_step=0)
    np.testing.assert_array_equal(again.x, run(key, alg, half._replace(step=s0.step), 5)[0].x)
    # a bare-array state (a BlackJAX-like state without `step`) restarts at 0 unless told
    bare = _ar1_pytree(0.9)
    x5, _ = run(key, bare, jnp.zeros(3), 5)
    np.testing.assert_array_equal(run(key, bare, x5, 5)[0], run(key, bare, x5, 5,
                                                                first_step=0)[0])
    np.testing.assert_array_equal(run(key, bare, x5, 5, first_step=5)[0],
                                  run(key, bare, jnp.zeros(3), 10)[0])


def test_a_state_whose_step_is_not_a_counter_raises():
    alg = SamplingAlgorithm(init=lambda x: _CountedState(x, x), step=lambda k, s: (s, None))
    with pytest.raises(TypeError, match="_CountedState.step must be .* first_step="):
        run(jax.random.key(0), alg, alg.init(jnp.zeros(3)), 2)
    # an explicit first_step is used instead of the field
    run(jax.random.key(0), alg, alg.init(jnp.zeros(3)), 2, first_step=0)


def test_vmap_over_chains_reads_each_chains_counter():
    """Two chains at different steps, batched: each continues its own key stream."""
    alg, key = _counted_ar1(0.9), jax.random.key(8)
    states = jax.vmap(alg.init)(jnp.zeros((2, 3)))
    states = states._replace(step=jnp.asarray([0, 4], jnp.int32))
    finals, _ = jax.vmap(lambda s: run(key, alg, s, 3))(states)
    np.testing.assert_array_equal(finals.step, [3, 7])
    for i in range(2):
        alone, _ = run(key, alg, jax.tree.map(lambda leaf, i=i: leaf[i], states), 3)
        np.testing.assert_allclose(finals.x[i], alone.x, rtol=1e-6)


def test_checkpoint_resume_with_equinox_serialisation(tmp_path, dtype):
    """The recipe in run's docstring: serialise the state (its counter inside), deserialise,
    continue."""
    alg = _counted_ar1(0.9)
    key, s0 = jax.random.key(5), alg.init(jnp.zeros(3, dtype))
    state, _ = run(key, alg, s0, 30)
    path = tmp_path / "run.eqx"
    eqx.tree_serialise_leaves(path, state)
    restored = eqx.tree_deserialise_leaves(path, s0)
    assert restored.x.dtype == dtype and int(restored.step) == 30
    resumed, _ = run(key, alg, restored, 20)
    np.testing.assert_array_equal(resumed.x, run(key, alg, s0, 50)[0].x)


def _walk_algorithm():
    def step(key, x):
        new = x + jax.random.normal(key, x.shape, x.dtype)
        return new, {"nonfinite": ~jnp.isfinite(new)}

    return SamplingAlgorithm(init=lambda x: x, step=step)


def _outside(x):
    return jnp.abs(x) > 2.0


def test_run_until_stops_at_done_and_continues_the_run_stream():
    alg, key, x0 = _walk_algorithm(), jax.random.key(6), jnp.zeros(())
    state, info = jaxsample.run_until(key, alg, x0, done_fn=_outside, max_steps=1000)
    steps = int(info.num_steps)
    assert bool(info.done) and not bool(info.nonfinite) and 0 < steps < 1000
    # the stopped state is run's state after the same number of steps, and it is the first exit
    _, path = run(key, alg, x0, steps, transform=lambda s, i: s)
    np.testing.assert_array_equal(path[-1], state)
    assert bool(_outside(path[-1])) and not bool(jnp.any(_outside(path[:-1])))
    # continuing with run from the returned count equals one long run (a bare-array state
    # has no counter: the count is passed)
    cont, _ = run(key, alg, state, 5, first_step=info.num_steps)
    np.testing.assert_array_equal(cont, run(key, alg, x0, steps + 5)[0])
    # a state that carries its counter continues with no argument
    counted = _counted_ar1(1.0)
    s0 = counted.init(jnp.zeros(()))
    stopped, info = jaxsample.run_until(key, counted, s0, done_fn=lambda s: _outside(s.x),
                                        max_steps=1000)
    assert int(stopped.step) == int(info.num_steps) > 0
    np.testing.assert_array_equal(run(key, counted, stopped, 5)[0].x,
                                  run(key, counted, s0, int(info.num_steps) + 5)[0].x)


def test_run_until_cap_done_at_start_and_vmap_over_chains():
    alg, key = _walk_algorithm(), jax.random.key(7)
    state, info = jaxsample.run_until(key, alg, jnp.zeros(()), done_fn=lambda x: False,
                                      max_steps=9)
    assert int(info.num_steps) == 9 and not bool(info.done)
    np.testing.assert_array_equal(state, run(key, alg, jnp.zeros(()), 9)[0])
    _, info = jaxsample.run_until(key, alg, jnp.full((), 5.0), done_fn=_outside, max_steps=9)
    assert int(info.num_steps) == 0 and bool(info.done)
    keys = jax.random.split(key, 4)
    x0 = jnp.asarray([0.0, 1.0, -1.5, 3.0])
    states, infos = jax.vmap(lambda k, x: jaxsample.run_until(
        k, alg, x, done_fn=_outside, max_steps=200))(keys, x0)
    for i in range(4):
        state_i, info_i = jaxsample.run_until(keys[i], alg, x0[i], done_fn=_outside,
                                              max_steps=200)
        np.testing.assert_array_equal(states[i], state_i)
        assert int(infos.num_steps[i]) == int(info_i.num_steps)
    assert int(infos.num_steps[3]) == 0


def test_run_until_reports_nonfinite_and_progress():
    alg = SamplingAlgorithm(init=lambda x: x,
                            step=lambda k, x: (x * 1e30, {"nonfinite": ~jnp.isfinite(x * 1e30)}))
    _, info = jaxsample.run_until(jax.random.key(0), alg, jnp.ones((), jnp.float32),
                                  done_fn=lambda x: False, max_steps=4)
    assert bool(info.nonfinite)
    meter = TextProgress(every=2, file=io.StringIO())
    jaxsample.run_until(jax.random.key(0), _walk_algorithm(), jnp.zeros(()),
                        done_fn=lambda x: False, max_steps=6, progress=meter)
    jax.effects_barrier()
    assert meter.steps_reported[-1] == 6


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"done_fn": 1, "max_steps": 3}, TypeError, "done_fn"),
        ({"done_fn": _outside, "max_steps": -1}, ValueError, "max_steps"),
        ({"done_fn": _outside, "max_steps": 2.0}, TypeError, "max_steps"),
        ({"done_fn": _outside, "max_steps": 3, "first_step": -2}, ValueError, "first_step"),
        ({"done_fn": _outside, "max_steps": jnp.asarray(3), "progress": TextProgress()},
         TypeError, "max_steps"),
    ],
)
def test_run_until_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        jaxsample.run_until(jax.random.key(0), _walk_algorithm(), jnp.zeros(()), **kwargs)


def test_transform_chooses_trace():
    alg = ar1_algorithm()
    final, positions = run(jax.random.key(0), alg, jnp.zeros(3), 7,
                           transform=lambda state, info: state)
    assert positions.shape == (7, 3)
    np.testing.assert_array_equal(positions[-1], final)


def test_vmap_over_chains_matches_per_chain_runs():
    alg = ar1_algorithm()
    keys = jax.random.split(jax.random.key(1), 4)
    x0 = jnp.arange(8.0).reshape(4, 2)
    finals, traces = jax.vmap(lambda k, x: run(k, alg, x, 10))(keys, x0)
    for i in range(4):
        final_i, trace_i = run(keys[i], alg, x0[i], 10)
        np.testing.assert_allclose(finals[i], final_i, rtol=1e-6)
        np.testing.assert_allclose(traces["mean"][i], trace_i["mean"], rtol=1e-6)


def test_jit_of_run_and_single_compile():
    counter = []
    alg = ar1_algorithm(trace_counter=counter)
    run(jax.random.key(0), alg, jnp.zeros(2), 5)
    run(jax.random.key(1), alg, jnp.ones(2), 5)  # same shapes and algorithm: cached
    assert len(counter) == 1
    jitted = jax.jit(lambda k, x: run(k, alg, x, 5))
    np.testing.assert_allclose(jitted(jax.random.key(1), jnp.ones(2))[0],
                               run(jax.random.key(1), alg, jnp.ones(2), 5)[0], rtol=1e-6)


def _ar1_kernel(key, x, *, rho):
    new = jnp.asarray(rho, x.dtype) * x + jax.random.normal(key, x.shape, x.dtype)
    return new, {"mean": jnp.mean(new)}


def _ar1_pytree(rho):
    """The contract's shape: the float lives in the step pytree (eqx.Partial), not a closure."""
    step = eqx.Partial(_ar1_kernel, rho=check_hyperparameter("rho", rho))
    return SamplingAlgorithm(init=lambda x: x, step=step)


def test_float_hyperparameters_share_one_compilation_and_vmap():
    x0 = jnp.zeros(3)
    run(jax.random.key(0), _ar1_pytree(0.1), x0, 4)
    size = jaxsample.core._run._cache_size()
    run(jax.random.key(0), _ar1_pytree(0.1), x0, 4)
    run(jax.random.key(0), _ar1_pytree(0.7), x0, 4)
    assert jaxsample.core._run._cache_size() == size
    # a closure over the float is static: each new function object compiles anew
    run(jax.random.key(0), ar1_algorithm(0.7), x0, 4)
    assert jaxsample.core._run._cache_size() == size + 1

    rhos = jnp.asarray([0.1, 0.7])
    finals = jax.vmap(lambda r: run(jax.random.key(2), _ar1_pytree(r), x0 + 1, 4)[0])(rhos)
    for i in range(2):
        np.testing.assert_allclose(
            finals[i], run(jax.random.key(2), _ar1_pytree(float(rhos[i])), x0 + 1, 4)[0],
            rtol=1e-6)


def test_grad_through_run():
    alg = SamplingAlgorithm(init=lambda x: x, step=lambda k, x: (0.5 * x + 1.0, None))

    def final_sum(x0):
        return jnp.sum(run(jax.random.key(0), alg, x0, 3)[0])

    # x3 = x0 / 8 + const, so the gradient is 1/8 per coordinate
    np.testing.assert_allclose(jax.grad(final_sum)(jnp.zeros(2)), [0.125, 0.125])


def test_progress_reports_under_jit_and_vmap():
    alg = ar1_algorithm()
    out = io.StringIO()
    meter = TextProgress(every=5, file=out)
    run_fn = jax.jit(jax.vmap(lambda k, x: run(k, alg, x, 20, progress=meter)))
    run_fn(jax.random.split(jax.random.key(0), 3), jnp.zeros((3, 2)))
    jax.effects_barrier()
    # one line per reported step, not one per chain
    assert meter.steps_reported == [5, 10, 15, 20]
    assert len(out.getvalue().splitlines()) == 4
    # a second run of the compiled function reports again from the start
    run_fn(jax.random.split(jax.random.key(1), 3), jnp.zeros((3, 2)))
    jax.effects_barrier()
    assert meter.steps_reported == [5, 10, 15, 20]


def test_progress_under_grad():
    alg = SamplingAlgorithm(init=lambda x: x, step=lambda k, x: (0.5 * x, None))
    meter = TextProgress(every=2, file=io.StringIO())
    grad = jax.grad(lambda x: jnp.sum(run(jax.random.key(0), alg, x, 4, progress=meter)[0]))
    np.testing.assert_allclose(grad(jnp.ones(2)), [0.0625, 0.0625])
    jax.effects_barrier()
    assert meter.steps_reported[-1] == 4


def test_no_progress_adds_no_callback():
    alg = ar1_algorithm()
    plain = str(jax.make_jaxpr(lambda k, x: run(k, alg, x, 4))(jax.random.key(0), jnp.zeros(2)))
    meter = TextProgress(file=io.StringIO())
    metered = str(jax.make_jaxpr(lambda k, x: run(k, alg, x, 4, progress=meter))(
        jax.random.key(0), jnp.zeros(2)))
    assert "callback" not in plain and "callback" in metered


def test_tqdm_progress():
    pytest.importorskip("tqdm")
    meter = jaxsample.TqdmProgress(every=2, file=io.StringIO())
    run(jax.random.key(0), ar1_algorithm(), jnp.zeros(2), 6, progress=meter)
    jax.effects_barrier()
    assert meter._bar.n == 6


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_steps": 0}, ValueError, "num_steps"),
        ({"num_steps": 2.0}, TypeError, "num_steps"),
        ({"num_steps": 3, "transform": 1}, TypeError, "transform"),
        ({"num_steps": 3, "progress": "yes"}, TypeError, "progress"),
        ({"num_steps": 3, "first_step": 1.5}, TypeError, "first_step"),
    ],
)
def test_run_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        run(jax.random.key(0), ar1_algorithm(), jnp.zeros(2), **kwargs)


def test_run_rejects_non_algorithm():
    with pytest.raises(TypeError, match="algorithm"):
        run(jax.random.key(0), (lambda x: x, lambda k, x: (x, None)), jnp.zeros(2), 3)


def test_meter_rejects_bad_every():
    with pytest.raises(ValueError, match="every"):
        TextProgress(every=0)


def test_progress_under_pmap_reports_each_step_once():
    alg = ar1_algorithm()
    meter = TextProgress(every=4, file=io.StringIO())
    jax.pmap(lambda k, x: run(k, alg, x, 8, progress=meter))(
        jax.random.split(jax.random.key(0), 4), jnp.zeros((4, 2)))
    jax.effects_barrier()
    assert meter.steps_reported == [4, 8]


# ----------------------------------------------------------------------------------------------
# The mistakes a newcomer makes first get a hint, not JAX's internals


def _call(runner, key, alg, state):
    if runner == "run":
        return jaxsample.run(key, alg, state, 3)
    return jaxsample.run_until(key, alg, state, done_fn=lambda s: False, max_steps=3)


@pytest.mark.parametrize("runner", ["run", "run_until"])
def test_an_int_key_is_refused_naming_key(runner):
    with pytest.raises(TypeError, match=r"key must be a PRNG key, got the int 0: pass "
                                        r"jax\.random\.key\(0\)"):
        _call(runner, 0, ar1_algorithm(), jnp.zeros(2))
    with pytest.raises(TypeError, match="key must be a PRNG key"):
        _call(runner, jnp.zeros(3), ar1_algorithm(), jnp.zeros(2))


@pytest.mark.parametrize("runner", ["run", "run_until"])
def test_positions_for_a_state_say_to_call_init(runner):
    from jaxsample.mcmc import mala

    def logdensity(x):
        return -0.5 * jnp.sum(x**2)

    etd = jaxsample.etd(logdensity, score_fn="autodiff")
    with pytest.raises(TypeError, match=r"Did you pass positions\? .*state = alg\.init\(x0\)"):
        _call(runner, jax.random.key(0), etd, jnp.zeros((20, 2)))
    # a pytree position too
    walker = mala(lambda p: -0.5 * jnp.sum(p["mu"] ** 2), step_size=0.1)
    with pytest.raises(TypeError, match=r"alg\.init\(x0\)"):
        _call(runner, jax.random.key(0), walker, {"mu": jnp.zeros(2)})
    with pytest.raises(TypeError, match="initial_state must be the state"):
        _call(runner, jax.random.key(0), walker, None)


def test_a_wrong_rank_is_reported_against_the_named_layout():
    from jaxsample._checks import check_array

    with pytest.raises(ValueError, match=r"position must have shape \(num_particles, dim\), got "
                                         r"shape \(2,\): .*position\[:, None\]"):
        check_array("position", jnp.zeros(2), ndim=2, layout="(num_particles, dim)")
    with pytest.raises(ValueError, match=r"must have 2 dimension\(s\), got shape \(2,\)$"):
        check_array("position", jnp.zeros(2), ndim=2)  # without a layout: as before


def test_a_one_dimensional_cloud_names_num_particles_and_dim():
    alg = jaxsample.etd(lambda x: -0.5 * jnp.sum(x**2), score_fn="autodiff")
    with pytest.raises(ValueError, match=r"\(num_particles, dim\)"):
        alg.init(jnp.zeros(2))


def test_a_started_meter_counts_compilation_and_labels_its_lines():
    import time

    out = io.StringIO()
    meter = TextProgress(every=2, file=out, label="AR(1), rho = 0.9").start()
    time.sleep(0.3)  # stands for the compilation that start() is called before
    run(jax.random.key(0), ar1_algorithm(), jnp.zeros(2), 4, progress=meter)
    jax.effects_barrier()
    lines = out.getvalue().splitlines()
    assert [line.split(": step ")[0] for line in lines] == ["AR(1), rho = 0.9"] * 2
    assert float(lines[0].rsplit(" ", 1)[1].rstrip("s")) >= 0.3
    with pytest.raises(TypeError, match="label"):
        TextProgress(label=3)


def test_a_collapsed_cloud_is_sent_to_etd_hard():
    class Trace(NamedTuple):
        collapsed: jax.Array
        nonfinite: jax.Array

    report, _ = jaxsample.diagnostics.diagnose(Trace(jnp.ones(10, bool), jnp.zeros(10, bool)))
    assert "jaxsample.particles.ETD_HARD" in str(report) and "NUTS" not in str(report)
