"""jaxsample.kernels: pure numerical kernels (layer 1).

Arrays in, arrays out: no sampler state, no step loop, no I/O. Each module serves one family of
samplers in :mod:`jaxsample`; samplers share code only through these kernels.
"""
