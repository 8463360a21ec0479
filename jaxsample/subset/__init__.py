"""Subset selection: diverse subsets, stable coverage, correlated k-subset sampling.

Methods land here as modules (``leverage``, ``coverage``), each re-exported below.
"""

__all__: list[str] = []
