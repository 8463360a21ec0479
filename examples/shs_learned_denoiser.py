"""A learned denoiser plugs into the same sampler: train a small MLP, then sample with SHS.

An equinox MLP is trained with optax on (noisy, clean) pairs from a 4-token Markov chain with
forbidden bigrams (uniform channel at a random signal level α, cross-entropy on the clean
tokens). It is then used exactly like the exact forward–backward denoiser: any
``denoiser(tokens, signal) -> logits`` works. The plot shows the training loss and the
invalid-bigram rate of the Bernoulli, SHS (stratified) and windowed Weyl jump rules (flow
sampler) with the learned and the exact model.

    python examples/shs_learned_denoiser.py --out examples/out/shs_learned_denoiser.png
"""

import argparse
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from jaxsample.diffusion import shs

TRANSITION = [[0, 0.6, 0.4, 0], [0, 0, 0.5, 0.5], [0.5, 0, 0, 0.5], [0.7, 0.3, 0, 0]]
VOCAB, SEQ_LEN = 4, 8
RULES = ("bernoulli", "stratified", "weyl_window")


class MLPDenoiser(eqx.Module):
    """Clean-token logits from a whole noisy sequence and the signal level: an MLP on one-hots."""

    mlp: eqx.nn.MLP

    def __init__(self, key, width=256, depth=3):
        self.mlp = eqx.nn.MLP(SEQ_LEN * VOCAB + 1, SEQ_LEN * VOCAB, width, depth,
                              activation=jax.nn.gelu, key=key)

    def __call__(self, tokens, signal):
        features = jax.nn.one_hot(tokens, VOCAB).reshape(tokens.shape[0], -1)
        signal = jnp.broadcast_to(jnp.asarray(signal, features.dtype), (tokens.shape[0], 1))
        logits = jax.vmap(self.mlp)(jnp.concatenate([features, signal], axis=1))
        return logits.reshape(tokens.shape[0], SEQ_LEN, VOCAB)


def noisy_batch(key, data, batch):
    """Clean sequences, their uniform-channel corruptions at α ~ U[0, 1), and α (per sequence)."""
    k_data, k_alpha, k_keep, k_noise = jax.random.split(key, 4)
    clean = data.sample(k_data, batch, SEQ_LEN)
    alpha = jax.random.uniform(k_alpha, (batch, 1))
    keep = jax.random.uniform(k_keep, clean.shape) < alpha
    noise = jax.random.randint(k_noise, clean.shape, 0, VOCAB, dtype=jnp.int32)
    return jnp.where(keep, clean, noise), clean, alpha


def train(key, data, num_steps, batch=256, learning_rate=2e-3):
    model_key, key = jax.random.split(key)
    model = MLPDenoiser(model_key)
    optimizer = optax.adam(learning_rate)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))

    def loss_fn(model, noisy, clean, alpha):
        def one(tokens, a):
            return model(tokens[None], a[0])[0]

        logits = jax.vmap(one)(noisy, alpha)
        return optax.softmax_cross_entropy_with_integer_labels(logits, clean).mean()

    @eqx.filter_jit
    def step(model, opt_state, key):
        noisy, clean, alpha = noisy_batch(key, data, batch)
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, noisy, clean, alpha)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    losses = []
    for step_key in jax.random.split(key, num_steps):
        model, opt_state, loss = step(model, opt_state, step_key)
        losses.append(float(loss))
    return model, np.array(losses)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples/out/shs_learned_denoiser.png"))
    parser.add_argument("--train-steps", type=int, default=1500)
    parser.add_argument("--num-samples", type=int, default=2000)
    parser.add_argument("--nfe", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)

    key = jax.random.key(args.seed)
    train_key, sample_key = jax.random.split(key)
    data = shs.MarkovChainData(jnp.full(VOCAB, 0.25), jnp.asarray(TRANSITION))
    model, losses = train(train_key, data, args.train_steps)
    print(f"final training loss {losses[-50:].mean():.4f}")

    rates = {}
    for name, denoiser in (("learned MLP", model), ("exact", data.denoiser)):
        for jumps in RULES:
            tokens, info = shs.sample(
                sample_key, denoiser, vocab_size=VOCAB, seq_len=SEQ_LEN,
                num_samples=args.num_samples, num_steps=args.nfe, process="flow", jumps=jumps)
            rates[name, jumps] = data.invalid_bigram_rate(tokens)
            print(f"{name:12s} {jumps:11s} invalid-bigram rate {rates[name, jumps]:.4f}"
                  f"  nonfinite={bool(info.nonfinite)}")

    fig, (ax_loss, ax_rate) = plt.subplots(1, 2, figsize=(9, 3.4))
    ax_loss.plot(losses, lw=0.8)
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("cross-entropy")
    ax_loss.set_title("MLP denoiser training")
    for offset, jumps in zip((-0.27, 0.0, 0.27), RULES, strict=True):
        ax_rate.bar(np.arange(2) + offset, [rates[m, jumps] for m in ("learned MLP", "exact")],
                    width=0.27, label=jumps)
    ax_rate.set_xticks(np.arange(2), ["learned MLP", "exact"])
    ax_rate.set_ylabel("invalid-bigram rate")
    ax_rate.set_title(f"flow sampler, NFE {args.nfe}")
    ax_rate.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
