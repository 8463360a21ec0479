"""Discrete-choice samplers: value-priority attribution and alien-space tilted sampling.

Methods land here as modules, each re-exported below.
"""

__all__: list[str] = []
