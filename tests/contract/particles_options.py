"""Contract entry for ETD's options (jaxsample.particles.options):
ETD run with the mutation's initial step size (a float of ``Mutation``) traced: a new value
of an option object's float does not recompile."""

import jaxsample
from contract import KEY, BadInput, Entry
from contract.particles_etd import _algorithm, _logdensity, _run
from jaxsample.particles import Mutation, Sinkhorn


def _build(dtype):
    return lambda key: _run(key, dtype, 0.1, mutation=Mutation(step_size=0.5))


def _hyper(dtype):
    return lambda key, h: _run(key, dtype, 0.1, mutation=Mutation(step_size=h))


ENTRIES = [Entry(
    name="particles.options",
    module="jaxsample.particles.options",
    build=_build,
    covers=("particles.etd",),
    hyper=_hyper,
    hyper_values=(0.5, 0.8),
    iterative=True,
    start=lambda dtype: _algorithm(KEY, dtype, 0.1, mutation=Mutation(step_size=0.5)),
    rtol=1e-3,
    bad_inputs=(
        BadInput(lambda: jaxsample.etd(_logdensity, mutation=Mutation(steps=-1)), ValueError,
                 "mutation steps"),
        BadInput(lambda: jaxsample.etd(_logdensity, mutation=Mutation(target_acceptance=1.5)),
                 ValueError, "target_acceptance"),
        BadInput(lambda: jaxsample.etd(_logdensity, sinkhorn=Sinkhorn(criterion="l2")),
                 ValueError, "criterion"),
        BadInput(lambda: jaxsample.etd(_logdensity, mutation=2), TypeError, "mutation"),
    ),
    note="the mutation's initial step size (a float of Mutation) is the traced hyper-parameter",
)]
