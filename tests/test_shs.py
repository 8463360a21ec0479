"""Tests of jaxsample.diffusion: the data model, the three processes' closed forms, the sampler.

Exact checks are run in float64. Statistical checks use fixed seeds and a chi-square test at
p = 1e-4 or a z = 5 bound on the Monte Carlo standard error.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec
from scipy import stats

from jaxsample.diffusion import shs
from jaxsample.diffusion._processes import PROCESSES
from jaxsample.diffusion.shs import _stay_or_replace

Z = 5.0
P_VALUE = 1e-4
# sparse 3-token chain (forbidden bigrams) and the 4-token chain of the paper notes
T3 = np.array([[0.1, 0.6, 0.3], [0.0, 0.5, 0.5], [0.7, 0.3, 0.0]])
PI3 = np.array([0.5, 0.3, 0.2])
T4 = np.array([[0, 0.6, 0.4, 0], [0, 0, 0.5, 0.5], [0.5, 0, 0, 0.5], [0.7, 0.3, 0, 0]])


def _chain3(dtype=jnp.float64):
    return shs.MarkovChainData(jnp.asarray(PI3, dtype), jnp.asarray(T3, dtype))


def _chain4(dtype=jnp.float32):
    return shs.MarkovChainData(jnp.full(4, 0.25, dtype), jnp.asarray(T4, dtype))


def _states(k, seq_len):
    return np.array(list(itertools.product(range(k), repeat=seq_len)), dtype=np.int32)


def _chisquare_ok(counts, probs):
    """Chi-square goodness of fit; cells with expected count < 5 are merged into one."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    expected = probs * counts.sum()
    keep = expected >= 5
    obs, exp = list(counts[keep]), list(expected[keep])
    if expected[~keep].sum() > 0:
        obs.append(counts[~keep].sum())
        exp.append(expected[~keep].sum())
    obs, exp = np.array(obs), np.array(exp)
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > P_VALUE


def _channel(alpha, k):
    """Uniform channel matrix C[a, x] = q_alpha(x | a)."""
    return alpha * np.eye(k) + (1 - alpha) / k * np.ones((k, k))


# -- the data model ------------------------------------------------------------------------------


def test_forward_backward_equals_brute_force(dtype):
    data = _chain3(dtype)
    seq_len, k = 4, 3
    states = _states(k, seq_len)
    prior = data.sequence_probs(seq_len)
    noisy = jnp.asarray(states[[0, 5, 40, 77]])
    for alpha in (0.0, 0.3, 0.9):
        out = data.denoiser(noisy, jnp.asarray(alpha, dtype))
        assert out.dtype == dtype and out.shape == (4, seq_len, k)
        channel = _channel(alpha, k)
        for row, x in zip(np.asarray(out), np.asarray(noisy), strict=True):
            joint = prior * np.prod(channel[states, x[None, :]], axis=1)
            for i in range(seq_len):
                marginal = np.bincount(states[:, i], weights=joint, minlength=k)
                np.testing.assert_allclose(
                    np.exp(row[i]), marginal / marginal.sum(), atol=2e-6 if dtype == jnp.float32
                    else 1e-12
                )


def test_log_prob_marginals_and_samples_are_consistent(x64):
    data = _chain3()
    seq_len = 4
    probs = data.sequence_probs(seq_len)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)
    states = _states(3, seq_len)
    for i, marginal in enumerate(np.asarray(data.marginals(seq_len))):
        np.testing.assert_allclose(marginal, np.bincount(states[:, i], probs, 3), atol=1e-12)
    x = data.sample(jax.random.key(0), 50_000, seq_len)
    assert x.dtype == jnp.int32 and x.shape == (50_000, seq_len)
    codes = np.asarray(x) @ (3 ** np.arange(seq_len - 1, -1, -1))
    assert _chisquare_ok(np.bincount(codes, minlength=probs.size), probs)
    assert data.invalid_bigram_rate(x) == 0.0
    assert np.all(np.isfinite(np.asarray(data.log_prob(x))))


