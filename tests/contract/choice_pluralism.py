"""Contract entries: value-priority attribution (``jaxsample.choice.pluralism``).

The Laplace fit, its bootstrap, the choice sampler, and the closed forms (choice law, decision
entropy, pluralism gap, panel percentile) together in one program.
"""

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
        # the Laplace fit is deterministic (tests/choice/test_pluralism.py runs the bootstrap)
        del key
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


# 4 samples of a model and 5 panel members deciding the 12 dilemmas
_MODEL = np.array([_CHOICES, _CHOICES, 1 - _CHOICES, _CHOICES])
_PANEL = np.array([_CHOICES, 1 - _CHOICES, _CHOICES, np.roll(_CHOICES, 1), np.roll(_CHOICES, 3)])
_PANEL_PRIORITIES = np.array([[1.0, 0.0, 0.5], [0.2, 1.0, -0.3], [-0.5, 0.4, 1.0],
                              [0.3, 0.3, 0.3], [1.5, -1.0, 0.0]])


def _closed_forms(dtype, scale):
    features = jnp.asarray(_FEATURES, dtype)
    priorities = scale * jnp.asarray([1.0, -0.5, 2.0], dtype)
    return (choice.choice_probabilities(priorities, features),
            choice.decision_entropy(_MODEL, dtype=dtype),
            choice.pluralism_gap(_MODEL, _PANEL, dtype=dtype),
            choice.panel_percentile(priorities, jnp.asarray(_PANEL_PRIORITIES, dtype)))


def _closed_forms_build(dtype):
    def fn(key):
        del key  # closed forms: deterministic
        return _closed_forms(dtype, jnp.asarray(1.0, dtype))

    return fn


def _closed_forms_hyper(dtype):
    def fn(key, scale):
        del key
        return _closed_forms(dtype, scale)

    return fn


ENTRIES = [
    Entry(
        name="choice.pluralism",
        module="jaxsample.choice.pluralism",
        build=_fit,
        covers=("choice.fit_value_priorities",),
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
             "(vmapped fits) runs in tests/choice/test_pluralism.py. BFGS stops on a step "
             "tolerance, so jit and eager agree to the solver's accuracy (rtol 1e-3 in float32) "
             "and iteration counts may differ. The traced hyper-parameter is l2",
    ),
    Entry(
        name="choice.pluralism/bootstrap",
        module="jaxsample.choice.pluralism",
        build=_bootstrap,
        covers=("choice.bootstrap_value_priorities",),
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
        covers=("choice.sample_choices",),
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
    Entry(
        name="choice.pluralism/closed_forms",
        module="jaxsample.choice.pluralism",
        build=_closed_forms_build,
        covers=("choice.choice_probabilities", "choice.decision_entropy", "choice.pluralism_gap",
                "choice.panel_percentile"),
        info=lambda outputs: tuple(info for _, info in outputs),
        hyper=_closed_forms_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            BadInput(lambda: choice.choice_probabilities(np.ones(2), _FEATURES * 1.0),
                     ValueError, "priorities"),
            BadInput(lambda: choice.decision_entropy(_MODEL + 2), ValueError, "choice_samples"),
            BadInput(lambda: choice.pluralism_gap(_MODEL, _PANEL[:, :5]), ValueError,
                     "panel_choices"),
            BadInput(lambda: choice.panel_percentile(np.ones(3), np.ones(3)), ValueError,
                     "panel_priorities"),
        ),
        note="choice_probabilities, decision_entropy, pluralism_gap and panel_percentile on the "
             "12 dilemmas (4 model samples, a panel of 5): one program, a tuple of (value, "
             "Info); the decisiveness scale of the priorities is traced",
    ),
]
