"""Softmax sampling over large item sets.

- :mod:`jaxsample.softmax.two_level` — two-level softmax sampling (2LS, S-2LS, SD-2LS):
  ``build_index`` then ``sample(key, index, queries, *, num_samples=...) -> (items, info)``.
- :mod:`jaxsample.softmax.baselines` — the exact softmax draw a user would otherwise pick.
"""

from jaxsample.softmax import two_level as two_level
from jaxsample.softmax.two_level import INITS as INITS
from jaxsample.softmax.two_level import VARIANTS as VARIANTS
from jaxsample.softmax.two_level import SoftmaxIndex as SoftmaxIndex
from jaxsample.softmax.two_level import SoftmaxIndexInfo as SoftmaxIndexInfo
from jaxsample.softmax.two_level import SoftmaxInfo as SoftmaxInfo
from jaxsample.softmax.two_level import build_index as build_index
from jaxsample.softmax.two_level import exact_log_probs as exact_log_probs
from jaxsample.softmax.two_level import index_from_clusters as index_from_clusters
from jaxsample.softmax.two_level import log_importance_weights as log_importance_weights
from jaxsample.softmax.two_level import log_partition as log_partition
from jaxsample.softmax.two_level import log_prob as log_prob
from jaxsample.softmax.two_level import proposal_log_probs as proposal_log_probs
from jaxsample.softmax.two_level import recommended_sizes as recommended_sizes
from jaxsample.softmax.two_level import sample as sample
from jaxsample.softmax.two_level import sampled_softmax_logits as sampled_softmax_logits

__all__ = [
    "INITS",
    "VARIANTS",
    "SoftmaxIndex",
    "SoftmaxIndexInfo",
    "SoftmaxInfo",
    "build_index",
    "index_from_clusters",
    "exact_log_probs",
    "log_importance_weights",
    "log_partition",
    "log_prob",
    "proposal_log_probs",
    "recommended_sizes",
    "sample",
    "sampled_softmax_logits",
    "two_level",
]
