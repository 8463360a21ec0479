"""Latent design with spherical linear BO: a digits VAE, a cheap virtual screen, BO vs random.

The pipeline of generative design in miniature:

1. a small equinox VAE (latent D = 16) trained with optax on scikit-learn's bundled 8×8 digits
   (under a minute on a laptop CPU; without scikit-learn a synthetic set of blurred strokes
   stands in, with a note);
2. a "virtual screen": a softmax classifier trained on the same images scores a decoded design by
   its logit margin for the target digit, logit_target − logsumexp(other logits) (cheap,
   differentiable, unbounded above, but treated as a black box here);
3. the search runs over latent directions at the latents' typical radius: spherical linear BO
   (Thompson sampling in a trust-region cap, evidence refits) against random directions, the
   same budget, every step inside one compiled loop (``SphericalLinearBO.run``: the decoder and
   the screen are JAX functions, so the objective composes into the scan).

Writes ``examples/out/latent_design_bo.png`` (best-so-far curves and the best designs).

Usage: ``python examples/latent_design_bo.py [--budget 120] [--seeds 4] [--target 3] [--out DIR]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsample.decision import SphericalLinearBO
from jaxsample.kernels import sphere

LATENT = 16


def load_digits():
    """(images in [0, 1] of shape (n, 64), labels); synthetic strokes without scikit-learn."""
    try:
        from sklearn.datasets import load_digits as sk_digits
    except ImportError:
        print("note: scikit-learn is not installed; using synthetic 8×8 stroke images")
        rng = np.random.default_rng(0)
        labels = rng.integers(0, 10, size=1500)
        grid = np.stack(np.meshgrid(np.arange(8), np.arange(8), indexing="ij"), -1)
        angle = labels * np.pi / 10  # digit k: a stroke through the centre at angle kπ/10
        normal = np.stack([-np.sin(angle), np.cos(angle)], -1)
        distance = np.einsum("ijc,nc->nij", grid - 3.5, normal)
        images = np.exp(-distance**2) + 0.1 * rng.normal(size=distance.shape)
        return np.clip(images.reshape(-1, 64), 0, 1).astype(np.float32), labels
    data = sk_digits()
    return (data.data / 16.0).astype(np.float32), data.target


class VAE(eqx.Module):
    encoder: eqx.nn.MLP
    decoder: eqx.nn.MLP

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.encoder = eqx.nn.MLP(64, 2 * LATENT, 128, 2, activation=jax.nn.gelu, key=k1)
        self.decoder = eqx.nn.MLP(LATENT, 64, 128, 2, activation=jax.nn.gelu, key=k2)

    def encode(self, x):
        out = self.encoder(x)
        return out[:LATENT], out[LATENT:]

    def decode(self, z):
        return jax.nn.sigmoid(self.decoder(z))


def train_vae(images, key, steps=3000, batch=128):
    model = VAE(key)
    optimizer = optax.adam(2e-3)
    state = optimizer.init(eqx.filter(model, eqx.is_array))

    def loss(model, x, key):
        mean, log_var = jax.vmap(model.encode)(x)
        z = mean + jnp.exp(log_var / 2) * jax.random.normal(key, mean.shape)
        p = jnp.clip(jax.vmap(model.decode)(z), 1e-6, 1 - 1e-6)
        recon = -jnp.sum(x * jnp.log(p) + (1 - x) * jnp.log1p(-p), axis=1)
        kl = 0.5 * jnp.sum(jnp.exp(log_var) + mean**2 - 1 - log_var, axis=1)
        return jnp.mean(recon + kl)

    @eqx.filter_jit
    def step(model, state, x, key):
        value, grads = eqx.filter_value_and_grad(loss)(model, x, key)
        updates, state = optimizer.update(grads, state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), state, value

    rng = np.random.default_rng(0)
    for i in range(steps):
        key, sub = jax.random.split(key)
        model, state, value = step(model, state, images[rng.integers(0, len(images), batch)], sub)
        if i % 1000 == 0:
            print(f"  VAE step {i}: loss {float(value):.2f}")
    return model


def train_screen(images, labels, steps=500):
    """A softmax classifier on the pixels: the cheap virtual screen."""
    w = jnp.zeros((64, 10))
    b = jnp.zeros(10)
    optimizer = optax.adam(5e-2)
    params = (w, b)
    state = optimizer.init(params)
    x, y = jnp.asarray(images), jnp.asarray(labels)

    def loss(params):
        logits = x @ params[0] + params[1]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    @jax.jit
    def step(params, state):
        grads = jax.grad(loss)(params)
        updates, state = optimizer.update(grads, state)
        return optax.apply_updates(params, updates), state

    for _ in range(steps):
        params, state = step(params, state)
    return params


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=120)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--target", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    images, labels = load_digits()
    t0 = time.perf_counter()
    vae = train_vae(images, jax.random.key(0))
    screen_params = train_screen(images, labels)
    print(f"trained the VAE and the screen in {time.perf_counter() - t0:.1f}s")
    means, _ = jax.vmap(vae.encode)(jnp.asarray(images))
    radius = float(np.median(np.linalg.norm(means, axis=1)))

    others = jnp.arange(10) != args.target

    def screen(z):  # (q, D) latents -> (q,) logit margin of the target digit
        decoded = jax.vmap(vae.decode)(z)
        logits = decoded @ screen_params[0] + screen_params[1]
        rest = jax.nn.logsumexp(jnp.where(others, logits, -jnp.inf), axis=1)
        return logits[:, args.target] - rest

    num_initial = 10
    bo = SphericalLinearBO(LATENT, prior_scale=LATENT**-0.5, noise=0.3, radius=radius)

    def bo_seed(key):
        key_init, key_run = jax.random.split(key)
        x0 = radius * sphere.uniform(key_init, (num_initial,), LATENT)
        state = bo.tell(bo.init(jnp.float32), x0, screen(x0))
        state, trace = bo.run(key_run, screen, state, args.budget - num_initial,
                              trust_region=True, refit_every=10)
        return jnp.concatenate([screen(x0), trace.values[:, 0]]), state.best_x * radius

    def random_seed(key):
        z = radius * sphere.uniform(key, (args.budget,), LATENT)
        values = screen(z)
        return values, z[jnp.argmax(values)]

    keys = jax.random.split(jax.random.key(1), args.seeds)
    results = {}
    for name, fn in (("spherical BO (TS + cap)", bo_seed), ("random directions", random_seed)):
        t0 = time.perf_counter()
        values, best = jax.block_until_ready(jax.jit(jax.vmap(fn))(keys))
        results[name] = (np.maximum.accumulate(np.asarray(values), axis=1), np.asarray(best))
        print(f"{name}: best margin {np.mean(results[name][0][:, -1]):.3f} "
              f"(mean of {args.seeds} seeds; {time.perf_counter() - t0:.1f}s incl. compile)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(9, 3.4))
    ax = fig.add_subplot(1, 3, 1)
    for name, (curve, _) in results.items():
        ax.plot(np.arange(1, args.budget + 1), curve.mean(0), label=name)
    ax.set_xlabel("screened designs")
    ax.set_ylabel(f"best logit margin of digit {args.target}")
    ax.legend(fontsize=7)
    for column, (name, (_, best)) in enumerate(results.items()):
        ax = fig.add_subplot(1, 3, column + 2)
        tiles = np.asarray(jax.vmap(vae.decode)(jnp.asarray(best))).reshape(-1, 8, 8)
        ax.imshow(np.concatenate(list(tiles), axis=1), cmap="gray_r")
        ax.set_title(f"best designs: {name}", fontsize=8)
        ax.axis("off")
    fig.tight_layout()
    path = args.out / "latent_design_bo.png"
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
