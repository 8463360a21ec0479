"""MCMC wrappers and base kernels: learned trajectory termination.

- :mod:`~jaxsample.mcmc.stopping` — :func:`adaptive_stop`, :func:`sample_until_stopped`,
  :func:`train_stopping`, :func:`sample_multilevel`;
- :mod:`~jaxsample.mcmc.stopping_tabular` — the exact finite-state theory:
  :func:`optimal_stop_tabular`, :func:`terminal_law`;
- :mod:`~jaxsample.mcmc.mala` — the base kernel :func:`mala`;
- :mod:`~jaxsample.mcmc.tempering` — the non-local contrast :func:`parallel_tempering`.
"""

from jaxsample.mcmc.mala import MALAInfo as MALAInfo
from jaxsample.mcmc.mala import MALAState as MALAState
from jaxsample.mcmc.mala import mala as mala
from jaxsample.mcmc.stopping import StopInfo as StopInfo
from jaxsample.mcmc.stopping import StoppingNet as StoppingNet
from jaxsample.mcmc.stopping import StoppingTrainInfo as StoppingTrainInfo
from jaxsample.mcmc.stopping import StopState as StopState
from jaxsample.mcmc.stopping import StopStepInfo as StopStepInfo
from jaxsample.mcmc.stopping import adaptive_stop as adaptive_stop
from jaxsample.mcmc.stopping import sample_multilevel as sample_multilevel
from jaxsample.mcmc.stopping import sample_until_stopped as sample_until_stopped
from jaxsample.mcmc.stopping import train_stopping as train_stopping
from jaxsample.mcmc.stopping_tabular import TabularStopInfo as TabularStopInfo
from jaxsample.mcmc.stopping_tabular import optimal_stop_tabular as optimal_stop_tabular
from jaxsample.mcmc.stopping_tabular import terminal_law as terminal_law
from jaxsample.mcmc.tempering import TemperingInfo as TemperingInfo
from jaxsample.mcmc.tempering import TemperingState as TemperingState
from jaxsample.mcmc.tempering import parallel_tempering as parallel_tempering

__all__ = [
    "MALAInfo",
    "MALAState",
    "StopInfo",
    "StopState",
    "StopStepInfo",
    "StoppingNet",
    "TabularStopInfo",
    "TemperingInfo",
    "TemperingState",
    "StoppingTrainInfo",
    "adaptive_stop",
    "mala",
    "optimal_stop_tabular",
    "parallel_tempering",
    "sample_multilevel",
    "sample_until_stopped",
    "terminal_law",
    "train_stopping",
]
