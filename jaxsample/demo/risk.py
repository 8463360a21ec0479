"""Demo section: repeated-sampling risk — SABER's ASR@N forecast and Best-of-N regimes.

Left: one synthetic "model" of 300 prompts with success probabilities ``θ_i ~ Beta(0.2, 8)``,
200 attempts each. SABER fits the beta-binomial law to the counts and forecasts the attack success
rate within N attempts (anchored: the observed 200 count among the N) against the truth
``mean_i[1 − (1 − θ_i)^N]`` and the plug-in ``θ̂ = c/n``, which calls every unbroken prompt safe.
Right: exact Best-of-N accuracy against N (``p = 0.3`` correct) for the three tail regimes of the
reward model, including one where accuracy peaks and then falls.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxsample.demo import Section, SectionReport

_NS = np.array([200, 500, 1000, 2000, 5000, 10000])
_BON_NS = np.unique(np.round(np.logspace(0, 5, 26)))
_REGIMES = (
    ("correct-dominant: N(1, 1.2²) vs N(0, 1)", (1.0, 1.2), (0.0, 1.0)),
    ("critical: N(1, 1) vs N(0, 1)", (1.0, 1.0), (0.0, 1.0)),
    ("incorrect-dominant: N(1, 1) vs N(0, 1.5²)", (1.0, 1.0), (0.0, 1.5)),
)


def _figure(path, truth, saber, plug, bon):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6))
    left.plot(_NS, truth, "k-", label="truth (these prompts)")
    left.plot(_NS, saber, "o--", label="SABER anchored (from 200)")
    left.plot(_NS, plug, "s:", label="plug-in θ̂ = c/n")
    left.axvline(200, color="grey", linewidth=0.8, linestyle=":",
                 label="observed: 200 attempts per prompt")
    left.set_xscale("log")
    left.set_xlabel("attempts per prompt N")
    left.set_ylabel("ASR@N")
    left.set_title("attack success at N, forecast from 200 attempts", fontsize=9)
    left.legend(fontsize=7)
    for (name, _, _), acc in zip(_REGIMES, bon, strict=True):
        right.plot(_BON_NS, acc, label=name)
    right.set_xscale("log")
    right.set_xlabel("N (Best-of-N)")
    right.set_ylabel("accuracy")
    right.set_title("exact Best-of-N accuracy, p = 0.3", fontsize=9)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _run(key: jax.Array, outdir: Path) -> SectionReport:
    from jaxsample import risk

    rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 2**31 - 1)))
    trials = 200
    with jax.enable_x64(True):
        theta = rng.beta(0.2, 8.0, 300)
        successes = rng.binomial(trials, theta).astype(np.float64)
        fit, _ = risk.fit_beta_binomial(successes, float(trials))
        saber, _ = risk.asr_anchored(jnp.asarray(_NS, jnp.float64), successes, float(trials),
                                     fit.alpha, fit.beta, fit.pi0)
        saber = np.asarray(saber)
        bon = []
        for _, (mc, sc), (mw, sw) in _REGIMES:
            acc, _ = risk.bon_accuracy(_BON_NS, 0.3, risk.Normal(mc, sc), risk.Normal(mw, sw))
            bon.append(np.asarray(acc))
    truth = np.mean(-np.expm1(_NS[:, None] * np.log1p(-theta[None, :])), axis=1)
    plug = np.mean(-np.expm1(_NS[:, None] * np.log1p(-successes[None, :] / trials)), axis=1)
    path = _figure(Path(outdir) / "risk_asr_bon.png", truth, saber, plug, bon)

    rows = [[f"ASR@{n}", t, s, p] for n, t, s, p in zip(_NS, truth, saber, plug, strict=True)
            if n in (200, 1000, 10000)]
    bon_rows = []
    for (name, _, _), acc in zip(_REGIMES, bon, strict=True):
        peak = int(np.argmax(acc))
        bon_rows.append([name, float(acc[0]), float(acc[peak]), int(_BON_NS[peak]),
                         float(acc[-1])])
    note = (f"SABER fit α={float(fit.alpha):.3f}, β={float(fit.beta):.2f} (truth 0.2, 8) from "
            f"300 prompts × {trials} attempts; anchored MAE over N ≤ 10⁴: "
            f"{100 * np.mean(np.abs(saber - truth)):.2f} pp vs plug-in "
            f"{100 * np.mean(np.abs(plug - truth)):.2f} pp. BoN accuracy by quadrature "
            "(exact for any N): the heavier-tailed class wins as N grows.")
    return SectionReport(
        ["quantity", "truth", "SABER (anchored)", "plug-in θ̂ = c/n"], rows, [path], note,
        extra_tables=[(["Best-of-N regime (correct vs incorrect reward law)", "accuracy N = 1",
                        "peak accuracy", "at N", "accuracy N = 1e5"], bon_rows)])


SECTION = Section(name="risk", title="Repeated-sampling risk (SABER ASR@N, Best-of-N regimes)",
                  run=_run, order=78)
