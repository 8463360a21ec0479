"""The one training loop (``jaxsample._training.fit``) and the check of ``optimizer=``.

The trainers built on them (``train_time_predictor``, ``train_stopping``) are tested in their
families' files and the contract registry; this file holds the loop's own guarantees.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxsample._training import check_optimizer, fit


def test_check_optimizer_returns_a_transformation_or_none():
    adam = optax.adam(1e-3)
    assert check_optimizer("optimizer", adam) is adam
    assert check_optimizer("optimizer", None) is None


@pytest.mark.parametrize("bad", ["adam", optax.adam, 1e-3])
def test_check_optimizer_names_the_argument(bad):
    with pytest.raises(TypeError, match=r"solver\.optimizer must be an "
                                        r"optax\.GradientTransformation.*got"):
        check_optimizer("solver.optimizer", bad)


def test_fit_follows_gradient_descent_on_a_quadratic():
    """SGD on L(θ) = ½‖θ − c‖² with rate η: θ_t = c + (1 − η)^t (θ_0 − c) and
    L(θ_t) = ½ (1 − η)^{2t} ‖θ_0 − c‖², the closed form of every step."""
    centre, rate, num_steps = jnp.asarray([3.0, -1.0]), 0.1, 30
    theta0 = jnp.zeros(2)

    def loss(theta, key):
        return 0.5 * jnp.sum((theta - centre) ** 2)

    theta, losses = jax.jit(lambda key: fit(loss, theta0, optax.sgd(rate), key, num_steps))(
        jax.random.key(0))
    decay = (1 - rate) ** np.arange(num_steps)
    np.testing.assert_allclose(losses, 0.5 * decay**2 * float(jnp.sum(centre**2)), rtol=1e-5)
    np.testing.assert_allclose(theta, centre * (1 - (1 - rate) ** num_steps), rtol=1e-5)
    assert losses[-1] < 1e-2 * losses[0]


def test_fit_hands_each_step_its_key_and_stacks_the_aux():
    """Step t's loss gets ``split(key, num_steps)[t]``; the aux comes back stacked per step."""
    key, num_steps = jax.random.key(3), 5

    def loss(theta, step_key):
        draw = jax.random.uniform(step_key, (2,))
        return jnp.sum(theta * draw), {"draw": draw}

    _, (losses, aux) = fit(loss, jnp.ones(2), optax.sgd(0.0), key, num_steps, has_aux=True)
    expected = jax.vmap(lambda k: jax.random.uniform(k, (2,)))(jax.random.split(key, num_steps))
    assert losses.shape == (num_steps,) and aux["draw"].shape == (num_steps, 2)
    np.testing.assert_array_equal(aux["draw"], expected)
    np.testing.assert_allclose(losses, jnp.sum(expected, axis=1), rtol=1e-6)


def test_fit_keeps_the_dtype_with_a_schedule_under_strict_promotion():
    """optax's schedules mix an int32 count with floats: the loop runs them under strict
    promotion (the test-wide setting) and the parameters keep their float64 dtype."""
    with jax.enable_x64(True):
        theta0 = jnp.zeros(3, jnp.float64)
        optimizer = optax.adam(optax.exponential_decay(0.1, 10, 0.5))
        theta, losses = fit(lambda t, k: jnp.sum((t - 1.0) ** 2), theta0, optimizer,
                            jax.random.key(0), 20)
        assert theta.dtype == jnp.float64 and losses.dtype == jnp.float64
        assert losses[-1] < losses[0]


class _Recorder:
    """A meter that records the steps it is told about, from inside the compiled loop."""

    def __init__(self):
        self.calls = []

    def report(self, step, num_steps):
        jax.debug.callback(lambda s: self.calls.append((int(s), num_steps)), step)


def test_fit_reports_every_step_to_the_progress_meter():
    meter, num_steps = _Recorder(), 7
    _, losses = jax.jit(lambda key: fit(lambda t, k: jnp.sum(t**2), jnp.ones(2), optax.sgd(0.1),
                                        key, num_steps, progress=meter))(jax.random.key(0))
    jax.block_until_ready(losses)
    jax.effects_barrier()
    assert meter.calls == [(step, num_steps) for step in range(1, num_steps + 1)]
