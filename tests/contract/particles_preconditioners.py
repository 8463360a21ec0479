"""Contract entry for ETD's preconditioners (jaxsample.particles.preconditioners):
ETD run with the Fisher preconditioner's EMA weight (a float of ``Fisher``)
traced: a new value of an option object's float does not recompile."""

import jaxsample
from contract import KEY, BadInput, Entry
from contract.particles_etd import _algorithm, _logdensity, _run
from jaxsample.particles.preconditioners import Diagonal, Ensemble, Fisher


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
    bad_inputs=(
        BadInput(lambda: jaxsample.etd(_logdensity, preconditioner=Fisher(ema=1.0)), ValueError,
                 "ema"),
        BadInput(lambda: jaxsample.etd(_logdensity, preconditioner=Fisher()), ValueError,
                 "score"),
        BadInput(lambda: jaxsample.etd(_logdensity, preconditioner=Ensemble(shrinkage=2.0)),
                 ValueError, "shrinkage"),
        BadInput(lambda: jaxsample.etd(_logdensity, preconditioner=Diagonal(decay=-0.1)),
                 ValueError, "decay"),
    ),
    note="the Fisher preconditioner's EMA weight is the traced hyper-parameter",
)]
