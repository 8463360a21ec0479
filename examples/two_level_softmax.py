"""Two-level softmax sampling: how biased is each cluster-logit rule, and where does it go wrong?

Clusters a synthetic item table with k-means, then for queries of growing norm compares the exact
softmax p with the proposals of 2LS (centroid score), S-2LS (+ log cluster size) and SD-2LS
(+ half the within-cluster score variance; diagonal and rank-2 covariance). Left: mean TV(p, q)
against |q|/tau. Right: for one query, each cluster's exact mass against its proposal mass.

    python examples/two_level_softmax.py --out examples/out/two_level_softmax.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from jaxsample import softmax
from jaxsample.datasets import clustered_embeddings


def total_variation(index, queries, variant, temperature=1.0):
    """Exact TV(p, q) per query by enumeration over all N items."""
    p = jnp.exp(index.exact_log_probs(queries, temperature=temperature))
    q = jnp.exp(index.proposal_log_probs(queries, variant=variant, temperature=temperature))
    return 0.5 * jnp.sum(jnp.abs(p - q), axis=-1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-items", type=int, default=5000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--num-queries", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples/out/two_level_softmax.png"))
    args = parser.parse_args(argv)

    k_items, k_means, k_q = jax.random.split(jax.random.key(args.seed), 3)
    x, _ = clustered_embeddings(k_items, args.num_items, args.dim)
    index, _ = softmax.build_index(k_means, x)  # full covariances: the paper's SD-2LS
    indices = {"full": index,
               "rank 2": softmax.index_from_clusters(x, index.cluster_ids, rank=2)[0],
               "diag": softmax.index_from_clusters(x, index.cluster_ids, rank=0)[0]}
    print(f"k-means index: N={index.num_items}, K={index.num_clusters}, "
          f"largest cluster {index.max_cluster_size}")

    rules = [("2LS", "2ls", "full"), ("S-2LS", "s", "full"), ("SD-2LS (diag)", "sd", "diag"),
             ("SD-2LS (rank 2)", "sd", "rank 2"), ("SD-2LS (full)", "sd", "full")]
    norms = np.array([0.5, 1.0, 2.0, 3.0, 4.0])
    directions = jax.random.normal(k_q, (args.num_queries, args.dim))
    directions = directions / jnp.linalg.norm(directions, axis=1, keepdims=True)
    tv = {name: np.array([float(total_variation(indices[cov], n * directions, v).mean())
                          for n in norms]) for name, v, cov in rules}
    for name, values in tv.items():
        print(f"{name:16s} mean TV at |q|/tau = {norms.tolist()}: {np.round(values, 4).tolist()}")

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, values in tv.items():
        left.plot(norms, values, marker="o", label=name)
    left.set(xlabel="|q| / tau", ylabel="mean TV(p, q)", yscale="log",
             title=f"N={index.num_items}, K={index.num_clusters}, d={index.dim}")
    left.legend()

    query = 3.0 * directions[0]
    cluster_mass = lambda log_probs: jax.ops.segment_sum(
        jnp.exp(log_probs), index.cluster_ids, num_segments=index.num_clusters)
    exact = cluster_mass(index.exact_log_probs(query))
    for name, variant, cov in rules:
        proposal = cluster_mass(indices[cov].proposal_log_probs(query, variant=variant))
        right.loglog(exact, proposal, ".", alpha=0.7, label=name)
    lims = [float(exact.min()) / 2, 1.0]
    right.plot(lims, lims, "k--", lw=1)
    right.set(xlabel="exact cluster mass", ylabel="proposal cluster mass",
              title="one query, |q|/tau = 3", ylim=(1e-8, 1.5))
    right.legend()
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
