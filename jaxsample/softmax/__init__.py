"""Softmax sampling over large item sets.

- :mod:`jaxsample.softmax.two_level` — two-level softmax sampling (2LS, S-2LS, SD-2LS):
  ``build_index`` / ``index_from_clusters`` then
  ``sample(key, index, queries, *, num_samples=...) -> (items, info)``; the index's methods score
  items (``index.log_prob``, ``index.proposal_log_probs``, ``index.exact_log_probs``, ...).
- :mod:`jaxsample.softmax.baselines` — the exact softmax draw a user would otherwise pick.
"""

from jaxsample.softmax import two_level as two_level
from jaxsample.softmax.two_level import INITS as INITS
from jaxsample.softmax.two_level import VARIANTS as VARIANTS
from jaxsample.softmax.two_level import SoftmaxIndex as SoftmaxIndex
from jaxsample.softmax.two_level import SoftmaxIndexInfo as SoftmaxIndexInfo
from jaxsample.softmax.two_level import SoftmaxInfo as SoftmaxInfo
from jaxsample.softmax.two_level import build_index as build_index
from jaxsample.softmax.two_level import index_from_clusters as index_from_clusters
from jaxsample.softmax.two_level import sample as sample

__all__ = [
    "INITS",
    "VARIANTS",
    "SoftmaxIndex",
    "SoftmaxIndexInfo",
    "SoftmaxInfo",
    "build_index",
    "index_from_clusters",
    "sample",
    "two_level",
]
