"""Sampling to decide: dueling bandits, posterior-sampling RL, spherical linear BO.

Methods land here as modules, each re-exported below.
"""

from jaxsample.decision.baselines import run_ucbvi as run_ucbvi
from jaxsample.decision.bo import BOFitInfo as BOFitInfo
from jaxsample.decision.bo import BORunInfo as BORunInfo
from jaxsample.decision.bo import BOState as BOState
from jaxsample.decision.bo import SphericalLinearBO as SphericalLinearBO
from jaxsample.decision.bo import TrustRegion as TrustRegion
from jaxsample.decision.dueling import CondorcetIdentification as CondorcetIdentification
from jaxsample.decision.dueling import DuelInfo as DuelInfo
from jaxsample.decision.dueling import DuelState as DuelState
from jaxsample.decision.dueling import PreferenceMatrix as PreferenceMatrix
from jaxsample.decision.dueling import identify_condorcet as identify_condorcet
from jaxsample.decision.psrl import PSRLEnvInfo as PSRLEnvInfo
from jaxsample.decision.psrl import PSRLInfo as PSRLInfo
from jaxsample.decision.psrl import TabularMDP as TabularMDP
from jaxsample.decision.psrl import run_psrl as run_psrl
from jaxsample.decision.psrl import run_psrl_env as run_psrl_env

__all__: list[str] = [
    "BOFitInfo",
    "BORunInfo",
    "BOState",
    "CondorcetIdentification",
    "DuelInfo",
    "DuelState",
    "PSRLEnvInfo",
    "PSRLInfo",
    "PreferenceMatrix",
    "SphericalLinearBO",
    "TabularMDP",
    "TrustRegion",
    "identify_condorcet",
    "run_psrl",
    "run_psrl_env",
    "run_ucbvi",
]