def test_markov_chain_validation():
    with pytest.raises(ValueError, match="square"):
        shs.MarkovChainData(np.full(3, 1 / 3), np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="sum to 1"):
        shs.MarkovChainData(np.full(2, 0.5), np.array([[0.5, 0.6], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="nonnegative"):
        shs.MarkovChainData(np.array([1.5, -0.5]), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match=r"init_probs must have shape \(2,\)"):
        shs.MarkovChainData(np.full(3, 1 / 3), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="K >= 2"):
        shs.MarkovChainData(np.ones(1), np.ones((1, 1)))
    with pytest.raises(TypeError, match="floating"):
        shs.MarkovChainData(np.array([1, 0]), np.array([[0, 1], [1, 0]]))


# -- the processes' closed forms -----------------------------------------------------------------


def _random_posterior(seed, k):
    """Posteriors (1, K, K): position x holds token x, so every current token is covered."""
    logits = jax.random.normal(jax.random.key(seed), (1, k, k), jnp.float64) * 2
    return jax.nn.log_softmax(logits, axis=-1), jnp.arange(k, dtype=jnp.int32)[None, :]


@pytest.mark.parametrize("a,b", [(0.0, 0.25), (0.3, 0.5), (0.8, 0.95)])
def test_dtmc_step_equals_bayes_rule(x64, a, b):
    k = 4
    log_post, tokens = _random_posterior(1, k)
    log_w = shs.DTMC().log_jump_weights(log_post, tokens, jnp.float64(a), jnp.float64(b))
    post = np.exp(np.asarray(log_post[0]))
    # q(x_s = y | x_t = x, x0 = a) = C_{t|s}[y, x] C_s[a, y] / C_t[a, x]
    c_ts, c_s, c_t = _channel(a / b, k), _channel(b, k), _channel(a, k)
    for x in range(k):
        bayes = c_ts[:, x][None, :] * c_s / c_t[:, x][:, None]  # [a, y]
        np.testing.assert_allclose(bayes.sum(axis=1), 1.0, rtol=1e-12)
        step = post[x] @ bayes
        expected = np.where(np.arange(k) == x, 0.0, step)
        np.testing.assert_allclose(np.exp(np.asarray(log_w[0, x])), expected, rtol=1e-10,
                                   atol=1e-15)
        np.testing.assert_allclose(expected.sum(), 1 - step[x], rtol=1e-10)


@pytest.mark.parametrize("alpha", [1e-3, 0.4, 0.97])
def test_ctmc_and_flow_rates_equal_their_definitions(x64, alpha):
    k, d_alpha = 5, 0.01
    log_post, tokens = _random_posterior(2, k)
    post = np.exp(np.asarray(log_post[0]))
    signal, nxt = jnp.float64(alpha), jnp.float64(alpha + d_alpha)
    ctmc = np.exp(np.asarray(shs.CTMC().log_jump_weights(log_post, tokens, signal, nxt)[0]))
    flow = np.exp(np.asarray(shs.Flow().log_jump_weights(log_post, tokens, signal, nxt)[0]))
    c = _channel(alpha, k)
    for x in range(k):
        # SEDD concrete score: p_t(x^{i<-y}) / p_t(x) = sum_a p(a) q(y | a) / q(x | a)
        rate = (1 / alpha) / k * (post[x] @ (c / c[:, x][:, None]))
        off = np.arange(k) != x
        np.testing.assert_allclose(ctmc[x][off], rate[off] * d_alpha, rtol=1e-10)
        np.testing.assert_allclose(flow[x][off], post[x][off] / (1 - alpha) * d_alpha, rtol=1e-10)
        assert ctmc[x][x] == 0 and flow[x][x] == 0


@pytest.mark.parametrize("process", [shs.CTMC(), shs.Flow()])
def test_generators_reproduce_the_uniform_path_marginals(x64, process):
    """Kolmogorov forward equation on all K^L states: sum of flows = d p_alpha / d alpha."""
    data, k, seq_len, alpha = _chain3(), 3, 2, 0.37
    states = _states(k, seq_len)
    prior = data.sequence_probs(seq_len)

    def path(a):
        return np.prod(_channel(a, k)[states[:, None, :], states[None, :, :]], axis=2).T @ prior

    p = path(alpha)
    h = 1e-6
    dp = (path(alpha + h) - path(alpha - h)) / (2 * h)
    log_post = data.denoiser(jnp.asarray(states), jnp.float64(alpha))
    rates = np.exp(np.asarray(process.log_jump_weights(
        log_post, jnp.asarray(states), jnp.float64(alpha), jnp.float64(alpha + 1.0))))
    flux = np.zeros_like(p)
    for s, x in enumerate(states):
        for i in range(seq_len):
            for y in range(k):
                if y != x[i]:
                    target = x.copy()
                    target[i] = y
                    t = int(target @ (k ** np.arange(seq_len - 1, -1, -1)))
                    flux[t] += p[s] * rates[s, i, y]
                    flux[s] -= p[s] * rates[s, i, y]
    np.testing.assert_allclose(flux, dp, atol=1e-7)


def test_dtmc_step_maps_path_marginal_to_path_marginal(x64):
    """For one position (L = 1) the ancestral step is exact: p_alpha_t -> p_alpha_s."""
    data, k, a, b = _chain3(), 3, 0.2, 0.55
    tokens = jnp.arange(k, dtype=jnp.int32)[:, None]
    log_post = data.denoiser(tokens, jnp.float64(a))
    w = np.exp(np.asarray(shs.DTMC().log_jump_weights(
        log_post, tokens, jnp.float64(a), jnp.float64(b))[:, 0]))
    step = w + np.diag(1 - w.sum(axis=1))
    np.testing.assert_allclose(step.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(PI3 @ _channel(a, k) @ step, PI3 @ _channel(b, k), atol=1e-12)


# -- the sampler: laws ---------------------------------------------------------------------------


def _exact_bernoulli_law(data, process, seq_len, num_steps):
    """Law of shs.sample(jumps='bernoulli') by propagating all K^L states (float64)."""
    k = data.vocab_size
    states = _states(k, seq_len)
    tokens = jnp.asarray(states)
    grid = process.signal_grid(num_steps, jnp.float64)
    law = np.full(len(states), 1.0 / len(states))
    denoiser, log_jump_weights = data.denoiser, jax.jit(process.log_jump_weights)

    def product_kernel(per_position):  # (S, L, K) -> (S, S)
        return np.prod([per_position[:, i, states[:, i]] for i in range(seq_len)], axis=0)

    for step in range(num_steps - 1):
        log_post = denoiser(tokens, grid[step])
        w = np.exp(np.asarray(log_jump_weights(log_post, tokens, grid[step], grid[step + 1])))
        mass = w.sum(axis=-1, keepdims=True)
        prob = np.asarray(process.jump_probability(jnp.asarray(mass)))
        move = prob * np.divide(w, mass, out=np.zeros_like(w), where=mass > 0)
        stay = (1 - prob) * (states[..., None] == np.arange(k))
        law = law @ product_kernel(move + stay)
    final = np.exp(np.asarray(denoiser(tokens, grid[-2])))
    return law @ product_kernel(final)


@pytest.mark.parametrize("process", ["dtmc", "ctmc", "flow"])
def test_bernoulli_sampler_matches_its_exact_law(x64, process):
    data, seq_len, num_steps, n = _chain3(), 3, 4, 30_000
    law = _exact_bernoulli_law(data, PROCESSES[process](),
                               seq_len, num_steps)
    x, info = shs.sample(jax.random.key(3), data.denoiser, vocab_size=3, seq_len=seq_len,
                              num_samples=n, num_steps=num_steps, process=process,
                              jumps="bernoulli")
    assert not bool(info.nonfinite)
    codes = np.asarray(x) @ (3 ** np.arange(seq_len - 1, -1, -1))
    assert _chisquare_ok(np.bincount(codes, minlength=law.size), law)


def test_exact_bernoulli_law_converges_to_the_data(x64):
    """Exact sequence-level TV (no sampling error) of the baseline falls towards 0 with NFE."""
    data, seq_len = _chain3(), 4
    probs = data.sequence_probs(seq_len)
    for name in ("dtmc", "ctmc", "flow"):
        process = PROCESSES[name]()
        tvs = [0.5 * np.abs(_exact_bernoulli_law(data, process, seq_len, n) - probs).sum()
               for n in (4, 16, 64, 256)]
        pairs = zip(tvs, tvs[1:], strict=False)
        assert all(later < earlier for earlier, later in pairs), (name, tvs)
        assert tvs[-1] < 0.1 * tvs[0], (name, tvs)


def test_one_jump_step_has_the_exact_law_for_both_rules(x64):
    """L = 1, two model calls (one DTMC step from pure noise, then the denoise draw): exact.

    The SHS phase is uniform at its first step, so both rules jump with the same probability.
    """
    data, n = _chain3(), 40_000
    for jumps in ("bernoulli", "stratified"):
        x, _ = shs.sample(jax.random.key(4), data.denoiser, vocab_size=3, seq_len=1,
                               num_samples=n, num_steps=2, process="dtmc", jumps=jumps)
        assert _chisquare_ok(np.bincount(np.asarray(x[:, 0]), minlength=3), PI3), jumps


def test_stratified_rule_is_not_distribution_exact(x64):
    """Characterises the method (paper notes §4, 'what is not preserved'), not a bug.

    One position (L = 1), exact denoiser, DTMC: every Bernoulli step is an exact ancestral step,
    so its output law is π0 at any NFE. Under SHS the first jump happens when the cumulative
    mass reaches 1 − U, a linear rather than exponential waiting-time law, and the output law
    sharpens towards the mode (here 0.7 -> about 0.79 at NFE 16).
    """
    data = shs.MarkovChainData(jnp.asarray([0.7, 0.2, 0.1]), jnp.asarray(T3))
    n = 40_000
    counts = {}
    for jumps in ("bernoulli", "stratified"):
        x, _ = shs.sample(jax.random.key(15), data.denoiser, vocab_size=3, seq_len=1,
                               num_samples=n, num_steps=16, process="dtmc", jumps=jumps)
        counts[jumps] = np.bincount(np.asarray(x[:, 0]), minlength=3)
    assert _chisquare_ok(counts["bernoulli"], [0.7, 0.2, 0.1])
    assert counts["stratified"][0] / n > 0.7 + Z * np.sqrt(0.21 / n)


def test_destinations_are_identical_between_rules(x64):
    """Same key: where both rules jump, they move to the same token; the law is w / Δ."""
    k, n = 4, 50_000
    log_w = jnp.log(jnp.asarray([0.0, 0.1, 0.15, 0.25]))  # Δ = 0.5, current token 0
    log_w = jnp.broadcast_to(log_w, (1, n, k))
    tokens = jnp.zeros((1, n), jnp.int32)
    phase = jax.random.uniform(jax.random.key(5), (1, n), jnp.float64)
    key = jax.random.key(6)
    out = {rule: _stay_or_replace(key, tokens, phase, log_w, rule, lambda m: m)
           for rule in ("stratified", "bernoulli")}
    both = np.asarray(out["stratified"][2] & out["bernoulli"][2])
    assert both.sum() > 0.2 * n
    np.testing.assert_array_equal(np.asarray(out["stratified"][0])[both],
                                  np.asarray(out["bernoulli"][0])[both])
    for rule, (new, _, jump, _, mass) in out.items():
        np.testing.assert_allclose(np.asarray(mass), 0.5, rtol=1e-12)
        jump = np.asarray(jump)
        assert abs(jump.mean() - 0.5) <= Z * np.sqrt(0.25 / n), rule
        moved = np.asarray(new)[jump]
        assert np.all(moved != 0)
        assert _chisquare_ok(np.bincount(moved, minlength=k)[1:], [0.2, 0.3, 0.5]), rule


@pytest.mark.slow
def test_sequence_tv_with_steps_729_states(x64):
    """K = 3, L = 6 (729 sequences), 2·10^4 samples; floor = TV of an exact sample of that size.

    The Bernoulli baseline approaches the floor as NFE grows. SHS lowers the TV from NFE 4 but
    does not converge to the data law (a phase-correlated jump process is not the reverse
    process; paper notes §4 'what is not preserved'); its plateau is measured in the bench.
    """
    data, seq_len, n = _chain3(), 6, 20_000
    probs = data.sequence_probs(seq_len)
    rng = np.random.default_rng(0)
    floor = [0.5 * np.abs(rng.multinomial(n, probs) / n - probs).sum() for _ in range(200)]
    floor_mean, floor_sd = np.mean(floor), np.std(floor)
    tv = {}
    for jumps in ("bernoulli", "stratified"):
        for num_steps in (4, 64):
            x, _ = shs.sample(jax.random.key(7), data.denoiser, vocab_size=3,
                                   seq_len=seq_len, num_samples=n, num_steps=num_steps,
                                   process="dtmc", jumps=jumps)
            tv[jumps, num_steps] = data.sequence_tv(x)
    assert tv["bernoulli", 64] <= floor_mean + Z * floor_sd, (tv, floor_mean, floor_sd)
    assert tv["bernoulli", 4] > floor_mean + Z * floor_sd
    assert tv["stratified", 64] < tv["stratified", 4] - Z * floor_sd


# -- the sampler: blacklist, dtypes, transformations, devices ------------------------------------


def test_blacklisted_tokens_never_appear_and_allocation_front_loads_edits():
    """Flow, NFE 3: a position holding a banned token has Λ = 1/3 + 1/2 < 1 (p(banned) = 0).

    It keeps its token to the end with probability e^{-Λ} (Bernoulli), 1 − Λ (SHS), and less
    when SHS hands the banned positions the largest phases.
    """
    data, n = _chain4(), 4000
    common = dict(vocab_size=4, seq_len=8, num_samples=n, num_steps=3, process="flow",
                  blacklist=[2])
    left = {}
    for jumps, allocate in (("bernoulli", False), ("stratified", False), ("stratified", True)):
        x, info = shs.sample(jax.random.key(8), data.denoiser, jumps=jumps,
                                  allocate_phases=allocate, **common)
        assert not np.any(np.asarray(x) == 2)
        left[jumps, allocate] = np.asarray(info.banned_before_denoise, float)
    order = [left["bernoulli", False], left["stratified", False], left["stratified", True]]
    for more, fewer in zip(order, order[1:], strict=False):
        se = np.sqrt((more.var() + fewer.var()) / n)
        assert fewer.mean() < more.mean() - Z * se


def test_float32_and_float64(dtype):
    data = _chain4(dtype)
    x, info = shs.sample(jax.random.key(9), data.denoiser, vocab_size=4, seq_len=8,
                              num_samples=64, num_steps=6, process="ctmc")
    assert x.dtype == jnp.int32 and x.shape == (64, 8)
    for leaf in (info.crossings, info.cum_hazard, info.signal_grid):
        assert leaf.dtype == dtype
    assert info.jumps.dtype == jnp.int32 and int(info.nfe) == 6
    assert not bool(info.nonfinite)
    assert np.all(np.asarray(info.crossings) >= np.asarray(info.jumps))
    np.testing.assert_allclose(np.asarray(info.signal_grid)[[0, -1]], [1e-3, 1.0], rtol=1e-6)


def test_jit_vmap_and_compile_count():
    data = _chain4()
    traces = []

    def denoiser(tokens, signal):
        traces.append(1)
        return data.denoiser(tokens, signal)

    kwargs = dict(vocab_size=4, seq_len=8, num_samples=16, num_steps=5, process="dtmc")
    eager, info = shs.sample(jax.random.key(10), denoiser, **kwargs)
    first = len(traces)
    # the NFE is a traced loop bound: another key and another NFE reuse the compiled sampler
    shs.sample(jax.random.key(11), denoiser, **{**kwargs, "num_steps": 9})
    assert len(traces) == first
    jitted, info_jit = jax.jit(lambda key: shs.sample(key, denoiser, **kwargs))(
        jax.random.key(10))
    np.testing.assert_array_equal(eager, jitted)
    np.testing.assert_array_equal(info.crossings, info_jit.crossings)
    keys = jax.random.split(jax.random.key(12), 3)
    batched, _ = jax.vmap(lambda key: shs.sample(key, denoiser, **kwargs))(keys)
    assert batched.shape == (3, 16, 8)
    np.testing.assert_array_equal(batched[1], shs.sample(keys[1], denoiser, **kwargs)[0])


def test_batch_sharded_over_four_devices():
    devices = jax.devices()
    assert len(devices) >= 4
    mesh = jax.sharding.Mesh(np.array(devices[:4]), ("particles",))
    sharding = NamedSharding(mesh, PartitionSpec("particles"))
    data = _chain4()
    kwargs = dict(vocab_size=4, seq_len=8, num_samples=32, num_steps=4, process="flow")
    plain, _ = shs.sample(jax.random.key(13), data.denoiser, **kwargs)
    sharded, info = shs.sample(jax.random.key(13), data.denoiser, sharding=sharding, **kwargs)
    assert len(sharded.sharding.device_set) == 4
    np.testing.assert_array_equal(plain, sharded)
    assert not bool(info.nonfinite)


def test_bad_inputs_raise_or_flag():
    data = _chain4()
    good = dict(vocab_size=4, seq_len=8, num_samples=4, num_steps=3)
    key = jax.random.key(14)
    with pytest.raises(ValueError, match=r"shape \(num_samples, seq_len, vocab_size\)"):
        shs.sample(key, lambda x, t: data.denoiser(x, t)[..., :3], **good)
    with pytest.raises(TypeError, match="floating"):
        shs.sample(key, lambda x, t: jnp.zeros((4, 8, 4), jnp.int32), **good)
    with pytest.raises(ValueError, match="vocab_size must be >= 2"):
        shs.sample(key, data.denoiser, **{**good, "vocab_size": 1})
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        shs.sample(key, data.denoiser, **{**good, "num_steps": 0})
    with pytest.raises(TypeError, match="num_samples must be a Python int"):
        shs.sample(key, data.denoiser, **{**good, "num_samples": 4.0})
    with pytest.raises(ValueError, match="whole vocabulary"):
        shs.sample(key, data.denoiser, blacklist=[0, 1, 2, 3], **good)
    with pytest.raises(ValueError, match=r"blacklist token ids must be in \[0, vocab_size=4\)"):
        shs.sample(key, data.denoiser, blacklist=[4], **good)
    with pytest.raises(ValueError, match="process must be one of"):
        shs.sample(key, data.denoiser, process="sde", **good)
    with pytest.raises(ValueError, match="jumps must be one of"):
        shs.sample(key, data.denoiser, jumps="poisson", **good)
    with pytest.raises(ValueError, match="allocate_phases"):
        shs.sample(key, data.denoiser, allocate_phases=True, **good)
    with pytest.raises(TypeError, match="denoiser must be callable"):
        shs.sample(key, "model", **good)
    with pytest.raises(ValueError, match="eps"):
        shs.CTMC(eps=0.0)
    # NaN logits cannot be caught eagerly: they surface as a flag
    _, info = shs.sample(key, lambda x, t: data.denoiser(x, t).at[0, 0, 0].set(jnp.nan),
                              **good)
    assert bool(info.nonfinite)
