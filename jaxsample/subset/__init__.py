"""Subset selection: diverse subsets, stable coverage, correlated k-subset sampling.

Methods land here as modules (``leverage``, ``coverage``, ``ksubset``), each re-exported below.
"""

from jaxsample.subset import coverage as coverage
from jaxsample.subset import ksubset as ksubset
from jaxsample.subset import leverage as leverage
from jaxsample.subset.baselines import GreedyInfo as GreedyInfo
from jaxsample.subset.baselines import greedy_max_coverage as greedy_max_coverage
from jaxsample.subset.coverage import CoverageInfo as CoverageInfo
from jaxsample.subset.coverage import CoverageRelaxationInfo as CoverageRelaxationInfo
from jaxsample.subset.coverage import MaskCoverageInfo as MaskCoverageInfo
from jaxsample.subset.coverage import PaddedIncidence as PaddedIncidence
from jaxsample.subset.coverage import max_coverage_relaxation as max_coverage_relaxation
from jaxsample.subset.coverage import stable_max_coverage as stable_max_coverage
from jaxsample.subset.ksubset import InclusionProbabilitiesInfo as InclusionProbabilitiesInfo
from jaxsample.subset.ksubset import KSubsetInfo as KSubsetInfo
from jaxsample.subset.ksubset import conditional_poisson as conditional_poisson
from jaxsample.subset.ksubset import correlated_k_subset as correlated_k_subset
from jaxsample.subset.ksubset import fit_weights as fit_weights
from jaxsample.subset.ksubset import inclusion_probabilities as inclusion_probabilities
from jaxsample.subset.leverage import LeverageInfo as LeverageInfo
from jaxsample.subset.leverage import ShardedLeverageInfo as ShardedLeverageInfo
from jaxsample.subset.leverage import VendiInfo as VendiInfo
from jaxsample.subset.leverage import leverage_sample as leverage_sample
from jaxsample.subset.leverage import leverage_select as leverage_select
from jaxsample.subset.leverage import leverage_select_sharded as leverage_select_sharded
from jaxsample.subset.leverage import vendi_score as vendi_score

__all__: list[str] = []
__all__ += ["leverage", "LeverageInfo", "ShardedLeverageInfo", "VendiInfo", "leverage_sample",
            "leverage_select", "leverage_select_sharded", "vendi_score"]
__all__ += ["coverage", "CoverageInfo", "CoverageRelaxationInfo", "GreedyInfo",
            "MaskCoverageInfo", "PaddedIncidence", "greedy_max_coverage",
            "max_coverage_relaxation", "stable_max_coverage"]
__all__ += ["ksubset", "InclusionProbabilitiesInfo", "KSubsetInfo", "conditional_poisson",
            "correlated_k_subset", "fit_weights", "inclusion_probabilities"]
