"""Repeated-sampling risk: attack success at large N (SABER) and Best-of-N tail competition.

* :mod:`jaxsample.risk.saber` — beta-binomial fits of per-prompt attack success and closed-form
  ASR@N forecasts (population, conditional, anchored), Budget@τ, pass@k, bootstrap intervals;
  the fit itself (likelihood, L-BFGS, bootstrap resampling) in the private
  ``risk._betabinomial_fit``.
* :mod:`jaxsample.risk.best_of_n` — exact Best-of-N accuracy under reward laws (:class:`Normal`,
  :class:`Gumbel`, :class:`GPD`, :class:`Empirical`), Monte Carlo, pool accuracy, and the
  extreme-value tail regime / tail-tension diagnostics.
"""

from jaxsample.risk.best_of_n import GPD as GPD
from jaxsample.risk.best_of_n import BoNInfo as BoNInfo
from jaxsample.risk.best_of_n import BoNPoolInfo as BoNPoolInfo
from jaxsample.risk.best_of_n import BoNSimulationInfo as BoNSimulationInfo
from jaxsample.risk.best_of_n import Empirical as Empirical
from jaxsample.risk.best_of_n import Gumbel as Gumbel
from jaxsample.risk.best_of_n import Normal as Normal
from jaxsample.risk.best_of_n import RewardLaw as RewardLaw
from jaxsample.risk.best_of_n import TailRegimeInfo as TailRegimeInfo
from jaxsample.risk.best_of_n import TailTensionInfo as TailTensionInfo
from jaxsample.risk.best_of_n import bon_accuracy as bon_accuracy
from jaxsample.risk.best_of_n import bon_pool_accuracy as bon_pool_accuracy
from jaxsample.risk.best_of_n import bon_simulate as bon_simulate
from jaxsample.risk.best_of_n import tail_regime as tail_regime
from jaxsample.risk.best_of_n import tail_tension as tail_tension
from jaxsample.risk.saber import UNREACHABLE as UNREACHABLE
from jaxsample.risk.saber import ASRInterval as ASRInterval
from jaxsample.risk.saber import BetaBinomialFit as BetaBinomialFit
from jaxsample.risk.saber import SABERBudgetInfo as SABERBudgetInfo
from jaxsample.risk.saber import SABERFitInfo as SABERFitInfo
from jaxsample.risk.saber import SABERForecastInfo as SABERForecastInfo
from jaxsample.risk.saber import SABERIntervalInfo as SABERIntervalInfo
from jaxsample.risk.saber import SABERPromptInfo as SABERPromptInfo
from jaxsample.risk.saber import asr_anchored as asr_anchored
from jaxsample.risk.saber import asr_at_n as asr_at_n
from jaxsample.risk.saber import asr_conditional as asr_conditional
from jaxsample.risk.saber import bootstrap_asr as bootstrap_asr
from jaxsample.risk.saber import bootstrap_fits as bootstrap_fits
from jaxsample.risk.saber import budget_at as budget_at
from jaxsample.risk.saber import fit_beta_binomial as fit_beta_binomial
from jaxsample.risk.saber import unbiased_asr_at_k as unbiased_asr_at_k

__all__ = [
    "GPD",
    "UNREACHABLE",
    "ASRInterval",
    "BetaBinomialFit",
    "SABERBudgetInfo",
    "SABERFitInfo",
    "SABERForecastInfo",
    "SABERIntervalInfo",
    "SABERPromptInfo",
    "BoNInfo",
    "BoNPoolInfo",
    "Empirical",
    "Gumbel",
    "Normal",
    "RewardLaw",
    "BoNSimulationInfo",
    "TailRegimeInfo",
    "TailTensionInfo",
    "bon_accuracy",
    "bon_pool_accuracy",
    "bon_simulate",
    "tail_regime",
    "tail_tension",
    "asr_anchored",
    "asr_at_n",
    "asr_conditional",
    "bootstrap_asr",
    "bootstrap_fits",
    "budget_at",
    "fit_beta_binomial",
    "unbiased_asr_at_k",
]
