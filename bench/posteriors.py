"""Posteriors nobody here wrote, with trusted references, to judge samplers on.

Each entry of the registry is a :class:`Posterior`: a log-density over the *unconstrained* space
for one point ``(dim,)`` (jittable, float32 and float64 safe: data are cast to the point's dtype),
its start distribution, and the name of its reference file under ``bench/references/``. The
references are long NUTS runs (``python bench/bench_posteriors.py --make-references``) or, where
the moments are known in closed form (``Posterior.exact``), the formula and exact draws. A
posterior whose own parametrisation defeats NUTS takes its reference from an equivalent one
(``Posterior.reference_from``: NUTS on the other form, every draw mapped across).

Real data:

- ``eight_schools_noncentred`` (10): Rubin (1981) / Gelman et al., *BDA* §5.5, non-centred.
- ``eight_schools_centred`` (10): the same model as users write it first, centred (the funnel
  between tau and theta); reference: NUTS on the non-centred form, draws mapped to centred
  coordinates.
- ``german_credit_logistic`` (21): logistic regression on the bundled Statlog German credit data.
- ``radon_varying_intercept`` (90): Gelman & Hill (2007) §12 Minnesota radon, county intercepts
  with the county uranium predictor, non-centred (data: ``bench/references/radon.csv``).

Standard hard targets:

- ``ill_conditioned_gaussian`` (100): variances log-spaced over ``[1e-2, 1e2]``, rotated.
- ``neals_funnel`` (10): Neal (2003), centred (the hard parametrisation).
- ``banana`` (2): Haario, Saksman & Tamminen (1999), twisted Gaussian.
- ``brownian_bridge_missing`` (30): the inference-gym Brownian motion with missing middle
  observations (fixed scales: a Gaussian posterior, so exact).
- ``stochastic_volatility`` (103): the standard SV model (inference-gym priors), non-centred, on
  100 synthetic daily returns.
- ``item_response`` (501): the inference-gym synthetic item response theory model (1-PL / Rasch),
  400 students by 100 questions, half the pairs observed; its reference stores moments only (no
  draws, so no energy distance).

Example:
    >>> import jax
    >>> post = get("banana")
    >>> x = post.init_fn(jax.random.key(0), 4)
    >>> x.shape, jax.vmap(post.logdensity_fn)(x).shape
    ((4, 2), (4,))
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import cauchy, norm

from jaxsample.targets import Banana, BayesianLogisticRegression, Funnel, Gaussian

REFERENCES = Path(__file__).resolve().parent / "references"

__all__ = ["NAMES", "REFERENCES", "Posterior", "get", "item_response_data", "load_reference"]


class Posterior(NamedTuple):
    """One benchmark posterior.

    Attributes:
        name: registry key.
        dim: dimension ``d`` of the unconstrained space.
        logdensity_fn: ``log π(x)`` up to a constant for one point ``(d,)``; returns a scalar of
            the point's dtype.
        init_fn: ``(key, n) -> (n, d)`` start points for particle systems and chains (default
            float dtype).
        reference_file: file name of the reference under ``bench/references/``.
        description: the model in one paragraph: data, priors, parametrisation.
        exact: the law itself where it is known in closed form (a :mod:`jaxsample.targets`
            object with ``mean``, ``cov`` and ``sample(key, n)``); None where NUTS is the
            reference.
        reference_from: ``(name, transform)`` where the reference is NUTS on the registry's
            posterior ``name``, the same law in another parametrisation, and ``transform`` maps
            its draws ``(..., d_name)`` (NumPy, float64) to this posterior's coordinates
            ``(..., d)``; None where NUTS runs on this posterior itself.
        reference_draws: whether the reference stores thinned draws (for energy distances);
            False keeps a large-``d`` reference to its moments.
    """

    name: str
    dim: int
    logdensity_fn: Callable
    init_fn: Callable
    reference_file: str
    description: str
    exact: object | None = None
    reference_from: tuple[str, Callable] | None = None
    reference_draws: bool = True


def _density_of(target):
    """``target.logdensity`` as a plain function: hashable, so it can be a static argument of
    ``jax.jit`` (an Equinox module's bound method with array fields is not)."""

    def logdensity(x):
        return target.logdensity(x)

    return logdensity


def _standard_normal_init(dim):
    def init_fn(key, n):
        return jax.random.normal(key, (n, dim))

    return init_fn


def _half_cauchy_log_scale(log_scale, scale):
    """log density of ``log s`` when ``s ~ HalfCauchy(scale)``: the Jacobian ``+ log s`` added."""
    s = jnp.exp(log_scale)
    return math.log(2.0) + cauchy.logpdf(s, 0.0, scale) + log_scale


def _half_normal_log_scale(log_scale, scale):
    """log density of ``log s`` when ``s ~ HalfNormal(scale)`` (Jacobian included)."""
    s = jnp.exp(log_scale)
    return math.log(2.0) + norm.logpdf(s, 0.0, scale) + log_scale


# --- eight schools -----------------------------------------------------------------------------

EIGHT_SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def _eight_schools():
    def logdensity(x):
        mu, log_tau, theta_std = x[0], x[1], x[2:]
        y = jnp.asarray(EIGHT_SCHOOLS_Y, x.dtype)
        sigma = jnp.asarray(EIGHT_SCHOOLS_SIGMA, x.dtype)
        theta = mu + jnp.exp(log_tau) * theta_std
        return (norm.logpdf(mu, 0.0, 5.0) + _half_cauchy_log_scale(log_tau, 5.0)
                + jnp.sum(norm.logpdf(theta_std)) + jnp.sum(norm.logpdf(y, theta, sigma)))

    return Posterior(
        "eight_schools_noncentred", 10, logdensity, _standard_normal_init(10),
        "eight_schools_noncentred.npz",
        "Eight schools (Rubin 1981), non-centred: x = (mu, log tau, theta_std[8]); "
        "mu ~ N(0, 5^2), tau ~ HalfCauchy(5), theta_std ~ N(0, 1), "
        "y_j ~ N(mu + tau theta_std_j, sigma_j^2). Init N(0, I).")


def _eight_schools_to_centred(draws):
    """Non-centred draws ``(..., 10)`` to centred ones: ``theta = mu + tau theta_std``."""
    mu, log_tau, theta_std = draws[..., :1], draws[..., 1:2], draws[..., 2:]
    return np.concatenate([mu, log_tau, mu + np.exp(log_tau) * theta_std], axis=-1)


def _eight_schools_centred():
    def logdensity(x):
        mu, log_tau, theta = x[0], x[1], x[2:]
        y = jnp.asarray(EIGHT_SCHOOLS_Y, x.dtype)
        sigma = jnp.asarray(EIGHT_SCHOOLS_SIGMA, x.dtype)
        return (norm.logpdf(mu, 0.0, 5.0) + _half_cauchy_log_scale(log_tau, 5.0)
                + jnp.sum(norm.logpdf(theta, mu, jnp.exp(log_tau)))
                + jnp.sum(norm.logpdf(y, theta, sigma)))

    return Posterior(
        "eight_schools_centred", 10, logdensity, _standard_normal_init(10),
        "eight_schools_centred.npz",
        "Eight schools (Rubin 1981), centred: x = (mu, log tau, theta[8]); mu ~ N(0, 5^2), "
        "tau ~ HalfCauchy(5), theta_j ~ N(mu, tau^2), y_j ~ N(theta_j, sigma_j^2): a funnel "
        "between tau and theta. Reference: NUTS on eight_schools_noncentred (the same law after "
        "theta = mu + tau theta_std; NUTS on this form diverges in the neck and is biased), "
        "every draw mapped to these coordinates. Init N(0, I).",
        reference_from=("eight_schools_noncentred", _eight_schools_to_centred))


# --- German credit logistic regression ---------------------------------------------------------

def _german_credit():
    source = importlib.resources.files("jaxsample") / "data" / "german_credit.csv"
    with source.open() as f:
        data = np.asarray(list(csv.reader(f))[1:], dtype=np.float64)
    features, labels = data[:, :-1], data[:, -1]
    z = (features - features.mean(0)) / features.std(0)
    design = jnp.asarray(np.concatenate([np.ones((len(labels), 1)), z], axis=1), jnp.float32)
    labels = jnp.asarray(labels, jnp.float32)
    # all 1000 rows are the likelihood; the held-out slots are unused here
    target = BayesianLogisticRegression(design, labels, design, labels, prior_var=25.0)
    return Posterior(
        "german_credit_logistic", target.dim, _density_of(target),
        _standard_normal_init(target.dim), "german_credit_logistic.npz",
        "Logistic regression on Statlog German credit (1000 rows, 20 ordinal-encoded attributes "
        "standardised, plus an intercept: d = 21), flat prior w ~ N(0, 25 I) (sd 5), "
        "label 1 = good. Init N(0, I).")


# --- radon -------------------------------------------------------------------------------------

def _radon():
    with open(REFERENCES / "radon.csv") as f:
        rows = np.asarray(list(csv.reader(f))[1:], dtype=np.float64)
    log_radon, floor = rows[:, 0], rows[:, 1]
    county = rows[:, 2].astype(np.int32)
    num_counties = int(county.max()) + 1
    uranium = np.zeros(num_counties)
    uranium[county] = rows[:, 3]  # one value per county

    def logdensity(x):
        gamma0, gamma1, beta, log_sigma_alpha, log_sigma_y = x[0], x[1], x[2], x[3], x[4]
        eta = x[5:]
        alpha = gamma0 + gamma1 * jnp.asarray(uranium, x.dtype) + jnp.exp(log_sigma_alpha) * eta
        mean = alpha[county] + beta * jnp.asarray(floor, x.dtype)
        return (jnp.sum(norm.logpdf(x[:3], 0.0, 10.0))
                + _half_normal_log_scale(log_sigma_alpha, 1.0)
                + _half_normal_log_scale(log_sigma_y, 1.0)
                + jnp.sum(norm.logpdf(eta))
                + jnp.sum(norm.logpdf(jnp.asarray(log_radon, x.dtype), mean,
                                      jnp.exp(log_sigma_y))))

    dim = 5 + num_counties
    return Posterior(
        "radon_varying_intercept", dim, logdensity, _standard_normal_init(dim),
        "radon_varying_intercept.npz",
        "Minnesota radon (Gelman & Hill 2007; 919 homes, 85 counties): y_i ~ N(alpha_county + "
        "beta floor_i, sigma_y^2), alpha_j = gamma0 + gamma1 log_uranium_j + sigma_alpha eta_j "
        "(non-centred); x = (gamma0, gamma1, beta, log sigma_alpha, log sigma_y, eta[85]); "
        "gamma0, gamma1, beta ~ N(0, 10^2), sigma_alpha, sigma_y ~ HalfNormal(1), "
        "eta ~ N(0, 1). Init N(0, I).")


# --- ill-conditioned Gaussian ------------------------------------------------------------------

def _ill_conditioned_gaussian(dim=100, seed=0):
    variances = np.logspace(-2.0, 2.0, dim)
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
    rotation = q * np.sign(np.diag(r))  # Haar-distributed orthogonal matrix
    cov = (rotation * variances) @ rotation.T
    target = Gaussian(jnp.zeros(dim), jnp.asarray(0.5 * (cov + cov.T), jnp.float32))
    return Posterior(
        "ill_conditioned_gaussian", dim, _density_of(target), _standard_normal_init(dim),
        "ill_conditioned_gaussian.npz",
        f"N(0, Q diag(lambda) Q^T), lambda log-spaced over [1e-2, 1e2] (condition number 1e4), "
        f"Q a Haar rotation from seed {seed}. Exact. Init N(0, I).", target)


# --- Neal's funnel and the banana (jaxsample.targets, normalised, exact moments) -----------------

def _funnel():
    target = Funnel(dim=10, sigma_v=3.0)
    return Posterior(
        "neals_funnel", target.dim, _density_of(target), _standard_normal_init(target.dim),
        "neals_funnel.npz",
        "Neal's funnel, centred: v ~ N(0, 3^2), x_k | v ~ N(0, e^v), k = 1..9; sd(v) = 3, "
        "sd(x_k) = e^(9/4) (Var x_k = E e^v = e^(9/2)). Exact. Init N(0, I).", target)


def _banana():
    target = Banana(b=0.1, a=100.0, sigma1=10.0, sigma2=1.0)
    return Posterior(
        "banana", 2, _density_of(target), _standard_normal_init(2), "banana.npz",
        "Twisted Gaussian: x1 ~ N(0, 10^2), x2 | x1 ~ N(0.1 (x1^2 - 100), 1); means 0, "
        "sd = (10, sqrt(201)). Exact. Init N(0, I).", target)


# --- Brownian motion with missing middle observations ------------------------------------------

# y_t for t < 10 and t >= 20 of a 30-step random walk with innovation sd 0.1 and observation sd
# 0.15, drawn once with numpy.random.default_rng(20260) (the walk first, then the noise)
BROWNIAN_Y = np.array([
    -0.0932, -0.2133, -0.1635, -0.1033, 0.1017, -0.3425, -0.3439, -0.4043, -0.5716, -0.6072,
    -0.6119, -0.7605, -0.4517, -0.3726, -0.3178, -0.4424, -0.2283, -0.362, -0.6258, -0.1879])
BROWNIAN_OBSERVED = np.concatenate([np.arange(10), np.arange(20, 30)])


def _brownian_bridge(num_steps=30, innovation=0.1, observation=0.15):
    def logdensity(x):
        steps = jnp.concatenate([x[:1], jnp.diff(x)])
        y = jnp.asarray(BROWNIAN_Y, x.dtype)
        return (jnp.sum(norm.logpdf(steps, 0.0, innovation))
                + jnp.sum(norm.logpdf(y, x[jnp.asarray(BROWNIAN_OBSERVED, jnp.int32)],
                                      observation)))

    # Gaussian posterior: precision D^T D / s_i^2 + S^T S / s_o^2 (D the first differences,
    # S the observed rows), mean = cov S^T y / s_o^2
    diff = np.eye(num_steps) - np.eye(num_steps, k=-1)
    select = np.eye(num_steps)[BROWNIAN_OBSERVED]
    cov = np.linalg.inv(diff.T @ diff / innovation**2 + select.T @ select / observation**2)
    exact = Gaussian(jnp.asarray(cov @ select.T @ BROWNIAN_Y / observation**2, jnp.float32),
                     jnp.asarray(0.5 * (cov + cov.T), jnp.float32))

    return Posterior(
        "brownian_bridge_missing", num_steps, logdensity, _standard_normal_init(num_steps),
        "brownian_bridge_missing.npz",
        f"Brownian motion x_t = x_(t-1) + N(0, {innovation:g}^2) (x_0 ~ N(0, {innovation:g}^2)), "
        f"y_t ~ N(x_t, {observation:g}^2) observed for t < 10 and t >= 20 only (synthetic, seed "
        "20260); scales fixed, so the posterior is Gaussian: exact. Init N(0, I).", exact)


# --- stochastic volatility ---------------------------------------------------------------------

# 100 daily returns r_t = e^{h_t/2} z_t from mu = -1, phi = 0.9, sigma = 0.3, drawn once with
# numpy.random.default_rng(20261) (h_0 from the stationary law, then the walk, then z)
SV_RETURNS = np.array([
    1.694, 0.6889, 1.0313, 0.8665, 1.1054, -0.202, 0.305, -0.5231, -0.7679, 0.0047, -0.6915,
    0.0367, 0.1157, -0.3446, 0.3131, 0.4654, 0.4163, 0.1786, 0.139, 1.1111, 0.4804, 0.271, 1.2146,
    -0.1703, 1.3203, -0.3601, 0.4557, 0.0626, -0.5129, 0.4084, -0.3663, 0.0222, 0.0497, 1.6114,
    1.7175, -2.1398, 1.1424, 0.4386, -1.5377, 1.6433, -0.2508, -0.2902, 1.1189, 0.329, 0.6211,
    0.2743, 0.7475, 2.3706, 0.4883, -0.598, 0.2058, -0.4271, -0.4541, -0.1982, 0.1649, 0.2626,
    -0.5892, 0.24, 0.541, 1.3726, 0.6156, -0.4286, -0.3227, -0.1904, 0.3719, -0.6761, 0.1325,
    -0.5589, 0.265, -0.0485, 1.1944, 0.1244, 0.1983, 0.7904, 0.1493, 0.2762, -0.8551, 0.8174,
    0.687, -1.2638, 1.1029, -1.2793, 0.9593, 1.0375, -0.2101, -0.3593, -0.1713, 0.0616, -0.0216,
    0.9813, 0.6429, 0.1758, 0.0219, 0.0466, -0.1846, -0.462, -0.5618, 1.228, 0.1878, 0.7949])


def _stochastic_volatility():
    def logdensity(x):
        mu, log_sigma, phi_raw, h_std = x[0], x[1], x[2], x[3:]
        sigma = jnp.exp(log_sigma)
        phi = jnp.tanh(0.5 * phi_raw)  # (phi + 1)/2 = sigmoid(phi_raw)

        def walk(h_prev, e):
            h = mu + phi * (h_prev - mu) + sigma * e
            return h, h

        h0 = mu + sigma * h_std[0] * jnp.cosh(0.5 * phi_raw)  # sd sigma / sqrt(1 - phi^2)
        _, h_rest = jax.lax.scan(walk, h0, h_std[1:])
        h = jnp.concatenate([h0[None], h_rest])
        returns = jnp.asarray(SV_RETURNS, x.dtype)
        # (phi + 1)/2 ~ Beta(20, 1.5): with s = sigmoid(u), log p(u) = 20 log s + 1.5 log(1 - s)
        log_prior_phi = 20.0 * jax.nn.log_sigmoid(phi_raw) + 1.5 * jax.nn.log_sigmoid(-phi_raw)
        return (cauchy.logpdf(mu, 0.0, 5.0) + _half_cauchy_log_scale(log_sigma, 2.0)
                + log_prior_phi + jnp.sum(norm.logpdf(h_std))
                + jnp.sum(norm.logpdf(returns, 0.0, jnp.exp(0.5 * h))))

    dim = 3 + len(SV_RETURNS)
    return Posterior(
        "stochastic_volatility", dim, logdensity, _standard_normal_init(dim),
        "stochastic_volatility.npz",
        "Stochastic volatility, non-centred: h_0 = mu + sigma e_0 / sqrt(1 - phi^2), h_t = mu + "
        "phi (h_(t-1) - mu) + sigma e_t, r_t ~ N(0, e^(h_t)); x = (mu, log sigma, u, e[100]) "
        "with phi = tanh(u / 2); mu ~ Cauchy(0, 5), sigma ~ HalfCauchy(2), (phi + 1)/2 ~ "
        "Beta(20, 1.5) (inference-gym priors), e ~ N(0, 1); 100 synthetic returns (mu = -1, "
        "phi = 0.9, sigma = 0.3, seed 20261). Init N(0, I).")


# --- item response theory ----------------------------------------------------------------------

IRT_SEED = 20262
IRT_NUM_STUDENTS = 400
IRT_NUM_QUESTIONS = 100


def item_response_data(seed: int = IRT_SEED, num_students: int = IRT_NUM_STUDENTS,
                       num_questions: int = IRT_NUM_QUESTIONS) -> dict:
    """The synthetic responses of ``item_response``, drawn with ``numpy.random.default_rng(seed)``.

    In this order: the true abilities ``alpha ~ N(0, 1)`` (``num_students``), difficulties
    ``beta ~ N(0, 1)`` (``num_questions``) and mean ``delta ~ N(0.75, 1)`` (``standard_normal``
    draws), then which pairs are observed (each with probability 1/2: ``random() < 0.5``, row-major
    over students × questions) and the responses of all pairs (``random() < sigmoid(alpha_s -
    beta_q + delta)``), of which the observed ones are kept. Only PCG64's ``standard_normal`` and
    ``random`` streams are used: they have not changed since NumPy 1.17 (NEP 19 does not promise
    it; ``tests/particles/test_posteriors.py`` pins counts of the data, so a change would fail
    loudly).

    Returns:
        ``student`` and ``question`` (int32 indices of the observed pairs, ``(m,)``),
        ``correct`` (0/1 float64, ``(m,)``), and the true ``alpha``, ``beta``, ``delta``.
    """
    rng = np.random.default_rng(seed)
    alpha = rng.standard_normal(num_students)
    beta = rng.standard_normal(num_questions)
    delta = 0.75 + rng.standard_normal()
    observed = rng.random((num_students, num_questions)) < 0.5
    logits = alpha[:, None] - beta[None, :] + delta
    correct = rng.random((num_students, num_questions)) < 1.0 / (1.0 + np.exp(-logits))
    student, question = np.nonzero(observed)
    return dict(student=student.astype(np.int32), question=question.astype(np.int32),
                correct=correct[student, question].astype(np.float64), alpha=alpha, beta=beta,
                delta=delta)


def _item_response():
    data = item_response_data()
    num_students, num_questions = IRT_NUM_STUDENTS, IRT_NUM_QUESTIONS
    student, question = data["student"], data["question"]
    sign = 2.0 * data["correct"] - 1.0  # +1 correct, -1 wrong

    def logdensity(x):
        delta, alpha, beta = x[0], x[1:1 + num_students], x[1 + num_students:]
        logits = alpha[student] - beta[question] + delta
        # log P(y | logit) = log sigmoid(±logit): stable for large |logit|
        return (norm.logpdf(delta, 0.75, 1.0) + jnp.sum(norm.logpdf(alpha))
                + jnp.sum(norm.logpdf(beta))
                + jnp.sum(jax.nn.log_sigmoid(jnp.asarray(sign, x.dtype) * logits)))

    dim = 1 + num_students + num_questions
    return Posterior(
        "item_response", dim, logdensity, _standard_normal_init(dim), "item_response.npz",
        f"Item response theory, 1-PL (Rasch; the inference-gym synthetic IRT model): "
        f"P(correct_sq) = sigmoid(alpha_s - beta_q + delta); x = (delta, alpha[{num_students}], "
        f"beta[{num_questions}]); delta ~ N(0.75, 1), alpha, beta ~ N(0, 1); "
        f"{len(data['correct'])} of the {num_students * num_questions} student-question pairs "
        f"observed (each with probability 1/2), responses synthetic from prior draws (seed "
        f"{IRT_SEED}). Reference: moments only (no draws). Init N(0, I).",
        reference_draws=False)


_BUILDERS = {
    "eight_schools_noncentred": _eight_schools,
    "eight_schools_centred": _eight_schools_centred,
    "german_credit_logistic": _german_credit,
    "radon_varying_intercept": _radon,
    "ill_conditioned_gaussian": _ill_conditioned_gaussian,
    "neals_funnel": _funnel,
    "banana": _banana,
    "brownian_bridge_missing": _brownian_bridge,
    "stochastic_volatility": _stochastic_volatility,
    "item_response": _item_response,
}
NAMES = tuple(_BUILDERS)


@functools.cache
def get(name: str) -> Posterior:
    """The posterior called ``name`` (one of :data:`NAMES`), built once and cached."""
    if name not in _BUILDERS:
        raise ValueError(f"name must be one of {NAMES}, got {name!r}")
    return _BUILDERS[name]()


def load_reference(posterior: Posterior) -> dict:
    """The reference of ``posterior`` as a dict of NumPy arrays (``mean``, ``sd``, ``mean_se``,
    ``sd_se``, ``draws``, …; see ``bench_posteriors.make_reference``).

    ``draws`` is absent where ``posterior.reference_draws`` is False (moments only); a
    reference taken from another parametrisation (``posterior.reference_from``) names it in
    ``reference_from``.

    Raises:
        FileNotFoundError: the reference has not been made (run ``python
            bench/bench_posteriors.py --make-references --only NAME``).
    """
    path = REFERENCES / posterior.reference_file
    if not path.exists():
        raise FileNotFoundError(f"no reference for {posterior.name} at {path}: run python "
                                f"bench/bench_posteriors.py --make-references --only "
                                f"{posterior.name}")
    with np.load(path) as data:
        return {key: data[key] for key in data.files}
