"""Sampling to decide: dueling bandits, posterior-sampling RL, spherical linear BO.

Methods land here as modules, each re-exported below.
"""

from jaxsample.decision.bo import BOState as BOState
from jaxsample.decision.bo import RunInfo as RunInfo
from jaxsample.decision.bo import SphericalLinearBO as SphericalLinearBO
from jaxsample.decision.bo import TrustRegion as TrustRegion

__all__: list[str] = [
    "BOState",
    "RunInfo",
    "SphericalLinearBO",
    "TrustRegion",
]
