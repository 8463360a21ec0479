"""Guided VP diffusion sampling: TAG temporal alignment, classifier and DPS terms, NDTM control
guidance and invariance auditing by fiber sampling.

One entry point, :func:`sample` ``(key, eps_fn, schedule, x_T, *, num_steps, solver=...,
guidance=...) -> (x_0, info)``, over any user model ``eps_fn(x, t)`` (one sample x, scalar
time t ∈ (0, 1]) on a :class:`VPSchedule` that predicts ε, v, x₀ or a flow-matching velocity
(``prediction=``), at continuous or integer timesteps (``timesteps=``), with one module per
concept:

* :mod:`~jaxsample.diffusion.guidance.terms` — the score-space guidance terms
  (:class:`ClassifierGuidance`, :class:`TAG`, :class:`DPSGuidance`) and the fiber loss
  :class:`FiberCost`;
* :mod:`~jaxsample.diffusion.guidance.solvers` — the update rules :class:`DDIM` (η, small or
  large variance, x̂₀ clamping), :class:`DDPM` and :class:`NDTM` (variational control guidance,
  Pandey et al., ICML 2025, with the invariance-auditing options of Rousselot, Wendebourg &
  Köthe, arXiv:2603.21782);
* :mod:`~jaxsample.diffusion.guidance.sampler` — :func:`sample` over one engine (a ``lax.scan``
  over the steps, ``jax.vmap`` over the batch in blocks of ``chunk_size``);
* exact oracles for testing: :class:`NoisedMixture` (the closed-form VP marginals, score, ε,
  component classifier, Bayes time posterior and time-linked score of a
  :class:`jaxsample.targets.GaussianMixture`) and :class:`LinearFiberLaw` (the exact fiber law of
  a linear φ); :class:`TimePredictor` / :func:`train_time_predictor` learn a time classifier
  with optax and :func:`time_posterior_kl` measures it against the exact one;
  :class:`GridTimePredictor` shows a classifier trained on T times on the sampler's grid.

The samplers' time grid is :func:`jaxsample.kernels.guidance.time_grid`; a ring of Gaussians is
:func:`jaxsample.datasets.ring_of_gaussians`.
"""

from jaxsample.diffusion._priors import LinearFiberLaw as LinearFiberLaw
from jaxsample.diffusion._priors import NoisedMixture as NoisedMixture
from jaxsample.diffusion._priors import TimePosteriorKLInfo as TimePosteriorKLInfo
from jaxsample.diffusion._priors import TimePredictor as TimePredictor
from jaxsample.diffusion._priors import TimePredictorTrainInfo as TimePredictorTrainInfo
from jaxsample.diffusion._priors import time_posterior_kl as time_posterior_kl
from jaxsample.diffusion._priors import train_time_predictor as train_time_predictor
from jaxsample.diffusion._vp import VPSchedule as VPSchedule
from jaxsample.diffusion.guidance import sampler as sampler
from jaxsample.diffusion.guidance import solvers as solvers
from jaxsample.diffusion.guidance import terms as terms
from jaxsample.diffusion.guidance._engine import GuidanceInfo as GuidanceInfo
from jaxsample.diffusion.guidance._engine import NDTMInfo as NDTMInfo
from jaxsample.diffusion.guidance._models import PREDICTIONS as PREDICTIONS
from jaxsample.diffusion.guidance._models import GridTimePredictor as GridTimePredictor
from jaxsample.diffusion.guidance.sampler import sample as sample
from jaxsample.diffusion.guidance.solvers import DDIM as DDIM
from jaxsample.diffusion.guidance.solvers import DDPM as DDPM
from jaxsample.diffusion.guidance.solvers import NDTM as NDTM
from jaxsample.diffusion.guidance.terms import TAG as TAG
from jaxsample.diffusion.guidance.terms import ClassifierGuidance as ClassifierGuidance
from jaxsample.diffusion.guidance.terms import DPSGuidance as DPSGuidance
from jaxsample.diffusion.guidance.terms import FiberCost as FiberCost
from jaxsample.diffusion.guidance.terms import GuidanceStep as GuidanceStep
from jaxsample.diffusion.guidance.terms import GuidanceTerm as GuidanceTerm

__all__ = [
    "DDIM",
    "DDPM",
    "NDTM",
    "TAG",
    "ClassifierGuidance",
    "DPSGuidance",
    "FiberCost",
    "GridTimePredictor",
    "GuidanceInfo",
    "GuidanceStep",
    "GuidanceTerm",
    "LinearFiberLaw",
    "NDTMInfo",
    "NoisedMixture",
    "PREDICTIONS",
    "TimePosteriorKLInfo",
    "TimePredictor",
    "TimePredictorTrainInfo",
    "VPSchedule",
    "sample",
    "sampler",
    "solvers",
    "terms",
    "time_posterior_kl",
    "train_time_predictor",
]
