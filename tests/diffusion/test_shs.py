"""Tests of jaxsample.diffusion.shs: data model, processes' closed forms, the sampler's laws.

Exact laws are computed in float64 NumPy by propagating every one of the K^L states; samplers run
in float32. Statistical checks use fixed seeds and a chi-square test at p = 1e-4 or a z = 5 bound
on the Monte Carlo standard error. Sampler configurations are few and shared between checks,
because each one is a compilation (dtype, jit, vmap and bad inputs are in the contract entry).
"""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _stats import chisquare_pvalue
from contract import diffusion_shs as contract_entry
from jax.sharding import NamedSharding, PartitionSpec

from jaxsample.diffusion import shs
from jaxsample.diffusion._processes import PROCESSES
from jaxsample.diffusion.shs import _sample

Z = 5.0
P_VALUE = 1e-4
# sparse 3-token chain (forbidden bigrams) and the 4-token chain of the paper notes
T3 = np.array(contract_entry.TRANSITION)
PI3 = np.array(contract_entry.INIT)
T4 = np.array([[0, 0.6, 0.4, 0], [0, 0, 0.5, 0.5], [0.5, 0, 0, 0.5], [0.7, 0.3, 0, 0]])
INV_GOLDEN = (np.sqrt(5) - 1) / 2


def _chain3(dtype=jnp.float32):
    return shs.MarkovChainData(jnp.asarray(PI3, dtype), jnp.asarray(T3, dtype))


def _chain4(dtype=jnp.float32):
    return shs.MarkovChainData(jnp.full(4, 0.25, dtype), jnp.asarray(T4, dtype))


def _states(k, seq_len):
    return np.array(list(itertools.product(range(k), repeat=seq_len)), dtype=np.int32)


def _codes(tokens, k):
    tokens = np.asarray(tokens)
    return tokens @ (k ** np.arange(tokens.shape[-1] - 1, -1, -1))


def _chisquare_ok(counts, probs):
    return chisquare_pvalue(counts, probs) > P_VALUE


def _channel(alpha, k):
    """Uniform channel matrix C[a, x] = q_alpha(x | a)."""
    return alpha * np.eye(k) + (1 - alpha) / k * np.ones((k, k))


def _tv_floor(probs, n, draws=200):
    """Mean and sd of the TV of an exact sample of size n (multinomial draws, fixed seed)."""
    rng = np.random.default_rng(0)
    tvs = [0.5 * np.abs(rng.multinomial(n, probs) / n - probs).sum() for _ in range(draws)]
    return float(np.mean(tvs)), float(np.std(tvs))


# -- the data model ------------------------------------------------------------------------------


def test_forward_backward_equals_brute_force(x64):
    data = _chain3(jnp.float64)
    seq_len, k = 4, 3
    states = _states(k, seq_len)
    prior = data.sequence_probs(seq_len)
    noisy = jnp.asarray(states[[0, 5, 40, 77]])
    for alpha in (0.0, 0.3, 0.9):
        out = data.denoiser(noisy, jnp.asarray(alpha, jnp.float64))
        assert out.dtype == jnp.float64 and out.shape == (4, seq_len, k)
        channel = _channel(alpha, k)
        for row, x in zip(np.asarray(out), np.asarray(noisy), strict=True):
            joint = prior * np.prod(channel[states, x[None, :]], axis=1)
            for i in range(seq_len):
                marginal = np.bincount(states[:, i], weights=joint, minlength=k)
                np.testing.assert_allclose(np.exp(row[i]), marginal / marginal.sum(), atol=1e-12)


def test_log_prob_marginals_and_samples_are_consistent(x64):
    data = _chain3(jnp.float64)
    seq_len = 4
    probs = data.sequence_probs(seq_len)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)
    states = _states(3, seq_len)

    @jax.jit  # one compilation: eager op-by-op dispatch would dominate the test time
    def compute(data, key):
        x = data.sample(key, 50_000, seq_len)
        return data.marginals(seq_len), x, data.log_prob(x)

    marginals, x, log_prob = compute(data, jax.random.key(0))
    for i, marginal in enumerate(np.asarray(marginals)):
        np.testing.assert_allclose(marginal, np.bincount(states[:, i], probs, 3), atol=1e-12)
    assert x.dtype == jnp.int32 and x.shape == (50_000, seq_len)
    assert _chisquare_ok(np.bincount(_codes(x, 3), minlength=probs.size), probs)
    assert data.invalid_bigram_rate(x) == 0.0
    assert np.all(np.isfinite(np.asarray(log_prob)))


