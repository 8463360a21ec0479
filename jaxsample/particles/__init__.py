"""Interacting-particle samplers: ETD and MM-SOLD, their baselines and MM-SOLD's tilt.

Methods (each module follows the sampler contract: ``init``, ``build_kernel``, a constructor):

* :mod:`jaxsample.particles.etd` — entropic transport descent (:func:`etd`), preconditioned by
  a fixed factor (:func:`laplace_preconditioner`, :class:`Precision`), the ensemble, the Fisher
  mean or RMSProp; :data:`ETD_HARD` is its setting for hard posteriors (d ≈ 100);
* :mod:`jaxsample.particles.mmsold` — moment-matched score-smoothed Langevin (:func:`mmsold`),
  started with :func:`sample_kde`; its moment targets are :meth:`MomentTargets.from_data`.

Baselines (:mod:`jaxsample.particles.baselines`): :func:`smoothed_langevin`, :func:`cfdm_sample`,
:func:`svgd` (BlackJAX, optional). MM-SOLD's large-particle limit: :func:`exact_tilt`,
:func:`plugin_tilt`.
"""

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
from jaxsample.particles.etd import LaplaceFit as LaplaceFit
from jaxsample.particles.etd import Precision as Precision
from jaxsample.particles.etd import etd as etd
from jaxsample.particles.etd import laplace_preconditioner as laplace_preconditioner
from jaxsample.particles.mmsold import KDESampleInfo as KDESampleInfo
from jaxsample.particles.mmsold import MMSOLDInfo as MMSOLDInfo
from jaxsample.particles.mmsold import MMSOLDState as MMSOLDState
from jaxsample.particles.mmsold import MomentTargets as MomentTargets
from jaxsample.particles.mmsold import mmsold as mmsold
from jaxsample.particles.mmsold import sample_kde as sample_kde

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
    "PluginTiltInfo",
    "Precision",
    "SVGDInfo",
    "Tilt",
    "cfdm_sample",
    "etd",
    "exact_tilt",
    "laplace_preconditioner",
    "mmsold",
    "plugin_tilt",
    "sample_kde",
    "smoothed_langevin",
    "svgd",
]
