"""Softmax sampling over large item sets.

- :mod:`jaxsample.softmax.two_level` — two-level softmax sampling (2LS, S-2LS, SD-2LS):
  ``build_index`` then ``sample(key, index, queries, *, num_samples=...) -> (items, info)``.
"""

from jaxsample.softmax import two_level as two_level
from jaxsample.softmax.two_level import *  # noqa: F403  (the family's one method, re-exported)
from jaxsample.softmax.two_level import __all__ as _method_names

__all__ = ["two_level", *_method_names]
