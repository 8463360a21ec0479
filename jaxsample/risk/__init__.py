"""Repeated-sampling risk: attack success at large N (SABER) and Best-of-N tail competition.

Methods land here as modules, each re-exported below.
"""

__all__: list[str] = []