def test_markov_chain_validation():
    with pytest.raises(ValueError, match="square"):
        shs.MarkovChainData(np.full(3, 1 / 3), np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="sum to 1"):
        shs.MarkovChainData(np.full(2, 0.5), np.array([[0.5, 0.6], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="nonnegative"):
        shs.MarkovChainData(np.array([1.5, -0.5]), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="finite"):
        shs.MarkovChainData(np.array([np.nan, 0.5]), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match=r"init_probs must have shape \(2\)"):
        shs.MarkovChainData(np.full(3, 1 / 3), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="K >= 2"):
        shs.MarkovChainData(np.ones(1), np.ones((1, 1)))
    with pytest.raises(TypeError, match="floating"):
        shs.MarkovChainData(np.array([1, 0]), np.array([[0, 1], [1, 0]]))


# -- the processes' closed forms -----------------------------------------------------------------


def _random_posterior(seed, k):
    """Posteriors (1, K, K): position x holds token x, so every current token is covered."""
    logits = np.random.default_rng(seed).normal(size=(1, k, k)) * 2
    log_post = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    return jnp.asarray(log_post), jnp.arange(k, dtype=jnp.int32)[None, :]


def test_dtmc_step_equals_bayes_rule(x64):
    k = 3
    log_post, tokens = _random_posterior(1, k)
    post = np.exp(np.asarray(log_post[0]))
    for a, b in [(0.0, 0.25), (0.3, 0.5), (0.8, 0.95)]:
        # one jitted call, shared by the three (a, b) pairs (traced) and the plug-in test
        weights = np.asarray(_jump_weights(shs.DTMC(), log_post, tokens, jnp.float64(a),
                                           jnp.float64(b)))
        # q(x_s = y | x_t = x, x0 = a) = C_{t|s}[y, x] C_s[a, y] / C_t[a, x]
        c_ts, c_s, c_t = _channel(a / b, k), _channel(b, k), _channel(a, k)
        for x in range(k):
            bayes = c_ts[:, x][None, :] * c_s / c_t[:, x][:, None]  # [a, y]
            np.testing.assert_allclose(bayes.sum(axis=1), 1.0, rtol=1e-12)
            step = post[x] @ bayes
            expected = np.where(np.arange(k) == x, 0.0, step)
            np.testing.assert_allclose(weights[0, x], expected, rtol=1e-10, atol=1e-15)
            np.testing.assert_allclose(expected.sum(), 1 - step[x], rtol=1e-10)


def test_dtmc_plugin_kernel_is_udlm_formula(x64):
    """kernel="plugin": UDLM's q(x_s | x_t, x̂) with the model's probability vector x̂ in place
    of a one-hot x0, written term by term as in UDLM's code: a probability vector over x_s whose
    off-diagonal part is the jump weights. On one-hot posteriors it equals the posterior-averaged
    kernel (both are then the exact reverse step); where the model is confident in the current
    token its jump mass is two orders of magnitude smaller at K = 1000."""
    k = 3
    log_post, tokens = _random_posterior(3, k)
    post = np.exp(np.asarray(log_post[0]))
    plugin, averaged = shs.DTMC(kernel="plugin"), shs.DTMC()
    for a, b in [(0.0, 0.25), (0.3, 0.5), (0.8, 1.0)]:
        weights = np.asarray(_jump_weights(plugin, log_post, tokens, jnp.float64(a),
                                           jnp.float64(b)))
        for x in range(k):
            current = np.eye(k)[x]
            udlm = ((a * k * post[x] * current + (a / b - a) * current + (b - a) * post[x]
                     + (1 - a / b) * (1 - b) / k) / (a * k * post[x, x] + 1 - a))
            np.testing.assert_allclose(udlm.sum(), 1.0, rtol=1e-12)
            np.testing.assert_allclose(weights[0, x], np.where(current > 0, 0.0, udlm),
                                       rtol=1e-10, atol=1e-15)
        for shift in (0, 1):  # position x certain of token x, then of token x + 1
            one_hot = jnp.log(jnp.roll(jnp.eye(k), shift, axis=-1))[None]
            np.testing.assert_allclose(
                *(_jump_weights(kernel, one_hot, tokens, jnp.float64(a), jnp.float64(b))
                  for kernel in (plugin, averaged)), rtol=1e-10, atol=1e-15)
    k = 1000
    confident = np.full(k, 0.1 / (k - 1))
    confident[0] = 0.9
    log_post = jnp.log(jnp.asarray(confident))[None, None]
    mass = [float(_jump_weights(kernel, log_post, jnp.zeros((1, 1), jnp.int32),
                                jnp.float64(0.5), jnp.float64(0.51)).sum())
            for kernel in (averaged, plugin)]
    assert mass[0] > 100 * mass[1], mass


def test_ctmc_and_flow_rates_equal_their_definitions(x64):
    k, d_alpha = 3, 0.01
    log_post, tokens = _random_posterior(2, k)
    post = np.exp(np.asarray(log_post[0]))
    for alpha in (1e-3, 0.4, 0.97):
        signal, nxt = jnp.float64(alpha), jnp.float64(alpha + d_alpha)
        ctmc = np.exp(np.asarray(shs.CTMC().log_jump_weights(log_post, tokens, signal, nxt)[0]))
        flow = np.exp(np.asarray(shs.Flow().log_jump_weights(log_post, tokens, signal, nxt)[0]))
        c = _channel(alpha, k)
        for x in range(k):
            # SEDD concrete score: p_t(x^{i<-y}) / p_t(x) = sum_a p(a) q(y | a) / q(x | a)
            rate = (1 / alpha) / k * (post[x] @ (c / c[:, x][:, None]))
            off = np.arange(k) != x
            np.testing.assert_allclose(ctmc[x][off], rate[off] * d_alpha, rtol=1e-10)
            np.testing.assert_allclose(flow[x][off], post[x][off] / (1 - alpha) * d_alpha,
                                       rtol=1e-10)
            assert ctmc[x][x] == 0 and flow[x][x] == 0


def test_generators_reproduce_the_uniform_path_marginals(x64):
    """Kolmogorov forward equation on all K^L states: sum of flows = d p_alpha / d alpha."""
    data, k, seq_len, alpha = _chain3(jnp.float64), 3, 2, 0.37
    states = _states(k, seq_len)
    prior = data.sequence_probs(seq_len)

    def path(a):
        return np.prod(_channel(a, k)[states[:, None, :], states[None, :, :]], axis=2).T @ prior

    p = path(alpha)
    h = 1e-6
    dp = (path(alpha + h) - path(alpha - h)) / (2 * h)
    log_post = data.denoiser(jnp.asarray(states), jnp.float64(alpha))
    for process in (shs.CTMC(), shs.Flow()):
        rates = np.exp(np.asarray(process.log_jump_weights(
            log_post, jnp.asarray(states), jnp.float64(alpha), jnp.float64(alpha + 1.0))))
        flux = np.zeros_like(p)
        for s, x in enumerate(states):
            for i in range(seq_len):
                for y in range(k):
                    if y != x[i]:
                        target = x.copy()
                        target[i] = y
                        t = int(_codes(target, k))
                        flux[t] += p[s] * rates[s, i, y]
                        flux[s] -= p[s] * rates[s, i, y]
        np.testing.assert_allclose(flux, dp, atol=1e-7)


def test_dtmc_step_maps_path_marginal_to_path_marginal(x64):
    """For one position (L = 1) the ancestral step is exact: p_alpha_t -> p_alpha_s. Position x
    of the (1, K) batch holds token x with its exact posterior π0(a) q_a(x | a) / Σ."""
    k, a, b = 3, 0.2, 0.55
    posterior = PI3[:, None] * _channel(a, k)  # [a, x]
    log_post = jnp.asarray(np.log(posterior / posterior.sum(axis=0)).T[None])
    tokens = jnp.arange(k, dtype=jnp.int32)[None, :]
    w = np.exp(np.asarray(shs.DTMC().log_jump_weights(
        log_post, tokens, jnp.float64(a), jnp.float64(b))[0]))
    step = w + np.diag(1 - w.sum(axis=1))
    np.testing.assert_allclose(step.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(PI3 @ _channel(a, k) @ step, PI3 @ _channel(b, k), atol=1e-12)


def test_signal_grids_and_min_signal():
    np.testing.assert_allclose(shs.DTMC().signal_grid(4, jnp.float32), [0, 0.25, 0.5, 0.75, 1])
    grid = shs.CTMC(min_signal=0.2).signal_grid(4, jnp.float32)
    np.testing.assert_allclose(grid, [0.2, 0.4, 0.6, 0.8, 1.0], rtol=1e-6)
    assert shs.CTMC().min_signal.dtype == np.float64 and float(shs.CTMC().min_signal) == 1e-3
    for bad in (0.0, 1.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="min_signal"):
            shs.CTMC(min_signal=bad)
    # a traced value is accepted unchecked and stays a leaf
    grids = jax.vmap(lambda m: shs.CTMC(min_signal=m).signal_grid(2, jnp.float32))(
        jnp.asarray([0.1, 0.5]))
    np.testing.assert_allclose(grids, [[0.1, 0.55, 1.0], [0.5, 0.75, 1.0]], rtol=1e-6)


# -- exact laws of the sampler (NumPy, every state) ----------------------------------------------


def _weyl_kernel(probs, dest, stay, states):
    """Transition matrix (S, S) of one Weyl step: position i of state s jumps iff
    frac(V + i/φ) < p_si, V ~ U[0, 1); the jump pattern is constant between the breakpoints
    {−i/φ, p_si − i/φ} mod 1, so the kernel is a finite sum over intervals of V."""
    num_states, seq_len = probs.shape
    offsets = np.mod(np.arange(seq_len) * INV_GOLDEN, 1.0)
    cuts = np.sort(np.concatenate([np.zeros((num_states, 1)), np.ones((num_states, 1)),
                                   np.broadcast_to(np.mod(-offsets, 1.0), probs.shape),
                                   np.mod(probs - offsets, 1.0)], axis=1), axis=1)
    lengths, mids = np.diff(cuts, axis=1), (cuts[:, :-1] + cuts[:, 1:]) / 2  # (S, M)
    jumps = np.mod(mids[..., None] + offsets, 1.0) < probs[:, None, :]  # (S, M, L)
    per_position = np.where(jumps[..., None], dest[:, None], stay[:, None])  # (S, M, L, K)
    target = np.prod([per_position[:, :, i][..., states[:, i]] for i in range(seq_len)], axis=0)
    return np.einsum("sm,smt->st", lengths, target)


@jax.jit
def _jump_weights(process, log_post, tokens, signal, next_signal):
    return jnp.exp(process.log_jump_weights(log_post, tokens, signal, next_signal))


def _step_weights(data, process, tokens, signal, next_signal):
    """Log posterior and the jump weights of one step, for all states (the denoiser compiles
    once for every process, the weights once per process)."""
    log_post = data.denoiser(tokens, signal)
    return log_post, _jump_weights(process, log_post, tokens, signal, next_signal)


def _exact_law(data, process, seq_len, num_steps, rule, convention="clipped",
               last_step="denoise"):
    """Law of ``shs.sample`` over all K^L sequences (float64) for the two rules whose decision at
    a step depends on that step's probabilities only, "bernoulli" and "weyl", under the
    ``jump_probability`` ``convention`` and ``last_step``."""
    k = data.vocab_size
    states = _states(k, seq_len)
    tokens = jnp.asarray(states)
    grid = np.asarray(process.signal_grid(num_steps, jnp.float64))
    law = np.full(len(states), 1.0 / len(states))
    stay = (states[..., None] == np.arange(k)).astype(float)

    def product(per_position):  # (S, L, K) -> (S, S): independent positions
        return np.prod([per_position[:, i][:, states[:, i]] for i in range(seq_len)], axis=0)

    for step in range(num_steps):
        log_post, w = (np.asarray(a, np.float64) for a in _step_weights(
            data, process, tokens, grid[step], grid[step + 1]))
        if step == num_steps - 1 and last_step == "denoise":  # a draw at every position
            return law @ product(np.exp(log_post))
        mass = w.sum(axis=-1)
        dest = np.divide(w, mass[..., None], out=np.zeros_like(w), where=mass[..., None] > 0)
        prob = (np.asarray(process.jump_probability(jnp.asarray(mass)))
                if convention == "exponential" else np.minimum(mass, 1))
        if rule == "weyl":
            kernel = _weyl_kernel(prob, dest, stay, states)
        else:
            kernel = product(prob[..., None] * dest + (1 - prob[..., None]) * stay)
        law = law @ kernel
    return law


def test_exact_laws_of_bernoulli_and_weyl_converge_to_the_data(x64):
    """Exact sequence-level TV (no sampling error) falls towards 0 with NFE for both consistent
    rules and every process; the Weyl coupling changes the law at small NFE, not the limit.
    Both are first-order schemes (TV ∝ 1/NFE would give a ratio 1/16 from NFE 4 to 64); the
    bound asks for less than 0.15."""
    data, seq_len = _chain3(jnp.float64), 3
    probs = data.sequence_probs(seq_len)
    for name in ("dtmc", "ctmc", "flow"):
        process = PROCESSES[name]()
        for rule in ("bernoulli", "weyl"):
            tvs = [0.5 * np.abs(_exact_law(data, process, seq_len, n, rule) - probs).sum()
                   for n in (4, 16, 64)]
            assert tvs[0] > tvs[1] > tvs[2], (name, rule, tvs)
            assert tvs[2] < 0.15 * tvs[0], (name, rule, tvs)


def test_weyl_sampler_sharded_over_four_devices_matches_its_exact_law():
    """Flow, L = 3, NFE 4, the batch sharded over four devices: the output stays sharded and its
    law equals the exact one; the chi-square tells the rules apart (the same sample is rejected
    against the Bernoulli rule's exact law)."""
    devices = jax.devices()
    assert len(devices) >= 4
    mesh = jax.sharding.Mesh(np.array(devices[:4]), ("particles",))
    sharding = NamedSharding(mesh, PartitionSpec("particles"))
    seq_len, num_steps, n = 3, 4, 30_000
    x, info = shs.sample(jax.random.key(3), _chain3().denoiser, vocab_size=3, seq_len=seq_len,
                         num_samples=n, num_steps=num_steps, process="flow", jumps="weyl",
                         sharding=sharding)
    assert len(x.sharding.device_set) == 4
    assert not bool(info.nonfinite)
    np.testing.assert_array_equal(info.crossings, info.jumps)
    counts = np.bincount(_codes(x, 3), minlength=27)
    with jax.enable_x64(True):
        data = _chain3(jnp.float64)
        weyl, bernoulli = (_exact_law(data, shs.Flow(), seq_len, num_steps, rule)
                           for rule in ("weyl", "bernoulli"))
    assert _chisquare_ok(counts, weyl)
    assert chisquare_pvalue(counts, bernoulli) < P_VALUE


def _poisson_binomial(probs):
    """Law of a sum of independent Bernoulli(p_k) counts, ``(len(probs) + 1,)``."""
    law = np.ones(1)
    for p in probs:
        law = np.convolve(law, [1 - p, p])
    return law


def _uninformed(tokens, signal):
    """A model that knows nothing: uniform clean-token posterior over K = 4 tokens."""
    return jnp.zeros((*tokens.shape, 4), jnp.float32)


def test_bernoulli_jump_counts_follow_their_poisson_binomial_law():
    """An uninformed model makes the CTMC's jump masses a fixed path Δ_k (the first ones ≫ 1), so
    each position's Bernoulli jump count is Poisson-binomial with p_k = min(Δ_k, 1) ("clipped",
    the stratified rule's per-step probability and the default) or 1 − e^{−Δ_k}
    ("exponential"), over the N − 1 stay-vs-replace steps, or over all N with last_step="jump".
    Chi-square of the 32 000 counts of each setting against its own law at p = 1e-4; the clipped
    sample is rejected against the exponential law, so the test tells the conventions apart.
    The three settings are traced: one compilation."""
    k, seq_len, n, num_steps = 4, 8, 4000, 8
    process = shs.CTMC()
    with jax.enable_x64(True):
        grid = np.asarray(process.signal_grid(num_steps, jnp.float64))
        log_post = jnp.full((1, 1, k), -np.log(k))
        mass = np.array([float(_jump_weights(process, log_post, jnp.zeros((1, 1), jnp.int32),
                                             grid[i], grid[i + 1]).sum())
                         for i in range(num_steps)])
    assert mass[0] > 1 > mass[-2]  # the clipping matters at the start, not later
    laws = {
        ("clipped", "denoise"): _poisson_binomial(np.minimum(mass[:-1], 1)),
        ("exponential", "denoise"): _poisson_binomial(-np.expm1(-mass[:-1])),
        ("clipped", "jump"): _poisson_binomial(np.minimum(mass, 1)),
    }
    compiled = []
    for (convention, last_step), law in laws.items():
        _, info = shs.sample(jax.random.key(21), _uninformed, vocab_size=k, seq_len=seq_len,
                             num_samples=n, num_steps=num_steps, process=process,
                             jumps="bernoulli", jump_probability=convention, last_step=last_step)
        compiled.append(_sample._cached._cache_size())
        counts = np.bincount(np.asarray(info.jumps).ravel(), minlength=num_steps + 1)
        assert _chisquare_ok(counts[:law.size], law), (convention, last_step, counts, law * n)
        if (convention, last_step) == ("clipped", "denoise"):
            assert chisquare_pvalue(counts[:law.size],
                                    laws["exponential", "denoise"]) < P_VALUE
    assert compiled[0] == compiled[1] == compiled[2], "jump_probability or last_step recompiled"


def test_last_step_jump_keeps_the_law_of_the_denoise_draw_for_dtmc_and_flow(x64):
    """Exact laws (every state, float64), Bernoulli coins, K = 3, L = 3, NFE 4: the DTMC's step
    to α = 1 and the flow's Euler step to κ = 1 jump with probability 1 − p(x) to y ∝ p(y), so
    with the clipped coin last_step="jump" has exactly the law of the denoise draw; the CTMC's
    last Euler step does not, and its law differs."""
    data, seq_len = _chain3(jnp.float64), 3
    for name in ("dtmc", "flow", "ctmc"):
        process = PROCESSES[name]()
        denoise, jump = (_exact_law(data, process, seq_len, 4, "bernoulli", last_step=last)
                         for last in ("denoise", "jump"))
        np.testing.assert_allclose(jump.sum(), 1.0, rtol=1e-12)
        if name == "ctmc":
            assert 0.5 * np.abs(jump - denoise).sum() > 1e-3
        else:
            np.testing.assert_allclose(jump, denoise, rtol=1e-9, atol=1e-15)


# -- windowed Weyl: consistent; traced settings ---------------------------------------------------


def test_weyl_window_converges_and_traced_settings_share_one_compilation():
    """The contract entry's configuration: CTMC, K = 3, L = 4 (81 sequences), 8 000 samples.
    Budget: the TV of an exact sample of the same size (mean + 5 sd over 200 multinomial draws).
    At NFE 128 the windowed rule is within it (consistency); at NFE 4 it is not (the check can
    fail; SHS's single phase stays far above it at any NFE, see the bench). NFE, window length
    and the CTMC's min_signal are traced: none of them compiles again."""
    data = contract_entry.chain()
    config = dict(contract_entry.CONFIG)
    seq_len, n = config["seq_len"], config["num_samples"]
    floor_mean, floor_sd = _tv_floor(data.sequence_probs(seq_len), n)
    tv, compiled = {}, []
    for num_steps in (4, 128):
        config["num_steps"] = num_steps
        x, info = shs.sample(jax.random.key(7), data.denoiser, process=shs.CTMC(), **config)
        assert not bool(info.nonfinite)
        tv[num_steps] = data.sequence_tv(x)
        compiled.append(_sample._cached._cache_size())
    shs.sample(jax.random.key(8), data.denoiser, window_length=2,
               process=shs.CTMC(min_signal=0.01), **config)
    compiled.append(_sample._cached._cache_size())
    assert compiled[0] == compiled[1] == compiled[2], "NFE, window or min_signal recompiled"
    assert tv[128] <= floor_mean + Z * floor_sd, (tv, floor_mean, floor_sd)
    assert tv[4] > floor_mean + Z * floor_sd, (tv, floor_mean, floor_sd)


# -- blacklist -----------------------------------------------------------------------------------


def test_blacklist_never_generated_and_shs_waiting_time_law():
    """Flow, NFE 3, K = 4, token 2 banned, L = 3, SHS. A position holding the banned token has
    Δ = 1/3, then 1/2 (p(banned) = 0), so SHS keeps it to the end with probability
    1 − Λ = 1/6 — its linear waiting-time law, the reason it is not exact in law (Bernoulli keeps
    it with e^{-Λ} = 0.43, the flow itself with exp(−∫ dκ/(1 − κ)) = 1/3):
    banned_before_denoise ~ Binomial(3, 1/4 · 1/6). Handing those positions the largest phases
    (allocate_phases, a traced switch: same compilation) leaves fewer."""
    data, n = _chain4(), 30_000
    left, compiled = {}, []
    for allocate in (False, True):
        with pytest.warns(RuntimeWarning, match="mode-seeking") as caught:
            x, info = shs.sample(jax.random.key(9), data.denoiser, vocab_size=4, seq_len=3,
                                 num_samples=n, num_steps=3, process="flow", jumps="stratified",
                                 blacklist=[2], allocate_phases=allocate)
        assert len(caught) == 1 and bool(info.mode_seeking)
        assert not np.any(np.asarray(x) == 2) and not bool(info.nonfinite)
        left[allocate] = np.asarray(info.banned_before_denoise, float)
        compiled.append(_sample._cached._cache_size())
    assert compiled[0] == compiled[1]
    p = 0.25 / 6
    assert abs(left[False].mean() - 3 * p) <= Z * np.sqrt(3 * p * (1 - p) / n)
    se = np.sqrt((left[False].var() + left[True].var()) / n)
    assert left[True].mean() < left[False].mean() - Z * se


# -- non-finite models ---------------------------------------------------------------------------


def test_nonfinite_model_raises_the_flag():
    """The contract entry's configuration with a model that returns NaN (same structure, so the
    same compilation) under jit: the flag is set; the intact model leaves it clear. Eagerly the
    broken model is refused at its first call."""
    data = contract_entry.chain()
    config = dict(process=shs.CTMC(), **contract_entry.CONFIG)
    run = eqx.filter_jit(lambda key, model: shs.sample(key, model.denoiser, **config))
    _, info = run(jax.random.key(13), data)
    assert not bool(info.nonfinite)
    broken = eqx.tree_at(lambda d: d.log_transition, data,
                         data.log_transition.at[0, 1].set(jnp.nan))
    _, info = run(jax.random.key(13), broken)
    assert bool(info.nonfinite)
    with pytest.raises(ValueError, match="denoiser returned NaN"):
        shs.sample(jax.random.key(13), broken.denoiser, **config)


# -- the default jump rule and the stratified rule's warning ---------------------------------------


def test_default_rule_is_bernoulli_and_stratified_warns_only_when_eager():
    """The default (``jumps="bernoulli"``) draws exactly what an explicit ``jumps="bernoulli"``
    draws and says nothing; ``"stratified"`` warns once when called eagerly (naming the
    converging rule), never under ``jit``, and its Info says ``mode_seeking`` either way."""
    import warnings

    data = _chain3()
    config = dict(vocab_size=3, seq_len=3, num_samples=64, num_steps=4, process="flow")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default, info = shs.sample(jax.random.key(2), data.denoiser, **config)
        explicit, _ = shs.sample(jax.random.key(2), data.denoiser, jumps="bernoulli", **config)
    np.testing.assert_array_equal(default, explicit)
    assert not bool(info.mode_seeking)
    with pytest.warns(RuntimeWarning, match="biased and mode-seeking") as caught:
        _, info = shs.sample(jax.random.key(2), data.denoiser, jumps="stratified", **config)
    assert len(caught) == 1 and "jumps='bernoulli'" in str(caught[0].message)
    assert bool(info.mode_seeking)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = jax.jit(lambda key: shs.sample(key, data.denoiser, jumps="stratified",
                                              **config)[1])(jax.random.key(2))
    assert bool(info.mode_seeking)


# -- clamp (prefix / infill) -----------------------------------------------------------------------

CLAMP_MASK = np.array([True, False, True, False])
CLAMP_TOKENS = np.array([1, 0, 0, 2])      # the last entry is free: ignored
CLAMP_PI = np.array([0.3, 0.45, 0.25])
CLAMP_T = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.25, 0.35, 0.4]])


