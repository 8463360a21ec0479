"""MCMC wrappers and base kernels: learned trajectory termination.

Methods land here as modules, each re-exported below.
"""

__all__: list[str] = []
