"""Diagnostics: sample-quality distances, particle and chain diagnostics; all jittable.

- :mod:`~jaxsample.diagnostics.distances` — :func:`energy_distance`, :func:`mmd`,
  :func:`sliced_wasserstein`, :func:`damv`;
- :mod:`~jaxsample.diagnostics.chains` — :func:`rhat`, :func:`ess` (checked against ArviZ);
- :mod:`~jaxsample.diagnostics.mixing` — spectral gap, MFPT, Kramers rate, first-passage steps;
- :mod:`~jaxsample.diagnostics.diagnose` — :func:`diagnose`, a run's trace read back as named
  problems and remedies (eager, not jittable).
"""

from jaxsample.diagnostics import mixing as mixing
from jaxsample.diagnostics.chains import ess as ess
from jaxsample.diagnostics.chains import rhat as rhat
from jaxsample.diagnostics.diagnose import Diagnosis as Diagnosis
from jaxsample.diagnostics.diagnose import diagnose as diagnose
from jaxsample.diagnostics.distances import damv as damv
from jaxsample.diagnostics.distances import energy_distance as energy_distance
from jaxsample.diagnostics.distances import mmd as mmd
from jaxsample.diagnostics.distances import sliced_wasserstein as sliced_wasserstein

__all__ = ["Diagnosis", "damv", "diagnose", "energy_distance", "ess", "mixing", "mmd", "rhat",
           "sliced_wasserstein"]
