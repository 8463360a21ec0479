"""Contract entry: vMF spherical flows (``jaxsample.diffusion.vmf``), PC sampler, exact oracle."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample.diffusion import vmf


def _setup(dtype):
    emb = jnp.eye(4, dtype=dtype)
    path = vmf.VMFPath(4, 30.0)
    return emb, path, vmf.Sudoku4Oracle(emb, path)


def _sample(dtype):
    emb, path, oracle = _setup(dtype)
    return lambda key: vmf.sample(key, oracle, emb, path, seq_len=16, num_samples=3,
                                  num_steps=3, sampler="pc")


def _hyper(dtype):
    emb, path, oracle = _setup(dtype)
    return lambda key, h: vmf.sample(key, oracle, emb, path, seq_len=16, num_samples=3,
                                     num_steps=3, sampler="pc", corrector_step_size=h)


def _call(embeddings=None, path=None, model=None, **kwargs):
    emb, default_path, oracle = _setup(jnp.float32)
    settings = dict(seq_len=16, num_samples=2, num_steps=2)
    settings.update(kwargs)
    vmf.sample(KEY, model or oracle, emb if embeddings is None else embeddings,
               path or default_path, **settings)


def _wrong_shape_posterior(x, t):
    return jnp.full((x.shape[0], 3), 1 / 3, x.dtype)


def _log_probabilities(x, t):
    return jnp.log(_setup(x.dtype)[2](x, t))


class _Logits(eqx.Module):
    """A small chain's exact posterior as a network returns it: unnormalised logits."""

    oracle: vmf.MarkovChainOracle

    def __call__(self, x, t):
        return jnp.log(self.oracle(x, t)) + 2.0


_CLAMP = (np.array([False, True, False, False]), np.array([0, 2, 0, 0]))


def _chain_logits(dtype):
    emb = jnp.eye(3, dtype=dtype)
    path = vmf.VMFPath(3, 20.0)
    oracle = vmf.MarkovChainOracle(np.full(3, 1 / 3), np.full((3, 3), 1 / 3) * 0.4
                                   + np.eye(3) * 0.6, emb, path)
    return lambda key: vmf.sample(key, _Logits(oracle.clamped(_CLAMP[0])), emb, path, seq_len=4,
                                  num_samples=3, num_steps=3, posterior="logits", clamp=_CLAMP)


def _chain_logits_hyper(dtype):
    emb = jnp.eye(3, dtype=dtype)

    def run(key, kappa_max):
        path = vmf.VMFPath(3, kappa_max)
        oracle = vmf.MarkovChainOracle(np.full(3, 1 / 3), np.full((3, 3), 1 / 3) * 0.4
                                       + np.eye(3) * 0.6, emb, path)
        return vmf.sample(key, _Logits(oracle.clamped(_CLAMP[0])), emb, path, seq_len=4,
                          num_samples=3, num_steps=3, posterior="logits", clamp=_CLAMP)
    return run


ENTRIES = [
    Entry(
        name="diffusion.vmf",
        module="jaxsample.diffusion.vmf",
        build=_sample,
        covers=("diffusion.vmf.sample",),
        hyper=_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            # non-unit embeddings are refused, not normalised
            BadInput(lambda: _call(embeddings=2 * np.eye(4, dtype=np.float32)), ValueError,
                     "embeddings must be unit"),
            BadInput(lambda: _call(embeddings=np.eye(3, 4, dtype=np.float32)[:, :3]),
                     ValueError, "embeddings"),
            BadInput(lambda: vmf.VMFPath(1, 10.0), ValueError, "dim"),
            BadInput(lambda: vmf.VMFPath(4, 0.0), ValueError, "kappa_max"),
            BadInput(lambda: vmf.VMFPath(4, 10.0, schedule="cubic"), ValueError, "schedule"),
            BadInput(lambda: vmf.VMFPath(4, corrector="snr"), ValueError, "corrector"),
            BadInput(lambda: vmf.GeodesicPath(4, t_end=1.0), ValueError, "t_end"),
            BadInput(lambda: _call(num_steps=0), ValueError, "num_steps"),
            BadInput(lambda: _call(sampler="sde"), ValueError, "sampler"),
            BadInput(lambda: _call(path=vmf.GeodesicPath(4), model=vmf.Sudoku4Oracle(
                np.eye(4, dtype=np.float32), vmf.GeodesicPath(4)), sampler="pc"),
                ValueError, "sampler='pc'"),
            BadInput(lambda: _call(model=_wrong_shape_posterior), ValueError, "posterior_fn"),
            BadInput(lambda: _call(model=3), TypeError, "posterior_fn"),
            BadInput(lambda: _call(path="vmf"), TypeError, "path"),
            BadInput(lambda: _call(corrector_step_size=-1.0), ValueError,
                     "corrector_step_size"),
            BadInput(lambda: vmf.Sudoku4Oracle(np.eye(3, dtype=np.float32), vmf.VMFPath(3, 5.0)),
                     ValueError, "embeddings"),
            BadInput(lambda: _call(posterior="log_probabilities"), ValueError, "posterior"),
            BadInput(lambda: _call(posterior=1), TypeError, "posterior"),
            # log-probabilities read as probabilities: refused at the first call, with the fix
            BadInput(lambda: _call(model=_log_probabilities), ValueError,
                     "posterior_fn.*posterior='logits'"),
            BadInput(lambda: _call(model=lambda x, t: jnp.full((16, 4), jnp.nan)),
                     ValueError, "posterior_fn"),
            BadInput(lambda: _call(clamp=(np.ones(15, bool), np.zeros(16, np.int32))),
                     ValueError, "clamp"),
            BadInput(lambda: _call(clamp=(np.ones(16, bool), np.full(16, 4))), ValueError,
                     "clamp"),
            BadInput(lambda: _call(clamp=(np.ones(16), np.zeros(16, np.int32))), TypeError,
                     "clamp"),
        ),
        note="hyper is the relative corrector step size c (ε = c/(κ(t) + d − 1), the default "
             "'variance' rule; the paper's 'vanishing' rule is tests/diffusion/test_vmf.py's); "
             "kappa_max and the embeddings are traced leaves too. Non-finite posteriors are "
             "flagged in info.nonfinite (tests/diffusion/test_vmf.py).",
    ),
    Entry(
        name="diffusion.vmf/logits-clamp",
        module="jaxsample.diffusion.vmf",
        build=_chain_logits,
        covers=("diffusion.vmf.sample",),
        hyper=_chain_logits_hyper,
        hyper_values=(10.0, 20.0),
        bad_inputs=(BadInput(lambda: _call(clamp=(np.ones(16, bool),)), TypeError, "clamp"),
                    BadInput(lambda: _call(posterior="log_probabilities"), ValueError,
                             "posterior")),
        note="posterior='logits': a model returning unnormalised logits (an equinox module), "
             "with clamp=(mask, tokens) and the oracle that reads the clamp as clean, "
             "the ODE sampler on a 3-token chain; hyper is kappa_max, a traced leaf of the path "
             "and of the oracle. Log-probabilities read as probabilities are refused eagerly "
             "and flagged in info.invalid_posterior under jit (tests/diffusion/test_vmf.py).",
    ),
]
