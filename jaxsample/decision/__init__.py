"""Sampling to decide: dueling bandits, posterior-sampling RL, spherical linear BO.

Methods land here as modules, each re-exported below.
"""

__all__: list[str] = []
