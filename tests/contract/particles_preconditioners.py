"""Contract entry for ETD's preconditioners (jaxsample.particles.preconditioners):
ETD run with the Fisher preconditioner's EMA weight (a float of ``Fisher``)
traced: a new value of an option object's float does not recompile."""

from contract import KEY, Entry
from contract.particles_etd import _algorithm, _run
from jaxsample.particles.preconditioners import Fisher


def _build(dtype):
    return lambda key: _run(key, dtype, 0.1, preconditioner=Fisher(ema=0.5))


def _hyper(dtype):
    return lambda key, h: _run(key, dtype, 0.1, preconditioner=Fisher(ema=h))


ENTRIES = [Entry(
    name="particles.preconditioners",
    module="jaxsample.particles.preconditioners",
    build=_build,
    covers=("particles.etd",),
    hyper=_hyper,
    hyper_values=(0.5, 0.8),
    iterative=True,
    start=lambda dtype: _algorithm(KEY, dtype, 0.1, preconditioner=Fisher(ema=0.5)),
    rtol=1e-3,
    note="the Fisher preconditioner's EMA weight is the traced hyper-parameter",
)]
