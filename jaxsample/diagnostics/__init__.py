"""Diagnostics: sample-quality distances, particle and chain diagnostics; all jittable.

Every estimator returns ``(value, Info)`` (the library's deterministic-estimator shape), the Info
with a ``nonfinite`` flag: ``value, _ = energy_distance(x, y)``.

- :mod:`~jaxsample.diagnostics.distances` — :func:`energy_distance`, :func:`mmd`,
  :func:`sliced_wasserstein`, :func:`damv`;
- :mod:`~jaxsample.diagnostics.chains` — :func:`rhat`, :func:`ess` (checked against ArviZ);
- :mod:`~jaxsample.diagnostics.stein` — :func:`stein_check`, a cloud tested against its
  target's score by Stein's identities (no reference), the scale-mixture (funnel) test among
  them;
- :mod:`~jaxsample.diagnostics.mixing` — spectral gap, MFPT, Kramers rate, first-passage steps;
- :mod:`~jaxsample.diagnostics.criteria` — :class:`CollapseCriteria`, the thresholds of the
  collapse verdict that ETD, :func:`stein_check` and :func:`diagnose` share;
- :mod:`~jaxsample.diagnostics.diagnose` — :func:`diagnose`, a run's trace read back as named
  problems and remedies (eager, not jittable).
"""

from jaxsample.diagnostics import mixing as mixing
from jaxsample.diagnostics.chains import ESSInfo as ESSInfo
from jaxsample.diagnostics.chains import RhatInfo as RhatInfo
from jaxsample.diagnostics.chains import ess as ess
from jaxsample.diagnostics.chains import rhat as rhat
from jaxsample.diagnostics.criteria import CollapseCriteria as CollapseCriteria
from jaxsample.diagnostics.diagnose import Diagnosis as Diagnosis
from jaxsample.diagnostics.diagnose import DiagnosisInfo as DiagnosisInfo
from jaxsample.diagnostics.diagnose import diagnose as diagnose
from jaxsample.diagnostics.distances import DAMVInfo as DAMVInfo
from jaxsample.diagnostics.distances import EnergyDistanceInfo as EnergyDistanceInfo
from jaxsample.diagnostics.distances import MMDInfo as MMDInfo
from jaxsample.diagnostics.distances import SlicedWassersteinInfo as SlicedWassersteinInfo
from jaxsample.diagnostics.distances import damv as damv
from jaxsample.diagnostics.distances import energy_distance as energy_distance
from jaxsample.diagnostics.distances import mmd as mmd
from jaxsample.diagnostics.distances import sliced_wasserstein as sliced_wasserstein
from jaxsample.diagnostics.stein import SteinCheck as SteinCheck
from jaxsample.diagnostics.stein import SteinCheckInfo as SteinCheckInfo
from jaxsample.diagnostics.stein import stein_check as stein_check

__all__ = ["CollapseCriteria", "DAMVInfo", "Diagnosis", "DiagnosisInfo", "ESSInfo",
           "EnergyDistanceInfo", "MMDInfo", "RhatInfo", "SlicedWassersteinInfo", "SteinCheck",
           "SteinCheckInfo", "damv", "diagnose", "energy_distance", "ess", "mixing", "mmd", "rhat",
           "sliced_wasserstein", "stein_check"]
