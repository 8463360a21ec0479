"""Contract entry: value-priority attribution (``jaxsample.choice.pluralism``)."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample import choice

# 12 binary dilemmas over 3 principles (a full-rank design) and a mixed set of decisions
_FEATURES = np.array([[[1, 0, -1], [0, 1, 0]], [[0, 1, 1], [1, -1, 0]], [[-1, 1, 0], [1, 0, 0]],
                      [[0, 0, 1], [1, 1, -1]], [[1, 1, 0], [0, 0, 1]], [[0, -1, 1], [-1, 0, 0]],
                      [[1, -1, 1], [0, 1, -1]], [[-1, 0, 1], [0, 1, 1]], [[0, 1, -1], [1, 0, 1]],
                      [[1, 0, 0], [-1, 1, 1]], [[0, 0, -1], [1, -1, 1]], [[-1, -1, 1], [1, 0, 0]]])
_CHOICES = np.array([0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0])


def _fit(dtype):
    features = jnp.asarray(_FEATURES, dtype)

    def fn(key):
        del key  # the Laplace fit is deterministic (tests/test_pluralism.py runs the bootstrap)
        return choice.fit_value_priorities(_CHOICES, features, l2=0.5)

    return fn


def _hyper(dtype):
    features = jnp.asarray(_FEATURES, dtype)

    def fn(key, l2):
        del key
        return choice.fit_value_priorities(_CHOICES, features, l2=l2)

    return fn


def _bootstrap(dtype):
    features = jnp.asarray(_FEATURES, dtype)
    return lambda key: choice.bootstrap_value_priorities(key, _CHOICES, features, l2=0.5,
                                                         num_resamples=4)


def _bootstrap_hyper(dtype):
    features = jnp.asarray(_FEATURES, dtype)
    return lambda key, l2: choice.bootstrap_value_priorities(key, _CHOICES, features, l2=l2,
                                                             num_resamples=4)


def _sample(dtype):
    features = jnp.asarray(_FEATURES, dtype)
    priorities = jnp.asarray([1.0, -0.5, 2.0], dtype)
    return lambda key: choice.sample_choices(key, priorities, features, num_samples=8)


def _sample_hyper(dtype):
    features = jnp.asarray(_FEATURES, dtype)
    priorities = jnp.asarray([1.0, -0.5, 2.0], dtype)
    return lambda key, beta: choice.sample_choices(key, beta * priorities, features,
                                                   num_samples=8)


ENTRIES = [
    Entry(
        name="choice.pluralism",
        module="jaxsample.choice.pluralism",
        build=_fit,
        hyper=_hyper,
        hyper_values=(0.5, 2.0),
        exact_ints=False,
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: choice.fit_value_priorities(_CHOICES + 1, _FEATURES * 1.0),
                     ValueError, "choices must lie in the option set"),
            BadInput(lambda: choice.fit_value_priorities(_CHOICES, _FEATURES[:, 0] * 1.0),
                     ValueError, "option_features"),
            BadInput(lambda: choice.fit_value_priorities(_CHOICES[:5], _FEATURES * 1.0),
                     ValueError, "choices must have shape"),
            BadInput(lambda: choice.fit_value_priorities(_CHOICES, _FEATURES * np.nan),
                     ValueError, "option_features must be finite"),
            BadInput(lambda: choice.fit_value_priorities(_CHOICES, _FEATURES * 1.0, l2=-1.0),
                     ValueError, "l2"),
            BadInput(lambda: choice.panel_percentile(np.ones(3), np.ones((4, 2))),
                     ValueError, "priorities must have shape"),
            BadInput(lambda: choice.bootstrap_value_priorities(3, _CHOICES, _FEATURES * 1.0),
                     TypeError, "key"),
        ),
        note="fit_value_priorities(choices, option_features, *, l2) -> (θ, PriorityInfo) with "
             "Laplace intervals, deterministic: the key is unused; the bootstrap "
             "(vmapped fits) runs in tests/test_pluralism.py. BFGS stops on a step tolerance, so "
             "jit and eager agree to the solver's accuracy (rtol 1e-3 in float32) and iteration "
             "counts may differ. The traced hyper-parameter is l2",
    ),
    Entry(
        name="choice.pluralism/bootstrap",
        module="jaxsample.choice.pluralism",
        build=_bootstrap,
        hyper=_bootstrap_hyper,
        hyper_values=(0.5, 2.0),
        exact_ints=False,
        rtol=1e-3,
        bad_inputs=(
            BadInput(lambda: choice.bootstrap_value_priorities(None, _CHOICES, _FEATURES * 1.0),
                     TypeError, "key"),
            BadInput(lambda: choice.bootstrap_value_priorities(KEY, _CHOICES, _FEATURES * 1.0,
                                                               num_resamples=1),
                     ValueError, "num_resamples"),
            BadInput(lambda: choice.bootstrap_value_priorities(KEY, _CHOICES, _FEATURES * 1.0,
                                                               progress="bar"),
                     TypeError, "progress"),
        ),
        note="4 bootstrap fits (one vmap of BFGS): keyed, with the legacy-key case; l2 traced",
    ),
    Entry(
        name="choice.pluralism/sample_choices",
        module="jaxsample.choice.pluralism",
        build=_sample,
        hyper=_sample_hyper,
        hyper_values=(0.5, 3.0),
        bad_inputs=(
            BadInput(lambda: choice.sample_choices(None, np.ones(3), _FEATURES * 1.0,
                                                   num_samples=2), TypeError, "key"),
            BadInput(lambda: choice.sample_choices(KEY, np.ones(3), _FEATURES * 1.0,
                                                   num_samples=0), ValueError, "num_samples"),
            BadInput(lambda: choice.sample_choices(KEY, np.ones(2), _FEATURES * 1.0,
                                                   num_samples=2), ValueError, "priorities"),
        ),
        note="sample_choices(key, priorities, option_features, *, num_samples) -> (choices, "
             "ChoiceLawInfo): 8 draws on each of the 12 dilemmas, keyed (with the legacy-key "
             "case); the decisiveness scale of the priorities is traced",
    ),
]