def _free_law(probs, seqs, mask, tokens):
    """The exact conditional law of the free positions given the clamped tokens (enumeration),
    on the base-K codes of the free positions."""
    k = int(seqs.max()) + 1
    keep = np.all(seqs[:, mask] == tokens[mask], axis=1)
    law = np.zeros(k ** int((~mask).sum()))
    np.add.at(law, _codes(seqs[keep][:, ~mask], k), probs[keep])
    return law / law.sum()


@pytest.mark.parametrize("law", ["product", "chain"])
def test_clamp_keeps_clamped_tokens_and_gives_the_exact_conditional(law):
    """K = 3, L = 4, positions 0 and 2 clamped, defaults (CTMC, Bernoulli), NFE 64, 8 000
    samples. Product law (every row of T the marginal): the free positions' joint law is the
    product law's, whatever the denoiser makes of the clamps. Chain: with the denoiser that reads
    the clamps as clean, the free positions follow the exact conditional p(x_1, x_3 | x_0 = 1,
    x_2 = 0) by enumeration. Chi-square over the 9 free cells at p = 1e-4. Clamped positions
    hold their tokens and never jump."""
    transition = np.tile(CLAMP_PI, (3, 1)) if law == "product" else CLAMP_T
    data = shs.MarkovChainData(jnp.asarray(CLAMP_PI, jnp.float32),
                               jnp.asarray(transition, jnp.float32))
    denoiser = data.denoiser if law == "product" else data.clamped_denoiser(CLAMP_MASK)
    n = 8_000
    x, info = shs.sample(jax.random.key(31), denoiser, vocab_size=3, seq_len=4, num_samples=n,
                         num_steps=64, clamp=(CLAMP_MASK, CLAMP_TOKENS))
    x = np.asarray(x)
    assert np.all(x[:, CLAMP_MASK] == CLAMP_TOKENS[CLAMP_MASK]) and not bool(info.nonfinite)
    assert np.all(np.asarray(info.jumps)[:, CLAMP_MASK] == 0)
    with jax.enable_x64(True):
        probs = shs.MarkovChainData(CLAMP_PI, transition).sequence_probs(4)
    expected = _free_law(probs, _states(3, 4), CLAMP_MASK, CLAMP_TOKENS)
    counts = np.bincount(_codes(x[:, ~CLAMP_MASK], 3), minlength=expected.size)
    assert _chisquare_ok(counts, expected), (counts / n, expected)


