"""Jump rules side by side: quality vs NFE on a Markov chain with forbidden bigrams.

The data is a 4-token first-order Markov chain with forbidden bigrams and the denoiser is its
exact (Bayes-optimal) forward–backward posterior, so every error is the sampler's. The plot shows
the invalid-bigram rate against the number of model evaluations for the CTMC, DTMC and flow
samplers, with the Bernoulli, stratified (SHS) and windowed Weyl jump rules.

    python examples/shs_markov.py --out examples/out/shs_markov.png
"""

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from jaxsample.diffusion import shs

TRANSITION = [[0, 0.6, 0.4, 0], [0, 0, 0.5, 0.5], [0.5, 0, 0, 0.5], [0.7, 0.3, 0, 0]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples/out/shs_markov.png"))
    parser.add_argument("--num-samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)

    data = shs.MarkovChainData(jnp.full(4, 0.25), jnp.asarray(TRANSITION))
    nfes = [4, 8, 16, 32, 64]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharey=True)
    for ax, process in zip(axes, ["ctmc", "dtmc", "flow"], strict=True):
        for jumps, style in (("bernoulli", "o--"), ("stratified", "s-"), ("weyl_window", "^-")):
            rates = []
            for nfe in nfes:
                tokens, info = shs.sample(
                    jax.random.key(args.seed), data.denoiser, vocab_size=4, seq_len=8,
                    num_samples=args.num_samples, num_steps=nfe, process=process, jumps=jumps)
                rates.append(data.invalid_bigram_rate(tokens))
            print(process, jumps, " ".join(f"{r:.4f}" for r in rates))
            ax.loglog(nfes, [max(r, 1e-5) for r in rates], style, label=jumps)
        ax.set_title(process)
        ax.set_xlabel("NFE")
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(nfes, [str(n) for n in nfes])
    axes[0].set_ylabel("invalid-bigram rate")
    axes[0].legend()
    fig.suptitle("jump rules, exact denoiser (K=4, L=8)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
