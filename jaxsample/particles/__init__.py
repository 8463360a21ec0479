"""Interacting-particle samplers: ETD and MM-SOLD, their baselines and MM-SOLD's tilt.

Methods (each module follows the sampler contract: ``init``, ``build_kernel``, a constructor):

* :mod:`jaxsample.particles.etd` — entropic transport descent (:func:`etd`): the method's
  ``init``, ``build_kernel`` and constructor; its parts live beside it —
  :mod:`~jaxsample.particles.preconditioners` (identity, fixed, ensemble, Fisher, diagonal:
  small objects with ``init``/``update``), :mod:`~jaxsample.particles.laplace` (the Laplace fit
  :func:`laplace_preconditioner`, :class:`Precision`), :mod:`~jaxsample.particles.options`
  (:class:`Mutation`, :class:`ProposalAdaptation`, :class:`Sinkhorn`) and the collapse verdict's
  criteria (:class:`jaxsample.diagnostics.CollapseCriteria`); :data:`ETD_HARD` is a preset of
  these objects for hard posteriors (d ≈ 100);
* :mod:`jaxsample.particles.mmsold` — moment-matched score-smoothed Langevin (:func:`mmsold`),
  started with :func:`sample_kde`; its moment targets are :meth:`MomentTargets.from_data`.

Baselines (:mod:`jaxsample.particles.baselines`): :func:`smoothed_langevin`, :func:`cfdm_sample`,
:func:`svgd` (BlackJAX, optional). MM-SOLD's large-particle limit: :func:`exact_tilt`,
:func:`plugin_tilt`.
"""

from jaxsample.particles import preconditioners as preconditioners
from jaxsample.particles._tilt import ExactTiltInfo as ExactTiltInfo
from jaxsample.particles._tilt import PluginTiltInfo as PluginTiltInfo
from jaxsample.particles._tilt import Tilt as Tilt
from jaxsample.particles._tilt import exact_tilt as exact_tilt
from jaxsample.particles._tilt import plugin_tilt as plugin_tilt
from jaxsample.particles.baselines import CFDMInfo as CFDMInfo
from jaxsample.particles.baselines import SVGDInfo as SVGDInfo
from jaxsample.particles.baselines import cfdm_sample as cfdm_sample
from jaxsample.particles.baselines import smoothed_langevin as smoothed_langevin
from jaxsample.particles.baselines import svgd as svgd
from jaxsample.particles.etd import ETD_HARD as ETD_HARD
from jaxsample.particles.etd import ETDInfo as ETDInfo
from jaxsample.particles.etd import ETDState as ETDState
from jaxsample.particles.etd import etd as etd
from jaxsample.particles.laplace import LaplaceFit as LaplaceFit
from jaxsample.particles.laplace import Precision as Precision
from jaxsample.particles.laplace import laplace_preconditioner as laplace_preconditioner
from jaxsample.particles.mmsold import KDESampleInfo as KDESampleInfo
from jaxsample.particles.mmsold import MMSOLDInfo as MMSOLDInfo
from jaxsample.particles.mmsold import MMSOLDState as MMSOLDState
from jaxsample.particles.mmsold import MomentTargets as MomentTargets
from jaxsample.particles.mmsold import mmsold as mmsold
from jaxsample.particles.mmsold import sample_kde as sample_kde
from jaxsample.particles.options import Mutation as Mutation
from jaxsample.particles.options import ProposalAdaptation as ProposalAdaptation
from jaxsample.particles.options import Sinkhorn as Sinkhorn

__all__ = [
    "CFDMInfo",
    "ETDInfo",
    "ETD_HARD",
    "ETDState",
    "ExactTiltInfo",
    "KDESampleInfo",
    "LaplaceFit",
    "MMSOLDInfo",
    "MMSOLDState",
    "MomentTargets",
    "Mutation",
    "PluginTiltInfo",
    "Precision",
    "ProposalAdaptation",
    "SVGDInfo",
    "Sinkhorn",
    "Tilt",
    "cfdm_sample",
    "etd",
    "exact_tilt",
    "laplace_preconditioner",
    "mmsold",
    "plugin_tilt",
    "preconditioners",
    "sample_kde",
    "smoothed_langevin",
    "svgd",
]