def test_clamp_validation():
    data = _chain3()
    call = dict(vocab_size=3, seq_len=4, num_samples=2, num_steps=2)
    with pytest.raises(ValueError, match=r"clamp\[0\] \(mask\) must have shape"):
        shs.sample(jax.random.key(0), data.denoiser, clamp=(np.ones(3, bool), np.zeros(4, int)),
                   **call)
    with pytest.raises(TypeError, match=r"clamp\[0\] \(mask\) must be bool"):
        shs.sample(jax.random.key(0), data.denoiser, clamp=(np.ones(4), np.zeros(4, int)),
                   **call)
    with pytest.raises(ValueError, match=r"clamp\[1\] \(tokens\) must be token ids"):
        shs.sample(jax.random.key(0), data.denoiser,
                   clamp=(np.ones(4, bool), np.full(4, 3)), **call)
    with pytest.raises(TypeError, match="clamp must be a pair"):
        shs.sample(jax.random.key(0), data.denoiser, clamp=np.ones(4, bool), **call)


def test_a_denoiser_returning_nan_is_refused_eagerly_and_flagged_under_jit():
    """The first call's logits are checked when the call is eager (-inf is a forbidden token,
    NaN is a broken model); under jit the same model only raises info.nonfinite."""
    def broken(tokens, signal):
        logits = jnp.zeros((*tokens.shape, 3))
        return logits.at[..., 0].set(jnp.nan)

    def forbids_one(tokens, signal):
        return jnp.zeros((*tokens.shape, 3)).at[..., 2].set(-jnp.inf)

    kwargs = dict(vocab_size=3, seq_len=4, num_samples=2, num_steps=3)
    with pytest.raises(ValueError, match="denoiser returned NaN"):
        shs.sample(jax.random.key(0), broken, **kwargs)
    _, info = jax.jit(lambda key: shs.sample(key, broken, **kwargs))(jax.random.key(0))
    assert bool(info.nonfinite)
    tokens, info = shs.sample(jax.random.key(0), forbids_one, **kwargs)
    assert not bool(info.nonfinite) and not bool(jnp.any(tokens == 2))
