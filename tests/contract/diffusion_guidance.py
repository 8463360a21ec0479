"""Contract entry: guided VP diffusion (``jaxsample.diffusion.guidance``), DDIM with TAG.

Tiny configuration: a 2-component mixture in d = 2 with its exact ε-predictor and Bayes time
predictor, classifier guidance plus TAG, 3 steps, 4 samples; the traced hyper-parameter is ω.
The time predictor's training and its KL to the exact time posterior run 2 steps on a width-4
network (the code path, not the fit).
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from contract import KEY, BadInput, Entry
from jaxsample.diffusion import guidance
from jaxsample.kernels.guidance import time_grid
from jaxsample.targets import GaussianMixture

NUM_STEPS = 3


def _setup(dtype):
    schedule = guidance.VPSchedule("cosine")
    prior = guidance.NoisedMixture(
        GaussianMixture(jnp.array([[1.0, 0.0], [-1.0, 0.0]], dtype),
                        jnp.array([0.1, 0.2], dtype) ** 0.5), schedule)
    x_T = jax.random.normal(jax.random.key(1), (4, 2), dtype)
    return prior, schedule, x_T


def _terms(prior, omega):
    return [guidance.ClassifierGuidance(prior.classifier(0), 2.0),
            guidance.TAG(prior.time_predictor(time_grid(NUM_STEPS)), omega)]


def _sample(dtype):
    prior, schedule, x_T = _setup(dtype)
    terms = _terms(prior, 1.0)
    return lambda key: guidance.sample(key, prior, schedule, x_T, num_steps=NUM_STEPS,
                                       solver=guidance.DDIM(eta=0.5), guidance=terms)


def _ndtm_sample(dtype):
    prior, schedule, x_T = _setup(dtype)
    cost = guidance.FiberCost(lambda x: x[:1], np.zeros(2, dtype), loss="norm",
                              per_step_target=True)
    solver = guidance.NDTM(cost, num_steps=2, terminal_weight=1.0, max_grad_norm=1.0,
                           control_scale=lambda t: jnp.where(t > 0.5, 0.0, 1.0),
                           clip_x0=(-2.0, 2.0), variance="large", eta=0.5)
    return lambda key: guidance.sample(key, prior, schedule, x_T, num_steps=NUM_STEPS,
                                       solver=solver)


def _ndtm_hyper(dtype):
    prior, schedule, x_T = _setup(dtype)
    cost = guidance.FiberCost(lambda x: x[:1], np.zeros(2, dtype))
    return lambda key, h: guidance.sample(
        key, prior, schedule, x_T, num_steps=NUM_STEPS,
        solver=guidance.NDTM(cost, optimizer=optax.sgd(0.1), num_steps=2, terminal_weight=0.05 * h,
                             control_scale=0.5 * h))


def _hyper(dtype):
    prior, schedule, x_T = _setup(dtype)
    return lambda key, h: guidance.sample(key, prior, schedule, x_T, num_steps=NUM_STEPS,
                                          solver=guidance.DDIM(eta=0.5),
                                          guidance=_terms(prior, h))


def _time_predictor(dtype):
    mixture = GaussianMixture(jnp.array([[1.0, 0.0], [-1.0, 0.0]], dtype),
                              jnp.array([0.1, 0.2], dtype) ** 0.5)
    schedule, times = guidance.VPSchedule("cosine"), time_grid(NUM_STEPS).astype(dtype)
    predictor = guidance.TimePredictor(jax.random.key(2), 2, times.shape[0], width=4, depth=1,
                                       dtype=dtype)
    data = jax.random.normal(jax.random.key(3), (8, 2), dtype)

    def fn(key, learning_rate):
        key_train, key_kl = jax.random.split(key)
        trained, train_info = guidance.train_time_predictor(
            key_train, predictor, data, schedule, times, num_steps=2, batch_size=4,
            learning_rate=learning_rate)
        kl, kl_info = guidance.time_posterior_kl(key_kl, mixture, trained, schedule, times,
                                                 num_samples=8)
        return (eqx.filter(trained, eqx.is_array), train_info), (kl, kl_info)

    return fn


def _adapters(dtype):
    """A v-prediction model on integer timesteps (a 6-entry table schedule) with TAG through a
    6-class time predictor seen on the 3-step grid, and a flow-matching velocity model."""
    prior, _, x_T = _setup(dtype)
    steps = 6
    table = guidance.VPSchedule("table", alpha_bar=prior.schedule.alpha_bar(
        jnp.arange(1, steps + 1, dtype=dtype) / steps))
    on_table = guidance.NoisedMixture(GaussianMixture(prior.means, jnp.array([0.1, 0.2],
                                                                             dtype) ** 0.5),
                                      table)

    def v_model(x, j):
        t = (j + 1).astype(x.dtype) / steps
        a = table.alpha_bar(t)
        eps = on_table(x, t)
        return jnp.sqrt(a) * eps - jnp.sqrt(1 - a) * (x - jnp.sqrt(1 - a) * eps) / jnp.sqrt(a)

    def velocity_model(x, s):   # the exact velocity E[ε − x₀ | x_s] of N(0, I) data
        return (2 * s - 1) * x / ((1 - s) ** 2 + s ** 2)

    def fn(key, omega=1.0):
        k1, k2 = jax.random.split(key)
        tag = guidance.TAG(guidance.GridTimePredictor(on_table.time_predictor(time_grid(steps)),
                                                      steps, NUM_STEPS), omega)
        return (guidance.sample(k1, v_model, table, x_T, num_steps=NUM_STEPS, prediction="v",
                                timesteps=steps, guidance=tag),
                guidance.sample(k2, velocity_model, prior.schedule, x_T, num_steps=NUM_STEPS,
                                prediction="velocity"))

    return fn


def _call(solver=None, eps_fn=None, x_T=None, **kwargs):
    prior, schedule, default_x = _setup(jnp.float32)
    eps_fn = prior if eps_fn is None else eps_fn
    x_T = default_x if x_T is None else x_T
    settings = dict(num_steps=2, solver=solver)
    settings.update(kwargs)
    return guidance.sample(KEY, eps_fn, schedule, x_T, **settings)


def _ndtm(**kwargs):
    return guidance.NDTM(guidance.FiberCost(lambda x: x[:1], np.zeros(2, np.float32)), **kwargs)


def _predictor():
    prior, _, _ = _setup(jnp.float32)
    return prior.time_predictor(time_grid(5))


ENTRIES = [
    Entry(
        name="diffusion.guidance",
        module="jaxsample.diffusion.guidance",
        build=_sample,
        covers=("diffusion.guidance.sample",),
        hyper=_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: guidance.VPSchedule("cosine", alpha_bar_end=1.5), ValueError,
                     "alpha_bar_end"),
            BadInput(lambda: guidance.VPSchedule("table", alpha_bar=[0.5, 1.2]), ValueError,
                     "alpha_bar"),
            BadInput(lambda: guidance.VPSchedule("linear", beta_min=2.0, beta_max=1.0),
                     ValueError, "beta_max"),
            BadInput(lambda: guidance.VPSchedule("quadratic"), ValueError, "kind"),
            BadInput(lambda: _call(num_steps=0), ValueError, "num_steps"),
            BadInput(lambda: _call(eps_fn=lambda x, t: x[:1]), ValueError, "eps_fn"),
            BadInput(lambda: _call(eps_fn=3), TypeError, "eps_fn"),
            BadInput(lambda: _call(x_T=np.full((4, 2), np.nan, np.float32)), ValueError, "x_T"),
            BadInput(lambda: _call(guidance.DDIM(eta=1.5)), ValueError, "eta"),
            BadInput(lambda: _call("ddim"), TypeError, "solver"),
            BadInput(lambda: _call(guidance.DDPM("exact")), ValueError, "variance"),
            BadInput(lambda: _call(guidance="tag"), TypeError, "guidance"),
            BadInput(lambda: _call(progress="bar"), TypeError, "progress"),
            BadInput(lambda: _call(guidance=guidance.TAG(_predictor(), 1.0)), ValueError,
                     "time_logits_fn"),
            BadInput(lambda: guidance.TAG(_predictor(), -1.0), ValueError, "omega"),
            BadInput(lambda: guidance.FiberCost(lambda x: x, np.zeros(2, np.float32),
                                                loss="l2"), ValueError, "loss"),
            BadInput(lambda: guidance.DPSGuidance(guidance.FiberCost(
                lambda x: x, np.zeros(2, np.float32), per_step_target=True), 1.0), ValueError,
                "per_step_target"),
            BadInput(lambda: _call(guidance.DDIM(variance="learned")), ValueError, "variance"),
            BadInput(lambda: _call(guidance.DDIM(clip_x0=(1.0, -1.0))), ValueError, "clip_x0"),
        ),
        note="hyper is TAG's ω (the classifier scale, η and the schedule's floats are traced "
             "leaves too). Non-finite predictions and costs are flagged in info.nonfinite "
             "(tests/diffusion/test_guidance.py).",
    ),
    Entry(
        name="diffusion.guidance.ndtm",
        module="jaxsample.diffusion.guidance",
        build=_ndtm_sample,
        covers=("diffusion.guidance.sample",),
        hyper=_ndtm_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: _call(_ndtm(max_grad_norm=0.0)), ValueError, "max_grad_norm"),
            BadInput(lambda: _call(_ndtm(control_scale=-1.0)), ValueError, "control_scale"),
            BadInput(lambda: _call(_ndtm(control_scale=lambda t: jnp.ones(2))), ValueError,
                     "control_scale"),
            BadInput(lambda: _call(_ndtm(weights="adam")), ValueError, "weights"),
            BadInput(lambda: _call(_ndtm(init="ones")), ValueError, "init"),
            BadInput(lambda: _call(_ndtm(num_steps=0)), ValueError, "num_steps"),
            BadInput(lambda: _call(_ndtm(learning_rate=0.0)), ValueError, "learning_rate"),
            BadInput(lambda: _call(_ndtm(optimizer="adam")), TypeError, "optimizer"),
            BadInput(lambda: _call(_ndtm(optimizer=optax.sgd(0.1), learning_rate=0.1)),
                     ValueError, "learning_rate"),
        ),
        note="NDTM with every invariance-auditing option (norm fiber loss, per-step target, "
             "γ schedule, per-sample clipping, x̂₀ clamp, large variance); hyper is w_term and "
             "γ together (both traced), with SGD as the control's optimiser: Adam divides "
             "round-off-sized gradient components by their own size, so batched and single "
             "runs of it differ by more than round-off.",
    ),
    Entry(
        name="diffusion.guidance/adapters",
        module="jaxsample.diffusion.guidance",
        build=lambda dtype: _adapters(dtype),
        covers=("diffusion.guidance.sample",),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=lambda dtype: _adapters(dtype),
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: _call(prediction="score"), ValueError, "prediction"),
            BadInput(lambda: _call(prediction="velocity", timesteps=4), ValueError, "timesteps"),
            BadInput(lambda: _call(timesteps=3), ValueError, "num_steps must divide"),
            BadInput(lambda: _call(timesteps=0), ValueError, "timesteps"),
            BadInput(lambda: guidance.GridTimePredictor(_predictor(), np.array([0.5, 0.2]), 3),
                     ValueError, "training_times"),
            BadInput(lambda: guidance.GridTimePredictor(_predictor(), 5, 0), ValueError,
                     "num_steps"),
        ),
        note="prediction='v' on integer timesteps (table schedule, T = 6, N = 3) with TAG "
             "through GridTimePredictor (6 training classes on the 3-step grid), and "
             "prediction='velocity' (the exact velocity of N(0, I) data): one program, a tuple "
             "of two (samples, GuidanceInfo); hyper is TAG's ω",
    ),
    Entry(
        name="diffusion.guidance/time_predictor",
        module="jaxsample.diffusion.guidance",
        build=lambda dtype: functools.partial(_time_predictor(dtype), learning_rate=1e-2),
        covers=("diffusion.guidance.train_time_predictor", "diffusion.guidance.time_posterior_kl"),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=_time_predictor,
        hyper_values=(1e-3, 1e-2),
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: guidance.train_time_predictor(
                KEY, _predictor(), np.zeros((4, 2), np.float32), guidance.VPSchedule("cosine"),
                time_grid(5), num_steps=0), ValueError, "num_steps"),
            BadInput(lambda: guidance.time_posterior_kl(
                KEY, "mixture", _predictor(), guidance.VPSchedule("cosine"), time_grid(5)),
                TypeError, "mixture"),
        ),
        note="train_time_predictor (2 Adam steps of 4 pairs, a width-4 one-layer TimePredictor) "
             "then time_posterior_kl of the trained net (8 pairs): one program, keyed (with the "
             "legacy-key case); Adam's learning rate is traced. The trained module's arrays are "
             "returned (its MLP also holds the activation function)",
    ),
]
