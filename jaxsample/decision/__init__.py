"""Sampling to decide: dueling bandits, posterior-sampling RL, spherical linear BO.

Methods land here as modules, each re-exported below.
"""

from jaxsample.decision.baselines import run_ucbvi as run_ucbvi
from jaxsample.decision.bo import BOFitInfo as BOFitInfo
from jaxsample.decision.bo import BORunInfo as BORunInfo
from jaxsample.decision.bo import BOState as BOState
from jaxsample.decision.bo import SphericalLinearBO as SphericalLinearBO
from jaxsample.decision.bo import TrustRegion as TrustRegion
from jaxsample.decision.dueling import DuelInfo as DuelInfo
from jaxsample.decision.dueling import PreferenceMatrix as PreferenceMatrix
from jaxsample.decision.dueling import confidence_radius as confidence_radius
from jaxsample.decision.dueling import identify_condorcet as identify_condorcet
from jaxsample.decision.psrl import PSRLInfo as PSRLInfo
from jaxsample.decision.psrl import TabularMDP as TabularMDP
from jaxsample.decision.psrl import backward_induction as backward_induction
from jaxsample.decision.psrl import evaluate_policy as evaluate_policy
from jaxsample.decision.psrl import run_psrl as run_psrl
from jaxsample.decision.psrl import sample_trajectory as sample_trajectory

__all__: list[str] = [
    "BOFitInfo",
    "BORunInfo",
    "BOState",
    "DuelInfo",
    "PSRLInfo",
    "PreferenceMatrix",
    "SphericalLinearBO",
    "TabularMDP",
    "TrustRegion",
    "backward_induction",
    "confidence_radius",
    "evaluate_policy",
    "identify_condorcet",
    "run_psrl",
    "run_ucbvi",
    "sample_trajectory",
]
